package main

import (
	"bytes"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/server"
)

func flagSet(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestParseCPUFlags(t *testing.T) {
	text := "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\nbugs\t\t: x\n" +
		"processor\t: 1\nflags\t\t: fpu\n"
	got := parseCPUFlags(strings.NewReader(text))
	if !got["avx512_bf16"] || !got["avx2"] || got["amx_bf16"] || len(got) != 5 {
		t.Fatalf("flags %v", got)
	}
	if got := parseCPUFlags(strings.NewReader("Features\t: fp asimd\n")); got != nil {
		t.Fatalf("no flags line: %v", got)
	}
}

func TestSlowDTypeWarning(t *testing.T) {
	plain := flagSet("avx2", "avx512f")
	for _, c := range []struct {
		device, dtype string
		flags         map[string]bool
		want          string // "" no warning, else a substring
	}{
		{"cpu", "f32", plain, ""},
		{"cpu", "bf16", plain, "4-6x slower than f32"},
		{"cpu", "bf16", flagSet("avx512_bf16"), "about 2x slower than f32"},
		{"cpu", "bf16", flagSet("avx512_bf16", "amx_bf16"), ""},
		{"cpu", "f16", plain, "about 2x slower than f32"},
		{"cpu", "f16", flagSet("avx512_fp16"), "about 2x slower than f32"},
		{"cpu", "f16", flagSet("amx_fp16"), ""},
		{"cuda", "bf16", plain, ""},
		{"cuda:1", "f16", plain, ""},
		{"cpu", "bf16", nil, ""}, // flags unknown: say nothing rather than guess
	} {
		got := slowDTypeWarning(c.device, c.dtype, c.flags)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s %s %v: %q, want %q", c.device, c.dtype, c.flags, got, c.want)
		}
	}
}

// The server logs one warning at start for bf16 on a CPU without native bf16, and none for f32.
func TestSlowDTypeLoggedAtStart(t *testing.T) {
	saved := hostCPUFlags
	defer func() { hostCPUFlags = saved }()
	hostCPUFlags = func() map[string]bool { return flagSet("avx2", "avx512f") }
	for _, dtype := range []string{"bf16", "f32"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
		stop := make(chan os.Signal, 1)
		ready := make(chan string, 1)
		done := make(chan error, 1)
		go func() {
			done <- run(log, options{models: "default=defaultmodel", device: "cpu", dtype: dtype, mode: "fused",
				listener: ln, stop: stop, ready: func(a string) { ready <- a },
				cfg: server.Config{MaxBatch: 64, QueueSize: 256, Timeout: 30 * time.Second}})
		}()
		select {
		case <-ready:
		case err := <-done:
			t.Fatalf("%s: run ended before it was ready: %v", dtype, err)
		}
		stop <- syscall.SIGTERM
		if err := <-done; err != nil {
			t.Fatalf("%s: run: %v", dtype, err)
		}
		out := buf.String()
		n := strings.Count(out, "dtype slower than f32")
		if want := map[string]int{"bf16": 1, "f32": 0}[dtype]; n != want {
			t.Errorf("%s: %d warnings, want %d:\n%s", dtype, n, want, out)
		}
		if dtype == "bf16" && !strings.Contains(out, "avx512_bf16") {
			t.Errorf("the warning does not name the reason:\n%s", out)
		}
	}
}

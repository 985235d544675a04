package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/server"
)

// -version prints the binary's and the library's versions on stdout and exits 0, whatever else is given.
func TestVersionFlag(t *testing.T) {
	for _, args := range [][]string{{"-version"}, {"-version=true", "-device", "cuda:9"}, {"-log-level", "debug", "-version"}} {
		var stdout, stderr bytes.Buffer
		code := cli(args, lookupIn(), &stdout, &stderr)
		out := stdout.String()
		lib := server.Library()
		if code != 0 || stderr.Len() != 0 || !strings.HasPrefix(out, "cutenative-server "+server.BinaryVersion()+" (go") ||
			!strings.Contains(out, "\nlibcutenative "+cutenative.Version()+" (torch ") || !strings.Contains(out, "compiled by ") ||
			lib.Info == "" {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, code, out, stderr.String())
		}
	}
	server.Version = "v9.9.9"
	defer func() { server.Version = "" }()
	var stdout bytes.Buffer
	if cli([]string{"-version"}, lookupIn(), &stdout, &stdout); !strings.HasPrefix(stdout.String(), "cutenative-server v9.9.9 (") {
		t.Fatalf("-ldflags version: %q", stdout.String())
	}
}

// Wrong values, positional arguments and unusable devices stop the command (exit 2) before anything loads,
// with a message naming them.
func TestCLIRefusesAtStart(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"/models/chronos"}, nil, `unexpected argument ["/models/chronos"] (every option is a flag); models are given with -models name=dir`},
		{[]string{"-device", "cpu", "a", "b"}, nil, `unexpected arguments ["a" "b"]`},
		{[]string{"-device", "gpu"}, nil, `invalid value "gpu" for -device: want cpu, cuda or cuda:N`},
		{[]string{"-dtype", "fp16"}, nil, `invalid value "fp16" for -dtype: want one of ["f32" "bf16" "f16"]`},
		{[]string{"-mode", "turbo"}, nil, `invalid value "turbo" for -mode`},
		{nil, []string{"CUTENATIVE_DEVICE", "gpu"}, `invalid value "gpu" for CUTENATIVE_DEVICE`},
		{nil, []string{"CUTENATIVE_DTYPE", "fp16"}, `invalid value "fp16" for CUTENATIVE_DTYPE`},
		{[]string{"-log-level", "verbose"}, nil, `invalid value "verbose" for -log-level: want one of ["debug" "info" "warn" "error"]`},
		{nil, []string{"CUTENATIVE_LOG_FORMAT", "xml"}, `invalid value "xml" for CUTENATIVE_LOG_FORMAT: want one of ["text" "json"]`},
		{[]string{"-version=maybe"}, nil, `invalid value "maybe" for -version: want true or false`},
		{[]string{"-device", "cuda:64"}, nil, "-device cuda:64: the library sees"},
	}
	for _, tc := range tests {
		var stdout, stderr bytes.Buffer
		code := cli(tc.args, lookupIn(tc.env...), &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), tc.want) || strings.Contains(stderr.String(), "listening") {
			t.Errorf("%q %q: exit %d, stderr %q; want 2, %q", tc.args, tc.env, code, stderr.String(), tc.want)
		}
	}
}

func TestCheckDeviceAvailable(t *testing.T) {
	for _, tc := range []struct {
		device string
		count  int
		ok     bool
	}{{"cpu", 0, true}, {"cuda", 0, false}, {"cuda", 1, true}, {"cuda:0", 1, true}, {"cuda:1", 1, false}, {"cuda:3", 4, true}} {
		if err := checkDeviceAvailable(tc.device, tc.count); (err == nil) != tc.ok {
			t.Errorf("%s with %d devices: %v", tc.device, tc.count, err)
		}
	}
}

// A port already taken fails the command (exit 1) before any "listening" or "ready" line.
func TestTakenPortFailsBeforeReady(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	defer slog.SetDefault(slog.Default())
	var stdout, stderr bytes.Buffer
	code := cli([]string{"-listen", ln.Addr().String(), "-models", "default=defaultmodel", "-log-format", "json"},
		lookupIn(), &stdout, &stderr)
	log := stderr.String()
	if code != 1 || !strings.Contains(log, "address already in use") || strings.Contains(log, `"msg":"listening"`) ||
		strings.Contains(log, `"msg":"ready"`) {
		t.Fatalf("exit %d, log:\n%s", code, log)
	}
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") { // -log-format json: every line is an object
		if !json.Valid([]byte(l)) {
			t.Fatalf("not JSON: %q", l)
		}
	}
}

// The start line names each part (no Go map, the library's version apart from its compiler) and comes after
// the bind, before "ready"; requests then log one line each.
func TestStartLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf}, nil))
	stop := make(chan os.Signal, 1)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(log, options{models: "b=defaultmodel,a=defaultmodel", device: "cpu", dtype: "f32", mode: "eager",
			listener: ln, stop: stop, ready: func(a string) { ready <- a }, cfg: server.Config{Timeout: 30 * time.Second}})
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	stop <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var msgs []string
	var start map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		msgs = append(msgs, m["msg"].(string))
		if m["msg"] == "listening" {
			start = m
		}
	}
	if start == nil || start["models"] != "a=defaultmodel,b=defaultmodel" || start["library_version"] != cutenative.Version() ||
		!strings.Contains(start["library_build"].(string), "compiled by ") || start["version"] != server.BinaryVersion() ||
		start["addr"] != ln.Addr().String() {
		t.Fatalf("start line %v", start)
	}
	if i, j := index(msgs, "listening"), index(msgs, "ready"); i < 0 || j < i {
		t.Fatalf("messages %q", msgs)
	}
}

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

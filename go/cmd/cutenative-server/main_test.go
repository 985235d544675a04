package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/server"
)

func TestLoRAFlags(t *testing.T) {
	tests := []struct {
		o    loraOptions
		want string
	}{
		{loraOptions{}, ""},
		{loraOptions{catalog: "c.json", embedModel: "dir", poll: time.Second}, ""},
		{loraOptions{catalog: "c.json"}, "-lora-catalog needs -embed-model"},
		{loraOptions{embedModel: "dir"}, ""}, // /v1/embeddings alone
		{loraOptions{catalog: "c.json", embedModel: "dir", poll: -1}, "-lora-poll"},
	}
	for _, tc := range tests {
		err := tc.o.check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	// run refuses before loading anything.
	if err := run(slog.Default(), options{listen: "127.0.0.1:0", lora: loraOptions{catalog: "c.json"}}); err == nil ||
		!strings.Contains(err.Error(), "-embed-model") {
		t.Fatalf("run: %v", err)
	}
}

// countingEmbedder gives every text the same direction plus a marker of its length.
type countingEmbedder struct{}

func (countingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{1, float32(len(t) % 7), 0.5}
	}
	return out, nil
}

// SIGHUP and file edits reload the catalog of a running server.
func TestLoRAReloadOnSIGHUPAndEdit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.json")
	write := func(names ...string) {
		var entries []string
		for _, n := range names {
			entries = append(entries, `{"name": "`+n+`", "path": "p", "scale": 1, "positive": "text of `+n+`"}`)
		}
		if err := os.WriteFile(path, []byte(`{"loras": [`+strings.Join(entries, ",")+`]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	srv, err := server.New(server.Config{Models: map[string]string{"default": "defaultmodel"}, LoRACatalog: path,
		Embedder: countingEmbedder{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Load(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveLoRAReloads(ctx, slog.Default(), srv, time.Hour) // the watcher would wait an hour: SIGHUP first
	waitEntries := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for srv.LoRAs().Stats().Entries != n {
			if time.Now().After(deadline) {
				t.Fatalf("catalog has %d entries, want %d", srv.LoRAs().Stats().Entries, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	write("a", "b")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitEntries(2)
	cancel()
	// A watcher polling quickly picks up an edit without a signal.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	serveLoRAReloads(ctx2, slog.Default(), srv, 5*time.Millisecond)
	write("a", "b", "c")
	next := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(path, next, next); err != nil {
		t.Fatal(err)
	}
	waitEntries(3)
}

// SIGTERM while 100 requests are written (each on its own connection, most still in the kernel's accept
// queue) loses none: the drain takes every accepted connection and answers it. 20 rounds.
func TestDrainAnswersEveryWrittenRequest(t *testing.T) {
	body := `{"horizon": 3, "series": [{"values": [112, 118, 132, 129, 121, 135, 148, 148]}]}`
	raw := "POST /v1/forecast HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nConnection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	const n, rounds = 100, 20
	for round := 0; round < rounds; round++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan os.Signal, 1)
		ready := make(chan string, 1)
		done := make(chan error, 1)
		quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
		go func() {
			done <- run(quiet, options{models: "default=defaultmodel", device: "cpu", dtype: "f32", mode: "eager",
				listener: ln, stop: stop, ready: func(a string) { ready <- a },
				cfg: server.Config{MaxBatch: 64, QueueSize: 256, Timeout: 30 * time.Second}})
		}()
		var addr string
		select {
		case addr = <-ready:
		case err := <-done:
			t.Fatalf("round %d: run ended before it was ready: %v", round, err)
		}
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("round %d: dial %d: %v", round, i, err)
			}
			if _, err := io.WriteString(c, raw); err != nil {
				t.Fatalf("round %d: write %d: %v", round, i, err)
			}
			conns[i] = c
		}
		stop <- syscall.SIGTERM
		var wg sync.WaitGroup
		var failed atomic.Int64
		for i, c := range conns {
			wg.Add(1)
			go func(i int, c net.Conn) {
				defer wg.Done()
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					failed.Add(1)
					t.Errorf("round %d: request %d: %v", round, i, err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(b), `"forecasts"`) {
					failed.Add(1)
					t.Errorf("round %d: request %d: %d %s", round, i, resp.StatusCode, b)
				}
			}(i, c)
		}
		wg.Wait()
		if err := <-done; err != nil {
			t.Fatalf("round %d: run: %v", round, err)
		}
		if failed.Load() > 0 {
			t.Fatalf("round %d: %d of %d written requests got no answer", round, failed.Load(), n)
		}
	}
}

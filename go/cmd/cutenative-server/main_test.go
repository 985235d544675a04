package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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
		{loraOptions{embedModel: "dir"}, "only used with -lora-catalog"},
		{loraOptions{catalog: "c.json", embedModel: "dir", poll: -1}, "-lora-poll"},
	}
	for _, tc := range tests {
		err := tc.o.check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	// run refuses before loading anything.
	if err := run(slog.Default(), "127.0.0.1:0", "", "", "cpu", "f32", "eager", 0, "", 1<<20, 1, 0, 1, time.Second, 1,
		loraOptions{catalog: "c.json"}); err == nil || !strings.Contains(err.Error(), "-embed-model") {
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

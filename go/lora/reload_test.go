package lora

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// catalogJSON writes a catalog whose entries are named prefix0, prefix1, ...
func catalogJSON(prefix string, n int, threshold float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"negative_weight": 0.5, "threshold": %v, "loras": [`, threshold)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"name": "%s%d", "path": "p", "scale": 1, "positive": "castle dragon %s %d", "negative": "robot"}`,
			prefix, i, prefix, i)
	}
	b.WriteString("]}")
	return b.String()
}

// writeFile replaces path's content and moves its modification time forward (coarse-mtime filesystems).
func writeFile(t *testing.T, path, content string) {
	t.Helper()
	var mtime time.Time
	if fi, err := os.Stat(path); err == nil {
		mtime = fi.ModTime()
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if !mtime.IsZero() { // before the rename: a watcher never sees this content under two stamps
		next := mtime.Add(time.Second)
		if err := os.Chtimes(tmp, next, next); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// touch moves path's modification time forward without changing its bytes; it returns the new stamp.
func touch(t *testing.T, path string) fileStamp {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	next := fi.ModTime().Add(time.Second)
	if err := os.Chtimes(path, next, next); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return stampOf(fi)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newTestRegistry(t *testing.T, content string, emb Embedder) (*Registry, string, *syncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.json")
	writeFile(t, path, content)
	logs := &syncBuffer{}
	g, err := NewRegistry(context.Background(), path, emb, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return g, path, logs
}

func TestRegistryFirstLoadMustSucceed(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewRegistry(context.Background(), filepath.Join(dir, "missing.json"), &hashEmbedder{dim: 16}, nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	writeFile(t, bad, `{"loras": []}`)
	if _, err := NewRegistry(context.Background(), bad, &hashEmbedder{dim: 16}, nil); !errors.Is(err, ErrInvalidCatalog) {
		t.Fatalf("invalid file: %v", err)
	}
	if _, err := NewRegistry(context.Background(), bad, nil, nil); err == nil {
		t.Fatal("nil embedder accepted")
	}
}

func TestReloadSwapsOnlyOnSuccess(t *testing.T) {
	ctx := context.Background()
	g, path, logs := newTestRegistry(t, catalogJSON("a", 2, 0.1), &hashEmbedder{dim: 64})
	first := g.Router()
	if st := g.Stats(); st.Entries != 2 || st.Reloads != 1 || st.Failures != 0 || st.LoadedAt.IsZero() {
		t.Fatalf("stats %+v", st)
	}
	for _, bad := range []string{`{"loras": [`, `{"loras": []}`, catalogJSON("a", 2, 0.1) + "x",
		`{"loras": [{"name": "a", "path": "p", "scale": 1, "positive": "x", "extra": 1}]}`} {
		writeFile(t, path, bad)
		if err := g.Reload(ctx); !errors.Is(err, ErrInvalidCatalog) {
			t.Fatalf("reload of %q: %v", bad, err)
		}
		if g.Router() != first {
			t.Fatal("a failed reload replaced the router")
		}
		if _, err := g.Search(ctx, "castle dragon", 2); err != nil {
			t.Fatalf("search after a failed reload: %v", err)
		}
	}
	st := g.Stats()
	if st.Failures != 4 || st.Reloads != 1 || !strings.Contains(st.LastError, "invalid catalog") {
		t.Fatalf("stats %+v", st)
	}
	if !strings.Contains(logs.String(), "reload failed, keeping the previous catalog") {
		t.Fatalf("log: %s", logs)
	}
	// A failing embedder also keeps the old catalog.
	writeFile(t, path, catalogJSON("b", 3, 0.1))
	g.emb = funcEmbedder(func(context.Context, []string) ([][]float32, error) { return nil, errFake })
	if err := g.Reload(ctx); !errors.Is(err, errFake) || g.Router() != first {
		t.Fatalf("embedder failure: %v", err)
	}
	g.emb = &hashEmbedder{dim: 64}
	if err := g.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := g.Search(ctx, "castle dragon b 1", 1)
	if err != nil || res.Candidates[0].Name != "b1" || g.Stats().Entries != 3 || g.Stats().LastError != "" {
		t.Fatalf("after a good reload: %+v %v %+v", res, err, g.Stats())
	}
}

// Searches running in goroutines never fail and always see one whole catalog while reloads swap
// catalogs underneath them (run with -race).
func TestReloadKeepsServingConcurrentSearches(t *testing.T) {
	ctx := context.Background()
	emb := &hashEmbedder{dim: 64, delay: 200 * time.Microsecond}
	g, path, _ := newTestRegistry(t, catalogJSON("a", 3, -10), emb)
	var stop atomic.Bool
	var searches atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				res, err := g.Search(ctx, "castle dragon 1", 10)
				if err != nil {
					errs <- err
					return
				}
				prefix := res.Candidates[0].Name[:1]
				want := map[string]int{"a": 3, "b": 5}[prefix]
				if len(res.Candidates) != want || res.Selected == nil {
					errs <- fmt.Errorf("mixed or partial result: %+v", res)
					return
				}
				for _, c := range res.Candidates {
					if c.Name[:1] != prefix {
						errs <- fmt.Errorf("candidates from two catalogs: %+v", res.Candidates)
						return
					}
				}
				searches.Add(1)
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if i%2 == 0 {
			writeFile(t, path, catalogJSON("b", 5, -10))
		} else {
			writeFile(t, path, catalogJSON("a", 3, -10))
		}
		if err := g.Reload(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 10 { // a broken file in the middle changes nothing for the searches
			writeFile(t, path, "{")
			if err := g.Reload(ctx); err == nil {
				t.Fatal("broken file loaded")
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if searches.Load() == 0 {
		t.Fatal("no search ran")
	}
}

func TestWatchReloadsChangedFile(t *testing.T) {
	g, path, logs := newTestRegistry(t, catalogJSON("a", 2, 0.1), &hashEmbedder{dim: 64})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { g.Watch(ctx, 5*time.Millisecond); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; stats %+v; log:\n%s", what, g.Stats(), logs)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	writeFile(t, path, catalogJSON("b", 4, 0.1))
	waitFor("the new catalog", func() bool { return g.Stats().Entries == 4 })
	// A broken edit is reported once and the catalog stays; fixing the file loads it.
	writeFile(t, path, `{"loras": [`)
	waitFor("the failure", func() bool { return g.Stats().Failures == 1 })
	time.Sleep(50 * time.Millisecond) // more polls: the same broken file is not retried
	if st := g.Stats(); st.Failures != 1 || st.Entries != 4 {
		t.Fatalf("stats %+v", st)
	}
	// The watcher has read the file under this stamp (a load holds mu from its stat to its end).
	sawStamp := func(st fileStamp) func() bool {
		return func() bool { g.mu.Lock(); defer g.mu.Unlock(); return g.seen == st }
	}
	// A touch (new stamp, same bytes) is read once and counts nothing: not a second failure here...
	waitFor("the touch of the broken file", sawStamp(touch(t, path)))
	if st := g.Stats(); st.Failures != 1 || st.Reloads != 2 || st.Entries != 4 {
		t.Fatalf("stats after touching the broken file %+v", st)
	}
	// A missing file (mid-replacement) keeps the catalog too; one that vanishes between the watcher's stat
	// and its read is not a failure either.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := g.load(ctx, true); !errors.Is(err, fs.ErrNotExist) || g.Stats().Failures != 1 {
		t.Fatalf("reload of a vanished file: %v, stats %+v", err, g.Stats())
	}
	waitFor("the missing-file warning", func() bool { return strings.Contains(logs.String(), "cannot stat the file") })
	writeFile(t, path, catalogJSON("c", 5, 0.1))
	waitFor("the fixed catalog", func() bool { return g.Stats().Entries == 5 })
	if st := g.Stats(); st.Reloads != 3 || st.LastError != "" {
		t.Fatalf("stats %+v", st)
	}
	// ...and not a re-embedding of a good file.
	router := g.Router()
	waitFor("the touch of the good file", sawStamp(touch(t, path)))
	if st := g.Stats(); st.Reloads != 3 || st.Failures != 1 || g.Router() != router {
		t.Fatalf("stats after touching the good file %+v", st)
	}
	// An explicit Reload always reads and embeds again.
	if err := g.Reload(context.Background()); err != nil || g.Stats().Reloads != 4 || g.Router() == router {
		t.Fatalf("explicit reload: %v, stats %+v", err, g.Stats())
	}
}

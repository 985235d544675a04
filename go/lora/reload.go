package lora

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Registry serves the current Router of a catalog file and replaces it on Reload. Searches load the
// router through an atomic pointer, so a reload (which re-reads and re-embeds the whole file) never
// blocks or drops them: requests in flight finish on the router they started with. A reload that fails
// keeps the previous router. Safe for concurrent use.
type Registry struct {
	path   string
	emb    Embedder
	log    *slog.Logger
	attach func(ctx context.Context, cat *Catalog) (any, error) // nil: none
	cur    atomic.Pointer[Router]

	mu      sync.Mutex        // serialises reloads
	seen    fileStamp         // the file version last read, successfully or not (guarded by mu)
	seenSum [sha256.Size]byte // digest of the bytes last read (guarded by mu); see Watch
	hasSum  bool              // seenSum is set (guarded by mu)

	reloads, failures atomic.Uint64
	lastErr           atomic.Pointer[string]
	loadedAt          atomic.Pointer[time.Time]
}

// fileStamp identifies a version of a file well enough to notice edits (what Watch compares).
type fileStamp struct {
	modTime int64
	size    int64
}

func stampOf(fi os.FileInfo) fileStamp { return fileStamp{fi.ModTime().UnixNano(), fi.Size()} }

// RegistryStats is what the server exports as metrics.
type RegistryStats struct {
	Path      string
	Entries   int       // in the current catalog
	LoadedAt  time.Time // when the current catalog was loaded
	Reloads   uint64    // successful loads, the first included
	Failures  uint64    // failed reloads (the previous catalog stayed)
	LastError string    // of the latest failed reload; "" after a success
}

// NewRegistry loads the catalog at path and embeds it with emb; the first load must succeed. log may be
// nil (slog.Default()).
func NewRegistry(ctx context.Context, path string, emb Embedder, log *slog.Logger) (*Registry, error) {
	return NewRegistryWith(ctx, path, emb, log, nil)
}

// NewRegistryWith is NewRegistry with attach, called on every catalog about to be put in service (the first and
// each reload): what it returns is kept with the catalog's router (Router.Attachment), and its error refuses the
// catalog (a reload then keeps the previous one). A server loads and validates the catalog's adapter files
// there, so that a catalog naming a broken file never replaces a working one.
func NewRegistryWith(ctx context.Context, path string, emb Embedder, log *slog.Logger,
	attach func(ctx context.Context, cat *Catalog) (any, error)) (*Registry, error) {
	if emb == nil {
		return nil, errors.New("lora: no embedder")
	}
	if log == nil {
		log = slog.Default()
	}
	g := &Registry{path: path, emb: emb, log: log, attach: attach}
	if err := g.load(ctx, false); err != nil {
		return nil, err
	}
	return g, nil
}

// Router returns the current router (never nil).
func (g *Registry) Router() *Router { return g.cur.Load() }

// Search searches the current catalog.
func (g *Registry) Search(ctx context.Context, prompt string, topK int) (*Result, error) {
	return g.Router().Search(ctx, prompt, topK)
}

// Path is the catalog file.
func (g *Registry) Path() string { return g.path }

// Stats reports the current catalog and the reloads so far.
func (g *Registry) Stats() RegistryStats {
	s := RegistryStats{Path: g.path, Reloads: g.reloads.Load(), Failures: g.failures.Load()}
	if r := g.cur.Load(); r != nil {
		s.Entries = r.Len()
	}
	if t := g.loadedAt.Load(); t != nil {
		s.LoadedAt = *t
	}
	if e := g.lastErr.Load(); e != nil {
		s.LastError = *e
	}
	return s
}

// Reload re-reads and re-embeds the catalog file and swaps the router in when that succeeds. On error
// the previous router stays in service; the error is logged and returned.
func (g *Registry) Reload(ctx context.Context) error {
	err := g.load(ctx, false)
	if err != nil {
		g.log.Error("lora catalog: reload failed, keeping the previous catalog", "path", g.path, "error", err)
	}
	return err
}

// load reads, parses and embeds the catalog and swaps the router in. For the watcher (watching), bytes
// identical to the last read (successful or not) change nothing (nil, no reload counted): a touch, or
// a rewrite of the same content, neither re-embeds the catalog nor counts a second failure; and a file
// that vanished between the watcher's stat and this read is not a failure either (an error wrapping
// fs.ErrNotExist: the watcher waits for it to come back).
func (g *Registry) load(ctx context.Context, watching bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	start := time.Now()
	unreadable := func(err error) error { // the stat or the read failed
		if watching && errors.Is(err, fs.ErrNotExist) {
			g.seen = fileStamp{} // vanished: whatever comes back is read
			return err
		}
		return g.fail(err)
	}
	fi, err := os.Stat(g.path) // before reading: an edit racing with the read shows as a new stamp later
	if err != nil {
		return unreadable(fmt.Errorf("lora: catalog: %w", err))
	}
	g.seen = stampOf(fi)
	data, err := readCatalogFile(g.path, DefaultLimits)
	if err != nil {
		return unreadable(err)
	}
	sum := sha256.Sum256(data)
	if watching && g.hasSum && sum == g.seenSum {
		return nil
	}
	g.seenSum, g.hasSum = sum, true
	cat, err := parseCatalog(data, DefaultLimits)
	if err != nil {
		return g.fail(fmt.Errorf("%s: %w", g.path, err))
	}
	r, err := NewRouter(ctx, cat, g.emb)
	if err != nil {
		// An embedder failure (e.g. a cancelled context) says nothing about the file: the next reload embeds
		// these bytes again, even unchanged.
		g.hasSum = false
		return g.fail(err)
	}
	if g.attach != nil {
		if r.attachment, err = g.attach(ctx, cat); err != nil {
			return g.fail(fmt.Errorf("%s: %w", g.path, err))
		}
	}
	g.cur.Store(r)
	g.reloads.Add(1)
	now := time.Now()
	g.loadedAt.Store(&now)
	g.lastErr.Store(nil)
	g.log.Info("lora catalog: loaded", "path", g.path, "entries", r.Len(), "dim", r.Dim(),
		"negative_weight", r.cat.NegativeWeight, "threshold", r.cat.Threshold, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// fail records a failed reload (not the first load: there is no catalog to keep yet) and returns err.
// Called with mu held.
func (g *Registry) fail(err error) error {
	if g.cur.Load() != nil {
		g.failures.Add(1)
		msg := err.Error()
		g.lastErr.Store(&msg)
	}
	return err
}

// Watch polls the file's modification time and size every interval (1 s when interval <= 0) and
// reloads when they change, until ctx is done. A changed stamp with the same bytes as the last read
// (a touch, a rewrite of the same content) reloads nothing. A file that fails to load is not retried
// until it changes again; a missing file (e.g. mid-replacement) is logged once and waited out.
func (g *Registry) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	missing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fi, err := os.Stat(g.path)
		if err == nil {
			g.mu.Lock()
			changed := stampOf(fi) != g.seen
			g.mu.Unlock()
			if changed {
				if err = g.load(ctx, true); err != nil && !errors.Is(err, fs.ErrNotExist) {
					// Counted and kept in Stats; not retried until the file changes again.
					g.log.Error("lora catalog: reload failed, keeping the previous catalog", "path", g.path, "error", err)
					err = nil
				}
			}
		}
		if err != nil { // missing (e.g. mid-replacement), also when it vanished during the reload
			if !missing {
				g.log.Warn("lora catalog: cannot stat the file, keeping the current catalog", "path", g.path, "error", err)
			}
			missing = true
			continue
		}
		missing = false
	}
}

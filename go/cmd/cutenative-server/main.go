// Command cutenative-server serves forecasts over HTTP from models loaded in process through libcutenative.
//
// Every option is a flag and an environment variable (the flag wins; CUTENATIVE_API_KEYS has no flag), and
// `cutenative-server -h` lists them with their defaults. They come from one table (options.go, the server's
// limits and queues from server.Settings()): a value that does not parse, on the command line or in the
// environment, stops the command before it loads anything, with exit status 2 and a message naming the flag
// or variable and the value. With no -models, the server runs its embedded default model (a small Chronos-2
// trained by scripts/train_default_model.py), unpacked into a cache directory at start.
//
// The LoRA catalog is reloaded (re-read and re-embedded, swapped in only when that succeeds) when its
// file changes (modification time or size, checked every -lora-poll) and on SIGHUP.
//
// SIGTERM or SIGINT drains: /readyz answers 503, every connection the kernel has already accepted is still
// taken and served, queued work finishes, then the process exits (drain.go).
package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/settings"
	"github.com/cutenative/cutenative/go/server"
)

//go:embed defaultmodel/config.json defaultmodel/model.safetensors
var defaultModel embed.FS

// unpackDefaultModel writes the embedded model into dir (once; the files are compared by size).
func unpackDefaultModel(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return fs.WalkDir(defaultModel, "defaultmodel", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := defaultModel.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.Base(path))
		if st, err := os.Stat(dst); err == nil && st.Size() == int64(len(data)) {
			return nil
		}
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, dst)
	})
}

func main() { os.Exit(cli(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)) }

// cli reads the options and runs the server until SIGTERM or SIGINT has drained it. Exit status: 0 (also
// after -h and -version); 2 when the options are wrong (nothing is loaded); 1 when serving failed.
func cli(args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	o, err := parseOptions(args, lookup)
	if errors.Is(err, flag.ErrHelp) {
		usage(stderr)
		return 0
	}
	if err == nil && o.version {
		fmt.Fprint(stdout, versionText())
		return 0
	}
	if err == nil {
		err = checkDeviceAvailable(o.device, cutenative.CUDADeviceCount())
	}
	if err != nil {
		var pe *settings.PositionalError
		if errors.As(err, &pe) {
			err = fmt.Errorf("%w; models are given with -models name=dir[,name=dir...]", err)
		}
		fmt.Fprintf(stderr, "cutenative-server: %v\n(cutenative-server -h lists every option)\n", err)
		return 2
	}
	log := newLogger(stderr, o.logLevel, o.logFormat)
	slog.SetDefault(log)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	o.stop = stop
	if err := run(log, o); err != nil {
		log.Error("cutenative-server", "error", err)
		return 1
	}
	return 0
}

// serveLoRAReloads reloads the catalog on SIGHUP and, when poll > 0, when its file changes, until ctx
// is done. A failed reload is logged by the registry and keeps the catalog in service.
func serveLoRAReloads(ctx context.Context, log *slog.Logger, srv *server.Server, poll time.Duration) {
	reg := srv.LoRAs()
	if reg == nil {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading the LoRA catalog", "path", reg.Path())
				_ = reg.Reload(ctx)
			}
		}
	}()
	if poll > 0 {
		go reg.Watch(ctx, poll)
	}
}

func run(log *slog.Logger, o options) error {
	if err := o.lora.check(); err != nil {
		return err
	}
	specs, err := parseModels(o.models)
	if err != nil {
		return fmt.Errorf("-models: %w", err)
	}
	if len(specs) == 0 {
		specs = o.fileModels
	}
	dirs, modelOpts := map[string]string{}, map[string]server.ModelOptions{}
	for name, m := range specs {
		dirs[name], modelOpts[name] = m.dir, m.opts
	}
	if len(dirs) == 0 {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		dir := filepath.Join(cache, "cutenative", "default-model")
		if err := unpackDefaultModel(dir); err != nil {
			return fmt.Errorf("unpacking the default model: %w", err)
		}
		dirs = map[string]string{"default": dir}
	}
	keys, err := readKeys(o.apiKeys, o.keysFile)
	if err != nil {
		return err
	}
	cfg := o.cfg
	cfg.Models, cfg.ModelOptions, cfg.DefaultModel, cfg.APIKeys = dirs, modelOpts, o.defModel, keys
	cfg.Open = cutenative.Options{Device: o.device, DType: o.dtype, Mode: o.mode, Threads: o.threads}
	cfg.LoRACatalog, cfg.Logger = o.lora.catalog, log
	if o.lora.embedModel != "" {
		emb, err := parseModels("embedding=" + o.lora.embedModel)
		if err != nil {
			return fmt.Errorf("-embed-model: %w", err)
		}
		cfg.EmbedModel = emb["embedding"].dir
		if opts := emb["embedding"].opts; opts != (server.ModelOptions{}) {
			cfg.ModelOptions["embedding"] = opts
		}
	}
	listenAddr := o.listen
	if o.listener != nil {
		listenAddr = o.listener.Addr().String()
	}
	cfg.AllowedHosts = allowedHosts(o.allowedHosts, listenAddr)
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	timeout := srv.Config().Timeout
	ln := o.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.listen); err != nil {
			return err
		}
	}
	// -max-conns, with idle connections evicted for new ones; net/http's own errors in JSON (drain.go, conns.go,
	// httperr.go). A zero timeout (options made in code) is net/http's fallback, the read timeout.
	dl := newDrainListener(ln, o.maxConns)
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: o.readHeaderTimeout,
		ReadTimeout: 60 * time.Second, WriteTimeout: timeout + 30*time.Second, IdleTimeout: o.idleTimeout,
		MaxHeaderBytes: maxHeaderBytes, ConnState: dl.connState}
	srv.AddMetrics(func(w io.Writer) {
		idle, unread := dl.Evictions()
		fmt.Fprintf(w, "# HELP cutenative_connections_evicted_total Connections closed to make room for a new one (-max-conns), by state: idle (a keep-alive between requests), unread (no byte sent for 1 s).\n# TYPE cutenative_connections_evicted_total counter\n")
		fmt.Fprintf(w, "cutenative_connections_evicted_total{state=\"idle\"} %d\ncutenative_connections_evicted_total{state=\"unread\"} %d\n", idle, unread)
	})
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(dl) }() // liveness answers while models load
	lib := server.Library()
	log.Info("listening", "addr", ln.Addr().String(), "models", formatModels(dirs), "device", o.device, "dtype", o.dtype,
		"mode", o.mode, "auth", len(keys) > 0, "version", server.BinaryVersion(), "library_version", lib.Version,
		"library_build", lib.String(), "lora_catalog", o.lora.catalog, "embed_model", o.lora.embedModel)
	if why := slowDTypeWarning(o.device, o.dtype, hostCPUFlags()); why != "" {
		log.Warn("dtype slower than f32 on this CPU", "dtype", o.dtype, "reason", why)
	}
	if num := cutenative.CPUNumericsInfo(); num.BatchInvariant {
		log.Info("cpu numerics", "batch_invariant", true, "thread_invariant", num.ThreadInvariant, "detail", num.Description)
	} else {
		// Merged requests may then differ in the last bit from unmerged ones on CPU models.
		log.Warn("cpu numerics: CPU results may depend on the batch", "detail", num.Description)
	}
	if err := srv.Load(); err != nil {
		_ = httpSrv.Close()
		return err
	}
	reloadCtx, stopReloads := context.WithCancel(context.Background())
	defer stopReloads()
	serveLoRAReloads(reloadCtx, log, srv, o.lora.poll)
	log.Info("ready")
	if o.ready != nil {
		o.ready(ln.Addr().String())
	}

	select {
	case err := <-errc:
		srv.Close()
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	case sig := <-o.stop:
		log.Info("draining", "signal", sig.String())
	}
	// Graceful drain: readyz goes 503; keep-alives end after each connection's current answer; the listener
	// keeps taking every connection the kernel has already accepted (until its queue stays empty for 50 ms,
	// at most 5 s), then closes; in-flight requests finish; then queued work ends and the models are freed.
	srv.Drain()
	stopReloads()
	httpSrv.SetKeepAlivesEnabled(false) // connections close after their current answer, none is cut mid-request
	dl.startDrain(50 * time.Millisecond)
	if err := <-errc; err != nil && !errors.Is(err, errDrained) && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("serve", "error", err)
	}
	accepted := dl.taken.Load()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+5*time.Second)
	defer cancel()
	err = httpSrv.Shutdown(ctx)
	srv.Close()
	log.Info("stopped", "connections_taken_while_draining", accepted)
	return err
}

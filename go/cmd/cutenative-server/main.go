// Command cutenative-server serves forecasts over HTTP from models loaded in process through libcutenative.
//
// Every flag has an environment variable (the flag wins). With no -models, the server runs its embedded
// default model (a small Chronos-2 trained by scripts/train_default_model.py), unpacked into a cache
// directory at start.
//
//	flag            environment                   default
//	-listen         CUTENATIVE_LISTEN             127.0.0.1:8080
//	-models         CUTENATIVE_MODELS             (embedded default)  name=dir[,name=dir...]
//	-default-model  CUTENATIVE_DEFAULT_MODEL      first name
//	-device         CUTENATIVE_DEVICE             cpu                 cpu | cuda | cuda:N
//	-dtype          CUTENATIVE_DTYPE              f32                 f32 | bf16 | f16
//	-mode           CUTENATIVE_MODE               eager               eager | graph | fused
//	-threads        CUTENATIVE_THREADS            0 (library default)
//	-api-keys-file  CUTENATIVE_API_KEYS_FILE      (none)              one bearer key per line
//	                CUTENATIVE_API_KEYS           (none)              comma-separated keys (env only)
//	-max-body       CUTENATIVE_MAX_BODY_BYTES     8388608
//	-max-batch      CUTENATIVE_MAX_BATCH          64                  series per merged call; 1 = no batching
//	-max-wait       CUTENATIVE_MAX_WAIT           2ms
//	-queue          CUTENATIVE_QUEUE              256                 jobs per model before 429
//	-timeout        CUTENATIVE_TIMEOUT            30s                 per request
//	-max-series     CUTENATIVE_MAX_SERIES         1024                per request
//	-max-horizon    CUTENATIVE_MAX_HORIZON        65536               steps per request (the model's limit applies too)
//	-max-output-values CUTENATIVE_MAX_OUTPUT_VALUES 4194304          series x quantile levels x horizon per request
//	-max-input-values  CUTENATIVE_MAX_INPUT_VALUES  4194304          values + covariate values per request
//	-long-cost      CUTENATIVE_LONG_COST          256                 rows (series + covariates) x forward passes above which a request runs in the long lane
//	-max-conns      CUTENATIVE_MAX_CONNS          4096                open connections at once (more wait in the kernel's queue)
//	-lora-catalog   CUTENATIVE_LORA_CATALOG       (none)              LoRA catalog: enables POST /v1/loras/search
//	-embed-model    CUTENATIVE_EMBED_MODEL        (none)              sentence-embedding model dir (needed by -lora-catalog)
//	-lora-poll      CUTENATIVE_LORA_POLL          1s                  catalog file check interval; 0 disables
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
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/server"
)

//go:embed defaultmodel/config.json defaultmodel/model.safetensors
var defaultModel embed.FS

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

func envInt(name string, fallback int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return fallback
}

func envDuration(name string, fallback time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return fallback
}

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

func parseModels(spec string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, dir, ok := strings.Cut(part, "=")
		if !ok || name == "" || dir == "" {
			return nil, fmt.Errorf("-models: want name=dir, got %q", part)
		}
		out[name] = dir
	}
	return out, nil
}

func readKeys(file string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(os.Getenv("CUTENATIVE_API_KEYS"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for _, k := range strings.Split(string(b), "\n") {
			if k = strings.TrimSpace(k); k != "" && !strings.HasPrefix(k, "#") {
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}

func main() {
	listen := flag.String("listen", env("CUTENATIVE_LISTEN", "127.0.0.1:8080"), "address to listen on")
	models := flag.String("models", env("CUTENATIVE_MODELS", ""), "name=dir[,name=dir...]; empty: the embedded default model")
	defModel := flag.String("default-model", env("CUTENATIVE_DEFAULT_MODEL", ""), "model used when a request names none")
	device := flag.String("device", env("CUTENATIVE_DEVICE", "cpu"), "cpu, cuda or cuda:N")
	dtype := flag.String("dtype", env("CUTENATIVE_DTYPE", "f32"), "f32, bf16 or f16")
	mode := flag.String("mode", env("CUTENATIVE_MODE", "eager"), "eager, graph or fused")
	threads := flag.Int("threads", envInt("CUTENATIVE_THREADS", 0), "CPU threads for the library (0: its default)")
	keysFile := flag.String("api-keys-file", env("CUTENATIVE_API_KEYS_FILE", ""), "file with one bearer key per line")
	maxBody := flag.Int("max-body", envInt("CUTENATIVE_MAX_BODY_BYTES", 8<<20), "request body limit in bytes")
	maxBatch := flag.Int("max-batch", envInt("CUTENATIVE_MAX_BATCH", 64), "series per merged library call (1: no batching)")
	maxWait := flag.Duration("max-wait", envDuration("CUTENATIVE_MAX_WAIT", 2*time.Millisecond), "how long a batch waits for more requests when others are queued")
	queue := flag.Int("queue", envInt("CUTENATIVE_QUEUE", 256), "requests waiting per model before 429")
	timeout := flag.Duration("timeout", envDuration("CUTENATIVE_TIMEOUT", 30*time.Second), "per-request time limit")
	maxSeries := flag.Int("max-series", envInt("CUTENATIVE_MAX_SERIES", 1024), "series per request")
	maxHorizon := flag.Int("max-horizon", envInt("CUTENATIVE_MAX_HORIZON", 65536), "steps per request (the model's limit applies too)")
	maxOut := flag.Int("max-output-values", envInt("CUTENATIVE_MAX_OUTPUT_VALUES", 4<<20), "series x quantile levels x horizon per request")
	maxIn := flag.Int("max-input-values", envInt("CUTENATIVE_MAX_INPUT_VALUES", 4<<20), "values and covariate values per request")
	longCost := flag.Int("long-cost", envInt("CUTENATIVE_LONG_COST", 256), "rows (series + covariates) x forward passes above which a request runs in the model's long lane")
	maxConns := flag.Int("max-conns", envInt("CUTENATIVE_MAX_CONNS", 4096), "open connections at once")
	var lo loraOptions
	flag.StringVar(&lo.catalog, "lora-catalog", env("CUTENATIVE_LORA_CATALOG", ""), "LoRA catalog file (enables POST /v1/loras/search; needs -embed-model)")
	flag.StringVar(&lo.embedModel, "embed-model", env("CUTENATIVE_EMBED_MODEL", ""), "sentence-embedding model directory (e.g. all-MiniLM-L6-v2) for -lora-catalog")
	flag.DurationVar(&lo.poll, "lora-poll", envDuration("CUTENATIVE_LORA_POLL", time.Second), "how often the catalog file is checked for changes (0: never; SIGHUP reloads)")
	flag.Parse()

	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := lo.check(); err != nil {
		log.Error("cutenative-server", "error", err)
		os.Exit(2)
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	o := options{listen: *listen, models: *models, defModel: *defModel, device: *device, dtype: *dtype, mode: *mode,
		threads: *threads, keysFile: *keysFile, maxConns: *maxConns, lora: lo, stop: stop,
		cfg: server.Config{MaxBodyBytes: int64(*maxBody), MaxBatch: *maxBatch, MaxWait: *maxWait, QueueSize: *queue,
			Timeout: *timeout, MaxSeries: *maxSeries, MaxHorizon: *maxHorizon, MaxOutputValues: int64(*maxOut),
			MaxInputValues: int64(*maxIn), LongCost: int64(*longCost)}}
	if err := run(log, o); err != nil {
		log.Error("cutenative-server", "error", err)
		os.Exit(1)
	}
}

// options is everything run needs: the flags, the server's limits, and for tests a listener of their own
// and a stop channel standing in for SIGTERM.
type options struct {
	listen, models, defModel, device, dtype, mode string
	threads                                       int
	keysFile                                      string
	maxConns                                      int
	lora                                          loraOptions
	cfg                                           server.Config // limits and queues; models, keys and LoRA fields are filled by run
	listener                                      net.Listener  // nil: listen on the address
	stop                                          <-chan os.Signal
	ready                                         func(addr string) // called once the models are loaded (tests)
}

// loraOptions are the LoRA search flags.
type loraOptions struct {
	catalog, embedModel string
	poll                time.Duration
}

// check rejects half a configuration before anything is loaded.
func (o loraOptions) check() error {
	switch {
	case o.catalog != "" && o.embedModel == "":
		return errors.New("-lora-catalog needs -embed-model: the sentence-embedding model (e.g. all-MiniLM-L6-v2) that embeds the catalog and the prompts")
	case o.catalog == "" && o.embedModel != "":
		return errors.New("-embed-model is only used with -lora-catalog (LoRA search); give both or neither")
	case o.poll < 0:
		return errors.New("-lora-poll: must be >= 0")
	}
	return nil
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
	dirs, err := parseModels(o.models)
	if err != nil {
		return err
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
	keys, err := readKeys(o.keysFile)
	if err != nil {
		return err
	}
	cfg := o.cfg
	cfg.Models, cfg.DefaultModel, cfg.APIKeys = dirs, o.defModel, keys
	cfg.Open = cutenative.Options{Device: o.device, DType: o.dtype, Mode: o.mode, Threads: o.threads}
	cfg.LoRACatalog, cfg.EmbedModel, cfg.Logger = o.lora.catalog, o.lora.embedModel, log
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ln := o.listener
	if ln == nil {
		if ln, err = net.Listen("tcp", o.listen); err != nil {
			return err
		}
	}
	dl := newDrainListener(ln, o.maxConns)
	httpSrv := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 60 * time.Second, WriteTimeout: timeout + 30*time.Second, IdleTimeout: 120 * time.Second,
		MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- httpSrv.Serve(dl) }() // liveness answers while models load
	log.Info("listening", "addr", ln.Addr().String(), "models", dirs, "device", o.device, "dtype", o.dtype,
		"auth", len(keys) > 0, "library", cutenative.BuildInfo(), "lora_catalog", o.lora.catalog,
		"embed_model", o.lora.embedModel)
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

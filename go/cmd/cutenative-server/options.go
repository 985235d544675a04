package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/settings"
	"github.com/cutenative/cutenative/go/server"
)

// options is everything run needs: the settings, and for tests a listener of their own, a stop channel
// standing in for SIGTERM and a ready callback.
type options struct {
	listen, models, defModel, device, dtype, mode string
	threads                                       int
	keysFile, apiKeys                             string // apiKeys: CUTENATIVE_API_KEYS (environment only)
	maxConns                                      int
	idleTimeout, readHeaderTimeout                time.Duration        // http.Server's IdleTimeout, ReadHeaderTimeout
	allowedHosts                                  string               // -allowed-hosts ("" : loopback names on a loopback address)
	configFile                                    string               // -config: a JSON file of settings and models
	fileModels                                    map[string]modelSpec // the config file's "models"
	version                                       bool                 // -version: print the versions and exit
	logLevel, logFormat                           string               // debug|info|warn|error, text|json
	lora                                          loraOptions
	cfg                                           server.Config // limits and queues; models, keys and LoRA fields are filled by run
	listener                                      net.Listener  // nil: listen on the address
	stop                                          <-chan os.Signal
	ready                                         func(addr string) // called once the models are loaded (tests)
}

// loraOptions are the LoRA search settings.
type loraOptions struct {
	catalog, embedModel string
	poll                time.Duration
}

// optionTable is the one table of the command's settings, in -h order: its own, then server.Settings() (the
// server's limits and queues, whose defaults server.New applies to the same fields), then its own again.
func optionTable() []settings.Setting[options] {
	str := func(name, env, def, unset, help string, check func(string) error, field func(*options) *string) settings.Setting[options] {
		s := settings.String(name, env, def, help, check, field)
		s.Unset = unset
		return s
	}
	apiKeys := str("api-keys", "CUTENATIVE_API_KEYS", "", "", "comma-separated bearer keys (also read with -api-keys-file)",
		nil, func(o *options) *string { return &o.apiKeys })
	apiKeys.Where = settings.EnvOnly
	head := []settings.Setting[options]{
		str("listen", "CUTENATIVE_LISTEN", "127.0.0.1:8080", "", "address to listen on (host:port)", checkListen,
			func(o *options) *string { return &o.listen }),
		str("config", "CUTENATIVE_CONFIG", "", "", "a JSON file of settings by flag name (under the environment and the flags) "+
			`and "models": {"name": {"dir": ..., "device": ..., "dtype": ..., "mode": ...}} (README, Configuration file)`,
			nil, func(o *options) *string { return &o.configFile }),
		str("models", "CUTENATIVE_MODELS", "", "the embedded default model (or the config file's)",
			"name=dir[;device=D][;dtype=T][;mode=M][,name=dir...]: the models to serve, each with its own open options "+
				"(unset ones: -device, -dtype, and -mode for the kinds that take it)",
			func(s string) error { _, err := parseModels(s); return err }, func(o *options) *string { return &o.models }),
		str("default-model", "CUTENATIVE_DEFAULT_MODEL", "", "the first name", "model used when a request names none",
			nil, func(o *options) *string { return &o.defModel }),
		str("device", "CUTENATIVE_DEVICE", "cpu", "", "cpu, cuda or cuda:N", checkDevice, func(o *options) *string { return &o.device }),
		str("dtype", "CUTENATIVE_DTYPE", "f32", "", "f32, bf16 or f16", settings.OneOf("f32", "bf16", "f16"),
			func(o *options) *string { return &o.dtype }),
		str("mode", "CUTENATIVE_MODE", "fused", "", strings.Join(cutenative.Modes(), ", ")+
			" for the forecasting and image models (fused: forecasters measured 1.4-1.5x faster than eager on CPU, answers within 3e-7 relative; Z-Image 1.45x on an H200; "+
			"README, Defaults); embedding models run eager unless their own options say otherwise",
			settings.OneOf(cutenative.Modes()...), func(o *options) *string { return &o.mode }),
		settings.Int("threads", "CUTENATIVE_THREADS", 1, 0,
			"CPU intra-op threads for the library (0: the library's default, every core; 1 measured fastest for "+
				"requests of a few series, where concurrent requests are merged instead; README, Defaults)",
			func(o *options) *int { return &o.threads }),
		str("api-keys-file", "CUTENATIVE_API_KEYS_FILE", "", "", "file with one bearer key per line (# comments)",
			nil, func(o *options) *string { return &o.keysFile }),
		apiKeys,
	}
	tail := []settings.Setting[options]{
		settings.Int("max-conns", "CUTENATIVE_MAX_CONNS", 4096, 0, "open connections at once; more wait in the kernel's queue (0: no limit)",
			func(o *options) *int { return &o.maxConns }),
		settings.Duration("idle-timeout", "CUTENATIVE_IDLE_TIMEOUT", 30*time.Second, time.Millisecond,
			"how long a keep-alive connection may wait for its next request before it is closed (sooner when "+
				"every -max-conns slot is taken and a new connection comes: the longest idle is closed for it)",
			func(o *options) *time.Duration { return &o.idleTimeout }),
		str("allowed-hosts", "CUTENATIVE_ALLOWED_HOSTS", "", "loopback names when -listen is a loopback address, else any",
			"comma-separated Host header values requests may carry (a name, or name:port; * for any): a defence against "+
				"DNS rebinding; others are 403", nil, func(o *options) *string { return &o.allowedHosts }),
		settings.Duration("read-header-timeout", "CUTENATIVE_READ_HEADER_TIMEOUT", 10*time.Second, time.Millisecond,
			"how long a request's header may take to arrive: from the connection's opening, or on a keep-alive "+
				"connection from the request's first byte (the connection then holds its slot)",
			func(o *options) *time.Duration { return &o.readHeaderTimeout }),
		str("lora-catalog", "CUTENATIVE_LORA_CATALOG", "", "", "LoRA catalog file (enables POST /v1/loras/search; needs -embed-model)",
			nil, func(o *options) *string { return &o.lora.catalog }),
		str("embed-model", "CUTENATIVE_EMBED_MODEL", "", "", "sentence-embedding model directory[;device=D][;dtype=T][;mode=M] "+
			"(e.g. all-MiniLM-L6-v2; f32 and eager unless given): served as \"embedding\" by POST /v1/embeddings, and embeds for -lora-catalog",
			func(s string) error {
				if strings.Contains(s, ",") {
					return errors.New("one directory (and its ;key=value options), no comma")
				}
				if s == "" {
					return nil
				}
				_, err := parseModels("embedding=" + s)
				return err
			}, func(o *options) *string { return &o.lora.embedModel }),
		settings.Duration("lora-poll", "CUTENATIVE_LORA_POLL", time.Second, 0,
			"how often the catalog file is checked for changes (0: never; SIGHUP reloads)",
			func(o *options) *time.Duration { return &o.lora.poll }),
		str("log-level", "CUTENATIVE_LOG_LEVEL", "info", "", "debug, info, warn or error (info: one access-log line per request)",
			settings.OneOf("debug", "info", "warn", "error"), func(o *options) *string { return &o.logLevel }),
		str("log-format", "CUTENATIVE_LOG_FORMAT", "text", "", "text (key=value) or json (one object per line)",
			settings.OneOf("text", "json"), func(o *options) *string { return &o.logFormat }),
		settings.Bool("version", "", false, "print the server's and the library's versions and exit",
			func(o *options) *bool { return &o.version }),
	}
	table := append(head, settings.Lift(server.Settings(), func(o *options) *server.Config { return &o.cfg })...)
	return append(table, tail...)
}

// parseOptions reads the environment (lookup) and the command line (args, which win) through the table, then
// checks what spans settings. Every error is one the command reports with exit status 2, before it loads
// anything; flag.ErrHelp asks for usage.
func parseOptions(args []string, lookup func(string) (string, bool)) (options, error) {
	var o options
	table := optionTable()
	var file *settings.File
	if path := configPath(args, lookup); path != "" && !helpAsked(args) {
		var extra map[string]json.RawMessage
		var err error
		if file, extra, err = settings.ReadFile(path, table, "models"); err != nil {
			return options{}, fmt.Errorf("-config: %w", err)
		}
		if o.fileModels, err = fileModels(path, extra["models"]); err != nil {
			return options{}, fmt.Errorf("-config: %w", err)
		}
	}
	models := o.fileModels
	if err := settings.LoadWithFile("cutenative-server", table, &o, args, lookup, file); err != nil {
		return options{}, err
	}
	o.fileModels = models
	if err := o.lora.check(); err != nil {
		return options{}, err
	}
	return o, nil
}

// usage is the -h text: every option with its environment variable and default, from the table.
func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: cutenative-server [flags]

Serves forecasts over HTTP from models loaded in process through libcutenative. Every option is an
environment variable and, but for CUTENATIVE_API_KEYS, a flag (the flag wins); a value that does not parse,
from either, stops the server before it loads anything (exit status 2).

OMP_WAIT_POLICY (OpenMP, read by libgomp when the process starts, so only from the environment): with
-threads above 1 on a host whose cores are shared, OMP_WAIT_POLICY=PASSIVE keeps idle OpenMP workers from
spinning; ACTIVE was the slowest setting measured. With the default -threads 1 it has no effect.

`)
	settings.Usage(w, optionTable())
}

// checkDeviceAvailable refuses a CUDA device the library cannot see (count: cutenative.CUDADeviceCount()),
// before any model is loaded.
func checkDeviceAvailable(device string, count int) error {
	if device == "cpu" {
		return nil
	}
	n := 0
	if i, ok := strings.CutPrefix(device, "cuda:"); ok {
		n, _ = strconv.Atoi(i)
	}
	if n >= count {
		return fmt.Errorf("-device %s: the library sees %d CUDA device(s) on this machine (a CPU-only build or no GPU sees 0); use -device cpu or cuda:0..cuda:%d",
			device, count, count-1)
	}
	return nil
}

// newLogger makes the process's logger from -log-level and -log-format (values the table checked).
func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// versionText is what -version prints: the server binary and the library it loaded.
func versionText() string {
	return fmt.Sprintf("cutenative-server %s (%s %s/%s)\n%s\n", server.BinaryVersion(), runtime.Version(), runtime.GOOS,
		runtime.GOARCH, server.Library())
}

// check rejects half a configuration before anything is loaded.
func (o loraOptions) check() error {
	switch {
	case o.catalog != "" && o.embedModel == "":
		return errors.New("-lora-catalog needs -embed-model: the sentence-embedding model (e.g. all-MiniLM-L6-v2) that embeds the catalog and the prompts")
	case o.poll < 0:
		return errors.New("-lora-poll: must be >= 0")
	}
	return nil
}

func checkListen(s string) error {
	if _, _, err := net.SplitHostPort(s); err != nil {
		return errors.New("want host:port (the host may be empty: every interface)")
	}
	return nil
}

// checkDevice accepts what cutenative.Open does: cpu, cuda, cuda:N.
func checkDevice(s string) error {
	if s == "cpu" || s == "cuda" {
		return nil
	}
	if n, ok := strings.CutPrefix(s, "cuda:"); ok {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 {
			return nil
		}
	}
	return errors.New("want cpu, cuda or cuda:N")
}

// formatModels writes name=dir pairs in name order (the start line's -models).
func formatModels(dirs map[string]string) string {
	names := make([]string, 0, len(dirs))
	for n := range dirs {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		names[i] = n + "=" + dirs[n]
	}
	return strings.Join(names, ",")
}

// modelSpec is one model to serve: its directory and its own open options.
type modelSpec struct {
	dir  string
	opts server.ModelOptions
}

// parseModels reads name=dir[;device=D][;dtype=T][;mode=M][,name=dir...].
func parseModels(spec string) (map[string]modelSpec, error) {
	out := map[string]modelSpec{}
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		fields := strings.Split(part, ";")
		name, dir, ok := strings.Cut(fields[0], "=")
		if !ok || name == "" || dir == "" {
			return nil, fmt.Errorf("want name=dir[;key=value...][,name=dir...], got %q", part)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("model %q given twice", name)
		}
		m := modelSpec{dir: dir}
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
			if err := m.set(k, v); err != nil {
				return nil, fmt.Errorf("model %q: %w", name, err)
			}
		}
		out[name] = m
	}
	return out, nil
}

// set sets one open option, checked as the server-wide flag of the same name is.
func (m *modelSpec) set(key, value string) error {
	var check func(string) error
	var field *string
	switch key {
	case "device":
		check, field = checkDevice, &m.opts.Device
	case "dtype":
		check, field = settings.OneOf("f32", "bf16", "f16"), &m.opts.DType
	case "mode":
		check, field = settings.OneOf(cutenative.Modes()...), &m.opts.Mode
	default:
		return fmt.Errorf("unknown option %q (a model takes device, dtype and mode)", key)
	}
	if err := check(value); err != nil {
		return fmt.Errorf("%s=%s: %w", key, value, err)
	}
	*field = value
	return nil
}

// fileModels reads a config file's "models": {"name": "dir"} or {"name": {"dir": ..., "device": ..., ...}}.
func fileModels(path string, raw json.RawMessage) (map[string]modelSpec, error) {
	if raw == nil {
		return nil, nil
	}
	var entries map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("%s: models: want an object of name: dir or name: {\"dir\": ...}", path)
	}
	out := map[string]modelSpec{}
	for name, e := range entries {
		var dir string
		if json.Unmarshal(e, &dir) == nil {
			if name == "" || dir == "" {
				return nil, fmt.Errorf("%s: models.%s: a name and a dir are required", path, name)
			}
			out[name] = modelSpec{dir: dir}
			continue
		}
		var fields map[string]string
		if err := json.Unmarshal(e, &fields); err != nil {
			return nil, fmt.Errorf("%s: models.%s: want a directory or an object of strings", path, name)
		}
		m := modelSpec{dir: fields["dir"]}
		for k, v := range fields {
			if k == "dir" {
				continue
			}
			if err := m.set(k, v); err != nil {
				return nil, fmt.Errorf("%s: models.%s: %w", path, name, err)
			}
		}
		if name == "" || m.dir == "" {
			return nil, fmt.Errorf("%s: models.%s: a name and a dir are required", path, name)
		}
		out[name] = m
	}
	return out, nil
}

// helpAsked reports whether the arguments ask for -h (which a broken -config file must not hide).
func helpAsked(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--h" || a == "--help" {
			return true
		}
	}
	return false
}

// configPath is the -config flag's value (looked up before the flags are parsed, since the file sits under
// them), else CUTENATIVE_CONFIG.
func configPath(args []string, lookup func(string) (string, bool)) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		for _, prefix := range []string{"-config", "--config"} {
			if a == prefix && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, prefix+"="); ok {
				return v
			}
		}
	}
	v, _ := lookup("CUTENATIVE_CONFIG")
	return v
}

// allowedHosts is -allowed-hosts, or by default the loopback names when the server listens on a loopback
// address (a page that rebinds its DNS name to 127.0.0.1 sends its own name), else none (any Host).
func allowedHosts(flag, listen string) []string {
	if flag != "" {
		var out []string
		for _, h := range strings.Split(flag, ",") {
			if h = strings.TrimSpace(h); h != "" {
				out = append(out, h)
			}
		}
		return out
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		out := []string{"localhost", "127.0.0.1", "::1"}
		if host != "localhost" && !slices.Contains(out, ip.String()) {
			out = append(out, ip.String()) // the address itself: 127.0.0.2, 127.0.1.1, ...
		}
		return out
	}
	return nil
}

// readKeys gathers the bearer keys: the comma-separated list, then the file's lines (blank lines and #
// comments skipped).
func readKeys(list, file string) ([]string, error) {
	var keys []string
	for _, k := range strings.Split(list, ",") {
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

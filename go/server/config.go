package server

import (
	"log/slog"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/settings"
	"github.com/cutenative/cutenative/go/lora"
)

// Config is everything the server needs; cmd/cutenative-server fills it from flags and environment.
//
// The limits and queues are the settings of Settings(): their defaults, flags, environment variables and
// checks live there and nowhere else. DefaultConfig holds every default; New gives a field left at zero its
// default (MaxWait excepted: 0 means "do not wait for company") and refuses a value out of range.
type Config struct {
	Models       map[string]string       // model name -> model directory (set by the operator, never by a request)
	ModelOptions map[string]ModelOptions // per model name: its own device, dtype and mode (registry.go)
	DefaultModel string                  // the forecaster used when a request names none; "": the first by name that forecasts
	Open         cutenative.Options      // every model's defaults; Threads is process-wide (LibTorch's pool)
	APIKeys      []string                // bearer keys; empty: no authentication
	// AllowedHosts, when not empty, are the only Host header values (host or host:port, case-insensitive; "*"
	// for any) a request may carry: a defence against DNS rebinding (403 otherwise).
	AllowedHosts []string
	MaxBodyBytes int64         // request body limit, on the wire
	MaxBatch     int           // series per merged library call (1 disables batching)
	MaxWait      time.Duration // how long a call waits for company when other jobs are queued
	QueueSize    int           // jobs waiting per model before 429
	Timeout      time.Duration // per-request limit, from the first byte read to the answer
	MaxSeries    int           // series per request
	MaxSeriesLen int           // values per series

	// What one request may cost, checked before anything proportional to it is allocated.
	MaxHorizon      int   // steps per request (the model's own limit applies too)
	MaxOutputValues int64 // series x quantile levels x horizon per request (Kronos: mean and sample paths)
	MaxInputValues  int64 // values and covariate values per request
	MaxInflight     int   // requests being read, validated, queued or run at once before 429
	// MaxInflightPerKey bounds one API key's share of MaxInflight (0: half of it with two keys or more, no bound
	// with one key or none).
	MaxInflightPerKey int
	MaxInflightBytes  int64 // bytes all requests in flight may hold: decoded bodies and answers (budget.go)
	MaxCallBytes      int64 // estimated working memory of one library call (cost.go)

	// Fairness (cost.go): a request whose estimated compute is above LongAfter runs in its model's long lane, one
	// call at a time, beside the short lane's merged calls, so a long request never delays short ones; at most
	// LongQueue wait for that lane before 429, and at most LongSlots long calls run at once server-wide.
	LongAfter time.Duration
	LongQueue int
	LongSlots int // 0: one less than the Go scheduler's CPUs, at least 1

	// Images (POST /v1/images/generations): per request at most MaxImages images of at most MaxImagePixels pixels
	// each and MaxImageSteps denoising steps; the compute estimate and the deadline bound the product.
	MaxImages      int
	MaxImagePixels int64
	MaxImageSteps  int
	// BatchImages makes a request's n images in one library call, as one batch (GenerateImages); off: n calls in a
	// row. Each batched image equals its one-image call up to the batch's rounding.
	BatchImages bool

	// LoRA search (POST /v1/loras/search); LoRACatalog "" leaves it off (404).
	LoRACatalog string // catalog file (go/lora format); reload with LoRAs().Reload / Watch
	// LoRADir is where the catalog's adapter files ("path") resolve: with an image model, every entry's file is
	// loaded and validated against it when the catalog loads (a reload that fails keeps the previous catalog); ""
	// leaves adapters off (the catalog serves search only).
	LoRADir string
	// LoRADefault is what an image request without "lora" gets: "none" or "auto".
	LoRADefault string
	MaxLoRAs    int // adapters per image request
	// PNGCompression is how hard image answers are compressed: "speed" (zlib level 1), "default" (Go's: 6x slower
	// on a smooth 1024x1024 image for 20 % fewer bytes), "best" or "none".
	PNGCompression string
	// EmbedModel is a sentence-embedding model directory served as EmbedModelName ("": "embedding"): POST
	// /v1/embeddings' default model, and the one LoRA search embeds with; required with LoRACatalog.
	EmbedModel     string
	EmbedModelName string
	Embedder       lora.Embedder // optional: used instead of a model opened from EmbedModel
	Logger         *slog.Logger  // catalog (re)load messages; nil: slog.Default()
}

// configSettings is the one table of Config's limits and queues.
var configSettings = []settings.Setting[Config]{
	settings.Int("max-body", "CUTENATIVE_MAX_BODY_BYTES", int64(8<<20), 1, "request body limit in bytes",
		func(c *Config) *int64 { return &c.MaxBodyBytes }),
	settings.Int("max-batch", "CUTENATIVE_MAX_BATCH", 64, 1, "series per merged library call (1: no batching)",
		func(c *Config) *int { return &c.MaxBatch }),
	settings.Duration("max-wait", "CUTENATIVE_MAX_WAIT", 2*time.Millisecond, 0,
		"how long a batch waits for more requests when others are queued (0: never)",
		func(c *Config) *time.Duration { return &c.MaxWait }),
	settings.Int("queue", "CUTENATIVE_QUEUE", 256, 1, "requests waiting per model before 429",
		func(c *Config) *int { return &c.QueueSize }),
	settings.Duration("timeout", "CUTENATIVE_TIMEOUT", 30*time.Second, time.Millisecond,
		"per-request time limit, from the first byte read to the answer (504 beyond)",
		func(c *Config) *time.Duration { return &c.Timeout }),
	settings.Int("max-series", "CUTENATIVE_MAX_SERIES", 1024, 1, "series per request",
		func(c *Config) *int { return &c.MaxSeries }),
	settings.Int("max-horizon", "CUTENATIVE_MAX_HORIZON", 65536, 1, "steps per request (the model's limit applies too)",
		func(c *Config) *int { return &c.MaxHorizon }),
	settings.Int("max-output-values", "CUTENATIVE_MAX_OUTPUT_VALUES", int64(4<<20), 1,
		"series x quantile levels x horizon per request; Kronos sample paths count too: channels x horizon for the "+
			"mean paths plus channels x horizon x sample_count for the sample paths (return_samples); 8 more per "+
			"future timestamp returned",
		func(c *Config) *int64 { return &c.MaxOutputValues }),
	settings.Int("max-input-values", "CUTENATIVE_MAX_INPUT_VALUES", int64(4<<20), 1,
		"values and covariate values per request", func(c *Config) *int64 { return &c.MaxInputValues }),
	settings.Duration("long-after", "CUTENATIVE_LONG_AFTER", 25*time.Millisecond, time.Millisecond,
		"estimated compute above which a request runs in its model's long lane (one call at a time; estimates come from "+
			"each model's cost, measured when it loads)",
		func(c *Config) *time.Duration { return &c.LongAfter }),
	settings.Int("long-slots", "CUTENATIVE_LONG_SLOTS", 0, 0,
		"long-lane calls running at once over every model (0: one less than the CPUs, at least 1)",
		func(c *Config) *int { return &c.LongSlots }),
	settings.Int("max-inflight-bytes", "CUTENATIVE_MAX_INFLIGHT_BYTES", int64(256<<20), 1<<20,
		"bytes all requests in flight may hold: their decoded bodies (counted while they are read) and their answers "+
			"(estimated before the model runs); beyond, 429 (413 for a request that alone needs more)",
		func(c *Config) *int64 { return &c.MaxInflightBytes }),
	settings.Int("max-images", "CUTENATIVE_MAX_IMAGES", 4, 1, "images per request (n)",
		func(c *Config) *int { return &c.MaxImages }),
	settings.Bool("batch-images", "CUTENATIVE_BATCH_IMAGES", false,
		"make a request's n images in one library call, as one batch (each within rounding of its one-image call; "+
			"its GPU throughput is not measured yet)", func(c *Config) *bool { return &c.BatchImages }),
	settings.Int("max-image-pixels", "CUTENATIVE_MAX_IMAGE_PIXELS", int64(2048*2048), 1, "width x height of one image",
		func(c *Config) *int64 { return &c.MaxImagePixels }),
	settings.Int("max-image-steps", "CUTENATIVE_MAX_IMAGE_STEPS", 100, 1, "denoising steps of one image",
		func(c *Config) *int { return &c.MaxImageSteps }),
	settings.Int("max-loras", "CUTENATIVE_MAX_LORAS", 3, 1, "LoRA adapters one image request may apply at once",
		func(c *Config) *int { return &c.MaxLoRAs }),
	settings.String("lora-default", "CUTENATIVE_LORA_DEFAULT", "none",
		`what an image request without "lora" gets: none, or auto (the catalog's router picks one, or none below its threshold)`,
		settings.OneOf("none", "auto"), func(c *Config) *string { return &c.LoRADefault }),
	settings.String("png-compression", "CUTENATIVE_PNG_COMPRESSION", "speed",
		"how hard image answers are compressed: speed (zlib level 1), default (Go's level: ~6x the time for ~20 % "+
			"fewer bytes on a smooth 1024x1024 image), best, or none",
		settings.OneOf("speed", "default", "best", "none"), func(c *Config) *string { return &c.PNGCompression }),
	settings.String("lora-dir", "CUTENATIVE_LORA_DIR", "",
		"directory the LoRA catalog's adapter files resolve in (no file outside it is read): with an image model, each "+
			"entry's file is loaded and checked against the model when the catalog loads; \"\": adapters off (search only)",
		nil, func(c *Config) *string { return &c.LoRADir }),
	settings.Int("max-call-bytes", "CUTENATIVE_MAX_CALL_BYTES", int64(2<<30), 1<<20,
		"estimated working memory of one library call (activations, KV caches, sample buffers), checked before it runs",
		func(c *Config) *int64 { return &c.MaxCallBytes }),
	settings.Int("max-series-len", "CUTENATIVE_MAX_SERIES_LEN", 100000, 1, "values per series",
		func(c *Config) *int { return &c.MaxSeriesLen }),
	settings.Int("max-inflight", "CUTENATIVE_MAX_INFLIGHT", 1024, 1, "requests being read, validated, queued or run at once before 429",
		func(c *Config) *int { return &c.MaxInflight }),
	settings.Int("max-inflight-per-key", "CUTENATIVE_MAX_INFLIGHT_PER_KEY", 0, 0,
		"requests one API key may have in flight (0: half of -max-inflight with two keys or more, no bound otherwise)",
		func(c *Config) *int { return &c.MaxInflightPerKey }),
	settings.Int("long-queue", "CUTENATIVE_LONG_QUEUE", 4, 1, "requests waiting for a model's long lane before 429",
		func(c *Config) *int { return &c.LongQueue }),
}

// Settings returns the table of Config's limits and queues: name (the flag), environment variable, default,
// help and check of each. cmd/cutenative-server builds its flags, environment and -h text from it; entries
// marked settings.CodeOnly have no flag. The slice is a copy.
func Settings() []settings.Setting[Config] {
	return append([]settings.Setting[Config](nil), configSettings...)
}

// DefaultConfig returns a Config holding every default of Settings() (no models).
func DefaultConfig() Config {
	var c Config
	if err := settings.Defaults(configSettings, &c); err != nil {
		panic(err) // the table is wrong: TestConfigSettings fails first
	}
	return c
}

// complete gives the fields left at zero their defaults and checks the others (errors.Is settings.ErrInvalid).
func (c *Config) complete() error { return settings.Complete(configSettings, c) }

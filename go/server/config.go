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
	Models       map[string]string // model name -> model directory (set by the operator, never by a request)
	DefaultModel string            // used when a request names none; default: the only / first model
	Open         cutenative.Options
	APIKeys      []string      // bearer keys; empty: no authentication
	MaxBodyBytes int64         // request body limit
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

	// Fairness: a request whose cost (rows x forward passes: a row per series and per covariate, a pass per
	// native horizon of the model) is above LongCost runs in its model's long lane, one at a time, beside
	// the short lane's merged calls, so a long rollout never delays short requests; at most LongQueue wait
	// for that lane before 429.
	LongCost  int64
	LongQueue int

	// LoRA search (POST /v1/loras/search); LoRACatalog "" leaves it off (404).
	LoRACatalog string // catalog file (go/lora format); reload with LoRAs().Reload / Watch
	EmbedModel  string // sentence-embedding model directory: POST /v1/embeddings; required with LoRACatalog
	// The embedding model's id in /v1/models and POST /v1/embeddings; "": "embedding".
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
	settings.Int("long-cost", "CUTENATIVE_LONG_COST", int64(256), 1,
		"rows (series + covariates) x forward passes above which a request runs in the model's long lane",
		func(c *Config) *int64 { return &c.LongCost }),
	codeOnly(settings.Int("max-series-len", "", 100000, 1, "values per series",
		func(c *Config) *int { return &c.MaxSeriesLen })),
	codeOnly(settings.Int("max-inflight", "", 1024, 1, "requests being read, validated, queued or run at once before 429",
		func(c *Config) *int { return &c.MaxInflight })),
	codeOnly(settings.Int("long-queue", "", 4, 1, "requests waiting for a model's long lane before 429",
		func(c *Config) *int { return &c.LongQueue })),
}

func codeOnly(s settings.Setting[Config]) settings.Setting[Config] {
	s.Where = settings.CodeOnly
	return s
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

package server

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/lora"
)

//go:embed openapi.json
var openAPIDocument []byte

type loadedModel struct {
	name   string
	model  *cutenative.Model
	info   cutenative.Info
	levels []float32
	queue  *jobQueue       // short requests (forecasts merged when they can be): queue.go
	long   *jobQueue       // requests above Config.LongCost, one at a time
	merge  *mergeForecasts // the forecast endpoint's policy (merge.go)
	loaded time.Time       // when Load opened it (/v1/models' created)
}

// Server serves the HTTP API over in-process models. Create with New, serve Handler(), stop with
// Drain then Close.
type Server struct {
	cfg     Config
	metrics *metrics
	keys    [][32]byte

	mu       sync.RWMutex
	models   map[string]*loadedModel
	state    atomic.Int32 // stateLoading, stateReady, stateDraining
	inflight atomic.Int64 // forecast requests admitted and not yet answered

	loras       atomic.Pointer[lora.Registry] // nil: LoRA search off, loading or closed
	loraEmb     lora.Embedder
	embedModel  *cutenative.Model             // opened from cfg.EmbedModel; closed by Close
	loraSlots   chan struct{}                 // embeddings running at once
	loraWaiting atomic.Int64                  // searches admitted (running or waiting for a slot)
	embedEntry  atomic.Pointer[api.ModelInfo] // the embedding model's /v1/models entry; nil: none loaded
}

const (
	stateLoading int32 = iota
	stateReady
	stateDraining
)

// New validates the configuration; Load then opens the models (readyz answers 503 until it is done).
func New(cfg Config) (*Server, error) {
	if err := cfg.complete(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if len(cfg.Models) == 0 {
		return nil, errors.New("server: no models configured")
	}
	if cfg.DefaultModel == "" {
		names := make([]string, 0, len(cfg.Models))
		for n := range cfg.Models {
			names = append(names, n)
		}
		sort.Strings(names)
		cfg.DefaultModel = names[0]
	}
	if _, ok := cfg.Models[cfg.DefaultModel]; !ok {
		return nil, fmt.Errorf("server: default model %q is not configured", cfg.DefaultModel)
	}
	if cfg.LoRACatalog != "" && cfg.EmbedModel == "" && cfg.Embedder == nil {
		return nil, errors.New("server: a LoRA catalog needs a sentence-embedding model (EmbedModel)")
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), models: map[string]*loadedModel{},
		loraSlots: make(chan struct{}, runtime.GOMAXPROCS(0))}
	s.metrics.loras = s.LoRAs
	for _, k := range cfg.APIKeys {
		if k == "" {
			return nil, errors.New("server: empty API key")
		}
		s.keys = append(s.keys, sha256.Sum256([]byte(k)))
	}
	return s, nil
}

// Config returns the configuration in effect: the one given to New with its defaults filled in.
func (s *Server) Config() Config { return s.cfg }

// Load opens every configured model; on failure the ones opened are closed again.
func (s *Server) Load() error {
	for name, dir := range s.cfg.Models {
		m, err := cutenative.Open(dir, &s.cfg.Open)
		if err != nil {
			s.Close()
			return fmt.Errorf("model %q: %w", name, err)
		}
		info, err := m.Info()
		var levels []float32
		if err == nil {
			levels, err = modelLevels(m, info)
		}
		if err != nil {
			m.Close()
			s.Close()
			return fmt.Errorf("model %q: %w", name, err)
		}
		lm := &loadedModel{name: name, model: m, info: info, levels: levels, loaded: time.Now(),
			queue: newJobQueue(name, "short", s.cfg.QueueSize, s.metrics),
			long:  newJobQueue(name, "long", s.cfg.LongQueue, s.metrics),
			merge: &mergeForecasts{forecast: m.Forecast, maxSeries: s.cfg.MaxBatch, wait: s.cfg.MaxWait}}
		s.metrics.model(name, info.Kind, info.Device, info.DType, info.Mode)
		s.mu.Lock()
		s.models[name] = lm
		s.mu.Unlock()
	}
	if s.cfg.EmbedModel != "" || s.cfg.Embedder != nil {
		if err := s.loadEmbedder(); err != nil {
			s.Close()
			return err
		}
	}
	if s.cfg.LoRACatalog != "" {
		if err := s.loadLoRAs(context.Background()); err != nil {
			s.Close()
			return fmt.Errorf("LoRA catalog: %w", err)
		}
	}
	s.state.Store(stateReady)
	return nil
}

// Drain makes /readyz answer 503 so load balancers stop sending traffic; in-flight requests go on.
func (s *Server) Drain() { s.state.Store(stateDraining) }

// Close finishes queued work and frees the models. Call after http.Server.Shutdown returned.
func (s *Server) Close() {
	s.state.Store(stateDraining)
	s.mu.Lock()
	models := s.models
	s.models = map[string]*loadedModel{}
	s.mu.Unlock()
	for _, m := range models {
		m.queue.close()
		m.long.close()
		m.model.Close()
	}
	s.loras.Store(nil)      // searches in flight finish (or get 503 from the closed model)
	s.embedEntry.Store(nil) // /v1/embeddings and /v1/models stop naming the embedding model
	if s.embedModel != nil {
		s.embedModel.Close()
	}
}

type route struct {
	method, path string
	handler      http.HandlerFunc
}

// routes is the one list of endpoints: Handler serves it and the OpenAPI test compares it with
// openapi.json.
func (s *Server) routes() []route {
	return []route{
		{"POST", "/v1/forecast", s.authed("forecast", s.handleForecast)},
		{"GET", "/v1/models", s.authed("models", s.handleModels)},
		{"POST", "/v1/embeddings", s.authed("embeddings", s.handleEmbeddings)},
		{"POST", "/v1/loras/search", s.authed("lora_search", s.handleLoRASearch)},
		{"GET", "/livez", func(w http.ResponseWriter, r *http.Request) {
			writeJSONStatic(w, http.StatusOK, map[string]string{"status": "ok"})
		}},
		{"GET", "/readyz", s.handleReady},
		{"GET", "/metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			s.metrics.write(w)
		}},
		{"GET", "/openapi.json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(openAPIDocument)
		}},
	}
}

// Handler returns the HTTP routes behind the access log (accesslog.go): a request id, one log line per
// request, JSON 404 and 405 answers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes() {
		mux.HandleFunc(r.method+" "+r.path, r.handler)
	}
	return s.serveLogged(mux)
}

// authed checks the bearer key (constant time, one answer for every failure) and counts the outcome.
func (s *Server) authed(endpoint string, h func(http.ResponseWriter, *http.Request) *apiError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if len(s.keys) > 0 && !s.keyOK(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cutenative"`)
			s.metrics.countRequest(endpoint, "unauthorized")
			writeError(w, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "missing or invalid API key"})
			return
		}
		if e := h(w, r); e != nil {
			if e.Status >= 500 {
				noteCause(r, e.logCause())
			}
			s.metrics.countRequest(endpoint, e.Code)
			writeError(w, e)
			return
		}
		s.metrics.countRequest(endpoint, "ok")
	}
}

func (s *Server) logger() *slog.Logger {
	if s.cfg.Logger != nil {
		return s.cfg.Logger
	}
	return slog.Default()
}

// keyOK checks "Authorization: Bearer <key>" (the scheme is case-insensitive, RFC 9110 section 11.1).
func (s *Server) keyOK(header string) bool {
	scheme, token, ok := strings.Cut(header, " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	digest := sha256.Sum256([]byte(token))
	match := 0
	for _, k := range s.keys { // every key is compared: timing says nothing about which one matched
		match |= subtle.ConstantTimeCompare(digest[:], k[:])
	}
	return ok && match == 1
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	switch s.state.Load() {
	case stateReady:
		writeJSONStatic(w, http.StatusOK, map[string]string{"status": "ready"})
	case stateLoading:
		writeJSONStatic(w, http.StatusServiceUnavailable, map[string]string{"status": "loading"})
	default:
		writeJSONStatic(w, http.StatusServiceUnavailable, map[string]string{"status": "draining"})
	}
}

func (s *Server) model(name string) (*loadedModel, *apiError) {
	if name == "" {
		name = s.cfg.DefaultModel
	}
	s.mu.RLock()
	m := s.models[name]
	s.mu.RUnlock()
	if m == nil {
		if s.state.Load() == stateLoading {
			return nil, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "models are loading"}
		}
		return nil, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: fmt.Sprintf("no model named %q", name)}
	}
	return m, nil
}

// handleForecast: admission (a counter, before the body is read), then reading, decoding and validation
// within the request's deadline, every size checked before it is allocated; then the model's lane, the
// library call, and an answer encoded in full before the status is sent.
func (s *Server) handleForecast(w http.ResponseWriter, r *http.Request) *apiError {
	release, err := s.admit()
	if err != nil {
		return fromError(err)
	}
	defer release()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok { // the body too arrives within the request's timeout (408 otherwise)
		_ = http.NewResponseController(w).SetReadDeadline(dl)
	}
	data, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		return e
	}
	req, err := decodeForecast(data)
	if err != nil {
		return fromError(err)
	}
	m, e := s.model(req.Model)
	noteModel(r, cmp.Or(req.Model, s.cfg.DefaultModel), e == nil, len(req.Series))
	if e != nil {
		return e
	}
	if m.info.Kind == kindKronos {
		return s.forecastKronos(ctx, w, m, req)
	}
	lim := limits{MaxSeries: s.cfg.MaxSeries, MaxSeriesLen: s.cfg.MaxSeriesLen, MaxCovariates: 64, MaxQuantiles: 99,
		MaxHorizon: s.cfg.MaxHorizon, ModelMaxHorizon: m.info.MaxHorizon, MaxOutputValues: s.cfg.MaxOutputValues,
		MaxInputValues: s.cfg.MaxInputValues, MaxGroupRows: 256}
	if err := req.validate(ctx, lim); err != nil {
		return fromError(err)
	}
	if err := ctx.Err(); err != nil {
		return fromError(err)
	}
	breq := toBinding(req)
	lane, key := m.queue, ""
	if cost(breq, m.info) > s.cfg.LongCost {
		lane = m.long
	} else if s.cfg.MaxBatch > 1 {
		key = batchKey(breq, int(m.info.ContextLength))
	}
	f, first, err := m.merge.submit(ctx, lane, breq, key)
	if err != nil {
		return fromError(err)
	}
	if i := nonFiniteSeries(f, first, len(req.Series)); i >= 0 {
		return badRequest(fmt.Sprintf("series[%d]: the forecast is not finite: its values are too large for the model's "+
			"float32 normalisation (magnitudes from about 1e19 overflow)", i))
	}
	return s.writeJSON(w, http.StatusOK, buildResponse(m.name, req, f, first))
}

// cost estimates a request's work in model rows x forward passes: a row per series and per covariate, a
// pass per native horizon (longer horizons roll out pass after pass).
func cost(r *cutenative.ForecastRequest, info cutenative.Info) int64 {
	native := info.NativeHorizon
	if native < 1 {
		native = 1
	}
	passes := (int64(r.Horizon) + native - 1) / native
	return int64(len(r.Series)+len(r.Covariates)) * passes
}

// nonFiniteSeries returns the first of n series (from first in f) holding a NaN or Inf, or -1.
func nonFiniteSeries(f *cutenative.Forecast, first, n int) int {
	for i := 0; i < n; i++ {
		for q := range f.Quantiles {
			for _, v := range f.Row(first+i, q) {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					return i
				}
			}
		}
	}
	return -1
}

package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/lora"
)

//go:embed openapi.json
var openAPIDocument []byte

// Server serves the HTTP API over in-process models. Create with New, serve Handler(), stop with
// Drain then Close.
type Server struct {
	cfg       Config
	metrics   *metrics
	keys      [][32]byte
	bytes     *byteBudget   // bytes in flight (budget.go)
	longSlots chan struct{} // long-lane calls running at once, over every model

	mu       sync.RWMutex
	models   map[string]*servedModel // the one table (registry.go)
	defaults map[capability]string   // the model a request naming none gets, per capability
	state    atomic.Int32            // stateLoading, stateReady, stateDraining
	inflight atomic.Int64            // requests admitted and not yet answered

	keyInflight []atomic.Int64 // per API key: requests admitted and not yet answered

	loras atomic.Pointer[lora.Registry] // nil: LoRA search off, loading or closed
	// promptVecs keeps the embedding model's vectors of the prompts routed most recently (LoRA search and
	// lora "auto"): a prompt seen again is not embedded again.
	promptVecs *lora.VectorCache

	adaptersMu     sync.Mutex
	adapters       *catalogAdapters      // the catalog in service's adapters (attachAdapters)
	retired        []*cutenative.Adapter // dropped by a reload, freed after a grace period (closeLater)
	adaptersClosed bool                  // Close began: no catalog attaches adapters any more
	adapterGrace   time.Duration         // tests: how long a dropped adapter lives (0: 2 × Timeout)

	endpointNames map[string]string // route pattern -> its name in metrics (set by Handler)

	// imageCancelled, when set (tests), hears of each image call its request cancelled: the steps done when the
	// cancellation came, when the call ended, and in all.
	imageCancelled func(atCancel, atEnd, total uint64)
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
	if _, _, _, err := cfg.modelSpecs(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if len(cfg.Models) == 0 && cfg.EmbedModel == "" && cfg.Embedder == nil {
		return nil, errors.New("server: no models configured")
	}
	if cfg.DefaultModel != "" { // "": the first model by name that forecasts (Load: defaultsFor)
		if _, ok := cfg.Models[cfg.DefaultModel]; !ok {
			return nil, fmt.Errorf("server: default model %q is not configured", cfg.DefaultModel)
		}
	}
	if cfg.LoRACatalog != "" && cfg.EmbedModel == "" && cfg.Embedder == nil {
		return nil, errors.New("server: a LoRA catalog needs a sentence-embedding model (EmbedModel)")
	}
	if cfg.LoRADir != "" && cfg.LoRACatalog == "" {
		return nil, errors.New("server: lora-dir names where a LoRA catalog's files are, and no catalog is set (lora-catalog)")
	}
	if cfg.LoRADefault == "auto" && (cfg.LoRACatalog == "" || cfg.LoRADir == "") {
		return nil, errors.New(`server: lora-default "auto" routes through a LoRA catalog's adapters: it needs lora-catalog and lora-dir`)
	}
	if cfg.LongSlots == 0 {
		cfg.LongSlots = max(1, runtime.GOMAXPROCS(0)-1)
	}
	s := &Server{cfg: cfg, metrics: newMetrics(), models: map[string]*servedModel{}, promptVecs: lora.NewVectorCache(promptCacheEntries), bytes: newByteBudget(cfg.MaxInflightBytes),
		longSlots: make(chan struct{}, cfg.LongSlots), keyInflight: make([]atomic.Int64, len(cfg.APIKeys))}
	if s.cfg.MaxInflightPerKey == 0 && len(cfg.APIKeys) > 1 {
		s.cfg.MaxInflightPerKey = max(1, cfg.MaxInflight/2)
	}
	s.metrics.loras = s.LoRAs
	s.metrics.promptVecs = s.promptVecs
	s.metrics.adapterStats = s.adapterStats
	s.metrics.bytes = s.bytes
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

// AddMetrics adds series that write writes to /metrics (the command's connection counts).
func (s *Server) AddMetrics(write func(w io.Writer)) { s.metrics.addExtra(write) }

// Load opens every configured model with its options, measures each one's cost model, and loads the LoRA
// catalog; on failure the models opened are closed again.
func (s *Server) Load() error {
	ctx := context.Background()
	names, dirs, opts, err := s.cfg.modelSpecs()
	if err != nil {
		return err
	}
	for _, name := range names {
		m, err := s.open(ctx, name, dirs[name], opts[name])
		if err != nil {
			s.Close()
			return fmt.Errorf("model %q: %w", name, err)
		}
		s.add(m)
	}
	if s.cfg.Embedder != nil {
		name := s.cfg.embedModelName()
		if _, dup := dirs[name]; dup {
			s.Close()
			return fmt.Errorf("the embedding model's name %q is also a model of -models", name)
		}
		sm := &servedModel{name: name, kind: "embedding", spec: kinds["embedding"], caps: capEmbed, levels: []float32{},
			embed: s.cfg.Embedder.Embed, cost: fixedCost, loaded: time.Now()}
		sm.info.Kind = "embedding"
		if d, ok := s.cfg.Embedder.(interface{ Dim() int }); ok {
			sm.info.EmbeddingDim = int64(d.Dim())
		}
		s.add(sm)
		names = append(names, name)
		sort.Strings(names)
	}
	s.mu.Lock()
	err = s.defaultsFor(names)
	s.mu.Unlock()
	if err != nil {
		s.Close()
		return err
	}
	if s.cfg.LoRACatalog != "" {
		if err := s.loadLoRAs(ctx); err != nil {
			s.Close()
			return fmt.Errorf("LoRA catalog: %w", err)
		}
	}
	s.state.Store(stateReady)
	return nil
}

// add puts a model in the table with its lanes.
func (s *Server) add(m *servedModel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.models[m.name]; old != nil && old.short != nil {
		old.short.close()
		old.long.close()
	}
	s.lanes(m)
	s.models[m.name] = m
	s.metrics.model(m.name, m.kind, m.info.Device, m.info.DType, m.info.Mode, m.caps&capGenerate != 0)
}

// Drain makes /readyz answer 503 so load balancers stop sending traffic; in-flight requests go on.
func (s *Server) Drain() { s.state.Store(stateDraining) }

// Close finishes queued work and frees the models. Call after http.Server.Shutdown returned.
func (s *Server) Close() {
	s.state.Store(stateDraining)
	s.mu.Lock()
	models := s.models
	s.models = map[string]*servedModel{}
	s.mu.Unlock()
	s.loras.Store(nil) // searches in flight finish (or get 503 from the closed model)
	for _, m := range models {
		if m.short != nil {
			m.short.close()
			m.long.close()
		}
	}
	s.closeAdapters() // after the queued work, before the models they were loaded against
	for _, m := range models {
		if m.model != nil {
			m.model.Close()
		}
	}
}

type route struct {
	method, path string
	handler      http.HandlerFunc
	name         string // in metrics
}

// routes is the one list of endpoints: Handler serves it and the OpenAPI test compares it with
// openapi.json.
func (s *Server) routes() []route {
	return []route{
		{"POST", "/v1/forecast", s.endpoint("forecast", s.handleForecast), "forecast"},
		{"GET", "/v1/models", s.endpoint("models", s.handleModels), "models"},
		{"POST", "/v1/embeddings", s.endpoint("embeddings", s.handleEmbeddings), "embeddings"},
		{"POST", "/v1/loras/search", s.endpoint("lora_search", s.handleLoRASearch), "lora_search"},
		{"GET", "/v1/loras", s.endpoint("loras", s.handleLoRAList), "loras"},
		{"POST", "/v1/images/generations", s.endpoint("images", s.handleImages), "images"},
		{"GET", "/livez", func(w http.ResponseWriter, r *http.Request) {
			writeJSONStatic(w, http.StatusOK, map[string]string{"status": "ok"})
		}, "livez"},
		{"GET", "/readyz", s.handleReady, "readyz"},
		{"GET", "/metrics", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			s.metrics.write(w)
		}, "metrics"},
		{"GET", "/openapi.json", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(openAPIDocument)
		}, "openapi"},
	}
}

// Handler returns the HTTP routes behind the access log (accesslog.go): a request id, one log line per
// request, JSON 404 and 405 answers.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.endpointNames = map[string]string{}
	for _, r := range s.routes() {
		mux.HandleFunc(r.method+" "+r.path, r.handler)
		s.endpointNames[r.method+" "+r.path] = r.name
	}
	return s.serveLogged(mux)
}

// endpoint checks what every API request must pass before anything else (guard.go: a JSON body on POST, a
// same-site origin when auth is off), then the bearer key (constant time, one answer for every failure), runs
// the handler, and counts the outcome and any refusal's reason.
func (s *Server) endpoint(name string, h func(http.ResponseWriter, *http.Request) *apiError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		e := s.guard(r)
		if e == nil && len(s.keys) > 0 {
			key := s.keyIndex(r.Header.Get("Authorization"))
			if key < 0 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cutenative"`)
				e = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized", reason: "api_key", Message: "missing or invalid API key"}
			} else if ri := infoOf(r); ri != nil {
				ri.key = key
			}
		}
		if e == nil {
			e = h(w, r)
		}
		if e == nil {
			s.metrics.countRequest(name, "ok")
			return
		}
		if e.Status >= 500 {
			noteCause(r, e.logCause())
		}
		s.metrics.countRequest(name, e.Code)
		switch e.Status {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusUnauthorized,
			http.StatusForbidden, http.StatusUnsupportedMediaType, http.StatusRequestTimeout:
			s.metrics.refuse(name, cmpOr(e.reason, e.Code))
		}
		linger := false
		switch e.Status {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusUnauthorized,
			http.StatusForbidden, http.StatusUnsupportedMediaType, http.StatusRequestTimeout:
			// Refused with its body perhaps unread (or read only in part): the connection closes after the answer,
			// and the rest of the body is read and discarded for at most lingerTime first (nginx's lingering
			// close): a client still writing its body would otherwise get a TCP reset that discards the answer
			// from its receive buffer before it reads it. A slow or large body holds a connection lingerTime at
			// most after its answer; nothing of it is kept.
			if r.Body != nil && r.Body != http.NoBody {
				linger = http.NewResponseController(w).EnableFullDuplex() == nil
			}
			if e.Status != http.StatusBadRequest {
				w.Header().Set("Connection", "close")
			}
		}
		writeError(w, e)
		if linger {
			s.linger(w, r)
		}
	}
}

// lingerTime bounds how long a refused request's unread body is drained after its answer (endpoint).
const lingerTime = 2 * time.Second

// linger flushes the answer, then reads and discards what is left of the request's body, at most MaxBodyBytes
// and lingerTime.
func (s *Server) linger(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	_ = rc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, s.cfg.MaxBodyBytes))
}

// requestScope is what a request holds while the server works on it: its admission, its deadline, its share
// of the bytes in flight and its body, limited on the wire.
type requestScope struct {
	ctx     context.Context
	cancel  context.CancelFunc
	acct    *account
	body    io.Reader
	release func()
}

// begin admits a request (Config.MaxInflight, before its body is read) and sets its deadline, which the body's
// arrival is bound by too (408 otherwise). Call end when the request is answered.
func (s *Server) begin(w http.ResponseWriter, r *http.Request) (*requestScope, *apiError) {
	key := -1
	if ri := infoOf(r); ri != nil {
		key = ri.key
	}
	release, err := s.admit(key)
	if err != nil {
		return nil, fromError(err)
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	if dl, ok := ctx.Deadline(); ok {
		_ = http.NewResponseController(w).SetReadDeadline(dl)
	}
	return &requestScope{ctx: ctx, cancel: cancel, acct: s.bytes.open(), body: http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes),
		release: release}, nil
}

func (rq *requestScope) end() {
	rq.acct.release()
	rq.cancel()
	rq.release()
}

func (s *Server) logger() *slog.Logger {
	if s.cfg.Logger != nil {
		return s.cfg.Logger
	}
	return slog.Default()
}

// keyOK checks "Authorization: Bearer <key>" (the scheme is case-insensitive, RFC 9110 section 11.1).
func (s *Server) keyOK(header string) bool { return s.keyIndex(header) >= 0 }

// keyIndex is the index of the key the header carries, or -1.
func (s *Server) keyIndex(header string) int {
	scheme, token, ok := strings.Cut(header, " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	digest := sha256.Sum256([]byte(token))
	index := -1
	for i, k := range s.keys { // every key is compared: timing says nothing about which one matched
		if subtle.ConstantTimeCompare(digest[:], k[:]) == 1 {
			index = i
		}
	}
	if !ok {
		return -1
	}
	return index
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

// defaultName is the name of the model a request naming none gets for c ("" : none).
func (s *Server) defaultName(c capability) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.defaults[c]
}

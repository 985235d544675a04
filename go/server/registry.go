package server

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
)

// The served models are one table, keyed by name: every kind the library loads (forecasters, the embedding model,
// image models), each opened with its own options, each with its two lanes (queue.go) and its cost model
// (cost.go). Endpoints find a model by name and capability; what a kind can do on this server is the kinds table
// below and nowhere else.

// capability is what an endpoint needs from a model.
type capability uint8

const (
	capForecast capability = 1 << iota // POST /v1/forecast
	capEmbed                           // POST /v1/embeddings, LoRA search
	capGenerate                        // images (the endpoint comes with the LoRA adapters)
)

func (c capability) String() string {
	var out []string
	for _, n := range []struct {
		c    capability
		name string
	}{{capForecast, "forecast"}, {capEmbed, "embed"}, {capGenerate, "generate"}} {
		if c&n.c != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, ",")
}

// kindSpec is what the server does with one kind of model.
type kindSpec struct {
	caps capability
	// mode is the kind's own mode, used when the model's options name none ("": the server's -mode, for the
	// kinds that have every mode).
	mode string
	// forecaster makes the kind's POST /v1/forecast implementation (capForecast).
	forecaster func(m *servedModel) (forecaster, error)
}

// kinds is the one table of kinds: cn_model_kind_name's names.
var kinds = map[string]kindSpec{
	"chronos2":  {caps: capForecast, forecaster: newChronos2},
	"kronos":    {caps: capForecast, forecaster: newKronos},
	"toto":      {caps: capForecast, forecaster: newToto},
	"embedding": {caps: capEmbed, mode: "eager"},
	"zimage":    {caps: capGenerate}, // every mode (fused: the DiT's fused kernels, within bf16 rounding of eager)
}

// ModelOptions are one model's open options; a field left "" takes the server's (Config.Open), and Mode the
// kind's own where the kind has one (embedding models run eager).
type ModelOptions struct {
	Device string // cpu, cuda, cuda:N
	DType  string // f32, bf16, f16
	Mode   string // eager, graph, fused
}

// servedModel is one entry of the table.
type servedModel struct {
	name   string
	kind   string
	spec   kindSpec
	caps   capability
	model  *cutenative.Model // nil for Config.Embedder
	info   cutenative.Info
	levels []float32 // the model's quantile levels (Chronos-2), [] for the others
	fc     forecaster
	embed  func(ctx context.Context, texts []string) ([][]float32, error)
	cost   costModel
	short  *jobQueue
	long   *jobQueue
	merge  *mergeForecasts
	loaded time.Time
	dir    string // the model's directory ("" for Config.Embedder), for files a kind reads besides the library
}

// modelSpecs lists what Load opens, by name: Config.Models, and Config.EmbedModel as EmbedModelName (f32 and
// eager unless its options say otherwise: the LoRA catalogs' thresholds are measured on f32 embeddings).
func (c *Config) modelSpecs() ([]string, map[string]string, map[string]ModelOptions, error) {
	dirs := map[string]string{}
	opts := map[string]ModelOptions{}
	for n, d := range c.Models {
		dirs[n] = d
		opts[n] = c.ModelOptions[n]
	}
	if c.EmbedModel != "" && c.Embedder == nil { // an Embedder stands in for the model (Load)
		name := c.embedModelName()
		if _, dup := dirs[name]; dup {
			return nil, nil, nil, fmt.Errorf("the embedding model's name %q is also a model of -models", name)
		}
		o := c.ModelOptions[name]
		if o.DType == "" {
			o.DType = "f32"
		}
		if o.Mode == "" {
			o.Mode = "eager"
		}
		dirs[name], opts[name] = c.EmbedModel, o
	}
	for n := range c.ModelOptions {
		if _, ok := dirs[n]; !ok && n != c.embedModelName() {
			return nil, nil, nil, fmt.Errorf("options for model %q, which is not configured", n)
		}
	}
	names := make([]string, 0, len(dirs))
	for n := range dirs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, dirs, opts, nil
}

// open loads one model with its options, picks its mode, and measures its cost model.
func (s *Server) open(ctx context.Context, name, dir string, o ModelOptions) (*servedModel, error) {
	opts := cutenative.Options{Device: cmpOr(o.Device, s.cfg.Open.Device), DType: cmpOr(o.DType, s.cfg.Open.DType),
		Threads: s.cfg.Open.Threads, CheckTensors: s.cfg.Open.CheckTensors, MmapWeights: s.cfg.Open.MmapWeights}
	m, err := cutenative.Open(dir, &opts)
	if err != nil {
		return nil, err
	}
	sm, err := s.serve(ctx, name, dir, m, o)
	if err != nil {
		m.Close()
		return nil, err
	}
	return sm, nil
}

// serve puts an opened model in service; dir is where it was opened from ("" when unknown).
func (s *Server) serve(ctx context.Context, name, dir string, m *cutenative.Model, o ModelOptions) (*servedModel, error) {
	info, err := m.Info()
	if err != nil {
		return nil, err
	}
	spec, ok := kinds[info.Kind]
	if !ok {
		return nil, fmt.Errorf("a %s model: the server serves none of that kind", info.Kind)
	}
	mode := cmpOr(o.Mode, spec.mode, s.cfg.Open.Mode)
	if mode != "" && mode != info.Mode {
		if err := m.SetMode(mode); err != nil {
			return nil, fmt.Errorf("mode %s: %w", mode, err)
		}
		if info, err = m.Info(); err != nil {
			return nil, err
		}
	}
	sm := &servedModel{name: name, kind: info.Kind, spec: spec, caps: spec.caps, model: m, info: info, levels: []float32{},
		loaded: time.Now(), dir: dir}
	if spec.caps&capEmbed != 0 {
		sm.embed = m.Embed
	}
	if name == s.cfg.embedModelName() && s.cfg.EmbedModel != "" && spec.caps&capEmbed == 0 {
		return nil, fmt.Errorf("embedding model %s: a %s model, not a sentence-embedding model", s.cfg.EmbedModel, info.Kind)
	}
	if spec.forecaster != nil {
		if sm.fc, err = spec.forecaster(sm); err != nil {
			return nil, err
		}
	}
	if err := s.calibrate(ctx, sm); err != nil {
		return nil, fmt.Errorf("measuring its cost model: %w", err)
	}
	return sm, nil
}

// calibrate measures sm's cost model with two probe calls (cost.go); kinds without an endpoint yet get none.
func (s *Server) calibrate(ctx context.Context, sm *servedModel) error {
	var small, large probe
	switch {
	case sm.fc != nil:
		small, large = sm.fc.probes()
	case sm.embed != nil && sm.model != nil:
		small, large = embedProbes(sm)
	case sm.caps&capGenerate != 0 && sm.model != nil:
		small, large = generateProbes(sm)
	default:
		sm.cost = fixedCost
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c, err := calibrate(ctx, small, large)
	if err != nil {
		return err
	}
	sm.cost = c
	s.logger().Info("cost model", "model", sm.name, "kind", sm.kind, "seconds_per_pass", c.perPass, "seconds_per_unit", c.perUnit)
	return nil
}

// fixedCost is the cost model of a stand-in embedder (Config.Embedder, in tests and embedding programs): a
// millisecond a call, a microsecond a token.
var fixedCost = costModel{perPass: 1e-3, perUnit: 1e-6}

// lanes gives sm its two queues.
func (s *Server) lanes(sm *servedModel) {
	sm.short = newJobQueue(sm.name, "short", s.cfg.QueueSize, s.metrics, nil)
	sm.long = newJobQueue(sm.name, "long", s.cfg.LongQueue, s.metrics, s.longSlots)
	sm.merge = &mergeForecasts{maxSeries: s.cfg.MaxBatch, wait: s.cfg.MaxWait, maxEst: s.cfg.LongAfter.Seconds()}
	if sm.model != nil {
		sm.merge.forecast = sm.model.Forecast
	}
}

func cmpOr(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// find returns the model a request names ("" : the default for the capability), with the capability it needs.
func (s *Server) find(name string, c capability) (*servedModel, *apiError) {
	s.mu.RLock()
	if name == "" {
		name = s.defaults[c]
	}
	m := s.models[name]
	s.mu.RUnlock()
	switch {
	case m == nil && s.state.Load() == stateLoading:
		return nil, &apiError{Status: 503, Code: "unavailable", Message: "models are loading"}
	case m == nil && name == "":
		return nil, &apiError{Status: 404, Code: "not_found", Message: fmt.Sprintf("no model can %s on this server", c)}
	case m == nil:
		return nil, &apiError{Status: 404, Code: "not_found", Message: fmt.Sprintf("no model named %q (models that can %s: %s)",
			name, c, strings.Join(s.able(c), ", "))}
	case m.caps&c == 0:
		return nil, &apiError{Status: 400, Code: "invalid_argument",
			Message: fmt.Sprintf("model %q is a %s model: it cannot %s", name, m.kind, c)}
	}
	return m, nil
}

// able lists the models that have capability c, by name.
func (s *Server) able(c capability) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for n, m := range s.models {
		if m.caps&c != 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	if out == nil {
		out = []string{"none"}
	}
	return out
}

// defaultsFor picks each capability's default model: Config.DefaultModel for forecasts (when it forecasts), the
// embedding model's name for embeddings, else the first model by name that has the capability.
func (s *Server) defaultsFor(names []string) error {
	s.defaults = map[capability]string{}
	for _, c := range []capability{capForecast, capEmbed, capGenerate} {
		want := ""
		switch c {
		case capForecast:
			want = s.cfg.DefaultModel
		case capEmbed:
			if s.cfg.EmbedModel != "" || s.cfg.Embedder != nil {
				want = s.cfg.embedModelName()
			}
		}
		if want != "" {
			m := s.models[want]
			if m == nil {
				return fmt.Errorf("default model %q is not configured", want)
			}
			if m.caps&c == 0 {
				return fmt.Errorf("default model %q is a %s model: it cannot %s", want, m.kind, c)
			}
			s.defaults[c] = want
			continue
		}
		for _, n := range names {
			if s.models[n].caps&c != 0 {
				s.defaults[c] = n
				break
			}
		}
	}
	return nil
}

func (c *Config) embedModelName() string { return cmpOr(c.EmbedModelName, "embedding") }

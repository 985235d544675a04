package server

import (
	"context"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/lora"
)

// embedFunc adapts a model's embed function to lora.Embedder.
type embedFunc func(ctx context.Context, texts []string) ([][]float32, error)

func (f embedFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

// promptCacheEntries is how many routed prompts' vectors the server keeps (each at most lora.MaxPromptBytes of text
// and one vector: under 20 MB in all with MiniLM).
const promptCacheEntries = 1024

// promptVector is the embedding model m's vector of a prompt to route: from the cache of recent prompts, else
// embedded through m's lanes like every model call (and kept).
func (s *Server) promptVector(rq *requestScope, m *servedModel, prompt string) ([]float32, *apiError) {
	key := m.name + "\x00" + prompt
	if v, ok := s.promptVecs.Get(key); ok {
		return v, nil
	}
	vecs, e := s.embedCall(rq, m, []string{prompt})
	if e != nil {
		return nil, e
	}
	s.promptVecs.Put(key, vecs[0])
	return vecs[0], nil
}

// loadLoRAs loads the catalog, embedded with the server's embedding model (Config.EmbedModel or Embedder).
func (s *Server) loadLoRAs(ctx context.Context) error {
	m, e := s.find("", capEmbed)
	if e != nil {
		return e
	}
	reg, err := lora.NewRegistryWith(ctx, s.cfg.LoRACatalog, embedFunc(m.embed), s.logger(), s.attachAdapters)
	if err != nil {
		return err
	}
	s.loras.Store(reg)
	return nil
}

// LoRAs returns the LoRA catalog registry (Reload, Watch, Stats), nil when none is configured or loaded.
func (s *Server) LoRAs() *lora.Registry { return s.loras.Load() }

// loraSearchRequest is a decoded POST /v1/loras/search body (the wire form is api.LoRASearchRequest).
type loraSearchRequest struct {
	Prompt      string
	promptGiven bool
	TopK        *int
}

func decodeLoRASearch(d *decoder) (*loraSearchRequest, error) {
	req := &loraSearchRequest{}
	err := d.r.Object(func(key string) error {
		var err error
		switch key {
		case "prompt":
			req.promptGiven = true
			req.Prompt, err = d.str(lora.MaxPromptBytes)
		case "top_k":
			var n int64
			if n, err = d.integer(math.MinInt32, math.MaxInt32); err == nil {
				k := int(n)
				req.TopK = &k
			}
		default:
			err = d.unknown(key, "a LoRA search")
		}
		return err
	})
	if err == nil {
		err = d.r.End()
	}
	return req, err
}

// handleLoRASearch embeds the prompt through the embedding model's lanes (admission, deadline, cancel, metrics
// like every model call) and ranks the catalog.
func (s *Server) handleLoRASearch(w http.ResponseWriter, r *http.Request) *apiError {
	reg := s.loras.Load()
	if reg == nil {
		switch {
		case s.cfg.LoRACatalog == "":
			return &apiError{Status: http.StatusNotFound, Code: "not_found",
				Message: "LoRA search is not configured (start the server with -lora-catalog and -embed-model)"}
		case s.state.Load() == stateLoading:
			return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the LoRA catalog is loading"}
		default:
			return fromError(errShuttingDown)
		}
	}
	rq, e := s.begin(w, r)
	if e != nil {
		return e
	}
	defer rq.end()
	d, err := newDecoder(rq.body, rq.acct, s.decodeLimits())
	if err != nil {
		return decodeError(err)
	}
	req, err := decodeLoRASearch(d)
	if err != nil {
		return decodeError(err)
	}
	topK := lora.DefaultTopK
	if req.TopK != nil {
		topK = *req.TopK
	}
	if err := lora.CheckPrompt(req.Prompt); err != nil {
		return queryError(err)
	}
	if err := lora.CheckTopK(topK); err != nil {
		return queryError(err)
	}
	m, e := s.find("", capEmbed)
	if e != nil {
		return e
	}
	router := reg.Router() // the catalog this request is answered from, whatever reloads do meanwhile
	start := time.Now()
	vec, e := s.promptVector(rq, m, req.Prompt)
	embedded := time.Now()
	s.metrics.loraEmbedSeconds.observe(embedded.Sub(start).Seconds())
	if e != nil {
		return e
	}
	res, err := router.SearchEmbedding(vec, topK)
	s.metrics.loraRouteSeconds.observe(time.Since(embedded).Seconds())
	if err != nil {
		return fromError(err) // a vector the catalog cannot take: the server's fault (500)
	}
	resp := api.LoRASearchResponse{Candidates: make([]api.LoRACandidate, len(res.Candidates))}
	for i, c := range res.Candidates {
		resp.Candidates[i] = wireCandidate(c)
	}
	resp.Threshold, resp.Decision = router.Catalog().Threshold, "below_threshold"
	if res.Selected != nil {
		resp.Selected = &api.LoRAMatch{Name: res.Selected.Name, Score: res.Selected.Score}
		resp.Decision = "selected"
		s.metrics.loraSelected.Add(1)
	} else {
		s.metrics.loraNoMatch.Add(1)
	}
	return s.writeJSON(w, http.StatusOK, resp)
}

// wireCandidate is a router candidate as the API answers it (the example fields only for entries with examples).
func wireCandidate(c lora.Candidate) api.LoRACandidate {
	w := api.LoRACandidate{Name: c.Name, Score: c.Score, PositiveSimilarity: c.PositiveSimilarity, NegativeSimilarity: c.NegativeSimilarity}
	if c.Example >= 0 {
		example, sim := c.Example, c.ExampleSimilarity
		w.Example, w.ExampleSimilarity = &example, &sim
	}
	return w
}

// queryError turns lora.ErrInvalidQuery into a 400 naming the field.
func queryError(err error) *apiError {
	return badRequest(strings.TrimPrefix(err.Error(), lora.ErrInvalidQuery.Error()+": "))
}

// handleLoRAList answers the catalog in service: every entry with, when an image model holds its adapter, the
// adapter's rank and targets.
func (s *Server) handleLoRAList(w http.ResponseWriter, r *http.Request) *apiError {
	reg := s.loras.Load()
	if reg == nil {
		if s.cfg.LoRACatalog == "" {
			return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no LoRA catalog is configured (-lora-catalog)"}
		}
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the LoRA catalog is loading"}
	}
	router := reg.Router()
	adapters, _ := router.Attachment().(*catalogAdapters)
	cat := router.Catalog()
	out := api.LoRAList{Object: "list", Threshold: cat.Threshold, Data: make([]api.LoRAInfo, 0, len(cat.Entries))}
	for _, e := range cat.Entries {
		info := api.LoRAInfo{Name: e.Name, Description: e.Positive, TriggerWords: e.Triggers, DefaultScale: e.Scale}
		if info.TriggerWords == nil {
			info.TriggerWords = []string{}
		}
		if adapters != nil {
			if a := adapters.byName[e.Name]; a != nil {
				ai := a.Info()
				info.Model, info.Format, info.Rank, info.Targets = adapters.model, ai.Family, ai.MaxRank, ai.Targets
			}
		}
		out.Data = append(out.Data, info)
	}
	return s.writeJSON(w, http.StatusOK, out)
}

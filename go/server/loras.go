package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/lora"
)

// loadEmbedder opens the sentence-embedding model (unless cfg.Embedder is given) that /v1/embeddings serves and
// LoRA search embeds with. It runs on the configured device and threads, in f32 eager mode: the catalog's
// threshold was tuned on f32 embeddings.
func (s *Server) loadEmbedder() error {
	emb := s.cfg.Embedder
	entry := &api.ModelInfo{ID: s.embedModelName(), Object: "model", Created: time.Now().Unix(), OwnedBy: ownedBy,
		Name: s.embedModelName(), Kind: "embedding", Quantiles: []float32{}}
	if emb == nil {
		m, err := cutenative.Open(s.cfg.EmbedModel, &cutenative.Options{Device: s.cfg.Open.Device, Threads: s.cfg.Open.Threads})
		if err != nil {
			return fmt.Errorf("embedding model %s: %w", s.cfg.EmbedModel, err)
		}
		info, err := m.Info()
		if err == nil && info.EmbeddingDim <= 0 {
			err = fmt.Errorf("a %s model, not a sentence-embedding model", info.Kind)
		}
		if err != nil {
			m.Close()
			return fmt.Errorf("embedding model %s: %w", s.cfg.EmbedModel, err)
		}
		s.embedModel = m
		emb = m
		entry.Device, entry.DType, entry.Mode, entry.Parameters = info.Device, info.DType, info.Mode, info.Parameters
		entry.EmbeddingDim, entry.MaxTokens = info.EmbeddingDim, info.MaxTokens
	} else if d, ok := emb.(interface{ Dim() int }); ok {
		entry.EmbeddingDim = int64(d.Dim())
	}
	s.loraEmb = emb
	s.embedEntry.Store(entry)
	return nil
}

// loadLoRAs loads the catalog with the embedding model loadEmbedder opened.
func (s *Server) loadLoRAs(ctx context.Context) error {
	log := s.cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	reg, err := lora.NewRegistry(ctx, s.cfg.LoRACatalog, s.loraEmb, log)
	if err != nil {
		return err
	}
	if e := s.embedEntry.Load(); e != nil && e.EmbeddingDim == 0 {
		c := *e
		c.EmbeddingDim = int64(reg.Router().Dim()) // a cfg.Embedder's vectors: the catalog's dimension
		s.embedEntry.Store(&c)
	}
	s.loras.Store(reg)
	return nil
}

// LoRAs returns the LoRA catalog registry (Reload, Watch, Stats), nil when none is configured or loaded.
func (s *Server) LoRAs() *lora.Registry { return s.loras.Load() }

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
	data, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		return e
	}
	var req api.LoRASearchRequest
	if err := decodeBody(data, &req); err != nil {
		return fromError(err)
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

	// Admission: at most loraSlots embeddings at once, QueueSize more waiting, then 429.
	if s.loraWaiting.Add(1) > int64(s.cfg.QueueSize+cap(s.loraSlots)) {
		s.loraWaiting.Add(-1)
		return fromError(errQueueFull)
	}
	defer s.loraWaiting.Add(-1)
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	select {
	case s.loraSlots <- struct{}{}:
	case <-ctx.Done():
		return fromError(ctx.Err())
	}
	router := reg.Router() // the catalog this request is answered from, whatever reloads do meanwhile
	start := time.Now()
	vecs, err := s.loraEmb.Embed(ctx, []string{req.Prompt})
	<-s.loraSlots
	embedded := time.Now()
	s.metrics.loraEmbedSeconds.observe(embedded.Sub(start).Seconds())
	if err != nil {
		return fromError(err)
	}
	if len(vecs) != 1 {
		return fromError(fmt.Errorf("%w: %d vectors for one prompt", lora.ErrEmbedding, len(vecs)))
	}
	res, err := router.SearchEmbedding(vecs[0], topK)
	s.metrics.loraRouteSeconds.observe(time.Since(embedded).Seconds())
	if err != nil {
		return fromError(err) // a vector the catalog cannot take: the server's fault (500)
	}
	resp := api.LoRASearchResponse{Candidates: make([]api.LoRACandidate, len(res.Candidates))}
	for i, c := range res.Candidates {
		resp.Candidates[i] = api.LoRACandidate{Name: c.Name, Score: c.Score, PositiveSimilarity: c.PositiveSimilarity,
			NegativeSimilarity: c.NegativeSimilarity}
	}
	if res.Selected != nil {
		resp.Selected = &api.LoRAMatch{Name: res.Selected.Name, Score: res.Selected.Score}
		s.metrics.loraSelected.Add(1)
	} else {
		s.metrics.loraNoMatch.Add(1)
	}
	return s.writeJSON(w, http.StatusOK, resp)
}

// queryError turns lora.ErrInvalidQuery into a 400 naming the field.
func queryError(err error) *apiError {
	return badRequest(strings.TrimPrefix(err.Error(), lora.ErrInvalidQuery.Error()+": "))
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/lora"
)

// What one POST /v1/embeddings may ask for, checked while the input is decoded (before anything proportional
// to the number of texts is allocated) and before the model runs. Texts past the model's max_tokens are
// truncated by the model, so longer ones would only be read and cut.
const (
	maxEmbedInputs     = 2048     // texts per request (OpenAI's limit)
	maxEmbedInputBytes = 64 << 10 // bytes per text
	maxEmbedTotalBytes = 4 << 20  // bytes of all texts of a request (the body limit applies too)
)

// defaultEmbedModelName is the embedding model's id when Config.EmbedModelName is "".
const defaultEmbedModelName = "embedding"

func (s *Server) embedModelName() string {
	if s.cfg.EmbedModelName != "" {
		return s.cfg.EmbedModelName
	}
	return defaultEmbedModelName
}

// embeddingRequest is api.EmbeddingRequest with the input left raw: parseEmbeddingInput bounds it.
type embeddingRequest struct {
	Input          json.RawMessage `json:"input"`
	Model          string          `json:"model"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// parseEmbeddingInput reads a JSON string or array of strings, refusing the inputs beyond the limits as it
// goes: at most maxEmbedInputs texts are ever held, none empty or above maxEmbedInputBytes, all together
// within maxEmbedTotalBytes.
func parseEmbeddingInput(raw json.RawMessage) ([]string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("input: required (a string or an array of strings)")
	}
	var texts []string
	total := 0
	add := func(i int, t string) *apiError {
		where := "input"
		if i >= 0 {
			where = fmt.Sprintf("input[%d]", i)
		}
		switch {
		case t == "":
			return badRequest(where + ": empty")
		case len(t) > maxEmbedInputBytes:
			return badRequest(fmt.Sprintf("%s: %d bytes exceed the limit of %d", where, len(t), maxEmbedInputBytes))
		}
		if total += len(t); total > maxEmbedTotalBytes {
			return badRequest(fmt.Sprintf("input: the texts' %d+ bytes exceed the limit of %d per request", total,
				maxEmbedTotalBytes))
		}
		texts = append(texts, t)
		return nil
	}
	switch raw[0] {
	case '"':
		var t string
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, badRequest("input: " + err.Error())
		}
		if e := add(-1, t); e != nil {
			return nil, e
		}
		return texts, nil
	case '[':
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil { // '['
			return nil, badRequest("input: " + err.Error())
		}
		for i := 0; dec.More(); i++ {
			if i == maxEmbedInputs {
				return nil, badRequest(fmt.Sprintf("input: more than %d texts", maxEmbedInputs))
			}
			tok, err := dec.Token()
			if err != nil {
				return nil, badRequest("input: " + err.Error())
			}
			t, ok := tok.(string)
			if !ok {
				return nil, badRequest(fmt.Sprintf("input[%d]: expected a string (token arrays are not taken)", i))
			}
			if e := add(i, t); e != nil {
				return nil, e
			}
		}
		if len(texts) == 0 {
			return nil, badRequest("input: an empty array")
		}
		return texts, nil
	}
	return nil, badRequest("input: expected a string or an array of strings")
}

// handleEmbeddings answers POST /v1/embeddings (OpenAI's shape) with the server's embedding model, the one
// LoRA search uses: admission (Config.MaxInflight before the body is read; then the embedding slots LoRA
// search shares, Config.QueueSize waiting beyond them, then 429), the request's deadline, the limits above,
// and the vectors of Model.Embed unchanged (float32; JSON numbers that read back as the same float32, or
// base64 of their little-endian bytes).
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) *apiError {
	release, err := s.admit()
	if err != nil {
		return fromError(err)
	}
	defer release()
	if s.cfg.EmbedModel == "" && s.cfg.Embedder == nil {
		return &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: "no embedding model is loaded (start the server with -embed-model)"}
	}
	entry := s.embedEntry.Load()
	if entry == nil {
		if s.state.Load() == stateLoading {
			return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the embedding model is loading"}
		}
		return fromError(errShuttingDown)
	}
	emb := s.loraEmb // set before embedEntry was stored
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		_ = http.NewResponseController(w).SetReadDeadline(dl)
	}
	data, e := readBody(w, r, s.cfg.MaxBodyBytes)
	if e != nil {
		return e
	}
	var req embeddingRequest
	if err := decodeBody(data, &req); err != nil {
		return fromError(err)
	}
	texts, e := parseEmbeddingInput(req.Input)
	if e != nil {
		return e
	}
	if req.Model != "" && req.Model != entry.ID {
		return &apiError{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("no embedding model named %q (the embedding model is %q)", req.Model, entry.ID)}
	}
	base64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		base64 = true
	default:
		return badRequest(fmt.Sprintf(`encoding_format: %q is neither "float" nor "base64"`, req.EncodingFormat))
	}
	if req.Dimensions != nil && int64(*req.Dimensions) != entry.EmbeddingDim {
		return badRequest(fmt.Sprintf("dimensions: the model's embeddings have %d (they cannot be shortened)", entry.EmbeddingDim))
	}

	if s.loraWaiting.Add(1) > int64(s.cfg.QueueSize+cap(s.loraSlots)) {
		s.loraWaiting.Add(-1)
		return fromError(errQueueFull)
	}
	defer s.loraWaiting.Add(-1)
	select {
	case s.loraSlots <- struct{}{}:
	case <-ctx.Done():
		return fromError(ctx.Err())
	}
	vecs, err := emb.Embed(ctx, texts)
	<-s.loraSlots
	if err != nil {
		return fromError(err)
	}
	if len(vecs) != len(texts) {
		return fromError(fmt.Errorf("%w: %d vectors for %d texts", lora.ErrEmbedding, len(vecs), len(texts)))
	}
	resp := api.EmbeddingResponse{Object: "list", Data: make([]api.Embedding, len(vecs)), Model: entry.ID}
	for i, v := range vecs {
		if int64(len(v)) != entry.EmbeddingDim {
			return fromError(fmt.Errorf("%w: a vector of %d values, want %d", lora.ErrEmbedding, len(v), entry.EmbeddingDim))
		}
		resp.Data[i] = api.Embedding{Object: "embedding", Index: i, Embedding: api.EmbeddingVector{Values: v, Base64: base64}}
	}
	return s.writeJSON(w, http.StatusOK, resp)
}

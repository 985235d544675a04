package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/internal/jsonstream"
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

// embeddingRequest is a decoded POST /v1/embeddings body (the wire form is api.EmbeddingRequest).
type embeddingRequest struct {
	Input          []string
	inputGiven     bool
	Model          string
	EncodingFormat string
	Dimensions     *int
}

// decodeEmbeddings reads the body, refusing the inputs beyond the limits as they arrive: at most maxEmbedInputs
// texts are ever held, none empty or above maxEmbedInputBytes, all together within maxEmbedTotalBytes.
func decodeEmbeddings(d *decoder) (*embeddingRequest, error) {
	req := &embeddingRequest{}
	total := 0
	text := func() (string, error) {
		t, err := d.str(maxEmbedInputBytes)
		if err != nil {
			return "", err
		}
		if t == "" {
			return "", d.r.Errorf("empty")
		}
		if total += len(t); total > maxEmbedTotalBytes {
			return "", d.r.Errorf("the texts' %d+ bytes exceed the limit of %d per request", total, maxEmbedTotalBytes)
		}
		return t, nil
	}
	err := d.r.Object(func(key string) error {
		var err error
		switch key {
		case "input":
			req.inputGiven = true
			var k jsonstream.Kind
			if k, err = d.r.Peek(); err != nil {
				return err
			}
			switch k {
			case jsonstream.String:
				var t string
				t, err = text()
				req.Input = []string{t}
			case jsonstream.Array:
				err = d.r.Array(func(i int) error {
					if i == maxEmbedInputs {
						return d.r.Errorf("more than %d texts", maxEmbedInputs)
					}
					if k, err := d.r.Peek(); err != nil || k != jsonstream.String {
						if err == nil {
							err = d.r.Errorf("expected a string (token arrays are not taken)")
						}
						return err
					}
					t, err := text()
					req.Input = append(req.Input, t)
					return err
				})
				if err == nil && len(req.Input) == 0 {
					err = d.r.Errorf("an empty array")
				}
			case jsonstream.Null:
				req.inputGiven = false
				_, err = d.r.Null()
			default:
				err = d.r.Errorf("expected a string or an array of strings, got %s", k)
			}
		case "model":
			req.Model, err = d.str(maxNameBytes)
		case "encoding_format":
			req.EncodingFormat, err = d.str(maxNameBytes)
		case "dimensions":
			var n int64
			if n, err = d.integer(math.MinInt32, math.MaxInt32); err == nil {
				v := int(n)
				req.Dimensions = &v
			}
		case "user": // OpenAI's end-user id: a string, read and dropped
			_, err = d.str(maxSkipBytes)
		default:
			err = d.unknown(key, "an embeddings request")
		}
		return err
	})
	if err == nil {
		err = d.r.End()
	}
	if err == nil && !req.inputGiven {
		err = badRequest("input: required (a string or an array of strings)")
	}
	return req, err
}

// embedWork: one call; a text's tokens are at most its bytes plus [CLS] and [SEP], and at most the model's
// max_tokens (it truncates).
func embedWork(m *servedModel, texts []string) work {
	var tokens int64
	for _, t := range texts {
		n := int64(len(t)) + 2
		if m.info.MaxTokens > 0 {
			n = min(n, m.info.MaxTokens)
		}
		tokens += n
	}
	return work{passes: 1, units: tokens, what: fmt.Sprintf("%d texts, at most %d tokens", len(texts), tokens)}
}

// embedProbes measure an embedding model on punctuation, whose every byte is a token (so the estimate, bytes,
// is exact for the probes and an upper bound for text).
func embedProbes(m *servedModel) (probe, probe) {
	mk := func(texts []string) probe {
		return probe{w: embedWork(m, texts), run: func(ctx context.Context) error {
			_, err := m.embed(ctx, texts)
			return err
		}}
	}
	n := 126
	if m.info.MaxTokens > 2 {
		n = int(min(int64(n), m.info.MaxTokens-2))
	}
	large := make([]string, 8)
	for i := range large {
		large[i] = strings.Repeat("!", n)
	}
	return mk([]string{"!"}), mk(large)
}

// embedCall runs texts through m's lanes: the estimate picks the lane (or refuses), the queue runs the call.
func (s *Server) embedCall(rq *requestScope, m *servedModel, texts []string) ([][]float32, *apiError) {
	w := embedWork(m, texts)
	if err := rq.acct.charge(int64(len(texts)) * max(m.info.EmbeddingDim, 1) * bytesPerOutputValue); err != nil {
		return nil, fromError(err)
	}
	est := estimate{work: w, seconds: m.cost.seconds(w)}
	lane, e := s.admission(rq.ctx, m, est)
	if e != nil {
		return nil, e
	}
	vecs, err := runAlone(rq.ctx, lane, 0, est.seconds, func(ctx context.Context) ([][]float32, error) {
		return m.embed(ctx, texts)
	})
	if err != nil {
		return nil, fromError(err)
	}
	if len(vecs) != len(texts) {
		return nil, fromError(fmt.Errorf("%w: %d vectors for %d texts", lora.ErrEmbedding, len(vecs), len(texts)))
	}
	return vecs, nil
}

// handleEmbeddings answers POST /v1/embeddings (OpenAI's shape) with an embedding model (the request's "model",
// else the server's embedding model, the one LoRA search uses), through its lanes like every model call, and the
// vectors of Model.Embed unchanged (float32; JSON numbers that read back as the same float32, or base64 of their
// little-endian bytes).
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) *apiError {
	rq, e := s.begin(w, r)
	if e != nil {
		return e
	}
	defer rq.end()
	d, err := newDecoder(rq.body, rq.acct, s.decodeLimits())
	if err != nil {
		return decodeError(err)
	}
	req, err := decodeEmbeddings(d)
	if err != nil {
		return decodeError(err)
	}
	m, e := s.find(req.Model, capEmbed)
	if e != nil {
		if req.Model == "" && e.Status == http.StatusNotFound {
			e.Message = "no embedding model is loaded (start the server with -embed-model)"
		}
		return e
	}
	base64 := false
	switch req.EncodingFormat {
	case "", "float":
	case "base64":
		base64 = true
	default:
		return badRequest(fmt.Sprintf(`encoding_format: %q is neither "float" nor "base64"`, req.EncodingFormat))
	}
	dim := m.info.EmbeddingDim
	if dim == 0 {
		if reg := s.loras.Load(); reg != nil {
			dim = int64(reg.Router().Dim())
		}
	}
	if req.Dimensions != nil && int64(*req.Dimensions) != dim {
		return badRequest(fmt.Sprintf("dimensions: the model's embeddings have %d (they cannot be shortened)", dim))
	}
	vecs, e := s.embedCall(rq, m, req.Input)
	if e != nil {
		return e
	}
	resp := api.EmbeddingResponse{Object: "list", Data: make([]api.Embedding, len(vecs)), Model: m.name}
	for i, v := range vecs {
		if dim > 0 && int64(len(v)) != dim {
			return fromError(fmt.Errorf("%w: a vector of %d values, want %d", lora.ErrEmbedding, len(v), dim))
		}
		resp.Data[i] = api.Embedding{Object: "embedding", Index: i, Embedding: api.EmbeddingVector{Values: v, Base64: base64}}
	}
	return s.writeJSON(w, http.StatusOK, resp)
}

package server

import (
	"net/http"
	"sort"
	"strings"

	"github.com/cutenative/cutenative/go/api"
)

// ownedBy is every /v1/models entry's owned_by.
const ownedBy = "cutenative"

// handleModels answers GET /v1/models in OpenAI's list shape: every model of the table, the forecasters first,
// then the embedding models, then the image models, each group by name; cutenative's own fields (kind,
// capabilities, device, horizons, ...) beside the OpenAI ones.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) *apiError {
	s.mu.RLock()
	out := make([]api.ModelInfo, 0, len(s.models))
	order := map[string]capability{}
	for _, m := range s.models {
		mi := api.ModelInfo{ID: m.name, Object: "model", Created: m.loaded.Unix(), OwnedBy: ownedBy,
			Name: m.name, Kind: m.kind, Capabilities: strings.Split(m.caps.String(), ","), Device: m.info.Device,
			DType: m.info.DType, Mode: m.info.Mode, Parameters: m.info.Parameters, Quantiles: m.levels,
			Default: m.name == s.defaults[capForecast]}
		if m.caps&capForecast != 0 {
			mi.ContextLength, mi.NativeHorizon, mi.MaxHorizon = m.info.ContextLength, m.info.NativeHorizon, m.info.MaxHorizon
		}
		if m.caps&capEmbed != 0 {
			mi.EmbeddingDim, mi.MaxTokens = m.info.EmbeddingDim, m.info.MaxTokens
			if reg := s.loras.Load(); mi.EmbeddingDim == 0 && reg != nil {
				mi.EmbeddingDim = int64(reg.Router().Dim()) // a stand-in Embedder's vectors: the catalog's dimension
			}
		}
		if m.caps&capGenerate != 0 {
			mi.MaxTokens, mi.ImageSizeMultiple, mi.DefaultSteps = m.info.MaxTokens, m.info.ImageSizeMultiple, m.info.DefaultSteps
		}
		describeKronos(&mi)
		describeToto(&mi)
		out = append(out, mi)
		order[m.name] = m.caps
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if a, b := order[out[i].ID], order[out[j].ID]; a != b {
			return a < b
		}
		return out[i].ID < out[j].ID
	})
	return s.writeJSON(w, http.StatusOK, api.ModelList{Object: "list", Data: out})
}

package server

import (
	"net/http"
	"sort"

	"github.com/cutenative/cutenative/go/api"
)

// ownedBy is every /v1/models entry's owned_by.
const ownedBy = "cutenative"

// handleModels answers GET /v1/models in OpenAI's list shape: the forecasters by name, then the embedding
// model when one is loaded; cutenative's own fields (kind, device, horizons, ...) beside the OpenAI ones.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) *apiError {
	s.mu.RLock()
	out := make([]api.ModelInfo, 0, len(s.models)+1)
	for _, m := range s.models {
		out = append(out, api.ModelInfo{ID: m.name, Object: "model", Created: m.loaded.Unix(), OwnedBy: ownedBy,
			Name: m.name, Kind: m.info.Kind, Device: m.info.Device, DType: m.info.DType,
			Mode: m.info.Mode, Parameters: m.info.Parameters, ContextLength: m.info.ContextLength,
			NativeHorizon: m.info.NativeHorizon, MaxHorizon: m.info.MaxHorizon, Quantiles: m.levels,
			Default: m.name == s.cfg.DefaultModel})
	}
	s.mu.RUnlock()
	for i := range out {
		describeKronos(&out[i])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if e := s.embedEntry.Load(); e != nil { // nil once closed
		out = append(out, *e)
	}
	return s.writeJSON(w, http.StatusOK, api.ModelList{Object: "list", Data: out})
}

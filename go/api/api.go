// Package api holds the JSON wire types of cutenative-server's HTTP API (documented in
// go/server/openapi.json), shared by the server and Go clients. Types only: no behaviour, no cgo.
package api

// ForecastRequest is the body of POST /v1/forecast.
type ForecastRequest struct {
	Model     string    `json:"model,omitempty"`     // a configured model name; "": the default model
	Horizon   int       `json:"horizon"`             // steps to forecast, >= 1
	Quantiles []float64 `json:"quantiles,omitempty"` // levels in (0, 1); nil: [0.1, 0.5, 0.9]
	Series    []Series  `json:"series"`
}

// Series is one target series.
type Series struct {
	ID         string      `json:"id,omitempty"`
	Values     []*float64  `json:"values"`               // nil entries (JSON null) are missing values
	Timestamps []string    `json:"timestamps,omitempty"` // YYYY-MM, YYYY-MM-DD or RFC 3339, one per value
	Group      int         `json:"group,omitempty"`      // 0: own task; equal positive groups are forecast jointly
	Covariates []Covariate `json:"covariates,omitempty"`
}

// Covariate is numeric (Past/Future) or categorical (PastLabels/FutureLabels, nil entries missing).
type Covariate struct {
	Past         []*float64 `json:"past,omitempty"`
	Future       []*float64 `json:"future,omitempty"`
	PastLabels   []*string  `json:"past_labels,omitempty"`
	FutureLabels []*string  `json:"future_labels,omitempty"`
}

// ForecastResponse is the 200 body of POST /v1/forecast.
type ForecastResponse struct {
	Model     string           `json:"model"`
	Horizon   int              `json:"horizon"`
	Quantiles []float32        `json:"quantiles"`
	Forecasts []SeriesForecast `json:"forecasts"`
}

// SeriesForecast is the forecast of one input series, in request order.
type SeriesForecast struct {
	ID         string      `json:"id,omitempty"`
	Timestamps []string    `json:"timestamps,omitempty"` // when the input's timestamps were regular
	Median     []float32   `json:"median,omitempty"`     // when 0.5 is among the levels
	Quantiles  [][]float32 `json:"quantiles"`            // [level][step], levels as in ForecastResponse
}

// ModelList is the body of GET /v1/models.
type ModelList struct {
	Models []ModelInfo `json:"models"`
}

// ModelInfo describes one served model.
type ModelInfo struct {
	Name          string    `json:"name"`
	Kind          string    `json:"kind"`
	Device        string    `json:"device"`
	DType         string    `json:"dtype"`
	Mode          string    `json:"mode"`
	Parameters    uint64    `json:"parameters"`
	ContextLength int64     `json:"context_length"`
	NativeHorizon int64     `json:"native_horizon"`
	MaxHorizon    int64     `json:"max_horizon"`
	Quantiles     []float32 `json:"quantiles"`
	Default       bool      `json:"default"`
}

// LoRASearchRequest is the body of POST /v1/loras/search.
type LoRASearchRequest struct {
	Prompt string `json:"prompt"`          // the image request to route; non-empty
	TopK   *int   `json:"top_k,omitempty"` // candidates to return, 1..100; nil: 5
}

// LoRASearchResponse is the 200 body of POST /v1/loras/search.
type LoRASearchResponse struct {
	Selected   *LoRAMatch      `json:"selected"` // null: no LoRA reaches the catalog's threshold
	Candidates []LoRACandidate `json:"candidates"`
}

// LoRAMatch is the selected LoRA.
type LoRAMatch struct {
	Name  string  `json:"name"`
	Score float64 `json:"score"`
}

// LoRACandidate is one of the best-scoring LoRAs, best first; score is positive_similarity minus the
// catalog's negative_weight times negative_similarity (cosine similarities with the prompt).
type LoRACandidate struct {
	Name               string  `json:"name"`
	Score              float64 `json:"score"`
	PositiveSimilarity float64 `json:"positive_similarity"`
	NegativeSimilarity float64 `json:"negative_similarity"`
}

// ErrorResponse is the body of every non-200 answer.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error says what went wrong; Code is one of invalid_argument, body_too_large, unsupported,
// unauthorized, not_found, overloaded, cancelled, deadline_exceeded, unavailable, internal.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Package api holds the JSON wire types of cutenative-server's HTTP API (documented in
// go/server/openapi.json), shared by the server and Go clients. Types only: no behaviour, no cgo.
package api

// ForecastRequest is the body of POST /v1/forecast.
type ForecastRequest struct {
	Model     string    `json:"model,omitempty"`     // a configured model name; "": the default model
	Horizon   int       `json:"horizon"`             // steps to forecast, >= 1
	Quantiles []float64 `json:"quantiles,omitempty"` // levels in (0, 1); nil: [0.1, 0.5, 0.9] (Chronos-2 only)
	Series    []Series  `json:"series"`

	// Kronos models only (a Chronos-2 request carrying any of them is a 400). nil: the default.
	Temperature   *float64 `json:"temperature,omitempty"`    // >= 1e-6; default 1
	TopK          *int     `json:"top_k,omitempty"`          // >= 0; 0: off; > 0 disables top_p; default 0
	TopP          *float64 `json:"top_p,omitempty"`          // in (0, 1]; default 0.9
	SampleCount   *int     `json:"sample_count,omitempty"`   // paths averaged into the mean, 1..4096; default 1
	Seed          *uint64  `json:"seed,omitempty"`           // default 0; the same request and seed give the same bytes
	ReturnSamples *bool    `json:"return_samples,omitempty"` // true: also return every sampled path
}

// Series is one target series (Chronos-2: values; Kronos: one task of OHLC[V[A]] bars).
type Series struct {
	ID         string      `json:"id,omitempty"`
	Values     []*float64  `json:"values,omitempty"`     // nil entries (JSON null) are missing values
	Timestamps []string    `json:"timestamps,omitempty"` // YYYY-MM, YYYY-MM-DD or RFC 3339, one per value (bar)
	Group      int         `json:"group,omitempty"`      // 0: own task; equal positive groups are forecast jointly
	Covariates []Covariate `json:"covariates,omitempty"`

	// Kronos: the bars' channels, each as long as Timestamps (required): open, high, low and close, then
	// optionally volume, and amount after volume; no missing values. FutureTimestamps: the forecast steps'
	// times (horizon of them, after the last of Timestamps); nil: continued from regular Timestamps.
	Open             []*float64 `json:"open,omitempty"`
	High             []*float64 `json:"high,omitempty"`
	Low              []*float64 `json:"low,omitempty"`
	Close            []*float64 `json:"close,omitempty"`
	Volume           []*float64 `json:"volume,omitempty"`
	Amount           []*float64 `json:"amount,omitempty"`
	FutureTimestamps []string   `json:"future_timestamps,omitempty"`
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
	Quantiles []float32        `json:"quantiles,omitempty"` // Chronos-2: the levels; absent for Kronos
	Sampling  *Sampling        `json:"sampling,omitempty"`  // Kronos: the sampling used, defaults filled in
	Forecasts []SeriesForecast `json:"forecasts"`
}

// SeriesForecast is the forecast of one input series, in request order.
type SeriesForecast struct {
	ID         string      `json:"id,omitempty"`
	Timestamps []string    `json:"timestamps,omitempty"` // Chronos-2: when the input's were regular; Kronos: always
	Median     []float32   `json:"median,omitempty"`     // when 0.5 is among the levels
	Quantiles  [][]float32 `json:"quantiles,omitempty"`  // Chronos-2: [level][step], levels as in ForecastResponse
	Mean       *Bars       `json:"mean,omitempty"`       // Kronos: the mean path of each channel given
	Samples    *BarSamples `json:"samples,omitempty"`    // Kronos with return_samples: every sampled path
}

// Sampling is how a Kronos forecast sampled (ForecastResponse) or samples by default (ModelInfo).
type Sampling struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	SampleCount int     `json:"sample_count"`
	Seed        uint64  `json:"seed"`
}

// Bars holds a [step] path per channel; volume and amount only when the request gave them.
type Bars struct {
	Open   []float32 `json:"open"`
	High   []float32 `json:"high"`
	Low    []float32 `json:"low"`
	Close  []float32 `json:"close"`
	Volume []float32 `json:"volume,omitempty"`
	Amount []float32 `json:"amount,omitempty"`
}

// BarSamples holds [sample][step] paths per channel; volume and amount only when the request gave them.
type BarSamples struct {
	Open   [][]float32 `json:"open"`
	High   [][]float32 `json:"high"`
	Low    [][]float32 `json:"low"`
	Close  [][]float32 `json:"close"`
	Volume [][]float32 `json:"volume,omitempty"`
	Amount [][]float32 `json:"amount,omitempty"`
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
	Quantiles     []float32 `json:"quantiles"` // Chronos-2's own levels; [] for Kronos
	Default       bool      `json:"default"`

	// Kronos: the series fields a task takes, in order (volume and amount optional), the default sampling
	// and the most sample paths a request may ask for.
	Channels       []string  `json:"channels,omitempty"`
	Sampling       *Sampling `json:"sampling,omitempty"`
	MaxSampleCount int       `json:"max_sample_count,omitempty"`
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
// unauthorized, not_found, method_not_allowed, overloaded, cancelled, deadline_exceeded, unavailable, internal.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Package api holds the JSON wire types of cutenative-server's HTTP API (documented in
// go/server/openapi.json), shared by the server and Go clients. Types only (their JSON encodings the one
// behaviour), no cgo.
package api

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// ForecastRequest is the body of POST /v1/forecast.
type ForecastRequest struct {
	Model     string    `json:"model,omitempty"`     // a configured model name; "": the default model
	Horizon   int       `json:"horizon"`             // steps to forecast, >= 1
	Quantiles []float64 `json:"quantiles,omitempty"` // levels in (0, 1); nil: [0.1, 0.5, 0.9] (Chronos-2, Toto)
	Series    []Series  `json:"series"`

	// Kronos models only (a Chronos-2 or Toto request carrying any of them is a 400). nil: the default.
	Temperature *float64 `json:"temperature,omitempty"` // >= 1e-6; default 1
	TopK        *int     `json:"top_k,omitempty"`       // >= 0; 0: off; > 0 disables top_p; default 0
	TopP        *float64 `json:"top_p,omitempty"`       // in (0, 1]; default 0.9

	// Sampled forecasters (Kronos, Toto; a Chronos-2 request carrying any of them is a 400). nil: the default.
	SampleCount   *int    `json:"sample_count,omitempty"`   // paths, 1..4096; default 1 (Kronos), 64 (Toto)
	Seed          *uint64 `json:"seed,omitempty"`           // nil: drawn and echoed; the same request and seed give the same bytes
	ReturnSamples *bool   `json:"return_samples,omitempty"` // true: also return every sampled path

	// Toto models only (a Chronos-2 or Kronos request carrying any of them is a 400). nil: the default.
	SamplesPerBatch *int  `json:"samples_per_batch,omitempty"` // paths per model call, dividing sample_count; default sample_count
	KVCache         *bool `json:"kv_cache,omitempty"`          // default true; false recomputes every patch (other numerics)
	MeanRollout     *bool `json:"mean_rollout,omitempty"`      // true: roll out the mixture's mean (mean_path only); default false
}

// Series is one target series (Chronos-2, Toto: values; Kronos: one task of OHLC[V[A]] bars).
type Series struct {
	ID         string      `json:"id,omitempty"`
	Values     []*float64  `json:"values,omitempty"`     // nil entries (JSON null) are missing values
	Timestamps []string    `json:"timestamps,omitempty"` // YYYY-MM, YYYY-MM-DD or RFC 3339, one per value (bar)
	Group      int         `json:"group,omitempty"`      // 0: own task; equal positive groups are forecast jointly (Toto: the variates of one series)
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
	Quantiles []float32        `json:"quantiles,omitempty"` // Chronos-2, Toto: the levels; absent for Kronos and Toto's mean rollout
	Sampling  *Sampling        `json:"sampling,omitempty"`  // Kronos, Toto (sampled): the sampling used, defaults filled in
	Forecasts []SeriesForecast `json:"forecasts"`
}

// SeriesForecast is the forecast of one input series, in request order.
type SeriesForecast struct {
	ID         string      `json:"id,omitempty"`
	Timestamps []string    `json:"timestamps,omitempty"` // Chronos-2: when the input's were regular; Kronos: always
	Median     []float32   `json:"median,omitempty"`     // when 0.5 is among the levels
	Quantiles  [][]float32 `json:"quantiles,omitempty"`  // Chronos-2, Toto: [level][step], levels as in ForecastResponse
	Mean       *Bars       `json:"mean,omitempty"`       // Kronos: the mean path of each channel given
	MeanPath   []float32   `json:"mean_path,omitempty"`  // Toto: the sample paths' mean (the mean rollout: its path)
	Samples    *Samples    `json:"samples,omitempty"`    // Kronos, Toto with return_samples: every sampled path
}

// Sampling is how a Kronos or Toto forecast sampled (ForecastResponse) or samples by default (ModelInfo). Toto's
// (SamplesPerBatch > 0) takes no temperature, top_k or top_p (it samples its Student-t mixture as it is): its JSON
// holds sample_count, samples_per_batch, kv_cache and seed only.
type Sampling struct {
	Temperature float64 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float64 `json:"top_p"`
	SampleCount int     `json:"sample_count"`
	Seed        uint64  `json:"seed"`

	// Toto: sample paths per model call, and whether the time-wise layers' keys and values were cached.
	SamplesPerBatch int  `json:"samples_per_batch,omitempty"`
	KVCache         bool `json:"kv_cache,omitempty"`
}

// MarshalJSON writes Toto's fields alone for a Toto sampling (SamplesPerBatch > 0), every field otherwise.
func (s Sampling) MarshalJSON() ([]byte, error) {
	type plain Sampling
	if s.SamplesPerBatch == 0 {
		return json.Marshal(plain(s))
	}
	return json.Marshal(struct {
		SampleCount     int    `json:"sample_count"`
		SamplesPerBatch int    `json:"samples_per_batch"`
		KVCache         bool   `json:"kv_cache"`
		Seed            uint64 `json:"seed"`
	}{s.SampleCount, s.SamplesPerBatch, s.KVCache, s.Seed})
}

// Samples is a forecast's sampled paths, [sample][step]: Kronos' per channel (BarSamples, a JSON object), Toto's
// one list per series (Paths, a JSON array). One of the two is set.
type Samples struct {
	*BarSamples
	Paths [][]float32
}

// MarshalJSON writes Paths when set, else the channels.
func (s Samples) MarshalJSON() ([]byte, error) {
	if s.Paths != nil || s.BarSamples == nil {
		if s.Paths == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(s.Paths)
	}
	return json.Marshal(s.BarSamples)
}

// UnmarshalJSON reads an array of paths (Toto) or an object of channels (Kronos).
func (s *Samples) UnmarshalJSON(b []byte) error {
	var paths [][]float32
	if err := json.Unmarshal(b, &paths); err == nil {
		*s = Samples{Paths: paths}
		return nil
	}
	var bars BarSamples
	if err := json.Unmarshal(b, &bars); err != nil {
		return errors.New("samples: expected an array of paths or an object of channels")
	}
	*s = Samples{BarSamples: &bars}
	return nil
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

// ModelList is the body of GET /v1/models, in the shape of OpenAI's model list: Object is "list".
type ModelList struct {
	Object string      `json:"object"`
	Data   []ModelInfo `json:"data"`
}

// ModelInfo describes one served model: the OpenAI fields (ID, Object "model", Created, OwnedBy
// "cutenative"), then cutenative's own. The forecasters come first, by name, then the embedding models, then
// the image models.
type ModelInfo struct {
	ID      string `json:"id"`       // the name requests use
	Object  string `json:"object"`   // "model"
	Created int64  `json:"created"`  // Unix time (seconds) at which the server loaded the model
	OwnedBy string `json:"owned_by"` // "cutenative"

	Name string `json:"name"` // the same as ID
	Kind string `json:"kind"` // chronos2, kronos, toto, embedding or zimage
	// Capabilities are what the model serves: "forecast" (POST /v1/forecast), "embed" (POST /v1/embeddings,
	// LoRA search) or "generate" (images).
	Capabilities  []string  `json:"capabilities"`
	Device        string    `json:"device"`
	DType         string    `json:"dtype"`
	Mode          string    `json:"mode"`
	Parameters    uint64    `json:"parameters"`
	ContextLength int64     `json:"context_length"`
	NativeHorizon int64     `json:"native_horizon"`
	MaxHorizon    int64     `json:"max_horizon"`
	Quantiles     []float32 `json:"quantiles"` // Chronos-2's own levels; [] for the other kinds
	Default       bool      `json:"default"`   // the forecaster a request naming no model gets

	// Kronos: the series fields a task takes, in order (volume and amount optional). Kronos and Toto: the default
	// sampling and the most sample paths a request may ask for. Toto: its patch (native_horizon), the most variates
	// (series of one group) a task may have.
	Channels       []string  `json:"channels,omitempty"`
	Sampling       *Sampling `json:"sampling,omitempty"`
	MaxSampleCount int       `json:"max_sample_count,omitempty"`
	MaxVariates    int       `json:"max_variates,omitempty"`

	// Embedding models: the vectors' length and the tokens per text (longer texts are truncated; image models:
	// per prompt).
	EmbeddingDim int64 `json:"embedding_dim,omitempty"`
	MaxTokens    int64 `json:"max_tokens,omitempty"`

	// Image models: width and height are multiples of ImageSizeMultiple; DefaultSteps denoising steps.
	ImageSizeMultiple int64 `json:"image_size_multiple,omitempty"`
	DefaultSteps      int64 `json:"default_steps,omitempty"`
}

// EmbeddingRequest is the body of POST /v1/embeddings (OpenAI's shape; token-array inputs are not taken).
type EmbeddingRequest struct {
	Input          EmbeddingInput `json:"input"`                     // one text or a list of texts
	Model          string         `json:"model,omitempty"`           // "" or the embedding model's id
	EncodingFormat string         `json:"encoding_format,omitempty"` // "float" (default) or "base64"
	Dimensions     *int           `json:"dimensions,omitempty"`      // nil, or the model's embedding_dim
	User           string         `json:"user,omitempty"`            // accepted and ignored
}

// EmbeddingInput is a list of texts; in JSON a string (one text) or an array of strings.
type EmbeddingInput []string

// UnmarshalJSON takes a JSON string or array of strings.
func (in *EmbeddingInput) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*in = EmbeddingInput{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("input: expected a string or an array of strings")
	}
	*in = many
	return nil
}

// EmbeddingResponse is the 200 body of POST /v1/embeddings: Object "list", one entry per input, in order.
type EmbeddingResponse struct {
	Object string          `json:"object"`
	Data   []Embedding     `json:"data"`
	Model  string          `json:"model"`
	Usage  EmbeddingsUsage `json:"usage"`
}

// Embedding is one input's vector (Object "embedding").
type Embedding struct {
	Object    string          `json:"object"`
	Index     int             `json:"index"`
	Embedding EmbeddingVector `json:"embedding"`
}

// EmbeddingVector is an L2-normalised vector. In JSON it is an array of numbers (encoding_format "float",
// each the shortest decimal that reads back as the same float32) or a base64 string of the float32 values,
// little-endian (encoding_format "base64"); Base64 selects the second when marshalling, and unmarshalling
// takes either.
type EmbeddingVector struct {
	Values []float32
	Base64 bool
}

// MarshalJSON writes the array or the base64 string.
func (v EmbeddingVector) MarshalJSON() ([]byte, error) {
	if !v.Base64 {
		if v.Values == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(v.Values)
	}
	raw := make([]byte, 4*len(v.Values))
	for i, f := range v.Values {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
	}
	return json.Marshal(base64.StdEncoding.EncodeToString(raw))
}

// UnmarshalJSON reads an array of numbers or a base64 string of little-endian float32 values.
func (v *EmbeddingVector) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return fmt.Errorf("embedding: %w", err)
		}
		if len(raw)%4 != 0 {
			return fmt.Errorf("embedding: %d bytes, not a whole number of float32 values", len(raw))
		}
		v.Values, v.Base64 = make([]float32, len(raw)/4), true
		for i := range v.Values {
			v.Values[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		return nil
	}
	v.Base64 = false
	return json.Unmarshal(b, &v.Values)
}

// EmbeddingsUsage is OpenAI's usage object. The library does not report token counts (cn_embed returns
// vectors only), so both are 0: cutenative does not meter tokens.
type EmbeddingsUsage struct {
	PromptTokens int `json:"prompt_tokens"`
	TotalTokens  int `json:"total_tokens"`
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
	// Threshold is the catalog's: the best candidate is selected when its score reaches it; Decision says what the
	// rule decided ("selected" or "below_threshold").
	Threshold float64 `json:"threshold"`
	Decision  string  `json:"decision"`
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
	// Example (an index into the entry's example prompts) and ExampleSimilarity: the example closest to the prompt,
	// present only when the entry has examples; the score takes the better of it and the positive description.
	Example           *int     `json:"example,omitempty"`
	ExampleSimilarity *float64 `json:"example_similarity,omitempty"`
}

// LoRAList is the 200 body of GET /v1/loras: the catalog in service, never its files' paths.
type LoRAList struct {
	Object    string     `json:"object"`    // "list"
	Threshold float64    `json:"threshold"` // the score "auto" needs to apply an adapter
	Data      []LoRAInfo `json:"data"`
}

// LoRAInfo is one adapter of the catalog. Model, Format, Rank and Targets are set when an image model holds the
// adapter (the server runs with -lora-dir and an image model); without, the catalog serves search only.
type LoRAInfo struct {
	Name         string   `json:"name"`
	Description  string   `json:"description"`   // what the style is for (the catalog's "positive")
	TriggerWords []string `json:"trigger_words"` // the catalog's keywords
	DefaultScale float64  `json:"default_scale"` // the scale a request naming it without one applies
	Model        string   `json:"model,omitempty"`
	Format       string   `json:"format,omitempty"`  // the key family recognised ("diffusers/peft", "kohya", ...)
	Rank         int64    `json:"rank,omitempty"`    // the largest rank of its patches
	Targets      uint64   `json:"targets,omitempty"` // model weights it changes
}

// ImageRequest is the body of POST /v1/images/generations: OpenAI's fields, and Z-Image's and cutenative's own.
// OpenAI's quality, style, background, moderation, output_compression and user are accepted and ignored.
type ImageRequest struct {
	Prompt            string         `json:"prompt"`
	Model             string         `json:"model,omitempty"`
	N                 int            `json:"n,omitempty"`    // images, seeds seed .. seed+n-1; default 1
	Size              string         `json:"size,omitempty"` // "WIDTHxHEIGHT" or "auto" (1024x1024)
	ResponseFormat    string         `json:"response_format,omitempty"`
	OutputFormat      string         `json:"output_format,omitempty"`
	Stream            bool           `json:"stream,omitempty"`
	StreamOptions     *StreamOptions `json:"stream_options,omitempty"`
	NegativePrompt    *string        `json:"negative_prompt,omitempty"`
	NumInferenceSteps int            `json:"num_inference_steps,omitempty"` // 0: the model's default
	GuidanceScale     *float64       `json:"guidance_scale,omitempty"`      // nil: the model's default
	Seed              *int64         `json:"seed,omitempty"`                // nil or negative: drawn and echoed
	// LoRA is "auto", "none", a catalog name, {"name", "scale"} or a list of names and objects (json.RawMessage
	// or any value that encodes as one of those); nil: the server's -lora-default.
	LoRA         any      `json:"lora,omitempty"`
	LoRAScale    *float64 `json:"lora_scale,omitempty"`     // the scale of adapters named without one, auto's included
	LoRAMax      *int     `json:"lora_max,omitempty"`       // auto: at most this many adapters (default 1)
	LoRAMinScore *float64 `json:"lora_min_score,omitempty"` // auto: this threshold instead of the catalog's
}

// StreamOptions is the image request's stream_options.
type StreamOptions struct {
	IncludeProgress bool `json:"include_progress"` // per-step progress events
}

// ImagesResponse is the 200 JSON body of POST /v1/images/generations.
type ImagesResponse struct {
	Created      int64       `json:"created"`
	OutputFormat string      `json:"output_format"` // "png"
	Size         string      `json:"size"`
	Data         []ImageData `json:"data"`
	Cutenative   ImageFacts  `json:"cutenative"`
}

// ImageData is one image: its PNG in base64 and the seed that made it.
type ImageData struct {
	B64JSON string `json:"b64_json"`
	Seed    int64  `json:"seed"`
}

// ImageFacts is cutenative's own account of an image answer (the JSON's "cutenative" object, the PNG answer's
// X-Cutenative header, and each streamed image's).
type ImageFacts struct {
	Model         string             `json:"model"`
	Steps         int                `json:"steps"`
	GuidanceScale float64            `json:"guidance_scale"`
	Seeds         []int64            `json:"seeds"`
	LoRA          LoRADecision       `json:"lora"`
	Timings       map[string]float64 `json:"timings_ms,omitempty"` // queue, route, prepare, adapters, text, denoise, decode, generate, encode, total
}

// LoRADecision is what a request asked of the adapters, what the router found and what was applied.
type LoRADecision struct {
	Mode       string          `json:"mode"`     // auto, explicit or none
	Decision   string          `json:"decision"` // routed, abstained, explicit or none
	Applied    []AppliedLoRA   `json:"applied"`
	Candidates []LoRACandidate `json:"candidates,omitempty"` // auto: every candidate's score, best first
	Threshold  *float64        `json:"threshold,omitempty"`  // auto: the score an adapter had to reach
}

// AppliedLoRA is an adapter applied with its scale.
type AppliedLoRA struct {
	Name  string  `json:"name"`
	Scale float64 `json:"scale"`
}

// ErrorResponse is the body of every non-200 answer.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error says what went wrong; Code is one of invalid_argument, too_expensive (the request's estimated compute or
// memory is beyond a limit), too_large (its bytes in flight), body_too_large, request_timeout, unsupported,
// unsupported_media_type, unauthorized, forbidden, not_found, method_not_allowed, overloaded, cancelled,
// deadline_exceeded, unavailable, internal, and for requests refused before they reach the server's handlers
// bad_request, header_too_large, not_implemented and http_version_not_supported. Message names the field or the
// limit (its flag) involved.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

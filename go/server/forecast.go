package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/cutenative/cutenative/go/cutenative"
)

// POST /v1/forecast: the body is decoded as it arrives (decode.go), the model it names is found in the table
// (registry.go), and the model's kind turns the request into one library call through its forecaster (chronos2.go,
// kronos.go, toto.go); then the call's cost decides its lane or refuses it (cost.go), and the lane runs it, merged with
// others where the forecaster allows it (merge.go).

// forecastRequest is a decoded POST /v1/forecast body (the wire form is api.ForecastRequest): values are float32s
// as the library takes them, NaN for JSON null; a slice is nil when its field was absent.
type forecastRequest struct {
	Model     string
	Horizon   int
	Quantiles []float64
	Series    []seriesIn

	// Sampled forecasters (nil: the default): Kronos' temperature, top_k, top_p; Kronos' and Toto's sample_count,
	// seed, return_samples; Toto's samples_per_batch, kv_cache, mean_rollout.
	Temperature, TopP    *float64
	TopK, SampleCount    *int
	Seed                 *uint64
	ReturnSamples        *bool
	SamplesPerBatch      *int
	KVCache, MeanRollout *bool

	future [][]string // per series: timestamps of the forecast steps (nil when none can be given)
}

type seriesIn struct {
	ID               string
	Values           []float32
	Timestamps       []string
	Group            int
	Covariates       []covariateIn
	Channels         [6][]float32 // Kronos: open, high, low, close, volume, amount
	FutureTimestamps []string
}

type covariateIn struct {
	Past, Future             []float32
	PastLabels, FutureLabels []*string
}

// limits bounds what one request may ask for. Every size the request implies is checked against them, in
// int64 arithmetic, before anything proportional to it is allocated (future timestamps included).
type limits struct {
	MaxSeries       int
	MaxSeriesLen    int
	MaxCovariates   int
	MaxQuantiles    int
	MaxHorizon      int   // the server's limit (-max-horizon)
	ModelMaxHorizon int64 // the model's own limit (cn_model_info.max_horizon)
	MaxOutputValues int64 // series x quantile levels x horizon
	MaxInputValues  int64 // values and covariate values, over all series
	MaxGroupRows    int   // rows (series and their covariates) of one multivariate task
}

// forecaster is what a kind of forecasting model brings to POST /v1/forecast.
type forecaster interface {
	// plan validates a decoded request for the model (every size before anything proportional to it is
	// allocated) and turns it into one library call with its cost.
	plan(ctx context.Context, req *forecastRequest, lim limits) (*forecastPlan, error)
	// probes are two calls of known work that measure the model's cost model (cost.go).
	probes() (small, large probe)
}

// forecastPlan is a validated request: the call, what it costs, and how its answer is built.
type forecastPlan struct {
	// finish, when set, does the work that grows with the answer (the forecast steps' timestamps) once the
	// request is admitted, and sets call if plan left it nil.
	finish   func(ctx context.Context) error
	call     *cutenative.ForecastRequest
	mergeKey string // requests with the same non-empty key may share one call (merge.go); "": runs alone
	work     work
	callMem  int64 // working memory of the call, where the kind estimates it
	outputs  int64 // values the answer holds, a timestamp counting as 8 (for the bytes in flight)
	// answer builds the 200 body from the call's forecast, this request's series starting at first; an *apiError
	// refuses it (a forecast that is not finite).
	answer func(f *cutenative.Forecast, first int) (any, error)
}

func (s *Server) limits(m *servedModel) limits {
	return limits{MaxSeries: s.cfg.MaxSeries, MaxSeriesLen: s.cfg.MaxSeriesLen, MaxCovariates: 64, MaxQuantiles: 99,
		MaxHorizon: s.cfg.MaxHorizon, ModelMaxHorizon: m.info.MaxHorizon, MaxOutputValues: s.cfg.MaxOutputValues,
		MaxInputValues: s.cfg.MaxInputValues, MaxGroupRows: 256}
}

// decodeLimits are the limits that hold before the model is known (the body names it).
func (s *Server) decodeLimits() limits {
	return limits{MaxSeries: s.cfg.MaxSeries, MaxSeriesLen: s.cfg.MaxSeriesLen, MaxCovariates: 64, MaxQuantiles: 99,
		MaxHorizon: s.cfg.MaxHorizon, MaxInputValues: s.cfg.MaxInputValues}
}

func (s *Server) handleForecast(w http.ResponseWriter, r *http.Request) *apiError {
	rq, e := s.begin(w, r)
	if e != nil {
		return e
	}
	defer rq.end()
	d, err := newDecoder(rq.body, rq.acct, s.decodeLimits())
	if err != nil {
		return decodeError(err)
	}
	req, err := decodeForecast(d)
	if err != nil {
		return decodeError(err)
	}
	m, e := s.find(req.Model, capForecast)
	noteModel(r, cmpOr(req.Model, s.defaultName(capForecast)), e == nil, len(req.Series))
	if e != nil {
		return e
	}
	plan, err := m.fc.plan(rq.ctx, req, s.limits(m))
	if err != nil {
		return fromError(err)
	}
	if err := rq.acct.charge(plan.outputs * bytesPerOutputValue); err != nil {
		return fromError(err)
	}
	est := estimate{work: plan.work, seconds: m.cost.seconds(plan.work), callBytes: plan.callMem}
	lane, e := s.admission(rq.ctx, m, est)
	if e != nil {
		return e
	}
	if plan.finish != nil {
		if err := plan.finish(rq.ctx); err != nil {
			return fromError(err)
		}
	}
	key := plan.mergeKey
	if lane == m.long || s.cfg.MaxBatch <= 1 {
		key = ""
	}
	f, first, err := m.merge.submit(rq.ctx, lane, plan.call, key, est.seconds, m.cost.seconds(work{passes: plan.work.passes}))
	if err != nil {
		return fromError(err)
	}
	body, err := plan.answer(f, first)
	if err != nil {
		return fromError(err)
	}
	return s.writeJSON(w, http.StatusOK, body)
}

// kindFields are the request fields only some kinds of forecaster take, with those kinds; a request for a model
// of another kind that carries one is a 400 naming it.
var kindFields = []struct {
	name  string
	kinds string
	given func(r *forecastRequest) bool
}{
	{"temperature", "kronos", func(r *forecastRequest) bool { return r.Temperature != nil }},
	{"top_k", "kronos", func(r *forecastRequest) bool { return r.TopK != nil }},
	{"top_p", "kronos", func(r *forecastRequest) bool { return r.TopP != nil }},
	{"sample_count", "kronos and toto", func(r *forecastRequest) bool { return r.SampleCount != nil }},
	{"seed", "kronos and toto", func(r *forecastRequest) bool { return r.Seed != nil }},
	{"return_samples", "kronos and toto", func(r *forecastRequest) bool { return r.ReturnSamples != nil }},
	{"samples_per_batch", "toto", func(r *forecastRequest) bool { return r.SamplesPerBatch != nil }},
	{"kv_cache", "toto", func(r *forecastRequest) bool { return r.KVCache != nil }},
	{"mean_rollout", "toto", func(r *forecastRequest) bool { return r.MeanRollout != nil }},
}

// refuseFieldsOf refuses the fields that models of kind do not take.
func (r *forecastRequest) refuseFieldsOf(kind string) error {
	for _, f := range kindFields {
		if f.given(r) && !strings.Contains(" "+f.kinds+" ", " "+kind+" ") {
			return badRequest(fmt.Sprintf("%s: only %s models take it; this is a %s model", f.name, f.kinds, kind))
		}
	}
	return nil
}

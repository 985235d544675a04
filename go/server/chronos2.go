package server

// Chronos-2 models over POST /v1/forecast: quantile forecasts of univariate and multivariate tasks with
// covariates, merged with other requests where the merge cannot change a bit of any answer.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

var defaultQuantiles = []float64{0.1, 0.5, 0.9}

// unrolledPaths is how many quantile paths the library's long-horizon rollout runs per row after the first pass
// (kUnrolledQuantiles, core/models/chronos2/chronos2_pipeline.cpp).
const unrolledPaths = 9

type chronos2 struct {
	m *servedModel
	// The model's patching (config.json's chronos_config): tokens per row of a pass are ceil(context / patch) + 1
	// + output patches.
	patch, outPatches int64
}

func newChronos2(m *servedModel) (forecaster, error) {
	c := &chronos2{m: m, patch: 16, outPatches: max(1, m.info.NativeHorizon/16)}
	if desc, err := m.model.Describe(); err == nil {
		var d struct {
			Config struct {
				Chronos struct {
					Patch      int64 `json:"input_patch_size"`
					OutPatches int64 `json:"max_output_patches"`
				} `json:"chronos_config"`
			} `json:"config"`
		}
		if json.Unmarshal([]byte(desc), &d) == nil && d.Config.Chronos.Patch > 0 && d.Config.Chronos.OutPatches > 0 {
			c.patch, c.outPatches = d.Config.Chronos.Patch, d.Config.Chronos.OutPatches
		}
	}
	levels, err := m.model.Quantiles()
	if err != nil {
		return nil, err
	}
	m.levels = levels
	return c, nil
}

// work of a call: a pass per native horizon, each over every row's tokens (rollout passes over 9 paths per row
// and the full context, which has grown by then).
func (c *chronos2) work(rows []int64, lengths []int64, horizon int64) work {
	native := max(c.m.info.NativeHorizon, 1)
	ctxLen := max(c.m.info.ContextLength, 1)
	tokens := func(l int64) int64 { return (min(l, ctxLen)+c.patch-1)/c.patch + 1 + c.outPatches }
	passes := (horizon + native - 1) / native
	var units, rowsAll int64
	for i, r := range rows {
		units += r * tokens(lengths[i])
		rowsAll += r
	}
	units += (passes - 1) * rowsAll * unrolledPaths * tokens(ctxLen)
	what := fmt.Sprintf("%d rows x %d forward passes", rowsAll, passes)
	if passes > 1 {
		what = fmt.Sprintf("%d rows, then %d rollout passes over %d quantile paths each", rowsAll, passes-1, unrolledPaths)
	}
	return work{passes: passes, units: units, what: what}
}

func (c *chronos2) probes() (probe, probe) {
	ctxLen := min(max(c.m.info.ContextLength, 1), 512)
	series := func(n int) *cutenative.ForecastRequest {
		req := &cutenative.ForecastRequest{Horizon: int(max(c.m.info.NativeHorizon, 1))}
		for i := 0; i < n; i++ {
			v := make([]float32, ctxLen)
			for k := range v {
				v[k] = float32(math.Sin(float64(k+i)/7) * 10)
			}
			req.Series = append(req.Series, cutenative.Series{Values: v})
		}
		return req
	}
	mk := func(n int) probe {
		req := series(n)
		rows, lengths := make([]int64, n), make([]int64, n)
		for i := range rows {
			rows[i], lengths[i] = 1, ctxLen
		}
		return probe{w: c.work(rows, lengths, int64(req.Horizon)), run: func(ctx context.Context) error {
			_, err := c.m.model.Forecast(ctx, req)
			return err
		}}
	}
	return mk(1), mk(16)
}

func (c *chronos2) plan(ctx context.Context, r *forecastRequest, lim limits) (*forecastPlan, error) {
	if err := rejectKronosFields(r, "chronos2"); err != nil {
		return nil, err
	}
	if err := r.validate(ctx, lim); err != nil {
		return nil, err
	}
	call := toBinding(r)
	stamped := 0 // series whose answer carries timestamps (at most: regular stamps only)
	for _, s := range r.Series {
		if len(s.Timestamps) > 1 {
			stamped++
		}
	}
	// A task's rows: its series and their covariates (group 0: a task per series).
	var rows, lengths []int64
	groups := map[int]int{}
	for _, s := range r.Series {
		if s.Group > 0 {
			if i, ok := groups[s.Group]; ok {
				rows[i] += int64(1 + len(s.Covariates))
				lengths[i] = max(lengths[i], int64(len(s.Values)))
				continue
			}
			groups[s.Group] = len(rows)
		}
		rows = append(rows, int64(1+len(s.Covariates)))
		lengths = append(lengths, int64(len(s.Values)))
	}
	levels := len(call.Quantiles)
	p := &forecastPlan{call: call, work: c.work(rows, lengths, int64(r.Horizon)), finish: r.timestamps,
		// A future timestamp counts as 8 values, as in the output limit (validate).
		outputs:  (int64(len(r.Series))*int64(levels) + 8*int64(stamped)) * int64(r.Horizon),
		mergeKey: batchKey(call, int(c.m.info.ContextLength)),
		answer: func(f *cutenative.Forecast, first int) (any, error) {
			if i := nonFiniteSeries(f, first, len(r.Series)); i >= 0 {
				return nil, badRequest(fmt.Sprintf("series[%d]: the forecast is not finite: its values are too large for the "+
					"model's float32 normalisation (magnitudes from about 1e19 overflow)", i))
			}
			return buildResponse(c.m.name, r, f, first), nil
		}}
	return p, nil
}

// validate checks the request against lim: first every size it implies (cheap, no allocation), then the
// values, then the timestamps (whose extension is bounded by the output limit by then). The decoder has bounded
// the counts (series, values per series, input values, quantile levels, covariates) already.
func (r *forecastRequest) validate(ctx context.Context, lim limits) error {
	if r.Horizon < 1 {
		return badRequest("horizon: must be >= 1")
	}
	if int64(r.Horizon) > lim.ModelMaxHorizon {
		return badRequest(fmt.Sprintf("horizon: %d exceeds the model's limit of %d", r.Horizon, lim.ModelMaxHorizon))
	}
	if r.Horizon > lim.MaxHorizon {
		return badRequest(fmt.Sprintf("horizon: %d exceeds the server's limit of %d (-max-horizon)", r.Horizon, lim.MaxHorizon))
	}
	if len(r.Series) == 0 {
		return badRequest("series: at least one series is required")
	}
	if r.Quantiles != nil && len(r.Quantiles) == 0 {
		return badRequest("quantiles: give at least one level, or leave the field out for the defaults")
	}
	for i, q := range r.Quantiles {
		// Checked as the library sees it: 1e-300 is 0 as a float32.
		if f := float32(q); !(q > 0 && q < 1) || !(f > 0 && f < 1) {
			return badRequest(fmt.Sprintf("quantiles[%d]: %v is not in (0, 1) as a float32", i, q))
		}
	}
	levels := len(r.Quantiles)
	if r.Quantiles == nil {
		levels = len(defaultQuantiles)
	}
	// The response's size in float values, a future timestamp counting as 8 (about 32 bytes of text). Every
	// factor is bounded (series <= MaxSeries, levels <= MaxQuantiles, horizon <= MaxHorizon), so the int64
	// products cannot overflow for any configuration that fits in memory.
	stamped := 0
	for _, s := range r.Series {
		if len(s.Timestamps) > 1 {
			stamped++
		}
	}
	out := int64(len(r.Series)) * int64(levels) * int64(r.Horizon)
	if size := out + 8*int64(stamped)*int64(r.Horizon); size > lim.MaxOutputValues {
		return badRequest(fmt.Sprintf("the forecast would hold %d values (%d series x %d quantile levels x horizon %d) "+
			"and %d future timestamps (8 values each), above the limit of %d (-max-output-values)", out, len(r.Series),
			levels, r.Horizon, int64(stamped)*int64(r.Horizon), lim.MaxOutputValues))
	}
	// A multivariate task's rows (its series and their covariates) attend to each other: bounded per task.
	groupRows := map[int]int{}
	for _, s := range r.Series {
		if s.Group > 0 {
			groupRows[s.Group] += 1 + len(s.Covariates)
		}
	}
	for g, n := range groupRows {
		if n > lim.MaxGroupRows {
			return badRequest(fmt.Sprintf("group %d: %d rows (series and their covariates) exceed the limit of %d per task",
				g, n, lim.MaxGroupRows))
		}
	}
	for i, s := range r.Series {
		at := fmt.Sprintf("series[%d]", i)
		if s.Values == nil {
			return badRequest(at + ".values: required (this model takes values)")
		}
		if len(s.Values) == 0 {
			return badRequest(at + ".values: at least one value is required")
		}
		if s.Group < 0 {
			return badRequest(at + ".group: must be >= 0")
		}
		if s.Timestamps != nil && len(s.Timestamps) != len(s.Values) {
			return badRequest(fmt.Sprintf("%s.timestamps: %d timestamps for %d values", at, len(s.Timestamps), len(s.Values)))
		}
		for j, c := range s.Covariates {
			cat := fmt.Sprintf("%s.covariates[%d]", at, j)
			numeric := c.Past != nil || c.Future != nil
			labels := c.PastLabels != nil || c.FutureLabels != nil
			if numeric == labels {
				return badRequest(cat + ": give either past/future (numeric) or past_labels/future_labels (categorical)")
			}
			past := len(c.Past) + len(c.PastLabels)
			if past != len(s.Values) {
				return badRequest(fmt.Sprintf("%s: %d past values for a series of %d", cat, past, len(s.Values)))
			}
			if fut := len(c.Future) + len(c.FutureLabels); fut > r.Horizon {
				return badRequest(fmt.Sprintf("%s: %d future values exceed the horizon of %d", cat, fut, r.Horizon))
			}
		}
	}
	return nil
}

// timestamps checks each series' timestamps and continues regular ones over the horizon (run once the request is
// admitted: the forecast steps' are as many as the answer's values).
func (r *forecastRequest) timestamps(ctx context.Context) error {
	for i, s := range r.Series {
		if err := ctx.Err(); err != nil {
			return err
		}
		fut, err := futureTimestamps(s.Timestamps, r.Horizon)
		if err != nil {
			return badRequest(fmt.Sprintf("series[%d].%s", i, err.(*apiError).Message))
		}
		r.future = append(r.future, fut)
	}
	return nil
}

func levelsOf(r *forecastRequest) []float32 {
	q := r.Quantiles
	if q == nil {
		q = defaultQuantiles
	}
	out := make([]float32, len(q))
	for i, x := range q {
		out[i] = float32(x)
	}
	return out
}

// toBinding turns a validated request into the binding's (the decoded values are the library's already).
func toBinding(r *forecastRequest) *cutenative.ForecastRequest {
	out := &cutenative.ForecastRequest{Horizon: r.Horizon, Quantiles: levelsOf(r), Series: make([]cutenative.Series, len(r.Series))}
	for i, s := range r.Series {
		out.Series[i] = cutenative.Series{Values: s.Values, Group: s.Group}
		for _, c := range s.Covariates {
			out.Covariates = append(out.Covariates, cutenative.Covariate{Series: i, Past: c.Past, Future: c.Future,
				PastLabels: c.PastLabels, FutureLabels: c.FutureLabels})
		}
	}
	return out
}

// batchKey says which requests may share one library call without changing any result: the library is
// batch-invariant for series of equal (truncated) length forecast on their own (no groups, no
// covariates) with the same horizon and levels. "" means the request runs alone (sampled requests always:
// their seed is their own).
func batchKey(r *cutenative.ForecastRequest, contextLength int) string {
	if len(r.Covariates) > 0 || r.Sampling != nil || r.Seed != 0 || r.ReturnSamples {
		return ""
	}
	length := -1
	for _, s := range r.Series {
		if s.Group != 0 {
			return ""
		}
		n := len(s.Values)
		if contextLength > 0 && n > contextLength {
			n = contextLength
		}
		if length >= 0 && n != length {
			return ""
		}
		length = n
	}
	var b strings.Builder
	fmt.Fprintf(&b, "h=%d;L=%d;q=", r.Horizon, length)
	for _, q := range r.Quantiles {
		b.WriteString(strconv.FormatFloat(float64(q), 'g', -1, 32))
		b.WriteByte(',')
	}
	return b.String()
}

// nonFiniteSeries returns the first of n series (from first in f) holding a NaN or Inf, or -1.
func nonFiniteSeries(f *cutenative.Forecast, first, n int) int {
	for i := 0; i < n; i++ {
		for q := range f.Quantiles {
			if !finite(f.Row(first+i, q)) {
				return i
			}
		}
	}
	return -1
}

// buildResponse turns a forecast (already sliced to this request's series) into the response body. The rows
// are the forecast's own memory (no copy): it lives until the answer is written.
func buildResponse(model string, r *forecastRequest, f *cutenative.Forecast, firstSeries int) *api.ForecastResponse {
	resp := &api.ForecastResponse{Model: model, Horizon: f.Horizon, Quantiles: f.Quantiles,
		Forecasts: make([]api.SeriesForecast, len(r.Series))}
	median := -1
	for q, l := range f.Quantiles {
		if l == 0.5 {
			median = q
		}
	}
	for i, s := range r.Series {
		sf := api.SeriesForecast{ID: s.ID, Quantiles: make([][]float32, len(f.Quantiles))}
		for q := range f.Quantiles {
			sf.Quantiles[q] = f.Row(firstSeries+i, q)
		}
		if median >= 0 {
			sf.Median = sf.Quantiles[median]
		}
		sf.Timestamps = r.future[i]
		resp.Forecasts[i] = sf
	}
	return resp
}

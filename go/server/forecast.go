package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/jsonstrict"
)

// forecastRequest is a decoded POST /v1/forecast body plus what validation derives from it.
type forecastRequest struct {
	api.ForecastRequest
	future [][]string // per series: timestamps of the forecast steps (nil when none can be given)
}

var defaultQuantiles = []float64{0.1, 0.5, 0.9}

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

// maxJSONDepth bounds nesting in request bodies (a request needs 4 levels).
const maxJSONDepth = 16

// decodeForecast parses a request body (already read whole, size-limited and checked to be UTF-8): duplicate
// keys, trailing data, unknown fields and wrong types are 400s.
func decodeForecast(data []byte) (*forecastRequest, error) {
	var wire api.ForecastRequest
	if err := decodeBody(data, &wire); err != nil {
		return nil, err
	}
	return &forecastRequest{ForecastRequest: wire}, nil
}

// decodeBody decodes one JSON object into v after internal/jsonstrict's checks.
func decodeBody(data []byte, v any) error {
	if err := jsonstrict.Check(data, maxJSONDepth, "request object"); err != nil {
		return badRequest(err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			if te.Field == "" {
				return badRequest("the body must be a JSON object, got JSON " + te.Value)
			}
			return badRequest(fmt.Sprintf("field %q: expected %s, got JSON %s", te.Field, te.Type, te.Value))
		}
		return badRequest("malformed JSON: " + err.Error())
	}
	return nil
}

// readBody reads the whole body within limit bytes: a larger body is 400 body_too_large, a client too slow
// for the server's read timeout is 408, a body that is not UTF-8 is 400 (encoding/json would replace the
// bad bytes silently). Read errors never echo socket addresses.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &mbe):
			return nil, &apiError{Status: http.StatusBadRequest, Code: "body_too_large",
				Message: fmt.Sprintf("the request body exceeds %d bytes", mbe.Limit)}
		case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
			return nil, &apiError{Status: http.StatusRequestTimeout, Code: "request_timeout",
				Message: "the request body did not arrive within the server's read timeout"}
		default:
			return nil, badRequest("the request body could not be read")
		}
	}
	if !utf8.Valid(data) {
		return nil, badRequest("the request body is not valid UTF-8")
	}
	return data, nil
}

// validate checks the request against lim: first every size it implies (cheap, no allocation), then the
// values, then the timestamps (whose extension is bounded by the output limit by then).
func (r *forecastRequest) validate(ctx context.Context, lim limits) error {
	if err := rejectKronosFields(&r.ForecastRequest); err != nil {
		return err
	}
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
	if len(r.Series) > lim.MaxSeries {
		return badRequest(fmt.Sprintf("series: %d series exceed the limit of %d", len(r.Series), lim.MaxSeries))
	}
	if len(r.Quantiles) > lim.MaxQuantiles {
		return badRequest(fmt.Sprintf("quantiles: at most %d levels", lim.MaxQuantiles))
	}
	if r.Quantiles != nil && len(r.Quantiles) == 0 {
		return badRequest("quantiles: give at least one level, or leave the field out for the defaults")
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
	var in int64
	for _, s := range r.Series {
		in += int64(len(s.Values))
		for _, c := range s.Covariates {
			in += int64(len(c.Past) + len(c.Future) + len(c.PastLabels) + len(c.FutureLabels))
		}
	}
	if in > lim.MaxInputValues {
		return badRequest(fmt.Sprintf("the request holds %d input values (series and covariates), above the limit of %d",
			in, lim.MaxInputValues))
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
	for i, q := range r.Quantiles {
		if !(q > 0 && q < 1) {
			return badRequest(fmt.Sprintf("quantiles[%d]: must lie in (0, 1)", i))
		}
	}
	for i, s := range r.Series {
		at := fmt.Sprintf("series[%d]", i)
		if len(s.Values) == 0 {
			return badRequest(at + ".values: at least one value is required")
		}
		if len(s.Values) > lim.MaxSeriesLen {
			return badRequest(fmt.Sprintf("%s.values: %d values exceed the limit of %d", at, len(s.Values), lim.MaxSeriesLen))
		}
		if err := checkFloats(s.Values, at+".values"); err != nil {
			return err
		}
		if s.Group < 0 {
			return badRequest(at + ".group: must be >= 0")
		}
		if s.Timestamps != nil && len(s.Timestamps) != len(s.Values) {
			return badRequest(fmt.Sprintf("%s.timestamps: %d timestamps for %d values", at, len(s.Timestamps), len(s.Values)))
		}
		if len(s.Covariates) > lim.MaxCovariates {
			return badRequest(fmt.Sprintf("%s.covariates: at most %d", at, lim.MaxCovariates))
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
			if err := checkFloats(c.Past, cat+".past"); err != nil {
				return err
			}
			if err := checkFloats(c.Future, cat+".future"); err != nil {
				return err
			}
		}
	}
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

// checkFloats rejects values that are not finite (JSON cannot carry NaN/Inf, but huge literals overflow).
func checkFloats(v []*float64, at string) error {
	for k, x := range v {
		if x != nil && (math.IsInf(*x, 0) || math.IsNaN(*x) || math.Abs(*x) > math.MaxFloat32) {
			return badRequest(fmt.Sprintf("%s[%d]: not a finite float32", at, k))
		}
	}
	return nil
}

func toFloat32(v []*float64) []float32 {
	if v == nil {
		return nil
	}
	out := make([]float32, len(v))
	for i, x := range v {
		if x == nil {
			out[i] = float32(math.NaN())
		} else {
			out[i] = float32(*x)
		}
	}
	return out
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

// toBinding converts a validated request for the cutenative binding.
func toBinding(r *forecastRequest) *cutenative.ForecastRequest {
	out := &cutenative.ForecastRequest{Horizon: r.Horizon, Quantiles: levelsOf(r)}
	for i, s := range r.Series {
		out.Series = append(out.Series, cutenative.Series{Values: toFloat32(s.Values), Group: s.Group})
		for _, c := range s.Covariates {
			out.Covariates = append(out.Covariates, cutenative.Covariate{Series: i, Past: toFloat32(c.Past),
				Future: toFloat32(c.Future), PastLabels: c.PastLabels, FutureLabels: c.FutureLabels})
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

// ---- timestamps ----

var timeLayouts = []string{"2006-01", "2006-01-02", time.RFC3339Nano}

// parseTimestamps parses non-empty stamps in the format of the first (one of timeLayouts) and hands each, in
// order, to each, whose error stops the parse; at names the stamps in errors ("timestamps",
// "series[0].future_timestamps"). It returns the format.
func parseTimestamps(stamps []string, at string, each func(i int, t time.Time) error) (string, error) {
	var layout string
	for _, l := range timeLayouts {
		if _, err := time.Parse(l, stamps[0]); err == nil {
			layout = l
			break
		}
	}
	if layout == "" {
		return "", badRequest(at + "[0]: want YYYY-MM, YYYY-MM-DD or RFC 3339, got " + strconv.Quote(stamps[0]))
	}
	for i, s := range stamps {
		t, err := time.Parse(layout, s)
		if err != nil {
			return "", badRequest(fmt.Sprintf("%s[%d]: not in the format of %s[0]: %q", at, i, at, s))
		}
		if err := each(i, t); err != nil {
			return "", err
		}
	}
	return layout, nil
}

// futureTimestamps continues a regular series of timestamps by `horizon` steps in the input's format:
// by calendar months when consecutive stamps are whole months apart (same day of month), by a fixed
// duration otherwise. Irregular or unparsable stamps give nil (no timestamps in the response) or an error.
func futureTimestamps(stamps []string, horizon int) ([]string, error) {
	if len(stamps) == 0 {
		return nil, nil
	}
	ts := make([]time.Time, len(stamps))
	layout, err := parseTimestamps(stamps, "timestamps", func(i int, t time.Time) error {
		if i > 0 && !t.After(ts[i-1]) {
			return badRequest(fmt.Sprintf("timestamps[%d]: not after timestamps[%d]", i, i-1))
		}
		ts[i] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(ts) < 2 {
		return nil, nil
	}
	months := func(a, b time.Time) (int, bool) {
		m := (b.Year()-a.Year())*12 + int(b.Month()-a.Month())
		return m, b.Day() == a.Day() && b.Sub(a.AddDate(0, m, 0)) == 0
	}
	step, monthly := months(ts[0], ts[1])
	for i := 2; i < len(ts) && monthly; i++ {
		m, ok := months(ts[i-1], ts[i])
		monthly = ok && m == step
	}
	last := ts[len(ts)-1]
	if monthly && step > 0 {
		// Years past 9999 cannot be written in these formats; AddDate takes the month count whole.
		if end := last.AddDate(0, step*horizon, 0); end.Year() > 9999 {
			return nil, badRequest(fmt.Sprintf("timestamps: the forecast's last step would fall in the year %d (after 9999)", end.Year()))
		}
		out := make([]string, horizon)
		for h := range out {
			out[h] = last.AddDate(0, step*(h+1), 0).Format(layout)
		}
		return out, nil
	}
	d := ts[1].Sub(ts[0]) // saturates at about 292 years: each step must round-trip
	for i := 1; i < len(ts); i++ {
		if ts[i].Sub(ts[i-1]) != d || !ts[i-1].Add(d).Equal(ts[i]) {
			return nil, nil // irregular (or steps too long for a duration): no future stamps
		}
	}
	// d * horizon can overflow time.Duration (about 292 years): check the end in days first, then step.
	if days := float64(d) / float64(24*time.Hour) * float64(horizon); float64(last.Year())+days/365.2425 > 9999 {
		return nil, badRequest(fmt.Sprintf("timestamps: %d steps of %s after %s run past the year 9999", horizon, d, stamps[len(stamps)-1]))
	}
	out := make([]string, horizon)
	t := last
	for h := range out {
		t = t.Add(d)
		out[h] = t.Format(layout)
	}
	return out, nil
}

// buildResponse turns a forecast (already sliced to this request's series) into the response body.
func buildResponse(model string, r *forecastRequest, f *cutenative.Forecast, firstSeries int) *api.ForecastResponse {
	resp := &api.ForecastResponse{Model: model, Horizon: f.Horizon, Quantiles: f.Quantiles}
	median := -1
	for q, l := range f.Quantiles {
		if l == 0.5 {
			median = q
		}
	}
	for i, s := range r.Series {
		sf := api.SeriesForecast{ID: s.ID, Quantiles: make([][]float32, len(f.Quantiles))}
		for q := range f.Quantiles {
			sf.Quantiles[q] = append([]float32(nil), f.Row(firstSeries+i, q)...)
		}
		if median >= 0 {
			sf.Median = sf.Quantiles[median]
		}
		sf.Timestamps = r.future[i]
		resp.Forecasts = append(resp.Forecasts, sf)
	}
	return resp
}

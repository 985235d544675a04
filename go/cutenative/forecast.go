package cutenative

/*
#include <stdlib.h>
#include "cutenative.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// Series is one target series of a forecast request.
type Series struct {
	Values []float32 // NaN marks a missing value; ±Inf is rejected
	// Group joins series into one multivariate task: 0 makes the series a task of its own; series that
	// share a positive number are forecast jointly.
	Group int
	// Timestamps of the values and FutureTimestamps of the Horizon forecast steps: Unix seconds (UTC),
	// strictly increasing across both. Kronos needs them on the first series of each OHLCV group (its
	// calendar features: minute, hour, weekday, day, month); Chronos-2 ignores them. nil: none.
	Timestamps       []int64
	FutureTimestamps []int64
}

// Sampling holds the sampling parameters of sampled forecasters (Kronos).
type Sampling struct {
	Temperature float32 // > 0
	TopK        int     // >= 0; 0 turns top-k off; > 0 disables TopP (as the reference does)
	TopP        float32 // in (0, 1]
	SampleCount int     // sampled paths per task, averaged into the mean; 1..4096
}

// DefaultSampling is what a request with a nil Sampling uses: the reference predictor's defaults.
func DefaultSampling() Sampling {
	return Sampling{Temperature: 1, TopK: 0, TopP: 0.9, SampleCount: 1}
}

// Decoding is how a forecaster that rolls out patch by patch (Toto) decodes; other models ignore it. The zero
// value is the default: all sample paths in one model call, with the KV cache.
type Decoding struct {
	SamplesPerBatch int  // sample paths per model call; 0: all at once; else it must divide SampleCount
	NoKVCache       bool // recompute every patch at each step (the reference's use_kv_cache=False: other numerics)
	MeanRollout     bool // roll out the mixture's mean instead of sampling: one output, no samples, no quantiles
}

// Covariate is an input-only series attached to the task of Series[Series]. Set Past/Future for a
// numeric covariate, or PastLabels/FutureLabels (nil entries = missing) for a categorical one.
type Covariate struct {
	Series       int
	Past         []float32 // same length as the series; NaN = missing
	Future       []float32 // known future values for the first len(Future) <= Horizon steps
	PastLabels   []*string
	FutureLabels []*string
}

// ForecastRequest is a batch of forecasting tasks.
//
// Kronos: each task is a group (Series sharing a positive Group) of 4, 5 or 6 series in the order open,
// high, low, close[, volume[, amount]], all of one length, no NaN, with Timestamps and FutureTimestamps on
// the group's first series; no Covariates, no Quantiles. Every series gets its mean path.
type ForecastRequest struct {
	Series     []Series
	Covariates []Covariate
	Horizon    int
	Quantiles  []float32 // levels to return, each in (0, 1); nil: the model's own levels

	// Sampled forecasters (Kronos); other models ignore these. Sampling nil: DefaultSampling(). Seed seeds
	// the sampler right before inference: the same request and seed give the same forecast (on CPU, the
	// reference's tokens after torch.manual_seed(Seed)). ReturnSamples also returns every sampled path.
	Sampling      *Sampling
	Seed          uint64
	ReturnSamples bool
	Decoding      *Decoding // Toto; nil: the zero Decoding
}

// Forecast holds a forecast, laid out [series][output][step]: an output per quantile level (Chronos-2), one, the
// mean path, for forecasters without quantiles (Kronos: Quantiles is nil), or the sample paths' quantiles then
// their mean (Toto: Mean is true; with Decoding.MeanRollout the mean path alone).
type Forecast struct {
	Quantiles []float32
	Mean      bool // the last output is the mean path (Toto)
	Horizon   int
	NSeries   int
	Values    []float32
	// Sampled forecasters: NSamples paths per series (the request's sample count; 0 for other models), and
	// with ReturnSamples every path in Samples, laid out [series][sample][step] (a path is one output wide) (else nil).
	NSamples int
	Samples  []float32
}

// Outputs is the number of outputs per series and step: len(Quantiles), plus 1 with Mean, and at least 1.
func (f *Forecast) Outputs() int {
	n := len(f.Quantiles)
	if f.Mean {
		n++
	}
	return max(n, 1)
}

// At returns the forecast of series s at output (quantile index) q and step h (0-based).
func (f *Forecast) At(s, q, h int) float32 {
	return f.Values[(s*f.Outputs()+q)*f.Horizon+h]
}

// Row returns the [step] slice of series s at output (quantile index) q (a view into Values). Kronos: Row(s,
// 0) is the mean path of series s.
func (f *Forecast) Row(s, q int) []float32 {
	i := (s*f.Outputs() + q) * f.Horizon
	return f.Values[i : i+f.Horizon]
}

// SamplePath returns sampled path k of series s (a view into Samples). A path is one output wide (ABI 0.6), so q
// must be 0; it stays for the callers written when Samples repeated the outputs. It panics when the forecast holds
// no samples (the request did not set ReturnSamples) or q is not 0.
func (f *Forecast) SamplePath(s, k, q int) []float32 {
	if q != 0 {
		panic("cutenative: SamplePath: a sample path has one output (q must be 0)")
	}
	i := (s*f.NSamples + k) * f.Horizon
	return f.Samples[i : i+f.Horizon]
}

// cLabels copies labels into C memory; free with freeLabels.
func cLabels(labels []*string) **C.char {
	if len(labels) == 0 {
		return nil
	}
	arr := (**C.char)(C.malloc(C.size_t(len(labels)) * C.size_t(unsafe.Sizeof(uintptr(0)))))
	s := unsafe.Slice(arr, len(labels))
	for i, l := range labels {
		if l == nil {
			s[i] = nil
		} else {
			s[i] = C.CString(*l)
		}
	}
	return arr
}

func freeLabels(arr **C.char, n int) {
	if arr == nil {
		return
	}
	for _, p := range unsafe.Slice(arr, n) {
		if p != nil {
			C.free(unsafe.Pointer(p))
		}
	}
	C.free(unsafe.Pointer(arr))
}

func floatPtr(v []float32) *C.float {
	if len(v) == 0 {
		return nil
	}
	return (*C.float)(unsafe.Pointer(&v[0]))
}

func int64Ptr(v []int64) *C.int64_t {
	if len(v) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&v[0]))
}

func invalid(msg string) error {
	return &Error{Op: "Forecast", Status: StatusInvalidArgument, Message: msg}
}

// buildRequest copies req into a new C request (caller frees it).
func buildRequest(req *ForecastRequest) (*C.cn_forecast_request, error) {
	var r *C.cn_forecast_request
	if err := call("Forecast", func(e *C.cn_error) C.cn_status { return C.cn_forecast_request_create(&r, e) }); err != nil {
		return nil, err
	}
	fail := func(err error) (*C.cn_forecast_request, error) {
		C.cn_forecast_request_free(r)
		return nil, err
	}
	for i, s := range req.Series {
		if s.Group < 0 {
			return fail(invalid(fmt.Sprintf("series[%d].group: must be >= 0", i)))
		}
		group := C.int64_t(-1)
		if s.Group > 0 {
			group = C.int64_t(s.Group)
		}
		err := call("Forecast", func(e *C.cn_error) C.cn_status {
			return C.cn_forecast_request_add_series(r, floatPtr(s.Values), C.size_t(len(s.Values)), group, nil, e)
		})
		if err != nil {
			return fail(fmt.Errorf("series[%d]: %w", i, err))
		}
		if s.Timestamps != nil || s.FutureTimestamps != nil {
			err := call("Forecast", func(e *C.cn_error) C.cn_status {
				return C.cn_forecast_request_set_timestamps(r, C.size_t(i), int64Ptr(s.Timestamps), C.size_t(len(s.Timestamps)),
					int64Ptr(s.FutureTimestamps), C.size_t(len(s.FutureTimestamps)), e)
			})
			if err != nil {
				return fail(fmt.Errorf("series[%d]: %w", i, err))
			}
		}
	}
	for i, c := range req.Covariates {
		if c.Series < 0 {
			return fail(invalid(fmt.Sprintf("covariates[%d].series: must be >= 0", i)))
		}
		var err error
		if c.PastLabels != nil || c.FutureLabels != nil {
			past, fut := cLabels(c.PastLabels), cLabels(c.FutureLabels)
			err = call("Forecast", func(e *C.cn_error) C.cn_status {
				return C.cn_forecast_request_add_categorical_covariate(r, C.size_t(c.Series), past, C.size_t(len(c.PastLabels)),
					fut, C.size_t(len(c.FutureLabels)), e)
			})
			freeLabels(past, len(c.PastLabels))
			freeLabels(fut, len(c.FutureLabels))
		} else {
			err = call("Forecast", func(e *C.cn_error) C.cn_status {
				return C.cn_forecast_request_add_covariate(r, C.size_t(c.Series), floatPtr(c.Past), C.size_t(len(c.Past)),
					floatPtr(c.Future), C.size_t(len(c.Future)), e)
			})
		}
		if err != nil {
			return fail(fmt.Errorf("covariates[%d]: %w", i, err))
		}
	}
	if err := call("Forecast", func(e *C.cn_error) C.cn_status {
		return C.cn_forecast_request_set_horizon(r, C.int64_t(req.Horizon), e)
	}); err != nil {
		return fail(err)
	}
	if req.Quantiles != nil {
		if err := call("Forecast", func(e *C.cn_error) C.cn_status {
			return C.cn_forecast_request_set_quantiles(r, floatPtr(req.Quantiles), C.size_t(len(req.Quantiles)), e)
		}); err != nil {
			return fail(err)
		}
	}
	if sp := req.Sampling; sp != nil {
		// The library checks the values; here only that they fit its int32 fields.
		if sp.TopK < math.MinInt32 || sp.TopK > math.MaxInt32 {
			return fail(invalid(fmt.Sprintf("top_k: %d does not fit in an int32", sp.TopK)))
		}
		if sp.SampleCount < math.MinInt32 || sp.SampleCount > math.MaxInt32 {
			return fail(invalid(fmt.Sprintf("sample_count: %d does not fit in an int32 (at most 4096)", sp.SampleCount)))
		}
		if err := call("Forecast", func(e *C.cn_error) C.cn_status {
			return C.cn_forecast_request_set_sampling(r, C.float(sp.Temperature), C.int32_t(sp.TopK), C.float(sp.TopP),
				C.int32_t(sp.SampleCount), e)
		}); err != nil {
			return fail(err)
		}
	}
	if d := req.Decoding; d != nil {
		if d.SamplesPerBatch < 0 || d.SamplesPerBatch > math.MaxInt32 {
			return fail(invalid(fmt.Sprintf("samples_per_batch: %d does not fit in an int32 (at most 4096)", d.SamplesPerBatch)))
		}
		kv, mean := C.int32_t(1), C.int32_t(0)
		if d.NoKVCache {
			kv = 0
		}
		if d.MeanRollout {
			mean = 1
		}
		if err := call("Forecast", func(e *C.cn_error) C.cn_status {
			return C.cn_forecast_request_set_decoding(r, C.int32_t(d.SamplesPerBatch), kv, mean, e)
		}); err != nil {
			return fail(err)
		}
	}
	return r, nil
}

// Forecast runs req. Cancelling ctx (or its deadline) stops the library between batches and rollout
// steps; the error then matches both ctx.Err() and ErrCancelled (context.Canceled) or ErrDeadlineExceeded
// (context.DeadlineExceeded).
func (m *Model) Forecast(ctx context.Context, req *ForecastRequest) (*Forecast, error) {
	if req == nil {
		return nil, invalid("request is nil")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out *Forecast
	err := m.with(func(p *C.cn_model) error {
		levels := req.Quantiles
		if levels == nil {
			q, err := quantilesOf(p)
			switch {
			case errors.Is(err, ErrUnsupported): // no quantile head (Kronos): one output, the mean path
			case err != nil:
				return err
			default:
				levels = q
			}
		}
		r, err := buildRequest(req)
		if err != nil {
			return err
		}
		defer C.cn_forecast_request_free(r)
		var shape C.cn_forecast_shape
		C.cn_forecast_shape_init(&shape)
		if err := call("Forecast", func(e *C.cn_error) C.cn_status { return C.cn_forecast_get_shape(p, r, &shape, e) }); err != nil {
			return err
		}
		f := &Forecast{Quantiles: append([]float32(nil), levels...), Horizon: int(shape.horizon), NSeries: int(shape.n_series),
			NSamples: int(shape.n_samples)}
		switch n := int(shape.n_outputs); {
		case n == f.Outputs(): // the quantiles (Chronos-2), or Kronos' mean path
		case n == len(levels)+1: // Toto: the quantiles, then the mean
			f.Mean = true
		case n == 1 && req.Decoding != nil && req.Decoding.MeanRollout: // Toto's mean rollout
			f.Quantiles, f.Mean = nil, true
		default:
			return &Error{Op: "Forecast", Status: StatusInternal, Message: "output shape disagrees with the quantile levels"}
		}
		f.Values = make([]float32, int(shape.n_values))
		if req.ReturnSamples && shape.n_sample_values > 0 {
			f.Samples = make([]float32, int(shape.n_sample_values))
		}
		if err := runWithContext(ctx, "Forecast", func(opts *C.cn_run_options, e *C.cn_error) C.cn_status {
			if st := C.cn_run_options_set_seed(opts, C.uint64_t(req.Seed), e); st != C.CN_STATUS_OK {
				return st
			}
			return C.cn_forecast(p, r, opts, floatPtr(f.Values), C.size_t(len(f.Values)), floatPtr(f.Samples), C.size_t(len(f.Samples)), e)
		}); err != nil {
			return err
		}
		out = f
		return nil
	})
	return out, err
}

// runWithContext makes run options tied to ctx (deadline and cancellation) for one call.
func runWithContext(ctx context.Context, op string, f func(opts *C.cn_run_options, e *C.cn_error) C.cn_status) error {
	return runWithProgress(ctx, op, nil, 0, f)
}

// runWithProgress is runWithContext that also reports the options' progress to report (when not nil): polled
// every `every` while f runs, and once more when f has returned, each time only when it changed. The reports
// come from one goroutine at a time (the poller, then the caller after the poller has exited), so they never
// overlap, and the last one returns before runWithProgress does (the options are freed after it).
func runWithProgress(ctx context.Context, op string, report func(done, total uint64), every time.Duration,
	f func(opts *C.cn_run_options, e *C.cn_error) C.cn_status) error {
	var opts *C.cn_run_options
	if err := call(op, func(e *C.cn_error) C.cn_status { return C.cn_run_options_create(&opts, e) }); err != nil {
		return err
	}
	defer C.cn_run_options_free(opts)
	if dl, ok := ctx.Deadline(); ok {
		ms := int64(math.Ceil(float64(time.Until(dl)) / float64(time.Millisecond)))
		if ms < 1 {
			ms = 1
		}
		C.cn_run_options_set_timeout_ms(opts, C.int64_t(ms), nil)
	}
	done := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		C.cn_run_options_cancel(opts)
		close(done)
	})
	var stopPolling func()
	if report != nil {
		stopPolling = pollProgress(opts, report, every)
	}
	err := call(op, func(e *C.cn_error) C.cn_status { return f(opts, e) })
	if stopPolling != nil {
		stopPolling()
	}
	if !stop() {
		<-done // the cancel may be running: wait before the options are freed
	}
	if err != nil && (errors.Is(err, ErrCancelled) || errors.Is(err, ErrDeadlineExceeded)) {
		if cerr := ctx.Err(); cerr != nil {
			var ce *Error
			if errors.Is(cerr, context.DeadlineExceeded) && errors.As(err, &ce) && ce.Status == StatusCancelled {
				// The context's timer cancelled the call just before the library's own deadline check would
				// have stopped it: a deadline either way.
				err = &Error{Op: ce.Op, Status: StatusDeadlineExceeded, Message: "the context's deadline passed (" + ce.Message + ")"}
			}
			return fmt.Errorf("%w (%w)", cerr, err)
		}
		if errors.Is(err, ErrDeadlineExceeded) {
			return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
		}
	}
	return err
}

// pollProgress starts a goroutine that reports the progress of opts every `every` (at least 1 ms) when it
// changed. The returned function stops it, waits for it to exit and then makes the final report.
func pollProgress(opts *C.cn_run_options, report func(done, total uint64), every time.Duration) func() {
	if every < time.Millisecond {
		every = time.Millisecond
	}
	var last [2]uint64 // written by the poller, then (after it exited) by the final report
	poll := func() {
		var d, t C.uint64_t
		if C.cn_run_options_get_progress(opts, &d, &t, nil) != C.CN_STATUS_OK || t == 0 {
			return // the call has not set its total yet
		}
		if now := [2]uint64{uint64(d), uint64(t)}; now != last {
			last = now
			report(now[0], now[1])
		}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				poll()
			}
		}
	}()
	return func() {
		close(quit)
		<-exited
		poll()
	}
}

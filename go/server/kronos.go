package server

// Kronos models over POST /v1/forecast: a series of the request is one task of OHLC[V[A]] bars with
// timestamps; the response holds each channel's mean path and, on request, every sampled path. A request is
// seeded on its own (an unseeded one gets a fresh seed, echoed in the answer), so it runs alone (never merged),
// through the same admission, limits and lanes as Chronos-2 requests.

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

// The library's Kronos limits (core/models/kronos/kronos_model.h), checked here first so that a refusal names
// the request's own fields.
const (
	kronosMaxSamples   = 4096    // sample paths per task
	kronosMaxRows      = 65536   // tasks x sample_count per call
	kronosMaxHistory   = 1 << 16 // bars of one task
	kronosMaxTokenRows = 1 << 20 // sum over tasks of sample_count x min(bars + horizon, max_context)
	kronosMinTemp      = 1e-6
)

// kronosChannels are the series fields of a Kronos task, in the library's order.
var kronosChannels = []string{"open", "high", "low", "close", "volume", "amount"}

// kronosDefaults is the sampling of a request that gives none (the reference predictor's defaults, as
// cutenative.DefaultSampling; written here in float64 so that 0.9 stays 0.9 in JSON).
var kronosDefaults = api.Sampling{Temperature: 1, TopK: 0, TopP: 0.9, SampleCount: 1}

// kronosRequest is a validated Kronos request.
type kronosRequest struct {
	*forecastRequest
	sampling      api.Sampling
	returnSamples bool
	tasks         []kronosTask
}

type kronosTask struct {
	channels        [][]float32 // open, high, low, close[, volume[, amount]]
	history, future []int64     // Unix seconds
	futureText      []string    // the forecast steps' timestamps as the response gives them
}

// channelsOf returns the channel fields of s in order, up to the last one given (a gap stays nil).
func channelsOf(s *seriesIn) [][]float32 {
	all := s.Channels[:]
	n := len(all)
	for n > 0 && all[n-1] == nil {
		n--
	}
	return all[:n]
}

// rejectKronosFields refuses the fields of other kinds (forecast.go's kindFields) and, in a request for a model
// that is not Kronos, the bars' fields.
func rejectKronosFields(r *forecastRequest, kind string) error {
	if err := r.refuseFieldsOf(kind); err != nil {
		return err
	}
	for i := range r.Series {
		s := &r.Series[i]
		for c, ch := range channelsOf(s) {
			if ch != nil {
				return badRequest(fmt.Sprintf("series[%d].%s: this model takes values; open, high, low, close, volume and "+
					"amount are for kronos models", i, kronosChannels[c]))
			}
		}
		if s.FutureTimestamps != nil {
			return badRequest(fmt.Sprintf("series[%d].future_timestamps: only kronos models take them", i))
		}
	}
	return nil
}

// validateKronos checks a request for a Kronos model whose window is maxContext bars: first every size it
// implies (no allocation), then the sampling parameters, the values and the timestamps.
func (r *forecastRequest) validateKronos(ctx context.Context, lim limits, maxContext int64) (*kronosRequest, error) {
	if err := r.refuseFieldsOf("kronos"); err != nil {
		return nil, err
	}
	if r.Quantiles != nil {
		return nil, badRequest("quantiles: kronos models forecast a mean path and sample paths, not quantiles")
	}
	if r.Horizon < 1 {
		return nil, badRequest("horizon: must be >= 1")
	}
	if int64(r.Horizon) > lim.ModelMaxHorizon {
		return nil, badRequest(fmt.Sprintf("horizon: %d exceeds the model's limit of %d (its max_context)", r.Horizon, lim.ModelMaxHorizon))
	}
	if r.Horizon > lim.MaxHorizon {
		return nil, badRequest(fmt.Sprintf("horizon: %d exceeds the server's limit of %d (-max-horizon)", r.Horizon, lim.MaxHorizon))
	}
	if len(r.Series) == 0 {
		return nil, badRequest("series: at least one series is required")
	}
	if len(r.Series) > lim.MaxSeries {
		return nil, badRequest(fmt.Sprintf("series: %d series exceed the limit of %d", len(r.Series), lim.MaxSeries))
	}
	k := &kronosRequest{forecastRequest: r, sampling: kronosDefaults}
	if err := k.readSampling(); err != nil {
		return nil, err
	}
	S := int64(k.sampling.SampleCount)
	if rows := int64(len(r.Series)) * S; rows > kronosMaxRows {
		return nil, badRequest(fmt.Sprintf("sample_count: %d series x %d samples = %d rows exceed the limit of %d per request",
			len(r.Series), S, rows, kronosMaxRows))
	}
	// Structure and sizes, per series.
	var in, channels, tokenRows int64
	for i := range r.Series {
		s := &r.Series[i]
		at := fmt.Sprintf("series[%d]", i)
		switch {
		case s.Values != nil:
			return nil, badRequest(at + ".values: kronos models take open, high, low, close[, volume[, amount]] instead")
		case s.Group != 0:
			return nil, badRequest(at + ".group: kronos models forecast each series on its own; leave group out")
		case s.Covariates != nil:
			return nil, badRequest(at + ".covariates: kronos models take none")
		}
		chs := channelsOf(s)
		for c, ch := range chs {
			if ch == nil {
				if c < 4 {
					return nil, badRequest(fmt.Sprintf("%s.%s: required by kronos models (open, high, low, close[, volume[, amount]])",
						at, kronosChannels[c]))
				}
				return nil, badRequest(fmt.Sprintf("%s.amount: needs volume (open, high, low, close[, volume[, amount]])", at))
			}
		}
		if len(chs) < 4 {
			return nil, badRequest(fmt.Sprintf("%s.%s: required by kronos models (open, high, low, close[, volume[, amount]])",
				at, kronosChannels[len(chs)]))
		}
		n := len(s.Channels[0])
		if n == 0 {
			return nil, badRequest(at + ".open: at least one bar is required")
		}
		if n > lim.MaxSeriesLen || n > kronosMaxHistory {
			return nil, badRequest(fmt.Sprintf("%s.open: %d bars exceed the limit of %d", at, n, min(lim.MaxSeriesLen, kronosMaxHistory)))
		}
		for c, ch := range chs {
			if len(ch) != n {
				return nil, badRequest(fmt.Sprintf("%s.%s: %d values, open has %d", at, kronosChannels[c], len(ch), n))
			}
		}
		if s.Timestamps == nil {
			return nil, badRequest(at + ".timestamps: required by kronos models (one per bar)")
		}
		if len(s.Timestamps) != n {
			return nil, badRequest(fmt.Sprintf("%s.timestamps: %d timestamps for %d bars", at, len(s.Timestamps), n))
		}
		if s.FutureTimestamps != nil && len(s.FutureTimestamps) != r.Horizon {
			return nil, badRequest(fmt.Sprintf("%s.future_timestamps: %d timestamps for a horizon of %d", at, len(s.FutureTimestamps), r.Horizon))
		}
		in += int64(n) * int64(len(chs))
		channels += int64(len(chs))
		tokenRows += S * min(int64(n)+int64(r.Horizon), maxContext)
	}
	if in > lim.MaxInputValues {
		return nil, badRequest(fmt.Sprintf("the request holds %d input values, above the limit of %d", in, lim.MaxInputValues))
	}
	if tokenRows > kronosMaxTokenRows {
		return nil, badRequest(fmt.Sprintf("sample_count: %d samples x the series' windows = %d token rows exceed the limit of %d "+
			"per request; split it", S, tokenRows, kronosMaxTokenRows))
	}
	// The response's size in float values: mean paths, sample paths when returned, future timestamps at 8
	// values each. Every factor is bounded by now (channels <= 6 x series, series x samples <= 65536, horizon
	// <= the model's max_context), so the products cannot overflow.
	mean := channels * int64(r.Horizon)
	var paths int64
	if k.returnSamples {
		paths = mean * S
	}
	stamps := int64(len(r.Series)) * int64(r.Horizon)
	if size := mean + paths + 8*stamps; size > lim.MaxOutputValues {
		return nil, badRequest(fmt.Sprintf("the forecast would hold %d mean-path values, %d sample-path values (return_samples) "+
			"and %d future timestamps (8 values each), above the limit of %d (-max-output-values)", mean, paths, stamps, lim.MaxOutputValues))
	}
	// Values (the timestamps come in times, once the request is admitted: the forecast steps' are as many as the
	// answer's values).
	for i := range r.Series {
		s := &r.Series[i]
		chs := channelsOf(s)
		for c, ch := range chs {
			if err := checkBars(ch, fmt.Sprintf("series[%d].%s", i, kronosChannels[c])); err != nil {
				return nil, err
			}
		}
		k.tasks = append(k.tasks, kronosTask{channels: chs})
	}
	return k, nil
}

// times parses each task's timestamps and those of its forecast steps.
func (k *kronosRequest) times(ctx context.Context) error {
	for i := range k.tasks {
		if err := ctx.Err(); err != nil {
			return err
		}
		t, err := kronosTimes(&k.Series[i], k.Horizon, fmt.Sprintf("series[%d]", i))
		if err != nil {
			return err
		}
		t.channels = k.tasks[i].channels
		k.tasks[i] = t
	}
	return nil
}

// readSampling takes the sampling parameters, each checked as the library will see it (float32, int32).
func (k *kronosRequest) readSampling() error {
	r := k.forecastRequest
	if r.Temperature != nil {
		t := *r.Temperature
		if !(t >= kronosMinTemp && t <= math.MaxFloat32) {
			return badRequest("temperature: must be >= 1e-6 (and a finite float32)")
		}
		k.sampling.Temperature = t
	}
	if r.TopK != nil {
		if *r.TopK < 0 || *r.TopK > math.MaxInt32 {
			return badRequest("top_k: must be >= 0 (0: off) and fit in an int32")
		}
		k.sampling.TopK = *r.TopK
	}
	if r.TopP != nil {
		p := *r.TopP
		if !(float32(p) > 0 && p <= 1) {
			return badRequest("top_p: must lie in (0, 1] (and not round to 0 as a float32)")
		}
		k.sampling.TopP = p
	}
	if r.SampleCount != nil {
		if *r.SampleCount < 1 || *r.SampleCount > kronosMaxSamples {
			return badRequest(fmt.Sprintf("sample_count: must be in [1, %d]", kronosMaxSamples))
		}
		k.sampling.SampleCount = *r.SampleCount
	}
	if r.Seed != nil {
		k.sampling.Seed = *r.Seed
	} else {
		k.sampling.Seed = freshSeed()
	}
	k.returnSamples = r.ReturnSamples != nil && *r.ReturnSamples
	return nil
}

// checkBars refuses missing values (Kronos takes none; the decoder made JSON null NaN, and finite numbers only).
func checkBars(v []float32, at string) error {
	for k, x := range v {
		if x != x {
			return badRequest(fmt.Sprintf("%s[%d]: null (kronos models take no missing values)", at, k))
		}
	}
	return nil
}

// kronosTimes parses a task's timestamps into Unix seconds: the history's, and the forecast steps' as given
// or, when not given, continued from regular history timestamps.
func kronosTimes(s *seriesIn, horizon int, at string) (kronosTask, error) {
	var t kronosTask
	var err error
	if t.history, err = unixSeconds(s.Timestamps, at+".timestamps"); err != nil {
		return t, err
	}
	t.futureText = s.FutureTimestamps
	if t.futureText == nil {
		if t.futureText, err = futureTimestamps(s.Timestamps, horizon); err != nil {
			var ae *apiError
			if !errors.As(err, &ae) {
				return t, err
			}
			return t, badRequest(at + "." + ae.Message)
		}
		if t.futureText == nil {
			return t, badRequest(at + ".future_timestamps: required when the timestamps are not regular (or fewer than 2): " +
				"the forecast steps' times cannot be inferred")
		}
	}
	if t.future, err = unixSeconds(t.futureText, at+".future_timestamps"); err != nil {
		return t, err
	}
	if t.future[0] <= t.history[len(t.history)-1] {
		return t, badRequest(at + ".future_timestamps[0]: not after the last of timestamps (in whole seconds)")
	}
	return t, nil
}

// unixSeconds parses timestamps in the format of the first (YYYY-MM, YYYY-MM-DD or RFC 3339; UTC unless an
// offset is given) into strictly increasing seconds of their wall-clock time: the Unix seconds of the same
// calendar date and clock reading in UTC. Kronos takes its calendar features (minute, hour, weekday, day, month)
// from these, as the reference reads them from timezone-aware pandas timestamps: "09:30+08:00" is hour 9.
func unixSeconds(stamps []string, at string) ([]int64, error) {
	out := make([]int64, len(stamps))
	if _, err := parseTimestamps(stamps, at, func(i int, t time.Time) error {
		_, offset := t.Zone()
		out[i] = t.Unix() + int64(offset)
		if i > 0 && out[i] <= out[i-1] {
			return badRequest(fmt.Sprintf("%s[%d]: not after %s[%d] (in whole seconds of wall-clock time)", at, i, at, i-1))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// binding converts a validated request: a group per task, its channels in order, the timestamps on the first.
func (k *kronosRequest) binding() *cutenative.ForecastRequest {
	out := &cutenative.ForecastRequest{Horizon: k.Horizon, Seed: k.sampling.Seed, ReturnSamples: k.returnSamples,
		Sampling: &cutenative.Sampling{Temperature: float32(k.sampling.Temperature), TopK: k.sampling.TopK,
			TopP: float32(k.sampling.TopP), SampleCount: k.sampling.SampleCount}}
	for i, t := range k.tasks {
		for c, ch := range t.channels {
			s := cutenative.Series{Values: ch, Group: i + 1}
			if c == 0 {
				s.Timestamps, s.FutureTimestamps = t.history, t.future
			}
			out.Series = append(out.Series, s)
		}
	}
	return out
}

// kronos is the forecaster of Kronos models.
type kronos struct {
	m *servedModel
	// The shapes the working-memory estimate needs: the predictor's (config.json) and the tokenizer's
	// (tokenizer/config.json, which the library does not describe).
	dModel, ff, layers, heads, vocab int64
	tokD, tokFF                      int64
}

func newKronos(m *servedModel) (forecaster, error) {
	// Unread shapes take Kronos-base's, the larger of the published models.
	k := &kronos{m: m, dModel: 832, ff: 2048, layers: 12, heads: 16, vocab: 1 << 10, tokD: 256, tokFF: 512}
	var cfg struct {
		DModel int64 `json:"d_model"`
		FF     int64 `json:"ff_dim"`
		Layers int64 `json:"n_layers"`
		Heads  int64 `json:"n_heads"`
		S1Bits int64 `json:"s1_bits"`
	}
	if desc, err := m.model.Describe(); err == nil {
		var d struct {
			Config json.RawMessage `json:"config"`
		}
		if json.Unmarshal([]byte(desc), &d) == nil && json.Unmarshal(d.Config, &cfg) == nil && cfg.DModel > 0 && cfg.Layers > 0 &&
			cfg.Heads > 0 {
			k.dModel, k.layers, k.heads = cfg.DModel, cfg.Layers, cfg.Heads
			if cfg.FF > 0 {
				k.ff = cfg.FF
			}
			if cfg.S1Bits > 0 && cfg.S1Bits < 31 {
				k.vocab = 1 << cfg.S1Bits
			}
		}
	}
	if m.dir != "" {
		var tok struct {
			DModel int64 `json:"d_model"`
			FF     int64 `json:"ff_dim"`
		}
		if b, err := os.ReadFile(filepath.Join(m.dir, "tokenizer", "config.json")); err == nil && json.Unmarshal(b, &tok) == nil &&
			tok.DModel > 0 && tok.FF > 0 {
			k.tokD, k.tokFF = tok.DModel, tok.FF
		}
	}
	return k, nil
}

// work: a decoding step per horizon step, each over every row's window (tasks x samples rows).
func (k *kronos) work(samples int64, bars []int64, horizon int64) work {
	maxCtx := max(k.m.info.ContextLength, 1)
	var tokenRows, rows int64
	for _, n := range bars {
		tokenRows += samples * min(n+horizon, maxCtx)
		rows += samples
	}
	return work{passes: horizon, units: tokenRows * horizon,
		what: fmt.Sprintf("%d decoding steps over %d sample rows of up to %d bars", horizon, rows, maxCtx)}
}

// callMemory bounds the call's peak working memory (host memory on a CPU), from the measured fit of
// scripts/measure_forecast_memory.py (docs/benchmarks.md, "Forecast call memory"): tasks of one bar count are a
// batch of N = tasks x samples rows, batches run one after another; a batch holds the largest of its phases (the
// tokenizer's encoding of the history and decoding of the window, the predictor's window recompute or fused
// prefill), its KV cache (fused: max_context long, whatever the window) and its per-row state. Allocator slack is
// a factor of 1.1 for tensors of 32 MiB and more (mmapped), 1.65 below (the heap's fragmentation). Measured on
// 470 calls it is above every call of 24 MB or more, by 1.03-2.12x (median 1.42x).
func (k *kronos) callMemory(samples int64, bars []int64, horizon int64) int64 {
	C := max(k.m.info.ContextLength, 1)
	fused := k.m.info.Mode != "eager"
	kT := 4 * (15*k.tokD + 8*k.tokFF) / 2 // 4 * (7.5 td + 4 tff)
	kS := 4 * max((22*k.dModel+19*k.ff)/4, 14*k.dModel+2*k.vocab)
	kP := 4 * (46*k.dModel + 21*k.ff) / 4 // 4 * (11.5 d + 5.25 ff)
	batches := map[int64]int64{}
	for _, n := range bars {
		batches[n]++
	}
	var peak int64
	for T0, tasks := range batches {
		N := tasks * samples
		W, Wd := min(T0+horizon-1, C), min(T0+horizon, C)
		slack := func(perRow, tokens, dim int64) int64 {
			if N*tokens*dim*4 >= 32<<20 {
				return perRow * 11 / 10
			}
			return perRow * 165 / 100
		}
		phase := max(slack(T0*kT, T0, k.tokD), slack(Wd*kT, Wd, k.tokD))
		if !fused || T0+horizon-1 > C {
			phase = max(phase, slack(W*kS+k.vocab, W, k.dModel))
		}
		var cache int64
		if fused && T0 <= C {
			phase = max(phase, slack(T0*kP+k.vocab, T0, k.dModel))
			cache = 8 * C * k.dModel * (k.layers + 1)
		}
		pers := 36*(T0+horizon) + 24*T0
		peak = max(peak, N*(phase+cache+pers))
	}
	return peak + 4<<20
}

func (k *kronos) probes() (probe, probe) {
	mk := func(samples int) probe {
		const bars, horizon = 16, 2
		v := make([]float32, bars)
		ts := make([]int64, bars)
		for i := range v {
			v[i], ts[i] = 100+float32(i%5), int64(1700000000+60*i)
		}
		req := &cutenative.ForecastRequest{Horizon: horizon, Seed: 1,
			Sampling: &cutenative.Sampling{Temperature: 1, TopP: 0.9, SampleCount: samples}}
		for c := 0; c < 4; c++ {
			s := cutenative.Series{Values: v, Group: 1}
			if c == 0 {
				s.Timestamps, s.FutureTimestamps = ts, []int64{ts[bars-1] + 60, ts[bars-1] + 120}
			}
			req.Series = append(req.Series, s)
		}
		return probe{w: k.work(int64(samples), []int64{bars}, horizon), run: func(ctx context.Context) error {
			_, err := k.m.model.Forecast(ctx, req)
			return err
		}}
	}
	return mk(1), mk(64)
}

func (k *kronos) plan(ctx context.Context, req *forecastRequest, lim limits) (*forecastPlan, error) {
	kr, err := req.validateKronos(ctx, lim, k.m.info.ContextLength)
	if err != nil {
		return nil, err
	}
	S := int64(kr.sampling.SampleCount)
	bars := make([]int64, len(kr.tasks))
	var channels int64
	for i, t := range kr.tasks {
		bars[i] = int64(len(t.channels[0]))
		channels += int64(len(t.channels))
	}
	H := int64(kr.Horizon)
	outputs := channels*H + 8*int64(len(kr.tasks))*H // a future timestamp counts as 8 values
	if kr.returnSamples {
		outputs += channels * H * S
	}
	p := &forecastPlan{work: k.work(S, bars, H), callMem: k.callMemory(S, bars, H), outputs: outputs}
	p.finish = func(ctx context.Context) error {
		if err := kr.times(ctx); err != nil {
			return err
		}
		p.call = kr.binding()
		return nil
	}
	p.answer = func(f *cutenative.Forecast, _ int) (any, error) {
		resp, i := kr.response(k.m.name, f)
		if i >= 0 {
			return nil, badRequest(fmt.Sprintf("series[%d]: the forecast is not finite (values too large for the model's "+
				"float32 arithmetic)", i))
		}
		return resp, nil
	}
	return p, nil
}

// freshSeed is the seed of a request that names none: random, and echoed in the answer so it can be replayed.
func freshSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// response builds the body from the forecast, or returns the index of a series whose forecast is not finite.
func (k *kronosRequest) response(model string, f *cutenative.Forecast) (*api.ForecastResponse, int) {
	sampling := k.sampling
	resp := &api.ForecastResponse{Model: model, Horizon: f.Horizon, Sampling: &sampling}
	first := 0
	for i, t := range k.tasks {
		sf := api.SeriesForecast{ID: k.Series[i].ID, Timestamps: t.futureText, Mean: &api.Bars{}}
		if f.Samples != nil {
			sf.Samples = &api.Samples{BarSamples: &api.BarSamples{}}
		}
		for c := range t.channels {
			mean := append([]float32(nil), f.Row(first+c, 0)...)
			if !finite(mean) {
				return nil, i
			}
			*barField(sf.Mean, c) = mean
			if sf.Samples == nil {
				continue
			}
			paths := make([][]float32, f.NSamples)
			for p := range paths {
				paths[p] = append([]float32(nil), f.SamplePath(first+c, p, 0)...)
				if !finite(paths[p]) {
					return nil, i
				}
			}
			*samplesField(sf.Samples.BarSamples, c) = paths
		}
		first += len(t.channels)
		resp.Forecasts = append(resp.Forecasts, sf)
	}
	return resp, -1
}

func finite(v []float32) bool {
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return false
		}
	}
	return true
}

func barField(b *api.Bars, c int) *[]float32 {
	return [...]*[]float32{&b.Open, &b.High, &b.Low, &b.Close, &b.Volume, &b.Amount}[c]
}

func samplesField(b *api.BarSamples, c int) *[][]float32 {
	return [...]*[][]float32{&b.Open, &b.High, &b.Low, &b.Close, &b.Volume, &b.Amount}[c]
}

// describeKronos adds what a client needs to call a Kronos model to its /v1/models entry.
func describeKronos(mi *api.ModelInfo) {
	if mi.Kind != "kronos" {
		return
	}
	d := kronosDefaults
	mi.Channels, mi.Sampling, mi.MaxSampleCount = kronosChannels, &d, kronosMaxSamples
}

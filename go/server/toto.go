package server

// Toto models over POST /v1/forecast: a series is a task of its own and the series of one group are the variates
// of one multivariate task; the answer holds, per series, the quantiles of its sample paths at the request's
// levels, their mean (mean_path) and, on request, every path; with mean_rollout, the mixture's mean rolled out
// instead (mean_path alone). A request is seeded on its own (an unseeded one gets a fresh seed, echoed), so it runs
// alone (never merged), through the same admission, limits and lanes as the other forecasters.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

// The library's Toto limits (core/models/toto/toto_pipeline.h), checked here first so that a refusal names the
// request's own fields.
const (
	totoMaxSamples    = 4096    // sample_count
	totoMaxVariates   = 1024    // series of one group (task)
	totoMaxSteps      = 1 << 16 // a task's history padded to whole patches + the horizon rounded up to whole patches
	totoMaxCallValues = 1 << 32 // one model call's rows x steps x (embed_dim + 8 K)
)

// totoDefaultSamples is the sample_count of a request that names none. The reference's evaluations draw 256 paths;
// every path is a row of every model call (the history is prefilled once per path), so the compute and the working
// memory of a request grow with it, and on a CPU 256 paths of Toto-Open-Base (151 M parameters) over a 512-step
// history are about 0.6 TFLOP for the prefill alone. 64 paths put the 10 % and 90 % quantiles within about +-4
// percentage points of their level (the binomial spread, sqrt(0.1 x 0.9 / 64)) at a quarter of that; ask for 256
// where the tails matter.
const totoDefaultSamples = 64

// totoDefaults is the sampling of a request that gives none (samples_per_batch: all paths in one model call).
var totoDefaults = api.Sampling{SampleCount: totoDefaultSamples, SamplesPerBatch: totoDefaultSamples, KVCache: true}

// toto is the forecaster of Toto models, with the shapes its estimates need (config.json, as the library reads it).
type toto struct {
	m                                   *servedModel
	patch, dim, layers, heads, mlp, mix int64
	timeLayers, spaceLayers             int64
}

func newToto(m *servedModel) (forecaster, error) {
	// Unread shapes take Toto-Open-Base-1.0's.
	t := &toto{m: m, patch: 64, dim: 768, layers: 12, heads: 12, mlp: 3072, mix: 24}
	every := int64(12) // spacewise_every_n_layers (where the space-wise layer sits in its block changes no count)
	var d struct {
		Config struct {
			Patch  int64  `json:"patch_size"`
			Dim    int64  `json:"embed_dim"`
			Layers int64  `json:"num_layers"`
			Heads  int64  `json:"num_heads"`
			MLP    int64  `json:"mlp_hidden_dim"`
			Every  *int64 `json:"spacewise_every_n_layers"`
			Output struct {
				K int64 `json:"k_components"`
			} `json:"output_distribution_kwargs"`
		} `json:"config"`
	}
	if desc, err := m.model.Describe(); err == nil && json.Unmarshal([]byte(desc), &d) == nil {
		c := d.Config
		if c.Patch > 0 && c.Dim > 0 && c.Layers > 0 && c.Heads > 0 && c.MLP > 0 {
			t.patch, t.dim, t.layers, t.heads, t.mlp = c.Patch, c.Dim, c.Layers, c.Heads, c.MLP
			if c.Output.K > 0 {
				t.mix = c.Output.K
			}
			if c.Every != nil {
				every = *c.Every
			}
		}
	}
	if every > 0 && t.layers%every == 0 {
		t.spaceLayers = t.layers / every
	}
	t.timeLayers = t.layers - t.spaceLayers
	return t, nil
}

// totoRequest is a validated Toto request.
type totoRequest struct {
	*forecastRequest
	sampling      api.Sampling // SampleCount 0: the mean rollout
	returnSamples bool
	levels        []float32 // none for the mean rollout
	batches       []totoBatch
	stamped       int64 // series whose answer carries timestamps (at most)
}

// totoBatch is what the library runs as one reference call: the tasks with as many variates and the same history
// padded to whole patches.
type totoBatch struct {
	variates, padded, tasks int64
}

func (q *totoRequest) mean() bool { return q.sampling.SampleCount == 0 }

// copies is the rows a series takes in a model call: samples_per_batch, or 1 for the mean rollout.
func (q *totoRequest) copies() int64 { return max(int64(q.sampling.SamplesPerBatch), 1) }

// validate checks a request for the model: the fields of other kinds, the decoding, every size it implies (tasks,
// steps, the largest model call, the answer) before anything proportional to them is allocated, then the values.
func (t *toto) validate(r *forecastRequest, lim limits) (*totoRequest, error) {
	if err := rejectKronosFields(r, "toto"); err != nil {
		return nil, err
	}
	if r.Horizon < 1 {
		return nil, badRequest("horizon: must be >= 1")
	}
	if int64(r.Horizon) > lim.ModelMaxHorizon {
		return nil, badRequest(fmt.Sprintf("horizon: %d exceeds the model's limit of %d", r.Horizon, lim.ModelMaxHorizon))
	}
	if r.Horizon > lim.MaxHorizon {
		return nil, badRequest(fmt.Sprintf("horizon: %d exceeds the server's limit of %d (-max-horizon)", r.Horizon, lim.MaxHorizon))
	}
	if len(r.Series) == 0 {
		return nil, badRequest("series: at least one series is required")
	}
	q := &totoRequest{forecastRequest: r}
	if err := q.readDecoding(); err != nil {
		return nil, err
	}
	// Tasks (a group's series, a series of group 0 alone) and the batches they form.
	P := t.patch
	rounded := (int64(r.Horizon) + P - 1) / P * P
	type task struct{ variates, length int64 }
	var tasks []task
	first := make([]int, 0, len(r.Series)) // the first series of each task
	byGroup := map[int]int{}
	for i := range r.Series {
		s := &r.Series[i]
		at := fmt.Sprintf("series[%d]", i)
		switch {
		case s.Values == nil:
			return nil, badRequest(at + ".values: required (this model takes values)")
		case len(s.Values) == 0:
			return nil, badRequest(at + ".values: at least one value is required")
		case s.Group < 0:
			return nil, badRequest(at + ".group: must be >= 0")
		case s.Covariates != nil:
			return nil, badRequest(at + ".covariates: toto models take none (give related series one group: the variates of one task)")
		case s.Timestamps != nil && len(s.Timestamps) != len(s.Values):
			return nil, badRequest(fmt.Sprintf("%s.timestamps: %d timestamps for %d values", at, len(s.Timestamps), len(s.Values)))
		}
		if len(s.Timestamps) > 1 {
			q.stamped++
		}
		k, ok := byGroup[s.Group]
		if s.Group == 0 || !ok {
			k = len(tasks)
			tasks = append(tasks, task{})
			first = append(first, i)
			if s.Group != 0 {
				byGroup[s.Group] = k
			}
		}
		tasks[k].variates++
		tasks[k].length = max(tasks[k].length, int64(len(s.Values)))
		if tasks[k].variates > totoMaxVariates {
			return nil, badRequest(fmt.Sprintf("%s.group: group %d holds more than %d series, the most variates of one toto task",
				at, s.Group, totoMaxVariates))
		}
	}
	byShape := map[[2]int64]int{}
	for k, tk := range tasks {
		L := (tk.length + P - 1) / P * P
		if L+rounded > totoMaxSteps {
			return nil, badRequest(fmt.Sprintf("series[%d]: a history of %d values (%d padded to whole patches of %d) and a horizon of %d "+
				"(%d) exceed the model's %d steps", first[k], tk.length, L, P, r.Horizon, rounded, totoMaxSteps))
		}
		key := [2]int64{tk.variates, L}
		b, ok := byShape[key]
		if !ok {
			b = len(q.batches)
			byShape[key] = b
			q.batches = append(q.batches, totoBatch{variates: tk.variates, padded: L})
		}
		q.batches[b].tasks++
	}
	// The largest model call of each batch: every row over the steps it processes at once (the prefill with the KV
	// cache, the last call without), as the library bounds it.
	width := t.dim + 8*t.mix
	for k, b := range q.batches {
		rows := q.copies() * b.tasks * b.variates
		steps := b.padded
		if !q.sampling.KVCache {
			steps += rounded - P
		}
		field := "samples_per_batch"
		if q.mean() {
			field = "series"
		}
		// As the library bounds a call (core/models/toto/toto_pipeline.cpp, make_plan): the network's activations,
		// or the float64 scaler over the whole sequence (about 24 floats a step), and the KV cache.
		total := b.padded + rounded
		if float64(rows)*max(float64(steps)*float64(width), float64(total)*24) > totoMaxCallValues {
			return nil, badRequest(fmt.Sprintf("%s: a model call of %d rows (samples_per_batch %d x %d tasks x %d variates) x %d steps "+
				"exceeds the library's limit of 2^32 activations per call (batch %d); lower samples_per_batch or split the request",
				field, rows, q.copies(), b.tasks, b.variates, total, k))
		}
		if q.sampling.KVCache && 2*float64(max(t.timeLayers, 1))*float64(rows)*float64(t.dim)*float64(total/P) > totoMaxCallValues {
			return nil, badRequest(fmt.Sprintf("%s: the KV cache of %d rows x %d patches exceeds the library's limit of 2^32 values "+
				"(batch %d); lower samples_per_batch, split the request or set kv_cache false", field, rows, total/P, k))
		}
	}
	// The answer's size in float values: each series' quantiles and mean path, its sample paths when returned,
	// future timestamps at 8 values each. Every factor is bounded by now.
	H, n := int64(r.Horizon), int64(len(r.Series))
	// The library keeps every sample path's horizon whether or not they are returned, up to its 2^28 output limit.
	if !q.mean() && n*int64(q.sampling.SampleCount)*H > 1<<28 {
		return nil, badRequest(fmt.Sprintf("sample_count: %d series x %d sample paths x horizon %d is more than the library's "+
			"limit of 2^28 path values per call; lower sample_count or split the request", n, q.sampling.SampleCount, H))
	}
	outs := n * int64(len(q.levels)+1) * H
	var paths int64
	if q.returnSamples {
		paths = n * int64(q.sampling.SampleCount) * H
	}
	if size := outs + paths + 8*q.stamped*H; size > lim.MaxOutputValues {
		return nil, badRequest(fmt.Sprintf("the forecast would hold %d values (%d series x (%d quantile levels + the mean path) x horizon "+
			"%d), %d sample-path values (return_samples) and %d future timestamps (8 values each), above the limit of %d "+
			"(-max-output-values)", outs, n, len(q.levels), H, paths, q.stamped*H, lim.MaxOutputValues))
	}
	return q, nil
}

// readDecoding takes the sampling and decoding fields, with their defaults, each checked as the library will see it.
func (q *totoRequest) readDecoding() error {
	r := q.forecastRequest
	q.sampling = totoDefaults
	if r.KVCache != nil {
		q.sampling.KVCache = *r.KVCache
	}
	if r.MeanRollout != nil && *r.MeanRollout {
		const why = ": the mean rollout forecasts the mixture's mean path, drawing no samples; leave it out (or sample for it)"
		for _, f := range []struct {
			name  string
			given bool
		}{{"quantiles", r.Quantiles != nil}, {"sample_count", r.SampleCount != nil}, {"samples_per_batch", r.SamplesPerBatch != nil},
			{"seed", r.Seed != nil}, {"return_samples", r.ReturnSamples != nil && *r.ReturnSamples}} {
			if f.given {
				return badRequest(f.name + why)
			}
		}
		q.sampling.SampleCount, q.sampling.SamplesPerBatch = 0, 0
		return nil
	}
	if r.SampleCount != nil {
		if *r.SampleCount < 1 || *r.SampleCount > totoMaxSamples {
			return badRequest(fmt.Sprintf("sample_count: must be in [1, %d]", totoMaxSamples))
		}
		q.sampling.SampleCount = *r.SampleCount
	}
	q.sampling.SamplesPerBatch = q.sampling.SampleCount
	if r.SamplesPerBatch != nil {
		b := *r.SamplesPerBatch
		if b < 1 || b > q.sampling.SampleCount || q.sampling.SampleCount%b != 0 {
			return badRequest(fmt.Sprintf("samples_per_batch: must divide sample_count (%d): the paths drawn per model call", q.sampling.SampleCount))
		}
		q.sampling.SamplesPerBatch = b
	}
	if r.Seed != nil {
		q.sampling.Seed = *r.Seed
	} else {
		q.sampling.Seed = freshSeed()
	}
	q.returnSamples = r.ReturnSamples != nil && *r.ReturnSamples
	levels := r.Quantiles
	if levels == nil {
		levels = defaultQuantiles
	}
	if len(levels) == 0 {
		return badRequest("quantiles: give at least one level, or leave the field out for the defaults")
	}
	q.levels = make([]float32, len(levels))
	for i, l := range levels {
		// Checked as the library sees it: 1e-300 is 0 as a float32, 0.30000001 and 0.3 are one level.
		f := float32(l)
		if !(l > 0 && l < 1) || !(f > 0 && f < 1) {
			return badRequest(fmt.Sprintf("quantiles[%d]: %v is not in (0, 1) as a float32", i, l))
		}
		if i > 0 && !(f > q.levels[i-1]) {
			return badRequest(fmt.Sprintf("quantiles[%d]: %v does not ascend (toto models take levels in ascending order, each once)", i, l))
		}
		q.levels[i] = f
	}
	return nil
}

// binding converts a validated request (the decoded values are the library's already).
func (q *totoRequest) binding() *cutenative.ForecastRequest {
	out := &cutenative.ForecastRequest{Horizon: q.Horizon, Seed: q.sampling.Seed, ReturnSamples: q.returnSamples,
		Decoding: &cutenative.Decoding{SamplesPerBatch: q.sampling.SamplesPerBatch, NoKVCache: !q.sampling.KVCache, MeanRollout: q.mean()},
		Series:   make([]cutenative.Series, len(q.Series))}
	if !q.mean() {
		out.Quantiles = q.levels
		out.Sampling = &cutenative.Sampling{Temperature: 1, TopP: 0.9, SampleCount: q.sampling.SampleCount}
	}
	for i, s := range q.Series {
		out.Series[i] = cutenative.Series{Values: s.Values, Group: s.Group}
	}
	return out
}

// flopsPerToken is a model call's arithmetic per patch it runs through the transformer, attending over ctx patches
// (time-wise) and v variates (space-wise): the layers' projections and SwiGLU, the unembedding to the patch's steps
// and the mixture's heads over them, and both attentions.
func (t *toto) flopsPerToken(ctx, v int64) float64 {
	D, P := float64(t.dim), float64(t.patch)
	dense := float64(t.layers)*(4*D*D+3*D*float64(t.mlp)) + P*D*D + 4*P*D*float64(t.mix)
	return 2*dense + 4*D*(float64(ctx)*float64(t.timeLayers)+float64(v)*float64(t.spaceLayers))
}

// scalerFlops is what the causal scaler costs a row per step of the sequence so far, at every call: about 20
// float64 element-wise passes and three cumulative sums, memory-bound, counted as 200 multiply-adds (it is most of
// a small model's call once the sequence is long, and a few percent of Toto-Open-Base's). drawFlops is a draw
// from one mixture component (a gamma, a normal, the categorical's share), counted as 4000 (about 0.5 µs on the
// 2-core machine, where a tiny model's multiply-add is about 0.1 ns): the first call samples
// every step it ran (the prefill's too), then a patch per call.
const (
	scalerFlops = 200
	drawFlops   = 4000
)

// work: passes are the model calls (sample batches x rounded horizon / patch, per batch of tasks); units are their
// arithmetic in kFLOP (flopsPerToken over the patches each call runs: the whole history at the first call with
// the KV cache and one patch after, the whole sequence so far at every call without; the scaler over the whole
// sequence so far at every call; the draws over the steps each call ran). On tiny_a the estimate was 0.34-1.43x the
// measured time of 15 calls (0.6-49 s; a busy 2-core machine): low for many paths over long rollouts.
func (t *toto) work(q *totoRequest) work {
	P := t.patch
	steps := (int64(q.Horizon) + P - 1) / P
	sampleBatches := int64(1)
	if !q.mean() {
		sampleBatches = int64(q.sampling.SampleCount / q.sampling.SamplesPerBatch)
	}
	// Fused and graph modes (fused: the server's default) run a sampled request's prefill once per series for all its copies and
	// sample batches: its network arithmetic counts the series' rows once; its draws still cover every copy.
	prefillOnce := (t.m.info.Mode == "fused" || t.m.info.Mode == "graph") && q.sampling.KVCache && !q.mean()
	var passes, rowsAll int64
	var flops float64
	for _, b := range q.batches {
		rows := q.copies() * b.tasks * b.variates
		rowsAll += rows
		passes += sampleBatches * steps
		hist := b.padded / P
		for i := int64(0); i < steps; i++ {
			ctx := hist + i
			tokens := ctx
			if q.sampling.KVCache && i > 0 {
				tokens = 1
			}
			draws := float64(tokens*P*t.mix) * drawFlops
			if q.mean() {
				draws /= 25 // the mixture's mean: a weighted sum
			}
			network := float64(sampleBatches) * float64(rows) * float64(tokens) * t.flopsPerToken(ctx, b.variates)
			if i == 0 && prefillOnce {
				network = float64(b.tasks*b.variates) * float64(tokens) * t.flopsPerToken(ctx, b.variates)
			}
			flops += network + float64(sampleBatches)*float64(rows)*(float64(ctx*P)*scalerFlops+draws)
		}
	}
	what := fmt.Sprintf("%d model calls over %d rows (samples_per_batch x series)", passes, rowsAll)
	return work{passes: passes, units: int64(min(flops/1e3, math.MaxInt64/4)), what: what}
}

// callMemory estimates the call's peak working memory (host memory on a CPU) from the model's shapes. Batches run
// one after another; each holds, for N = samples_per_batch x tasks x variates rows of Lt = padded history + rounded
// horizon steps: the KV cache (2 x time layers x N x embed_dim x Lt/patch floats), the rollout's sequences (the
// inputs, their padding mask and the copies each step's concatenation makes), the sample batches' finished paths
// with their concatenation, the statistics (a sort of every series' paths per quantile level), and the largest of
// the model call's phases: the float64 causal scaler over the sequence so far (about 100 bytes a step), the
// layers' activations (about 4 x (16 x embed_dim + 4 x mlp_hidden_dim) bytes a patch; the time-wise attention
// runs fused, the space-wise one holds its mask and scores, 5 bytes per patch x head x variates^2), or the
// unembedding and the mixture with its sampling temporaries (4 x (embed_dim + 12 K) bytes a step; the prefill's
// call samples every step it ran). The request holds its outputs and sample paths besides. A factor of 1.5 covers
// the allocator's slack (glibc's heap fragments: docs/benchmarks.md, "Forecast call memory"). It is an estimate:
// the library does not report its allocations; on tiny_a (scripts/measure_forecast_memory.py's method: one fresh
// process a call, peak RSS increase) it is 1.29-2.17x the measured peak of 15 calls of 126 MB to 4.9 GB
// (toto_test.go).
func (t *toto) callMemory(q *totoRequest) int64 {
	P, D, K := float64(t.patch), float64(t.dim), float64(t.mix)
	S := float64(max(q.sampling.SampleCount, 1))
	H := float64(q.Horizon)
	rounded := math.Ceil(H/P) * P
	var peak float64
	for _, b := range q.batches {
		N := float64(q.copies()) * float64(b.tasks) * float64(b.variates)
		V, L := float64(b.variates), float64(b.padded)
		Lt := L + rounded
		var cache, paths, stats float64
		if q.sampling.KVCache {
			cache = 2 * float64(t.timeLayers) * N * D * (Lt / P) * 4
		}
		rollout := N * Lt * 5 * 3 // inputs (4 bytes) and mask (1): the batch's, the step's and its concatenation
		if !q.mean() {
			paths = 2 * S * float64(b.tasks) * V * Lt * 4
			stats = float64(b.tasks) * V * H * (S*16 + float64(len(q.levels)+1)*4)
		}
		// The largest call: the prefill with the cache (T = L steps), the last call without (T = Lt - P).
		T := L
		if !q.sampling.KVCache {
			T = Lt - P
		}
		patches := T / P
		scaler := N * (Lt - P) * 100
		layer := N*patches*4*(16*D+4*float64(t.mlp)) + N/V*patches*float64(t.heads)*V*V*5
		head := N * T * 4 * (D + 12*K)
		peak = max(peak, cache+rollout+paths+stats+max(scaler, layer, head))
	}
	n := float64(len(q.Series))
	outputs := n * H * (float64(len(q.levels)+1) + S) * 4
	return int64(min((peak+outputs)*1.5+4<<20, math.MaxInt64/4))
}

func (t *toto) probes() (probe, probe) {
	mk := func(samples int) probe {
		v := make([]float32, 4*t.patch) // 4 patches of history, one model call (a horizon of one patch)
		for i := range v {
			v[i] = float32(math.Sin(float64(i)/5) * 10)
		}
		q := &totoRequest{forecastRequest: &forecastRequest{Horizon: int(t.patch), Series: []seriesIn{{Values: v}}},
			sampling: api.Sampling{SampleCount: samples, SamplesPerBatch: samples, KVCache: true, Seed: 1}, levels: levelsOf(&forecastRequest{}),
			batches: []totoBatch{{variates: 1, padded: int64(len(v)), tasks: 1}}}
		req := q.binding()
		return probe{w: t.work(q), run: func(ctx context.Context) error {
			_, err := t.m.model.Forecast(ctx, req)
			return err
		}}
	}
	return mk(1), mk(32)
}

func (t *toto) plan(ctx context.Context, req *forecastRequest, lim limits) (*forecastPlan, error) {
	q, err := t.validate(req, lim)
	if err != nil {
		return nil, err
	}
	n, H := int64(len(q.Series)), int64(q.Horizon)
	outputs := n*int64(len(q.levels)+1)*H + 8*q.stamped*H
	if q.returnSamples {
		outputs += n * int64(q.sampling.SampleCount) * H
	}
	p := &forecastPlan{work: t.work(q), callMem: t.callMemory(q), outputs: outputs}
	p.finish = func(ctx context.Context) error {
		if err := q.timestamps(ctx); err != nil {
			return err
		}
		p.call = q.binding()
		return nil
	}
	p.answer = func(f *cutenative.Forecast, _ int) (any, error) {
		resp, i := q.response(t.m.name, f)
		if i >= 0 {
			return nil, badRequest(fmt.Sprintf("series[%d]: the forecast is not finite (values too large for the model's "+
				"float32 arithmetic)", i))
		}
		return resp, nil
	}
	return p, nil
}

// response builds the body from the forecast (the rows are the forecast's own memory: it lives until the answer is
// written), or returns the index of a series whose forecast is not finite.
func (q *totoRequest) response(model string, f *cutenative.Forecast) (*api.ForecastResponse, int) {
	resp := &api.ForecastResponse{Model: model, Horizon: f.Horizon, Forecasts: make([]api.SeriesForecast, len(q.Series))}
	if !q.mean() {
		sampling := q.sampling
		resp.Sampling, resp.Quantiles = &sampling, q.levels
	}
	median := -1
	for k, l := range q.levels {
		if l == 0.5 {
			median = k
		}
	}
	for i, s := range q.Series {
		sf := api.SeriesForecast{ID: s.ID, Timestamps: q.future[i], MeanPath: f.Row(i, f.Outputs()-1)}
		if !finite(sf.MeanPath) {
			return nil, i
		}
		if !q.mean() {
			sf.Quantiles = make([][]float32, len(q.levels))
			for k := range q.levels {
				if sf.Quantiles[k] = f.Row(i, k); !finite(sf.Quantiles[k]) {
					return nil, i
				}
			}
			if median >= 0 {
				sf.Median = sf.Quantiles[median]
			}
		}
		if f.Samples != nil {
			sf.Samples = &api.Samples{Paths: make([][]float32, f.NSamples)}
			for k := range sf.Samples.Paths {
				if sf.Samples.Paths[k] = f.SamplePath(i, k, 0); !finite(sf.Samples.Paths[k]) {
					return nil, i
				}
			}
		}
		resp.Forecasts[i] = sf
	}
	return resp, -1
}

// describeToto adds what a client needs to call a Toto model to its /v1/models entry.
func describeToto(mi *api.ModelInfo) {
	if mi.Kind != "toto" {
		return
	}
	d := totoDefaults
	mi.Sampling, mi.MaxSampleCount, mi.MaxVariates = &d, totoMaxSamples, totoMaxVariates
}

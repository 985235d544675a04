package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

var totoDir = filepath.Join("..", "..", "tests", "fixtures", "toto", "tiny_a")

func startToto(t *testing.T, cfg Config) *testServer {
	t.Helper()
	cfg.Models = map[string]string{"default": defaultModelDir, "kronos": kronosDir, "toto": totoDir}
	cfg.DefaultModel = "default"
	return start(t, cfg)
}

// totoSeries are a two-variate task (a missing value in the second) and a univariate one, of other lengths.
func totoSeries() []api.Series {
	mk := func(n int, f func(i int) float64) []*float64 {
		out := make([]*float64, n)
		for i := range out {
			v := f(i)
			out[i] = &v
		}
		return out
	}
	cpu := mk(40, func(i int) float64 { return 50 + 10*math.Sin(float64(i)/4) })
	mem := mk(37, func(i int) float64 { return 3 + 0.1*float64(i) })
	mem[20] = nil
	load := mk(25, func(i int) float64 { return float64(i % 7) })
	return []api.Series{{ID: "cpu", Values: cpu, Group: 1}, {ID: "mem", Values: mem, Group: 1}, {ID: "load", Values: load}}
}

func totoBody(t *testing.T, edit func(r *api.ForecastRequest)) string {
	t.Helper()
	r := api.ForecastRequest{Model: "toto", Horizon: 20, Series: totoSeries()}
	if edit != nil {
		edit(&r)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func intp(v int) *int          { return &v }
func boolp(v bool) *bool       { return &v }
func uint64p(v uint64) *uint64 { return &v }

// totoDirect runs the request's series through the binding.
func totoDirect(t *testing.T, req *cutenative.ForecastRequest) *cutenative.Forecast {
	t.Helper()
	m, err := cutenative.Open(totoDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, s := range totoSeries() {
		v := make([]float32, len(s.Values))
		for i, x := range s.Values {
			v[i] = float32(math.NaN())
			if x != nil {
				v[i] = float32(*x)
			}
		}
		req.Series = append(req.Series, cutenative.Series{Values: v, Group: s.Group})
	}
	f, err := m.Forecast(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A seeded Toto request: the same bytes every time (concurrent ones too), the binding's numbers bit for bit
// (quantiles, median, mean path, every sample path), another seed other numbers.
func TestTotoForecastIsSeededAndMatchesTheBinding(t *testing.T) {
	ts := startToto(t, Config{})
	levels := []float64{0.05, 0.5, 0.95}
	body := totoBody(t, func(r *api.ForecastRequest) {
		r.Seed, r.SampleCount, r.SamplesPerBatch, r.ReturnSamples, r.Quantiles = uint64p(11), intp(8), intp(4), boolp(true), levels
	})
	got, first := ts.forecast(t, body)
	var wg sync.WaitGroup
	again := make([][]byte, 4)
	for i := range again {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, _, b := ts.post(t, body); c == 200 {
				again[i] = b
			}
		}()
	}
	wg.Wait()
	for i, b := range again {
		if !bytes.Equal(b, first) {
			t.Fatalf("request %d with the same seed:\n%s\nfirst:\n%s", i, b, first)
		}
	}
	want := api.Sampling{SampleCount: 8, SamplesPerBatch: 4, KVCache: true, Seed: 11}
	if got.Model != "toto" || got.Horizon != 20 || got.Sampling == nil || *got.Sampling != want || len(got.Forecasts) != 3 ||
		fmt.Sprint(got.Quantiles) != "[0.05 0.5 0.95]" || bytes.Contains(first, []byte("temperature")) {
		t.Fatalf("response %.400s", first)
	}
	direct := totoDirect(t, &cutenative.ForecastRequest{Horizon: 20, Seed: 11, ReturnSamples: true, Quantiles: []float32{0.05, 0.5, 0.95},
		Sampling: &cutenative.Sampling{Temperature: 1, TopP: 0.9, SampleCount: 8}, Decoding: &cutenative.Decoding{SamplesPerBatch: 4}})
	for i, fc := range got.Forecasts {
		if fc.ID != totoSeries()[i].ID || len(fc.Quantiles) != 3 || fc.Samples == nil || len(fc.Samples.Paths) != 8 || fc.Mean != nil {
			t.Fatalf("series %d: %+v", i, fc)
		}
		for q := range levels {
			if !testenv.SameBits(fc.Quantiles[q], direct.Row(i, q)) {
				t.Fatalf("series %d level %d: server %v, binding %v", i, q, fc.Quantiles[q], direct.Row(i, q))
			}
		}
		if !testenv.SameBits(fc.Median, direct.Row(i, 1)) || !testenv.SameBits(fc.MeanPath, direct.Row(i, 3)) {
			t.Fatalf("series %d: median %v mean %v, binding %v %v", i, fc.Median, fc.MeanPath, direct.Row(i, 1), direct.Row(i, 3))
		}
		for k, p := range fc.Samples.Paths {
			at := (i*8 + k) * 20
			if len(p) != 20 || !testenv.SameBits(p, direct.Samples[at:at+20]) {
				t.Fatalf("series %d path %d: server %v, binding %v", i, k, p, direct.Samples[at:at+20])
			}
		}
	}
	if _, _, b := ts.post(t, strings.Replace(body, `"seed":11`, `"seed":12`, 1)); bytes.Equal(b, first) || !bytes.Contains(b, []byte(`"seed":12`)) {
		t.Fatalf("seed 12 answered as seed 11: %.300s", b)
	}
}

// Defaults: 64 paths in one model call with the KV cache, the levels 0.1, 0.5, 0.9, no paths; a fresh seed per
// unseeded request, echoed, which replays it; timestamps continued; the mean rollout answers mean_path alone, the
// binding's.
func TestTotoDefaultsAndTheMeanRollout(t *testing.T) {
	ts := startToto(t, Config{})
	stamped := func(r *api.ForecastRequest) {
		r.Horizon = 3
		for i := range r.Series[2].Values {
			r.Series[2].Timestamps = append(r.Series[2].Timestamps, time.Date(2024, 1, 1+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02"))
		}
	}
	got, b := ts.forecast(t, totoBody(t, stamped))
	defaults := *got.Sampling
	defaults.Seed = 0
	fc := got.Forecasts[2]
	if defaults != totoDefaults || defaults.SampleCount != 64 || fmt.Sprint(got.Quantiles) != "[0.1 0.5 0.9]" || fc.Samples != nil ||
		len(fc.Median) != 3 || len(fc.MeanPath) != 3 || strings.Join(fc.Timestamps, ",") != "2024-01-26,2024-01-27,2024-01-28" ||
		got.Forecasts[0].Timestamps != nil {
		t.Fatalf("response %s", b)
	}
	again, _ := ts.forecast(t, totoBody(t, stamped))
	if again.Sampling.Seed == got.Sampling.Seed {
		t.Fatalf("two unseeded requests got the same seed %d", got.Sampling.Seed)
	}
	seed := got.Sampling.Seed
	if _, rb := ts.forecast(t, totoBody(t, func(r *api.ForecastRequest) { stamped(r); r.Seed = &seed })); !bytes.Equal(rb, b) {
		t.Fatalf("the echoed seed %d does not replay the forecast:\n%s\n%s", seed, rb, b)
	}

	for _, kv := range []bool{true, false} {
		got, b := ts.forecast(t, totoBody(t, func(r *api.ForecastRequest) { r.MeanRollout, r.KVCache = boolp(true), boolp(kv) }))
		direct := totoDirect(t, &cutenative.ForecastRequest{Horizon: 20, Decoding: &cutenative.Decoding{MeanRollout: true, NoKVCache: !kv}})
		if got.Sampling != nil || got.Quantiles != nil || bytes.Contains(b, []byte(`"quantiles"`)) || bytes.Contains(b, []byte(`"median"`)) {
			t.Fatalf("mean rollout: %s", b)
		}
		for i, fc := range got.Forecasts {
			if !testenv.SameBits(fc.MeanPath, direct.Row(i, 0)) {
				t.Fatalf("kv %v series %d: server %v, binding %v", kv, i, fc.MeanPath, direct.Row(i, 0))
			}
		}
	}
}

// Every field the model does not take, every decoding the library would refuse and every size beyond a limit is a
// 400 naming it, before anything proportional to the request is allocated.
func TestTotoRefusalsName400Fields(t *testing.T) {
	ts := startToto(t, Config{MaxOutputValues: 100000, MaxSeries: 2048})
	long := func(n int) func(r *api.ForecastRequest) {
		return func(r *api.ForecastRequest) {
			one := 1.0
			r.Series = []api.Series{{Values: make([]*float64, n)}}
			for i := range r.Series[0].Values {
				r.Series[0].Values[i] = &one
			}
		}
	}
	wide := func(r *api.ForecastRequest) {
		r.Series = nil
		for i := 0; i <= totoMaxVariates; i++ {
			r.Series = append(r.Series, api.Series{Values: []*float64{nil}, Group: 3})
		}
	}
	tests := []struct {
		name    string
		edit    func(r *api.ForecastRequest)
		message string
	}{
		{"kronos temperature", func(r *api.ForecastRequest) { r.Temperature = new(float64) }, "temperature: only kronos models take it; this is a toto model"},
		{"kronos top_k", func(r *api.ForecastRequest) { r.TopK = intp(3) }, "top_k: only kronos models take it"},
		{"kronos top_p", func(r *api.ForecastRequest) { p := 0.5; r.TopP = &p }, "top_p: only kronos models take it"},
		{"kronos channel", func(r *api.ForecastRequest) { r.Series[0].Open = r.Series[0].Values }, "series[0].open: this model takes values"},
		{"kronos future timestamps", func(r *api.ForecastRequest) { r.Series[1].FutureTimestamps = []string{"2024-01-01"} },
			"series[1].future_timestamps: only kronos models"},
		{"covariates", func(r *api.ForecastRequest) { r.Series[2].Covariates = []api.Covariate{{Past: r.Series[2].Values}} },
			"series[2].covariates: toto models take none"},
		{"no values", func(r *api.ForecastRequest) { r.Series[1].Values = nil }, "series[1].values: required"},
		{"too many samples", func(r *api.ForecastRequest) { r.SampleCount = intp(4097) }, "sample_count: must be in [1, 4096]"},
		{"paths beyond the library's 2^28", func(r *api.ForecastRequest) {
			// 2048 series of different lengths (128 batches of 16), 4096 paths of 33 steps each, one path a call.
			r.Series = nil
			for i := 0; i < 2048; i++ {
				v := make([]*float64, 1+i%2048)
				for j := range v {
					x := float64(j % 7)
					v[j] = &x
				}
				r.Series = append(r.Series, api.Series{Values: v})
			}
			r.Horizon, r.SampleCount, r.SamplesPerBatch = 33, intp(4096), intp(1)
		}, "sample_count: 2048 series x 4096 sample paths x horizon 33 is more than the library's limit of 2^28"},
		{"no samples", func(r *api.ForecastRequest) { r.SampleCount = intp(0) }, "sample_count: must be in [1, 4096]"},
		{"samples_per_batch not dividing", func(r *api.ForecastRequest) { r.SampleCount, r.SamplesPerBatch = intp(8), intp(3) },
			"samples_per_batch: must divide sample_count (8)"},
		{"samples_per_batch above", func(r *api.ForecastRequest) { r.SampleCount, r.SamplesPerBatch = intp(8), intp(16) },
			"samples_per_batch: must divide sample_count (8)"},
		{"samples_per_batch 0", func(r *api.ForecastRequest) { r.SamplesPerBatch = intp(0) }, "samples_per_batch: must divide"},
		{"mean rollout with quantiles", func(r *api.ForecastRequest) { r.MeanRollout, r.Quantiles = boolp(true), []float64{0.5} },
			"quantiles: the mean rollout forecasts the mixture's mean path"},
		{"mean rollout with samples", func(r *api.ForecastRequest) { r.MeanRollout, r.SampleCount = boolp(true), intp(2) }, "sample_count: the mean rollout"},
		{"mean rollout with a seed", func(r *api.ForecastRequest) { r.MeanRollout, r.Seed = boolp(true), uint64p(1) }, "seed: the mean rollout"},
		{"mean rollout returning samples", func(r *api.ForecastRequest) { r.MeanRollout, r.ReturnSamples = boolp(true), boolp(true) },
			"return_samples: the mean rollout"},
		{"levels descending", func(r *api.ForecastRequest) { r.Quantiles = []float64{0.9, 0.1} }, "quantiles[1]: 0.1 does not ascend"},
		{"level 1", func(r *api.ForecastRequest) { r.Quantiles = []float64{0.5, 1} }, "quantiles[1]: 1 is not in (0, 1)"},
		{"variates", wide, "series[1024].group: group 3 holds more than 1024 series"},
		{"steps", func(r *api.ForecastRequest) { long(65530)(r); r.Horizon = 16 },
			"series[0]: a history of 65530 values (65536 padded to whole patches of 16) and a horizon of 16 (16) exceed the model's 65536 steps"},
		{"the library's per-call limit", func(r *api.ForecastRequest) { long(16384)(r); r.SampleCount = intp(4096) },
			"samples_per_batch: a model call of 4096 rows (samples_per_batch 4096 x 1 tasks x 1 variates) x 16416 steps exceeds"},
		// 3 series x 20 steps x 4096 paths = 245760 sample-path values
		{"sample paths count", func(r *api.ForecastRequest) { r.SampleCount, r.ReturnSamples = intp(4096), boolp(true) },
			"245760 sample-path values (return_samples)"},
		{"Inf", func(r *api.ForecastRequest) { r.Series[0].Values[3] = new(float64); *r.Series[0].Values[3] = 1e39 },
			"series[0].values[3]: not a finite float32"},
	}
	before := heapBytes()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ts.expect400(t, totoBody(t, tc.edit), tc.message) })
	}
	if after := heapBytes(); after > before+64<<20 {
		t.Fatalf("the heap grew from %d to %d bytes", before, after)
	}
	// Toto's fields on the other kinds.
	ts.expect400(t, `{"horizon": 2, "samples_per_batch": 1, "series": [{"values": [1, 2, 3]}]}`,
		"samples_per_batch: only toto models take it; this is a chronos2 model")
	ts.expect400(t, `{"horizon": 2, "sample_count": 2, "series": [{"values": [1, 2, 3]}]}`,
		"sample_count: only kronos and toto models take it; this is a chronos2 model")
	kr := loadKronosFixture(t, "a_greedy")
	ts.expect400(t, kr.body(t, func(r *api.ForecastRequest) { r.KVCache = boolp(false) }), "kv_cache: only toto models take it; this is a kronos model")
	ts.expect400(t, kr.body(t, func(r *api.ForecastRequest) { r.MeanRollout = boolp(true) }), "mean_rollout: only toto models take it")
	// Without the paths the 4096 samples fit.
	if code, _, b := ts.post(t, totoBody(t, func(r *api.ForecastRequest) { r.SampleCount, r.Horizon = intp(4096), 4 })); code != 200 ||
		!bytes.Contains(b, []byte(`"sample_count":4096`)) {
		t.Fatalf("4096 samples: %d %.300s", code, b)
	}
}

// Compute and working memory beyond their limits are 400 too_expensive, naming the limit and the model calls.
func TestTotoTooExpensive(t *testing.T) {
	ts := startToto(t, Config{Timeout: 2 * time.Second})
	for _, tc := range []struct {
		name, body, message string
	}{
		// 4092 model calls of 64 rows over a sequence growing to 65536 steps: about 20 s on the tiny model.
		{"compute", `{"model": "toto", "horizon": 65472, "kv_cache": true, "series": [{"values": [1, 2, 3, 4]}]}`,
			"of compute (4092 model calls over 64 rows (samples_per_batch x series))"},
		// 4096 rows of a 2048-step sequence: the prefill's unembedding and mixture over 1024 steps alone are 2 GiB.
		{"memory", `{"model": "toto", "horizon": 1024, "sample_count": 4096, "series": [{"values": [` +
			strings.Repeat("1, ", 1023) + `1]}]}`, "of working memory in the library (64 model calls over 4096 rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, b := ts.post(t, tc.body)
			e := errorOf(t, b)
			if code != 400 || e.Code != "too_expensive" || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("%d %s", code, b)
			}
		})
	}
}

// Toto requests are never merged: each is a library call of its own, even when they queue together.
func TestTotoRequestsRunAlone(t *testing.T) {
	ts := startToto(t, Config{MaxWait: 100 * time.Millisecond})
	g := newGate()
	ts.setHook(g.hook)
	body := totoBody(t, func(r *api.ForecastRequest) { r.Seed, r.SampleCount = uint64p(1), intp(2) })
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _, _ = ts.post(t, body)
		}()
	}
	<-g.entered
	waitUntil(t, "three requests queued", func() bool { return ts.metrics.queued() == 3 })
	go func() {
		for range g.entered {
		}
	}()
	close(g.release)
	wg.Wait()
	close(g.entered)
	g.mu.Lock()
	defer g.mu.Unlock()
	if fmt.Sprint(g.sizes) != "[1 1 1 1]" || fmt.Sprint(codes) != "[200 200 200 200]" {
		t.Fatalf("library calls of %v requests; statuses %v", g.sizes, codes)
	}
}

func TestTotoModelsListing(t *testing.T) {
	ts := startToto(t, Config{})
	_, b := ts.get(t, "/v1/models")
	var list api.ModelList
	if err := json.Unmarshal([]byte(b), &list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		if m.ID != "toto" {
			continue
		}
		if m.Kind != "toto" || m.NativeHorizon != 16 || m.MaxSampleCount != 4096 || m.MaxVariates != 1024 || m.Sampling == nil ||
			*m.Sampling != totoDefaults || m.Channels != nil || !strings.Contains(b, `"sampling":{"sample_count":64,"samples_per_batch":64,"kv_cache":true,"seed":0}`) {
			t.Fatalf("toto entry %+v", m)
		}
		return
	}
	t.Fatalf("no toto entry: %s", b)
}

// The shapes come from the checkpoint's config.json, and the work counts the library's model calls.
func TestTotoWork(t *testing.T) {
	ts := startToto(t, Config{})
	m, e := ts.find("toto", capForecast)
	if e != nil {
		t.Fatal(e)
	}
	to := m.fc.(*toto)
	if to.patch != 16 || to.dim != 32 || to.layers != 3 || to.heads != 4 || to.mlp != 64 || to.mix != 5 || to.spaceLayers != 1 ||
		to.timeLayers != 2 {
		t.Fatalf("shapes read: %+v", *to)
	}
	lim := ts.limits(m)
	for _, tc := range []struct {
		edit          func(r *api.ForecastRequest)
		passes, batch int64
	}{
		{nil, 4, 2}, // 64 paths in one call, horizon 20 (2 patches): 2 calls, for each of 2 batches (the group, the single series)
		{func(r *api.ForecastRequest) { r.SampleCount, r.SamplesPerBatch = intp(8), intp(2) }, 16, 2},
		{func(r *api.ForecastRequest) { r.MeanRollout = boolp(true) }, 4, 2},
		{func(r *api.ForecastRequest) { r.Horizon = 16 }, 2, 2},
	} {
		req, err := decodeBytes([]byte(totoBody(t, tc.edit)), ts.decodeLimits())
		if err != nil {
			t.Fatal(err)
		}
		q, err := to.validate(req, lim)
		if err != nil {
			t.Fatal(err)
		}
		if w := to.work(q); w.passes != tc.passes || int64(len(q.batches)) != tc.batch || w.units <= 0 {
			t.Fatalf("%s: %d passes, %d batches, %d units", totoBody(t, tc.edit), w.passes, len(q.batches), w.units)
		}
	}
}

// The working-memory estimate against peaks measured on tiny_a (one fresh process a call, f32, eager, one thread,
// glibc's default allocator; the call's peak RSS increase over the loaded, warm model, as
// scripts/measure_forecast_memory.py measures): above each, and within 2.5x (measured 1.29-2.17x).
func TestTotoCallMemoryBoundsMeasuredPeaks(t *testing.T) {
	ts := startToto(t, Config{})
	m, e := ts.find("toto", capForecast)
	if e != nil {
		t.Fatal(e)
	}
	to := m.fc.(*toto)
	nine := levelsOf(&forecastRequest{Quantiles: []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}})
	for _, c := range []struct {
		tasks, variates, history, horizon, samples, perBatch int64
		kv, mean                                             bool
		measuredMB                                           float64
	}{
		{1, 1, 512, 64, 4096, 4096, true, false, 741},
		{1, 1, 4096, 64, 4096, 4096, true, false, 4920},
		{1, 1, 1024, 256, 512, 512, true, false, 242},
		{1, 1, 1024, 256, 512, 512, false, false, 298},
		{1, 1, 8192, 16, 128, 128, true, false, 425},
		{1, 1, 4096, 512, 64, 64, false, false, 138},
		{1, 64, 512, 64, 64, 64, true, false, 749},
		{1, 256, 256, 32, 16, 16, true, false, 539},
		{1, 1024, 64, 16, 4, 4, true, false, 391},
		{8, 4, 1024, 128, 256, 64, true, false, 961},
		{64, 1, 1024, 64, 64, 64, true, false, 1343},
		{1, 1, 1024, 1024, 256, 256, true, false, 127},
		{16, 16, 2048, 64, 0, 0, true, true, 197},
		{1, 1, 32768, 256, 16, 16, true, false, 213},
		{1, 1, 256, 64, 4096, 1024, true, false, 126},
	} {
		q := &totoRequest{forecastRequest: &forecastRequest{Horizon: int(c.horizon), Series: make([]seriesIn, c.tasks*c.variates)},
			sampling: api.Sampling{SampleCount: int(c.samples), SamplesPerBatch: int(c.perBatch), KVCache: c.kv}, levels: nine,
			batches: []totoBatch{{variates: c.variates, padded: c.history, tasks: c.tasks}}}
		if c.mean {
			q.levels = nil
		}
		if est := float64(to.callMemory(q)) / 1e6; est < c.measuredMB || est > 2.5*c.measuredMB {
			t.Errorf("%+v: estimate %.0f MB, measured %.0f MB", c, est, c.measuredMB)
		}
	}
}

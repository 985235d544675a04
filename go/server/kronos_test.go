package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

var kronosDir = filepath.Join("..", "..", "tests", "fixtures", "kronos", "tiny_a")

// kronosFixture is a case of tests/fixtures/kronos/cases.json (one task) as a request body.
type kronosFixture struct {
	req     api.ForecastRequest
	history []int64
	future  []int64
	values  [][]float32 // [channel][bar]
}

func loadKronosFixture(t *testing.T, name string) kronosFixture {
	t.Helper()
	type fixtureCase struct {
		Name        string  `json:"name"`
		PredLen     int     `json:"pred_len"`
		Temperature float64 `json:"temperature"`
		TopK        int     `json:"top_k"`
		TopP        float64 `json:"top_p"`
		SampleCount int     `json:"sample_count"`
		Seed        uint64  `json:"seed"`
		Series      []struct {
			Values    [][]float32 `json:"values"`
			HistoryTS []int64     `json:"history_ts"`
			FutureTS  []int64     `json:"future_ts"`
		} `json:"series"`
	}
	for _, c := range testenv.Cases[fixtureCase](t, filepath.Join("..", "..", "tests", "fixtures", "kronos", "cases.json")) {
		if c.Name != name {
			continue
		}
		s := c.Series[0]
		yes := true
		f := kronosFixture{history: s.HistoryTS, future: s.FutureTS, values: s.Values,
			req: api.ForecastRequest{Model: "kronos", Horizon: c.PredLen, Temperature: &c.Temperature, TopK: &c.TopK,
				TopP: &c.TopP, SampleCount: &c.SampleCount, Seed: &c.Seed, ReturnSamples: &yes}}
		series := api.Series{ID: "bars", Timestamps: rfc3339(s.HistoryTS)}
		fields := []*[]*float64{&series.Open, &series.High, &series.Low, &series.Close, &series.Volume, &series.Amount}
		for ch, v := range s.Values {
			*fields[ch] = make([]*float64, len(v))
			for i, x := range v {
				y := float64(x)
				(*fields[ch])[i] = &y
			}
		}
		f.req.Series = []api.Series{series}
		return f
	}
	t.Fatalf("no Kronos case %s", name)
	return kronosFixture{}
}

func rfc3339(unix []int64) []string {
	out := make([]string, len(unix))
	for i, u := range unix {
		out[i] = time.Unix(u, 0).UTC().Format(time.RFC3339)
	}
	return out
}

// body marshals the fixture's request after edit changes a deep copy of it.
func (f kronosFixture) body(t *testing.T, edit func(r *api.ForecastRequest)) string {
	t.Helper()
	b, err := json.Marshal(f.req)
	if err != nil {
		t.Fatal(err)
	}
	if edit == nil {
		return string(b)
	}
	var r api.ForecastRequest
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	edit(&r)
	if b, err = json.Marshal(r); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func startKronos(t *testing.T, cfg Config) *testServer {
	t.Helper()
	cfg.Models = map[string]string{"default": defaultModelDir, "kronos": kronosDir}
	cfg.DefaultModel = "default"
	return start(t, cfg)
}

// A seeded Kronos request: the same bytes every time (concurrent ones too), the binding's numbers bit for bit,
// and forecast steps' timestamps continued from the bars'.
func TestKronosForecastIsSeededAndMatchesTheBinding(t *testing.T) {
	ts := startKronos(t, Config{})
	f := loadKronosFixture(t, "a_samples") // 4 paths, top-p sampling, seed 3, 5-minute bars
	body := f.body(t, nil)
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
	explicit := f.body(t, func(r *api.ForecastRequest) { r.Series[0].FutureTimestamps = rfc3339(f.future) })
	if _, _, b := ts.post(t, explicit); !bytes.Equal(b, first) {
		t.Fatalf("explicit future timestamps:\n%s\ninferred:\n%s", b, first)
	}
	if _, _, b := ts.post(t, f.body(t, func(r *api.ForecastRequest) { *r.Seed = 4 })); bytes.Equal(b, first) || !bytes.Contains(b, []byte(`"seed":4`)) {
		t.Fatalf("seed 4 answered as seed 3: %s", b)
	}

	want := api.Sampling{Temperature: *f.req.Temperature, TopK: *f.req.TopK, TopP: *f.req.TopP, SampleCount: 4, Seed: 3}
	if got.Model != "kronos" || got.Horizon != f.req.Horizon || got.Quantiles != nil || got.Sampling == nil || *got.Sampling != want ||
		len(got.Forecasts) != 1 {
		t.Fatalf("response %s", first)
	}
	fc := got.Forecasts[0]
	if fc.ID != "bars" || strings.Join(fc.Timestamps, ",") != strings.Join(rfc3339(f.future), ",") || fc.Quantiles != nil {
		t.Fatalf("id %q, timestamps %v (want %v)", fc.ID, fc.Timestamps, rfc3339(f.future))
	}
	m, err := cutenative.Open(kronosDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	req := &cutenative.ForecastRequest{Horizon: f.req.Horizon, Seed: 3, ReturnSamples: true,
		Sampling: &cutenative.Sampling{Temperature: float32(want.Temperature), TopK: want.TopK, TopP: float32(want.TopP), SampleCount: 4}}
	for ch, v := range f.values {
		s := cutenative.Series{Values: v, Group: 1}
		if ch == 0 {
			s.Timestamps, s.FutureTimestamps = f.history, f.future
		}
		req.Series = append(req.Series, s)
	}
	direct, err := m.Forecast(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	means := []*[]float32{&fc.Mean.Open, &fc.Mean.High, &fc.Mean.Low, &fc.Mean.Close, &fc.Mean.Volume, &fc.Mean.Amount}
	paths := []*[][]float32{&fc.Samples.Open, &fc.Samples.High, &fc.Samples.Low, &fc.Samples.Close, &fc.Samples.Volume, &fc.Samples.Amount}
	for ch := range f.values {
		if !testenv.SameBits(*means[ch], direct.Row(ch, 0)) {
			t.Fatalf("channel %d: server mean %v, binding %v", ch, *means[ch], direct.Row(ch, 0))
		}
		if len(*paths[ch]) != 4 {
			t.Fatalf("channel %d: %d paths", ch, len(*paths[ch]))
		}
		for k, p := range *paths[ch] {
			if !testenv.SameBits(p, direct.SamplePath(ch, k, 0)) {
				t.Fatalf("channel %d path %d: server %v, binding %v", ch, k, p, direct.SamplePath(ch, k, 0))
			}
		}
	}
}

// Calendar features come from the wall clock, as the reference reads timezone-aware timestamps: the same clock
// readings written at +08:00 give the same numbers as at UTC (and other instants than the UTC ones).
func TestKronosTimestampsUseTheirWallClock(t *testing.T) {
	ts := startKronos(t, Config{})
	f := loadKronosFixture(t, "a_samples")
	at8 := func(unix []int64) []string {
		out := make([]string, len(unix))
		for i, u := range unix {
			w := time.Unix(u, 0).UTC()
			out[i] = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0,
				time.FixedZone("", 8*3600)).Format(time.RFC3339)
		}
		return out
	}
	means := func(body string) api.Bars {
		r, _ := ts.forecast(t, body)
		return *r.Forecasts[0].Mean
	}
	utc := means(f.body(t, nil))
	local := means(f.body(t, func(r *api.ForecastRequest) {
		r.Series[0].Timestamps, r.Series[0].FutureTimestamps = at8(f.history), at8(f.future)
	}))
	if !testenv.SameBits(utc.Close, local.Close) || !testenv.SameBits(utc.Open, local.Open) {
		t.Fatalf("+08:00 wall clock %v, the same clock at UTC %v", local.Close, utc.Close)
	}
}

// Four channels give four mean paths and no volume/amount; without return_samples no paths come back.
func TestKronosChannelsAndDefaults(t *testing.T) {
	ts := startKronos(t, Config{})
	f := loadKronosFixture(t, "a_no_volume")
	got, b := ts.forecast(t, f.body(t, func(r *api.ForecastRequest) {
		r.ReturnSamples, r.Temperature, r.TopK, r.TopP, r.SampleCount, r.Seed = nil, nil, nil, nil, nil, nil
	}))
	fc := got.Forecasts[0]
	// An unseeded request gets a fresh seed, echoed so that it can be replayed.
	defaults := *got.Sampling
	defaults.Seed = 0
	if defaults != kronosDefaults || fc.Samples != nil || len(fc.Mean.Close) != f.req.Horizon || fc.Mean.Volume != nil ||
		bytes.Contains(b, []byte("volume")) {
		t.Fatalf("response %s", b)
	}
	again, _ := ts.forecast(t, f.body(t, func(r *api.ForecastRequest) {
		r.ReturnSamples, r.Temperature, r.TopK, r.TopP, r.SampleCount, r.Seed = nil, nil, nil, nil, nil, nil
	}))
	if again.Sampling.Seed == got.Sampling.Seed {
		t.Fatalf("two unseeded requests got the same seed %d", got.Sampling.Seed)
	}
	seed := got.Sampling.Seed
	replay, _ := ts.forecast(t, f.body(t, func(r *api.ForecastRequest) {
		r.ReturnSamples, r.Temperature, r.TopK, r.TopP, r.SampleCount, r.Seed = nil, nil, nil, nil, nil, &seed
	}))
	if !testenv.SameBits(replay.Forecasts[0].Mean.Close, fc.Mean.Close) {
		t.Fatalf("the echoed seed %d does not replay the forecast", seed)
	}
}

func TestKronosBadRequestsName400Fields(t *testing.T) {
	ts := startKronos(t, Config{})
	f := loadKronosFixture(t, "a_no_amount") // 25 bars of open, high, low, close, volume; seed 2
	num := func(x float64) *float64 { return &x }
	integer := func(x int) *int { return &x }
	tests := []struct {
		name    string
		edit    func(r *api.ForecastRequest)
		message string
	}{
		{"quantiles", func(r *api.ForecastRequest) { r.Quantiles = []float64{0.5} }, "quantiles: kronos models"},
		{"covariates", func(r *api.ForecastRequest) { r.Series[0].Covariates = []api.Covariate{{Past: r.Series[0].Open}} }, "series[0].covariates"},
		{"values", func(r *api.ForecastRequest) { r.Series[0].Values = r.Series[0].Open }, "series[0].values"},
		{"group", func(r *api.ForecastRequest) { r.Series[0].Group = 2 }, "series[0].group"},
		{"no timestamps", func(r *api.ForecastRequest) { r.Series[0].Timestamps = nil }, "series[0].timestamps: required"},
		{"timestamps short", func(r *api.ForecastRequest) { r.Series[0].Timestamps = r.Series[0].Timestamps[1:] }, "series[0].timestamps: 24 timestamps for 25 bars"},
		{"timestamps not increasing", func(r *api.ForecastRequest) {
			s := r.Series[0].Timestamps
			s[3], s[4] = s[4], s[3]
		}, "series[0].timestamps[4]: not after series[0].timestamps[3]"},
		{"timestamps unparsable", func(r *api.ForecastRequest) { r.Series[0].Timestamps[0] = "yesterday" }, "series[0].timestamps[0]: want"},
		{"timestamps irregular, no future", func(r *api.ForecastRequest) {
			r.Series[0].Timestamps[24] = "2030-01-01T00:00:00Z"
		}, "series[0].future_timestamps: required when the timestamps are not regular"},
		{"future timestamps short", func(r *api.ForecastRequest) { r.Series[0].FutureTimestamps = []string{"2030-01-01"} }, "series[0].future_timestamps: 1 timestamps for a horizon of 4"},
		{"future timestamps before history", func(r *api.ForecastRequest) {
			r.Series[0].FutureTimestamps = r.Series[0].Timestamps[:4]
		}, "series[0].future_timestamps[0]: not after the last of timestamps"},
		{"future timestamps not increasing", func(r *api.ForecastRequest) {
			r.Series[0].FutureTimestamps = []string{"2030-01-02", "2030-01-01", "2030-01-03", "2030-01-04"}
		}, "series[0].future_timestamps[1]: not after"},
		{"three channels", func(r *api.ForecastRequest) { r.Series[0].Close, r.Series[0].Volume = nil, nil }, "series[0].close: required"},
		{"only open", func(r *api.ForecastRequest) {
			r.Series[0].High, r.Series[0].Low, r.Series[0].Close, r.Series[0].Volume = nil, nil, nil, nil
		}, "series[0].high: required"},
		{"a gap in OHLC", func(r *api.ForecastRequest) { r.Series[0].Low = nil }, "series[0].low: required"},
		{"amount without volume", func(r *api.ForecastRequest) { r.Series[0].Amount, r.Series[0].Volume = r.Series[0].Volume, nil }, "series[0].amount: needs volume"},
		{"no channels", func(r *api.ForecastRequest) {
			s := &r.Series[0]
			s.Open, s.High, s.Low, s.Close, s.Volume = nil, nil, nil, nil, nil
		}, "series[0].open: required"},
		{"channel short", func(r *api.ForecastRequest) { r.Series[0].Volume = r.Series[0].Volume[1:] }, "series[0].volume: 24 values, open has 25"},
		{"null value", func(r *api.ForecastRequest) { r.Series[0].Low[7] = nil }, "series[0].low[7]: null"},
		{"value past float32", func(r *api.ForecastRequest) { r.Series[0].High[2] = num(1e39) }, "series[0].high[2]: not a finite float32"},
		{"a forecast that is not finite", func(r *api.ForecastRequest) { r.Series[0].Open[0], r.Series[0].Open[1] = num(3e38), num(-3e38) },
			"series[0]: the forecast is not finite"},
		{"horizon past max_context", func(r *api.ForecastRequest) { r.Horizon = 41 }, "horizon: 41 exceeds the model's limit of 40"},
		{"horizon 0", func(r *api.ForecastRequest) { r.Horizon = 0 }, "horizon: must be >= 1"},
		{"temperature 0", func(r *api.ForecastRequest) { r.Temperature = num(0) }, "temperature"},
		{"temperature 1e-7", func(r *api.ForecastRequest) { r.Temperature = num(1e-7) }, "temperature"},
		{"temperature past float32", func(r *api.ForecastRequest) { r.Temperature = num(1e39) }, "temperature"},
		{"top_k negative", func(r *api.ForecastRequest) { r.TopK = integer(-1) }, "top_k"},
		{"top_k past int32", func(r *api.ForecastRequest) { r.TopK = integer(math.MaxInt32 + 1) }, "top_k"},
		{"top_p 0", func(r *api.ForecastRequest) { r.TopP = num(0) }, "top_p"},
		{"top_p 1e-50 (0 in float32)", func(r *api.ForecastRequest) { r.TopP = num(1e-50) }, "top_p"},
		{"top_p 1.01", func(r *api.ForecastRequest) { r.TopP = num(1.01) }, "top_p"},
		{"sample_count 0", func(r *api.ForecastRequest) { r.SampleCount = integer(0) }, "sample_count: must be in [1, 4096]"},
		{"sample_count 4097", func(r *api.ForecastRequest) { r.SampleCount = integer(4097) }, "sample_count: must be in [1, 4096]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ts.expect400(t, f.body(t, tc.edit), tc.message) })
	}
	raw := strings.Replace(f.body(t, nil), `"seed":2`, `"seed":%s`, 1)
	if raw == f.body(t, nil) {
		t.Fatal("the fixture's seed is not 2")
	}
	for _, tc := range []struct{ seed, message string }{
		{"-1", "seed: expected a non-negative integer, got -1"}, {"18446744073709551616", "seed: the integer 18446744073709551616 is out of range"},
		{"1.5", "seed: expected a non-negative integer, got 1.5"}, {`"7"`, "seed: expected a number, got a string"},
	} {
		t.Run("seed "+tc.seed, func(t *testing.T) { ts.expect400(t, fmt.Sprintf(raw, tc.seed), tc.message) })
	}
	if code, _, b := ts.post(t, fmt.Sprintf(raw, "18446744073709551615")); code != 200 || !bytes.Contains(b, []byte(`"seed":18446744073709551615`)) {
		t.Fatalf("seed 2^64-1: %d %s", code, b)
	}
}

// A model that does not sample refuses the sampled forecasters' fields, naming them.
func TestChronosRefusesKronosFields(t *testing.T) {
	ts := startKronos(t, Config{})
	base := `{"horizon": 2, "series": [{"values": [1, 2, 3]%s}]%s}`
	tests := []struct{ series, top, message string }{
		{"", `, "temperature": 1`, "temperature: only kronos models"},
		{"", `, "top_k": 3`, "top_k: only kronos models"},
		{"", `, "top_p": 0.5`, "top_p: only kronos models"},
		{"", `, "sample_count": 2`, "sample_count: only kronos and toto models"},
		{"", `, "seed": 0`, "seed: only kronos and toto models"},
		{"", `, "return_samples": false`, "return_samples: only kronos and toto models"},
		{`, "open": [1, 2, 3]`, "", "series[0].open: this model takes values"},
		{`, "amount": [1, 2, 3]`, "", "series[0].amount: this model takes values"},
		{`, "future_timestamps": ["2020-01-04"]`, "", "series[0].future_timestamps: only kronos models"},
	}
	for _, tc := range tests {
		t.Run(tc.message, func(t *testing.T) { ts.expect400(t, fmt.Sprintf(base, tc.series, tc.top), tc.message) })
	}
	if code, _, b := ts.post(t, fmt.Sprintf(base, "", "")); code != 200 {
		t.Fatalf("the plain request: %d %s", code, b)
	}
}

// Every size a Kronos request implies is bounded before it is allocated: sample paths count in the output
// limit, tasks x samples and the token rows within the library's limits.
func TestKronosCostsAre400sBeforeAllocation(t *testing.T) {
	ts := startKronos(t, Config{MaxOutputValues: 10000, MaxSeriesLen: 25})
	f := loadKronosFixture(t, "a_greedy") // 30 bars, 6 channels, horizon 6
	short := func(r *api.ForecastRequest) {
		s := &r.Series[0]
		for _, ch := range []*[]*float64{&s.Open, &s.High, &s.Low, &s.Close, &s.Volume, &s.Amount} {
			*ch = (*ch)[:20]
		}
		s.Timestamps = s.Timestamps[:20]
	}
	repeat := func(n int) func(r *api.ForecastRequest) {
		return func(r *api.ForecastRequest) {
			short(r)
			for len(r.Series) < n {
				r.Series = append(r.Series, r.Series[0])
			}
		}
	}
	samples := func(n int, edit func(r *api.ForecastRequest)) func(r *api.ForecastRequest) {
		return func(r *api.ForecastRequest) {
			edit(r)
			*r.SampleCount = n
		}
	}
	tests := []struct {
		name    string
		edit    func(r *api.ForecastRequest)
		message string
	}{
		// Refused while the body is decoded, at the first value past the limit (the fixture gives timestamps first).
		{"bars past -max-series-len", nil, "series[0].timestamps[25]: more than 25 timestamps (-max-series-len)"},
		// 6 channels x 6 steps x 512 paths = 18432 sample values
		{"sample paths count", samples(512, short), "18432 sample-path values (return_samples)"},
		{"17 series x 4096 samples", samples(4096, repeat(17)), "17 series x 4096 samples = 69632 rows exceed the limit of 65536"},
		// 4096 samples x min(20 + 6, 40) bars x 10 series = 1064960 token rows
		{"token rows", samples(4096, func(r *api.ForecastRequest) { repeat(10)(r); r.ReturnSamples = nil }), "1064960 token rows exceed the limit of 1048576"},
	}
	before := heapBytes()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ts.expect400(t, f.body(t, tc.edit), tc.message) })
	}
	if after := heapBytes(); after > before+64<<20 {
		t.Fatalf("the heap grew from %d to %d bytes", before, after)
	}
	// Without the paths the 512 samples fit: their mean comes back alone.
	code, _, b := ts.post(t, f.body(t, samples(512, func(r *api.ForecastRequest) { short(r); r.ReturnSamples = nil })))
	if code != 200 || bytes.Contains(b, []byte(`"samples"`)) || !bytes.Contains(b, []byte(`"sample_count":512`)) {
		t.Fatalf("512 samples, mean only: %d %.300s", code, b)
	}
}

// Kronos requests are never merged: each is a library call of its own, even when they queue together.
func TestKronosRequestsRunAlone(t *testing.T) {
	ts := startKronos(t, Config{MaxWait: 100 * time.Millisecond})
	g := newGate()
	ts.setHook(g.hook)
	body := loadKronosFixture(t, "a_greedy").body(t, nil)
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

// A Kronos request whose estimated compute is above -long-after (64 samples: ~75 ms measured on the 2-core CI
// machine, against ~5 ms for one sample) runs in the long lane: answered while the short lane is held.
func TestCostlyKronosRequestTakesTheLongLane(t *testing.T) {
	ts := startKronos(t, Config{LongAfter: 20 * time.Millisecond})
	// The routing under test, not the calibration: the cost model measured on the idle 2-core CI machine (a loaded
	// machine calibrates up to 5x slower, which once sent the cheap request to the long lane and hung the test).
	ts.models["kronos"].cost = costModel{perPass: 6.6e-4, perUnit: 5.3e-6}
	f := loadKronosFixture(t, "a_greedy")
	g, cheap := ts.holdWorker(t, f.body(t, nil)) // the short lanes only
	costly := f.body(t, func(r *api.ForecastRequest) { *r.SampleCount = 64 })
	if code, _, b := ts.post(t, costly); code != 200 || !bytes.Contains(b, []byte(`"sample_count":64`)) {
		t.Fatalf("costly request: %d %.300s", code, b)
	}
	close(g.release)
	if c := <-cheap; c != 200 {
		t.Fatalf("cheap request: %d", c)
	}
	// Each ran alone in its lane: one call of one job there, none elsewhere.
	var m strings.Builder
	ts.metrics.write(&m)
	for _, want := range []string{`cutenative_batch_jobs_bucket{model="kronos",lane="short",le="1"} 1`,
		`cutenative_batch_jobs_bucket{model="kronos",lane="long",le="1"} 1`, `cutenative_batch_jobs_count{model="kronos",lane="long"} 1`,
		`cutenative_batch_jobs_count{model="kronos",lane="short"} 1`, `cutenative_batch_jobs_count{model="default",lane="short"} 0`} {
		if !strings.Contains(m.String(), want) {
			t.Fatalf("metrics lack %q:\n%s", want, m.String())
		}
	}
}

func TestKronosModelsListing(t *testing.T) {
	ts := startKronos(t, Config{})
	code, b := ts.get(t, "/v1/models")
	var list api.ModelList
	if err := json.Unmarshal([]byte(b), &list); err != nil {
		t.Fatal(err)
	}
	if code != 200 || len(list.Data) != 2 {
		t.Fatalf("models: %d %s", code, b)
	}
	k, c := list.Data[1], list.Data[0]
	if k.Name != "kronos" || k.Kind != "kronos" || k.MaxHorizon != 40 || k.ContextLength != 40 || k.Quantiles == nil ||
		len(k.Quantiles) != 0 || strings.Join(k.Channels, ",") != "open,high,low,close,volume,amount" ||
		k.Sampling == nil || *k.Sampling != kronosDefaults || k.MaxSampleCount != 4096 {
		t.Fatalf("kronos entry %+v in %s", k, b)
	}
	if c.Kind != "chronos2" || c.Channels != nil || c.Sampling != nil || len(c.Quantiles) == 0 {
		t.Fatalf("chronos2 entry %+v", c)
	}
}

// FuzzDecodeKronos: the Kronos decoder and validator never panic, refuse only with 400s, and what they accept
// respects every limit and converts to a request of tasks x channels series.
func FuzzDecodeKronos(f *testing.F) {
	for _, s := range []string{
		`{"horizon": 2, "series": [{"open": [1, 2], "high": [1, 2], "low": [1, 2], "close": [1, 2], "timestamps": ["2024-01-01", "2024-01-02"]}]}`,
		`{"horizon": 2, "seed": 7, "sample_count": 3, "return_samples": true, "top_p": 0.5, "series": [{"open": [1], "high": [1], "low": [1], "close": [1], "volume": [5], "amount": [9], "timestamps": ["2024-01-01T00:00:00Z"], "future_timestamps": ["2024-01-01T00:05:00Z", "2024-01-01T00:10:00Z"]}]}`,
		`{"horizon": 2, "series": [{"open": [1], "high": [1], "low": [1], "close": [1], "amount": [9], "timestamps": ["2024-01"]}]}`,
		`{"horizon": 50, "sample_count": 4096, "series": [{"open": [null], "timestamps": ["x"]}]}`,
		`{"horizon": 1, "temperature": 1e-300, "top_k": -1, "series": [{"values": [1]}]}`,
	} {
		f.Add([]byte(s))
	}
	lim := limits{MaxSeries: 64, MaxSeriesLen: 4096, MaxHorizon: 4096, ModelMaxHorizon: 40, MaxOutputValues: 1 << 16, MaxInputValues: 1 << 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := decodeBytes(data, lim)
		var k *kronosRequest
		if err == nil {
			k, err = req.validateKronos(context.Background(), lim, 40)
		}
		if err == nil {
			err = k.times(context.Background())
		}
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Message == "" {
				t.Fatalf("refusal %v is not a 400 apiError", err)
			}
			return
		}
		if k.Horizon < 1 || k.Horizon > 40 || len(k.tasks) != len(k.Series) || len(k.Series) > lim.MaxSeries {
			t.Fatalf("accepted out of limits: horizon %d, %d tasks", k.Horizon, len(k.tasks))
		}
		b := k.binding()
		n := 0
		for _, task := range k.tasks {
			if len(task.channels) < 4 || len(task.channels) > 6 || len(task.future) != k.Horizon || len(task.futureText) != k.Horizon {
				t.Fatalf("task of %d channels, %d future stamps", len(task.channels), len(task.future))
			}
			n += len(task.channels)
		}
		if len(b.Series) != n {
			t.Fatalf("binding: %d series for %d channels", len(b.Series), n)
		}
	})
}

// openapi.json documents exactly the JSON fields of the wire types (its request schemas refuse others).
func TestOpenAPIDocumentsTheWireFields(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{"ForecastRequest": api.ForecastRequest{}, "Series": api.Series{}, "Covariate": api.Covariate{},
		"ForecastResponse": api.ForecastResponse{}, "Sampling": api.Sampling{}, "Bars": api.Bars{}, "BarSamples": api.BarSamples{}} {
		var fields []string
		typ := reflect.TypeOf(v)
		for i := 0; i < typ.NumField(); i++ {
			fields = append(fields, strings.Split(typ.Field(i).Tag.Get("json"), ",")[0])
		}
		var documented []string
		for p := range doc.Components.Schemas[name].Properties {
			documented = append(documented, p)
		}
		sort.Strings(fields)
		sort.Strings(documented)
		if strings.Join(fields, ",") != strings.Join(documented, ",") {
			t.Errorf("%s: the type has %v, openapi.json documents %v", name, fields, documented)
		}
	}
}

// The working-memory bound against peaks measured on tiny_a (scripts/measure_forecast_memory.py: one fresh process
// a call, f32, one thread, glibc's default allocator; peak RSS increase over the loaded, warm model): it must be
// above each, and within the fit's spread (at most 2.2x; measured 1.03-2.12x over 263 calls of 24 MB or more).
func TestKronosCallMemoryBoundsMeasuredPeaks(t *testing.T) {
	ts := startKronos(t, Config{})
	m, e := ts.find("kronos", capForecast)
	if e != nil {
		t.Fatal(e)
	}
	k := m.fc.(*kronos)
	if k.tokD != 32 || k.tokFF != 64 || k.dModel != 32 || k.ff != 64 {
		t.Fatalf("shapes read: predictor %d/%d, tokenizer %d/%d", k.dModel, k.ff, k.tokD, k.tokFF)
	}
	for _, c := range []struct {
		mode                 string
		tasks, samples, bars int64
		horizon              int64
		measuredMB           float64
	}{
		{"eager", 6, 4096, 256, 8, 9508}, // the 3 KB request of issue #36 with 256 bars
		{"eager", 6, 4096, 32, 40, 1611},
		{"eager", 6, 4096, 4, 40, 1642},
		{"eager", 1, 3072, 256, 1, 1197},
		{"eager", 1, 4096, 32, 8, 431},
		{"fused", 6, 4096, 4, 40, 2340},
		{"fused", 6, 4096, 256, 1, 9577},
		{"fused", 1, 4096, 4, 40, 529},
		{"fused", 1, 3072, 32, 8, 342},
	} {
		saved := k.m.info.Mode
		k.m.info.Mode = c.mode
		bars := make([]int64, c.tasks)
		for i := range bars {
			bars[i] = c.bars
		}
		est := float64(k.callMemory(c.samples, bars, c.horizon)) / 1e6
		k.m.info.Mode = saved
		if est < c.measuredMB || est > 2.2*c.measuredMB {
			t.Errorf("%s %d x %d samples, %d bars, horizon %d: estimate %.0f MB, measured %.0f MB", c.mode, c.tasks, c.samples,
				c.bars, c.horizon, est, c.measuredMB)
		}
	}
}

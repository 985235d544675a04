package cutenative

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/cutenative/cutenative/go/internal/testenv"
)

var kronosFixtures = filepath.Join("..", "..", "tests", "fixtures", "kronos")

// kronosCase is one case of tests/fixtures/kronos/cases.json (scripts/make_kronos_fixtures.py): the reference
// predictor's mean path [step][channel] and sample paths [sample][step][channel] per task.
type kronosCase struct {
	Name        string  `json:"name"`
	Model       string  `json:"model"`
	PredLen     int     `json:"pred_len"`
	Temperature float32 `json:"temperature"`
	TopK        int     `json:"top_k"`
	TopP        float32 `json:"top_p"`
	SampleCount int     `json:"sample_count"`
	Seed        uint64  `json:"seed"`
	Series      []struct {
		Values    [][]float32   `json:"values"` // [channel][bar]
		HistoryTS []int64       `json:"history_ts"`
		FutureTS  []int64       `json:"future_ts"`
		Mean      [][]float64   `json:"mean"`
		Paths     [][][]float64 `json:"paths"`
	} `json:"series"`
}

func kronosCases(t *testing.T) []kronosCase {
	t.Helper()
	return testenv.Cases[kronosCase](t, filepath.Join(kronosFixtures, "cases.json"))
}

// request maps a case as the C++ parity test does: a group per task, its channels in order, the timestamps
// on the group's first series.
func (c *kronosCase) request() *ForecastRequest {
	req := &ForecastRequest{Horizon: c.PredLen, Seed: c.Seed, ReturnSamples: true,
		Sampling: &Sampling{Temperature: c.Temperature, TopK: c.TopK, TopP: c.TopP, SampleCount: c.SampleCount}}
	for ti, s := range c.Series {
		for ch, v := range s.Values {
			series := Series{Values: v, Group: ti + 1}
			if ch == 0 {
				series.Timestamps, series.FutureTimestamps = s.HistoryTS, s.FutureTS
			}
			req.Series = append(req.Series, series)
		}
	}
	return req
}

func openKronos(t *testing.T, name string) *Model {
	t.Helper()
	m, err := Open(filepath.Join(kronosFixtures, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Every fixture case, seeded: the same bytes twice, and the reference's mean and sample paths within the C++
// parity test's tolerance (rtol 1e-5 + 1e-5 x (the channel's history std + 1e-5)).
func TestKronosMatchesReference(t *testing.T) {
	models := map[string]*Model{"tiny_a": openKronos(t, "tiny_a"), "tiny_b": openKronos(t, "tiny_b")}
	for _, c := range kronosCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			m := models[c.Model]
			f, err := m.Forecast(context.Background(), c.request())
			if err != nil {
				t.Fatal(err)
			}
			again, err := m.Forecast(context.Background(), c.request())
			if err != nil {
				t.Fatal(err)
			}
			if f.Quantiles != nil || f.Outputs() != 1 || f.Horizon != c.PredLen || f.NSamples != c.SampleCount {
				t.Fatalf("shape: quantiles %v, %d outputs, horizon %d, %d samples", f.Quantiles, f.Outputs(), f.Horizon, f.NSamples)
			}
			if !testenv.SameBits(f.Values, again.Values) || !testenv.SameBits(f.Samples, again.Samples) {
				t.Fatal("the same seed gave different forecasts")
			}
			s := 0
			for _, task := range c.Series {
				for ch, hist := range task.Values {
					unit := stddev(hist) + 1e-5
					for h := 0; h < c.PredLen; h++ {
						want, got := task.Mean[h][ch], float64(f.Row(s, 0)[h])
						if math.Abs(got-want) > 1e-5*math.Abs(want)+1e-5*unit {
							t.Fatalf("series %d step %d: mean %v, reference %v", s, h, got, want)
						}
						for k := 0; k < c.SampleCount; k++ {
							want, got := task.Paths[k][h][ch], float64(f.SamplePath(s, k, 0)[h])
							if math.Abs(got-want) > 1e-5*math.Abs(want)+1e-5*unit {
								t.Fatalf("series %d path %d step %d: %v, reference %v", s, k, h, got, want)
							}
						}
					}
					s++
				}
			}
			if s != f.NSeries {
				t.Fatalf("%d series compared, the forecast has %d", s, f.NSeries)
			}
		})
	}
}

func stddev(v []float32) float64 {
	var mu, ss float64
	for _, x := range v {
		mu += float64(x)
	}
	mu /= float64(len(v))
	for _, x := range v {
		ss += (float64(x) - mu) * (float64(x) - mu)
	}
	return math.Sqrt(ss / float64(len(v)))
}

// A different seed samples other paths; without ReturnSamples no paths come back, the mean is the same; the
// mean path is the average of the sample paths.
func TestKronosSeedsAndSamples(t *testing.T) {
	c := kronosCases(t)[3] // a_samples: 4 paths, top-p sampling
	if c.SampleCount < 2 || c.Series[0].Paths == nil {
		t.Fatalf("case %s has %d samples", c.Name, c.SampleCount)
	}
	m := openKronos(t, c.Model)
	base, err := m.Forecast(context.Background(), c.request())
	if err != nil {
		t.Fatal(err)
	}
	other := c.request()
	other.Seed++
	moved, err := m.Forecast(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if testenv.SameBits(base.Samples, moved.Samples) {
		t.Fatal("seeds 3 and 4 sampled the same paths")
	}
	lean := c.request()
	lean.ReturnSamples = false
	noPaths, err := m.Forecast(context.Background(), lean)
	if err != nil {
		t.Fatal(err)
	}
	if noPaths.Samples != nil || noPaths.NSamples != c.SampleCount || !testenv.SameBits(noPaths.Values, base.Values) {
		t.Fatalf("without samples: %d sample values, NSamples %d, same mean %v", len(noPaths.Samples), noPaths.NSamples,
			testenv.SameBits(noPaths.Values, base.Values))
	}
	for s := 0; s < base.NSeries; s++ {
		for h := 0; h < base.Horizon; h++ {
			var sum float64
			for k := 0; k < base.NSamples; k++ {
				sum += float64(base.SamplePath(s, k, 0)[h])
			}
			if mean := sum / float64(base.NSamples); math.Abs(mean-float64(base.At(s, 0, h))) > 1e-5*math.Abs(mean)+1e-3 {
				t.Fatalf("series %d step %d: mean path %v, average of the paths %v", s, h, base.At(s, 0, h), mean)
			}
		}
	}
	// Default sampling (nil) is DefaultSampling().
	implicit, explicit := c.request(), c.request()
	implicit.Sampling = nil
	d := DefaultSampling()
	explicit.Sampling = &d
	a, err := m.Forecast(context.Background(), implicit)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Forecast(context.Background(), explicit)
	if err != nil {
		t.Fatal(err)
	}
	if a.NSamples != 1 || !testenv.SameBits(a.Values, b.Values) {
		t.Fatalf("nil sampling: %d samples, equal to DefaultSampling %v", a.NSamples, testenv.SameBits(a.Values, b.Values))
	}
}

func TestKronosRequestErrors(t *testing.T) {
	m := openKronos(t, "tiny_a")
	c := kronosCases(t)[0]
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		edit    func(r *ForecastRequest)
		want    error
		message string
	}{
		{"no timestamps", context.Background(), func(r *ForecastRequest) { r.Series[0].Timestamps, r.Series[0].FutureTimestamps = nil, nil },
			ErrInvalidArgument, "timestamps"},
		{"future timestamps short", context.Background(), func(r *ForecastRequest) { r.Series[0].FutureTimestamps = r.Series[0].FutureTimestamps[1:] },
			ErrInvalidArgument, "future timestamps"},
		{"timestamps not increasing", context.Background(), func(r *ForecastRequest) {
			ts := append([]int64(nil), r.Series[0].Timestamps...)
			ts[3], ts[4] = ts[4], ts[3]
			r.Series[0].Timestamps = ts
		}, ErrInvalidArgument, "not strictly increasing"},
		{"history timestamps of another length", context.Background(), func(r *ForecastRequest) { r.Series[0].Timestamps = r.Series[0].Timestamps[1:] },
			ErrInvalidArgument, "history: length"},
		{"three channels", context.Background(), func(r *ForecastRequest) { r.Series = r.Series[:3] }, ErrInvalidArgument, "open, high, low, close"},
		{"ungrouped", context.Background(), func(r *ForecastRequest) {
			for i := range r.Series {
				r.Series[i].Group = 0
			}
		}, ErrInvalidArgument, "group of 4-6 series"},
		{"NaN", context.Background(), func(r *ForecastRequest) {
			v := append([]float32(nil), r.Series[2].Values...)
			v[5] = float32(math.NaN())
			r.Series[2].Values = v
		}, ErrInvalidArgument, "series[2][5]: NaN"},
		{"quantiles", context.Background(), func(r *ForecastRequest) { r.Quantiles = []float32{0.5} }, ErrInvalidArgument, "quantiles"},
		{"covariates", context.Background(), func(r *ForecastRequest) { r.Covariates = []Covariate{{Series: 0, Past: r.Series[0].Values}} },
			ErrInvalidArgument, "covariates"},
		{"horizon past max_context", context.Background(), func(r *ForecastRequest) { r.Horizon = 41 }, ErrInvalidArgument, "max_context"},
		{"temperature 0", context.Background(), func(r *ForecastRequest) { r.Sampling.Temperature = 0 }, ErrInvalidArgument, "temperature"},
		{"top_k negative", context.Background(), func(r *ForecastRequest) { r.Sampling.TopK = -1 }, ErrInvalidArgument, "top_k"},
		{"top_k past int32", context.Background(), func(r *ForecastRequest) { r.Sampling.TopK = math.MaxInt32 + 1 }, ErrInvalidArgument, "top_k"},
		{"top_p 1.5", context.Background(), func(r *ForecastRequest) { r.Sampling.TopP = 1.5 }, ErrInvalidArgument, "top_p"},
		{"top_p NaN", context.Background(), func(r *ForecastRequest) { r.Sampling.TopP = float32(math.NaN()) }, ErrInvalidArgument, "top_p"},
		{"no samples", context.Background(), func(r *ForecastRequest) { r.Sampling.SampleCount = 0 }, ErrInvalidArgument, "sample_count"},
		{"4097 samples", context.Background(), func(r *ForecastRequest) { r.Sampling.SampleCount = 4097 }, ErrInvalidArgument, "sample_count"},
		{"2^32 samples", context.Background(), func(r *ForecastRequest) { r.Sampling.SampleCount = 1 << 32 }, ErrInvalidArgument, "sample_count"},
		{"cancelled", cancelled, func(r *ForecastRequest) {}, context.Canceled, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := c.request()
			tc.edit(req)
			_, err := m.Forecast(tc.ctx, req)
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v is not %v", err, tc.want)
			}
			if tc.message != "" {
				mustContain(t, err.Error(), tc.message)
			}
		})
	}
	// Too many tasks x samples for one call: refused by the shape check, before any output is allocated.
	req := c.request()
	req.Sampling.SampleCount = 4096
	one := req.Series
	for g := 2; g <= 17; g++ {
		for _, s := range one {
			s.Group = g
			req.Series = append(req.Series, s)
		}
	}
	if _, err := m.Forecast(context.Background(), req); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("17 tasks x 4096 samples: %v", err)
	} else {
		mustContain(t, err.Error(), "rows per call")
	}
}

// Chronos-2 requests are unchanged by the Kronos fields: timestamps and sampling are ignored, no samples.
func TestChronosIgnoresKronosFields(t *testing.T) {
	m, err := Open(filepath.Join(fixtures, "tiny_a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	vals := []float32{1, 3, 2, 4, 3, 5, 4, 6}
	plain, err := m.Forecast(context.Background(), &ForecastRequest{Series: []Series{{Values: vals}}, Horizon: 3})
	if err != nil {
		t.Fatal(err)
	}
	stamps := []int64{0, 60, 120, 180, 240, 300, 360, 420}
	d := DefaultSampling()
	d.SampleCount = 5
	decorated, err := m.Forecast(context.Background(), &ForecastRequest{Horizon: 3, Sampling: &d, Seed: 9, ReturnSamples: true,
		Series: []Series{{Values: vals, Timestamps: stamps, FutureTimestamps: []int64{480, 540, 600}}}})
	if err != nil {
		t.Fatal(err)
	}
	if !testenv.SameBits(plain.Values, decorated.Values) || decorated.NSamples != 0 || decorated.Samples != nil ||
		decorated.Outputs() != len(decorated.Quantiles) || len(decorated.Quantiles) == 0 {
		t.Fatalf("plain %v, with Kronos fields %v (%d samples)", plain.Values, decorated.Values, decorated.NSamples)
	}
}

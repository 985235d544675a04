package cutenative

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutenative/cutenative/go/internal/testenv"
)

var totoFixtures = filepath.Join("..", "..", "tests", "fixtures", "toto")

// totoCase is one case of tests/fixtures/toto/cases.json (scripts/make_toto_fixtures.py); its arrays are in
// cases.safetensors.
type totoCase struct {
	Name            string    `json:"name"`
	Model           string    `json:"model"`
	Seed            uint64    `json:"seed"`
	PredLen         int       `json:"pred_len"`
	NumSamples      *int      `json:"num_samples"`
	SamplesPerBatch *int      `json:"samples_per_batch"`
	KVCache         bool      `json:"use_kv_cache"`
	Levels          []float32 `json:"quantile_levels"`
}

// totoArray reads one array of cases.safetensors as float32 (U8 masks widened), with its shape.
func totoArray(t *testing.T, name string) ([]float32, []int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(totoFixtures, "cases.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	var header map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	var e struct {
		DType   string   `json:"dtype"`
		Shape   []int    `json:"shape"`
		Offsets []uint64 `json:"data_offsets"`
	}
	if err := json.Unmarshal(header[name], &e); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data := b[8+n+e.Offsets[0] : 8+n+e.Offsets[1]]
	var out []float32
	if e.DType == "F32" {
		for i := 0; i+4 <= len(data); i += 4 {
			out = append(out, math.Float32frombits(binary.LittleEndian.Uint32(data[i:])))
		}
	} else {
		for _, v := range data {
			out = append(out, float32(v))
		}
	}
	return out, e.Shape
}

// totoRequest maps a case as the C++ tests do: task b is group b+1, its variates in order, masked values NaN.
func totoRequest(t *testing.T, c totoCase) (*ForecastRequest, int, int) {
	series, shape := totoArray(t, c.Name+"/series")
	mask, _ := totoArray(t, c.Name+"/padding_mask")
	B, V, T := shape[0], shape[1], shape[2]
	req := &ForecastRequest{Horizon: c.PredLen, Seed: c.Seed, Decoding: &Decoding{NoKVCache: !c.KVCache}}
	for b := 0; b < B; b++ {
		for v := 0; v < V; v++ {
			vals := make([]float32, T)
			for i := range vals {
				vals[i] = series[(b*V+v)*T+i]
				if mask[(b*V+v)*T+i] == 0 {
					vals[i] = float32(math.NaN())
				}
			}
			req.Series = append(req.Series, Series{Values: vals, Group: b + 1})
		}
	}
	if c.NumSamples == nil {
		req.Decoding.MeanRollout = true
	} else {
		req.Sampling = &Sampling{Temperature: 1, TopP: 0.9, SampleCount: *c.NumSamples}
		req.Decoding.SamplesPerBatch = *c.SamplesPerBatch
		req.Quantiles = c.Levels
		req.ReturnSamples = true
	}
	return req, B, V
}

// seriesLevel is a variate's context mean and sqrt(variance + 0.1) over its observed values: the units of the
// parity bound (specs/toto.md §7), which scales with a value's distance from its series' level, not its magnitude
// (a 1e6-level series moving by 20 would otherwise get a bound of 100).
type seriesLevel struct{ level, unit float64 }

func levels(series, mask []float32, n, T int) []seriesLevel {
	out := make([]seriesLevel, n)
	for s := range out {
		var sum, sum2, c float64
		for t := 0; t < T; t++ {
			if mask[s*T+t] != 0 {
				x := float64(series[s*T+t])
				sum, sum2, c = sum+x, sum2+x*x, c+1
			}
		}
		if c > 0 {
			out[s].level = sum / c
			out[s].unit = math.Sqrt(math.Max(0, sum2/c-out[s].level*out[s].level) + 0.1)
		} else {
			out[s].unit = math.Sqrt(0.1)
		}
	}
	return out
}

// near: within 1e-4 of the series' spread (this process's thread count is not the fixtures' one, so GEMMs may
// round differently) plus 4 ulp of want.
func near(got, want float32, l seriesLevel) bool {
	ulp := float64(math.Nextafter32(float32(math.Abs(float64(want))), float32(math.Inf(1))) - float32(math.Abs(float64(want))))
	return math.Abs(float64(got-want)) <= 1e-4*(math.Abs(float64(want)-l.level)+l.unit)+4*ulp
}

// Toto through the binding: every fixture case's quantiles, mean and sample paths equal the reference's (within
// near's bound), and the mean rollout's path.
func TestTotoMatchesTheReference(t *testing.T) {
	models := map[string]*Model{}
	t.Cleanup(func() {
		for _, m := range models {
			m.Close()
		}
	})
	for _, c := range testenv.Cases[totoCase](t, filepath.Join(totoFixtures, "cases.json")) {
		t.Run(c.Name, func(t *testing.T) {
			m := models[c.Model]
			if m == nil {
				var err error
				if m, err = Open(filepath.Join(totoFixtures, c.Model), nil); err != nil {
					t.Fatal(err)
				}
				models[c.Model] = m
			}
			req, B, V := totoRequest(t, c)
			series, shape := totoArray(t, c.Name+"/series")
			mask, _ := totoArray(t, c.Name+"/padding_mask")
			level := levels(series, mask, B*V, shape[2])
			f, err := m.Forecast(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			H := c.PredLen
			if !f.Mean || f.Horizon != H || f.NSeries != B*V {
				t.Fatalf("shape: mean %v, horizon %d, series %d", f.Mean, f.Horizon, f.NSeries)
			}
			mean, _ := totoArray(t, c.Name+"/mean")
			last := f.Outputs() - 1
			for s := 0; s < B*V; s++ {
				for h := 0; h < H; h++ {
					if !near(f.At(s, last, h), mean[s*H+h], level[s]) {
						t.Fatalf("series %d step %d: mean %v, the reference %v", s, h, f.At(s, last, h), mean[s*H+h])
					}
				}
			}
			if c.NumSamples == nil {
				if len(f.Quantiles) != 0 || f.Samples != nil {
					t.Fatal("the mean rollout returned quantiles or samples")
				}
				return
			}
			q, _ := totoArray(t, c.Name+"/quantiles") // [Q, B, V, H]
			for k := range c.Levels {
				for s := 0; s < B*V; s++ {
					for h := 0; h < H; h++ {
						if want := q[(k*B*V+s)*H+h]; !near(f.At(s, k, h), want, level[s]) {
							t.Fatalf("level %v series %d step %d: %v, the reference %v", c.Levels[k], s, h, f.At(s, k, h), want)
						}
					}
				}
			}
			ref, _ := totoArray(t, c.Name+"/samples") // [B, V, H, S]
			S := *c.NumSamples
			for s := 0; s < B*V; s++ {
				for k := 0; k < S; k++ {
					for h := 0; h < H; h++ {
						if got, want := f.SamplePath(s, k, 0)[h], ref[(s*H+h)*S+k]; !near(got, want, level[s]) {
							t.Fatalf("series %d sample %d step %d: %v, the reference %v", s, k, h, got, want)
						}
					}
				}
			}
		})
	}
}

// Toto's refusals are ErrInvalidArgument naming the field.
func TestTotoRefusals(t *testing.T) {
	m, err := Open(filepath.Join(totoFixtures, "tiny_a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	series := []Series{{Values: []float32{1, 2, 3, 4}}}
	for _, tc := range []struct {
		name string
		req  ForecastRequest
		want string
	}{
		{"batch not dividing", ForecastRequest{Series: series, Horizon: 4, Sampling: &Sampling{Temperature: 1, TopP: 0.9, SampleCount: 8},
			Decoding: &Decoding{SamplesPerBatch: 3}}, "samples_per_batch"},
		{"quantiles with the mean rollout", ForecastRequest{Series: series, Horizon: 4, Quantiles: []float32{0.5},
			Decoding: &Decoding{MeanRollout: true}}, "quantiles"},
		{"covariates", ForecastRequest{Series: series, Horizon: 4, Covariates: []Covariate{{Series: 0, Past: []float32{1, 2, 3, 4}}}},
			"covariates"},
		{"negative batch", ForecastRequest{Series: series, Horizon: 4, Decoding: &Decoding{SamplesPerBatch: -1}}, "samples_per_batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Forecast(context.Background(), &tc.req)
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want ErrInvalidArgument naming %q", err, tc.want)
			}
		})
	}
}

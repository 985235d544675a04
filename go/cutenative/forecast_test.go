package cutenative

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/internal/testenv"
)

var fixtures = filepath.Join("..", "..", "tests", "fixtures", "chronos2")

type refCase struct {
	Name             string          `json:"name"`
	Model            string          `json:"model"`
	PredictionLength int             `json:"prediction_length"`
	QuantileLevels   []float32       `json:"quantile_levels"`
	Tasks            []refTask       `json:"tasks"`
	Quantiles        [][][][]float64 `json:"quantiles"`
}

type refTask struct {
	Target [][]*float64 `json:"target"`
}

func loadCase(t *testing.T, name string) refCase {
	t.Helper()
	for _, c := range testenv.Cases[refCase](t, filepath.Join(fixtures, "cases.json")) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %s", name)
	return refCase{}
}

func toFloat32(v []*float64) []float32 {
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

// The Go binding returns the reference's numbers (chronos-forecasting 2.3.2) for fixture cases; same
// tolerance as the C++ parity test: 1e-4 relative + 1e-4 x the series' std.
func TestForecastMatchesReference(t *testing.T) {
	for _, name := range []string{"a_univariate_long", "a_multivariate", "b_long_horizon_mixed"} {
		t.Run(name, func(t *testing.T) {
			c := loadCase(t, name)
			m, err := Open(filepath.Join(fixtures, c.Model), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			req := &ForecastRequest{Horizon: c.PredictionLength, Quantiles: c.QuantileLevels}
			type ref struct{ task, k int }
			var refs []ref
			for ti, task := range c.Tasks {
				group := 0
				if len(task.Target) > 1 {
					group = ti + 1
				}
				for k, row := range task.Target {
					req.Series = append(req.Series, Series{Values: toFloat32(row), Group: group})
					refs = append(refs, ref{ti, k})
				}
			}
			f, err := m.Forecast(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for s, r := range refs {
				vals := req.Series[s].Values
				var sum, n, ss float64
				for _, v := range vals {
					if !math.IsNaN(float64(v)) {
						sum += float64(v)
						n++
					}
				}
				for _, v := range vals {
					if !math.IsNaN(float64(v)) {
						ss += (float64(v) - sum/n) * (float64(v) - sum/n)
					}
				}
				scale := math.Sqrt(ss / n)
				for h := 0; h < f.Horizon; h++ {
					for q := range f.Quantiles {
						want := c.Quantiles[r.task][r.k][h][q]
						got := float64(f.At(s, q, h))
						if tol := 1e-4*math.Abs(want) + 1e-4*scale; math.Abs(got-want) > tol {
							t.Fatalf("series %d step %d level %v: got %v want %v", s, h, f.Quantiles[q], got, want)
						}
					}
				}
			}
		})
	}
}

func TestForecastErrorsAndCancellation(t *testing.T) {
	m, err := Open(filepath.Join(fixtures, "tiny_a"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	series := make([]float32, 100)
	for i := range series {
		series[i] = float32(10 + math.Sin(float64(i)/3))
	}
	inf := append([]float32(nil), series...)
	inf[3] = float32(math.Inf(1))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		req     *ForecastRequest
		want    []error
		message string
	}{
		{"nil request", context.Background(), nil, []error{ErrInvalidArgument}, "nil"},
		{"no horizon", context.Background(), &ForecastRequest{Series: []Series{{Values: series}}}, []error{ErrInvalidArgument}, "horizon"},
		{"infinite value", context.Background(), &ForecastRequest{Series: []Series{{Values: inf}}, Horizon: 4}, []error{ErrInvalidArgument}, "series[0]: value 3 is infinite"},
		{"empty series", context.Background(), &ForecastRequest{Series: []Series{{}}, Horizon: 4}, []error{ErrInvalidArgument}, "at least one value"},
		{"negative group", context.Background(), &ForecastRequest{Series: []Series{{Values: series, Group: -1}}, Horizon: 4}, []error{ErrInvalidArgument}, "group"},
		{"covariate of missing series", context.Background(), &ForecastRequest{Series: []Series{{Values: series}}, Covariates: []Covariate{{Series: 4, Past: series}}, Horizon: 4}, []error{ErrInvalidArgument}, "series_index"},
		{"bad level", context.Background(), &ForecastRequest{Series: []Series{{Values: series}}, Horizon: 4, Quantiles: []float32{1.5}}, []error{ErrInvalidArgument}, "(0, 1)"},
		{"cancelled before", cancelled, &ForecastRequest{Series: []Series{{Values: series}}, Horizon: 4}, []error{context.Canceled}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := m.Forecast(tc.ctx, tc.req)
			for _, w := range tc.want {
				if !errors.Is(err, w) {
					t.Fatalf("error %v is not %v", err, w)
				}
			}
			if tc.message != "" {
				mustContain(t, err.Error(), tc.message)
			}
		})
	}
	// A deadline that passes while the library works: a long rollout with a 1 ms budget.
	ctx, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	_, err = m.Forecast(ctx, &ForecastRequest{Series: []Series{{Values: series}}, Horizon: 5000})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
}

func TestForecastConcurrent(t *testing.T) {
	m, err := Open(filepath.Join(fixtures, "tiny_b"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	series := make([]float32, 60)
	for i := range series {
		series[i] = float32(i%7) + 1
	}
	req := &ForecastRequest{Series: []Series{{Values: series}}, Horizon: 12}
	first, err := m.Forecast(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				f, err := m.Forecast(context.Background(), req)
				if err != nil {
					t.Error(err)
					return
				}
				for k := range f.Values {
					if f.Values[k] != first.Values[k] {
						t.Errorf("concurrent result differs at %d", k)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

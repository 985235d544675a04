package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseCSV(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name    string
		in      string
		labels  []string
		values  []float64
		wantErr string
	}{
		{"plain", "month,value\n1949-01,112\n1949-02,118\n", []string{"1949-01", "1949-02"}, []float64{112, 118}, ""},
		{"missing and spaces", "t,v\r\n1949-01, 1.5\r\n1949-02,\r\n1949-03, -2e1 \r\n", []string{"1949-01", "1949-02", "1949-03"}, []float64{1.5, nan, -20}, ""},
		{"extra columns", "t,v,w\na,1,x\n", []string{"a"}, []float64{1}, ""},
		{"empty", "", nil, nil, "empty CSV"},
		{"header only", "t,v\n", nil, nil, "no data rows"},
		{"one column", "t,v\n1949-01\n", nil, nil, "line 2: want at least 2 columns"},
		{"bad number", "t,v\n1949-01,1\n1949-02,abc\n", nil, nil, `line 3: bad value "abc"`},
		{"nan text", "t,v\n1949-01,NaN\n", nil, nil, "bad value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			labels, values, err := parseCSV(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(labels, "|") != strings.Join(tt.labels, "|") {
				t.Errorf("labels = %q, want %q", labels, tt.labels)
			}
			if len(values) != len(tt.values) {
				t.Fatalf("values = %v, want %v", values, tt.values)
			}
			for i := range values {
				if values[i] != tt.values[i] && !(math.IsNaN(values[i]) && math.IsNaN(tt.values[i])) {
					t.Errorf("values = %v, want %v", values, tt.values)
					break
				}
			}
		})
	}
}

func TestTimestampsParse(t *testing.T) {
	tests := []struct {
		labels []string
		want   bool
	}{
		{[]string{"1949-01", "1949-02"}, true},
		{[]string{"2024-01-01", "2024-01-02T00:00:00Z"}, true},
		{[]string{"1949-01", ""}, false},
		{[]string{"1", "2"}, false},
		{nil, false},
	}
	for _, tt := range tests {
		if got := timestampsParse(tt.labels); got != tt.want {
			t.Errorf("timestampsParse(%q) = %v, want %v", tt.labels, got, tt.want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   []float64
	}{
		{0, 10, []float64{0, 2, 4, 6, 8, 10}},
		{95, 640, []float64{100, 200, 300, 400, 500, 600}},
		{-0.3, 0.3, []float64{-0.3, -0.2, -0.1, 0, 0.1, 0.2, 0.3}},
	}
	for _, tt := range tests {
		got, _ := niceTicks(tt.lo, tt.hi, 6)
		if len(got) != len(tt.want) {
			t.Fatalf("niceTicks(%g, %g) = %v, want %v", tt.lo, tt.hi, got, tt.want)
		}
		for i := range got {
			if math.Abs(got[i]-tt.want[i]) > 1e-9 || math.Signbit(got[i]) != math.Signbit(tt.want[i]) {
				t.Fatalf("niceTicks(%g, %g) = %v, want %v", tt.lo, tt.hi, got, tt.want)
			}
		}
	}
}

func TestRenderPNGSize(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name string
		c    chart
		w, h int
	}{
		{"fan", chart{
			Labels:  []string{"2000-01", "2000-02", "2000-03", "2000-04", "2000-05", "2000-06"},
			History: []float64{1, 3, nan, 4},
			Lower:   []float64{3, 2}, Median: []float64{4, 4.5}, Upper: []float64{5, 7},
		}, 1000, 500},
		{"history only", chart{History: []float64{5, 6, 7}}, 640, 320},
		{"constant", chart{History: []float64{2, 2}, Lower: []float64{2}, Median: []float64{2}, Upper: []float64{2}}, 300, 200},
		{"all missing", chart{History: []float64{nan, nan}}, 100, 50},
		{"empty", chart{}, 10, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := png.Encode(&buf, tt.c.render(tt.w, tt.h)); err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(&buf)
			if err != nil {
				t.Fatal(err)
			}
			if b := img.Bounds(); b.Dx() != tt.w || b.Dy() != tt.h {
				t.Fatalf("size = %dx%d, want %dx%d", b.Dx(), b.Dy(), tt.w, tt.h)
			}
			if r, g, b, _ := img.At(tt.w-1, 0).RGBA(); r>>8 != 255 || g>>8 != 255 || b>>8 != 255 {
				t.Errorf("corner pixel is not white")
			}
		})
	}
}

// fakeServer answers /readyz with 503 for the first notReady calls, then
// 200, and /v1/forecast with a ramp forecast, checking the request.
func fakeServer(t *testing.T, notReady int32) *httptest.Server {
	var calls atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= notReady {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("POST /v1/forecast", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Horizon   int
			Quantiles []float64
			Series    []struct {
				Values     []*float64
				Timestamps []string
			}
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decoding request: %v", err)
		}
		if r.Header.Get("Authorization") != "Bearer sekret" {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":{"code":"unauthenticated","message":"missing or bad API key"}}`))
			return
		}
		if len(req.Series) != 1 || len(req.Series[0].Values) != 3 || req.Series[0].Values[1] != nil ||
			len(req.Series[0].Timestamps) != 3 || len(req.Quantiles) != 3 {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"error":{"code":"invalid_argument","message":"unexpected request"}}`))
			return
		}
		q := make([][]float64, 3)
		for l, off := range []float64{-10, 0, 10} {
			for i := range req.Horizon {
				q[l] = append(q[l], 130+float64(i)+off)
			}
		}
		ts := []string{"1949-04", "1949-05"}[:req.Horizon]
		json.NewEncoder(w).Encode(map[string]any{
			"model": "default", "horizon": req.Horizon, "quantiles": req.Quantiles,
			"forecasts": []any{map[string]any{"id": "value", "timestamps": ts, "median": q[1], "quantiles": q}},
		})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestRunAgainstFakeServer(t *testing.T) {
	srv := fakeServer(t, 2)
	dir := t.TempDir()
	csvPath, pngPath := filepath.Join(dir, "in.csv"), filepath.Join(dir, "out.png")
	if err := os.WriteFile(csvPath, []byte("month,value\n1949-01,112\n1949-02,\n1949-03,132\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name    string
		key     string
		wantOut string
		wantErr string
	}{
		{"ok", "sekret", "model \"default\", horizon 2\n" +
			"timestamp      q0.1    median      q0.9\n" +
			"1949-04       120.0     130.0     140.0\n" +
			"1949-05       121.0     131.0     141.0\n" +
			"wrote " + pngPath + "\n", ""},
		{"server error", "wrong", "", "401 Unauthorized: missing or bad API key (unauthenticated)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(ctx, []string{"-url", srv.URL, "-csv", csvPath, "-png", pngPath, "-horizon", "2", "-key", tt.key, "-wait", "10s"}, &out)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.wantOut {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), tt.wantOut)
			}
			f, err := os.Open(pngPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			cfg, err := png.DecodeConfig(f)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Width != chartWidth || cfg.Height != chartHeight {
				t.Errorf("png is %dx%d, want %dx%d", cfg.Width, cfg.Height, chartWidth, chartHeight)
			}
		})
	}
}

func TestWaitReadyTimeout(t *testing.T) {
	srv := fakeServer(t, 1<<30)
	err := newClient(srv.URL, "").waitReady(context.Background(), 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "not ready after 300ms: 503 Service Unavailable: loading") {
		t.Fatalf("err = %v", err)
	}
}

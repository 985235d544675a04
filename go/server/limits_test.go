package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

// errorOf decodes a JSON error body (every non-200 answer has one).
func errorOf(t *testing.T, b []byte) apiError {
	t.Helper()
	var e struct {
		Error apiError `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body is not JSON: %q", b)
	}
	return e.Error
}

// expect400 posts body and wants a 400 whose message contains message.
func (ts *testServer) expect400(t *testing.T, body, message string) {
	t.Helper()
	code, _, b := ts.post(t, body)
	if code != 400 {
		t.Fatalf("status %d, want 400: %.200s", code, b)
	}
	if e := errorOf(t, b); !strings.Contains(e.Message, message) {
		t.Fatalf("message %q, want %q", e.Message, message)
	}
}

func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Requests whose cost is absurd are refused before anything proportional to it is allocated: the 100-byte
// horizon requests and the 27 KB output-volume request of the issue, and their neighbours.
func TestAbsurdCostsAre400sBeforeAllocation(t *testing.T) {
	ts := start(t, Config{})
	levels := make([]string, 99)
	for i := range levels {
		levels[i] = fmt.Sprintf("%.2f", float64(i+1)/100)
	}
	var series []string
	for i := 0; i < 1024; i++ {
		series = append(series, `{"values": [1, 2]}`)
	}
	big := `{"horizon": 65536, "quantiles": [` + strings.Join(levels, ",") + `], "series": [` + strings.Join(series, ",") + `]}`
	var ts64, g300 []string
	for i := 0; i < 64; i++ {
		ts64 = append(ts64, `{"values": [1, 2], "timestamps": ["2020-01-01", "2020-01-02"]}`)
	}
	for i := 0; i < 300; i++ {
		g300 = append(g300, `{"values": [1, 2], "group": 1}`)
	}
	stamped64 := `{"horizon": 65536, "quantiles": [0.5], "series": [` + strings.Join(ts64, ",") + `]}`
	group300 := `{"horizon": 8, "series": [` + strings.Join(g300, ",") + `]}`
	tests := []struct {
		name, body, message string
	}{
		{"horizon 1e9 with timestamps", `{"horizon": 1000000000, "series": [{"values": [1, 2], "timestamps": ["2020-01-01", "2020-01-02"]}]}`,
			"exceeds the server's limit of 65536 (-max-horizon)"},
		{"horizon 9e18 (an integer)", `{"horizon": 9000000000000000000, "series": [{"values": [1, 2], "timestamps": ["2020-01-01", "2020-01-02"]}]}`,
			"horizon: 9000000000000000000 exceeds the server's limit of 65536 (-max-horizon)"},
		{"27 KB: 1024 series x 99 levels x horizon 65536", big, "above the limit of 4194304"},
		{"timestamps 200 years apart, 50 steps", `{"horizon": 50, "series": [{"values": [1, 2], "timestamps": ["1800-01-01T00:00:00Z", "2000-01-02T00:00:00Z"]}]}`,
			"9999"},
		{"monthly past 9999", `{"horizon": 100, "series": [{"values": [1, 2], "timestamps": ["9990-01", "9991-01"]}]}`,
			"after 9999"},
		{"empty quantile list (it skipped the output limit)", `{"horizon": 65536, "quantiles": [], "series": [{"values": [1]}]}`,
			"give at least one level"},
		{"future timestamps count in the output limit", stamped64, "future timestamps (8 values each)"},
		{"a group of 300 rows", group300, "exceed the limit of 256 per task"},
	}
	before := heapBytes()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ts.expect400(t, tc.body, tc.message) })
	}
	if after := heapBytes(); after > before+64<<20 {
		t.Fatalf("the heap grew from %d to %d bytes", before, after)
	}
	if len(big) < 10000 || len(big) > 40000 {
		t.Fatalf("the big request is %d bytes", len(big))
	}
}

// Steps longer than time.Duration can hold (about 292 years) give no future timestamps, not wrong ones.
func TestFutureTimestampsBeyondADuration(t *testing.T) {
	got, err := futureTimestamps([]string{"0001-01-01", "1000-01-02", "1999-01-03"}, 3)
	if err != nil || got != nil {
		t.Fatalf("got %v %v, want no timestamps", got, err)
	}
}

// A Chronos-2 request's work: a pass per native horizon; the first over every row's own tokens (a row per series
// and per covariate), each rollout pass over 9 quantile paths per row and the full context.
func TestChronos2Work(t *testing.T) {
	c := &chronos2{m: &servedModel{info: cutenative.Info{NativeHorizon: 64, ContextLength: 512}}, patch: 16, outPatches: 4}
	w := c.work([]int64{7, 1}, []int64{100, 16}, 130) // a task of a series and 6 covariates, a plain series
	first := int64(7*(7+1+4) + 1*(1+1+4))
	rollout := int64(2 * 8 * 9 * (32 + 1 + 4))
	if w.passes != 3 || w.units != first+rollout {
		t.Fatalf("work %+v, want 3 passes and %d units", w, first+rollout)
	}
}

// Timestamps far apart step without overflowing time.Duration (d * h overflowed for 200-year steps; a day
// more than 200 years apart, so the stamps are not whole months apart and step by duration).
func TestFutureTimestampsFarApart(t *testing.T) {
	got, err := futureTimestamps([]string{"1800-01-01", "2000-01-02"}, 5)
	if err != nil || len(got) != 5 {
		t.Fatalf("%v %v", got, err)
	}
	prev := 2000
	for _, s := range got {
		tm, err := time.Parse("2006-01-02", s)
		if err != nil || tm.Year() < prev+199 || tm.Year() > prev+201 {
			t.Fatalf("%v: step to %s", got, s)
		}
		prev = tm.Year()
	}
}

// A long request (horizon 65536: 1024 forward passes) runs in its model's long lane: a normal request sent
// meanwhile is answered within 2 s instead of waiting behind it.
func TestLongRequestDoesNotDelayShortOnes(t *testing.T) {
	ts := start(t, Config{Timeout: 60 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := make(chan int, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.http.URL+"/v1/forecast",
			strings.NewReader(`{"horizon": 65536, "series": [{"values": [1, 2, 3, 4, 5, 6, 7, 8]}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			long <- -1
			return
		}
		resp.Body.Close()
		long <- resp.StatusCode
	}()
	waitUntil(t, "the long request running", func() bool { return ts.inflight.Load() == 1 && ts.metrics.queued() == 0 })
	time.Sleep(100 * time.Millisecond) // inside its rollout by now
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		code, _, b := ts.post(t, `{"horizon": 12, "series": [{"values": [112, 118, 132, 129, 121, 135, 148, 148]}]}`)
		if code != 200 {
			t.Fatalf("short request: %d %s", code, b)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("short request %d took %v behind a long one", i, d)
		}
	}
	select {
	case c := <-long:
		t.Fatalf("the long request ended first (%d): the test did not overlap them", c)
	default:
	}
	cancel() // the client leaves: the library stops the rollout at its next step
	<-long
}

// Values finite in float32 but so large that the model's normalisation overflows give a 400 naming the
// series, never a 200 with an empty body.
func TestNonFiniteForecastIs400NamingTheSeries(t *testing.T) {
	ts := start(t, Config{})
	code, _, b := ts.post(t, `{"horizon": 4, "series": [{"values": [1, 2, 3]}, {"values": [3e19, -2e19, 1e20, 5e19]}]}`)
	if code != 400 {
		t.Fatalf("status %d, want 400: %s", code, b)
	}
	if e := errorOf(t, b); !strings.Contains(e.Message, "series[1]: the forecast is not finite") {
		t.Fatalf("message %q", e.Message)
	}
	var s Server
	rec := httptest.NewRecorder()
	e := s.writeJSON(rec, 200, api.ForecastResponse{Quantiles: []float32{float32(math.NaN())}})
	if e == nil || e.Status != 500 || rec.Code != 200 || rec.Body.Len() != 0 {
		t.Fatalf("encoding failure: %+v, recorder %d %q", e, rec.Code, rec.Body.String())
	}
}

func TestStrictBodies(t *testing.T) {
	ts := start(t, Config{})
	ok := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	tests := []struct {
		name, body, message string
	}{
		{"trailing brace", ok + `}`, "malformed JSON"},
		{"trailing bracket", ok + `]`, "malformed JSON"},
		{"trailing value", ok + ` 1`, "trailing data"},
		{"duplicate key", `{"horizon": 2, "horizon": 3, "series": [{"values": [1]}]}`, "horizon: duplicate key"},
		{"duplicate nested key", `{"horizon": 2, "series": [{"values": [1], "values": [2]}]}`, "series[0].values: duplicate key"},
		{"invalid UTF-8", "{\"horizon\": 2, \"series\": [{\"id\": \"\xff\", \"values\": [1]}]}", "not valid UTF-8"},
		{"deep nesting", strings.Repeat("[", 64) + strings.Repeat("]", 64), "expected an object, got an array"},
		{"deep values", `{"horizon": 2, "series": [{"values": [[[[1]]]]}]}`, "series[0].values[0]: expected a number, got an array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { ts.expect400(t, tc.body, tc.message) })
	}
}

// A body slower than the request's timeout (shorter than the server's read timeout here) is a 408 whose
// message names no socket address: the timeout covers reading the body.
func TestSlowBodyIs408WithoutAddresses(t *testing.T) {
	s, err := New(Config{Models: map[string]string{"default": defaultModelDir}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ReadTimeout = time.Minute
	hs.Start()
	defer hs.Close()
	c, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"horizon\": 2")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout || strings.Contains(string(b), "127.0.0.1") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}

// Admission before work: with MaxInflight requests in the server, the next one is a 429 before its body
// is read.
func TestInflightLimitIs429(t *testing.T) {
	ts := start(t, Config{MaxInflight: 1, MaxBatch: 1})
	body := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	g, first := ts.holdWorker(t, body)
	code, h, b := ts.post(t, body)
	if code != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("second request: %d %s", code, b)
	}
	close(g.release)
	if c := <-first; c != 200 {
		t.Fatalf("first request: %d", c)
	}
}

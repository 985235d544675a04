package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

// The real library and the real embedded default model; no mocks of the C side.
var defaultModelDir = filepath.Join("..", "cmd", "cutenative-server", "defaultmodel")

func airPassengers(t *testing.T) ([]string, []float64) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "examples", "data", "airpassengers.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var ts []string
	var vs []float64
	for _, r := range rows[1:] {
		v, err := strconv.ParseFloat(r[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, r[0])
		vs = append(vs, v)
	}
	return ts, vs
}

type testServer struct {
	*Server
	http *httptest.Server
}

func start(t *testing.T, cfg Config) *testServer {
	t.Helper()
	if cfg.Models == nil {
		cfg.Models = map[string]string{"default": defaultModelDir}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: s, http: httptest.NewServer(s.Handler())}
	t.Cleanup(func() {
		ts.http.Close()
		s.Close()
	})
	return ts
}

func (ts *testServer) post(t *testing.T, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.http.URL+"/v1/forecast", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// forecast posts body, requires a 200 and decodes the response; the body comes back too.
func (ts *testServer) forecast(t *testing.T, body string) (api.ForecastResponse, []byte) {
	t.Helper()
	code, _, b := ts.post(t, body)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var got api.ForecastResponse
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return got, b
}

func seriesJSON(vals []float64) string {
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestForecastMatchesTheBinding(t *testing.T) {
	ts := start(t, Config{})
	stamps, vals := airPassengers(t)
	stampJSON, _ := json.Marshal(stamps)
	body := fmt.Sprintf(`{"horizon": 24, "quantiles": [0.1, 0.5, 0.9], "series": [{"id": "passengers", "values": %s, "timestamps": %s}]}`,
		seriesJSON(vals), stampJSON)
	got, _ := ts.forecast(t, body)
	if got.Model != "default" || got.Horizon != 24 || len(got.Forecasts) != 1 {
		t.Fatalf("response %+v", got)
	}
	fc := got.Forecasts[0]
	if fc.ID != "passengers" || fc.Timestamps[0] != "1961-01" || fc.Timestamps[23] != "1962-12" {
		t.Fatalf("id/timestamps %q %v", fc.ID, fc.Timestamps)
	}
	// The same numbers as the binding called directly.
	m, err := cutenative.Open(defaultModelDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	direct, err := m.Forecast(context.Background(), &cutenative.ForecastRequest{
		Series: []cutenative.Series{{Values: float32s(vals)}}, Horizon: 24, Quantiles: []float32{0.1, 0.5, 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	for q := range fc.Quantiles {
		for h, v := range fc.Quantiles[q] {
			if v != direct.At(0, q, h) {
				t.Fatalf("level %d step %d: server %v, library %v", q, h, v, direct.At(0, q, h))
			}
		}
	}
	for h := range fc.Median {
		if fc.Median[h] != fc.Quantiles[1][h] {
			t.Fatal("median is not the 0.5 level")
		}
	}
}

func ptrs(v []float64) []*float64 {
	out := make([]*float64, len(v))
	for i := range v {
		out[i] = &v[i]
	}
	return out
}

func TestBadRequests(t *testing.T) {
	ts := start(t, Config{MaxBodyBytes: 4096})
	ok := `{"horizon": 4, "series": [{"values": [1, 2, 3, 4, 5]}]}`
	if code, _, b := ts.post(t, ok); code != 200 {
		t.Fatalf("baseline: %d %s", code, b)
	}
	tests := []struct {
		name, body, code, message string
	}{
		{"malformed JSON", `{"horizon": 4, "series": [`, "invalid_argument", "malformed JSON"},
		{"not an object", `[1, 2]`, "invalid_argument", "expected an object, got an array"},
		{"trailing data", ok + ` {}`, "invalid_argument", "trailing data"},
		{"string value", `{"horizon": 4, "series": [{"values": [1, "2"]}]}`, "invalid_argument", "series[0].values[1]: expected a number, got a string"},
		{"NaN string", `{"horizon": 4, "series": [{"values": [1, "NaN"]}]}`, "invalid_argument", "series[0].values[1]: expected a number"},
		{"Infinity string", `{"horizon": 4, "series": [{"values": ["Infinity", 1]}]}`, "invalid_argument", "series[0].values[0]: expected a number"},
		{"bare NaN", `{"horizon": 4, "series": [{"values": [NaN]}]}`, "invalid_argument", "malformed JSON"},
		{"overflowing number", `{"horizon": 4, "series": [{"values": [1e39]}]}`, "invalid_argument", "not a finite float32"},
		{"horizon as string", `{"horizon": "4", "series": [{"values": [1]}]}`, "invalid_argument", "horizon: expected a number, got a string"},
		{"negative horizon", `{"horizon": -4, "series": [{"values": [1]}]}`, "invalid_argument", "horizon: must be >= 1"},
		{"zero horizon", `{"horizon": 0, "series": [{"values": [1]}]}`, "invalid_argument", "horizon"},
		{"huge horizon", `{"horizon": 100000000, "series": [{"values": [1]}]}`, "invalid_argument", "exceeds the server's limit of 65536"},
		{"horizon overflow", `{"horizon": 1e30, "series": [{"values": [1]}]}`, "invalid_argument", "horizon: expected an integer, got 1e30"},
		{"no series", `{"horizon": 4, "series": []}`, "invalid_argument", "at least one series"},
		{"empty values", `{"horizon": 4, "series": [{"values": []}]}`, "invalid_argument", "at least one value"},
		{"all missing", `{"horizon": 4, "series": [{"values": [null, null]}]}`, "invalid_argument", "every value is NaN"},
		{"unknown field", `{"horizon": 4, "series": [{"values": [1]}], "frequency": "D"}`, "invalid_argument", `frequency: unknown field (a forecast request takes none named "frequency")`},
		{"unknown series field", `{"horizon": 4, "series": [{"value": [1]}]}`, "invalid_argument", `series[0].value: unknown field`},
		{"miscased key", `{"Horizon": 4, "series": [{"values": [1]}]}`, "invalid_argument", `Horizon: unknown field`},
		{"tiny level", `{"horizon": 4, "quantiles": [1e-300], "series": [{"values": [1]}]}`, "invalid_argument", "quantiles[0]: 1e-300 is not in (0, 1) as a float32"},
		{"bad level", `{"horizon": 4, "quantiles": [0.5, 1.0], "series": [{"values": [1]}]}`, "invalid_argument", "quantiles[1]"},
		{"negative group", `{"horizon": 4, "series": [{"values": [1], "group": -1}]}`, "invalid_argument", "group"},
		{"timestamps length", `{"horizon": 4, "series": [{"values": [1, 2], "timestamps": ["2020-01"]}]}`, "invalid_argument", "timestamps"},
		{"timestamps order", `{"horizon": 4, "series": [{"values": [1, 2], "timestamps": ["2020-02", "2020-01"]}]}`, "invalid_argument", "not after"},
		{"timestamps format", `{"horizon": 4, "series": [{"values": [1, 2], "timestamps": ["yesterday", "today"]}]}`, "invalid_argument", "want YYYY-MM"},
		{"covariate length", `{"horizon": 4, "series": [{"values": [1, 2], "covariates": [{"past": [1]}]}]}`, "invalid_argument", "1 past values for a series of 2"},
		{"covariate kinds", `{"horizon": 4, "series": [{"values": [1], "covariates": [{"past": [1], "past_labels": ["a"]}]}]}`, "invalid_argument", "either"},
		{"oversized body", `{"horizon": 4, "series": [{"values": [` + strings.Repeat("1,", 4000) + `1]}]}`, "body_too_large",
			"exceeds 4096 bytes (-max-body)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, b := ts.post(t, tc.body)
			want := http.StatusBadRequest
			if tc.code == "body_too_large" {
				want = http.StatusRequestEntityTooLarge
			}
			if code != want {
				t.Fatalf("status %d, want %d: %s", code, want, b)
			}
			var e struct {
				Error apiError `json:"error"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("error body is not JSON: %s", b)
			}
			if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.message) {
				t.Fatalf("error %+v, want code %s containing %q", e.Error, tc.code, tc.message)
			}
		})
	}
	if code, _, _ := ts.post(t, `{"model": "nope", "horizon": 4, "series": [{"values": [1]}]}`); code != 404 {
		t.Fatalf("unknown model: %d", code)
	}
}

func TestAuth(t *testing.T) {
	ts := start(t, Config{APIKeys: []string{"k1-secret", "k2-secret"}})
	body := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	tests := []struct {
		name   string
		header []string
		code   int
	}{
		{"missing", nil, 401},
		{"wrong", []string{"Authorization", "Bearer nope"}, 401},
		{"prefix of a key", []string{"Authorization", "Bearer k1-secre"}, 401},
		{"no Bearer", []string{"Authorization", "k1-secret"}, 401},
		{"lower-case scheme", []string{"Authorization", "bearer k1-secret"}, 200}, // schemes are case-insensitive
		{"upper-case scheme", []string{"Authorization", "BEARER k2-secret"}, 200},
		{"scheme only", []string{"Authorization", "Bearer"}, 401},
		{"other scheme", []string{"Authorization", "Basic k1-secret"}, 401},
		{"first key", []string{"Authorization", "Bearer k1-secret"}, 200},
		{"second key", []string{"Authorization", "Bearer k2-secret"}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, h, b := ts.post(t, body, tc.header...)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %s", code, tc.code, b)
			}
			if code == 401 && (!strings.Contains(string(b), "missing or invalid API key") || h.Get("WWW-Authenticate") == "") {
				t.Fatalf("401 body/header: %s %v", b, h)
			}
		})
	}
	for _, path := range []string{"/livez", "/readyz", "/metrics", "/openapi.json"} {
		resp, err := http.Get(ts.http.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s without a key: %d", path, resp.StatusCode)
		}
	}
}

// gate blocks the model's worker before each library call until released, and counts the calls.
type gate struct {
	mu      sync.Mutex
	entered chan int
	release chan struct{}
	sizes   []int
}

// waitUntil polls ok every millisecond and fails the test when it is still false after 10 s.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func newGate() *gate { return &gate{entered: make(chan int, 64), release: make(chan struct{})} }

func (g *gate) hook(n int) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	g.mu.Unlock()
	g.entered <- n
	<-g.release
}

func (ts *testServer) setHook(f func(int)) {
	for _, m := range ts.models {
		m.short.beforeRun = f
	}
}

// holdWorker gates every model's short-lane worker, posts body in the background and returns once the worker
// holds that call: close(g.release) lets it finish, and its status arrives on the returned channel.
func (ts *testServer) holdWorker(t *testing.T, body string) (*gate, <-chan int) {
	t.Helper()
	g := newGate()
	ts.setHook(g.hook)
	first := make(chan int, 1)
	go func() { c, _, _ := ts.post(t, body); first <- c }()
	select {
	case <-g.entered:
	case c := <-first: // answered without reaching a gated worker (e.g. routed to a long lane): fail, never hang
		t.Fatalf("the request was answered (%d) without reaching a short-lane worker", c)
	}
	return g, first
}

func TestQueueFullIs429(t *testing.T) {
	ts := start(t, Config{QueueSize: 1, MaxBatch: 1})
	body := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	g, first := ts.holdWorker(t, body) // the worker holds request 1
	results := make(chan int, 1)
	go func() { c, _, _ := ts.post(t, body); results <- c }()
	waitUntil(t, "request 2 in the queue", func() bool { return ts.metrics.queued() >= 1 })
	code, h, b := ts.post(t, body)
	if code != 429 || h.Get("Retry-After") == "" || !strings.Contains(string(b), "overloaded") {
		t.Fatalf("third request: %d %v %s", code, h, b)
	}
	close(g.release)
	for _, c := range []int{<-first, <-results} {
		if c != 200 {
			t.Fatalf("admitted request got %d", c)
		}
	}
}

func TestClientDisconnectCancelsQueuedWork(t *testing.T) {
	ts := start(t, Config{MaxBatch: 1})
	body := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	g, first := ts.holdWorker(t, body)
	// A second client queues behind and gives up.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.http.URL+"/v1/forecast", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	waitUntil(t, "the request in the queue", func() bool { return ts.metrics.queued() >= 1 })
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the cancelled client got a response")
	}
	// Wait until the server noticed the disconnect (the handler answered "cancelled").
	waitUntil(t, "the cancelled count", func() bool { return ts.metrics.count("forecast", "cancelled") != 0 })
	if ts.metrics.count("forecast", "cancelled") != 1 {
		t.Fatal("the server did not notice the disconnect")
	}
	close(g.release)
	if c := <-first; c != 200 {
		t.Fatalf("first request: %d", c)
	}
	// The abandoned job is dropped by the worker (the queue empties) without a second library call.
	waitUntil(t, "an empty queue", func() bool { return ts.metrics.queued() == 0 })
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.sizes) != 1 {
		t.Fatalf("library calls %v, want one", g.sizes)
	}
}

// Micro-batching is invisible in the answers: concurrent requests merged into one library call get
// exactly (bit for bit) the numbers each gets alone.
func TestBatchedEqualsUnbatched(t *testing.T) {
	_, vals := airPassengers(t)
	bodies := make([]string, 12)
	for i := range bodies {
		window := vals[i : i+100]
		bodies[i] = fmt.Sprintf(`{"horizon": 18, "quantiles": [0.05, 0.5, 0.95], "series": [{"values": %s}]}`, seriesJSON(window))
	}
	alone := start(t, Config{MaxBatch: 1})
	want := make([][]byte, len(bodies))
	for i, b := range bodies {
		code, _, out := alone.post(t, b)
		if code != 200 {
			t.Fatalf("unbatched %d: %s", code, out)
		}
		want[i] = out
	}

	batched := start(t, Config{MaxBatch: 64, MaxWait: 200 * time.Millisecond})
	g := newGate()
	batched.setHook(g.hook)
	got := make([][]byte, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, out := batched.post(t, b)
			if code != 200 {
				t.Errorf("batched %d: %s", code, out)
			}
			got[i] = out
		}()
	}
	// Hold the first batch until every other request waits in the queue, so the next batch merges them
	// (without this, a worker that finds the queue empty each time runs every request alone).
	first := <-g.entered
	deadline := time.Now().Add(10 * time.Second)
	for batched.metrics.queued() < int64(len(bodies)-first) {
		if time.Now().After(deadline) {
			t.Fatalf("queue depth %d, want %d", batched.metrics.queued(), len(bodies)-first)
		}
		time.Sleep(time.Millisecond)
	}
	go func() {
		for range g.entered {
		}
	}()
	close(g.release)
	wg.Wait()
	close(g.entered)
	for i := range bodies {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("request %d differs:\nbatched   %s\nunbatched %s", i, got[i], want[i])
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	merged := false
	for _, n := range g.sizes {
		merged = merged || n > 1
	}
	if !merged {
		t.Fatalf("no batch merged more than one request: %v", g.sizes)
	}
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	ts := start(t, Config{})
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	var documented, served []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	for _, r := range ts.routes() {
		served = append(served, r.method+" "+r.path)
	}
	sort.Strings(documented)
	sort.Strings(served)
	if strings.Join(documented, "\n") != strings.Join(served, "\n") {
		t.Fatalf("openapi.json documents\n%s\nbut the server serves\n%s", strings.Join(documented, "\n"), strings.Join(served, "\n"))
	}
	// Every documented operation answers with a status the document lists.
	for path, ops := range doc.Paths {
		for method, op := range ops {
			body := io.Reader(nil)
			if method == "post" {
				body = strings.NewReader(`{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`)
			}
			req, _ := http.NewRequest(strings.ToUpper(method), ts.http.URL+path, body)
			if body != nil {
				req.Header.Set("Content-Type", "application/json")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if _, ok := op.Responses[strconv.Itoa(resp.StatusCode)]; !ok {
				t.Fatalf("%s %s answered %d, not documented", method, path, resp.StatusCode)
			}
		}
	}
}

func TestHealthModelsMetricsAndDrain(t *testing.T) {
	s, err := New(Config{Models: map[string]string{"default": defaultModelDir}})
	if err != nil {
		t.Fatal(err)
	}
	h := httptest.NewServer(s.Handler())
	defer h.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(h.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if c, b := get("/readyz"); c != 503 || !strings.Contains(b, "loading") {
		t.Fatalf("readyz before load: %d %s", c, b)
	}
	if c, _ := get("/livez"); c != 200 {
		t.Fatalf("livez: %d", c)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if c, _ := get("/readyz"); c != 200 {
		t.Fatalf("readyz after load: %d", c)
	}
	c, b := get("/v1/models")
	if c != 200 || !strings.Contains(b, `"object":"list"`) || !strings.Contains(b, `"id":"default"`) || !strings.Contains(b, `"kind":"chronos2"`) {
		t.Fatalf("models: %d %s", c, b)
	}
	resp, _ := http.Post(h.URL+"/v1/forecast", "application/json", strings.NewReader(`{"horizon": 3, "series": [{"values": [1, 2, 3, 4]}]}`))
	resp.Body.Close()
	_, metrics := get("/metrics")
	for _, want := range []string{`cutenative_requests_total{endpoint="forecast",outcome="ok"} 1`,
		`cutenative_queue_depth{model="default",lane="short"} 0`, `cutenative_queue_depth{model="default",lane="long"} 0`,
		`cutenative_inference_seconds_count{model="default",lane="short"} 1`, `cutenative_queue_seconds_bucket{model="default",lane="short",le=`,
		`cutenative_batch_series_bucket{model="default",lane="short",le="1"} 1`, `cutenative_batch_jobs_count{model="default",lane="short"} 1`,
		`cutenative_queue_dropped_total{model="default",lane="short",reason="full"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
	s.Drain()
	if c, b := get("/readyz"); c != 503 || !strings.Contains(b, "draining") {
		t.Fatalf("readyz while draining: %d %s", c, b)
	}
	s.Close()
	resp, _ = http.Post(h.URL+"/v1/forecast", "application/json", strings.NewReader(`{"horizon": 3, "series": [{"values": [1, 2, 3, 4]}]}`))
	resp.Body.Close()
	if resp.StatusCode != 404 && resp.StatusCode != 503 {
		t.Fatalf("after close: %d", resp.StatusCode)
	}
}

func TestFutureTimestamps(t *testing.T) {
	tests := []struct {
		in   []string
		h    int
		want []string
	}{
		{[]string{"2020-01", "2020-02"}, 2, []string{"2020-03", "2020-04"}},
		{[]string{"2020-11", "2021-02"}, 2, []string{"2021-05", "2021-08"}},                             // quarterly
		{[]string{"2020-01-31", "2020-02-01"}, 1, []string{"2020-02-02"}},                               // daily
		{[]string{"2020-01-15", "2020-02-15"}, 1, []string{"2020-03-15"}},                               // monthly by day
		{[]string{"2024-03-01T00:00:00Z", "2024-03-01T01:00:00Z"}, 1, []string{"2024-03-01T02:00:00Z"}}, // hourly
		{[]string{"2020-01-01", "2020-01-02", "2020-01-05"}, 1, nil},                                    // irregular
		{[]string{"2020-01"}, 1, nil},
	}
	for _, tc := range tests {
		got, err := futureTimestamps(tc.in, tc.h)
		if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("%v: got %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

func float32s(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

// Every refusal is the JSON error object naming the limit that refused it (its flag where it has one), and is
// counted in cutenative_refusals_total under that limit.
func TestEveryRefusalNamesItsLimit(t *testing.T) {
	ts := start(t, Config{MaxBodyBytes: 64 << 10, MaxSeries: 4, MaxInputValues: 1000, MaxOutputValues: 100000,
		MaxInflightBytes: 1 << 20, Timeout: time.Second, AllowedHosts: []string{"127.0.0.1"}})
	many := `{"horizon": 2, "series": [` + strings.Repeat(`{"values": [1]},`, 4) + `{"values": [1]}]}`
	values := `{"horizon": 2, "series": [{"values": [` + strings.Repeat("1,", 1000) + `1]}]}`
	tests := []struct {
		name, body, ctype, host string
		status                  int
		reason, message         string
	}{
		{"body", `{"horizon": 2, "series": [{"values": [1]}]}` + strings.Repeat(" ", 65<<10), "", "", 413, "body_bytes",
			"exceeds 65536 bytes (-max-body)"},
		{"series", many, "", "", 400, "invalid_argument", "series[4]: more than 4 series (-max-series)"},
		{"input values", values, "", "", 400, "invalid_argument", "more than 1000 input values (values and covariate values, -max-input-values)"},
		{"horizon", `{"horizon": 65537, "series": [{"values": [1]}]}`, "", "", 400, "invalid_argument", "(-max-horizon)"},
		{"output values", `{"horizon": 20000, "series": [{"values": [1]}, {"values": [1]}]}`, "", "", 400, "invalid_argument",
			"(-max-output-values)"},
		// 3 series x 20000 steps x 24 bytes of answer: 1.4 MB, above a budget of 1 MiB.
		{"bytes in flight", `{"horizon": 20000, "quantiles": [0.5], "series": [{"values": [1]}, {"values": [1]}, {"values": [1]}]}`,
			"", "", 413, "inflight_bytes", "(-max-inflight-bytes 1048576)"},
		// 469 passes, the rollout's over 9 paths: 3.7 s estimated on the CI machine, 1.6 s at the fastest cost model
		// seen there (720 KB of answer: within the bytes in flight).
		{"compute", `{"horizon": 30000, "quantiles": [0.5], "series": [{"values": [1]}]}`, "", "", 400, "compute_estimate",
			"before its deadline (-timeout 1s)"},
		{"content type", `{"horizon": 2, "series": [{"values": [1]}]}`, "text/plain", "", 415, "content_type", "Content-Type: application/json"},
		{"host", `{"horizon": 2, "series": [{"values": [1]}]}`, "", "rebound.example", 403, "host", "(-allowed-hosts)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.http.URL+"/v1/forecast", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", cmpOr(tc.ctype, "application/json"))
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e := errorOf(t, b)
			if resp.StatusCode != tc.status || !strings.Contains(e.Message, tc.message) {
				t.Fatalf("%d %s; want %d naming %q", resp.StatusCode, b, tc.status, tc.message)
			}
			if n := ts.metrics.refused("forecast", tc.reason); n == 0 {
				t.Fatalf("not counted under reason %q", tc.reason)
			}
		})
	}
	// A request that could finish alone but not behind the work already in its lane: 429 with Retry-After.
	m, _ := ts.find("", capForecast)
	m.short.mu.Lock()
	m.short.runEst, m.short.runStart = 5, time.Now() // as if a call estimated at 5 s had just started
	m.short.mu.Unlock()
	code, h, b := ts.post(t, `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`)
	m.short.mu.Lock()
	m.short.runEst = 0
	m.short.mu.Unlock()
	if e := errorOf(t, b); code != 429 || h.Get("Retry-After") != "5" || !strings.Contains(e.Message, "could not finish before its deadline (-timeout 1s)") {
		t.Fatalf("backlog: %d %v %s", code, h, b)
	}
	var metrics strings.Builder
	ts.metrics.write(&metrics)
	for _, want := range []string{`cutenative_refusals_total{endpoint="forecast",reason="deadline_backlog"} 1`,
		`cutenative_refusals_total{endpoint="forecast",reason="compute_estimate"} 1`} {
		if !strings.Contains(metrics.String(), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

// A cross-site POST from a browser is refused when the server has no API keys, and taken with them.
func TestCrossSiteRequests(t *testing.T) {
	body := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	for _, keys := range [][]string{nil, {"k"}} {
		ts := start(t, Config{APIKeys: keys})
		for _, hdr := range [][]string{{"Origin", "https://evil.example"}, {"Sec-Fetch-Site", "cross-site"}, {"Origin", "null"}} {
			h := []string{hdr[0], hdr[1]}
			if keys != nil {
				h = append(h, "Authorization", "Bearer k")
			}
			code, _, b := ts.post(t, body, h...)
			if keys == nil && (code != 403 || !strings.Contains(errorOf(t, b).Message, "cross-site")) {
				t.Fatalf("no keys, %v: %d %s", hdr, code, b)
			}
			if keys != nil && code != 200 {
				t.Fatalf("keys, %v: %d %s", hdr, code, b)
			}
		}
		// The same origin (a page the server itself serves, or a tool that sets Origin) is fine.
		host := strings.TrimPrefix(ts.http.URL, "http://")
		if code, _, b := ts.post(t, body, "Origin", "http://"+host, "Authorization", "Bearer k"); code != 200 {
			t.Fatalf("same origin: %d %s", code, b)
		}
	}
}

// Every kind in one table: a Z-Image pipeline loads beside a fused Chronos-2 and the embedding model, each with
// its own options (the image model in the server's -mode, fused here; the embedding model f32 eager), is listed
// with its capabilities, and is refused by the endpoints it cannot serve.
func TestZImageBesideForecasterAndEmbedder(t *testing.T) {
	img := testenv.ZImagePipeline(t, "../../tests/fixtures/zimage/tiny_a")
	ts := start(t, Config{Models: map[string]string{"default": defaultModelDir, "img": img},
		ModelOptions: map[string]ModelOptions{"img": {DType: "f32"}}, EmbedModel: testenv.MiniLMDir(t),
		Open: cutenative.Options{Mode: "fused", Threads: 1}})
	code, b := ts.get(t, "/v1/models")
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	for _, want := range []string{
		`"id":"default","object":"model"`, `"kind":"chronos2","capabilities":["forecast"],"device":"cpu","dtype":"f32","mode":"fused"`,
		`"id":"embedding"`, `"kind":"embedding","capabilities":["embed"],"device":"cpu","dtype":"f32","mode":"eager"`,
		`"id":"img"`, `"kind":"zimage","capabilities":["generate"],"device":"cpu","dtype":"f32","mode":"fused"`,
		`"image_size_multiple":16`,
	} {
		if !strings.Contains(b, want) {
			t.Fatalf("/v1/models lacks %s:\n%s", want, b)
		}
	}
	if i, j, k := strings.Index(b, `"id":"default"`), strings.Index(b, `"id":"embedding"`), strings.Index(b, `"id":"img"`); !(i < j && j < k) {
		t.Fatalf("order: forecasters, embedding models, image models: %s", b)
	}
	code, _, body := ts.post(t, `{"model": "img", "horizon": 2, "series": [{"values": [1, 2]}]}`)
	if e := errorOf(t, body); code != 400 || !strings.Contains(e.Message, `model "img" is a zimage model: it cannot forecast`) {
		t.Fatalf("forecast on the image model: %d %s", code, body)
	}
	if code, _, body := ts.post(t, `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`); code != 200 {
		t.Fatalf("forecast: %d %s", code, body)
	}
	if code, body := ts.embeddings(t, `{"input": "a lighthouse at dusk"}`); code != 200 {
		t.Fatalf("embeddings: %d %s", code, body)
	}
	var metrics strings.Builder
	ts.metrics.write(&metrics)
	if !strings.Contains(metrics.String(), `cutenative_model_info{model="img",kind="zimage",device="cpu",dtype="f32",mode="fused"} 1`) {
		t.Fatalf("metrics: %s", metrics.String())
	}
	// With no -default-model, the default forecaster is the first model by name that forecasts.
	s0, err := New(Config{Models: map[string]string{"a-img": img, "zz": defaultModelDir}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s0.Load(); err != nil {
		t.Fatalf("an image model first by name: %v", err)
	}
	if got := s0.defaultName(capForecast); got != "zz" {
		s0.Close()
		t.Fatalf("default forecaster %q, want zz", got)
	}
	s0.Close()
	// A mode the model cannot run here, asked for by name, stops the load and says which model (graph mode
	// captures CUDA graphs: not on a CPU).
	s, err := New(Config{Models: map[string]string{"img": img}, ModelOptions: map[string]ModelOptions{"img": {Mode: "graph"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Load(); err == nil || !strings.Contains(err.Error(), `model "img": mode graph`) {
		t.Fatalf("graph-mode Z-Image on a CPU: %v", err)
	}
}

// With two keys or more, one key holds at most half of -max-inflight: another key still gets in.
func TestInflightPerKey(t *testing.T) {
	ts := start(t, Config{APIKeys: []string{"a", "b"}, MaxInflight: 4})
	if ts.cfg.MaxInflightPerKey != 2 {
		t.Fatalf("per-key limit %d, want half of 4", ts.cfg.MaxInflightPerKey)
	}
	ts.keyInflight[0].Add(2) // key "a" holds its share
	defer ts.keyInflight[0].Add(-2)
	body := `{"horizon": 2, "series": [{"values": [1, 2, 3]}]}`
	code, h, b := ts.post(t, body, "Authorization", "Bearer a")
	if e := errorOf(t, b); code != 429 || h.Get("Retry-After") == "" || !strings.Contains(e.Message, "-max-inflight-per-key") {
		t.Fatalf("key a: %d %s", code, b)
	}
	if code, _, b := ts.post(t, body, "Authorization", "Bearer b"); code != 200 {
		t.Fatalf("key b: %d %s", code, b)
	}
	if n := ts.metrics.refused("forecast", "key_inflight"); n != 1 {
		t.Fatalf("refusals counted: %d", n)
	}
	if ts.inflight.Load() != 0 {
		t.Fatalf("%d requests left in flight", ts.inflight.Load())
	}
}

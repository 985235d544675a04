package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log destination the test reads while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// lines returns the JSON log records written so far.
func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// accessLine waits for the access-log line of the request with id.
func (s *syncBuffer) accessLine(t *testing.T, id string) map[string]any {
	t.Helper()
	var line map[string]any
	waitUntil(t, "the access-log line of "+id, func() bool {
		for _, l := range s.lines(t) {
			if l["msg"] == "request" && l["request_id"] == id {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

func do(t *testing.T, method, url, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// One access-log line per request, with method, route pattern, status, duration, model, series and request
// id (taken from X-Request-Id when sane, else generated, and echoed); JSON 404/405 with their metrics.
func TestAccessLog(t *testing.T) {
	var buf syncBuffer
	ts := start(t, Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	good := `{"horizon": 3, "series": [{"values": [1, 2, 3, 4]}, {"values": [5, 6, 7, 8]}]}`
	tests := []struct {
		name, method, path, body, reqID string
		status                          int
		want                            map[string]any // fields of the log line
		code                            string         // the JSON error code, "" for none
		idEchoed                        bool           // the response's X-Request-Id is reqID
	}{
		{"forecast", "POST", "/v1/forecast", good, "abc-123", 200,
			map[string]any{"method": "POST", "route": "POST /v1/forecast", "status": 200.0, "model": "default", "series": 2.0, "level": "INFO"}, "", true},
		{"bad request", "POST", "/v1/forecast", `{"horizon": 0, "series": [{"values": [1, 2]}]}`, "req.2", 400,
			map[string]any{"route": "POST /v1/forecast", "status": 400.0, "model": "default", "series": 1.0}, "invalid_argument", true},
		{"unknown model", "POST", "/v1/forecast", `{"model": "nope", "horizon": 3, "series": [{"values": [1, 2]}]}`, "r3", 404,
			map[string]any{"status": 404.0, "model": "nope", "series": 1.0}, "not_found", true},
		{"health", "GET", "/livez", "", "", 200, map[string]any{"method": "GET", "route": "GET /livez", "status": 200.0}, "", false},
		{"insane id replaced", "GET", "/readyz", "", "a b \"level=ERROR\"", 200, map[string]any{"route": "GET /readyz"}, "", false},
		{"404", "GET", "/v2/nothing", "", "id404", 404,
			map[string]any{"route": "unmatched", "path": "/v2/nothing", "status": 404.0}, "not_found", true},
		{"405", "GET", "/v1/forecast", "", "id405", 405,
			map[string]any{"route": "unmatched", "method": "GET", "status": 405.0}, "method_not_allowed", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			if tc.reqID != "" {
				hdr = []string{"X-Request-Id", tc.reqID}
			}
			resp, body := do(t, tc.method, ts.http.URL+tc.path, tc.body, hdr...)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			id := resp.Header.Get("X-Request-Id")
			if tc.idEchoed && id != tc.reqID || !tc.idEchoed && (id == "" || id == tc.reqID || !saneRequestID(id)) {
				t.Fatalf("X-Request-Id %q (sent %q)", id, tc.reqID)
			}
			if tc.code != "" {
				var e struct {
					Error struct{ Code, Message string }
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Fatalf("Content-Type %q: %s", ct, body)
				}
				if err := json.Unmarshal(body, &e); err != nil || e.Error.Code != tc.code || e.Error.Message == "" {
					t.Fatalf("error body %s (%v), want code %q", body, err, tc.code)
				}
			}
			line := buf.accessLine(t, id)
			for k, v := range tc.want {
				if line[k] != v {
					t.Errorf("log %s = %v, want %v (line %v)", k, line[k], v, line)
				}
			}
			if d, ok := line["duration_ms"].(float64); !ok || d < 0 {
				t.Errorf("duration_ms %v", line["duration_ms"])
			}
			if _, ok := line["series"]; ok && tc.want["series"] == nil {
				t.Errorf("series logged where none is known: %v", line)
			}
		})
	}
	// One line per request: every request above is logged exactly once.
	n := 0
	for _, l := range buf.lines(t) {
		if l["msg"] == "request" {
			n++
		}
	}
	if n != len(tests) {
		t.Fatalf("%d access-log lines for %d requests", n, len(tests))
	}
	_, metrics := do(t, "GET", ts.http.URL+"/metrics", "")
	for _, want := range []string{
		`cutenative_requests_total{endpoint="unmatched",outcome="not_found"} 1`,
		`cutenative_requests_total{endpoint="unmatched",outcome="method_not_allowed"} 1`,
		`cutenative_model_requests_total{model="default",status="2xx"} 1`,
		`cutenative_model_requests_total{model="default",status="4xx"} 1`,
		`cutenative_model_series_total{model="default"} 2`,
		`cutenative_model_info{model="default",kind="chronos2",device="cpu",dtype="f32",mode="eager"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// A 5xx is logged as an error with its cause (the error behind "internal error", or a recovered panic).
func TestAccessLogServerErrors(t *testing.T) {
	var buf syncBuffer
	s, err := New(Config{Models: map[string]string{"default": defaultModelDir}, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", s.endpoint("boom", func(w http.ResponseWriter, r *http.Request) *apiError {
		return fromError(errors.New("disk on fire"))
	}))
	mux.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) { panic("nil map") })
	mux.HandleFunc("GET /loading", s.endpoint("forecast", func(w http.ResponseWriter, r *http.Request) *apiError {
		_, e := s.find("", capForecast)
		return e
	}))
	h := httptest.NewServer(s.serveLogged(mux))
	defer h.Close()
	for _, tc := range []struct {
		path   string
		status int
		cause  string
	}{
		{"/boom", 500, "disk on fire"},
		{"/panic", 500, "panic: nil map"},
		{"/loading", 503, "unavailable: models are loading"},
	} {
		resp, body := do(t, "GET", h.URL+tc.path, "")
		if resp.StatusCode != tc.status || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
		line := buf.accessLine(t, resp.Header.Get("X-Request-Id"))
		if line["level"] != "ERROR" || !strings.Contains(line["cause"].(string), tc.cause) {
			t.Errorf("%s: log line %v, want an ERROR with cause %q", tc.path, line, tc.cause)
		}
	}
}

// JSON answers keep <, > and & as they are.
func TestNoHTMLEscaping(t *testing.T) {
	ts := start(t, Config{})
	_, body := do(t, "POST", ts.http.URL+"/v1/forecast", `{"horizon": 0, "series": [{"values": [1, 2]}]}`)
	if !strings.Contains(string(body), "must be >= 1") || strings.Contains(string(body), `\u003e`) {
		t.Fatalf("body %s", body)
	}
	b, err := encodeJSON(map[string]string{"s": "<a & b>"})
	if err != nil || string(b) != `{"s":"<a & b>"}`+"\n" {
		t.Fatalf("encodeJSON: %s %v", b, err)
	}
}

// /metrics has the build info and the process metrics.
func TestBuildAndProcessMetrics(t *testing.T) {
	ts := start(t, Config{})
	_, b := do(t, "GET", ts.http.URL+"/metrics", "")
	m := string(b)
	lib := Library()
	for _, want := range []string{
		`cutenative_build_info{version="` + BinaryVersion() + `",library_version="` + lib.Version + `",go_version="go`,
		"\nprocess_start_time_seconds ", "\nprocess_resident_memory_bytes ", "\nprocess_open_fds ", "\ngo_goroutines ",
		"\nprocess_cpu_seconds_total ",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if lib.Version == "" || lib.Torch == "" || !strings.Contains(lib.String(), "compiled by ") {
		t.Errorf("library %+v: %s", lib, lib)
	}
}

func TestSaneRequestID(t *testing.T) {
	for id, ok := range map[string]bool{"abc": true, "0af3-12:x/y+z=": true, "": false, "a b": false, "a\"b": false,
		"a\nb": false, strings.Repeat("x", 128): true, strings.Repeat("x", 129): false, "é": false} {
		if saneRequestID(id) != ok {
			t.Errorf("saneRequestID(%q) = %v", id, !ok)
		}
	}
}

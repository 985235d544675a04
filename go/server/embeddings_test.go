package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

func (ts *testServer) embeddings(t *testing.T, body string) (int, []byte) {
	t.Helper()
	resp, err := http.Post(ts.http.URL+"/v1/embeddings", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestEmbeddingsFakeEmbedder(t *testing.T) {
	ts := startLoRA(t, Config{})
	want, _ := wordEmbedder{dim: 128}.Embed(context.Background(), []string{"a knight", "neon rain"})
	for _, format := range []string{"", "float", "base64"} {
		body := `{"input": ["a knight", "neon rain"], "model": "embedding"`
		if format != "" {
			body += `, "encoding_format": "` + format + `"`
		}
		code, b := ts.embeddings(t, body+"}")
		if code != 200 {
			t.Fatalf("%q: status %d: %s", format, code, b)
		}
		var got api.EmbeddingResponse
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Object != "list" || got.Model != "embedding" || len(got.Data) != 2 || got.Usage.PromptTokens != 0 {
			t.Fatalf("%q: %s", format, b)
		}
		for i, d := range got.Data {
			if d.Object != "embedding" || d.Index != i || d.Embedding.Base64 != (format == "base64") ||
				!testenv.SameBits(d.Embedding.Values, want[i]) {
				t.Fatalf("%q: entry %d: %+v", format, i, d)
			}
		}
	}
	// One string is one text.
	code, b := ts.embeddings(t, `{"input": "a knight"}`)
	var got api.EmbeddingResponse
	if err := json.Unmarshal(b, &got); code != 200 || err != nil || len(got.Data) != 1 || !testenv.SameBits(got.Data[0].Embedding.Values, want[0]) {
		t.Fatalf("one string: %d %s", code, b)
	}
	// The embedding model is listed after the forecasters.
	code, lb := ts.get(t, "/v1/models")
	b = []byte(lb)
	var list api.ModelList
	if err := json.Unmarshal(b, &list); code != 200 || err != nil || len(list.Data) != 2 {
		t.Fatalf("models: %d %s", code, b)
	}
	if e := list.Data[1]; e.ID != "embedding" || e.Object != "model" || e.Kind != "embedding" || e.EmbeddingDim != 128 ||
		e.OwnedBy != "cutenative" || e.Created == 0 || e.Default {
		t.Fatalf("embedding entry %+v", e)
	}
	_, metrics := ts.get(t, "/metrics")
	if !strings.Contains(metrics, `cutenative_requests_total{endpoint="embeddings",outcome="ok"} 4`) {
		t.Fatalf("metrics:\n%s", metrics)
	}
}

func TestEmbeddingsErrors(t *testing.T) {
	ts := startLoRA(t, Config{MaxBodyBytes: 16 << 20})
	many := `["` + strings.Repeat(`x", "`, maxEmbedInputs) + `x"]`
	big := strings.Repeat("y", maxEmbedInputBytes+1)
	var half []string
	for i := 0; i < 9; i++ {
		half = append(half, `"`+strings.Repeat("z", maxEmbedInputBytes/2)+`"`)
	}
	total := "[" + strings.Repeat(strings.Join(half, ",")+",", 15) + `"z"]` // 135 texts of 32 KiB: 4.2 MiB
	tests := []struct {
		name, body string
		status     int
		code, msg  string
	}{
		{"no input", `{"model": "embedding"}`, 400, "invalid_argument", "input: required"},
		{"null input", `{"input": null}`, 400, "invalid_argument", "input: required"},
		{"empty string", `{"input": ""}`, 400, "invalid_argument", "input: empty"},
		{"empty array", `{"input": []}`, 400, "invalid_argument", "an empty array"},
		{"empty text in a list", `{"input": ["a", ""]}`, 400, "invalid_argument", "input[1]: empty"},
		{"token array", `{"input": [[1, 2, 3]]}`, 400, "invalid_argument", "input[0]: expected a string"},
		{"tokens", `{"input": [1, 2]}`, 400, "invalid_argument", "input[0]: expected a string"},
		{"a number", `{"input": 5}`, 400, "invalid_argument", "expected a string or an array"},
		{"too many texts", `{"input": ` + many + `}`, 400, "invalid_argument", fmt.Sprintf("more than %d texts", maxEmbedInputs)},
		{"a text too long", `{"input": "` + big + `"}`, 400, "invalid_argument", "input: a string longer than 65536 bytes"},
		{"texts too long together", `{"input": ` + total + `}`, 400, "invalid_argument", "per request"},
		{"unknown model", `{"input": "a", "model": "text-embedding-3-small"}`, 404, "not_found", `models that can embed: embedding`},
		{"a forecaster", `{"input": "a", "model": "default"}`, 400, "invalid_argument", `model "default" is a chronos2 model: it cannot embed`},
		{"user not a string", `{"input": "a", "user": {"a": 1}}`, 400, "invalid_argument", "user: expected a string, got an object"},
		{"format", `{"input": "a", "encoding_format": "int8"}`, 400, "invalid_argument", "encoding_format"},
		{"dimensions", `{"input": "a", "dimensions": 64}`, 400, "invalid_argument", "have 128"},
		{"unknown field", `{"input": "a", "foo": 1}`, 400, "invalid_argument", "foo"},
		{"not an object", `[1]`, 400, "invalid_argument", "expected an object, got an array"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.embeddings(t, tc.body)
			e := errorOf(t, b)
			if code != tc.status || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("%d %s, want %d %s %q", code, b, tc.status, tc.code, tc.msg)
			}
		})
	}
	// dimensions equal to the model's are fine.
	if code, b := ts.embeddings(t, `{"input": "a", "dimensions": 128, "user": "u"}`); code != 200 {
		t.Fatalf("dimensions 128: %d %s", code, b)
	}
}

// Without an embedding model the endpoint is a JSON 404.
func TestEmbeddingsWithoutModel(t *testing.T) {
	ts := start(t, Config{})
	code, b := ts.embeddings(t, `{"input": "a"}`)
	if e := errorOf(t, b); code != 404 || e.Code != "not_found" || !strings.Contains(e.Message, "no embedding model") {
		t.Fatalf("%d %s", code, b)
	}
}

// Admission: beyond the embedding model's lane and its queue, 429 with Retry-After; MaxInflight before that.
func TestEmbeddingsQueueFullIs429(t *testing.T) {
	g := &gatedEmbedder{wordEmbedder: wordEmbedder{dim: 128}, entered: make(chan struct{}, 64), release: make(chan struct{})}
	ts := startLoRA(t, Config{Embedder: g, QueueSize: 1, MaxInflight: 3})
	ts.inflight.Add(3) // requests held in flight
	resp, err := http.Post(ts.http.URL+"/v1/embeddings", "application/json", strings.NewReader(`{"input": "a"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	ts.inflight.Add(-3)
	if e := errorOf(t, b); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(e.Message, "max-inflight") {
		t.Fatalf("inflight: %d %s", resp.StatusCode, b)
	}
	g.armed.Store(true)
	results := make(chan int, 2)
	post := func() { c, _ := ts.embeddings(t, `{"input": "a"}`); results <- c }
	go post()
	<-g.entered // the first runs
	go post()   // the second waits (the queue holds 1)
	lane := ts.models["embedding"].short
	waitUntil(t, "one embedding queued", func() bool { return lane.len() == 1 })
	code, b := ts.embeddings(t, `{"input": "a"}`)
	if e := errorOf(t, b); code != 429 || e.Code != "overloaded" || !strings.Contains(e.Message, `model "embedding"'s short lane has 1 requests waiting already (-queue)`) {
		t.Fatalf("queue: %d %s", code, b)
	}
	close(g.release)
	for i := 0; i < 2; i++ {
		if c := <-results; c != 200 {
			t.Fatalf("admitted: %d", c)
		}
	}
	if n := ts.metrics.refused("embeddings", "queue_full"); n != 1 {
		t.Fatalf("refusals counted: %d", n)
	}
}

// The real all-MiniLM-L6-v2: the server's vectors are Model.Embed's (cn_embed's), bit for bit, in both
// encodings.
func TestEmbeddingsMiniLMEqualModelEmbed(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	ts := startLoRA(t, Config{EmbedModel: dir, EmbedModelName: "all-MiniLM-L6-v2"})
	m, err := cutenative.Open(dir, &cutenative.Options{Device: ts.cfg.Open.Device, Threads: ts.cfg.Open.Threads})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	texts := []string{"a knight and a dragon at the castle", "neon city in the rain", "x",
		strings.Repeat("a very long text that the model truncates ", 200), "naïve café — 東京 \u0000 nul"}
	want, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(texts)
	for _, format := range []string{"float", "base64"} {
		code, b := ts.embeddings(t, `{"model": "all-MiniLM-L6-v2", "encoding_format": "`+format+`", "input": `+string(in)+`}`)
		if code != 200 {
			t.Fatalf("%s: %d %s", format, code, b)
		}
		var got api.EmbeddingResponse
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Model != "all-MiniLM-L6-v2" || len(got.Data) != len(texts) {
			t.Fatalf("%s: %.300s", format, b)
		}
		for i := range texts {
			v := got.Data[i].Embedding.Values
			if len(v) != 384 || !testenv.SameBits(v, want[i]) {
				t.Fatalf("%s: text %d differs from Model.Embed", format, i)
			}
			var n float64
			for _, x := range v {
				n += float64(x) * float64(x)
			}
			if math.Abs(n-1) > 1e-5 {
				t.Fatalf("text %d: norm^2 %g", i, n)
			}
		}
	}
	code, lb := ts.get(t, "/v1/models")
	var list api.ModelList
	if err := json.Unmarshal([]byte(lb), &list); code != 200 || err != nil {
		t.Fatalf("models: %d %s", code, lb)
	}
	e := list.Data[len(list.Data)-1]
	if e.ID != "all-MiniLM-L6-v2" || e.Kind != "embedding" || e.EmbeddingDim != 384 || e.MaxTokens <= 0 || e.Parameters == 0 {
		t.Fatalf("entry %+v", e)
	}
}

// blockingEmbedder blocks until its context ends (the catalog load's embeddings pass through).
type blockingEmbedder struct {
	wordEmbedder
	block chan struct{}
}

func (e blockingEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	select {
	case <-e.block:
		return e.wordEmbedder.Embed(ctx, texts)
	default:
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// An embedding that outlasts the server's timeout is a 504; the slot is given back.
func TestEmbeddingsDeadline(t *testing.T) {
	open := make(chan struct{})
	close(open)
	emb := &blockingEmbedder{wordEmbedder: wordEmbedder{dim: 128}, block: open}
	ts := startLoRA(t, Config{Embedder: emb, Timeout: 100 * time.Millisecond})
	emb.block = make(chan struct{}) // from now on every embedding blocks
	code, b := ts.embeddings(t, `{"input": ["a", "b"]}`)
	if e := errorOf(t, b); code != 504 || e.Code != "deadline_exceeded" {
		t.Fatalf("%d %s", code, b)
	}
	lane := ts.models["embedding"].short
	waitUntil(t, "the call abandoned", func() bool { return lane.len() == 0 && lane.backlog() == 0 })
}

// FuzzParseEmbeddingInput: the input parser never panics, refuses only with 400s, and what it accepts is
// within every limit.
func FuzzParseEmbeddingInput(f *testing.F) {
	for _, s := range []string{`"a"`, `["a", "b"]`, `[]`, `[1]`, `[["a"]]`, `""`, `null`, `{"a": 1}`, `["a",`, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		body := append(append([]byte(`{"input": `), raw...), '}')
		d, err := newDecoder(bytes.NewReader(body), newByteBudget(1<<30).open(), limits{MaxInputValues: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		req, err := decodeEmbeddings(d)
		if err != nil {
			if e := decodeError(err); e.Status != 400 {
				t.Fatalf("%q: %+v", raw, e)
			}
			return
		}
		texts := req.Input
		total := 0
		for _, s := range texts {
			if s == "" || len(s) > maxEmbedInputBytes {
				t.Fatalf("%q: accepted %q", raw, s)
			}
			total += len(s)
		}
		if len(texts) == 0 || len(texts) > maxEmbedInputs || total > maxEmbedTotalBytes {
			t.Fatalf("%q: accepted %d texts, %d bytes", raw, len(texts), total)
		}
	})
}

// An embedding model without a LoRA catalog serves /v1/embeddings and is listed by /v1/models; LoRA search stays
// unconfigured (404).
func TestEmbeddingsWithoutCatalog(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	s, err := New(Config{Models: map[string]string{"default": defaultModelDir}, EmbedModel: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Load(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	post := func(path, body string) (int, []byte) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := post("/v1/embeddings", `{"input": "a knight and a dragon"}`)
	var got api.EmbeddingResponse
	if err := json.Unmarshal(b, &got); code != 200 || err != nil || len(got.Data) != 1 || len(got.Data[0].Embedding.Values) != 384 {
		t.Fatalf("embeddings: %d %s", code, b)
	}
	if code, b := post("/v1/loras/search", `{"prompt": "x"}`); code != 404 {
		t.Fatalf("LoRA search without a catalog: %d %s", code, b)
	}
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list api.ModelList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if n := len(list.Data); n != 2 || list.Data[n-1].ID != "embedding" || list.Data[n-1].EmbeddingDim != 384 {
		t.Fatalf("models: %+v", list.Data)
	}
}

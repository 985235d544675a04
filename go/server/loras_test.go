package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
	"github.com/cutenative/cutenative/go/lora"
)

// wordEmbedder is a deterministic bag of hashed words (texts sharing words are similar).
type wordEmbedder struct{ dim int }

func (e wordEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, e.dim)
		for _, w := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return !unicode.IsLetter(r) }) {
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%uint32(e.dim)] += 1
		}
		v[e.dim-1] += 0.1
		out[i] = v
	}
	return out, nil
}

const testCatalog = `{"negative_weight": 0.5, "threshold": 0.3, "loras": [
  {"name": "fantasy", "path": "loras/fantasy.safetensors", "scale": 0.8,
   "positive": "knight castle dragon wizard armour", "negative": "robot spaceship"},
  {"name": "cyberpunk", "path": "loras/cyberpunk.safetensors", "scale": 0.8,
   "positive": "neon city robot rain hacker", "negative": "castle"},
  {"name": "watercolor", "path": "loras/watercolor.safetensors", "scale": 0.7,
   "positive": "watercolour paper washes pigment"}]}`

func writeCatalog(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func startLoRA(t *testing.T, cfg Config) *testServer {
	t.Helper()
	if cfg.LoRACatalog == "" {
		cfg.LoRACatalog = writeCatalog(t, testCatalog)
	}
	if cfg.EmbedModel == "" && cfg.Embedder == nil {
		cfg.Embedder = wordEmbedder{dim: 128}
	}
	return start(t, cfg)
}

func (ts *testServer) search(t *testing.T, body string, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", ts.http.URL+"/v1/loras/search", strings.NewReader(body))
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
	return resp.StatusCode, b
}

func TestLoRASearch(t *testing.T) {
	ts := startLoRA(t, Config{})
	code, b := ts.search(t, `{"prompt": "a knight and a dragon at the castle", "top_k": 2}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var got api.LoRASearchResponse
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Selected == nil || got.Selected.Name != "fantasy" || len(got.Candidates) != 2 ||
		got.Candidates[0].Name != "fantasy" || got.Selected.Score != got.Candidates[0].Score || got.Threshold != 0.3 ||
		got.Decision != "selected" {
		t.Fatalf("response %s", b)
	}
	for _, c := range got.Candidates {
		if d := c.Score - (c.PositiveSimilarity - 0.5*c.NegativeSimilarity); d > 1e-6 || d < -1e-6 {
			t.Fatalf("score is not positive - w*negative: %+v", c)
		}
	}
	if strings.Contains(string(b), "safetensors") {
		t.Fatalf("the response exposes a file path: %s", b)
	}
	// No LoRA reaches the threshold: "selected": null; top_k defaults to 5 (3 entries here).
	code, b = ts.search(t, `{"prompt": "what time is it"}`)
	if code != 200 || !strings.Contains(string(b), `"selected":null`) || !strings.Contains(string(b), `"decision":"below_threshold"`) {
		t.Fatalf("no match: %d %s", code, b)
	}
	if err := json.Unmarshal(b, &got); err != nil || len(got.Candidates) != 3 {
		t.Fatalf("default top_k: %s", b)
	}
	_, metrics := ts.get(t, "/metrics")
	for _, want := range []string{`cutenative_requests_total{endpoint="lora_search",outcome="ok"} 2`,
		`cutenative_lora_searches_total{selected="true"} 1`, `cutenative_lora_searches_total{selected="false"} 1`,
		"cutenative_lora_embed_seconds_count 2", "cutenative_lora_route_seconds_count 2",
		"cutenative_lora_catalog_entries 3", `cutenative_lora_catalog_loads_total{outcome="ok"} 1`,
		`cutenative_lora_prompt_cache_total{result="hit"} 0`, `cutenative_lora_prompt_cache_total{result="miss"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
	// The first prompt again: its vector comes from the cache (no embedding call), the same answer.
	_, first := ts.search(t, `{"prompt": "a knight and a dragon at the castle", "top_k": 2}`)
	var again api.LoRASearchResponse
	if err := json.Unmarshal(first, &again); err != nil || again.Selected == nil || again.Selected.Name != "fantasy" ||
		again.Candidates[0].Score != again.Selected.Score {
		t.Fatalf("the cached prompt: %s", first)
	}
	_, metrics = ts.get(t, "/metrics")
	for _, want := range []string{`cutenative_lora_prompt_cache_total{result="hit"} 1`, `cutenative_lora_prompt_cache_total{result="miss"} 2`,
		`cutenative_batch_jobs_count{model="embedding",lane="short"} 2`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
}

// A catalog entry with example prompts: its candidate names the closest example and its similarity, and the score
// adds it (example_weight, default 1) to the positive's; entries without examples answer without those fields (and
// count their positive twice).
func TestLoRASearchExamples(t *testing.T) {
	ts := startLoRA(t, Config{LoRACatalog: writeCatalog(t, `{"negative_weight": 0.5, "threshold": 0.3, "loras": [
  {"name": "fantasy", "path": "f.safetensors", "scale": 0.8, "positive": "knight castle dragon wizard armour",
   "examples": ["a paladin at the gate", "jousting horses at a tournament"]},
  {"name": "watercolor", "path": "w.safetensors", "scale": 0.7, "positive": "watercolour paper washes pigment"}]}`)})
	code, b := ts.search(t, `{"prompt": "jousting horses at a tournament"}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var got api.LoRASearchResponse
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	c := got.Candidates[0]
	if got.Selected == nil || got.Selected.Name != "fantasy" || c.Name != "fantasy" || c.Example == nil || *c.Example != 1 ||
		c.ExampleSimilarity == nil || math.Abs(c.Score-(c.PositiveSimilarity+*c.ExampleSimilarity)) > 1e-6 {
		t.Fatalf("the example's match: %s", b)
	}
	if w := got.Candidates[1]; w.Name != "watercolor" || w.Example != nil || w.ExampleSimilarity != nil ||
		math.Abs(w.Score-2*w.PositiveSimilarity) > 1e-6 || strings.Count(string(b), `"example"`) != 1 {
		t.Fatalf("an entry without examples: %s", b)
	}
}

func (ts *testServer) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(ts.http.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestLoRABadRequests(t *testing.T) {
	ts := startLoRA(t, Config{MaxBodyBytes: 32 << 10})
	tests := []struct{ name, body, code, message string }{
		{"malformed JSON", `{"prompt": "x"`, "invalid_argument", "malformed JSON"},
		{"not an object", `["x"]`, "invalid_argument", "expected an object, got an array"},
		{"trailing data", `{"prompt": "x"} {}`, "invalid_argument", "trailing data"},
		{"unknown field", `{"prompt": "x", "temperature": 1}`, "invalid_argument", "unknown field"},
		{"missing prompt", `{"top_k": 3}`, "invalid_argument", "prompt: empty"},
		{"empty prompt", `{"prompt": ""}`, "invalid_argument", "prompt: empty"},
		{"blank prompt", `{"prompt": " \n\t"}`, "invalid_argument", "prompt: empty"},
		{"null prompt", `{"prompt": null}`, "invalid_argument", "prompt: expected a string, got null"},
		{"prompt as number", `{"prompt": 5}`, "invalid_argument", "prompt: expected a string, got a number"},
		{"NUL in prompt", `{"prompt": "a\u0000b"}`, "invalid_argument", "NUL"},
		{"huge prompt", `{"prompt": "` + strings.Repeat("x", lora.MaxPromptBytes+1) + `"}`, "invalid_argument", "prompt: a string longer than 16384 bytes"},
		{"top_k 0", `{"prompt": "x", "top_k": 0}`, "invalid_argument", "top_k"},
		{"negative top_k", `{"prompt": "x", "top_k": -3}`, "invalid_argument", "top_k"},
		{"huge top_k", `{"prompt": "x", "top_k": 1000000}`, "invalid_argument", "top_k: must lie in [1, 100]"},
		{"overflowing top_k", `{"prompt": "x", "top_k": 1e30}`, "invalid_argument", "top_k: expected an integer, got 1e30"},
		{"fractional top_k", `{"prompt": "x", "top_k": 1.5}`, "invalid_argument", "top_k: expected an integer, got 1.5"},
		{"top_k as string", `{"prompt": "x", "top_k": "3"}`, "invalid_argument", "top_k: expected a number, got a string"},
		{"nested junk", `{"prompt": "x", "top_k": [[[[[[[[[[1]]]]]]]]]]}`, "invalid_argument", "top_k: expected a number, got an array"},
		// The body limit: 40 KB of whitespace before a short prompt.
		{"oversized body", `{"prompt": "y"` + strings.Repeat(" ", 40<<10) + `}`, "body_too_large", "exceeds 32768 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.search(t, tc.body)
			want := http.StatusBadRequest
			if tc.code == "body_too_large" {
				want = http.StatusRequestEntityTooLarge
			}
			if code != want {
				t.Fatalf("status %d, want %d: %s", code, want, b)
			}
			var e api.ErrorResponse
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatalf("error body is not JSON: %s", b)
			}
			if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.message) {
				t.Fatalf("error %+v, want code %s containing %q", e.Error, tc.code, tc.message)
			}
		})
	}
	if n := ts.metrics.count("lora_search", "invalid_argument"); n != uint64(len(tests)-1) {
		t.Fatalf("counted %d invalid_argument", n)
	}
}

func TestLoRANotConfigured(t *testing.T) {
	ts := start(t, Config{})
	code, b := ts.search(t, `{"prompt": "a knight"}`)
	if code != 404 || !strings.Contains(string(b), `"code":"not_found"`) || !strings.Contains(string(b), "-lora-catalog") {
		t.Fatalf("%d %s", code, b)
	}
	_, metrics := ts.get(t, "/metrics")
	if !strings.Contains(metrics, "cutenative_lora_catalog_entries 0") {
		t.Fatalf("metrics:\n%s", metrics)
	}
}

func TestLoRAConfiguration(t *testing.T) {
	models := map[string]string{"default": defaultModelDir}
	catalog := writeCatalog(t, testCatalog)
	if _, err := New(Config{Models: models, LoRACatalog: catalog}); err == nil || !strings.Contains(err.Error(), "needs a sentence-embedding model") {
		t.Fatalf("catalog without a model: %v", err)
	}
	// An embedding model without a catalog serves /v1/embeddings only (TestEmbeddingsWithoutCatalog).
	if _, err := New(Config{Models: models, EmbedModel: "/some/dir"}); err != nil {
		t.Fatalf("model without a catalog: %v", err)
	}
	load := func(cfg Config) error {
		cfg.Models = models
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		return s.Load()
	}
	if err := load(Config{LoRACatalog: writeCatalog(t, `{"loras": []}`), Embedder: wordEmbedder{dim: 8}}); !errors.Is(err, lora.ErrInvalidCatalog) {
		t.Fatalf("invalid catalog: %v", err)
	}
	if err := load(Config{LoRACatalog: catalog, EmbedModel: defaultModelDir}); err == nil || !strings.Contains(err.Error(), "not a sentence-embedding model") {
		t.Fatalf("a forecaster as the embedding model: %v", err)
	}
	if err := load(Config{LoRACatalog: catalog, EmbedModel: t.TempDir()}); err == nil {
		t.Fatal("an empty directory as the embedding model loaded")
	}
}

func TestLoRAAuth(t *testing.T) {
	ts := startLoRA(t, Config{APIKeys: []string{"secret"}})
	if code, _ := ts.search(t, `{"prompt": "knight"}`); code != 401 {
		t.Fatalf("no key: %d", code)
	}
	if code, b := ts.search(t, `{"prompt": "knight"}`, "Authorization", "Bearer secret"); code != 200 {
		t.Fatalf("with key: %d %s", code, b)
	}
}

// Catalog reloads while HTTP searches run: every request answers 200 from one whole catalog.
func TestLoRAReloadWhileServing(t *testing.T) {
	path := writeCatalog(t, testCatalog)
	ts := startLoRA(t, Config{LoRACatalog: path})
	other := strings.ReplaceAll(strings.ReplaceAll(testCatalog, `"fantasy"`, `"medieval"`), `"cyberpunk"`, `"neon"`)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, b := ts.search(t, `{"prompt": "a knight at the castle", "top_k": 3}`)
				var got api.LoRASearchResponse
				if code != 200 || json.Unmarshal(b, &got) != nil || got.Selected == nil {
					errs <- fmt.Sprintf("%d %s", code, b)
					return
				}
				if n := got.Selected.Name; n != "fantasy" && n != "medieval" {
					errs <- string(b)
					return
				}
			}
		}()
	}
	reg := ts.LoRAs()
	for i := 0; i < 10; i++ {
		content := testCatalog
		if i%2 == 0 {
			content = other
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := reg.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := reg.Reload(context.Background()); err == nil {
		t.Fatal("a broken catalog loaded")
	}
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	_, metrics := ts.get(t, "/metrics")
	if !strings.Contains(metrics, `cutenative_lora_catalog_loads_total{outcome="error"} 1`) ||
		!strings.Contains(metrics, `cutenative_lora_catalog_loads_total{outcome="ok"} 11`) {
		t.Fatalf("metrics:\n%s", metrics)
	}
}

// The same OpenAPI check as TestOpenAPIMatchesRoutes, with LoRA search on: a valid search answers a
// documented status.
func TestLoRAOpenAPIStatuses(t *testing.T) {
	ts := startLoRA(t, Config{})
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]any `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	op := doc.Paths["/v1/loras/search"]["post"]
	for _, body := range []string{`{"prompt": "knight"}`, `{"prompt": ""}`} {
		code, _ := ts.search(t, body)
		if _, ok := op.Responses[fmt.Sprint(code)]; !ok {
			t.Fatalf("%s answered %d, not documented", body, code)
		}
	}
}

// ---- the real all-MiniLM-L6-v2 weights ----

// The server with the real embedding model and the shipped catalog, end to end over HTTP.
func TestLoRASearchMiniLM(t *testing.T) {
	dir := testenv.MiniLMDir(t)
	ts := start(t, Config{EmbedModel: dir, LoRACatalog: filepath.Join("..", "lora", "catalogs", "default.json")})
	code, b := ts.search(t, `{"prompt": "a knight in shining armour", "top_k": 3}`)
	var got api.LoRASearchResponse
	if code != 200 || json.Unmarshal(b, &got) != nil {
		t.Fatalf("%d %s", code, b)
	}
	if got.Selected == nil || got.Selected.Name != "fantasy" || len(got.Candidates) != 3 {
		t.Fatalf("knight: %s", b)
	}
	// The same numbers as the library and the router called directly.
	m, err := cutenative.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	reg, err := lora.NewRegistry(context.Background(), filepath.Join("..", "lora", "catalogs", "default.json"), m, nil)
	if err != nil {
		t.Fatal(err)
	}
	direct, err := reg.Search(context.Background(), "a knight in shining armour", 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range direct.Candidates {
		g := got.Candidates[i]
		if g.Name != c.Name || g.Score != c.Score || g.PositiveSimilarity != c.PositiveSimilarity || g.NegativeSimilarity != c.NegativeSimilarity {
			t.Fatalf("candidate %d: server %+v, direct %+v", i, g, c)
		}
	}
	for _, prompt := range []string{"make it bigger", "what is the capital of France?"} {
		code, b := ts.search(t, fmt.Sprintf(`{"prompt": %q}`, prompt))
		if code != 200 || !strings.Contains(string(b), `"selected":null`) {
			t.Fatalf("%q: %d %s", prompt, code, b)
		}
	}
}

// gatedEmbedder embeds like wordEmbedder until armed; then each call waits for release (or its context).
type gatedEmbedder struct {
	wordEmbedder
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if g.armed.Load() {
		g.entered <- struct{}{}
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.wordEmbedder.Embed(ctx, texts)
}

func TestLoRAQueueFullAndTimeout(t *testing.T) {
	g := &gatedEmbedder{wordEmbedder: wordEmbedder{dim: 64}, entered: make(chan struct{}, 64), release: make(chan struct{})}
	ts := startLoRA(t, Config{Embedder: g, QueueSize: 1, Timeout: 5 * time.Second})
	g.armed.Store(true)
	// Searches embed through the embedding model's short lane: one call runs, QueueSize wait, then 429.
	admitted := 2
	results := make(chan int, admitted)
	search := func() { c, _ := ts.search(t, `{"prompt": "knight"}`); results <- c }
	go search()
	<-g.entered // the lane's call runs
	go search() // the second waits (the queue holds 1)
	lane := ts.models["embedding"].short
	waitUntil(t, "the second search queued", func() bool { return lane.len() == 1 })
	code, b := ts.search(t, `{"prompt": "knight"}`)
	if code != 429 || !strings.Contains(string(b), "overloaded") {
		t.Fatalf("over the limit: %d %s", code, b)
	}
	close(g.release)
	for i := 0; i < admitted; i++ {
		if c := <-results; c != 200 {
			t.Fatalf("admitted search answered %d", c)
		}
	}

	g2 := &gatedEmbedder{wordEmbedder: wordEmbedder{dim: 64}, entered: make(chan struct{}, 64), release: make(chan struct{})}
	slow := startLoRA(t, Config{Embedder: g2, Timeout: 50 * time.Millisecond})
	g2.armed.Store(true)
	if code, b := slow.search(t, `{"prompt": "knight"}`); code != 504 || !strings.Contains(string(b), "deadline_exceeded") {
		t.Fatalf("timeout: %d %s", code, b)
	}
}

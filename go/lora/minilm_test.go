//go:build cgo

package lora

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

// openMiniLM opens the real model, or skips (fails when CN_REQUIRE_MINILM=1) when it is missing.
func openMiniLM(t testing.TB) *cutenative.Model {
	t.Helper()
	dir := testenv.MiniLMDir(t)
	m, err := cutenative.Open(dir, nil)
	if err != nil {
		t.Fatalf("opening %s: %v", dir, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func defaultRouter(t testing.TB, emb Embedder) *Router {
	t.Helper()
	cat, err := LoadCatalog(filepath.Join("catalogs", "default.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRouter(context.Background(), cat, emb)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The real model satisfies Embedder and routes clear prompts as a person would.
func TestMiniLMRoutesClearPrompts(t *testing.T) {
	var _ Embedder = (*cutenative.Model)(nil)
	r := defaultRouter(t, openMiniLM(t))
	if r.Dim() != 384 || r.Len() != 14 {
		t.Fatalf("dim %d, entries %d", r.Dim(), r.Len())
	}
	tests := []struct{ prompt, want string }{
		{"a knight in shining armour", "fantasy"},
		{"a wizard casting a spell in an enchanted forest", "fantasy"},
		{"neon-lit rainy megacity street at night with flying cars", "cyberpunk"},
		{"what is the capital of France?", ""},
		{"make it bigger", ""},
		{"translate this paragraph into German", ""},
	}
	for _, tc := range tests {
		t.Run(tc.prompt, func(t *testing.T) {
			res, err := r.Search(context.Background(), tc.prompt, 3)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if res.Selected != nil {
				got = res.Selected.Name
			}
			if got != tc.want {
				t.Fatalf("selected %q, want %q; candidates %+v", got, tc.want, res.Candidates)
			}
		})
	}
}

// The whole pipeline (library embeddings + router + the shipped catalog's tuned parameters) reproduces
// the dev-split accuracy documented in docs/lora_routing.md (catalog v3, with example prompts: 84.4%, 119/141), up to a margin
// for floating-point differences between machines.
func TestMiniLMDevAccuracy(t *testing.T) {
	r := defaultRouter(t, openMiniLM(t))
	var dev []labelledPrompt
	for _, p := range readPrompts(t) {
		if p.Split == "dev" {
			dev = append(dev, p)
		}
	}
	texts := make([]string, len(dev))
	for i, p := range dev {
		texts[i] = p.Prompt
	}
	vecs, err := r.emb.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	correct := 0
	for i, p := range dev {
		res, err := r.SearchEmbedding(vecs[i], 1)
		if err != nil {
			t.Fatal(err)
		}
		got := "none"
		if res.Selected != nil {
			got = res.Selected.Name
		}
		if got == p.Label {
			correct++
		}
	}
	t.Logf("dev top-1: %d/%d", correct, len(dev))
	if correct < 116 {
		t.Fatalf("dev top-1 %d/%d, documented 119/141", correct, len(dev))
	}
}

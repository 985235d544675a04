package lora

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

func smallCatalog(w, threshold float64) *Catalog {
	return &Catalog{NegativeWeight: w, Threshold: threshold, Entries: []Entry{
		{Name: "castle", Path: "c.safetensors", Scale: 0.7, Positive: "knight castle dragon sword armour",
			Negative: "robot spaceship laser"},
		{Name: "robot", Path: "r.safetensors", Scale: 0.9, Positive: "robot spaceship laser neon city",
			Negative: "castle dragon"},
		{Name: "apple", Path: "a.safetensors", Scale: 1, Positive: "apple pear fruit bowl"},
	}}
}

func mustRouter(t testing.TB, c *Catalog, e Embedder) *Router {
	t.Helper()
	r, err := NewRouter(context.Background(), c, e)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Scores are cos(q, pos) - w*cos(q, neg): the one-pass combined form equals the two-product form.
func TestScoreIsPositiveMinusWeightedNegative(t *testing.T) {
	emb := &hashEmbedder{dim: 64}
	prompts := []string{"a knight with a sword", "laser robot in a neon city", "a bowl of fruit",
		"dragon attacks the spaceship", "nothing in common here", "castle castle castle robot"}
	for _, w := range []float64{0, 0.3, 0.5, 1, 2.5} {
		r := mustRouter(t, smallCatalog(w, 0), emb)
		for _, p := range prompts {
			res, err := r.Search(context.Background(), p, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Candidates) != 3 {
				t.Fatalf("%d candidates", len(res.Candidates))
			}
			q := emb.vec(p)
			for _, c := range res.Candidates {
				var e Entry
				for _, x := range r.Catalog().Entries {
					if x.Name == c.Name {
						e = x
					}
				}
				pos := cos64(q, emb.vec(e.Positive))
				neg := 0.0
				if e.Negative != "" {
					neg = cos64(q, emb.vec(e.Negative))
				}
				if math.Abs(c.PositiveSimilarity-pos) > 1e-6 || math.Abs(c.NegativeSimilarity-neg) > 1e-6 {
					t.Fatalf("w=%v %q %s: similarities %v %v, want %v %v", w, p, c.Name, c.PositiveSimilarity, c.NegativeSimilarity, pos, neg)
				}
				if d := math.Abs(c.Score - (c.PositiveSimilarity - w*c.NegativeSimilarity)); d > 1e-6 {
					t.Fatalf("w=%v %q %s: combined %v vs two-product %v (diff %g)", w, p, c.Name, c.Score,
						c.PositiveSimilarity-w*c.NegativeSimilarity, d)
				}
			}
			for i := 1; i < len(res.Candidates); i++ {
				a, b := res.Candidates[i-1], res.Candidates[i]
				if a.Score < b.Score || (a.Score == b.Score && a.Name > b.Name) {
					t.Fatalf("order: %+v", res.Candidates)
				}
			}
		}
	}
}

func TestNegativeDescriptionPushesAway(t *testing.T) {
	emb := &hashEmbedder{dim: 256}
	cat := &Catalog{Threshold: -10, Entries: []Entry{
		{Name: "a", Path: "p", Scale: 1, Positive: "castle dragon knight robot", Negative: "robot laser"},
		{Name: "b", Path: "p", Scale: 1, Positive: "castle dragon sword"},
	}}
	// "a" shares more words with the prompt, but its negative description names the prompt's robot.
	for _, tc := range []struct {
		w    float64
		want string
	}{{0, "a"}, {1, "b"}} {
		cat.NegativeWeight = tc.w
		res, err := mustRouter(t, cat, emb).Search(context.Background(), "castle dragon robot", 2)
		if err != nil {
			t.Fatal(err)
		}
		if res.Selected.Name != tc.want {
			t.Fatalf("w=%v: %+v", tc.w, res)
		}
	}
}

func TestThresholdAndNoLoRA(t *testing.T) {
	emb := &hashEmbedder{dim: 64}
	probe := mustRouter(t, smallCatalog(0.5, 0), emb)
	res, err := probe.Search(context.Background(), "a knight with a sword", 1)
	if err != nil {
		t.Fatal(err)
	}
	top := res.Candidates[0].Score
	tests := []struct {
		name      string
		threshold float64
		selected  string
	}{
		{"below the top score", top - 1e-9, "castle"},
		{"equal to the top score", top, "castle"},
		{"above the top score", top + 1e-9, ""},
		{"unreachable", 2, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRouter(t, smallCatalog(0.5, tc.threshold), emb)
			res, err := r.Search(context.Background(), "a knight with a sword", 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Candidates) != 2 || res.Candidates[0].Name != "castle" {
				t.Fatalf("candidates are listed whatever the threshold: %+v", res.Candidates)
			}
			switch {
			case tc.selected == "" && res.Selected != nil:
				t.Fatalf("selected %+v", res.Selected)
			case tc.selected != "" && (res.Selected == nil || res.Selected.Name != tc.selected):
				t.Fatalf("selected %+v, want %s", res.Selected, tc.selected)
			case res.Selected != nil && (res.Selected.Path != "c.safetensors" || res.Selected.Scale != 0.7 || res.Selected.Score != top):
				t.Fatalf("match %+v", res.Selected)
			}
		})
	}
	// An unrelated prompt selects nothing at a sensible threshold.
	res, err = mustRouter(t, smallCatalog(0.5, 0.3), emb).Search(context.Background(), "what is the time", 3)
	if err != nil || res.Selected != nil {
		t.Fatalf("unrelated prompt: %+v %v", res, err)
	}
}

func TestSearchRejectsBadQueries(t *testing.T) {
	emb := &hashEmbedder{dim: 32}
	r := mustRouter(t, smallCatalog(0.5, 0.2), emb)
	calls := emb.calls.Load()
	tests := []struct {
		name, prompt string
		k            int
		want         string
	}{
		{"empty prompt", "", 3, "prompt: empty"},
		{"blank prompt", " \t\n", 3, "prompt: empty"},
		{"NUL", "a\x00b", 3, "NUL"},
		{"invalid UTF-8", "caf\xe9", 3, "UTF-8"},
		{"huge prompt", strings.Repeat("x", MaxPromptBytes+1), 3, "exceed the limit"},
		{"top_k 0", "knight", 0, "top_k"},
		{"negative top_k", "knight", -1, "top_k"},
		{"top_k above the limit", "knight", MaxTopK + 1, "top_k"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Search(context.Background(), tc.prompt, tc.k)
			if !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrInvalidQuery mentioning %q", err, tc.want)
			}
		})
	}
	if emb.calls.Load() != calls {
		t.Fatal("invalid queries reached the embedder")
	}
	// top_k beyond the catalog size gives every entry; MaxTopK itself is allowed.
	res, err := r.Search(context.Background(), "knight", MaxTopK)
	if err != nil || len(res.Candidates) != 3 {
		t.Fatalf("top_k=%d: %v %v", MaxTopK, res, err)
	}
	for _, q := range [][]float32{make([]float32, 32), make([]float32, 31), {float32(math.NaN())}} {
		if _, err := r.SearchEmbedding(q, 1); !errors.Is(err, ErrInvalidQuery) {
			t.Fatalf("vector %v: %v", q, err)
		}
	}
}

func TestEmbedderFailures(t *testing.T) {
	ctx := context.Background()
	cat := smallCatalog(0.5, 0.2)
	good := &hashEmbedder{dim: 8}
	tests := []struct {
		name string
		emb  Embedder
		is   error
	}{
		{"error", funcEmbedder(func(context.Context, []string) ([][]float32, error) { return nil, errFake }), errFake},
		{"too few vectors", funcEmbedder(func(ctx context.Context, t []string) ([][]float32, error) {
			v, _ := good.Embed(ctx, t)
			return v[1:], nil
		}), ErrEmbedding},
		{"ragged dimensions", funcEmbedder(func(ctx context.Context, t []string) ([][]float32, error) {
			v, _ := good.Embed(ctx, t)
			v[1] = v[1][:7]
			return v, nil
		}), ErrEmbedding},
		{"NaN", funcEmbedder(func(ctx context.Context, t []string) ([][]float32, error) {
			v, _ := good.Embed(ctx, t)
			v[2][0] = float32(math.NaN())
			return v, nil
		}), ErrEmbedding},
		{"zero vector", funcEmbedder(func(ctx context.Context, t []string) ([][]float32, error) {
			v, _ := good.Embed(ctx, t)
			v[0] = make([]float32, 8)
			return v, nil
		}), ErrEmbedding},
		{"empty vectors", funcEmbedder(func(_ context.Context, t []string) ([][]float32, error) {
			return make([][]float32, len(t)), nil
		}), ErrEmbedding},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRouter(ctx, cat, tc.emb); !errors.Is(err, tc.is) {
				t.Fatalf("NewRouter: %v, want %v", err, tc.is)
			}
		})
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := NewRouter(cancelled, cat, good); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if _, err := NewRouter(ctx, nil, good); !errors.Is(err, ErrInvalidCatalog) {
		t.Fatalf("nil catalog: %v", err)
	}
	// A query whose embedding fails or has another dimension.
	fail := false
	flaky := funcEmbedder(func(ctx context.Context, t []string) ([][]float32, error) {
		if fail {
			return [][]float32{make([]float32, 9)}, nil
		}
		return good.Embed(ctx, t)
	})
	r := mustRouter(t, cat, flaky)
	fail = true
	if _, err := r.Search(ctx, "knight", 1); !errors.Is(err, ErrEmbedding) {
		t.Fatalf("query dimension: %v", err)
	}
}

// A large synthetic catalog: the int8 screening path returns exactly what scoring every entry does,
// ties included (duplicated descriptions under other names).
func TestScreenedEqualsExact(t *testing.T) {
	for _, dim := range []int{384, 100} {
		t.Run(fmt.Sprint("dim=", dim), func(t *testing.T) {
			emb := gaussEmbedder{dim: dim}
			cat := &Catalog{NegativeWeight: 0.7, Threshold: 0.1}
			for i := 0; i < 3000; i++ {
				e := Entry{Name: fmt.Sprintf("e%05d", i), Path: "p", Scale: 1, Positive: fmt.Sprint("pos ", i%2900)}
				if i%3 != 0 {
					e.Negative = fmt.Sprint("neg ", i%1000)
				}
				cat.Entries = append(cat.Entries, e)
			}
			r := mustRouter(t, cat, emb)
			if r.q8 == nil {
				t.Fatal("no screening matrix")
			}
			rng := rand.New(rand.NewSource(1))
			for it := 0; it < 90; it++ {
				var q []float32
				switch it % 3 {
				case 0: // a random direction
					q = emb.vec(fmt.Sprint("query ", it))
				case 1: // close to one entry (and its duplicates)
					q = emb.vec(fmt.Sprint("pos ", rng.Intn(2900)))
					noise := emb.vec(fmt.Sprint("noise ", it))
					for j := range q {
						q[j] += 0.3 * noise[j]
					}
				default: // exactly an entry's description
					q = emb.vec(fmt.Sprint("pos ", rng.Intn(100)))
				}
				u, err := unit(q, dim)
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range []int{1, 5, 100} {
					got, want := r.searchScreened(u, k), r.searchExact(u, k)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("query %d k=%d:\nscreened %v\nexact    %v", it, k, got, want)
					}
				}
			}
		})
	}
}

func TestScreenedAllTied(t *testing.T) {
	cat := &Catalog{Threshold: 0}
	for i := 0; i < 600; i++ {
		cat.Entries = append(cat.Entries, Entry{Name: fmt.Sprintf("n%03d", 599-i), Path: "p", Scale: 1, Positive: "same"})
	}
	r := mustRouter(t, cat, gaussEmbedder{dim: 48})
	res, err := r.Search(context.Background(), "same", 4)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range res.Candidates {
		names = append(names, c.Name)
	}
	if strings.Join(names, ",") != "n000,n001,n002,n003" || res.Selected.Name != "n000" {
		t.Fatalf("ties: %v %+v", names, res.Selected)
	}
}

func TestKernelMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernel on this machine")
	}
	rng := rand.New(rand.NewSource(3))
	for _, stride := range []int{32, 64, 384, 416} {
		rows := 37
		m := make([]int8, rows*stride)
		q := make([]int16, stride)
		for i := range m {
			m[i] = int8(rng.Intn(255) - 127)
		}
		for i := range q {
			q[i] = int16(rng.Intn(65535) - 32767)
		}
		m[0], q[0], m[1], q[1] = 127, 32767, -127, -32767 // the extremes
		got, want := make([]int32, rows), make([]int32, rows)
		screenDots(m, q, got, stride)
		dotRowsI8Go(m, q, want, stride)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("stride %d: AVX2 %v, Go %v", stride, got, want)
		}
	}
}

// dot64's assembly and Go versions give the same bits (and match a float64 reference closely).
func TestDot64(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for _, n := range []int{0, 1, 15, 16, 17, 100, 384, 1000} {
		a, b := make([]float32, n), make([]float32, n)
		var ref float64
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*1e3)
			ref += float64(a[i]) * float64(b[i])
		}
		got := dot64(a, b)
		n16 := n &^ 15
		want := dot64Lanes(a[:n16], b[:n16])
		for j := n16; j < n; j++ {
			want += float64(a[j]) * float64(b[j])
		}
		if got != want {
			t.Fatalf("n=%d: dot64 %v, lanes %v", n, got, want)
		}
		if math.Abs(got-ref) > 1e-9*(1+math.Abs(ref)) {
			t.Fatalf("n=%d: %v vs reference %v", n, got, ref)
		}
	}
}

// Example prompts: an entry scores cos(positive) + lambda * its closest example's cos - w * cos(negative), and the
// candidate says which example was closest; an entry without examples counts its positive as its example (Example
// -1).
func TestExamplesAddTheClosestExample(t *testing.T) {
	emb := &hashEmbedder{dim: 256}
	cat := smallCatalog(0.5, 0.3)
	cat.ExampleWeight = 0.7
	cat.Entries[0].Examples = []string{"a paladin guards the gate", "medieval tournament jousting horses"}
	r := mustRouter(t, cat, emb)
	tests := []struct {
		prompt      string
		wantTop     string
		wantExample int // of the castle candidate
	}{
		{"jousting horses at a medieval tournament", "castle", 1},
		{"a paladin at the gate", "castle", 0},
		{"a bowl of fruit", "apple", -2}, // castle's best example is whichever is closer: only checked for consistency
	}
	for _, tc := range tests {
		t.Run(tc.prompt, func(t *testing.T) {
			res, err := r.Search(context.Background(), tc.prompt, 3)
			if err != nil {
				t.Fatal(err)
			}
			if res.Candidates[0].Name != tc.wantTop {
				t.Fatalf("top %s, want %s: %+v", res.Candidates[0].Name, tc.wantTop, res.Candidates)
			}
			q := emb.vec(tc.prompt)
			for _, c := range res.Candidates {
				var e Entry
				for _, x := range cat.Entries {
					if x.Name == c.Name {
						e = x
					}
				}
				best, bestSim := -1, 0.0
				for k, x := range e.Examples {
					if s := cos64(q, emb.vec(x)); best < 0 || s > bestSim {
						best, bestSim = k, s
					}
				}
				if c.Example != best || math.Abs(c.ExampleSimilarity-bestSim) > 1e-6 {
					t.Fatalf("%s: example %d (%v), want %d (%v)", c.Name, c.Example, c.ExampleSimilarity, best, bestSim)
				}
				ex := c.PositiveSimilarity
				if best >= 0 {
					ex = c.ExampleSimilarity
				}
				want := c.PositiveSimilarity + 0.7*ex - 0.5*c.NegativeSimilarity
				if d := math.Abs(c.Score - want); d > 1e-6 {
					t.Fatalf("%s: score %v, want positive + lambda*example - w*negative = %v", c.Name, c.Score, want)
				}
				if c.Name == "castle" && tc.wantExample >= 0 && c.Example != tc.wantExample {
					t.Fatalf("castle's closest example %d, want %d", c.Example, tc.wantExample)
				}
			}
		})
	}
}

// A large catalog with examples is scored exactly (no screening): the ranking equals a brute-force one.
func TestExamplesInALargeCatalog(t *testing.T) {
	emb := gaussEmbedder{dim: 64}
	cat := &Catalog{NegativeWeight: 0.4, ExampleWeight: 1.3, Threshold: 0.1}
	for i := 0; i < 400; i++ {
		e := Entry{Name: fmt.Sprintf("e%03d", i), Path: "p", Scale: 1, Positive: fmt.Sprint("pos ", i)}
		if i%2 == 0 {
			e.Negative = fmt.Sprint("neg ", i)
		}
		for k := 0; k < i%4; k++ {
			e.Examples = append(e.Examples, fmt.Sprintf("ex %d %d", i, k))
		}
		cat.Entries = append(cat.Entries, e)
	}
	r := mustRouter(t, cat, emb)
	if r.q8 != nil {
		t.Fatal("a catalog with examples was screened")
	}
	for it := 0; it < 20; it++ {
		q := emb.vec(fmt.Sprintf("ex %d %d", 4*it+3, it%3))
		res, err := r.SearchEmbedding(q, 5)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := unit(q, 64)
		type ranked struct {
			name  string
			score float64
		}
		var all []ranked
		for _, e := range cat.Entries {
			p, _ := unit(emb.vec(e.Positive), 64)
			ex := dot64(p, u) // an entry without examples counts its positive as its example
			for k, text := range e.Examples {
				v, _ := unit(emb.vec(text), 64)
				if s := dot64(v, u); k == 0 || s > ex {
					ex = s
				}
			}
			s := dot64(p, u) + 1.3*ex
			if e.Negative != "" {
				n, _ := unit(emb.vec(e.Negative), 64)
				s -= 0.4 * dot64(n, u)
			}
			all = append(all, ranked{e.Name, s})
		}
		for k := 0; k < 5; k++ { // the k-th best by brute force (ties by name)
			bi := -1
			for i := range all {
				if bi < 0 || all[i].score > all[bi].score || (all[i].score == all[bi].score && all[i].name < all[bi].name) {
					bi = i
				}
			}
			if res.Candidates[k].Name != all[bi].name || math.Abs(res.Candidates[k].Score-all[bi].score) > 1e-5 {
				t.Fatalf("query %d rank %d: %s %v, want %s %v", it, k, res.Candidates[k].Name, res.Candidates[k].Score, all[bi].name, all[bi].score)
			}
			all = append(all[:bi], all[bi+1:]...)
		}
	}
}

package lora

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Embedder turns texts into embeddings, one vector per text, all of one dimension. *cutenative.Model
// (a sentence-embedding model) satisfies it. The router normalises every vector itself.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

const (
	// MaxTopK bounds Search's topK.
	MaxTopK = 100
	// DefaultTopK is what the server uses when a request names no top_k.
	DefaultTopK = 5
	// MaxPromptBytes bounds a prompt (the embedding model reads a few hundred tokens at most anyway).
	MaxPromptBytes = 16 << 10

	embedBatch       = 64      // texts per Embed call while a catalog is embedded
	maxDim           = 1 << 16 // embedding dimensions accepted
	quantStride      = 32      // int8 rows are padded to a multiple of this (the kernel's step)
	screenMinEntries = 256     // below: every entry is scored exactly; above: int8 screening first
	parallelMinBytes = 1 << 20 // screening splits across goroutines above this matrix size
	parallelChunk    = 512 << 10
	boundSlack       = 1e-7 // added to the screening bound (float rounding of the exact scores)
)

// Match is the selected LoRA.
type Match struct {
	Name  string
	Score float64
	Path  string  // from the catalog (the server does not expose it)
	Scale float64 // from the catalog
}

// Candidate is one of the top-k entries.
type Candidate struct {
	Name               string
	Score              float64 // PositiveSimilarity - NegativeWeight*NegativeSimilarity (examples: see Example)
	PositiveSimilarity float64 // cosine similarity of the prompt and the positive description
	NegativeSimilarity float64 // ... and the negative description (0 when the entry has none)
	// Example is the index of the entry's example prompt closest to the prompt, -1 when it has none;
	// ExampleSimilarity is that cosine similarity (0 without examples). In a catalog with examples the score is
	// PositiveSimilarity + lambda*ExampleSimilarity - w*NegativeSimilarity (lambda: Catalog.ExampleWeight; an
	// entry without examples counts PositiveSimilarity as its example's).
	Example           int
	ExampleSimilarity float64
}

// Result of a search: Selected is nil when the best score is below the threshold ("no LoRA").
type Result struct {
	Selected   *Match
	Candidates []Candidate // best first: by score, ties by name
}

// Router scores prompts against a catalog whose descriptions were embedded once, at construction. It is
// immutable and safe for concurrent use.
//
// With unit vectors q (prompt), p_i (positive), n_i (negative) and weight w,
// cos(q, p_i) - w*cos(q, n_i) = c_i . q with c_i = p_i - w*n_i, so one pass over the precomputed
// rows c_i (a flat []float32) scores every entry. Catalogs of screenMinEntries or more first screen
// with an int8 copy of the c_i (a quarter of the memory traffic; AVX2 on amd64) and an error bound,
// then score exactly only the entries whose bound reaches the k-th best: the result is the same as
// scoring every entry exactly (see searchScreened). Exact scores are float64 sums of the float32
// products. In a catalog with example prompts x_ik an entry scores cos(q, p_i) + lambda*max_k cos(q, x_ik) -
// w*cos(q, n_i) = max_k (p_i + lambda*x_ik - w*n_i) . q (an entry without examples: ((1 + lambda) p_i - w*n_i) .
// q); such catalogs are scored exactly (no screening).
type Router struct {
	cat      *Catalog
	emb      Embedder
	names    []string
	n, dim   int
	pos, neg []float32 // n*dim unit rows; a row of zeros where an entry has no negative
	comb     []float32 // n*dim rows c_i = p_i - w*n_i
	hasNeg   []bool
	// example prompts (catalogs with examples): unit rows x_k and p_i + lambda*x_k - w*n_i of entry i's examples
	// at exStart[i] .. exStart[i+1]-1; comb_i is then (1 + lambda)*p_i - w*n_i (an entry without examples)
	exVec, exComb []float32
	exStart       []int

	// screening (n >= screenMinEntries)
	stride  int       // dim rounded up to quantStride
	qLevels float64   // the query is quantised to integers in [-qLevels, qLevels] (int16)
	q8      []int8    // n*stride: round(c_i / s), zero padded
	s       float64   // one scale for every row: max_ij |c_ij| / 127 (so the int8 dots rank like a_i)
	eMax    float64   // max_i |c_i - s*round(c_i/s)|_2, the largest quantisation error (rounded up)
	cMax    float64   // max_i |c_i|_2 (rounded up)
	scratch sync.Pool // *screenScratch

	attachment any // set by a Registry before the router is published (NewRegistryWith)
}

// NewRouter embeds the catalog's positive and negative descriptions (in batches, checking ctx between
// them) and precomputes the combined rows. The catalog must not be modified afterwards.
func NewRouter(ctx context.Context, cat *Catalog, emb Embedder) (*Router, error) {
	if cat == nil {
		return nil, invalid("no catalog")
	}
	if emb == nil {
		return nil, errors.New("lora: no embedder")
	}
	if err := cat.Validate(); err != nil {
		return nil, err
	}
	n := len(cat.Entries)
	texts := make([]string, 0, 2*n)
	negAt := make([]int, n)
	for i, e := range cat.Entries {
		texts = append(texts, e.Positive)
		negAt[i] = -1
	}
	for i, e := range cat.Entries {
		if e.Negative != "" {
			negAt[i] = len(texts)
			texts = append(texts, e.Negative)
		}
	}
	exAt := len(texts) // every entry's examples, in entry order
	for _, e := range cat.Entries {
		texts = append(texts, e.Examples...)
	}
	vecs, dim, err := embedAll(ctx, emb, texts)
	if err != nil {
		return nil, err
	}
	r := &Router{cat: cat, emb: emb, n: n, dim: dim,
		names: make([]string, n), hasNeg: make([]bool, n),
		pos: make([]float32, n*dim), neg: make([]float32, n*dim), comb: make([]float32, n*dim)}
	w32 := float32(cat.NegativeWeight)
	for i, e := range cat.Entries {
		r.names[i] = e.Name
		p := r.pos[i*dim : (i+1)*dim]
		copy(p, vecs[i])
		nv := r.neg[i*dim : (i+1)*dim]
		if negAt[i] >= 0 {
			copy(nv, vecs[negAt[i]])
			r.hasNeg[i] = true
		}
		c := r.comb[i*dim : (i+1)*dim]
		for j := range c {
			c[j] = p[j] - w32*nv[j]
		}
	}
	if m := len(texts) - exAt; m > 0 {
		l32 := float32(cat.ExampleWeight)
		r.exVec, r.exComb, r.exStart = make([]float32, m*dim), make([]float32, m*dim), make([]int, n+1)
		k := 0
		for i, e := range cat.Entries {
			r.exStart[i] = k
			p, nv := r.pos[i*dim:(i+1)*dim], r.neg[i*dim:(i+1)*dim]
			c := r.comb[i*dim : (i+1)*dim]
			for j := range c {
				c[j] = (1+l32)*p[j] - w32*nv[j]
			}
			for range e.Examples {
				x := r.exVec[k*dim : (k+1)*dim]
				copy(x, vecs[exAt+k])
				c := r.exComb[k*dim : (k+1)*dim]
				for j := range c {
					c[j] = p[j] + l32*x[j] - w32*nv[j]
				}
				k++
			}
		}
		r.exStart[n] = k
	}
	// Screening bounds one row per entry: a catalog with examples is scored exactly (every row).
	if n >= screenMinEntries && r.exStart == nil {
		r.buildScreen()
	}
	return r, nil
}

// embedAll embeds texts in batches and returns unit vectors.
func embedAll(ctx context.Context, emb Embedder, texts []string) ([][]float32, int, error) {
	out := make([][]float32, 0, len(texts))
	dim := 0
	for start := 0; start < len(texts); start += embedBatch {
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		batch := texts[start:min(start+embedBatch, len(texts))]
		vecs, err := emb.Embed(ctx, batch)
		if err != nil {
			return nil, 0, fmt.Errorf("lora: embedding the catalog: %w", err)
		}
		if len(vecs) != len(batch) {
			return nil, 0, fmt.Errorf("%w: %d vectors for %d texts", ErrEmbedding, len(vecs), len(batch))
		}
		for k, v := range vecs {
			if dim == 0 {
				dim = len(v)
				if dim == 0 || dim > maxDim {
					return nil, 0, fmt.Errorf("%w: dimension %d", ErrEmbedding, dim)
				}
			}
			u, err := unit(v, dim)
			if err != nil {
				return nil, 0, fmt.Errorf("%w: text %d: %v", ErrEmbedding, start+k, err)
			}
			out = append(out, u)
		}
	}
	return out, dim, nil
}

// unit returns v / |v| (a new slice), checking the dimension and the values.
func unit(v []float32, dim int) ([]float32, error) {
	if len(v) != dim {
		return nil, fmt.Errorf("dimension %d, want %d", len(v), dim)
	}
	var ss float64
	for _, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("non-finite value")
		}
		ss += f * f
	}
	if !(ss > 0) || math.IsInf(ss, 0) {
		return nil, errors.New("zero or overflowing norm")
	}
	inv := 1 / math.Sqrt(ss)
	u := make([]float32, dim)
	for j, x := range v {
		u[j] = float32(float64(x) * inv)
	}
	return u, nil
}

func (r *Router) buildScreen() {
	r.stride = (r.dim + quantStride - 1) / quantStride * quantStride
	// |sum_j c^_ij q^_j| <= stride*127*qLevels must fit an int32 (no partial sum can overflow then).
	r.qLevels = math.Min(32767, math.Floor(float64(math.MaxInt32)/float64(r.stride*127)))
	var mx float64
	for _, x := range r.comb {
		mx = max(mx, math.Abs(float64(x)))
	}
	if mx == 0 { // every score is 0: nothing to screen
		return
	}
	r.s = mx / 127
	r.q8 = make([]int8, r.n*r.stride)
	for i := 0; i < r.n; i++ {
		c := r.comb[i*r.dim : (i+1)*r.dim]
		row := r.q8[i*r.stride:]
		var ee, cc float64
		for j, x := range c {
			v := max(-127, min(127, math.Round(float64(x)/r.s)))
			row[j] = int8(v)
			e := float64(x) - r.s*v
			ee += e * e
			cc += float64(x) * float64(x)
		}
		r.eMax = max(r.eMax, math.Sqrt(ee)*(1+1e-9))
		r.cMax = max(r.cMax, math.Sqrt(cc)*(1+1e-9))
	}
	n := r.n
	r.scratch.New = func() any { return &screenScratch{dots: make([]int32, n)} }
}

// Attachment is what the registry's attach function returned for this router's catalog (nil: none).
func (r *Router) Attachment() any { return r.attachment }

// Catalog returns the catalog the router was built from (do not modify it).
func (r *Router) Catalog() *Catalog { return r.cat }

// Len is the number of entries; Dim the embedding dimension.
func (r *Router) Len() int { return r.n }

// Dim is the embedding dimension.
func (r *Router) Dim() int { return r.dim }

// CheckPrompt reports why a prompt cannot be searched (ErrInvalidQuery), or nil.
func CheckPrompt(prompt string) error {
	switch {
	case strings.TrimSpace(prompt) == "":
		return fmt.Errorf("%w: prompt: empty", ErrInvalidQuery)
	case len(prompt) > MaxPromptBytes:
		return fmt.Errorf("%w: prompt: %d bytes exceed the limit of %d", ErrInvalidQuery, len(prompt), MaxPromptBytes)
	case strings.IndexByte(prompt, 0) >= 0:
		return fmt.Errorf("%w: prompt: contains a NUL character", ErrInvalidQuery)
	case !utf8.ValidString(prompt):
		return fmt.Errorf("%w: prompt: not valid UTF-8", ErrInvalidQuery)
	}
	return nil
}

// CheckTopK reports whether topK lies in [1, MaxTopK].
func CheckTopK(topK int) error {
	if topK < 1 || topK > MaxTopK {
		return fmt.Errorf("%w: top_k: must lie in [1, %d], got %d", ErrInvalidQuery, MaxTopK, topK)
	}
	return nil
}

// Search embeds the prompt and returns the topK best entries (fewer when the catalog is smaller) and
// the selection: the best entry when its score reaches the catalog's threshold.
func (r *Router) Search(ctx context.Context, prompt string, topK int) (*Result, error) {
	if err := CheckPrompt(prompt); err != nil {
		return nil, err
	}
	if err := CheckTopK(topK); err != nil {
		return nil, err
	}
	vecs, err := r.emb.Embed(ctx, []string{prompt})
	if err != nil {
		return nil, fmt.Errorf("lora: embedding the prompt: %w", err)
	}
	if len(vecs) != 1 || len(vecs[0]) != r.dim {
		return nil, fmt.Errorf("%w: the prompt's embedding does not match the catalog's (dimension %d)", ErrEmbedding, r.dim)
	}
	return r.SearchEmbedding(vecs[0], topK)
}

// SearchEmbedding is Search for a prompt already embedded (by the router's embedder).
func (r *Router) SearchEmbedding(q []float32, topK int) (*Result, error) {
	if err := CheckTopK(topK); err != nil {
		return nil, err
	}
	u, err := unit(q, r.dim)
	if err != nil {
		return nil, fmt.Errorf("%w: query vector: %v", ErrInvalidQuery, err)
	}
	k := min(topK, r.n)
	var top []scored
	if r.q8 != nil {
		top = r.searchScreened(u, k)
	} else {
		top = r.searchExact(u, k)
	}
	return r.result(u, top), nil
}

type scored struct {
	score float64
	idx   int
}

// topK keeps the k best (score desc, name asc) in a heap whose root is the worst kept.
type topK struct {
	k     int
	names []string
	h     []scored
}

func (t *topK) worse(a, b scored) bool { // a ranks below b
	return a.score < b.score || (a.score == b.score && t.names[a.idx] > t.names[b.idx])
}

func (t *topK) push(s scored) {
	if len(t.h) < t.k {
		t.h = append(t.h, s)
		for i := len(t.h) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.worse(t.h[i], t.h[p]) {
				break
			}
			t.h[i], t.h[p] = t.h[p], t.h[i]
			i = p
		}
		return
	}
	if !t.worse(t.h[0], s) {
		return
	}
	t.h[0] = s
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(t.h) && t.worse(t.h[l], t.h[m]) {
			m = l
		}
		if l+1 < len(t.h) && t.worse(t.h[l+1], t.h[m]) {
			m = l + 1
		}
		if m == i {
			break
		}
		t.h[i], t.h[m] = t.h[m], t.h[i]
		i = m
	}
}

func (t *topK) sorted() []scored {
	out := append([]scored(nil), t.h...)
	sort.Slice(out, func(i, j int) bool { return t.worse(out[j], out[i]) })
	return out
}

// searchExact scores every entry exactly (with examples: the best of its rows).
func (r *Router) searchExact(q []float32, k int) []scored {
	t := topK{k: k, names: r.names, h: make([]scored, 0, k)}
	for i := 0; i < r.n; i++ {
		var s float64
		if r.exStart != nil && r.exStart[i+1] > r.exStart[i] {
			s = math.Inf(-1)
			for x := r.exStart[i]; x < r.exStart[i+1]; x++ {
				s = max(s, dot64(r.exComb[x*r.dim:(x+1)*r.dim], q))
			}
		} else {
			s = dot64(r.comb[i*r.dim:(i+1)*r.dim], q)
		}
		t.push(scored{s, i})
	}
	return t.sorted()
}

// searchScreened returns what searchExact returns, touching far less memory. With s the rows' scale
// and t the query's, c^_i = round(c_i/s) (int8), q^ = round(q/t) (int16), e_i = c_i - s c^_i and
// d = q - t q^, the approximation a_i = s t (c^_i . q^) (exact integer arithmetic) is off by
//
//	c_i.q - a_i = c_i.d + e_i.(t q^),  so  |c_i.q - a_i| <= max_i|c_i|_2 |d|_2 + max_i|e_i|_2 |t q^|_2 =: B
//
// (Cauchy-Schwarz). With D the k-th largest integer dot, k entries score at least s t D - B, so every
// entry of the exact top k (ties included) has s t (c^_i.q^) + B >= s t D - B: only those are scored
// exactly, then ranked like searchExact ranks. One scale for all rows makes the integer dots rank like
// the a_i, so both passes over the entries compare integers.
func (r *Router) searchScreened(q []float32, k int) []scored {
	if r.q8 == nil {
		return r.searchExact(q, k)
	}
	var qmax float64
	for _, x := range q {
		qmax = max(qmax, math.Abs(float64(x)))
	}
	t := qmax / r.qLevels
	sc := r.scratch.Get().(*screenScratch)
	defer r.scratch.Put(sc)
	q16 := sc.q16[:0]
	var dd, tt float64
	for _, x := range q {
		v := max(-r.qLevels, min(r.qLevels, math.Round(float64(x)/t)))
		q16 = append(q16, int16(v))
		d := float64(x) - t*v
		dd += d * d
		tt += (t * v) * (t * v)
	}
	for len(q16) < r.stride {
		q16 = append(q16, 0)
	}
	sc.q16 = q16
	bound := r.cMax*math.Sqrt(dd)*(1+1e-9) + r.eMax*math.Sqrt(tt)*(1+1e-9) + boundSlack
	dots := sc.dots
	r.screen(q16, dots)

	// D: the k-th largest dot (a min-heap of the k largest).
	h := sc.heap[:0]
	for _, d := range dots {
		if len(h) < k {
			h = pushInt32(h, d)
		} else if d > h[0] {
			h[0] = d
			siftDownInt32(h)
		}
	}
	sc.heap = h
	// s t d_i + B >= s t D - B  <=>  d_i >= D - 2B/(s t); floor() keeps the test conservative.
	lim := math.Floor(float64(h[0]) - 2*bound/(r.s*t))
	dmin := int32(max(lim, math.MinInt32))
	best := topK{k: k, names: r.names, h: make([]scored, 0, k)}
	for i, d := range dots {
		if d >= dmin {
			best.push(scored{dot64(r.comb[i*r.dim:(i+1)*r.dim], q), i})
		}
	}
	return best.sorted()
}

// screenScratch is a search's reusable memory (pooled per router).
type screenScratch struct {
	dots []int32
	heap []int32
	q16  []int16
}

func pushInt32(h []int32, v int32) []int32 {
	h = append(h, v)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func siftDownInt32(h []int32) {
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if l+1 < len(h) && h[l+1] < h[m] {
			m = l + 1
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// screen runs the int8 kernel over every row, split across goroutines for large matrices when there are
// at least 4 CPUs (the kernel is memory-bound: two vCPUs are often the two hyperthreads of one core, and
// splitting there only adds the goroutines' cost).
func (r *Router) screen(q16 []int16, dots []int32) {
	total := r.n * r.stride
	workers := min(runtime.GOMAXPROCS(0)/2, total/parallelChunk)
	if total < parallelMinBytes || workers < 2 {
		screenDots(r.q8, q16, dots, r.stride)
		return
	}
	per := (r.n + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := per; lo < r.n; lo += per {
		hi := min(lo+per, r.n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			screenDots(r.q8[lo*r.stride:hi*r.stride], q16, dots[lo:hi], r.stride)
		}()
	}
	screenDots(r.q8[:per*r.stride], q16, dots[:per], r.stride)
	wg.Wait()
}

func (r *Router) result(q []float32, top []scored) *Result {
	res := &Result{Candidates: make([]Candidate, len(top))}
	for c, s := range top {
		i := s.idx
		cand := Candidate{Name: r.names[i], Score: s.score,
			PositiveSimilarity: dot64(r.pos[i*r.dim:(i+1)*r.dim], q), Example: -1}
		if r.hasNeg[i] {
			cand.NegativeSimilarity = dot64(r.neg[i*r.dim:(i+1)*r.dim], q)
		}
		if r.exStart != nil {
			for x := r.exStart[i]; x < r.exStart[i+1]; x++ {
				if sim := dot64(r.exVec[x*r.dim:(x+1)*r.dim], q); cand.Example < 0 || sim > cand.ExampleSimilarity {
					cand.Example, cand.ExampleSimilarity = x-r.exStart[i], sim
				}
			}
		}
		res.Candidates[c] = cand
	}
	if len(top) > 0 && top[0].score >= r.cat.Threshold {
		e := r.cat.Entries[top[0].idx]
		res.Selected = &Match{Name: e.Name, Score: top[0].score, Path: e.Path, Scale: e.Scale}
	}
	return res
}

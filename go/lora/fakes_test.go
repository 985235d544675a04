package lora

import (
	"context"
	"errors"
	"hash/fnv"
	"math"
	"math/rand"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
)

// hashEmbedder is a deterministic bag of hashed words: each lower-cased word adds +-1 to one of dim
// coordinates. Texts sharing words get a positive cosine; the vectors are left unnormalised on purpose.
type hashEmbedder struct {
	dim   int
	calls atomic.Int64
	delay time.Duration
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func (h *hashEmbedder) vec(text string) []float32 {
	v := make([]float32, h.dim)
	for _, w := range words(text) {
		f := fnv.New64a()
		f.Write([]byte(w))
		x := f.Sum64()
		sign := float32(1)
		if x>>63 == 1 {
			sign = -1
		}
		v[x%uint64(h.dim)] += 3 * sign
	}
	v[h.dim-1] += 0.5 // never the zero vector
	return v
}

func (h *hashEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	h.calls.Add(1)
	if h.delay > 0 {
		select {
		case <-time.After(h.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = h.vec(t)
	}
	return out, nil
}

// gaussEmbedder maps each text to a pseudo-random Gaussian vector seeded by the text's hash.
type gaussEmbedder struct{ dim int }

func (g gaussEmbedder) vec(text string) []float32 {
	f := fnv.New64a()
	f.Write([]byte(text))
	rng := rand.New(rand.NewSource(int64(f.Sum64())))
	v := make([]float32, g.dim)
	for j := range v {
		v[j] = float32(rng.NormFloat64())
	}
	return v
}

func (g gaussEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = g.vec(t)
	}
	return out, nil
}

// funcEmbedder answers with f.
type funcEmbedder func(ctx context.Context, texts []string) ([][]float32, error)

func (f funcEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

var errFake = errors.New("fake embedder failure")

// unit64 normalises in float64 (the reference for the router's float32 rows).
func unit64(v []float32) []float64 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x) / math.Sqrt(ss)
	}
	return out
}

func cos64(a, b []float32) float64 {
	ua, ub := unit64(a), unit64(b)
	var s float64
	for i := range ua {
		s += ua[i] * ub[i]
	}
	return s
}

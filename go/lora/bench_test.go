package lora

import (
	"context"
	"fmt"
	"testing"
)

// benchRouter builds a synthetic catalog of n entries (every one with a negative) embedded by
// gaussEmbedder in dim dimensions.
func benchRouter(b *testing.B, n, dim int) (*Router, [][]float32) {
	b.Helper()
	cat := &Catalog{NegativeWeight: 0.5, Threshold: 0.3}
	for i := 0; i < n; i++ {
		cat.Entries = append(cat.Entries, Entry{Name: fmt.Sprintf("lora%05d", i), Path: "p", Scale: 1,
			Positive: fmt.Sprint("positive ", i), Negative: fmt.Sprint("negative ", i)})
	}
	emb := gaussEmbedder{dim: dim}
	r, err := NewRouter(context.Background(), cat, emb)
	if err != nil {
		b.Fatal(err)
	}
	queries := make([][]float32, 64)
	for i := range queries {
		queries[i] = emb.vec(fmt.Sprint("query ", i))
		if i%2 == 1 { // half of them close to an entry, like a prompt that matches a style
			p := emb.vec(fmt.Sprint("positive ", i*97%n))
			for j := range p {
				queries[i][j] = 0.5*queries[i][j] + p[j]
			}
		}
	}
	return r, queries
}

// Routing after embedding: 10k entries, 384 dimensions (the target is <= 0.3 ms per prompt).
func BenchmarkRoute10k(b *testing.B) {
	r, queries := benchRouter(b, 10_000, 384)
	for _, k := range []int{1, 5, 100} {
		b.Run(fmt.Sprint("top_k=", k), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := r.SearchEmbedding(queries[i%len(queries)], k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// For comparison: every entry scored exactly from the float32 rows (no int8 screening).
	b.Run("exact-float32-scan/top_k=5", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			u, _ := unit(queries[i%len(queries)], r.dim)
			r.searchExact(u, 5)
		}
	})
}

// The shipped catalog's size: 14 entries.
func BenchmarkRoute14(b *testing.B) {
	r, queries := benchRouter(b, 14, 384)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := r.SearchEmbedding(queries[i%len(queries)], 5); err != nil {
			b.Fatal(err)
		}
	}
}

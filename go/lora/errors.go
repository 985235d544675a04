package lora

import "errors"

// Sentinel errors for errors.Is. Errors returned by the package wrap one of these (or the Embedder's or
// the context's error, which stay matchable too).
var (
	// ErrInvalidCatalog: the catalog file is malformed or breaks a rule (the message names the field).
	ErrInvalidCatalog = errors.New("lora: invalid catalog")
	// ErrInvalidQuery: an empty or oversized prompt, a NUL character, top_k out of range, a bad vector.
	ErrInvalidQuery = errors.New("lora: invalid query")
	// ErrEmbedding: the Embedder answered with the wrong count, inconsistent dimensions, non-finite or
	// zero vectors.
	ErrEmbedding = errors.New("lora: bad embeddings")
)

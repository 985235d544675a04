// Package lora picks the LoRA adapter whose style fits an image prompt by semantic search over a catalog.
//
// A catalog (ParseCatalog, LoadCatalog; format in docs/lora_routing.md) lists adapters, each with a
// positive description (what the style is for) and an optional negative one (what it must not be used
// for). A Router embeds both once, with any Embedder (a *cutenative.Model holding a sentence-embedding
// model such as all-MiniLM-L6-v2 satisfies the interface), and scores a prompt q against entry i as
//
//	score_i = cos(q, positive_i) - w * cos(q, negative_i) = c_i . q,   c_i = p_i - w*n_i (unit p, n, q)
//
// in one pass over the precomputed rows c_i. The best entry is selected when its score reaches the
// catalog's threshold; otherwise no LoRA is used. Ties go to the smaller name. Large catalogs are first
// screened with an int8 copy of the rows and a proven error bound, so the answer equals the exact one.
//
// A Registry serves a catalog file and swaps in a new Router when Reload (or Watch, on a file change)
// succeeds, without blocking searches. KeywordRouter and BM25 are the baselines of the evaluation
// (cmd/cutenative-loraeval).
package lora

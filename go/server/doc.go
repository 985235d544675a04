// Package server is cutenative's HTTP front end: forecasting endpoints over models loaded in process
// through the cutenative binding, with micro-batching, admission control, bearer-key authentication,
// Prometheus metrics and an OpenAPI document, plus LoRA search for image prompts (go/lora) when a
// catalog and a sentence-embedding model are configured, and OpenAI-compatible embeddings from that model.
// The binary lives in cmd/cutenative-server.
//
// Endpoints: POST /v1/forecast, GET /v1/models (OpenAI's list shape), POST /v1/embeddings (OpenAI's shape),
// POST /v1/loras/search, GET /livez, GET /readyz, GET /metrics, GET /openapi.json (the document in
// openapi.json: OpenAPI 3.0.3 checked by openapi-spec-validator, against the routes and against the Go types
// of the responses by tests).
package server

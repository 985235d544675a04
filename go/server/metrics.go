package server

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cutenative/cutenative/go/lora"
)

// histogram is a Prometheus histogram with fixed buckets.
type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64
	sum    float64
	count  uint64
}

func newHistogram(bounds ...float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (h *histogram) observe(v float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, b := range h.bounds {
		if v <= b {
			h.counts[i]++
		}
	}
	h.sum += v
	h.count++
}

func (h *histogram) write(w io.Writer, name, help string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	for i, b := range h.bounds {
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", name, formatFloat(b), h.counts[i])
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n%s_sum %s\n%s_count %d\n", name, h.count, name, formatFloat(h.sum), name, h.count)
}

func formatFloat(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return fmt.Sprintf("%g", v)
}

// metrics are the server's Prometheus series (text exposition format 0.0.4).
type metrics struct {
	mu       sync.Mutex
	requests map[[2]string]uint64 // (endpoint, outcome) -> count

	queueDepth       atomic.Int64
	queueSeconds     *histogram
	inferenceSeconds *histogram
	batchSize        *histogram

	loraEmbedSeconds          *histogram
	loraRouteSeconds          *histogram
	loraSelected, loraNoMatch atomic.Uint64
	loras                     func() *lora.Registry // the catalog's stats; nil func or registry: none
}

func newMetrics() *metrics {
	lat := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
	return &metrics{
		requests:         map[[2]string]uint64{},
		queueSeconds:     newHistogram(lat...),
		inferenceSeconds: newHistogram(lat...),
		batchSize:        newHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
		loraEmbedSeconds: newHistogram(lat...),
		loraRouteSeconds: newHistogram(0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1),
	}
}

// countRequest records a finished request: outcome is "ok" or the error code.
func (m *metrics) countRequest(endpoint, outcome string) {
	m.mu.Lock()
	m.requests[[2]string{endpoint, outcome}]++
	m.mu.Unlock()
}

// count returns the requests counted for (endpoint, outcome).
func (m *metrics) count(endpoint, outcome string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[[2]string{endpoint, outcome}]
}

func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "\x00") < strings.Join(keys[j][:], "\x00") })
	fmt.Fprintf(w, "# HELP cutenative_requests_total Requests handled, by endpoint and outcome.\n# TYPE cutenative_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(w, "cutenative_requests_total{endpoint=%q,outcome=%q} %d\n", k[0], k[1], m.requests[k])
	}
	m.mu.Unlock()
	fmt.Fprintf(w, "# HELP cutenative_queue_depth Forecast jobs waiting for the model.\n# TYPE cutenative_queue_depth gauge\ncutenative_queue_depth %d\n", m.queueDepth.Load())
	m.queueSeconds.write(w, "cutenative_queue_seconds", "Time a forecast job waited in the queue.")
	m.inferenceSeconds.write(w, "cutenative_inference_seconds", "Duration of one library call (a batch).")
	m.batchSize.write(w, "cutenative_batch_series", "Series per library call.")
	fmt.Fprintf(w, "# HELP cutenative_lora_searches_total LoRA searches answered, by whether a LoRA was selected.\n# TYPE cutenative_lora_searches_total counter\n")
	fmt.Fprintf(w, "cutenative_lora_searches_total{selected=\"false\"} %d\ncutenative_lora_searches_total{selected=\"true\"} %d\n",
		m.loraNoMatch.Load(), m.loraSelected.Load())
	m.loraEmbedSeconds.write(w, "cutenative_lora_embed_seconds", "Time to embed a LoRA search prompt.")
	m.loraRouteSeconds.write(w, "cutenative_lora_route_seconds", "Time to score the LoRA catalog for an embedded prompt.")
	var st lora.RegistryStats
	if m.loras != nil {
		if reg := m.loras(); reg != nil {
			st = reg.Stats()
		}
	}
	fmt.Fprintf(w, "# HELP cutenative_lora_catalog_entries LoRAs in the catalog in service.\n# TYPE cutenative_lora_catalog_entries gauge\ncutenative_lora_catalog_entries %d\n", st.Entries)
	fmt.Fprintf(w, "# HELP cutenative_lora_catalog_loads_total Catalog loads, by outcome (a failed reload keeps the previous catalog).\n# TYPE cutenative_lora_catalog_loads_total counter\n")
	fmt.Fprintf(w, "cutenative_lora_catalog_loads_total{outcome=\"error\"} %d\ncutenative_lora_catalog_loads_total{outcome=\"ok\"} %d\n", st.Failures, st.Reloads)
}

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
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name)
	h.writeSeries(w, name, "")
}

// writeSeries writes the histogram's lines under labels (`model="m",lane="short"`; "" for none).
func (h *histogram) writeSeries(w io.Writer, name, labels string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	sep, set := "", ""
	if labels != "" {
		sep, set = ",", "{"+labels+"}"
	}
	for i, b := range h.bounds {
		fmt.Fprintf(w, "%s_bucket{%s%sle=\"%s\"} %d\n", name, labels, sep, formatFloat(b), h.counts[i])
	}
	fmt.Fprintf(w, "%s_bucket{%s%sle=\"+Inf\"} %d\n%s_sum%s %s\n%s_count%s %d\n", name, labels, sep, h.count,
		name, set, formatFloat(h.sum), name, set, h.count)
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

	queues []*queueMetrics // one per model lane, in registration order

	loraEmbedSeconds          *histogram
	loraRouteSeconds          *histogram
	loraSelected, loraNoMatch atomic.Uint64
	loras                     func() *lora.Registry // the catalog's stats; nil func or registry: none
}

// latencyBuckets are the bounds of every latency histogram, in seconds.
var latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// queueMetrics are one model lane's series, labelled model and lane.
type queueMetrics struct {
	labels    string // model="...",lane="..."
	depth     atomic.Int64
	wait      *histogram // seconds from admission to the call
	inference *histogram // seconds per call
	series    *histogram // series per call (calls that forecast none are not counted)
	jobs      *histogram // jobs per call: 1 unless a policy merged them
	dropped   [numDropReasons]atomic.Uint64
}

// Why a queue answered a job without running it.
type dropReason int

const (
	dropFull      dropReason = iota // the queue was full: 429
	dropDeadline                    // the deadline passed while it waited: 504
	dropCancelled                   // the client left while it waited: 499
	dropShutdown                    // the queue was closing: 503
	numDropReasons
)

var dropReasonNames = [numDropReasons]string{"full", "deadline", "cancelled", "shutdown"}

// queue registers the series of one model lane.
func (m *metrics) queue(model, lane string) *queueMetrics {
	q := &queueMetrics{labels: fmt.Sprintf("model=%q,lane=%q", model, lane), wait: newHistogram(latencyBuckets...),
		inference: newHistogram(latencyBuckets...), series: newHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024),
		jobs: newHistogram(1, 2, 4, 8, 16, 32, 64, 128, 256)}
	m.mu.Lock()
	m.queues = append(m.queues, q)
	m.mu.Unlock()
	return q
}

// queued is the number of jobs waiting in every queue.
func (m *metrics) queued() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, q := range m.queues {
		n += q.depth.Load()
	}
	return n
}

func newMetrics() *metrics {
	lat := latencyBuckets
	return &metrics{
		requests:         map[[2]string]uint64{},
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
	queues := append([]*queueMetrics(nil), m.queues...)
	m.mu.Unlock()
	sort.SliceStable(queues, func(i, j int) bool { return queues[i].labels < queues[j].labels })
	fmt.Fprintf(w, "# HELP cutenative_queue_depth Jobs waiting for a model lane.\n# TYPE cutenative_queue_depth gauge\n")
	for _, q := range queues {
		fmt.Fprintf(w, "cutenative_queue_depth{%s} %d\n", q.labels, q.depth.Load())
	}
	fmt.Fprintf(w, "# HELP cutenative_queue_dropped_total Jobs answered without running, by reason (full: 429, deadline: 504, cancelled: 499, shutdown: 503).\n# TYPE cutenative_queue_dropped_total counter\n")
	for _, q := range queues {
		for r, name := range dropReasonNames {
			fmt.Fprintf(w, "cutenative_queue_dropped_total{%s,reason=%q} %d\n", q.labels, name, q.dropped[r].Load())
		}
	}
	for _, h := range []struct {
		name, help string
		of         func(q *queueMetrics) *histogram
	}{
		{"cutenative_queue_seconds", "Time a job waited in its queue.", func(q *queueMetrics) *histogram { return q.wait }},
		{"cutenative_inference_seconds", "Duration of one library call (a batch).", func(q *queueMetrics) *histogram { return q.inference }},
		{"cutenative_batch_series", "Series per library call.", func(q *queueMetrics) *histogram { return q.series }},
		{"cutenative_batch_jobs", "Jobs (requests) per library call.", func(q *queueMetrics) *histogram { return q.jobs }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s histogram\n", h.name, h.help, h.name)
		for _, q := range queues {
			h.of(q).writeSeries(w, h.name, q.labels)
		}
	}
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

package server

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
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
	promptVecs                *lora.VectorCache     // the routed prompts' vector cache (nil: none)
	// adapterStats reports each image model's adapter state at scrape time (nil: none).
	adapterStats func(report func(model string, st cutenative.AdapterStats))

	buildLabels string    // cutenative_build_info's labels
	started     time.Time // process_start_time_seconds (the server's creation: close enough, and testable)

	models map[string]*modelMetrics // per configured model, registered by Load

	refusals map[[2]string]uint64 // (endpoint, reason) -> count (under mu)
	bytes    *byteBudget          // bytes in flight; nil: none
	extra    []func(w io.Writer)  // series the command adds (connections)
}

// refuse counts a request refused by a limit (reason names it: the apiError's reason, else its code).
func (m *metrics) refuse(endpoint, reason string) {
	m.mu.Lock()
	m.refusals[[2]string{endpoint, reason}]++
	m.mu.Unlock()
}

// refused returns the refusals counted for (endpoint, reason).
func (m *metrics) refused(endpoint, reason string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refusals[[2]string{endpoint, reason}]
}

func (m *metrics) addExtra(write func(w io.Writer)) {
	m.mu.Lock()
	m.extra = append(m.extra, write)
	m.mu.Unlock()
}

// modelMetrics are one model's series, labelled model.
type modelMetrics struct {
	info     string            // cutenative_model_info's labels
	requests map[string]uint64 // status class ("2xx", "4xx", "5xx") -> requests (under metrics.mu)
	series   uint64            // series in requests answered 2xx (under metrics.mu)
	// Image models (under metrics.mu): images made, their denoising steps and the seconds those steps took.
	images, steps  uint64
	denoiseSeconds float64
	generates      bool
}

// countImages records one image made by model: its steps and their seconds.
func (m *metrics) countImages(name string, images, steps int, denoiseSeconds float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mm := m.models[name]; mm != nil {
		mm.images += uint64(images)
		mm.steps += uint64(steps)
		mm.denoiseSeconds += denoiseSeconds
	}
}

// model registers a loaded model's info labels (generates: an image model, whose image series are written).
func (m *metrics) model(name, kind, device, dtype, mode string, generates bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.models[name] = &modelMetrics{info: fmt.Sprintf("model=%q,kind=%q,device=%q,dtype=%q,mode=%q", name, kind, device, dtype, mode),
		requests: map[string]uint64{}, generates: generates}
}

// countModel records a request answered for a configured model: its status class and, for a 2xx, its series.
func (m *metrics) countModel(name string, status, series int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mm := m.models[name]
	if mm == nil {
		return
	}
	mm.requests[strconv.Itoa(status/100)+"xx"]++
	if status/100 == 2 && series > 0 {
		mm.series += uint64(series)
	}
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
	lib := Library()
	return &metrics{
		requests: map[[2]string]uint64{},
		refusals: map[[2]string]uint64{},
		models:   map[string]*modelMetrics{},
		started:  time.Now(),
		buildLabels: fmt.Sprintf("version=%q,library_version=%q,go_version=%q,torch_version=%q", BinaryVersion(), lib.Version,
			runtime.Version(), lib.Torch),
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
	fmt.Fprintf(w, "# HELP cutenative_build_info The server's version, the library's (cn_version), Go's and torch's.\n# TYPE cutenative_build_info gauge\ncutenative_build_info{%s} 1\n", m.buildLabels)
	m.writeProcess(w)
	m.mu.Lock()
	names := make([]string, 0, len(m.models))
	for n := range m.models {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintf(w, "# HELP cutenative_model_info The models served: kind, device, dtype and mode.\n# TYPE cutenative_model_info gauge\n")
	for _, n := range names {
		fmt.Fprintf(w, "cutenative_model_info{%s} 1\n", m.models[n].info)
	}
	fmt.Fprintf(w, "# HELP cutenative_model_requests_total Requests naming a configured model (or using the default), by status class.\n# TYPE cutenative_model_requests_total counter\n")
	for _, n := range names {
		mm := m.models[n]
		for _, class := range []string{"2xx", "4xx", "5xx"} {
			fmt.Fprintf(w, "cutenative_model_requests_total{model=%q,status=%q} %d\n", n, class, mm.requests[class])
		}
	}
	fmt.Fprintf(w, "# HELP cutenative_model_series_total Series forecast per model (requests answered 2xx).\n# TYPE cutenative_model_series_total counter\n")
	for _, n := range names {
		fmt.Fprintf(w, "cutenative_model_series_total{model=%q} %d\n", n, m.models[n].series)
	}
	for _, c := range []struct {
		name, help string
		of         func(mm *modelMetrics) string
	}{
		{"cutenative_images_total", "Images made per image model.", func(mm *modelMetrics) string { return strconv.FormatUint(mm.images, 10) }},
		{"cutenative_image_steps_total", "Denoising steps run per image model.", func(mm *modelMetrics) string { return strconv.FormatUint(mm.steps, 10) }},
		{"cutenative_image_denoise_seconds_total", "Seconds those steps took (steps per second: the rate of the steps over the rate of this).",
			func(mm *modelMetrics) string { return formatFloat(mm.denoiseSeconds) }},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n", c.name, c.help, c.name)
		for _, n := range names {
			if mm := m.models[n]; mm.generates {
				fmt.Fprintf(w, "%s{model=%q} %s\n", c.name, n, c.of(mm))
			}
		}
	}
	keys := make([][2]string, 0, len(m.requests))
	for k := range m.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "\x00") < strings.Join(keys[j][:], "\x00") })
	fmt.Fprintf(w, "# HELP cutenative_requests_total Requests handled, by endpoint and outcome.\n# TYPE cutenative_requests_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(w, "cutenative_requests_total{endpoint=%q,outcome=%q} %d\n", k[0], k[1], m.requests[k])
	}
	keys = keys[:0]
	for k := range m.refusals {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return strings.Join(keys[i][:], "\x00") < strings.Join(keys[j][:], "\x00") })
	fmt.Fprintf(w, "# HELP cutenative_refusals_total Requests refused by a limit, by endpoint and the limit (reason).\n# TYPE cutenative_refusals_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(w, "cutenative_refusals_total{endpoint=%q,reason=%q} %d\n", k[0], k[1], m.refusals[k])
	}
	queues := append([]*queueMetrics(nil), m.queues...)
	extra := append([]func(w io.Writer){}, m.extra...)
	m.mu.Unlock()
	if m.bytes != nil {
		fmt.Fprintf(w, "# HELP cutenative_inflight_bytes Bytes held by requests in flight (decoded bodies, answers), of -max-inflight-bytes.\n# TYPE cutenative_inflight_bytes gauge\ncutenative_inflight_bytes %d\n", m.bytes.used.Load())
		fmt.Fprintf(w, "# HELP cutenative_inflight_bytes_limit The bytes budget (-max-inflight-bytes).\n# TYPE cutenative_inflight_bytes_limit gauge\ncutenative_inflight_bytes_limit %d\n", m.bytes.limit)
		fmt.Fprintf(w, "# HELP cutenative_inflight_bytes_peak The most bytes in flight at once since the start.\n# TYPE cutenative_inflight_bytes_peak gauge\ncutenative_inflight_bytes_peak %d\n", m.bytes.peak.Load())
	}
	for _, write := range extra {
		write(w)
	}
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
	if m.adapterStats != nil {
		var lines [4]strings.Builder
		m.adapterStats(func(model string, st cutenative.AdapterStats) {
			fmt.Fprintf(&lines[0], "cutenative_adapter_switches_total{model=%q} %d\n", model, st.Switches)
			fmt.Fprintf(&lines[1], "cutenative_adapter_switch_seconds_total{model=%q} %s\n", model, formatFloat(st.SwitchSeconds))
			fmt.Fprintf(&lines[2], "cutenative_adapter_backup_bytes{model=%q} %d\n", model, st.BackupBytes)
			fmt.Fprintf(&lines[3], "cutenative_adapter_touched_weights{model=%q} %d\n", model, st.Touched)
		})
		for i, h := range [][3]string{
			{"cutenative_adapter_switches_total", "counter", "Adapter sets fused into an image model's weights (a restore to none counts)."},
			{"cutenative_adapter_switch_seconds_total", "counter", "Seconds those switches took."},
			{"cutenative_adapter_backup_bytes", "gauge", "Bytes of the kept original weights (what restores them bit for bit)."},
			{"cutenative_adapter_touched_weights", "gauge", "Weights the adapter set in the weights now changes."},
		} {
			fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n%s", h[0], h[2], h[0], h[1], lines[i].String())
		}
	}
	fmt.Fprintf(w, "# HELP cutenative_lora_searches_total LoRA searches answered, by whether a LoRA was selected.\n# TYPE cutenative_lora_searches_total counter\n")
	fmt.Fprintf(w, "cutenative_lora_searches_total{selected=\"false\"} %d\ncutenative_lora_searches_total{selected=\"true\"} %d\n",
		m.loraNoMatch.Load(), m.loraSelected.Load())
	m.loraEmbedSeconds.write(w, "cutenative_lora_embed_seconds", "Time to embed a LoRA search prompt (a cached prompt's vector: ~0).")
	if m.promptVecs != nil {
		hits, misses := m.promptVecs.Stats()
		fmt.Fprintf(w, "# HELP cutenative_lora_prompt_cache_total Routed prompts whose vector was cached (hit) or embedded (miss).\n"+
			"# TYPE cutenative_lora_prompt_cache_total counter\ncutenative_lora_prompt_cache_total{result=\"hit\"} %d\n"+
			"cutenative_lora_prompt_cache_total{result=\"miss\"} %d\n", hits, misses)
	}
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

// writeProcess writes the process metrics under their usual Prometheus names; those read from /proc are left
// out where it cannot be read.
func (m *metrics) writeProcess(w io.Writer) {
	fmt.Fprintf(w, "# HELP process_start_time_seconds Start time of the process since the Unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %s\n",
		strconv.FormatFloat(float64(m.started.UnixMilli())/1000, 'f', 3, 64))
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
		fmt.Fprintf(w, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", cpu)
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) >= 2 {
			page := int64(os.Getpagesize())
			vsz, err1 := strconv.ParseInt(string(f[0]), 10, 64)
			rss, err2 := strconv.ParseInt(string(f[1]), 10, 64)
			if err1 == nil && err2 == nil {
				fmt.Fprintf(w, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %d\n", vsz*page)
				fmt.Fprintf(w, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %d\n", rss*page)
			}
		}
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fmt.Fprintf(w, "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds %d\n", len(ents))
	}
	fmt.Fprintf(w, "# HELP go_goroutines Number of goroutines that currently exist.\n# TYPE go_goroutines gauge\ngo_goroutines %d\n", runtime.NumGoroutine())
}

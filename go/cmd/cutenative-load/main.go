// Command cutenative-load is a small load generator for a cutenative server
// on this machine.
//
// For each concurrency level it runs that many goroutines, each sending
// POST /v1/forecast requests back to back for the given duration (every
// request forecasts the CSV's last 120 values, without timestamps), and
// prints one markdown table row per level:
//
//	| label | concurrency | requests | errors | 429s | throughput (req/s) | p50 (ms) | p99 (ms) |
//
// requests counts all completed requests; errors those that failed or
// answered other than 200, of which 429s were throttled. Throughput and
// the latency percentiles are over the successful (200) requests only.
// After a failed request a worker pauses 10ms so that a refusing server is
// not spun on.
//
// It only talks to loopback addresses (127.0.0.0/8, ::1): the URL's host
// must resolve to one, and every connection is checked again when dialled.
// Each level runs for at most 5 minutes.
//
// Usage:
//
//	cutenative-load -url http://127.0.0.1:8080 -concurrency 1,16,64 -duration 10s \
//	    [-csv examples/data/airpassengers.csv] [-horizon 12] [-key KEY] [-label batching=on]
//
// Flags:
//
//	-url          server base URL, loopback only (default http://127.0.0.1:8080)
//	-concurrency  comma-separated concurrency levels (default 1,16,64; at most 1024 each)
//	-duration     duration of each level (default 10s, at most 5m)
//	-csv          CSV whose second column is the series (default examples/data/airpassengers.csv;
//	              "" for a synthetic seasonal series)
//	-horizon      forecast horizon (default 12)
//	-model        model name (optional)
//	-key          API key, sent as "Authorization: Bearer KEY" (optional)
//	-label        text for the table's label column (default "-")
//	-timeout      per-request timeout (default 60s)
package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	maxDuration    = 5 * time.Minute
	maxConcurrency = 1024
	maxLength      = 1 << 16
	failurePause   = 10 * time.Millisecond
	tableHeader    = "| label | concurrency | requests | errors | 429s | throughput (req/s) | p50 (ms) | p99 (ms) |\n" +
		"|---|---:|---:|---:|---:|---:|---:|---:|"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "cutenative-load:", err)
		}
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cutenative-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rawURL := fs.String("url", "http://127.0.0.1:8080", "server base URL (loopback only)")
	levelsFlag := fs.String("concurrency", "1,16,64", "comma-separated concurrency levels")
	duration := fs.Duration("duration", 10*time.Second, "duration of each level (at most 5m)")
	csvPath := fs.String("csv", "examples/data/airpassengers.csv", `CSV with the series in its second column ("" for a synthetic series)`)
	horizon := fs.Int("horizon", 12, "forecast horizon")
	model := fs.String("model", "", "model name (default: the server's default)")
	key := fs.String("key", "", "API key (sent as a bearer token)")
	label := fs.String("label", "-", "label column text")
	timeout := fs.Duration("timeout", 60*time.Second, "per-request timeout")
	length := fs.Int("length", 120, "series length sent (the last values of the CSV, or a synthetic series of this length)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	levels, err := parseLevels(*levelsFlag)
	if err != nil {
		return err
	}
	if *duration <= 0 || *duration > maxDuration {
		return fmt.Errorf("-duration must be in (0, %v], got %v", maxDuration, *duration)
	}
	if *horizon <= 0 {
		return fmt.Errorf("-horizon must be positive, got %d", *horizon)
	}
	if *length <= 0 || *length > maxLength {
		return fmt.Errorf("-length must be in [1, %d], got %d", maxLength, *length)
	}
	if err := checkLoopback(ctx, *rawURL, net.DefaultResolver.LookupIPAddr); err != nil {
		return err
	}
	values := syntheticSeries(*length)
	if *csvPath != "" {
		if values, err = readValues(*csvPath); err != nil {
			return fmt.Errorf("%w (use -csv '' for a synthetic series)", err)
		}
	}
	if len(values) > *length {
		values = values[len(values)-*length:]
	}
	body, err := requestBody(values, *horizon, *model)
	if err != nil {
		return err
	}
	t := target{
		url:     strings.TrimRight(*rawURL, "/") + "/v1/forecast",
		key:     *key,
		body:    body,
		timeout: *timeout,
	}

	// One request first, so that a misconfiguration (bad key, model or
	// request) is reported once instead of as a table of errors.
	status, msg, err := t.send(ctx, newClient(1))
	if err != nil {
		return fmt.Errorf("first request: %w", err)
	}
	if status != http.StatusOK && status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return fmt.Errorf("first request: %s", msg)
	}

	fmt.Fprintf(stderr, "cutenative-load: %s, %d values, horizon %d, %v per level\n", t.url, len(values), *horizon, *duration)
	fmt.Fprintln(stdout, tableHeader)
	for _, c := range levels {
		r := t.runLevel(ctx, c, *duration)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintln(stdout, r.row(*label))
	}
	return nil
}

// parseLevels parses "1,16,64" into concurrency levels.
func parseLevels(s string) ([]int, error) {
	var levels []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxConcurrency {
			return nil, fmt.Errorf("-concurrency: bad level %q (want integers in [1, %d])", f, maxConcurrency)
		}
		levels = append(levels, n)
	}
	return levels, nil
}

// checkLoopback returns an error unless rawURL is an http(s) URL whose host
// is, or resolves only to, loopback addresses.
func checkLoopback(ctx context.Context, rawURL string, lookup func(context.Context, string) ([]net.IPAddr, error)) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("-url: scheme must be http or https, got %q", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("-url: no host in %q", rawURL)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("-url: %s is not a loopback address; this tool only loads this machine", host)
		}
		return nil
	}
	addrs, err := lookup(ctx, host)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if len(addrs) == 0 {
		return fmt.Errorf("-url: %s resolves to no address", host)
	}
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return fmt.Errorf("-url: %s resolves to %s, not a loopback address; this tool only loads this machine", host, a.IP)
		}
	}
	return nil
}

// loopbackOnly is a net.Dialer Control function refusing to connect to any
// address but a loopback one.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("refusing to connect to non-loopback address %s", address)
	}
	return nil
}

// newClient returns a client for conc concurrent requests: it keeps conc
// idle connections, uses no proxy and dials loopback addresses only.
func newClient(conc int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: loopbackOnly}
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DialContext:         d.DialContext,
		MaxIdleConns:        conc,
		MaxIdleConnsPerHost: conc,
		IdleConnTimeout:     30 * time.Second,
	}}
}

// readValues reads the second column of a CSV with a header row; empty
// cells are missing values (NaN).
func readValues(path string) ([]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := parseValues(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func parseValues(r io.Reader) ([]float64, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	rows, err := cr.ReadAll()
	if err != nil {
		return nil, err
	}
	if len(rows) < 2 {
		return nil, errors.New("no data rows")
	}
	values := make([]float64, 0, len(rows)-1)
	for i, rec := range rows[1:] {
		if len(rec) < 2 {
			return nil, fmt.Errorf("line %d: want at least 2 columns, got %d", i+2, len(rec))
		}
		v := math.NaN()
		if s := strings.TrimSpace(rec[1]); s != "" {
			v, err = strconv.ParseFloat(s, 64)
			if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("line %d: bad value %q", i+2, s)
			}
		}
		values = append(values, v)
	}
	return values, nil
}

// syntheticSeries is a trend with a yearly (period 12) season.
func syntheticSeries(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = 100 + float64(i) + 20*math.Sin(2*math.Pi*float64(i)/12)
	}
	return v
}

// requestBody is the JSON forecast request for values (NaN sent as null).
func requestBody(values []float64, horizon int, model string) ([]byte, error) {
	vals := make([]*float64, len(values))
	for i := range values {
		if !math.IsNaN(values[i]) {
			vals[i] = &values[i]
		}
	}
	type series struct {
		Values []*float64 `json:"values"`
	}
	return json.Marshal(struct {
		Model   string   `json:"model,omitempty"`
		Horizon int      `json:"horizon"`
		Series  []series `json:"series"`
	}{model, horizon, []series{{vals}}})
}

// target is the request every worker sends.
type target struct {
	url, key string
	body     []byte
	timeout  time.Duration
}

// send posts one request and returns its status, with a description of
// the server's error for non-200 answers.
func (t target) send(ctx context.Context, client *http.Client) (status int, msg string, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.key != "" {
		req.Header.Set("Authorization", "Bearer "+t.key)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		_, err = io.Copy(io.Discard, resp.Body) // drain, so the connection is reused
		return resp.StatusCode, "", err
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	msg = resp.Status
	var e struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		msg += ": " + e.Error.Message + " (" + e.Error.Code + ")"
	} else if s := strings.TrimSpace(string(b)); s != "" {
		msg += ": " + s
	}
	return resp.StatusCode, msg, nil
}

// result is what one concurrency level measured.
type result struct {
	concurrency int
	requests    int
	errors      int
	throttled   int             // 429 answers, also counted in errors
	latencies   []time.Duration // of the successful requests, sorted
	elapsed     time.Duration
}

// runLevel runs conc workers sending requests until d has passed (requests
// in flight at the deadline are completed) or ctx is cancelled.
func (t target) runLevel(ctx context.Context, conc int, d time.Duration) result {
	client := newClient(conc)
	defer client.CloseIdleConnections()
	start := time.Now()
	deadline := start.Add(d)
	parts := make([]result, conc)
	var wg sync.WaitGroup
	for w := range parts {
		wg.Add(1)
		go func(r *result) {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				t0 := time.Now()
				status, _, err := t.send(ctx, client)
				lat := time.Since(t0)
				if ctx.Err() != nil {
					return // interrupted: not a server error
				}
				r.requests++
				if err == nil && status == http.StatusOK {
					r.latencies = append(r.latencies, lat)
					continue
				}
				r.errors++
				if status == http.StatusTooManyRequests {
					r.throttled++
				}
				time.Sleep(failurePause)
			}
		}(&parts[w])
	}
	wg.Wait()
	total := result{concurrency: conc, elapsed: time.Since(start)}
	for _, p := range parts {
		total.requests += p.requests
		total.errors += p.errors
		total.throttled += p.throttled
		total.latencies = append(total.latencies, p.latencies...)
	}
	slices.Sort(total.latencies)
	return total
}

// row formats r as a markdown table row.
func (r result) row(label string) string {
	p50, p99 := "-", "-"
	if len(r.latencies) > 0 {
		p50, p99 = ms(percentile(r.latencies, 50)), ms(percentile(r.latencies, 99))
	}
	tput := 0.0
	if r.elapsed > 0 {
		tput = float64(len(r.latencies)) / r.elapsed.Seconds()
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %.1f | %s | %s |",
		label, r.concurrency, r.requests, r.errors, r.throttled, tput, p50, p99)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method, or 0 for an empty slice.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

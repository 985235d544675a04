package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// checkLoopback returns an error unless rawURL is an http URL whose host is, or resolves only to, loopback
// addresses.
func checkLoopback(ctx context.Context, rawURL string, lookup func(context.Context, string) ([]net.IPAddr, error)) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("-url: %w", err)
	}
	if u.Scheme != "http" {
		return fmt.Errorf("-url: scheme must be http, got %q", u.Scheme)
	}
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("-url: no host in %q", rawURL)
	}
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return fmt.Errorf("-url: %s is not a loopback address; this tool only abuses this machine", host)
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
			return fmt.Errorf("-url: %s resolves to %s, not a loopback address; this tool only abuses this machine", host, a.IP)
		}
	}
	return nil
}

// loopbackOnly is a net.Dialer Control function refusing every address but a loopback one.
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

var dialer = &net.Dialer{Timeout: 10 * time.Second, Control: loopbackOnly}

// newClient returns a client keeping up to conns idle connections (0: a fresh connection per request), with
// no proxy, dialling loopback addresses only.
func newClient(conns int) *http.Client {
	t := &http.Transport{Proxy: nil, DialContext: dialer.DialContext, MaxIdleConns: conns,
		MaxIdleConnsPerHost: conns, IdleConnTimeout: 30 * time.Second, DisableKeepAlives: conns == 0,
		DisableCompression: true}
	return &http.Client{Transport: t, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
}

// outcome is what one request got.
type outcome struct {
	status int    // 0: no HTTP answer
	fail   string // why there was no answer (classify)
	code   string // the JSON error's code and message, for non-200 answers
	msg    string
	ctype  string
	body   []byte // up to maxKeep bytes of the answer
	lat    time.Duration
	end    time.Time
	retry  time.Duration // the answer's Retry-After (seconds), 0 if none
}

const maxKeep = 32 << 20

// request describes one HTTP request; body returns a fresh reader and its length (nil: no body).
type request struct {
	method, path string
	body         func() (io.Reader, int64)
	header       map[string]string // Content-Type: application/json is set for bodies unless given here
	host         string            // the Host header, "" for the URL's
}

func staticBody(b []byte) func() (io.Reader, int64) {
	return func() (io.Reader, int64) { return bytes.NewReader(b), int64(len(b)) }
}

func post(path string, body []byte) request {
	return request{method: http.MethodPost, path: path, body: staticBody(body)}
}

// do sends r within timeout and reads the answer.
func (c *abuser) do(ctx context.Context, client *http.Client, r request, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var body io.Reader
	var n int64
	if r.body != nil {
		body, n = r.body()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, c.base+r.path, body)
	if err != nil {
		return outcome{fail: "request: " + err.Error(), end: time.Now()}
	}
	if body != nil {
		req.ContentLength = n
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	if r.host != "" {
		req.Host = r.host
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		end := time.Now()
		return outcome{fail: classify(err), lat: end.Sub(start), end: end}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxKeep))
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	end := time.Now()
	o := outcome{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: data, lat: end.Sub(start), end: end,
		retry: retryAfter(resp.Header.Get("Retry-After"))}
	if err != nil {
		o.fail = "body: " + classify(err)
	}
	if o.status != http.StatusOK {
		o.code, o.msg = errorOf(data)
	}
	return o
}

// retryAfter reads a Retry-After header given in seconds (0 when absent or not a number of seconds).
func retryAfter(h string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(h))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(min(n, 3600)) * time.Second
}

// errorOf returns the code and message of a JSON error body {"error": {"code", "message"}}; for another
// body, code "(not JSON)" and the body's first bytes.
func errorOf(body []byte) (code, msg string) {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && (e.Error.Code != "" || e.Error.Message != "") {
		return e.Error.Code, e.Error.Message
	}
	return "(not JSON)", strings.TrimSpace(string(body))
}

// classify names why a request got no answer, briefly.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "EOF"):
		return "EOF"
	}
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return truncate(s, 60)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		n--
	}
	return s[:n] + "…"
}

// tally collects the outcomes of a row's requests; safe for concurrent use.
type tally struct {
	mu       sync.Mutex
	statuses map[string]int
	errs     map[string]int
	lats     []time.Duration
	last     time.Time
}

func newTally() *tally { return &tally{statuses: map[string]int{}, errs: map[string]int{}} }

func (t *tally) add(o outcome) {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := strconv.Itoa(o.status)
	if o.status == 0 {
		key = o.fail
	}
	t.statuses[key]++
	if o.status != 0 && o.status != http.StatusOK {
		t.errs[o.code+": "+truncate(o.msg, 120)]++
	}
	t.lats = append(t.lats, o.lat)
	if o.end.After(t.last) {
		t.last = o.end
	}
}

// unfinished counts a request cut short at the end of a phase: no answer, no latency.
func (t *tally) unfinished() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.statuses["unfinished at the end"]++
}

func (t *tally) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.lats)
}

// answered returns how many requests got an HTTP answer.
func (t *tally) answered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, v := range t.statuses {
		if _, err := strconv.Atoi(k); err == nil {
			n += v
		}
	}
	return n
}

// statusText is "200×12, 429×3, timeout×1": HTTP statuses in order, then the failures.
func (t *tally) statusText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return countsText(t.statuses, 0)
}

// errorText lists the distinct error codes and messages, the most frequent first (at most 3).
func (t *tally) errorText() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return countsText(t.errs, 3)
}

// countsText formats counts as "key×n, ..."; keys that are numbers first, in order, then the rest by count.
// limit > 0 keeps the first limit entries and says how many more there were.
func countsText(m map[string]int, limit int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, ea := strconv.Atoi(keys[i])
		b, eb := strconv.Atoi(keys[j])
		switch {
		case ea == nil && eb == nil:
			return a < b
		case ea == nil || eb == nil:
			return ea == nil
		case m[keys[i]] != m[keys[j]]:
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for i, k := range keys {
		if limit > 0 && i == limit {
			parts = append(parts, fmt.Sprintf("(%d more)", len(keys)-limit))
			break
		}
		parts = append(parts, fmt.Sprintf("%s×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// latText is "p50 / p99 / max" over every request of the tally.
func (t *tally) latText() string {
	t.mu.Lock()
	l := slices.Clone(t.lats)
	t.mu.Unlock()
	if len(l) == 0 {
		return "-"
	}
	slices.Sort(l)
	return fmt.Sprintf("%s / %s / %s", fmtDur(percentile(l, 50)), fmtDur(percentile(l, 99)), fmtDur(l[len(l)-1]))
}

func (t *tally) p99() time.Duration {
	t.mu.Lock()
	l := slices.Clone(t.lats)
	t.mu.Unlock()
	slices.Sort(l)
	return percentile(l, 99)
}

// percentile returns the p-th percentile (0 < p <= 100) of sorted by the nearest-rank method, or 0 for an
// empty slice.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// fmtDur is milliseconds below 1 s ("1.9 ms"), seconds above ("27.31 s").
func fmtDur(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
}

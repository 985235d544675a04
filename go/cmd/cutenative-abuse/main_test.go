package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

func TestBigBody(t *testing.T) {
	for _, size := range []int64{60, 61, 1000, 1001, 200_001, bigBodyBytes} {
		r, values := newBigBody(size)
		if r.size() != size {
			t.Fatalf("size %d: reader says %d bytes", size, r.size())
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != size {
			t.Fatalf("size %d: read %d bytes", size, len(data))
		}
		var req struct {
			Horizon int
			Series  []struct{ Values []float64 }
		}
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatalf("size %d: %v (starts %q, ends %q)", size, err, data[:40], data[len(data)-10:])
		}
		if req.Horizon != 12 || len(req.Series) != 1 || int64(len(req.Series[0].Values)) != values {
			t.Fatalf("size %d: horizon %d, %d series, want %d values", size, req.Horizon, len(req.Series), values)
		}
		for _, v := range req.Series[0].Values {
			if v != 1 {
				t.Fatalf("size %d: value %v", size, v)
			}
		}
		if size == bigBodyBytes && (values < 3_999_000 || values > 4_000_000) {
			t.Errorf("the 8 MB body holds %d values, want ~4M", values)
		}
	}
}

// The reader gives the same bytes whatever the reads' sizes.
func TestRepeatReaderReads(t *testing.T) {
	block := fillBlock("abc")
	want := "<<" + strings.Repeat("abc", 100_000) + ">>>"
	for _, wrap := range []func(io.Reader) io.Reader{
		func(r io.Reader) io.Reader { return r },
		iotest.OneByteReader,
		iotest.HalfReader,
		func(r io.Reader) io.Reader { return io.LimitReader(r, 1<<30) },
	} {
		r := newRepeatReader("<<", block, 3, 100_000, ">>>")
		got, err := io.ReadAll(wrap(r))
		if err != nil || string(got) != want {
			t.Fatalf("read %d bytes (err %v), want %d", len(got), err, len(want))
		}
	}
	if err := iotest.TestReader(newRepeatReader("<<", block, 3, 1000, ">>>"), []byte("<<"+strings.Repeat("abc", 1000)+">>>")); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(newRepeatReader("", block, 3, 0, "")); len(got) != 0 {
		t.Fatalf("empty reader gave %q", got)
	}
}

func TestPunctuation(t *testing.T) {
	for _, n := range []int{1, 29, 30, 31, punctBytes, 65_000} {
		s := punctText(n)
		if len(s) != n {
			t.Fatalf("punctText(%d): %d bytes", n, len(s))
		}
		if strings.Trim(s, punctuation) != "" {
			t.Fatalf("punctText(%d) holds other characters", n)
		}
	}
	var one struct{ Input string }
	if err := json.Unmarshal(embedBody(punctStrings(1, punctBytes)), &one); err != nil || len(one.Input) != punctBytes {
		t.Fatalf("one string: %v, %d bytes", err, len(one.Input))
	}
	var many struct{ Input []string }
	if err := json.Unmarshal(embedBody(punctStrings(195, 100)), &many); err != nil || len(many.Input) != 195 || len(many.Input[7]) != 100 {
		t.Fatalf("array: %v, %d strings", err, len(many.Input))
	}
	// Nothing in the punctuation needs an escape: the body is the text plus ~12 bytes.
	if b := embedBody(punctStrings(1, punctBytes)); len(b) > punctBytes+20 {
		t.Fatalf("body of %d bytes for %d of text", len(b), punctBytes)
	}
}

func TestKronosBodies(t *testing.T) {
	b := kronosCostly("kronos")
	if len(b) < 2500 || len(b) > 3500 {
		t.Errorf("the costly Kronos request is %d B, want ~3 KB", len(b))
	}
	var r struct {
		Model         string `json:"model"`
		Horizon       int    `json:"horizon"`
		SampleCount   int    `json:"sample_count"`
		Seed          *uint64
		ReturnSamples bool `json:"return_samples"`
		Series        []struct {
			Timestamps                     []string
			Open, High, Low, Close, Volume []float64
		}
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "kronos" || r.Horizon != 40 || r.SampleCount != 4096 || r.Seed != nil || r.ReturnSamples || len(r.Series) != 6 {
		t.Fatalf("costly request: %+v", r)
	}
	// Within the server's Kronos limits on a max_context 40 model: 6 x 4096 rows <= 65536, token rows
	// 6 x 4096 x min(bars + 40, 40) <= 2^20.
	if rows := 6 * 4096; rows > 65536 || rows*40 > 1<<20 {
		t.Fatalf("rows %d", rows)
	}
	for _, s := range r.Series {
		if len(s.Timestamps) != 9 || len(s.Open) != 9 || len(s.Volume) != 9 {
			t.Fatalf("series: %+v", s)
		}
		if _, err := time.Parse(time.RFC3339, s.Timestamps[8]); err != nil {
			t.Fatal(err)
		}
	}
	seed := uint64(7)
	if b := kronosBody("k", 1, 4, 2, 4, true, &seed); !bytes.Contains(b, []byte(`"seed":7`)) || !bytes.Contains(b, []byte(`"return_samples":true`)) {
		t.Fatalf("seeded request: %s", b)
	}
}

func TestShortForecastBody(t *testing.T) {
	b, err := shortForecastBody([]float64{1, 2.5}, 12)
	if err != nil || string(b) != `{"horizon":12,"series":[{"values":[1,2.5]}]}` {
		t.Fatalf("%s %v", b, err)
	}
	if len(rolloutBody) != 43 {
		t.Fatalf("the rollout body is %d bytes, the issue's is 43", len(rolloutBody))
	}
}

func TestParseScenarios(t *testing.T) {
	got, err := parseScenarios("big-bodies-48, idle-flood,hardening")
	if err != nil || len(got) != 3 || got[0] != (scenario{"big-bodies-48", 48}) || got[2].name != "hardening" {
		t.Fatalf("%v %v", got, err)
	}
	all, err := parseScenarios("all")
	if err != nil || len(all) != len(defaultScenarios) || all[1].n != 64 {
		t.Fatalf("all: %v %v", all, err)
	}
	for _, bad := range []string{"", "big-bodies-0", "big-bodies-x", "big-bodies-100000", "nope", "idle-flood,,"} {
		if _, err := parseScenarios(bad); err == nil {
			t.Errorf("parseScenarios(%q): no error", bad)
		}
	}
}

func TestParseStatus(t *testing.T) {
	const s = "Name:\tcutenative-serv\nState:\tS (sleeping)\nVmPeak:\t 9000000 kB\nVmHWM:\t  200000 kB\nVmRSS:\t  123456 kB\nThreads:\t12\n"
	rss, hwm, ok := parseStatus(s)
	if !ok || rss != 123456*1024 || hwm != 200000*1024 {
		t.Fatalf("%d %d %v", rss, hwm, ok)
	}
	if _, _, ok := parseStatus("Name:\tx\nState:\tZ (zombie)\n"); ok {
		t.Fatal("a zombie's status has no VmRSS")
	}
}

func TestProcAlive(t *testing.T) {
	for stat, want := range map[string]bool{
		"123 (cutenative-serv) S 1 2 3":    true,
		"123 (cutenative-serv) R 1 2 3":    true,
		"123 (cutenative-serv) Z 1 2 3":    false,
		"123 (a) b) (c) D 1 2 3":           true,
		"123 (a) Z) (c) X 1":               false,
		"garbage":                          false,
		"123 (x)":                          false,
		"123 (weird name) t 1 2 3 4 5 6 7": true,
	} {
		if got := procAlive(stat); got != want {
			t.Errorf("procAlive(%q) = %v", stat, got)
		}
	}
}

func TestMonitorWithoutPID(t *testing.T) {
	m := newMonitor(0, 0)
	defer m.close()
	if w := m.end(m.begin()); w.measured || w.String() != "-" {
		t.Fatalf("window %+v", w)
	}
	if !m.alive() || m.killed() != 0 {
		t.Fatal("no pid: alive, never killed")
	}
}

func TestWindowString(t *testing.T) {
	w := window{measured: true, before: 312_400_000, peak: 4_310_000_000, after: -1, hwm: true}
	if got := w.String(); got != "312 MB / 4.31 GB (HWM) / gone" {
		t.Fatal(got)
	}
}

func TestPercentileAndFormats(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	if percentile(nil, 50) != 0 || percentile(ms(1, 2, 3, 4), 50) != 2*time.Millisecond || percentile(ms(1, 2, 3, 4), 99) != 4*time.Millisecond {
		t.Fatal("percentile")
	}
	if fmtDur(1900*time.Microsecond) != "1.9 ms" || fmtDur(27310*time.Millisecond) != "27.31 s" {
		t.Fatal(fmtDur(1900*time.Microsecond), fmtDur(27310*time.Millisecond))
	}
}

func TestTally(t *testing.T) {
	tl := newTally()
	tl.add(outcome{status: 200, lat: time.Millisecond})
	tl.add(outcome{status: 429, code: "overloaded", msg: "the request queue is full", lat: 2 * time.Millisecond})
	tl.add(outcome{status: 400, code: "invalid_argument", msg: strings.Repeat("x", 300), lat: 3 * time.Millisecond})
	tl.add(outcome{status: 400, code: "invalid_argument", msg: strings.Repeat("x", 300), lat: 4 * time.Millisecond})
	tl.add(outcome{fail: "timeout", lat: 40 * time.Second})
	if got := tl.statusText(); got != "200×1, 400×2, 429×1, timeout×1" {
		t.Fatal(got)
	}
	if tl.answered() != 4 || tl.count() != 5 {
		t.Fatal(tl.answered(), tl.count())
	}
	e := tl.errorText()
	if !strings.HasPrefix(e, "invalid_argument: "+strings.Repeat("x", 120)+"…×2, overloaded: the request queue is full×1") {
		t.Fatal(e)
	}
	if got := tl.latText(); got != "3.0 ms / 40.00 s / 40.00 s" {
		t.Fatal(got)
	}
	if got := countsText(map[string]int{"a": 1, "b": 5, "c": 2, "d": 1}, 2); got != "b×5, c×2, (2 more)" {
		t.Fatal(got)
	}
}

func TestSmallHelpers(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 3999981: "3,999,981", -1234567: "-1,234,567"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q", n, got)
		}
	}
	for h, want := range map[string]time.Duration{"": 0, "1": time.Second, " 7 ": 7 * time.Second, "0": 0, "-3": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0, "999999": time.Hour} {
		if got := retryAfter(h); got != want {
			t.Errorf("retryAfter(%q) = %v", h, got)
		}
	}
	if attackPause(outcome{status: 400}) != 100*time.Millisecond || attackPause(outcome{status: 429, retry: time.Second}) != time.Second ||
		attackPause(outcome{status: 503, retry: time.Hour}) != 5*time.Second {
		t.Error("attackPause")
	}
}

func TestErrorOf(t *testing.T) {
	if c, m := errorOf([]byte(`{"error":{"code":"body_too_large","message":"the request body exceeds 8 bytes"}}`)); c != "body_too_large" ||
		m != "the request body exceeds 8 bytes" {
		t.Fatal(c, m)
	}
	if c, m := errorOf([]byte("431 Request Header Fields Too Large")); c != "(not JSON)" || m != "431 Request Header Fields Too Large" {
		t.Fatal(c, m)
	}
}

func TestClassify(t *testing.T) {
	for err, want := range map[error]string{
		context.DeadlineExceeded: "timeout",
		fmt.Errorf("Post: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET}): "reset",
		fmt.Errorf("dial: %w", syscall.ECONNREFUSED):                              "refused",
		fmt.Errorf("Post %q: %w", "http://x", io.EOF):                             "EOF",
		errors.New("Post \"http://x\": something odd"):                            "something odd",
	} {
		if got := classify(err); got != want {
			t.Errorf("classify(%v) = %q, want %q", err, got, want)
		}
	}
	if got := truncate("ab€cd", 3); got != "ab…" {
		t.Fatal(got)
	}
}

func TestCell(t *testing.T) {
	r := row{scenario: "s", sent: "a|b\nc", notes: ""}
	if got := r.format(); got != `| s | a\|b c | - | - | - | - | - | - |` {
		t.Fatal(got)
	}
	if strings.Count(tableHeader, "\n") != 1 || strings.Count(strings.Split(tableHeader, "\n")[0], "|") != 9 {
		t.Fatal("header")
	}
}

func TestCostlier(t *testing.T) {
	for _, tt := range []struct {
		outs []outcome
		want int
	}{
		{[]outcome{{status: 200, lat: 4}, {status: 200, lat: 9}}, 1},
		{[]outcome{{status: 200, lat: 9}, {status: 200, lat: 4}}, 0},
		{[]outcome{{status: 400, lat: 9}, {status: 200, lat: 4}}, 1},
		{[]outcome{{status: 400, lat: 9}, {status: 413, lat: 4}}, 0},
	} {
		if got := costlier(tt.outs); got != tt.want {
			t.Errorf("costlier(%v) = %d", tt.outs, got)
		}
	}
}

func TestSamplesOf(t *testing.T) {
	b := []byte(`{"forecasts":[{"id":"a","samples":{"open":[[1,2]]}},{"samples":{"open":[[3]]}}]}`)
	if got := string(samplesOf(b)); got != `{"open":[[1,2]]}{"open":[[3]]}` {
		t.Fatal(got)
	}
	if samplesOf([]byte(`{"forecasts":[{"id":"a"}]}`)) != nil || samplesOf([]byte(`nope`)) != nil {
		t.Fatal("no samples")
	}
}

func TestCheckLoopback(t *testing.T) {
	lookup := func(_ context.Context, host string) ([]net.IPAddr, error) {
		switch host {
		case "localhost":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("::1")}}, nil
		case "mixed.test":
			return []net.IPAddr{{IP: net.ParseIP("127.0.0.1")}, {IP: net.ParseIP("10.1.2.3")}}, nil
		}
		return nil, errors.New("no such host")
	}
	for u, wantErr := range map[string]string{
		"http://127.0.0.1:8080": "",
		"http://[::1]:8080":     "",
		"http://localhost:1":    "",
		"https://127.0.0.1":     "scheme",
		"http://10.0.0.1:8080":  "not a loopback",
		"http://mixed.test":     "resolves to 10.1.2.3",
		"http://nowhere.test":   "no such host",
		"http://:8080":          "no host",
	} {
		err := checkLoopback(context.Background(), u, lookup)
		if (wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), wantErr)) {
			t.Errorf("checkLoopback(%q) = %v, want %q", u, err, wantErr)
		}
	}
	if err := loopbackOnly("tcp", "10.0.0.1:80", nil); err == nil {
		t.Error("loopbackOnly let 10.0.0.1 through")
	}
	if err := loopbackOnly("tcp", "127.0.0.1:80", nil); err != nil {
		t.Error(err)
	}
}

// A whole run against a stand-in server that refuses every forecast at once: the rows record the 400s.
func TestRunAgainstRefusingServer(t *testing.T) {
	var sawJSON, sawOther atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("Content-Type") == "application/json" {
			sawJSON.Add(1)
		} else {
			sawOther.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":"invalid_argument","message":"horizon: 65536 is too long"}}`)
	}))
	defer srv.Close()
	var out, log bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL, "-scenarios", "deadline,big-bodies-2", "-csv", ""}, &out, &log)
	if err != nil {
		t.Fatal(err, log.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "| scenario |") {
		t.Fatalf("output:\n%s", out.String())
	}
	if !strings.Contains(lines[2], "| deadline |") || !strings.Contains(lines[2], "400×5") ||
		!strings.Contains(lines[2], "invalid_argument: horizon: 65536 is too long×5") {
		t.Fatalf("deadline row: %s", lines[2])
	}
	if !strings.Contains(lines[3], "| big-bodies-2 |") || !strings.Contains(lines[3], "400×2") || !strings.Contains(lines[3], "2 of 2 got an HTTP answer") {
		t.Fatalf("big-bodies row: %s", lines[3])
	}
	if sawJSON.Load() != 7 || sawOther.Load() != 0 {
		t.Fatalf("%d requests with Content-Type: application/json, %d without", sawJSON.Load(), sawOther.Load())
	}
}

func TestRunRefusesRemoteURL(t *testing.T) {
	err := run(context.Background(), []string{"-url", "http://192.0.2.1:8080", "-scenarios", "hardening"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatal(err)
	}
}

// The idle flood and the checklist against a stand-in server that answers everything with 200.
func TestIdleFloodAndHardening(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"forecasts":[{"samples":{"open":[[1]]}}]}`)
	}))
	defer srv.Close()
	var out, log bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL, "-scenarios", "idle-flood,hardening", "-conns", "20", "-csv", "",
		"-header=false"}, &out, &log)
	if err != nil {
		t.Fatal(err, log.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4+6 {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, want := range []string{"200×20", "20 dialled", "20 answered; 20 still open"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("flood row lacks %q: %s", want, lines[0])
		}
	}
	for i, want := range []string{"accepted: yes", "accepted: yes", "accepted: yes", "431 answered as JSON: no (status 200",
		"refused naming quantiles[0]: no", "identical samples: yes"} {
		if !strings.Contains(lines[4+i], want) {
			t.Errorf("checklist row %d lacks %q: %s", i, want, lines[4+i])
		}
	}
}

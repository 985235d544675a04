package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// abuser holds what every scenario needs.
type abuser struct {
	base, host                     string // http://host:port, host:port
	duration, timeout, longTimeout time.Duration
	conns, attackers               int
	kronosModel                    string
	shortBody                      []byte
	mon                            *monitor
	log                            io.Writer
}

const (
	settleMax  = 60 * time.Second
	settleFast = 200 * time.Millisecond
	afterPause = 2 * time.Second // before "RSS after" in the memory scenarios
)

func (c *abuser) short() request { return post("/v1/forecast", c.shortBody) }

func get(path string) request { return request{method: http.MethodGet, path: path} }

const shortSent = "short forecast (last 120 values of airpassengers.csv, horizon 12)"

// pauseForAfter waits afterPause before RSS after is read (no wait without a process to measure).
func (c *abuser) pauseForAfter(ctx context.Context) {
	if c.mon.pid > 0 {
		sleepCtx(ctx, afterPause)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (c *abuser) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "  "+format+"\n", args...)
}

// measure sends r back to back from one client until d has passed (the request in flight then completes).
func (c *abuser) measure(ctx context.Context, r request, d time.Duration) *tally {
	t := newTally()
	client := newClient(1)
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		o := c.do(ctx, client, r, c.timeout)
		if ctx.Err() != nil {
			break
		}
		t.add(o)
		if o.status != http.StatusOK {
			sleepCtx(ctx, failurePause)
		}
	}
	return t
}

// attackPause is how long a looping client waits after an answer other than 200: the answer's Retry-After
// (at most 5 s), else 100 ms. The scenarios measure what expensive requests cost, not a flood of refusals.
func attackPause(o outcome) time.Duration {
	if o.retry > 0 {
		return min(o.retry, 5*time.Second)
	}
	return 100 * time.Millisecond
}

// attack starts n clients looping on r (each request within timeout) until stop is called; requests that
// stop cuts short count as "unfinished" (no latency). After an answer other than 200 a client pauses
// (attackPause).
func (c *abuser) attack(ctx context.Context, n int, r request, timeout time.Duration) (t *tally, stop func()) {
	t = newTally()
	actx, cancel := context.WithCancel(ctx)
	client := newClient(n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for actx.Err() == nil {
				o := c.do(actx, client, r, timeout)
				if actx.Err() != nil {
					t.unfinished()
					return
				}
				t.add(o)
				if o.status != http.StatusOK {
					sleepCtx(actx, attackPause(o))
				}
			}
		}()
	}
	return t, func() {
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
	}
}

// settle waits (at most settleMax) until each of rs is answered within settleFast twice in a row: the
// server has finished what an earlier phase left running. It returns a note when that took a while.
func (c *abuser) settle(ctx context.Context, rs ...request) string {
	if len(rs) == 0 {
		rs = []request{c.short()}
	}
	start := time.Now()
	client := newClient(1)
	defer client.CloseIdleConnections()
	fast := 0
	for ctx.Err() == nil && time.Since(start) < settleMax && c.mon.alive() {
		slow := false
		for _, r := range rs {
			if o := c.do(ctx, client, r, c.timeout); o.status == 0 || o.lat > settleFast {
				slow = true
			}
		}
		if !slow {
			if fast++; fast == 2 {
				break
			}
			continue
		}
		fast = 0
		sleepCtx(ctx, 100*time.Millisecond)
	}
	el := time.Since(start)
	switch {
	case fast < 2:
		return fmt.Sprintf("not settled after %.0f s (requests slower than %v) before the phase", el.Seconds(), settleFast)
	case el > 2*time.Second:
		return fmt.Sprintf("server settled %.1f s after the previous phase", el.Seconds())
	}
	return ""
}

func joinNotes(notes ...string) string {
	var out []string
	for _, n := range notes {
		if n != "" {
			out = append(out, n)
		}
	}
	return strings.Join(out, "; ")
}

// bigBodies sends n 8,000,000-byte forecast bodies at once.
func (c *abuser) bigBodies(ctx context.Context, name string, n int) []row {
	_, values := newBigBody(bigBodyBytes)
	body := func() (io.Reader, int64) {
		r, _ := newBigBody(bigBodyBytes)
		return r, r.size()
	}
	w := c.mon.begin()
	client := newClient(n)
	t := newTally()
	start := time.Now()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.add(c.do(ctx, client, request{method: http.MethodPost, path: "/v1/forecast", body: body}, c.longTimeout))
		}()
	}
	wg.Wait()
	client.CloseIdleConnections()
	last := t.last.Sub(start)
	c.pauseForAfter(ctx)
	w = c.mon.end(w)
	return []row{{scenario: name,
		sent: fmt.Sprintf("%d concurrent POST /v1/forecast, 8,000,000 B each (lazily generated): one series of %s values "+
			"`1,` (a series may hold 100,000), horizon 12", n, thousands(values)),
		t: t, mem: w, alive: c.aliveText(),
		notes: fmt.Sprintf("%d of %d got an HTTP answer; last answer (or failure) %.1f s after the start; RSS after: %v later",
			t.answered(), n, last.Seconds(), afterPause)}}
}

// Idle flood: openers dialling at once, how long each waits for its /livez answer, and when the open phase
// stops starting new connections (a server that caps connections leaves the rest in the kernel's queue).
const (
	floodOpeners   = 256
	floodAnswer    = 5 * time.Second
	floodOpenPhase = 30 * time.Second
)

// openIdle opens a connection, sends GET /livez and reads the answer (within floodAnswer), leaving the
// connection open.
func (c *abuser) openIdle(ctx context.Context) (net.Conn, outcome) {
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := dialer.DialContext(dctx, "tcp", c.host)
	if err != nil {
		return nil, outcome{fail: "dial: " + classify(err), lat: time.Since(start), end: time.Now()}
	}
	_ = conn.SetDeadline(time.Now().Add(floodAnswer))
	defer conn.SetDeadline(time.Time{})
	if _, err := io.WriteString(conn, "GET /livez HTTP/1.1\r\nHost: "+c.host+"\r\n\r\n"); err != nil {
		return conn, outcome{fail: classify(err), lat: time.Since(start), end: time.Now()}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return conn, outcome{fail: classify(err), lat: time.Since(start), end: time.Now()}
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	o := outcome{status: resp.StatusCode, body: body, lat: time.Since(start), end: time.Now()}
	if o.status != http.StatusOK {
		o.code, o.msg = errorOf(body)
	}
	return conn, o
}

// stillOpen counts the connections the server has not closed (a read finds no EOF or error but a timeout,
// or late data).
func stillOpen(conns []net.Conn) int {
	var n int
	var mu sync.Mutex
	var wg sync.WaitGroup
	ch := make(chan net.Conn)
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 1)
			for conn := range ch {
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
				_, err := conn.Read(buf)
				if ne, ok := err.(net.Error); err == nil || (ok && ne.Timeout()) {
					mu.Lock()
					n++
					mu.Unlock()
				}
			}
		}()
	}
	for _, conn := range conns {
		if conn != nil {
			ch <- conn
		}
	}
	close(ch)
	wg.Wait()
	return n
}

// idleFlood fills the server with idle keep-alive connections, then times health checks and a forecast on
// fresh connections.
func (c *abuser) idleFlood(ctx context.Context) []row {
	w := c.mon.begin()
	conns := make([]net.Conn, c.conns)
	opens := newTally()
	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range floodOpeners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				conn, o := c.openIdle(ctx)
				conns[i] = conn
				opens.add(o)
			}
		}()
	}
	dialled := 0
	for i := range conns {
		if ctx.Err() != nil || time.Since(start) > floodOpenPhase {
			break
		}
		jobs <- i
		dialled++
	}
	close(jobs)
	wg.Wait()
	openTime := time.Since(start)
	c.logf("%d connections in %.2f s: %s", c.conns, openTime.Seconds(), opens.statusText())

	probes := []struct {
		sent string
		r    request
	}{
		{"GET /readyz on a fresh connection, during the flood", get("/readyz")},
		{"GET /livez on a fresh connection, during the flood", get("/livez")},
		{"POST /v1/forecast " + shortSent + " on a fresh connection, during the flood", c.short()},
	}
	tallies := make([]*tally, len(probes))
	for i := range probes {
		tallies[i] = newTally()
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := newClient(0)
			tallies[i].add(c.do(ctx, client, probes[i].r, c.timeout))
		}()
	}
	wg.Wait()
	open := stillOpen(conns)
	for _, conn := range conns {
		if conn != nil {
			conn.Close()
		}
	}
	w = c.mon.end(w)
	alive := c.aliveText()
	rows := []row{{scenario: "idle-flood", t: opens, mem: w, alive: alive,
		sent: fmt.Sprintf("%d connections (%d dialling at once), each GET /livez (answer awaited %v), then left idle", c.conns,
			floodOpeners, floodAnswer),
		notes: fmt.Sprintf("%d dialled (no new one after %v) in %.2f s; %d answered; %d still open after the probes (the server "+
			"had not closed them)", dialled, floodOpenPhase, openTime.Seconds(), opens.answered(), open)}}
	for i, p := range probes {
		rows = append(rows, row{scenario: "idle-flood", sent: p.sent, t: tallies[i], alive: alive,
			notes: fmt.Sprintf("timeout %v", c.timeout)})
	}
	return rows
}

// rolloutStarve measures a short forecast alone and while 1 and c.attackers clients loop on the 43-byte
// horizon-16384 request.
func (c *abuser) rolloutStarve(ctx context.Context) []row {
	var rows []row
	for _, n := range []int{0, 1, c.attackers} {
		settled := c.settle(ctx)
		w := c.mon.begin()
		atk, stop := c.attack(ctx, n, post("/v1/forecast", []byte(rolloutBody)), c.timeout)
		t := c.measure(ctx, c.short(), c.duration)
		stop()
		w = c.mon.end(w)
		sent := fmt.Sprintf("%s from 1 client for %v, alone (baseline)", shortSent, c.duration)
		note := ""
		if n > 0 {
			sent = fmt.Sprintf("%s from 1 client for %v while %d client(s) loop on `%s` (%d B)", shortSent, c.duration, n,
				rolloutBody, len(rolloutBody))
			note = fmt.Sprintf("the looping clients' requests: %s; %s", atk.statusText(), atk.latText())
			if e := atk.errorText(); e != "-" {
				note += "; " + e
			}
		}
		rows = append(rows, row{scenario: "rollout-starve", sent: sent, t: t, mem: w, alive: c.aliveText(),
			notes: joinNotes(note, settled)})
		c.logf("%d attackers: short p50/p99/max %s", n, t.latText())
	}
	return rows
}

// embedSingle is one punctuation embedding request.
type embedSingle struct {
	sent string
	body []byte
}

func embedSingles() []embedSingle {
	return []embedSingle{
		{fmt.Sprintf("one string of %d B of punctuation", punctBytes), embedBody(punctStrings(1, punctBytes))},
		{fmt.Sprintf("%d strings of 100 B of punctuation (%d B)", punctBytes/100, punctBytes), embedBody(punctStrings(punctBytes/100, 100))},
		{"1300 strings of 100 B of punctuation (130000 B)", embedBody(punctStrings(1300, 100))},
	}
}

// costlier returns the index (0 or 1) of the first two singles that cost more: the slower one among those
// answered 200, else the first.
func costlier(outs []outcome) int {
	best := 0
	for i := range min(2, len(outs)) {
		if outs[i].status == http.StatusOK && (outs[best].status != http.StatusOK || outs[i].lat > outs[best].lat) {
			best = i
		}
	}
	return best
}

// runSingles sends each of the first k punctuation embeddings once, in turn.
func (c *abuser) runSingles(ctx context.Context, k int) ([]embedSingle, []outcome, []*tally) {
	singles := embedSingles()[:k]
	var outs []outcome
	var ts []*tally
	client := newClient(0)
	for _, s := range singles {
		c.settle(ctx)
		o := c.do(ctx, client, post("/v1/embeddings", s.body), c.timeout)
		t := newTally()
		t.add(o)
		outs, ts = append(outs, o), append(ts, t)
		c.logf("embedding %s: %d %s %s", s.sent, o.status, o.fail, fmtDur(o.lat))
	}
	return singles, outs, ts
}

// embedStarve measures punctuation embeddings alone, then LoRA search and a short forecast alone and while 2
// and c.attackers clients loop on the costlier 19.5 KB punctuation request.
func (c *abuser) embedStarve(ctx context.Context) []row {
	var rows []row
	singles, outs, ts := c.runSingles(ctx, 3)
	for i, s := range singles {
		rows = append(rows, row{scenario: "embed-starve", sent: "one POST /v1/embeddings: " + s.sent, t: ts[i],
			alive: c.aliveText(), notes: fmt.Sprintf("body %d B; timeout %v", len(s.body), c.timeout)})
	}
	pick := costlier(outs)
	attackBody := singles[pick].body
	search := post("/v1/loras/search", []byte(loraBody))
	for _, n := range []int{0, 2, c.attackers} {
		settled := c.settle(ctx, c.short(), search)
		w := c.mon.begin()
		atk, stop := c.attack(ctx, n, post("/v1/embeddings", attackBody), c.timeout)
		var tl, tf *tally
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); tl = c.measure(ctx, search, c.duration) }()
		go func() { defer wg.Done(); tf = c.measure(ctx, c.short(), c.duration) }()
		wg.Wait()
		stop()
		w = c.mon.end(w)
		during := "alone (baseline)"
		note := ""
		if n > 0 {
			during = fmt.Sprintf("while %d client(s) loop on POST /v1/embeddings %s", n, singles[pick].sent)
			note = fmt.Sprintf("the looping clients' requests: %s; %s", atk.statusText(), atk.latText())
			if e := atk.errorText(); e != "-" {
				note += "; " + e
			}
		}
		alive := c.aliveText()
		rows = append(rows,
			row{scenario: "embed-starve", sent: fmt.Sprintf("POST /v1/loras/search `%s` from 1 client for %v, %s", loraBody, c.duration, during),
				t: tl, mem: w, alive: alive, notes: joinNotes(note, settled)},
			row{scenario: "embed-starve", sent: fmt.Sprintf("%s from 1 client at the same time, %s", shortSent, during),
				t: tf, alive: alive})
		c.logf("%d attackers: lora p50/p99/max %s; short %s", n, tl.latText(), tf.latText())
	}
	return rows
}

// kronosMemory sends the 3 KB Kronos request once.
func (c *abuser) kronosMemory(ctx context.Context) []row {
	body := kronosCostly(c.kronosModel)
	w := c.mon.begin()
	t := newTally()
	o := c.do(ctx, newClient(0), post("/v1/forecast", body), c.longTimeout)
	t.add(o)
	c.pauseForAfter(ctx)
	w = c.mon.end(w)
	return []row{{scenario: "kronos-memory",
		sent: fmt.Sprintf("one POST /v1/forecast to %q, %d B: 6 tasks of 9 OHLCV bars, sample_count 4096, horizon 40", c.kronosModel, len(body)),
		t:    t, mem: w, alive: c.aliveText(),
		notes: fmt.Sprintf("answer: %s; RSS after: %v after the answer", evidence(o), afterPause)}}
}

// deadline sends five horizon-65536 requests at once.
func (c *abuser) deadline(ctx context.Context) []row {
	w := c.mon.begin()
	t := newTally()
	client := newClient(deadlineReqs)
	start := time.Now()
	ends := make([]time.Duration, deadlineReqs)
	var wg sync.WaitGroup
	for i := range deadlineReqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := c.do(ctx, client, post("/v1/forecast", []byte(deadlineBody)), c.longTimeout)
			t.add(o)
			ends[i] = o.end.Sub(start)
		}()
	}
	wg.Wait()
	w = c.mon.end(w)
	slices.Sort(ends)
	var at []string
	for _, e := range ends {
		at = append(at, fmt.Sprintf("%.1f", e.Seconds()))
	}
	return []row{{scenario: "deadline",
		sent: fmt.Sprintf("%d concurrent POST /v1/forecast `%s` (%d B each)", deadlineReqs, deadlineBody, len(deadlineBody)),
		t:    t, mem: w, alive: c.aliveText(),
		notes: fmt.Sprintf("answers at %s s after the start (timeout %v)", strings.Join(at, ", "), c.longTimeout)}}
}

// combined measures a short forecast while c.attackers clients loop on each endpoint's most expensive small
// request.
func (c *abuser) combined(ctx context.Context) []row {
	singles, outs, _ := c.runSingles(ctx, 2)
	pick := costlier(outs)
	kronos := kronosCostly(c.kronosModel)
	settled := c.settle(ctx)
	w := c.mon.begin()
	n := c.attackers
	atkR, stopR := c.attack(ctx, n, post("/v1/forecast", []byte(rolloutBody)), c.timeout)
	atkE, stopE := c.attack(ctx, n, post("/v1/embeddings", singles[pick].body), c.timeout)
	atkK, stopK := c.attack(ctx, n, post("/v1/forecast", kronos), c.longTimeout)
	t := c.measure(ctx, c.short(), c.duration)
	stopR()
	stopE()
	stopK()
	w = c.mon.end(w)
	verdict := "met"
	if t.p99() > 50*time.Millisecond || t.answered() == 0 {
		verdict = "not met"
	}
	desc := func(name string, a *tally) string {
		s := fmt.Sprintf("%s: %s; %s", name, a.statusText(), a.latText())
		if e := a.errorText(); e != "-" {
			s += "; " + e
		}
		return s
	}
	c.logf("short p50/p99/max %s", t.latText())
	return []row{{scenario: "combined",
		sent: fmt.Sprintf("%s from 1 client for %v while %d clients each loop on `%s` (%d B), on POST /v1/embeddings %s (%d B, the "+
			"costlier alone: %s against %s) and on the %d B Kronos request", shortSent, c.duration, n, rolloutBody, len(rolloutBody),
			singles[pick].sent, len(singles[pick].body), fmtDur(outs[pick].lat), fmtDur(outs[1-pick].lat), len(kronos)),
		t: t, mem: w, alive: c.aliveText(),
		notes: joinNotes(fmt.Sprintf("target p99 <= 50 ms: %s", verdict), "looping clients: "+desc("rollout", atkR),
			desc("embeddings", atkE), desc("kronos", atkK), settled)}}
}

// thousands writes n with commas: 3,999,981.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// evidence is an answer's status and first bytes.
func evidence(o outcome) string {
	if o.status == 0 {
		return "no answer: " + o.fail
	}
	return fmt.Sprintf("%d %s", o.status, truncate(strings.TrimSpace(string(o.body)), 100))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func accepted(o outcome) bool { return o.status >= 200 && o.status < 300 }

// bigHeader sends a request with a 100 KB header over a raw connection and reads the answer.
func (c *abuser) bigHeader(ctx context.Context) outcome {
	start := time.Now()
	conn, err := dialer.DialContext(ctx, "tcp", c.host)
	if err != nil {
		return outcome{fail: "dial: " + classify(err), end: time.Now()}
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(c.timeout))
	go func() {
		_, _ = io.WriteString(conn, "GET /v1/models HTTP/1.1\r\nHost: "+c.host+"\r\nX-Pad: "+strings.Repeat("a", 100<<10)+"\r\n\r\n")
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return outcome{fail: classify(err), lat: time.Since(start), end: time.Now()}
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	o := outcome{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: body, lat: time.Since(start), end: time.Now()}
	if o.status != http.StatusOK {
		o.code, o.msg = errorOf(body)
	}
	return o
}

// samplesOf returns the samples of every forecast of a Kronos answer.
func samplesOf(body []byte) []byte {
	var r struct {
		Forecasts []struct {
			Samples json.RawMessage `json:"samples"`
		} `json:"forecasts"`
	}
	if json.Unmarshal(body, &r) != nil || len(r.Forecasts) == 0 {
		return nil
	}
	var out []byte
	for _, f := range r.Forecasts {
		if len(f.Samples) == 0 {
			return nil
		}
		out = append(out, f.Samples...)
	}
	return out
}

// hardening answers a checklist of yes/no questions, each with its evidence.
func (c *abuser) hardening(ctx context.Context) []row {
	client := newClient(0)
	var rows []row
	add := func(sent, answer string, outs ...outcome) {
		t := newTally()
		for _, o := range outs {
			t.add(o)
		}
		var ev []string
		for _, o := range outs {
			ev = append(ev, evidence(o))
		}
		rows = append(rows, row{scenario: "hardening", sent: sent, t: t, alive: c.aliveText(),
			notes: answer + " — " + strings.Join(ev, " ‖ ")})
	}
	fc := c.short()

	r := fc
	r.header = map[string]string{"Content-Type": "text/plain"}
	o := c.do(ctx, client, r, c.timeout)
	add("POST /v1/forecast (a valid short forecast) with Content-Type: text/plain", "accepted: "+yesNo(accepted(o)), o)

	r = fc
	r.host = "evil.example"
	o = c.do(ctx, client, r, c.timeout)
	add("POST /v1/forecast (a valid short forecast) with Host: evil.example", "accepted: "+yesNo(accepted(o)), o)

	r = fc
	r.header = map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}
	o = c.do(ctx, client, r, c.timeout)
	add("POST /v1/forecast (a valid short forecast) with Origin: https://evil.example, Sec-Fetch-Site: cross-site",
		"accepted: "+yesNo(accepted(o)), o)

	o = c.bigHeader(ctx)
	isJSON := o.status != 0 && json.Valid(o.body) && strings.HasPrefix(o.ctype, "application/json")
	add("GET /v1/models with a 102,400 B header (X-Pad), raw connection",
		fmt.Sprintf("431 answered as JSON: %s (status %d, Content-Type %q)", yesNo(o.status == 431 && isJSON), o.status, o.ctype), o)

	q, _ := json.Marshal(map[string]any{"horizon": 12, "quantiles": []float64{1e-300},
		"series": []map[string]any{{"values": []float64{112, 118, 132, 129, 121, 135, 148, 148, 136, 119, 104, 118}}}})
	o = c.do(ctx, client, post("/v1/forecast", q), c.timeout)
	refused := o.status >= 400 && o.status < 500 && strings.Contains(o.msg, "quantiles[0]")
	add("POST /v1/forecast with \"quantiles\":[1e-300]", "refused naming quantiles[0]: "+yesNo(refused), o)

	kb := kronosBody(c.kronosModel, 1, 4, 2, 4, true, nil)
	o1 := c.do(ctx, client, post("/v1/forecast", kb), c.timeout)
	o2 := c.do(ctx, client, post("/v1/forecast", kb), c.timeout)
	s1, s2 := samplesOf(o1.body), samplesOf(o2.body)
	same := o1.status == http.StatusOK && o2.status == http.StatusOK && len(s1) > 0 && bytes.Equal(s1, s2)
	answer := "identical samples: " + yesNo(same)
	if len(s1) > 0 && len(s2) > 0 {
		answer += fmt.Sprintf(" (samples %s ‖ %s)", truncate(string(s1), 60), truncate(string(s2), 60))
	}
	add(fmt.Sprintf("two POST /v1/forecast to %q without seed: sample_count 4, return_samples, horizon 2 (%d B)", c.kronosModel, len(kb)),
		answer, o1, o2)
	return rows
}

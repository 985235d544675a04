// Command cutenative-abuse reproduces, against a cutenative server on this machine, the findings of the
// request-cost and connection-abuse issue, and prints one markdown table so that the same command gives the
// numbers before a fix and after it:
//
//	| scenario | what was sent | statuses | errors (code: message) | p50 / p99 / max | server RSS before / peak / after | alive | notes |
//
// Scenarios (-scenarios, comma-separated; each bounded in time):
//
//	big-bodies-N    N concurrent POST /v1/forecast bodies of 8,000,000 bytes (one series of ~4M values, over
//	                the 100,000 values a series may hold), generated lazily; answers, time to the last one, RSS
//	idle-flood      -conns connections each send GET /livez and stay open idle; then GET /readyz, GET /livez
//	                and a short forecast on fresh connections (each within -timeout)
//	rollout-starve  a short forecast's latency from one client for -duration, alone and while 1 and -attackers
//	                clients loop on the 43-byte horizon-16384 request
//	embed-starve    single punctuation embeddings (one 19.5 KB string, 195 strings of 100 bytes, 1300 strings
//	                of 100 bytes), then LoRA search and short-forecast latency alone and while 2 and -attackers
//	                clients loop on the costlier of the two 19.5 KB requests
//	kronos-memory   one 3 KB Kronos request (6 tasks x 4096 samples x horizon 40): status, latency, RSS
//	deadline        five concurrent horizon-65536 Chronos-2 requests: statuses and time to each answer
//	combined        short-forecast latency while -attackers clients loop on each of the rollout, punctuation
//	                embedding and 3 KB Kronos requests at once (target after the fix: p99 <= 50 ms)
//	hardening       a yes/no row per check: text/plain accepted, Host: evil.example accepted, cross-site
//	                Origin accepted, Go's 431 answered as JSON, quantile 1e-300 refused naming quantiles[0],
//	                two unseeded Kronos requests give identical samples
//
// Clients looping on an expensive request pause after an answer other than 200 for its Retry-After (at most
// 5 s), else 100 ms: the scenarios measure what expensive requests cost, not a flood of refusals.
//
// Non-200 answers are results, not failures: each row counts the statuses and lists the distinct error
// codes and messages (first 120 characters). Latencies are over every request of the row, answered or not
// (a request that timed out counts with its timeout). RSS comes from /proc/<pid>/status of -pid: VmRSS
// before and after, the peak from VmHWM after resetting it (writing 5 to /proc/<pid>/clear_refs) or, where
// that is not permitted, from VmRSS sampled every 10 ms. If the server's RSS passes -rss-limit-gb the tool
// kills it (SIGKILL) and says so.
//
// It only talks to loopback addresses (127.0.0.0/8, ::1): the URL's host must be or resolve to one, and
// every connection is checked again when dialled. Every JSON POST carries Content-Type: application/json
// (but the text/plain check).
//
// Usage:
//
//	cutenative-abuse -url http://127.0.0.1:8080 -pid PID -scenarios rollout-starve,hardening -duration 10s
//	cutenative-abuse -free-port     # print a free loopback port (for scripts) and exit
//	cutenative-abuse -url URL -pid PID -wait-ready 120s   # until GET /readyz answers 200
//	cutenative-abuse -header-only   # the table's header
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"
)

// The requests of the issue.
const (
	bigBodyBytes = 8_000_000
	rolloutBody  = `{"horizon":16384,"series":[{"values":[1]}]}`
	deadlineBody = `{"horizon":65536,"series":[{"values":[1]}]}`
	loraBody     = `{"prompt":"a knight in shining armour"}`
	punctBytes   = 19_500 // the punctuation embedding: 19.5 KB
	deadlineReqs = 5
)

const (
	maxDuration   = 5 * time.Minute
	maxConns      = 16384
	maxAttackers  = 256
	maxBigBodies  = 256
	scenarioLimit = 15 * time.Minute // no scenario runs longer
	failurePause  = 10 * time.Millisecond
)

var defaultScenarios = []string{"big-bodies-48", "big-bodies-64", "idle-flood", "rollout-starve", "embed-starve",
	"kronos-memory", "deadline", "combined", "hardening"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "cutenative-abuse:", err)
		}
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("cutenative-abuse", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rawURL := fs.String("url", "http://127.0.0.1:8080", "server base URL (loopback only)")
	scenFlag := fs.String("scenarios", strings.Join(defaultScenarios, ","), "comma-separated scenarios (big-bodies-N, "+
		"idle-flood, rollout-starve, embed-starve, kronos-memory, deadline, combined, hardening; all)")
	duration := fs.Duration("duration", 10*time.Second, "duration of each measuring phase (at most 5m)")
	pid := fs.Int("pid", 0, "the server's process id, for its RSS and whether it is alive (0: not measured)")
	timeout := fs.Duration("timeout", 40*time.Second, "per-request timeout")
	longTimeout := fs.Duration("long-timeout", 120*time.Second, "per-request timeout of the big bodies, the Kronos "+
		"memory request and the deadline requests")
	conns := fs.Int("conns", 4096, "idle connections of idle-flood")
	attackers := fs.Int("attackers", 16, "clients looping on an expensive request in the largest phase")
	csvPath := fs.String("csv", "examples/data/airpassengers.csv", `CSV whose second column is the short forecast's series ("" for a synthetic one)`)
	kronosModel := fs.String("kronos-model", "kronos", "name of the Kronos model on the server")
	rssLimit := fs.Float64("rss-limit-gb", 12, "kill the server (SIGKILL) when its RSS passes this many GB (0: never)")
	header := fs.Bool("header", true, "print the table header")
	freePort := fs.Bool("free-port", false, "print a free loopback TCP port and exit")
	headerOnly := fs.Bool("header-only", false, "print the table header and exit")
	waitReady := fs.Duration("wait-ready", 0, "wait at most this long for GET /readyz to answer 200 (while -pid lives), then exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if *freePort {
		port, err := loopbackPort()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, port)
		return nil
	}
	if *headerOnly {
		fmt.Fprintln(stdout, tableHeader)
		return nil
	}
	scenarios, err := parseScenarios(*scenFlag)
	if err != nil {
		return err
	}
	switch {
	case *duration <= 0 || *duration > maxDuration:
		return fmt.Errorf("-duration must be in (0, %v], got %v", maxDuration, *duration)
	case *timeout <= 0 || *longTimeout <= 0:
		return errors.New("-timeout and -long-timeout must be positive")
	case *conns < 1 || *conns > maxConns:
		return fmt.Errorf("-conns must be in [1, %d], got %d", maxConns, *conns)
	case *attackers < 1 || *attackers > maxAttackers:
		return fmt.Errorf("-attackers must be in [1, %d], got %d", maxAttackers, *attackers)
	case *pid < 0:
		return fmt.Errorf("-pid must be >= 0, got %d", *pid)
	}
	if err := checkLoopback(ctx, *rawURL, net.DefaultResolver.LookupIPAddr); err != nil {
		return err
	}
	u, _ := url.Parse(*rawURL) // parsed by checkLoopback
	base := u.Scheme + "://" + u.Host
	if *waitReady > 0 {
		return waitUntilReady(ctx, base, *pid, *waitReady)
	}
	values := syntheticSeries(120)
	if *csvPath != "" {
		if values, err = readValues(*csvPath); err != nil {
			return fmt.Errorf("-csv: %w", err)
		}
	}
	if len(values) > 120 {
		values = values[len(values)-120:]
	}
	short, err := shortForecastBody(values, 12)
	if err != nil {
		return err
	}
	mon := newMonitor(*pid, int64(*rssLimit*1e9))
	defer mon.close()
	c := &abuser{
		base:        base,
		host:        u.Host,
		duration:    *duration,
		timeout:     *timeout,
		longTimeout: *longTimeout,
		conns:       *conns,
		attackers:   *attackers,
		kronosModel: *kronosModel,
		shortBody:   short,
		mon:         mon,
		log:         stderr,
	}
	if *header {
		fmt.Fprintln(stdout, tableHeader)
	}
	for _, s := range scenarios {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(stderr, "cutenative-abuse: %s (%s)\n", s.name, time.Now().Format(time.TimeOnly))
		sctx, cancel := context.WithTimeout(ctx, scenarioLimit)
		var rows []row
		if !mon.alive() {
			rows = []row{{scenario: s.name, sent: "-", notes: "the server was not running at the start"}}
		} else {
			rows = c.runScenario(sctx, s)
		}
		cancel()
		for _, r := range rows {
			fmt.Fprintln(stdout, r.format())
		}
	}
	return nil
}

// scenario is one entry of -scenarios; n is big-bodies' N.
type scenario struct {
	name string
	n    int
}

// parseScenarios parses the -scenarios list ("all" is every default scenario).
func parseScenarios(s string) ([]scenario, error) {
	known := map[string]bool{"idle-flood": true, "rollout-starve": true, "embed-starve": true, "kronos-memory": true,
		"deadline": true, "combined": true, "hardening": true}
	var out []scenario
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "all":
			for _, d := range defaultScenarios {
				sc, _ := parseScenarios(d)
				out = append(out, sc...)
			}
		case known[f]:
			out = append(out, scenario{name: f})
		case strings.HasPrefix(f, "big-bodies-"):
			n, err := strconv.Atoi(strings.TrimPrefix(f, "big-bodies-"))
			if err != nil || n < 1 || n > maxBigBodies {
				return nil, fmt.Errorf("-scenarios: %q: want big-bodies-N with N in [1, %d]", f, maxBigBodies)
			}
			out = append(out, scenario{name: f, n: n})
		default:
			return nil, fmt.Errorf("-scenarios: unknown scenario %q", f)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("-scenarios: none given")
	}
	return out, nil
}

func (c *abuser) runScenario(ctx context.Context, s scenario) []row {
	switch {
	case s.n > 0:
		return c.bigBodies(ctx, s.name, s.n)
	case s.name == "idle-flood":
		return c.idleFlood(ctx)
	case s.name == "rollout-starve":
		return c.rolloutStarve(ctx)
	case s.name == "embed-starve":
		return c.embedStarve(ctx)
	case s.name == "kronos-memory":
		return c.kronosMemory(ctx)
	case s.name == "deadline":
		return c.deadline(ctx)
	case s.name == "combined":
		return c.combined(ctx)
	case s.name == "hardening":
		return c.hardening(ctx)
	}
	return []row{{scenario: s.name, notes: "unknown scenario"}}
}

// waitUntilReady polls GET base/readyz every 100 ms until it answers 200, the process pid (when > 0) has
// ended, or d has passed.
func waitUntilReady(ctx context.Context, base string, pid int, d time.Duration) error {
	m := newMonitor(0, 0)
	m.pid = pid // alive() only: no sampling
	defer m.close()
	client := newClient(0)
	deadline := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if !m.alive() {
			return fmt.Errorf("the server (pid %d) ended before it was ready", pid)
		}
		ctx1, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx1, http.MethodGet, base+"/readyz", nil)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if err == nil && resp.StatusCode == http.StatusOK {
			return nil
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("the server was not ready within %v", d)
}

// loopbackPort returns a TCP port free on 127.0.0.1 at the time of the call.
func loopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

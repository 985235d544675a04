//go:build !race

// The abuse cases as tests: they measure memory and latency, which the race detector distorts (its
// shadow memory multiplies the heap, its checks slow Go code 5-10x), so they build without it; scripts/test.sh
// runs them in a separate step (go test -run Abuse). cmd/cutenative-abuse reproduces the same cases against a
// running server, before and after (docs/benchmarks.md).

package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
	"github.com/cutenative/cutenative/go/internal/testenv"
)

// rssBytes is the process's resident set (VmRSS).
func rssBytes(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// peakRSS samples the resident set every 5 ms until stop is closed, and returns the largest.
func peakRSS(t *testing.T, stop <-chan struct{}) <-chan int64 {
	out := make(chan int64, 1)
	go func() {
		peak := rssBytes(t)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				out <- max(peak, rssBytes(t))
				return
			case <-tick.C:
				peak = max(peak, rssBytes(t))
			}
		}
	}()
	return out
}

// repeated yields unit count times, never held whole.
type repeated struct {
	unit  []byte
	count int64
	off   int64
}

func (r *repeated) Read(p []byte) (int, error) {
	total := int64(len(r.unit)) * r.count
	i := 0
	for ; i < len(p) && r.off < total; i, r.off = i+1, r.off+1 {
		p[i] = r.unit[r.off%int64(len(r.unit))]
	}
	if r.off == total {
		return i, io.EOF
	}
	return i, nil
}

// post8MB sends an 8,000,000-byte body: head, unit count times, tail, then spaces up to 8,000,000 bytes.
func post8MB(client *http.Client, url, head, unit string, count int64, tail string) (int, string, error) {
	const n = 8_000_000
	pad := n - int64(len(head)) - int64(len(unit))*count - int64(len(tail))
	if pad < 0 {
		return 0, "", fmt.Errorf("the body is %d bytes over 8 MB", -pad)
	}
	body := io.MultiReader(strings.NewReader(head), &repeated{unit: []byte(unit), count: count}, strings.NewReader(tail),
		&repeated{unit: []byte(" "), count: pad})
	req, _ := http.NewRequest("POST", url, body)
	req.ContentLength = n
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// The crash: 64 concurrent 8 MB forecast bodies (one series of ~4M values, past the 100,000 a series may
// hold) took ~97 MB of heap each and ended the process. Each is now refused at its 100,001st value, read no
// further, and answered; the process's resident memory grows by at most 200 MB. Then 64 valid 8 MB bodies (40
// series of 100,000 values, 4M values each): the bytes in flight are bounded by -max-inflight-bytes (64 MiB here),
// those beyond it refused with 429 while they are read; again within 200 MB.
func TestAbuseBigBodies(t *testing.T) {
	ts := start(t, Config{MaxInflightBytes: 64 << 20, Timeout: 60 * time.Second})
	url := ts.http.URL + "/v1/forecast"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	run := func(name, head, unit string, count int64, tail string, want func(code int, body string) bool) {
		before := rssBytes(t)
		stop := make(chan struct{})
		peak := peakRSS(t, stop)
		var wg sync.WaitGroup
		var answered atomic.Int64
		statuses := make(chan string, 64)
		t0 := time.Now()
		for i := 0; i < 64; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, body, err := post8MB(client, url, head, unit, count, tail)
				if err != nil {
					statuses <- "error: " + err.Error()
					return
				}
				answered.Add(1)
				if !want(code, body) {
					statuses <- fmt.Sprintf("%d %.200s", code, body)
				}
			}()
		}
		wg.Wait()
		took := time.Since(t0)
		close(stop)
		close(statuses)
		grew := <-peak - before
		for s := range statuses {
			t.Errorf("%s: unexpected answer %s", name, s)
		}
		t.Logf("%s: 64 answered in %v, resident memory grew by %d MB at most", name, took.Round(time.Millisecond), grew>>20)
		if answered.Load() != 64 || grew > 200<<20 {
			t.Fatalf("%s: %d of 64 answered, resident memory grew by %d MB (at most 200)", name, answered.Load(), grew>>20)
		}
	}
	run("one series of 4M values", `{"horizon": 12, "series": [{"values": [`, "1,", 3_999_970, `1]}]}`, func(code int, body string) bool {
		return code == 400 && strings.Contains(body, "series[0].values[100000]: more than 100000 values")
	})
	series := `{"values": [` + strings.Repeat("1,", 99_999) + `1]}`
	run("39 series of 100,000 values", `{"horizon": 1, "series": [`, series+",", 38, series+`]}`, func(code int, body string) bool {
		return code == 200 || code == 429 && strings.Contains(body, "-max-inflight-bytes")
	})
}

// latencies runs a client posting body to path back to back for d and returns the latencies of its 200s,
// sorted, and the other statuses.
func latencies(t *testing.T, url, body string, d time.Duration) ([]time.Duration, map[int]int) {
	t.Helper()
	var out []time.Duration
	other := map[int]int{}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		t0 := time.Now()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			out = append(out, time.Since(t0))
		} else {
			other[resp.StatusCode]++
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, other
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// The starvation: 16 clients each loop on the most expensive small request of every endpoint (the
// 43-byte rollout of horizon 16384, ~20 KB of punctuation to embed, the 3 KB Kronos request of 6 tasks x 4096
// samples x horizon 40); a client looping on short forecasts keeps p99 <= 50 ms. (16 more clients on the most
// expensive forecast that still runs in the short lane, ~20 ms estimated, are another matter: each of their calls
// occupies the lane's worker ~40 ms on these two busy cores, and a short forecast waits for the one running; see
// docs/benchmarks.md. TestQueueRunsShortestFirst checks that it waits for no more than that one.) A looping client pauses 10 ms
// after a refusal (cutenative-load's pause after an error), as a client that ignores Retry-After would at most.
func TestAbuseShortForecastsKeepLatency(t *testing.T) {
	// The server's defaults: fused mode, one intra-op thread (cmd/cutenative-server's -mode and -threads).
	ts := start(t, Config{Models: map[string]string{"default": defaultModelDir, "kronos": kronosDir},
		EmbedModel: testenv.MiniLMDir(t), Open: cutenative.Options{Mode: "fused", Threads: 1}})
	_, vals := airPassengers(t)
	short := fmt.Sprintf(`{"horizon": 12, "series": [{"values": %s}]}`, seriesJSON(vals[len(vals)-120:]))
	punct := make([]string, 195)
	for i := range punct {
		punct[i] = strings.Repeat("!", 100)
	}
	embed, _ := json.Marshal(map[string]any{"input": punct})
	kronos := kronos3KB()
	attacks := []struct{ path, body string }{
		{"/v1/forecast", `{"horizon":16384,"series":[{"values":[1]}]}`},
		{"/v1/embeddings", string(embed)},
		{"/v1/forecast", kronos},
	}
	if os.Getenv("CN_ABUSE_MEDIUM") == "1" { // the measurement above, not an acceptance
		attacks = append(attacks, struct{ path, body string }{"/v1/forecast",
			fmt.Sprintf(`{"horizon":%d,"series":[{"values":[1]}]}`, longestShort(t, ts))})
	}
	base, _ := latencies(t, ts.http.URL+"/v1/forecast", short, 2*time.Second)
	var stop atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]map[int]int{}
	said := map[string]string{} // the first answer of each status, per attack
	for _, a := range attacks {
		seen[a.path+fmt.Sprint(len(a.body))] = map[int]int{}
		for i := 0; i < 16; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					req, _ := http.NewRequestWithContext(ctx, "POST", ts.http.URL+a.path, strings.NewReader(a.body))
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						return // cancelled at the end: the server drops or cancels the work
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					key := a.path + fmt.Sprint(len(a.body))
					mu.Lock()
					seen[key][resp.StatusCode]++
					if k := fmt.Sprint(key, " ", resp.StatusCode); said[k] == "" {
						said[k] = string(b[:min(len(b), 240)])
					}
					mu.Unlock()
					if resp.StatusCode != 200 {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}
	time.Sleep(500 * time.Millisecond) // every attacker in its loop
	lat, other := latencies(t, ts.http.URL+"/v1/forecast", short, 5*time.Second)
	stop.Store(true)
	cancel()
	wg.Wait()
	p50, p99 := quantile(lat, 0.5), quantile(lat, 0.99)
	t.Logf("short forecasts: alone p50 %v p99 %v; under attack %d answered, p50 %v, p99 %v, max %v, others %v; attackers' statuses %v",
		quantile(base, 0.5), quantile(base, 0.99), len(lat), p50, p99, quantile(lat, 1), other, seen)
	for k, v := range said {
		t.Logf("%s: %s", k, v)
	}
	if len(lat) < 100 || len(other) > 0 || p99 > 50*time.Millisecond {
		t.Fatalf("short forecasts under attack: %d answered, p99 %v (at most 50 ms), other statuses %v", len(lat), p99, other)
	}
}

// longestShort is the longest horizon, in native horizons, of a one-value forecast estimated within -long-after.
func longestShort(t *testing.T, ts *testServer) int {
	m, e := ts.find("", capForecast)
	if e != nil {
		t.Fatal(e)
	}
	c := m.fc.(*chronos2)
	native := int(m.info.NativeHorizon)
	h := native
	for m.cost.seconds(c.work([]int64{1}, []int64{1}, int64(h+native))) <= ts.cfg.LongAfter.Seconds() {
		h += native
	}
	t.Logf("the longest short-lane horizon: %d (estimated %.1f ms)", h, 1000*m.cost.seconds(c.work([]int64{1}, []int64{1}, int64(h))))
	return h
}

// kronos3KB is the Kronos request: 6 tasks of 9 bars, sample_count 4096, horizon 40 (~3 KB).
func kronos3KB() string {
	var series []string
	for i := 0; i < 6; i++ {
		var ts, o, h, l, c []string
		for k := 0; k < 9; k++ {
			ts = append(ts, fmt.Sprintf(`"2024-04-10T00:%02d:00Z"`, 5*k))
			p := 100 + float64(k%3)
			o, h, l, c = append(o, fmt.Sprint(p)), append(h, fmt.Sprint(p+1)), append(l, fmt.Sprint(p-1)), append(c, fmt.Sprint(p+0.5))
		}
		series = append(series, fmt.Sprintf(`{"timestamps":[%s],"open":[%s],"high":[%s],"low":[%s],"close":[%s]}`,
			strings.Join(ts, ","), strings.Join(o, ","), strings.Join(h, ","), strings.Join(l, ","), strings.Join(c, ",")))
	}
	return `{"model":"kronos","horizon":40,"sample_count":4096,"series":[` + strings.Join(series, ",") + `]}`
}

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
)

// The queue's own tests: no model, calls are functions of the test.

// testQueue is a queue of capacity jobs, closed with the test (after its blocker is released).
func testQueue(t *testing.T, capacity int) (*jobQueue, *metrics) {
	t.Helper()
	m := newMetrics()
	q := newJobQueue("m", "short", capacity, m, nil)
	t.Cleanup(q.close)
	return q, m
}

// block occupies q's worker with a run-alone call until the returned function is called (also at cleanup).
func block(t *testing.T, q *jobQueue) (unblock func()) {
	t.Helper()
	entered, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = runAlone(context.Background(), q, 0, 0, func(context.Context) (int, error) {
			close(entered)
			<-release
			return 0, nil
		})
	}()
	<-entered
	unblock = sync.OnceFunc(func() { close(release) })
	t.Cleanup(unblock)
	return unblock
}

// Admission, deadlines and cancellation, the same for every policy: what a job gets, its HTTP answer, why
// the queue counts it as dropped, and that it never ran.
func TestQueueAdmissionDeadlineCancel(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		queued   int // run-alone jobs queued (behind the blocked worker) before the one tested
		ctx      func() (context.Context, context.CancelFunc)
		while    func(t *testing.T, cancel context.CancelFunc, q *jobQueue) // while the job waits; nil: nothing
		closed   bool                                                       // the queue is closing before the job comes
		err      error
		status   int
		dropped  dropReason
	}{
		{name: "full queue", capacity: 1, queued: 1, ctx: background, err: errQueueFull, status: 429, dropped: dropFull},
		// The deadline leaves time for the job to queue even on a loaded machine (expiring before submission would
		// be the "context ended" case); the job must be queued when it expires.
		{name: "deadline while queued", capacity: 4, ctx: timeout(500 * time.Millisecond),
			while: func(t *testing.T, cancel context.CancelFunc, q *jobQueue) {
				waitUntil(t, "the job queued", func() bool { return q.len() == 1 })
			}, err: context.DeadlineExceeded, status: 504, dropped: dropDeadline},
		{name: "client disconnects while queued", capacity: 1, ctx: background,
			while: func(t *testing.T, cancel context.CancelFunc, q *jobQueue) {
				waitUntil(t, "the job queued", func() bool { return q.len() == 1 })
				cancel()
			}, err: context.Canceled, status: 499, dropped: dropCancelled},
		{name: "context ended before submission", capacity: 1, ctx: func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}, err: context.Canceled, status: 499, dropped: -1},
		{name: "shutting down", capacity: 1, ctx: background, closed: true, err: errShuttingDown, status: 503, dropped: dropShutdown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, m := testQueue(t, tc.capacity)
			unblock := block(t, q)
			var others []chan error
			for i := 0; i < tc.queued; i++ {
				done := make(chan error, 1)
				others = append(others, done)
				go func() {
					_, err := runAlone(context.Background(), q, 0, 0, func(context.Context) (int, error) { return 0, nil })
					done <- err
				}()
			}
			waitUntil(t, "the other jobs queued", func() bool { return q.len() == tc.queued })
			if tc.closed {
				go q.close()
				waitUntil(t, "close begun", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.closing })
			}
			ran := make(chan struct{}, 1)
			ctx, cancel := tc.ctx()
			defer cancel()
			got := make(chan error, 1)
			go func() {
				_, err := runAlone(ctx, q, 0, 0, func(context.Context) (int, error) { ran <- struct{}{}; return 0, nil })
				got <- err
			}()
			if tc.while != nil {
				tc.while(t, cancel, q)
			}
			err := <-got
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			rec := httptest.NewRecorder()
			writeError(rec, fromError(err))
			if rec.Code != tc.status || (tc.status == 429) != (rec.Header().Get("Retry-After") != "") {
				t.Fatalf("answer %d, Retry-After %q; want %d", rec.Code, rec.Header().Get("Retry-After"), tc.status)
			}
			// A job that was queued leaves the queue when its context ends, while the worker is still busy.
			waitUntil(t, "the job out of the queue", func() bool { return q.len() == tc.queued })
			if tc.dropped >= 0 {
				waitUntil(t, "the drop counted", func() bool { return m.queues[0].dropped[tc.dropped].Load() == 1 })
			}
			for r := range dropReasonNames {
				if n := m.queues[0].dropped[r].Load(); dropReason(r) != tc.dropped && n != 0 {
					t.Fatalf("dropped{reason=%s} = %d, want 0", dropReasonNames[r], n)
				}
			}
			unblock()
			for _, done := range others {
				if err := <-done; err != nil {
					t.Fatalf("a job admitted earlier: %v", err)
				}
			}
			if !tc.closed {
				// The worker has served everything before this job: had it stayed queued, it would run now.
				if _, err := runAlone(context.Background(), q, 0, 0, func(context.Context) (int, error) { return 0, nil }); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-ran:
				t.Fatal("the dropped job ran")
			default:
			}
		})
	}
}

func background() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
func timeout(d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) { return context.WithTimeout(context.Background(), d) }
}

// A job cancelled while its call runs cancels the call; a merged call goes on until every job in it is gone.
func TestQueueCancelWhileRunning(t *testing.T) {
	q, _ := testQueue(t, 8)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := runAlone(ctx, q, 0, 0, func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done() // the call's context ends with the job's
			return 0, ctx.Err()
		})
		done <- err
	}()
	<-started
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}

	entered, release := make(chan struct{}), make(chan struct{})
	callEnded := make(chan error, 1)
	p := &mergeForecasts{maxSeries: 64, forecast: func(ctx context.Context, r *cutenative.ForecastRequest) (*cutenative.Forecast, error) {
		close(entered)
		select {
		case <-release:
			callEnded <- nil
			return echoForecast(ctx, r)
		case <-ctx.Done():
			callEnded <- ctx.Err()
			return nil, ctx.Err()
		}
	}}
	unblock := block(t, q)
	ctxs := make([]context.Context, 2)
	cancels := make([]context.CancelFunc, 2)
	jobs := make([]*job, 2)
	for i := range jobs {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
		defer cancels[i]()
		jobs[i] = forecastTestJob(ctxs[i], p, i, 1, "k")
		if err := q.submit(jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	unblock()
	<-entered
	cancels[0]()
	if r := jobs[0].wait(ctxs[0]); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("cancelled job: %v", r.err)
	}
	select {
	case err := <-callEnded:
		t.Fatalf("the merged call ended (%v) while a job in it still waits", err)
	case <-time.After(50 * time.Millisecond):
	}
	cancels[1]()
	if err := <-callEnded; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call was not cancelled with its last job: %v", err)
	}
	close(release)
}

// echoForecast answers one value per series: its first input value.
func echoForecast(_ context.Context, r *cutenative.ForecastRequest) (*cutenative.Forecast, error) {
	f := &cutenative.Forecast{Quantiles: []float32{0.5}, Horizon: 1, NSeries: len(r.Series), Values: make([]float32, len(r.Series))}
	for i, s := range r.Series {
		f.Values[i] = s.Values[0]
	}
	return f, nil
}

// forecastTestJob is job id's request of n series, valued 1000*id + series index.
func forecastTestJob(ctx context.Context, p *mergeForecasts, id, n int, key string) *job {
	req := &cutenative.ForecastRequest{Horizon: 1}
	for k := 0; k < n; k++ {
		req.Series = append(req.Series, cutenative.Series{Values: []float32{float32(1000*id + k)}})
	}
	return &job{ctx: ctx, policy: p, payload: forecastJob{req: req, key: key}, units: n}
}

// Which queued jobs share a call, under each policy: the merge policy merges jobs of equal key in order up to
// the series bound; a run-alone job, or a job of another key, ends a call and starts the next (FIFO).
func TestQueuePolicies(t *testing.T) {
	type spec struct {
		alone  bool
		series int
		key    string
	}
	m := func(series int, key string) spec { return spec{series: series, key: key} }
	a := spec{alone: true}
	tests := []struct {
		name      string
		maxSeries int
		jobs      []spec
		calls     [][]int // job ids per call, in order
	}{
		{"equal keys merge", 64, []spec{m(1, "a"), m(2, "a"), m(1, "a")}, [][]int{{0, 1, 2}}},
		{"other keys end the call", 64, []spec{m(1, "a"), m(1, "b"), m(1, "a"), m(1, "a")}, [][]int{{0}, {1}, {2, 3}}},
		{"the series bound", 4, []spec{m(3, "a"), m(1, "a"), m(1, "a"), m(4, "a")}, [][]int{{0, 1}, {2}, {3}}},
		{"key \"\" runs alone", 64, []spec{m(1, ""), m(1, ""), m(1, "a")}, [][]int{{0}, {1}, {2}}},
		{"run-alone jobs never merge", 64, []spec{a, a, a}, [][]int{{0}, {1}, {2}}},
		{"a run-alone job between mergeable ones", 64, []spec{m(1, "a"), a, m(1, "a"), m(1, "a")}, [][]int{{0}, {1}, {2, 3}}},
		{"max-batch 1", 1, []spec{m(1, "a"), m(1, "a")}, [][]int{{0}, {1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, met := testQueue(t, 64)
			var mu sync.Mutex
			var calls [][]int
			record := func(ids []int) {
				mu.Lock()
				calls = append(calls, ids)
				mu.Unlock()
			}
			p := &mergeForecasts{maxSeries: tc.maxSeries, // no window: every job is queued before the first call
				forecast: func(ctx context.Context, r *cutenative.ForecastRequest) (*cutenative.Forecast, error) {
					seen := map[int]bool{}
					var ids []int
					for _, s := range r.Series {
						if id := int(s.Values[0]) / 1000; !seen[id] {
							seen[id] = true
							ids = append(ids, id)
						}
					}
					record(ids)
					return echoForecast(ctx, r)
				}}
			unblock := block(t, q)
			jobs := make([]*job, len(tc.jobs))
			for i, s := range tc.jobs {
				if s.alone {
					id := i
					jobs[i] = &job{ctx: context.Background(), policy: alone{}, payload: func(context.Context) (any, error) {
						record([]int{id})
						return id, nil
					}}
				} else {
					jobs[i] = forecastTestJob(context.Background(), p, i, s.series, s.key)
				}
				if err := q.submit(jobs[i]); err != nil {
					t.Fatal(err)
				}
			}
			unblock()
			for i, j := range jobs {
				r := j.wait(context.Background())
				if r.err != nil {
					t.Fatalf("job %d: %v", i, r.err)
				}
				if tc.jobs[i].alone {
					if r.value != i {
						t.Fatalf("job %d got %v", i, r.value)
					}
					continue
				}
				part := r.value.(forecastPart) // each job finds its own series at its place in the shared answer
				for k := 0; k < tc.jobs[i].series; k++ {
					if got := part.f.At(part.first+k, 0, 0); got != float32(1000*i+k) {
						t.Fatalf("job %d series %d: %v", i, k, got)
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if fmt.Sprint(calls) != fmt.Sprint(tc.calls) {
				t.Fatalf("calls %v, want %v", calls, tc.calls)
			}
			// Metrics: one observation per call (the blocker's included), jobs per call summing to the jobs.
			if count, sum := met.queues[0].jobs.totals(); count != uint64(len(tc.calls)+1) || sum != float64(len(tc.jobs)+1) {
				t.Fatalf("batch_jobs count %d sum %v, want %d calls of %d jobs", count, sum, len(tc.calls)+1, len(tc.jobs)+1)
			}
		})
	}
}

// A merge window collects jobs that arrive while it is open, up to the series bound (which closes it early).
func TestQueueMergeWaitsForCompany(t *testing.T) {
	q, _ := testQueue(t, 8)
	sizes := make(chan int, 4)
	p := &mergeForecasts{maxSeries: 3, wait: time.Minute, forecast: func(ctx context.Context, r *cutenative.ForecastRequest) (*cutenative.Forecast, error) {
		sizes <- len(r.Series)
		return echoForecast(ctx, r)
	}}
	unblock := block(t, q)
	var jobs []*job
	for i := 0; i < 2; i++ { // queued while the worker is busy: the next call waits for company
		jobs = append(jobs, forecastTestJob(context.Background(), p, i, 1, "k"))
		if err := q.submit(jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	unblock()
	waitUntil(t, "both jobs taken into the open call", func() bool { return q.len() == 0 })
	jobs = append(jobs, forecastTestJob(context.Background(), p, 2, 1, "k"))
	if err := q.submit(jobs[2]); err != nil {
		t.Fatal(err)
	}
	if n := <-sizes; n != 3 {
		t.Fatalf("the call had %d series, want 3 (the late job joined)", n)
	}
	for _, j := range jobs {
		if r := j.wait(context.Background()); r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// Progress: a queued job knows how many wait before it; a running one, its call's size and reported steps.
func TestQueueProgress(t *testing.T) {
	q, _ := testQueue(t, 8)
	unblock := block(t, q)
	step, release := make(chan struct{}), make(chan struct{})
	jobs := make([]*job, 3)
	for i := range jobs {
		jobs[i] = &job{ctx: context.Background(), policy: alone{}, payload: func(ctx context.Context) (any, error) {
			if i == 0 {
				reportProgress(ctx, 3, 10)
				close(step)
				<-release
			}
			return i, nil
		}}
		if err := q.submit(jobs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var ahead []int
	for _, j := range jobs {
		p := j.progress()
		if p.State != jobQueued {
			t.Fatalf("state %v before the worker is free", p.State)
		}
		ahead = append(ahead, p.Ahead)
	}
	if fmt.Sprint(ahead) != "[0 1 2]" {
		t.Fatalf("jobs ahead %v, want [0 1 2]", ahead)
	}
	unblock()
	<-step
	if p := jobs[0].progress(); p.State != jobRunning || p.Batch != 1 || p.Done != 3 || p.Total != 10 {
		t.Fatalf("running job: %+v", p)
	}
	if p := jobs[2].progress(); p.State != jobQueued || p.Ahead != 1 {
		t.Fatalf("job 2 once job 0 runs: %+v", p)
	}
	close(release)
	for _, j := range jobs {
		j.wait(context.Background())
	}
	if p := jobs[2].progress(); p.State != jobDone || p.Batch != 1 {
		t.Fatalf("finished job: %+v", p)
	}
}

// close runs what was admitted, then refuses.
func TestQueueCloseFinishesQueuedWork(t *testing.T) {
	m := newMetrics()
	q := newJobQueue("m", "long", 8, m, nil)
	unblock := block(t, q)
	results := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, err := runAlone(context.Background(), q, 1, 0, func(context.Context) (int, error) { return 0, nil })
			results <- err
		}()
	}
	waitUntil(t, "3 jobs queued", func() bool { return q.len() == 3 })
	closed := make(chan struct{})
	go func() { q.close(); close(closed) }()
	waitUntil(t, "close begun", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.closing })
	if _, err := runAlone(context.Background(), q, 1, 0, func(context.Context) (int, error) { return 0, nil }); !errors.Is(err, errShuttingDown) {
		t.Fatalf("after close: %v", err)
	}
	unblock()
	<-closed
	for i := 0; i < 3; i++ {
		if err := <-results; err != nil {
			t.Fatalf("queued job: %v", err)
		}
	}
	if count, sum := m.queues[0].series.totals(); count != 3 || sum != 3 {
		t.Fatalf("batch_series count %d sum %v: the blocker (0 series) is not counted, the 3 jobs are", count, sum)
	}
}

func (h *histogram) totals() (uint64, float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.count, h.sum
}

// The documented call of a run-alone endpoint, on a real model's queue: a forecast equal to the merged
// path's, and Model.Generate (unsupported by a forecaster) answered as the library's error.
func TestRunAloneOnAModelQueue(t *testing.T) {
	ts := start(t, Config{})
	m, e := ts.find("", capForecast)
	if e != nil {
		t.Fatal(e)
	}
	req := &cutenative.ForecastRequest{Horizon: 4, Quantiles: []float32{0.5},
		Series: []cutenative.Series{{Values: []float32{1, 2, 3, 4, 5, 6}}}}
	ctx := context.Background()
	alone, err := runAlone(ctx, m.short, len(req.Series), 0, func(ctx context.Context) (*cutenative.Forecast, error) {
		return m.model.Forecast(ctx, req)
	})
	if err != nil {
		t.Fatal(err)
	}
	merged, first, err := m.merge.submit(ctx, m.short, req, batchKey(req, int(m.info.ContextLength)), 0, 0)
	if err != nil || first != 0 || fmt.Sprint(alone.Values) != fmt.Sprint(merged.Values) {
		t.Fatalf("run alone %v, merge policy %v (first %d, %v)", alone.Values, merged.Values, first, err)
	}
	_, err = runAlone(ctx, m.short, 0, 0, func(ctx context.Context) (*cutenative.Image, error) {
		return m.model.Generate(ctx, &cutenative.GenerateRequest{Prompt: "a lighthouse", Width: 64, Height: 64})
	})
	if ae := fromError(err); !errors.Is(err, cutenative.ErrUnsupported) || ae.Status != 400 || ae.Code != "unsupported" {
		t.Fatalf("Generate on a forecaster: %v -> %+v", err, ae)
	}
	if count, sum := ts.metrics.queues[0].jobs.totals(); count != 3 || sum != 3 {
		t.Fatalf("batch_jobs: %d calls, %v jobs; want 3 calls of one job", count, sum)
	}
}

// Shortest first: queued jobs run in the order of their estimates, the oldest first among equal ones.
func TestQueueRunsShortestFirst(t *testing.T) {
	q, _ := testQueue(t, 8)
	unblock := block(t, q)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, j := range []struct {
		name string
		est  float64
	}{{"medium", 0.09}, {"tiny-a", 0.001}, {"long", 0.5}, {"tiny-b", 0.001}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = runAlone(context.Background(), q, 0, j.est, func(context.Context) (int, error) {
				mu.Lock()
				order = append(order, j.name)
				mu.Unlock()
				return 0, nil
			})
		}()
		waitUntil(t, "queued", func() bool { return q.len() == i+1 }) // submitted in this loop's order
	}
	waitUntil(t, "four queued", func() bool { return q.len() == 4 })
	if b := q.backlog(); b < 0.592 || b > 0.593 {
		t.Fatalf("backlog %v, want the queued estimates' sum 0.592", b)
	}
	unblock()
	wg.Wait()
	if fmt.Sprint(order) != "[tiny-a tiny-b medium long]" {
		t.Fatalf("order %v", order)
	}
}

// Long lanes share the server's slots: a lane waiting for one counts its call in its backlog, gives up the wait when
// every job of the call has ended (the slot is not taken, the jobs are answered), and closes while it waits.
func TestLongLanesShareSlots(t *testing.T) {
	m := newMetrics()
	slots := make(chan struct{}, 1)
	a := newJobQueue("a", "long", 4, m, slots)
	b := newJobQueue("b", "long", 4, m, slots)
	entered, release := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = runAlone(context.Background(), a, 0, 2, func(context.Context) (int, error) {
			close(entered)
			<-release
			return 0, nil
		})
	}()
	<-entered // a's call holds the one slot
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{}, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := runAlone(ctx, b, 0, 3, func(context.Context) (int, error) { ran <- struct{}{}; return 0, nil })
		errc <- err
	}()
	waitUntil(t, "b's call waiting for the slot", func() bool { return b.len() == 0 && b.backlog() == 3 })
	if got := a.backlog(); got <= 1.9 || got > 2 {
		t.Fatalf("a's backlog %v, want what its running call's 2 s estimate has left", got)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting for a slot: %v", err)
	}
	waitUntil(t, "b's wait given up", func() bool { return b.backlog() == 0 })
	// b waits for the slot again with a live job; closing b waits for it, so release a first.
	done := make(chan error, 1)
	go func() {
		_, err := runAlone(context.Background(), b, 0, 1, func(context.Context) (int, error) { ran <- struct{}{}; return 0, nil })
		done <- err
	}()
	waitUntil(t, "b waiting again", func() bool { return b.backlog() == 1 })
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 {
		t.Fatalf("%d calls ran in b, want 1 (the cancelled one never)", len(ran))
	}
	a.close()
	b.close()
	if len(slots) != 0 {
		t.Fatalf("%d slots held after both lanes closed", len(slots))
	}
}

// A panic in a call answers its jobs with an error and leaves the lane (and its slot) working.
func TestQueueSurvivesAPanickingCall(t *testing.T) {
	m := newMetrics()
	slots := make(chan struct{}, 1)
	q := newJobQueue("m", "long", 4, m, slots)
	defer q.close()
	_, err := runAlone(context.Background(), q, 0, 0, func(context.Context) (int, error) { panic("embedder bug") })
	if err == nil || fromError(err).Status != 500 {
		t.Fatalf("panicking call: %v", err)
	}
	if v, err := runAlone(context.Background(), q, 0, 0, func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Fatalf("after the panic: %v %v", v, err)
	}
}

package server

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// A model's work goes through its queues (jobQueue): a short lane and a long lane per model, each a bounded
// FIFO with one worker. The queue owns what every endpoint needs around a model call: admission (a full
// queue is errQueueFull: 429 with Retry-After), deadlines and cancellation (a job whose context ends while it
// waits is taken out of the queue at once and never runs; a call is cancelled once every job in it has been
// abandoned), metrics labelled by model and lane, and progress. How jobs become calls is the job's policy:
// mergeForecasts (merge.go) merges compatible forecast requests into one call; runAlone gives each job a
// call of its own.
//
// The one call an endpoint makes for a model call of its own (an image through Model.Generate, a Kronos
// forecast whose seed is per call), after s.admit() and its request's validation:
//
//	lane, e := s.admission(ctx, m, est) // the lane from the request's cost estimate (cost.go), or a refusal
//	img, err := runAlone(ctx, lane, 0, est.seconds, func(ctx context.Context) (*cutenative.Image, error) {
//		return m.model.Generate(ctx, req)
//	})
//	if err != nil {
//		return fromError(err) // 429 / 499 / 503 / 504 from the queue, the library's errors as they are
//	}
//
// ctx carries the request's deadline; the call gets a context that ends with it (and its deadline). Calls
// estimated to run long go to m.long instead of m.short, so they never delay short ones; long lanes take a
// server-wide slot (Config.LongSlots) for each call, so that long calls of several models cannot take every core.
// A lane knows the estimated seconds of the work it holds (backlog), which admission compares with a new
// request's deadline.

var (
	errQueueFull    = errors.New("queue full")
	errInflight     = errors.New("too many requests in flight")
	errKeyInflight  = errors.New("too many requests in flight for this API key")
	errShuttingDown = errors.New("shutting down")
)

// admit is admission's first step, taken before a request's body is read: at most Config.MaxInflight
// requests are being read, validated, queued or run at once, and at most Config.MaxInflightPerKey of them with one
// API key (key: its index, -1 for none), so that one client cannot take every slot; beyond, errInflight or
// errKeyInflight (429 with Retry-After). Call release when the request is answered.
func (s *Server) admit(key int) (release func(), err error) {
	if s.inflight.Add(1) > int64(s.cfg.MaxInflight) {
		s.inflight.Add(-1)
		return nil, errInflight
	}
	if key < 0 || s.cfg.MaxInflightPerKey <= 0 {
		return func() { s.inflight.Add(-1) }, nil
	}
	if s.keyInflight[key].Add(1) > int64(s.cfg.MaxInflightPerKey) {
		s.keyInflight[key].Add(-1)
		s.inflight.Add(-1)
		return nil, errKeyInflight
	}
	return func() { s.keyInflight[key].Add(-1); s.inflight.Add(-1) }, nil
}

// queueFullError is errQueueFull naming the lane and its limit.
type queueFullError struct {
	model, lane string
	capacity    int
}

func (e *queueFullError) Error() string {
	limit := "-queue"
	if e.lane == "long" {
		limit = "-long-queue"
	}
	return fmt.Sprintf("model %q's %s lane has %d requests waiting already (%s); retry later", e.model, e.lane, e.capacity, limit)
}

func (e *queueFullError) Is(target error) bool { return target == errQueueFull }

// policy decides which queued jobs share one call, and makes the call. A call's jobs share its first job's
// policy.
type policy interface {
	// open reports whether the call holding batch (units: the sum of their units) may take more jobs.
	open(batch []*job, units int) bool
	// join reports whether next may join the call holding batch.
	join(batch []*job, units int, next *job) bool
	// maxWait is how long an open call waits for company when other jobs were queued as it started.
	maxWait() time.Duration
	// run makes one call for batch and returns one result per job, in order.
	run(ctx context.Context, batch []*job) []jobResult
}

// job is one request's work in a queue.
type job struct {
	ctx     context.Context // the request's: its deadline and cancellation
	policy  policy
	payload any     // the policy's input: a forecastJob for mergeForecasts, a call for runAlone
	units   int     // series the job adds to a call (the merge bound, cutenative_batch_series); 0: none
	est     float64 // estimated seconds of compute (cost.go)
	fixed   float64 // the part of est a merged call pays once (its passes), not once per job

	result   chan jobResult // buffered: exactly one result is sent, the sender never blocks
	enqueued time.Time
	queue    *jobQueue
	elem     *list.Element // its place while queued; nil once taken or dropped (guarded by queue.mu)
	unwatch  func() bool   // stops the context watch that drops the job when ctx ends while queued
	state    atomic.Int32  // a jobState
	call     atomic.Pointer[callProgress]
}

type jobResult struct {
	value any
	err   error
}

type jobState int32

const (
	jobQueued jobState = iota
	jobRunning
	jobDone
)

// progress is where a job stands (for an endpoint that reports it while the client waits).
type progress struct {
	State       jobState
	Ahead       int    // queued: jobs before it in its queue
	Batch       int    // running or done: jobs in its call
	Done, Total uint64 // steps its call reported through reportProgress (0 of 0: none reported)
}

// callProgress is shared by the jobs of one call.
type callProgress struct {
	jobs  int
	steps atomic.Pointer[[2]uint64]
}

type progressKey struct{}

// reportProgress records how far the call running under ctx is (done of total steps: denoising steps,
// rollout passes); every job of the call sees it in its progress. Outside a queue's call it does nothing.
func reportProgress(ctx context.Context, done, total uint64) {
	if cp, ok := ctx.Value(progressKey{}).(*callProgress); ok {
		cp.steps.Store(&[2]uint64{done, total})
	}
}

// progress returns where j stands.
func (j *job) progress() progress {
	p := progress{State: jobState(j.state.Load())}
	if p.State == jobQueued && j.queue != nil {
		j.queue.mu.Lock()
		if j.elem != nil {
			for e := j.elem.Prev(); e != nil; e = e.Prev() {
				p.Ahead++
			}
		}
		j.queue.mu.Unlock()
	}
	if cp := j.call.Load(); cp != nil {
		p.Batch = cp.jobs
		if s := cp.steps.Load(); s != nil {
			p.Done, p.Total = s[0], s[1]
		}
	}
	return p
}

func (j *job) finish(r jobResult) {
	j.state.Store(int32(jobDone))
	j.result <- r
}

// wait returns j's result, or ctx's error as soon as ctx ends (the queue then drops or cancels the job; its
// result goes nowhere).
func (j *job) wait(ctx context.Context) jobResult {
	select {
	case r := <-j.result:
		return r
	case <-ctx.Done():
		return jobResult{err: ctx.Err()}
	}
}

// alone is the run-alone policy: every job is a call of its own. Its payload is the call.
type alone struct{}

func (alone) open([]*job, int) bool       { return false }
func (alone) join([]*job, int, *job) bool { return false }
func (alone) maxWait() time.Duration      { return 0 }
func (alone) run(ctx context.Context, batch []*job) []jobResult {
	v, err := batch[0].payload.(func(context.Context) (any, error))(ctx)
	return []jobResult{{value: v, err: err}}
}

// runAlone runs call through q as a job of its own, never merged with another: q admits it (errQueueFull,
// errShuttingDown) or not, drops it unrun when ctx ends while it waits, cancels the call's context when ctx
// ends while it runs, and counts it in q's metrics. series is what the call forecasts, for
// cutenative_batch_series (0: it forecasts none). See the top of this file for the endpoint's side.
func runAlone[T any](ctx context.Context, q *jobQueue, series int, est float64, call func(context.Context) (T, error)) (T, error) {
	wait, err := submitAlone(ctx, q, series, est, call)
	if err != nil {
		var zero T
		return zero, err
	}
	return wait()
}

// submitAlone is runAlone in two halves: the job is admitted to q (or refused) now, and wait returns its result; an
// endpoint that answers with a stream refuses a full queue with its status before it writes the stream's header.
func submitAlone[T any](ctx context.Context, q *jobQueue, series int, est float64, call func(context.Context) (T, error)) (
	wait func() (T, error), err error) {
	j := &job{ctx: ctx, policy: alone{}, units: series, est: est,
		payload: func(ctx context.Context) (any, error) { return call(ctx) }}
	if err := q.submit(j); err != nil {
		return nil, err
	}
	return func() (T, error) {
		var zero T
		r := j.wait(ctx)
		if r.err != nil {
			return zero, r.err
		}
		v, _ := r.value.(T) // a nil interface value is T's zero value, not a panic
		return v, nil
	}, nil
}

// jobQueue is one model lane: a bounded FIFO of jobs and a worker that turns them into calls, one at a time,
// each under its first job's policy.
type jobQueue struct {
	model     string
	lane      string // "short" or "long"
	capacity  int
	metrics   *queueMetrics
	slots     chan struct{} // server-wide slots a call of this lane takes (long lanes); nil: none
	beforeRun func(n int)   // test hook: called with the number of jobs of each call before it is made

	mu        sync.Mutex
	jobs      list.List // of *job, oldest first
	queuedEst float64   // estimated seconds of the queued jobs
	runEst    float64   // estimated seconds of the running call (0: none)
	slotEst   float64   // estimated seconds of the call waiting for a server-wide slot (0: none)
	runStart  time.Time
	closing   bool
	wake      chan struct{} // 1-buffered: a job was queued, or close began
	done      chan struct{} // closed when the worker has finished
}

func newJobQueue(model, lane string, capacity int, m *metrics, slots chan struct{}) *jobQueue {
	q := &jobQueue{model: model, lane: lane, capacity: capacity, metrics: m.queue(model, lane), slots: slots, wake: make(chan struct{}, 1),
		done: make(chan struct{})}
	go q.loop()
	return q
}

// submit queues j without blocking: errQueueFull when capacity jobs wait already, errShuttingDown once
// close began, ctx's error when it has ended. Once queued, j gets exactly one result.
func (q *jobQueue) submit(j *job) error {
	if err := j.ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.closing:
		q.metrics.dropped[dropShutdown].Add(1)
		return errShuttingDown
	case q.jobs.Len() >= q.capacity:
		q.metrics.dropped[dropFull].Add(1)
		return &queueFullError{model: q.model, lane: q.lane, capacity: q.capacity}
	}
	j.result, j.enqueued, j.queue = make(chan jobResult, 1), time.Now(), q
	j.elem = q.jobs.PushBack(j)
	q.queuedEst += j.est
	q.metrics.depth.Add(1)
	j.unwatch = context.AfterFunc(j.ctx, func() { q.abandon(j) })
	q.signal()
	return nil
}

func (q *jobQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// abandon takes j out of the queue when its context ends while it waits (a job already taken is the
// worker's: it cancels the call or answers it).
func (q *jobQueue) abandon(j *job) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if j.elem != nil {
		q.removeLocked(j)
		q.dropLocked(j)
	}
}

func (q *jobQueue) removeLocked(j *job) {
	q.jobs.Remove(j.elem)
	j.elem = nil
	q.queuedEst -= j.est
	if q.jobs.Len() == 0 {
		q.queuedEst = 0 // no rounding residue
	}
	q.metrics.depth.Add(-1)
}

// backlog is the estimated seconds before a job queued now would start: the queued jobs' estimates and what the
// running call's estimate has left.
func (q *jobQueue) backlog() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.queuedEst + q.slotEst
	if q.runEst > 0 {
		b += max(0, q.runEst-time.Since(q.runStart).Seconds())
	}
	return b
}

// dropLocked answers a job whose context ended without running it.
func (q *jobQueue) dropLocked(j *job) {
	err := j.ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		q.metrics.dropped[dropDeadline].Add(1)
	} else {
		q.metrics.dropped[dropCancelled].Add(1)
	}
	j.finish(jobResult{err: err})
}

// pop takes the live job with the smallest estimate, the oldest among equal ones (first in, first out when the
// estimates tie), and reports whether close began. Shortest first: a request estimated at a millisecond never waits
// behind one estimated at 90 ms in the same lane (the medium one waits while shorter ones keep coming, at most
// until its deadline). Jobs whose context ended are answered on the way.
func (q *jobQueue) pop() (j *job, closing bool) {
	j, closing, _ = q.popIf(nil)
	return j, closing
}

// popIf is pop taking the job only when accept (nil: any) takes it; refused: it did not (the job stays queued).
func (q *jobQueue) popIf(accept func(*job) bool) (j *job, closing, refused bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var best *job
	for e := q.jobs.Front(); e != nil; {
		next := e.Next()
		j := e.Value.(*job)
		if j.ctx.Err() != nil {
			q.removeLocked(j)
			j.unwatch()
			q.dropLocked(j)
		} else if best == nil || j.est < best.est {
			best = j
		}
		e = next
	}
	if best != nil && accept != nil && !accept(best) {
		return nil, q.closing, true
	}
	if best != nil {
		q.removeLocked(best)
		best.unwatch()
	}
	return best, q.closing, false
}

func (q *jobQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.jobs.Len()
}

// close stops admitting jobs, lets the worker finish what is queued, and waits for it.
func (q *jobQueue) close() {
	q.mu.Lock()
	q.closing = true
	q.signal()
	q.mu.Unlock()
	<-q.done
}

func (q *jobQueue) loop() {
	defer close(q.done)
	for {
		var first *job
		for first == nil {
			j, closing := q.pop()
			switch {
			case j != nil:
				first = j
			case closing:
				return
			default:
				<-q.wake
			}
		}
		batch := q.gather(first)
		if q.slots != nil && q.takeSlot(batch) {
			q.run(batch)
			<-q.slots
			continue
		}
		q.run(batch) // no slots; or every job of batch ended while it waited for one: run answers them
	}
}

// takeSlot waits for a server-wide slot for batch's call, its estimate counted in the lane's backlog meanwhile;
// false when every job of batch ended first (nothing to run; the slot is not taken).
func (q *jobQueue) takeSlot(batch []*job) bool {
	est := 0.0
	for _, j := range batch {
		est += j.est
	}
	q.mu.Lock()
	q.slotEst = est // still ahead of any new job while it waits
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.slotEst = 0
		q.mu.Unlock()
	}()
	live, stop := callContext(batch) // ends when every job's context has
	defer stop()
	select {
	case q.slots <- struct{}{}:
		return true
	case <-live.Done():
		return false
	}
}

// gather adds queued jobs (shortest first, as pop) to the call first starts while its policy keeps the call open and
// lets them join; a job that may not join stays queued for the next pop. When nothing else is queued the call
// starts at once: waiting (at most the policy's maxWait) only pays when jobs arrive faster than they are
// served, and a lone client must not pay the window.
func (q *jobQueue) gather(first *job) []*job {
	p, batch, units := first.policy, []*job{first}, first.units
	if !p.open(batch, units) {
		return batch
	}
	var timer <-chan time.Time
	if d := p.maxWait(); d > 0 && q.len() > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	for p.open(batch, units) {
		j, closing, refused := q.popIf(func(j *job) bool { return p.join(batch, units, j) })
		if refused {
			return batch // the next job (the shortest queued) does not join: it starts the next call
		}
		if j == nil {
			if timer == nil || closing {
				return batch
			}
			select {
			case <-q.wake:
				continue
			case <-timer:
				return batch
			}
		}
		batch, units = append(batch, j), units+j.units
	}
	return batch
}

// run makes one call for batch under its policy and answers every job. Jobs whose context ended since they
// were taken are answered without the call; the call's context ends when every job in it has been abandoned
// (or at the latest deadline among them).
func (q *jobQueue) run(batch []*job) {
	live := batch[:0:0]
	for _, j := range batch {
		if j.ctx.Err() != nil {
			q.mu.Lock()
			q.dropLocked(j)
			q.mu.Unlock()
			continue
		}
		live = append(live, j)
	}
	if len(live) == 0 {
		return
	}
	batch = live
	start := time.Now()
	cp := &callProgress{jobs: len(batch)}
	units := 0
	for _, j := range batch {
		q.metrics.wait.observe(start.Sub(j.enqueued).Seconds())
		j.call.Store(cp)
		j.state.Store(int32(jobRunning))
		units += j.units
	}
	est := 0.0
	for _, j := range batch {
		est += j.est
	}
	q.mu.Lock()
	q.runEst, q.runStart = est, start
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.runEst = 0
		q.mu.Unlock()
	}()
	q.metrics.jobs.observe(float64(len(batch)))
	if units > 0 {
		q.metrics.series.observe(float64(units))
	}
	ctx, cancel := callContext(batch)
	defer cancel()
	ctx = context.WithValue(ctx, progressKey{}, cp)
	if q.beforeRun != nil {
		q.beforeRun(len(batch))
	}
	results := runPolicy(ctx, batch)
	q.metrics.inference.observe(time.Since(start).Seconds())
	for i, j := range batch {
		r := results[i]
		if r.err != nil && j.ctx.Err() != nil {
			r.err = j.ctx.Err() // the job's own reason (its deadline, its client), not another's
		}
		j.finish(r)
	}
}

// runPolicy makes batch's call; a panic in it (a model call, an embedder given in code) answers every job with an
// internal error instead of ending the lane's worker, and with it the lane and a long slot.
func runPolicy(ctx context.Context, batch []*job) (results []jobResult) {
	defer func() {
		if p := recover(); p != nil {
			err := fmt.Errorf("panic in a model call: %v\n%s", p, debug.Stack())
			results = make([]jobResult, len(batch))
			for i := range results {
				results[i] = jobResult{err: err}
			}
		}
	}()
	return batch[0].policy.run(ctx, batch)
}

// callContext is the context of one call: cancelled once every job's context has ended, with the latest of
// their deadlines (when every job has one).
func callContext(batch []*job) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var latest time.Time
	for _, j := range batch {
		dl, ok := j.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	stopDeadline := context.CancelFunc(func() {})
	if !latest.IsZero() {
		ctx, stopDeadline = context.WithDeadline(ctx, latest)
	}
	var live atomic.Int64
	live.Store(int64(len(batch)))
	stops := make([]func() bool, len(batch))
	for i, j := range batch {
		stops[i] = context.AfterFunc(j.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		stopDeadline()
		cancel()
	}
}

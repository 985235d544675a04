package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
)

var (
	errQueueFull    = errors.New("queue full")
	errShuttingDown = errors.New("shutting down")
)

// job is one request waiting for, or taking part in, a library call.
type job struct {
	ctx      context.Context
	req      *cutenative.ForecastRequest
	key      string // batch key; "" runs alone
	enqueued time.Time
	result   chan jobResult // buffered: the worker never blocks on a client that left
}

type jobResult struct {
	forecast *cutenative.Forecast
	first    int // index of this job's first series in forecast
	err      error
}

// batcher owns one model's queue: a single worker takes jobs in order and merges those with the same
// batch key into one library call (up to maxSeries series, waiting at most maxWait for company when
// others are already queued).
// Jobs whose context ended while queued are dropped without running; a merged call is cancelled when
// every job in it has been abandoned.
type batcher struct {
	model     *cutenative.Model
	queue     chan *job
	maxSeries int
	maxWait   time.Duration
	metrics   *metrics
	name      string

	beforeRun func(n int) // test hook: called with the batch size before each library call

	mu      sync.Mutex
	closing bool
	quit    chan struct{}
	done    chan struct{}
}

func newBatcher(name string, model *cutenative.Model, queueSize, maxSeries int, maxWait time.Duration, m *metrics) *batcher {
	b := &batcher{model: model, queue: make(chan *job, queueSize), maxSeries: maxSeries, maxWait: maxWait,
		metrics: m, name: name, quit: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// submit enqueues without blocking: errQueueFull when the queue is full, errShuttingDown after close.
func (b *batcher) submit(j *job) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return errShuttingDown
	}
	select {
	case b.queue <- j:
		b.metrics.queueDepth.Add(1)
		return nil
	default:
		return errQueueFull
	}
}

// close stops accepting jobs, lets the worker finish what is queued, and waits for it.
func (b *batcher) close() {
	b.mu.Lock()
	if !b.closing {
		b.closing = true
		close(b.quit)
	}
	b.mu.Unlock()
	<-b.done
}

func (b *batcher) take(j *job) *job {
	b.metrics.queueDepth.Add(-1)
	if err := j.ctx.Err(); err != nil {
		j.result <- jobResult{err: err}
		return nil
	}
	return j
}

func (b *batcher) loop() {
	defer close(b.done)
	var pending *job
	for {
		first := pending
		pending = nil
		if first == nil {
			select {
			case j := <-b.queue:
				first = b.take(j)
			case <-b.quit:
				// Drain what was admitted before close, then stop.
				for {
					select {
					case j := <-b.queue:
						if j = b.take(j); j != nil {
							b.run([]*job{j})
						}
					default:
						return
					}
				}
			}
			if first == nil {
				continue
			}
		}
		batch := []*job{first}
		if first.key != "" {
			pending = b.collect(&batch)
		}
		b.run(batch)
	}
}

// collect adds queued jobs with the batch's key until it is full or maxWait passes; a job that does
// not fit is returned to run next. When nothing else is queued the first job runs at once: waiting
// only pays when requests are arriving faster than they are served (a lone client must not pay the
// batching window).
func (b *batcher) collect(batch *[]*job) *job {
	first := (*batch)[0]
	series := len(first.req.Series)
	var timer <-chan time.Time
	if b.maxWait > 0 && len(b.queue) > 0 {
		t := time.NewTimer(b.maxWait)
		defer t.Stop()
		timer = t.C
	}
	for series < b.maxSeries {
		var j *job
		select {
		case j = <-b.queue:
		default:
			if timer == nil {
				return nil
			}
			select {
			case j = <-b.queue:
			case <-timer:
				return nil
			case <-b.quit:
				return nil
			}
		}
		if j = b.take(j); j == nil {
			continue
		}
		if j.key != first.key || series+len(j.req.Series) > b.maxSeries {
			return j
		}
		*batch = append(*batch, j)
		series += len(j.req.Series)
	}
	return nil
}

// run makes one library call for the batch and hands each job its slice of the result.
func (b *batcher) run(batch []*job) {
	start := time.Now()
	req := batch[0].req
	if len(batch) > 1 {
		merged := *batch[0].req
		merged.Series = nil
		for _, j := range batch {
			merged.Series = append(merged.Series, j.req.Series...)
		}
		req = &merged
	}
	// The call is cancelled once every job in it has been abandoned.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var live atomic.Int64
	live.Store(int64(len(batch)))
	for _, j := range batch {
		stop := context.AfterFunc(j.ctx, func() {
			if live.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
		b.metrics.queueSeconds.observe(start.Sub(j.enqueued).Seconds())
	}
	b.metrics.batchSize.observe(float64(len(req.Series)))
	if b.beforeRun != nil {
		b.beforeRun(len(batch))
	}
	f, err := b.model.Forecast(ctx, req)
	b.metrics.inferenceSeconds.observe(time.Since(start).Seconds())
	first := 0
	for _, j := range batch {
		res := jobResult{forecast: f, first: first, err: err}
		if err != nil && len(batch) > 1 && j.ctx.Err() != nil {
			res.err = j.ctx.Err()
		}
		j.result <- res
		first += len(j.req.Series)
	}
}

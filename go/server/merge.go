package server

import (
	"context"
	"time"

	"github.com/cutenative/cutenative/go/cutenative"
)

// mergeForecasts is the policy of POST /v1/forecast: queued forecast jobs with the same batch key (forecast.go's
// batchKey: requests whose merge cannot change a bit of any answer) share one library call of at most
// maxSeries series, waiting at most wait for company when others are queued; a job with key "" runs alone.
type mergeForecasts struct {
	forecast  func(context.Context, *cutenative.ForecastRequest) (*cutenative.Forecast, error) // the model's
	maxSeries int
	wait      time.Duration
	// maxEst bounds a merged call's estimated seconds (Config.LongAfter): short-lane calls stay short, whatever
	// the number of requests just below the bound (a call of one job may be as long as that job).
	maxEst float64
}

// forecastJob is a mergeForecasts job's payload.
type forecastJob struct {
	req *cutenative.ForecastRequest
	key string // "": runs alone
}

// forecastPart is a job's answer: its series start at first in a forecast it may share with others.
type forecastPart struct {
	f     *cutenative.Forecast
	first int
}

func (p *mergeForecasts) open(batch []*job, units int) bool {
	return batch[0].payload.(forecastJob).key != "" && units < p.maxSeries
}

func (p *mergeForecasts) join(batch []*job, units int, next *job) bool {
	nj, ok := next.payload.(forecastJob)
	// The merged call's estimate: the passes once (the jobs share them: same key, same horizon), every job's rows.
	fixed, est := next.fixed, next.est-next.fixed
	for _, j := range batch {
		fixed = max(fixed, j.fixed)
		est += j.est - j.fixed
	}
	est += fixed
	return ok && next.policy == policy(p) && nj.key == batch[0].payload.(forecastJob).key &&
		units+next.units <= p.maxSeries && (p.maxEst == 0 || est <= p.maxEst)
}

func (p *mergeForecasts) maxWait() time.Duration { return p.wait }

// run makes one Forecast call for the batch's series, in order, and hands each job its place in the result.
func (p *mergeForecasts) run(ctx context.Context, batch []*job) []jobResult {
	req := batch[0].payload.(forecastJob).req
	if len(batch) > 1 {
		merged := *req
		merged.Series = nil
		for _, j := range batch {
			merged.Series = append(merged.Series, j.payload.(forecastJob).req.Series...)
		}
		req = &merged
	}
	f, err := p.forecast(ctx, req)
	out := make([]jobResult, len(batch))
	first := 0
	for i, j := range batch {
		out[i] = jobResult{value: forecastPart{f: f, first: first}, err: err}
		first += len(j.payload.(forecastJob).req.Series)
	}
	return out
}

// submit is the forecast endpoint's call into a queue: req runs in q, merged with queued requests of the
// same key ("" runs alone); est is its estimated seconds, fixed the part a merged call pays once. It returns the call's forecast and the index of req's first series in it.
func (p *mergeForecasts) submit(ctx context.Context, q *jobQueue, req *cutenative.ForecastRequest, key string, est, fixed float64) (*cutenative.Forecast, int, error) {
	j := &job{ctx: ctx, policy: p, payload: forecastJob{req: req, key: key}, units: len(req.Series), est: est, fixed: fixed}
	if err := q.submit(j); err != nil {
		return nil, 0, err
	}
	r := j.wait(ctx)
	if r.err != nil {
		return nil, 0, r.err
	}
	part := r.value.(forecastPart)
	return part.f, part.first, nil
}

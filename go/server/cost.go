package server

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

// A request's compute is estimated before it is queued, in the unit that scales for its kind, and turned into
// seconds by its model's cost model (costModel), measured when the model loads: two probe calls of known work on
// the model's own device, mode and threads. The estimate decides:
//   - the lane: above Config.LongAfter the request runs in its model's long lane (one call at a time, and at most
//     Config.LongSlots long calls server-wide), so short requests never wait behind it;
//   - whether it is taken at all: a request whose estimate alone exceeds the time left before its deadline is
//     refused at once (400 too_expensive, naming the limit); one that could finish alone but not behind the work
//     already waiting in its lane is 429 with Retry-After.
//
// The units, per kind (each implementation computes its own work):
//   - Chronos-2: forward passes (1, plus one per native horizon of rollout) and token rows summed over them (rows x
//     patch tokens; a rollout pass runs every row as 9 quantile paths);
//   - Kronos: decoding steps (the horizon) and token rows summed over them (tasks x samples x window);
//   - embeddings: calls and tokens (at most max_tokens per text; the bytes of a text bound its tokens).
//
// A call's working memory (activations, KV caches, sample buffers) is estimated from the model's shapes where the
// kind's memory grows with a request (Kronos), and refused above Config.MaxCallBytes.

// work is what one request costs its model.
type work struct {
	passes int64 // sequential steps: forward passes, decoding steps, calls
	units  int64 // what each step's time grows with, summed over the steps: token rows, tokens
	what   string
}

// costModel turns work into seconds: passes x perPass + units x perUnit.
type costModel struct {
	perPass, perUnit float64 // seconds
}

func (c costModel) seconds(w work) float64 {
	return float64(w.passes)*c.perPass + float64(w.units)*c.perUnit
}

// probe is one calibration call: its work and the call itself.
type probe struct {
	w   work
	run func(ctx context.Context) error
}

// calibrate times two probes of equal passes and different units (best of three each) and fits the cost model.
// The floor of each coefficient keeps an estimate positive when timing noise makes the fit degenerate.
func calibrate(ctx context.Context, small, large probe) (costModel, error) {
	best := func(p probe) (float64, error) {
		t := math.Inf(1)
		for i := 0; i < 3; i++ {
			start := time.Now()
			if err := p.run(ctx); err != nil {
				return 0, err
			}
			t = min(t, time.Since(start).Seconds())
		}
		return t, nil
	}
	t1, err := best(small)
	if err != nil {
		return costModel{}, err
	}
	t2, err := best(large)
	if err != nil {
		return costModel{}, err
	}
	var c costModel
	if du := large.w.units - small.w.units; du > 0 {
		c.perUnit = max(0, (t2-t1)/float64(du))
	}
	if c.perUnit == 0 { // noise: the larger call was no slower; charge its time to its units
		c.perUnit = t2 / float64(max(large.w.units, 1))
	}
	c.perPass = max(1e-6, (t1-c.perUnit*float64(small.w.units))/float64(max(small.w.passes, 1)))
	return c, nil
}

// estimate is what the server knows about a request before it runs.
type estimate struct {
	work      work
	seconds   float64 // compute, from the model's cost model
	callBytes int64   // working memory of the library call (0: not estimated for this kind)
}

// admission decides a request's lane from its estimate, or refuses it: the one place where the limits on compute,
// working memory and deadlines are applied (every endpoint calls it after validating its request).
func (s *Server) admission(ctx context.Context, m *servedModel, est estimate) (*jobQueue, *apiError) {
	if est.callBytes > s.cfg.MaxCallBytes {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "too_expensive", reason: "call_memory",
			Message: fmt.Sprintf("the request needs an estimated %s of working memory in the library (%s), above the limit of %s "+
				"per call (-max-call-bytes); split it", formatBytes(est.callBytes), est.work.what, formatBytes(s.cfg.MaxCallBytes))}
	}
	left := s.cfg.Timeout
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	if est.seconds > left.Seconds() {
		return nil, &apiError{Status: http.StatusBadRequest, Code: "too_expensive", reason: "compute_estimate",
			Message: fmt.Sprintf("the request needs an estimated %.1f s of compute (%s) on model %q, more than the %.1f s left "+
				"before its deadline (-timeout %s); split it", est.seconds, est.work.what, m.name, left.Seconds(), s.cfg.Timeout)}
	}
	lane, wait := m.short, m.short.backlog()
	if est.seconds > s.cfg.LongAfter.Seconds() {
		// The model's long lane runs its calls one after another; every model's long calls share the slots.
		lane, wait = m.long, max(m.long.backlog(), s.longBacklog())
	}
	if wait+est.seconds > left.Seconds() {
		retry := int(math.Ceil(wait))
		return nil, &apiError{Status: http.StatusTooManyRequests, Code: "overloaded", reason: "deadline_backlog",
			retryAfter: strconv.Itoa(max(retry, 1)),
			Message: fmt.Sprintf("the %s lane holds an estimated %.1f s of work ahead of this request (%.1f s, model %q): it could "+
				"not finish before its deadline (-timeout %s); retry later", lane.lane, wait, est.seconds, m.name, s.cfg.Timeout)}
	}
	return lane, nil
}

// longBacklog is the estimated wait for a long lane: every model's long lanes share Config.LongSlots, so the work
// queued in all of them, spread over the slots.
func (s *Server) longBacklog() float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var sum float64
	for _, m := range s.models {
		sum += m.long.backlog()
	}
	return sum / float64(s.cfg.LongSlots)
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

package server

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
)

// The bytes a request holds while it is in flight are counted against one server-wide budget
// (Config.MaxInflightBytes): what its body decodes into (counted while the body is decoded, so a body the
// budget cannot hold stops early), then what its answer will hold (estimated from the request's sizes before the
// model runs). A request that alone needs more than the whole budget is 413; one that finds the budget spent by
// others is 429 with Retry-After. The wire bytes themselves are never held whole: bodies are decoded as they
// arrive (decode.go), so the bytes a body costs are those of the values it holds.
//
// Decoded sizes are charged as Go holds them: a value 8 bytes (a float32 and the slack of the slice growing
// around it), a string its bytes plus 32, a series or covariate record 256.
const (
	bytesPerValue  = 8
	bytesPerString = 32
	bytesPerRecord = 256
	// bytesPerOutputValue is what one output value (a float32 of a forecast or an embedding) costs until the
	// answer is sent: the library's result, the response's copy and its JSON text (~12 bytes).
	bytesPerOutputValue = 24
	// budgetChunk is how much an account takes from the budget at a time.
	budgetChunk = 64 << 10
)

// byteBudget is the server-wide count of bytes in flight.
type byteBudget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

func (b *byteBudget) take(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			for p := b.peak.Load(); u+n > p && !b.peak.CompareAndSwap(p, u+n); p = b.peak.Load() {
			}
			return true
		}
	}
}

func (b *byteBudget) give(n int64) { b.used.Add(-n) }

// account is one request's share of the budget: it takes chunks as the request's charges grow, and gives all back
// on release. Safe for use by one goroutine at a time (a request's handler), release from any.
type account struct {
	budget   *byteBudget
	what     string // "the request" in messages
	mu       sync.Mutex
	charged  int64 // bytes charged
	held     int64 // bytes taken from the budget (charged rounded up to chunks)
	released bool
}

func (b *byteBudget) open() *account { return &account{budget: b} }

// charge adds n bytes to the request's count; errors are *apiError: 413 when the request alone would pass the
// budget, 429 when the budget is spent by requests in flight.
func (a *account) charge(n int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.charged += n
	if a.charged <= a.held {
		return nil
	}
	need := (a.charged - a.held + budgetChunk - 1) / budgetChunk * budgetChunk
	if a.charged > a.budget.limit {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: "too_large", reason: "inflight_bytes",
			Message: fmt.Sprintf("the request holds more than %d bytes once decoded (its values, strings and answer), more than the "+
				"server keeps in flight for all requests (-max-inflight-bytes %d)", a.charged, a.budget.limit)}
	}
	if a.released || !a.budget.take(need) {
		return &apiError{Status: http.StatusTooManyRequests, Code: "overloaded", reason: "inflight_bytes",
			Message: fmt.Sprintf("the server's in-flight bytes budget (-max-inflight-bytes %d) is held by other requests; retry later",
				a.budget.limit)}
	}
	a.held += need
	return nil
}

// release gives the request's bytes back (idempotent).
func (a *account) release() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.released {
		a.budget.give(a.held)
		a.held, a.released = 0, true
	}
}

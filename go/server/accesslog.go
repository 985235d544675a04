package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"
)

// requestInfo is what a handler tells the access log about its request: the model and series count where it
// knows them, and the cause of a 5xx answer. Handlers run on the request's goroutine; the access log reads it
// after the handler returned.
type requestInfo struct {
	id         string
	model      string // as the request named it (or the default model)
	modelKnown bool   // model is a configured model: its per-model metrics are counted
	series     int    // -1: not known
	cause      error  // why the answer is a 5xx
	key        int    // the API key's index, -1: none
}

type requestInfoKey struct{}

func infoOf(r *http.Request) *requestInfo {
	ri, _ := r.Context().Value(requestInfoKey{}).(*requestInfo)
	return ri
}

// noteModel records the model a request asked for (known: it is configured) and its series count (-1: none).
func noteModel(r *http.Request, model string, known bool, series int) {
	if ri := infoOf(r); ri != nil {
		ri.model, ri.modelKnown, ri.series = model, known, series
	}
}

// noteCause records why a request was answered with a 5xx.
func noteCause(r *http.Request, err error) {
	if ri := infoOf(r); ri != nil && err != nil {
		ri.cause = err
	}
}

// RequestID returns the request id the server gave r (from X-Request-Id when it is sane, else generated);
// "" outside the server's handler.
func RequestID(ctx context.Context) string {
	if ri, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return ri.id
	}
	return ""
}

// saneRequestID accepts 1 to 128 characters of letters, digits and - _ . : / + = (no spaces, quotes or
// control characters that could forge log lines).
func saneRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '=':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recorder remembers the status and size of an answer. When the mux matched no route it turns the mux's
// plain-text 404 and 405 answers into the documented JSON error body.
type recorder struct {
	http.ResponseWriter
	status    int
	bytes     int64
	unmatched bool // the mux found no route: its 404/405 are rewritten
	swallow   bool // the JSON body was written: drop the mux's text
}

func (w *recorder) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status = code
	if w.unmatched && (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) {
		h := w.ResponseWriter.Header()
		h.Del("X-Content-Type-Options")
		e := &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such endpoint"}
		if code == http.StatusMethodNotAllowed {
			e = &apiError{Status: code, Code: "method_not_allowed",
				Message: "method not allowed for this endpoint (allowed: " + h.Get("Allow") + ")"}
		}
		body, _ := encodeJSON(errorBody(e))
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", fmt.Sprint(len(body)))
		w.ResponseWriter.WriteHeader(code)
		n, _ := w.ResponseWriter.Write(body)
		w.bytes += int64(n)
		w.swallow = true
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if w.swallow {
		return len(b), nil
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.NewResponseController reach the connection (read deadlines, flushes).
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// serveLogged wraps the mux: a request id (X-Request-Id in and out), JSON 404/405 counted in the metrics, a
// recovered panic answered 500, and one access-log line per request; 5xx lines are errors with their cause.
func (s *Server) serveLogged(mux *http.ServeMux) http.Handler {
	log := s.logger()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		id := r.Header.Get("X-Request-Id")
		if !saneRequestID(id) {
			id = newRequestID()
		}
		w.Header().Set("X-Request-Id", id)
		ri := &requestInfo{id: id, series: -1, key: -1}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, ri))
		_, pattern := mux.Handler(r)
		rec := &recorder{ResponseWriter: w, unmatched: pattern == ""}
		hostOK := s.hostAllowed(r)
		if !hostOK {
			rec.unmatched = false
			rec.Header().Set("Connection", "close")
			writeError(rec, hostError())
			s.metrics.refuse(cmpOr(s.endpointNames[pattern], "unmatched"), "host")
		}
		func() {
			if !hostOK {
				return
			}
			defer func() {
				if p := recover(); p != nil {
					if p == http.ErrAbortHandler {
						panic(p)
					}
					ri.cause = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
					if rec.status == 0 {
						writeError(rec, &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"})
					}
				}
			}()
			mux.ServeHTTP(rec, r)
		}()
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := pattern // r.Pattern needs Go 1.23; go.mod says 1.22
		if rec.unmatched {
			switch rec.status {
			case http.StatusNotFound:
				s.metrics.countRequest("unmatched", "not_found")
			case http.StatusMethodNotAllowed:
				s.metrics.countRequest("unmatched", "method_not_allowed")
			}
		}
		if ri.modelKnown {
			s.metrics.countModel(ri.model, rec.status, ri.series)
		}
		level := slog.LevelInfo
		attrs := make([]slog.Attr, 0, 12)
		attrs = append(attrs, slog.String("request_id", id), slog.String("method", r.Method))
		if route == "" {
			attrs = append(attrs, slog.String("route", "unmatched"), slog.String("path", truncate(r.URL.Path, 256)))
		} else {
			attrs = append(attrs, slog.String("route", route))
		}
		attrs = append(attrs, slog.Int("status", rec.status),
			slog.Float64("duration_ms", float64(time.Since(t0).Microseconds())/1000), slog.Int64("bytes", rec.bytes))
		if ri.model != "" {
			attrs = append(attrs, slog.String("model", truncate(ri.model, 128)))
		}
		if ri.series >= 0 {
			attrs = append(attrs, slog.Int("series", ri.series))
		}
		// A 503 from /readyz is the answer it exists to give (loading, draining): not an error.
		if rec.status >= 500 && !(rec.status == http.StatusServiceUnavailable && pattern == "GET /readyz") {
			level = slog.LevelError
			cause := "unknown"
			if ri.cause != nil {
				cause = ri.cause.Error()
			}
			attrs = append(attrs, slog.String("cause", cause))
		}
		log.LogAttrs(r.Context(), level, "request", attrs...)
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

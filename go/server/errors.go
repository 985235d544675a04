package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

// apiError is the JSON error body: {"error": {"code": ..., "message": ...}}.
type apiError struct {
	Status     int    `json:"-"`
	Code       string `json:"code"`
	Message    string `json:"message"`
	cause      error  // for the log: why a 5xx happened (never sent)
	reason     string // for cutenative_refusals_total: the limit a refusal names ("" : not a refusal, or a 400 "limit")
	retryAfter string // Retry-After of a 429 or 503 ("" : 1)
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func badRequest(msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: msg}
}

// fromError maps binding and context errors onto HTTP statuses.
func fromError(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errQueueFull):
		return &apiError{Status: http.StatusTooManyRequests, Code: "overloaded", reason: "queue_full", Message: err.Error()}
	case errors.Is(err, errKeyInflight):
		return &apiError{Status: http.StatusTooManyRequests, Code: "overloaded", reason: "key_inflight",
			Message: "this API key has as many requests in flight as one key may (-max-inflight-per-key); retry later"}
	case errors.Is(err, errInflight):
		return &apiError{Status: http.StatusTooManyRequests, Code: "overloaded", reason: "inflight",
			Message: "the server is handling as many requests as it takes at once (max-inflight); retry later"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, cutenative.ErrDeadlineExceeded):
		return &apiError{Status: http.StatusGatewayTimeout, Code: "deadline_exceeded", Message: "the request took longer than the server's timeout (-timeout)"}
	case errors.Is(err, context.Canceled), errors.Is(err, cutenative.ErrCancelled):
		return &apiError{Status: 499, Code: "cancelled", Message: "the request was cancelled"}
	case errors.Is(err, errShuttingDown), errors.Is(err, cutenative.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the server is shutting down", cause: err}
	}
	var ce *cutenative.Error
	if errors.As(err, &ce) {
		switch ce.Status {
		case cutenative.StatusInvalidArgument:
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: ce.Message}
		case cutenative.StatusUnsupported:
			return &apiError{Status: http.StatusBadRequest, Code: "unsupported", Message: ce.Message}
		case cutenative.StatusOutOfDeviceMemory, cutenative.StatusOutOfHostMemory, cutenative.StatusBusy:
			return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: ce.Message, cause: err}
		}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", cause: err}
}

// logCause is what the access log says about a 5xx answer: the underlying error, else the answer itself.
func (e *apiError) logCause() error {
	if e.cause != nil {
		return e.cause
	}
	return e
}

// encodeJSON encodes v as one line without HTML escaping (">=" stays ">=", not "\u003e=").
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // Encode ends the line with '\n'
		return nil, err
	}
	return b.Bytes(), nil
}

// writeJSON encodes v before anything is sent: a value that cannot be encoded (NaN in a forecast, say) is a
// logged 500 with a JSON body, never a 200 with an empty one.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) *apiError {
	body, err := encodeJSON(v)
	if err != nil {
		return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the response could not be encoded",
			cause: fmt.Errorf("encoding the %d response: %w", status, err)}
	}
	writeBody(w, status, body)
	return nil
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeJSONStatic writes small fixed bodies (health answers, error bodies) that always encode.
func writeJSONStatic(w http.ResponseWriter, status int, v any) {
	body, _ := encodeJSON(v)
	writeBody(w, status, body)
}

func errorBody(e *apiError) api.ErrorResponse {
	return api.ErrorResponse{Error: api.Error{Code: e.Code, Message: e.Message}}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests || e.retryAfter != "" {
		w.Header().Set("Retry-After", cmpOr(e.retryAfter, "1"))
	}
	writeJSONStatic(w, e.Status, errorBody(e))
}

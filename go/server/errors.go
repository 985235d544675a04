package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/cutenative/cutenative/go/api"
	"github.com/cutenative/cutenative/go/cutenative"
)

// apiError is the JSON error body: {"error": {"code": ..., "message": ...}}.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
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
		return &apiError{Status: http.StatusTooManyRequests, Code: "overloaded", Message: "the request queue is full; retry later"}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, cutenative.ErrDeadlineExceeded):
		return &apiError{Status: http.StatusGatewayTimeout, Code: "deadline_exceeded", Message: "the request took longer than the server's timeout"}
	case errors.Is(err, context.Canceled), errors.Is(err, cutenative.ErrCancelled):
		return &apiError{Status: 499, Code: "cancelled", Message: "the request was cancelled"}
	case errors.Is(err, errShuttingDown), errors.Is(err, cutenative.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the server is shutting down"}
	}
	var ce *cutenative.Error
	if errors.As(err, &ce) {
		switch ce.Status {
		case cutenative.StatusInvalidArgument:
			return &apiError{Status: http.StatusBadRequest, Code: "invalid_argument", Message: ce.Message}
		case cutenative.StatusUnsupported:
			return &apiError{Status: http.StatusBadRequest, Code: "unsupported", Message: ce.Message}
		case cutenative.StatusOutOfDeviceMemory, cutenative.StatusOutOfHostMemory, cutenative.StatusBusy:
			return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: ce.Message}
		}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
}

// writeJSON encodes v before anything is sent: a value that cannot be encoded (NaN in a forecast, say) is a
// logged 500 with a JSON body, never a 200 with an empty one.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) *apiError {
	body, err := json.Marshal(v)
	if err != nil {
		s.logger().Error("cannot encode the response", "status", status, "error", err)
		return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "the response could not be encoded"}
	}
	writeBody(w, status, append(body, '\n'))
	return nil
}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeJSONStatic writes small fixed bodies (health answers, error bodies) that always encode.
func writeJSONStatic(w http.ResponseWriter, status int, v any) {
	body, _ := json.Marshal(v)
	writeBody(w, status, append(body, '\n'))
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSONStatic(w, e.Status, api.ErrorResponse{Error: api.Error{Code: e.Code, Message: e.Message}})
}

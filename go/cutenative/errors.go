package cutenative

/*
#include "cutenative.h"
*/
import "C"

import (
	"errors"
	"fmt"
)

// Status is the library's cn_status.
type Status int

// The library's statuses (values are part of the C ABI).
const (
	StatusOK                Status = C.CN_STATUS_OK
	StatusInvalidArgument   Status = C.CN_STATUS_INVALID_ARGUMENT
	StatusNotFound          Status = C.CN_STATUS_NOT_FOUND
	StatusUnsupported       Status = C.CN_STATUS_UNSUPPORTED
	StatusModelFormat       Status = C.CN_STATUS_MODEL_FORMAT
	StatusOutOfHostMemory   Status = C.CN_STATUS_OUT_OF_HOST_MEMORY
	StatusOutOfDeviceMemory Status = C.CN_STATUS_OUT_OF_DEVICE_MEMORY
	StatusCancelled         Status = C.CN_STATUS_CANCELLED
	StatusDeadlineExceeded  Status = C.CN_STATUS_DEADLINE_EXCEEDED
	StatusBusy              Status = C.CN_STATUS_BUSY
	StatusInternal          Status = C.CN_STATUS_INTERNAL
)

// String returns the library's name for the status ("INVALID_ARGUMENT", ...).
func (s Status) String() string { return C.GoString(C.cn_status_name(C.cn_status(s))) }

// Sentinel errors, one per failing status, for errors.Is.
var (
	ErrInvalidArgument   = &Error{Status: StatusInvalidArgument}
	ErrNotFound          = &Error{Status: StatusNotFound}
	ErrUnsupported       = &Error{Status: StatusUnsupported}
	ErrModelFormat       = &Error{Status: StatusModelFormat}
	ErrOutOfHostMemory   = &Error{Status: StatusOutOfHostMemory}
	ErrOutOfDeviceMemory = &Error{Status: StatusOutOfDeviceMemory}
	ErrCancelled         = &Error{Status: StatusCancelled}
	ErrDeadlineExceeded  = &Error{Status: StatusDeadlineExceeded}
	ErrBusy              = &Error{Status: StatusBusy}
	ErrInternal          = &Error{Status: StatusInternal}
)

// ErrClosed is returned by calls on a Model after Close.
var ErrClosed = errors.New("cutenative: model is closed")

// ErrIncompatible is returned by Open when the loaded library's ABI does not match this package.
var ErrIncompatible = errors.New("cutenative: incompatible library ABI")

// Error is a failure reported by the library.
type Error struct {
	Op      string // the Go method, e.g. "Open"
	Status  Status
	Message string // the library's message: names the file, field or tensor at fault
}

func (e *Error) Error() string {
	if e.Op == "" && e.Message == "" {
		return "cutenative: " + e.Status.String()
	}
	return fmt.Sprintf("cutenative: %s: %s: %s", e.Op, e.Status, e.Message)
}

// Is matches any *Error with the same Status, so errors.Is(err, ErrNotFound) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Status == e.Status
}

// call runs one C call with its own error object and converts a failure into an *Error.
func call(op string, f func(e *C.cn_error) C.cn_status) error {
	var e *C.cn_error
	if C.cn_error_create(&e) != C.CN_STATUS_OK {
		return &Error{Op: op, Status: StatusOutOfHostMemory, Message: "cannot allocate an error object"}
	}
	defer C.cn_error_free(e)
	if st := f(e); st != C.CN_STATUS_OK {
		return &Error{Op: op, Status: Status(st), Message: C.GoString(C.cn_error_message(e))}
	}
	return nil
}

// Package cutenative binds libcutenative's C ABI (capi/include/cutenative.h) for Go, in process, through
// cgo: no Python, no HTTP hop.
//
// Build: the header comes from the repository (capi/include); the library is found through CGO_LDFLAGS
// (scripts/go.sh sets -L and an rpath to the CMake build directory) or, once installed, the system
// linker path. At init the package checks the library's ABI version: a different major, or an older
// minor than this package was written for, makes Open fail with ErrIncompatible.
//
// Errors: every failing call returns an *Error carrying the library's status and message; match the
// status with errors.Is(err, cutenative.ErrNotFound) and friends. The message travels with each call
// (no thread-local "last error"), so goroutines moving between OS threads stay correct.
//
// Concurrency: a *Model is safe for concurrent use by many goroutines. Close waits for calls in flight,
// is idempotent, and later calls return ErrClosed.
package cutenative

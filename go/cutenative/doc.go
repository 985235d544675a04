// Package cutenative binds libcutenative's C ABI (capi/include/cutenative.h) for Go, in process, through
// cgo: no Python, no HTTP hop.
//
// Build: the header is the module's copy (include/cutenative.h, identical to the repository's
// capi/include/cutenative.h); the library is found through pkg-config (`#cgo pkg-config: cutenative`): set
// PKG_CONFIG_PATH to an installed prefix's lib/pkgconfig, or to a CMake build directory (its
// cutenative-uninstalled.pc; scripts/go.sh does this and adds an rpath), and give the program an rpath or
// install the library where the dynamic linker looks (docs/install.md). At init the package checks the library's ABI version: a different major, or an older
// minor than this package was written for, makes Open fail with ErrIncompatible.
//
// Errors: every failing call returns an *Error carrying the library's status and message; match the
// status with errors.Is(err, cutenative.ErrNotFound) and friends. The message travels with each call
// (no thread-local "last error"), so goroutines moving between OS threads stay correct.
//
// Concurrency: a *Model is safe for concurrent use by many goroutines. Close waits for calls in flight,
// is idempotent, and later calls return ErrClosed.
package cutenative

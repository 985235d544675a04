package cutenative

/*
#include "cutenative.h"
*/
import "C"

import "fmt"

// The ABI this package was written against (the header it compiles with).
const (
	ABIMajor = C.CN_ABI_VERSION_MAJOR
	ABIMinor = C.CN_ABI_VERSION_MINOR
)

// Version is the library's version string, e.g. "0.1.0".
func Version() string { return C.GoString(C.cn_version()) }

// BuildInfo describes the library build: version, torch, CUDA, compiler.
func BuildInfo() string { return C.GoString(C.cn_build_info()) }

// ABIVersion is the ABI version of the loaded library.
func ABIVersion() (major, minor uint32) {
	var ma, mi C.uint32_t
	C.cn_abi_version(&ma, &mi)
	return uint32(ma), uint32(mi)
}

// CPUNumerics says how reproducible CPU results are in this process (cn_cpu_numerics): whether a series'
// Chronos-2 forecast depends neither on the other series of its call nor on memory alignment (BatchInvariant),
// nor on the number of CPU threads (ThreadInvariant), and a one-line account of the processor and BLAS mode.
// Loading the library sets MKL's reproducibility mode unless MKL_CBWR is set in the environment.
type CPUNumerics struct {
	BatchInvariant  bool
	ThreadInvariant bool
	Description     string
}

// CPUNumericsInfo reports the process's CPU numerics; the server's request merging relies on BatchInvariant.
func CPUNumericsInfo() CPUNumerics {
	var d *C.char
	f := uint32(C.cn_cpu_numerics(&d))
	return CPUNumerics{
		BatchInvariant:  f&uint32(C.CN_CPU_BATCH_INVARIANT) != 0,
		ThreadInvariant: f&uint32(C.CN_CPU_THREAD_INVARIANT) != 0,
		Description:     C.GoString(d),
	}
}

// CUDADeviceCount is the number of CUDA devices the library can use (0 in a CPU build or without GPU).
func CUDADeviceCount() int { return int(C.cn_cuda_device_count()) }

// checkABI applies the compatibility rule of cutenative.h: same major, library minor >= ours.
func checkABI(major, minor uint32) error {
	if major != ABIMajor || minor < ABIMinor {
		return fmt.Errorf("%w: library %d.%d, package needs %d.%d (same major, minor >= %d)",
			ErrIncompatible, major, minor, ABIMajor, ABIMinor, ABIMinor)
	}
	return nil
}

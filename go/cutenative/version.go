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

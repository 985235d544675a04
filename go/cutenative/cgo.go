package cutenative

// The header is the repository's; the library comes from CGO_LDFLAGS (scripts/go.sh) or the system.

/*
#cgo CFLAGS: -I${SRCDIR}/../../capi/include
#cgo LDFLAGS: -lcutenative
#include "cutenative.h"
*/
import "C"

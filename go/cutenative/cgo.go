package cutenative

// The header is this module's copy of capi/include/cutenative.h (include/, kept identical by the CMake build and
// checked by TestHeaderCopyMatchesCAPI); the library comes from pkg-config: an installed prefix's cutenative.pc
// (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig) or a build tree's cutenative-uninstalled.pc (PKG_CONFIG_PATH=<build>,
// as scripts/go.sh sets). See docs/install.md.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#cgo pkg-config: cutenative
#include "cutenative.h"
*/
import "C"

#!/usr/bin/env bash
# Builds cutenative-server and cutenative-load here, for the CUDA machine (which has no Go), into .device/bin/
# (git-ignored; carry `.device` to the machine). They are cgo binaries linked against a libcutenative of the
# same ABI built here; at run time they load libcutenative.so.0 through, in this order,
#   1. LD_LIBRARY_PATH (what scripts/bench_server_gpu.sh sets: build-gpu/, then the machine's torch/lib),
#   2. their RUNPATH, $ORIGIN/../../build-gpu, i.e. <repo>/build-gpu seen from <repo>/.device/bin,
# and no absolute path of this machine. The library built there (scripts/device_test.sh) finds its torch
# libraries through its own RUNPATH, or LD_LIBRARY_PATH.
#   scripts/build_server_for_device.sh [dir holding libcutenative.so to link against, default $CN_BUILD]
# Not scripts/go.sh: it links with -rpath $CN_BUILD (an absolute path here); the environment is otherwise its.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
libdir="$(cd "${1:-$CN_BUILD}" && pwd)"
[ -e "$libdir/libcutenative.so" ] || { echo "build_server_for_device.sh: no libcutenative.so in $libdir" >&2; exit 1; }
GO="$(cn_go)" || { echo "build_server_for_device.sh: no Go >= 1.22; run scripts/setup.sh" >&2; exit 1; }
out="$CN_ROOT/.device/bin"
mkdir -p "$out"
export CGO_ENABLED=1
export PKG_CONFIG_PATH="$libdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"  # its cutenative-uninstalled.pc (#cgo pkg-config)
export CGO_LDFLAGS="-L$libdir -Wl,--enable-new-dtags,-rpath,\$ORIGIN/../../build-gpu"
export GOPROXY=off GOTOOLCHAIN=local GOFLAGS=-mod=mod
export GOCACHE="${GOCACHE:-$CN_CACHE/go-build}"
cd "$CN_ROOT/go"
for cmd in cutenative-server cutenative-load; do
    "$GO" build -trimpath -ldflags="-s -w" -o "$out/$cmd" "./cmd/$cmd"
done

# What the binaries need at run time: the library by its soname, libc's symbol versions, the RUNPATH.
status=0
for cmd in cutenative-server cutenative-load; do
    f="$out/$cmd"
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    rpath=$(readelf -d "$f" | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\1 \2/p')
    glibc=$(readelf -V --wide "$f" | grep -o 'GLIBC_[0-9.]*' | sort -u -V | tail -1)
    echo "$cmd: NEEDED $needed; ${rpath:-no RPATH/RUNPATH}; newest symbol version $glibc"
    case "$rpath" in
        "" | "RUNPATH \$ORIGIN/../../build-gpu") ;;
        *) echo "  unexpected RPATH/RUNPATH (wanted RUNPATH \$ORIGIN/../../build-gpu)" >&2; status=1 ;;
    esac
    # Ubuntu 24.04 has glibc 2.39.
    if ! printf '%s\n' "${glibc#GLIBC_}" 2.39 | sort -V -C; then
        echo "  needs $glibc, newer than Ubuntu 24.04's 2.39" >&2; status=1
    fi
done
exit "$status"

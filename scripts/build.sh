#!/usr/bin/env bash
# Configures and builds cutenative into $CN_BUILD (default <repo>/build). Extra arguments go to CMake's
# configure step, e.g. scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES=90 -DCN_CUDA=ON
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
py="${CN_PYTHON:-$CN_VENV/bin/python}"
jobs="${CN_JOBS:-$(nproc)}"
cmake -S "$CN_ROOT" -B "$CN_BUILD" -DCN_PYTHON="$py" "$@" >"$CN_BUILD.configure.log" 2>&1 || {
    cat "$CN_BUILD.configure.log"; exit 1; }
grep -E '^-- cutenative:' "$CN_BUILD.configure.log" || true
cmake --build "$CN_BUILD" -j "$jobs"

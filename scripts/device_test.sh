#!/usr/bin/env bash
# On a CUDA machine (H100/H200, Ubuntu 24.04, torch 2.11.0+cu130 in its python3, nvcc 13, no Go): builds
# cutenative with its CUDA kernels for sm_90 against that machine's own torch, then runs every ctest test,
# the "gpu"-labelled ones included. Needs .device/ from scripts/device_bundle.sh. Logs go to $OUT if set.
#   scripts/device_test.sh [extra cmake args]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
build="$root/build-gpu"
export CMAKE_POLICY_VERSION_MINIMUM=3.5
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
python3 -c 'import torch;print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee -a "$out/device.txt"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" "$@" \
    >"$out/configure.log" 2>&1 || { tail -50 "$out/configure.log"; exit 1; }
grep -E '^-- cutenative:' "$out/configure.log"
cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
echo "build ok"
(cd "$build" && ctest --output-on-failure -j 8) 2>&1 | tee "$out/ctest.log"
rc=${PIPESTATUS[0]}
nm -D --defined-only "$build/libcutenative.so" | awk '{print $3}' | grep -v '^cn_' | sed 's/^/non-cn symbol: /'
exit "$rc"

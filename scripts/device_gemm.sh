#!/usr/bin/env bash
# On the CUDA machine (issue #19): builds the library, the kernel GPU tests, the Chronos-2 C-ABI GPU tests and
# cn_bench_gemm against that machine's torch, with the CUTLASS headers from the nvidia-cutlass wheel carried in
# .whl/ (unpacked into /tmp); then runs the batch-invariant GEMM tests, the GEMM table per row count, the
# Chronos-2 batch-invariance test with tile_gemm on, and the batch sweep (fused rows) with tile_gemm off and on.
# Needs .device/ (scripts/device_bundle.sh) and .whl/ holding nvidia_cutlass-*.whl and
# chronos_forecasting-*.whl; carry both. Logs and tables go to $OUT.
#   scripts/device_gemm.sh [--no-sweep | --sweep-only] [--sweep-batches 1,4,16,64,256,1024] [--rows cn-fused-bf16,...]
# (--sweep-only: build, then the sweep alone: a second call on the same warm machine.)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
sweep=1
tests=1
batches="1,4,16,64,256,1024"
rows="cn-fused-f32,cn-fused-bf16"
while [ $# -gt 0 ]; do
    case "$1" in
        --no-sweep) sweep=0 ;;
        --sweep-only) tests=0 ;;
        --sweep-batches) batches="$2"; shift ;;
        --rows) rows="$2"; shift ;;
        *) echo "device_gemm.sh: unknown flag $1" >&2; exit 2 ;;
    esac
    shift
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
rm -rf /tmp/cutlass && mkdir -p /tmp/cutlass && (cd /tmp/cutlass && python3 -m zipfile -e "$root"/.whl/nvidia_cutlass-*.whl .) || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$root"/.whl/chronos_forecasting-*.whl || exit 1
export PYTHONPATH=/tmp/site
build="$root/build-gpu"
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -S "$root" -B "$build" -G Ninja -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" \
    -DCN_CUTLASS_INCLUDE_DIR=/tmp/cutlass/cutlass_library/source/include >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
grep -E '^-- cutenative:' "$out/configure.log"
t0=$(date +%s)
cmake --build "$build" -j "$(nproc)" --target cutenative test_kernels_gpu test_capi_gpu cn_bench_gemm >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
echo "build ok in $(( $(date +%s) - t0 )) s"
rc=0
if [ "$tests" = 1 ]; then
    "$build/tests/test_kernels_gpu" --gtest_filter='TileGemm*:RowsGemm*' >"$out/test_kernels_gpu.log" 2>&1 || rc=1
    tail -15 "$out/test_kernels_gpu.log"
    CN_TILE_GEMM=1 "$build/tests/test_capi_gpu" --gtest_filter='Chronos2BatchGpu.*:Chronos2Gpu.*' >"$out/test_capi_gpu.log" 2>&1 || rc=1
    tail -8 "$out/test_capi_gpu.log"
    for d in bf16 f32; do "$build/tests/cn_bench_gemm" $d | tee "$out/gemm_$d.md"; done
fi
if [ "$sweep" = 1 ]; then
    ck=/tmp/c2base
    for setting in 0 1; do
        r="$rows"
        [ "$setting" = 0 ] && r="cn-fused-bf16"  # f32 without tile_gemm: per-series GEMMs, measured before (docs/benchmarks.md)
        CN_TILE_GEMM=$setting python3 "$root/scripts/bench_chronos2.py" --lib "$build/libcutenative.so" --workloads s \
            --sweep-batches "$batches" --rows "$r" --checkpoint "$ck" --out "$out/sweep_tile$setting.md" >"$out/sweep_tile$setting.log" 2>&1 || rc=1
        sed -n '/^| B /,/^$/p' "$out/sweep_tile$setting.md"
    done
fi
exit "$rc"

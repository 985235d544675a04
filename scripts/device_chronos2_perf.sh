#!/usr/bin/env bash
# On the CUDA machine (issue #19): builds the library, the kernel GPU tests, the Chronos-2 C-ABI GPU tests and
# cn_bench_gemm against that machine's torch; runs the GEMM and attention kernel tests, the Chronos-2 GPU tests
# (parity, batch invariance) with the fused attention kernel off and on, the GEMM table per row count, and the
# batch sweep of the fused rows with CN_ROPE_ATTENTION=0 and 1, then torch.profiler tables at B=1 and B=1024.
# Needs .device/ (scripts/device_bundle.sh) and the chronos-forecasting wheel in .whl/; carry both. Logs and
# tables go to $OUT.
#   scripts/device_chronos2_perf.sh [--no-sweep | --sweep-only] [--sweep-batches 1,4,16,64,256,1024] [--profile-only]
# (--sweep-only: build, then the sweep and profiles alone: a second call on the same warm machine.)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
sweep=1
tests=1
batches="1,4,16,64,256,1024"
while [ $# -gt 0 ]; do
    case "$1" in
        --no-sweep) sweep=0 ;;
        --sweep-only) tests=0 ;;
        --sweep-batches) batches="$2"; shift ;;
        *) echo "device_chronos2_perf.sh: unknown flag $1" >&2; exit 2 ;;
    esac
    shift
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site "$root"/.whl/chronos_forecasting-*.whl 2>/dev/null || exit 1
export PYTHONPATH=/tmp/site
build="$root/build-gpu"
export CMAKE_POLICY_VERSION_MINIMUM=3.5
cmake -S "$root" -B "$build" -G Ninja -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" \
    >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
t0=$(date +%s)
cmake --build "$build" -j "$(nproc)" --target cutenative test_kernels_gpu test_capi_gpu cn_bench_gemm >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
echo "build ok in $(( $(date +%s) - t0 )) s"
rc=0
if [ "$tests" = 1 ]; then
    "$build/tests/test_kernels_gpu" >"$out/test_kernels_gpu.log" 2>&1 || rc=1
    grep -E '^\[  (PASSED|FAILED) |FAILED|Failure' "$out/test_kernels_gpu.log" | head -20
    for ra in 0 1; do
        CN_ROPE_ATTENTION=$ra "$build/tests/test_capi_gpu" >"$out/test_capi_gpu_ra$ra.log" 2>&1 || rc=1
        echo "test_capi_gpu CN_ROPE_ATTENTION=$ra:"; grep -E '^\[  (PASSED|FAILED) |FAILED|Failure|rel MAE|max' "$out/test_capi_gpu_ra$ra.log" | head -20
    done
    "$build/tests/cn_bench_gemm" bf16 | tee "$out/gemm_bf16.md"
fi
if [ "$sweep" = 1 ]; then
    ck=/tmp/c2base
    for ra in 0 1; do
        r="cn-fused-bf16"
        [ "$ra" = 1 ] && r="cn-fused-f32,cn-fused-bf16"
        CN_ROPE_ATTENTION=$ra python3 "$root/scripts/bench_chronos2.py" --lib "$build/libcutenative.so" --workloads s \
            --sweep-batches "$batches" --rows "$r" --checkpoint "$ck" --out "$out/sweep_ra$ra.md" >"$out/sweep_ra$ra.log" 2>&1 || rc=1
        echo "sweep CN_ROPE_ATTENTION=$ra:"; sed -n '/^| B | runs/,/^$/p' "$out/sweep_ra$ra.md"
    done
    for b in 1 1024; do
        CN_ROPE_ATTENTION=1 python3 "$root/scripts/bench_chronos2.py" --lib "$build/libcutenative.so" --workloads s \
            --sweep-batches $b --rows cn-fused-bf16 --checkpoint "$ck" --profile cn-fused-bf16 --out "$out/profile_b$b.md" >"$out/profile_b$b.log" 2>&1 || rc=1
        echo "profile B=$b:"; sed -n '/^## Profile/,$p' "$out/profile_b$b.md" | head -30
    done
fi
exit "$rc"

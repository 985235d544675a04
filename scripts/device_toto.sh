#!/usr/bin/env bash
# On the CUDA machine: builds the library and the Toto tests for sm_90 against the machine's torch (as
# scripts/device_test.sh configures it), runs the Toto tests (the GPU ones and the CPU parity on that machine's
# processor), then, with --bench, scripts/bench_toto.py's rows (all, or the keys given). Needs .device/ from
# scripts/device_bundle.sh; the bench needs .whl/toto-site too.
#   scripts/device_toto.sh [--bench [1,2,...]] [--no-tests]
set -uo pipefail
bench="" rows="" tests=1
while [ $# -gt 0 ]; do
    case "$1" in
    --bench) bench=1; case "${2:-}" in [0-9]*) rows="$2"; shift ;; esac ;;
    --no-tests) tests="" ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
build="$root/build-gpu"
export CMAKE_POLICY_VERSION_MINIMUM=3.5
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" \
    >"$out/configure.log" 2>&1 || { tail -50 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target cutenative test_models_gpu test_models >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
echo "build ok"
rc=0
if [ -n "$tests" ]; then
    "$build/tests/test_models_gpu" --gtest_filter='Toto*' 2>&1 | tail -20 || rc=1
    "$build/tests/test_models" --gtest_filter='*Toto*' 2>&1 | grep -E 'bit-equal|FAILED|PASSED' | tail -30 || rc=1
fi
if [ -n "$bench" ]; then
    python3 "$root/scripts/bench_toto.py" --lib "$build/libcutenative.so" ${rows:+--rows "$rows"} 2>&1 |
        tee -a "$out/bench_toto.log" || rc=1
fi
exit "$rc"

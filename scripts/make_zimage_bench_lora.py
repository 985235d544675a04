"""Write a random diffusers/PEFT-format LoRA for a Z-Image transformer (for benchmarks: scripts/bench_zimage_lora.c).

For every 2-D weight <block>.attention.{to_q,to_k,to_v,to_out.0}.weight and <block>.feed_forward.{w1,w2,w3}.weight
of the transformer's safetensors files (shapes read from their headers, nothing hard-coded), it writes
  transformer.<module>.lora_A.weight [rank, in]   and   transformer.<module>.lora_B.weight [out, rank]
holding randn * std (one torch.Generator seeded with --seed, modules in sorted order, so a seed gives one file),
in --dtype. No metadata (no lora_adapter_metadata, no alpha): cutenative applies it at scale 1 (B @ A).
  python3 scripts/make_zimage_bench_lora.py --transformer-dir /tmp/zimage_full/transformer \
      --out /tmp/zimage_lora/A.safetensors [--rank 32] [--seed 0] [--dtype bf16|f16|f32] [--std 0.01 [STD_B]]
Needs only torch, safetensors and the standard library.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

# <block>.attention.to_q.weight, ..., <block>.feed_forward.w3.weight; <block> is layers.N, noise_refiner.N, ...
TARGET = re.compile(r"^(.+\.(?:attention\.(?:to_q|to_k|to_v|to_out\.0)|feed_forward\.w[123]))\.weight$")
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def target_shapes(transformer_dir: Path) -> dict[str, list[int]]:
    """Module name -> [out, in] of every targeted 2-D weight in the directory's .safetensors files."""
    files = sorted(transformer_dir.glob("*.safetensors"))
    if not files:
        raise SystemExit(f"{transformer_dir}: no .safetensors files")
    shapes: dict[str, list[int]] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                m = TARGET.match(key)
                if m:
                    shape = st.get_slice(key).get_shape()
                    if len(shape) == 2:
                        shapes[m.group(1)] = list(shape)
    if not shapes:
        raise SystemExit(f"{transformer_dir}: no attention / feed_forward weights found")
    return shapes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--transformer-dir", type=Path, required=True, help="the pipeline's transformer/ directory")
    ap.add_argument("--out", type=Path, required=True, help="the .safetensors file to write")
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    ap.add_argument("--std", type=float, nargs="+", default=[0.01],
                    help="standard deviation of A's values, optionally followed by B's (default 0.01 for both)")
    args = ap.parse_args()
    if args.rank < 1:
        ap.error("--rank must be >= 1")
    if len(args.std) > 2:
        ap.error("--std takes one or two values (A [B])")
    std_a, std_b = args.std[0], args.std[-1]

    shapes = target_shapes(args.transformer_dir)
    gen = torch.Generator().manual_seed(args.seed)
    dtype = DTYPES[args.dtype]
    tensors: dict[str, torch.Tensor] = {}
    for module in sorted(shapes):
        n_out, n_in = shapes[module]
        a = torch.randn(args.rank, n_in, generator=gen) * std_a
        b = torch.randn(n_out, args.rank, generator=gen) * std_b
        tensors[f"transformer.{module}.lora_A.weight"] = a.to(dtype).contiguous()
        tensors[f"transformer.{module}.lora_B.weight"] = b.to(dtype).contiguous()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(args.out))  # no metadata: scale 1
    n_bytes = sum(t.numel() * t.element_size() for t in tensors.values())
    print(f"wrote {args.out}: {len(shapes)} modules, rank {args.rank}, {args.dtype}, seed {args.seed}, "
          f"{n_bytes} tensor bytes, {args.out.stat().st_size} file bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

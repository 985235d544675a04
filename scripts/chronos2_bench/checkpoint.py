"""The benchmark's random-weight Chronos-2 checkpoint, written by the reference's own classes."""

import gc
import json
import math
import os

import torch

from .config import BASE_CHRONOS, BASE_CORE, MODEL_SEED, TINY_CHRONOS, TINY_CORE


def rerandomize(model, seed):
    """Re-draw every parameter from a seeded normal (the default init, factor 0.05, gives near-constant outputs)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name == "shared.weight":                       # [PAD]/[REG] embeddings
                val = noise
            elif p.ndim == 1 and "norm" in name:               # T5-style RMS norm weights
                val = 1.0 + 0.1 * noise
            elif p.ndim == 2:                                  # Linear (out, in)
                val = noise / math.sqrt(p.shape[1])
            elif p.ndim == 1 and name.endswith(".bias"):
                val = 0.02 * noise
            else:
                raise RuntimeError("unexpected parameter %s %s" % (name, tuple(p.shape)))
            p.copy_(val.to(p.dtype))


def build_checkpoint(out_dir, tiny):
    from chronos.chronos2 import Chronos2CoreConfig, Chronos2Model, Chronos2Pipeline
    core = TINY_CORE if tiny else BASE_CORE
    cc = json.loads(json.dumps(TINY_CHRONOS if tiny else BASE_CHRONOS))  # deep copy: the model writes into it
    torch.manual_seed(MODEL_SEED)
    config = Chronos2CoreConfig(**core, chronos_config=cc, architectures=["Chronos2Model"])
    model = Chronos2Model(config)
    rerandomize(model, MODEL_SEED + 1)
    model.eval()
    n_params = sum(p.numel() for p in model.parameters())
    Chronos2Pipeline(model).save_pretrained(out_dir)
    cfg = json.loads(open(os.path.join(out_dir, "config.json")).read())
    assert cfg.get("architectures") == ["Chronos2Model"], cfg.get("architectures")
    del model
    gc.collect()
    return n_params, cfg


def safetensors_numel(model_dir):
    """Number of elements in the directory's *.safetensors files (from their JSON headers)."""
    total = 0
    for name in sorted(os.listdir(model_dir)):
        if name.endswith(".safetensors"):
            with open(os.path.join(model_dir, name), "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                hdr = json.loads(f.read(n))
            for k, v in hdr.items():
                if k != "__metadata__":
                    total += math.prod(v["shape"])
    return total

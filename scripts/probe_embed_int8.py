#!/usr/bin/env python3
"""Probe (not a benchmark of cutenative): how fast and how accurate PyTorch's own dynamic int8 quantization of
all-MiniLM-L6-v2 is on this CPU, one thread, one prompt per call (the first 150 prompts of the LoRA set).
Recorded in docs/benchmarks.md as a data point for an int8 embedding mode.

    ~/.cache/cutenative/venv-ref/bin/python scripts/probe_embed_int8.py "$(. scripts/env.sh; cn_minilm_dir)"
"""
import json, statistics, time, sys
import numpy as np, torch
from sentence_transformers import SentenceTransformer
torch.set_num_threads(1)
d = sys.argv[1]
m = SentenceTransformer(d, device="cpu")
prompts = [json.loads(l)["prompt"] for l in open("go/lora/testdata/prompts.jsonl")][:150]
def bench(model):
    for p in prompts[:20]: model.encode(p)
    ts = []
    for p in prompts:
        t0 = time.perf_counter(); model.encode(p); ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3
ref = np.stack([m.encode(p) for p in prompts])
t32 = bench(m)
q = torch.ao.quantization.quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8)
e8 = np.stack([q.encode(p) for p in prompts])
t8 = bench(q)
cos = (ref * e8).sum(1) / np.linalg.norm(ref, axis=1) / np.linalg.norm(e8, axis=1)
print("fp32 median ms %.2f | dynamic int8 median ms %.2f | cosine min %.5f mean %.5f" % (t32, t8, cos.min(), cos.mean()))
print("engine", torch.backends.quantized.engine)

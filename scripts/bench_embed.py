#!/usr/bin/env python3
"""Sentence-embedding latency on the CPU: sentence-transformers against cutenative's cn_embed, same machine,
same process, same weights (all-MiniLM-L6-v2), one thread each.

    ~/.cache/cutenative/venv-ref/bin/python scripts/bench_embed.py --lib build/libcutenative.so \
        --model "$(. scripts/env.sh; cn_minilm_dir)" [--out report.md]

Workload: every prompt of go/lora/testdata/prompts.jsonl (405 image prompts, 3-35 words), one prompt per
call (what the LoRA router does). Each side: 20 warm-up calls, then every prompt 5 times; the median and the
90th percentile of the per-call wall time (time.perf_counter), plus the median per token-count bucket.
torch.set_num_threads(1) for the reference; cn_model_params.n_threads = 1 for cutenative (the library and the
reference share this process's LibTorch). Also checks the two agree (cosine) on every prompt.
"""

import argparse
import ctypes
import datetime
import json
import os
import platform
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cutenative_ctypes as cn  # noqa: E402  (the C ABI: structs, enums, prototypes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", default=os.path.join(os.path.dirname(__file__), "..", "go", "lora", "testdata", "prompts.jsonl"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--dtype", choices=["f32", "bf16"], default="f32", help="cutenative's weight dtype")
    args = ap.parse_args()

    torch.set_num_threads(1)
    from sentence_transformers import SentenceTransformer
    import sentence_transformers

    prompts = [json.loads(l)["prompt"] for l in open(args.prompts, encoding="utf-8") if l.strip()]
    st = SentenceTransformer(args.model, device="cpu")
    st.eval()

    lib = cn.load_library(args.lib)
    err = ctypes.c_void_p()
    cn.check(lib, lib.cn_error_create(ctypes.byref(err)), None)
    p = cn.ModelParams()
    lib.cn_model_params_init(ctypes.byref(p))
    p.n_threads = 1
    p.dtype = {"f32": cn.CN_DTYPE_F32, "bf16": cn.CN_DTYPE_BF16}[args.dtype]
    model = ctypes.c_void_p()
    if lib.cn_model_create(os.fsencode(args.model), ctypes.byref(p), ctypes.byref(model), err) != cn.CN_STATUS_OK:
        raise SystemExit(lib.cn_error_message(err).decode())
    torch.set_num_threads(1)  # cn_model_create may set the shared pool; the reference runs on one thread too

    out = np.zeros(384, dtype=np.float32)
    out_p = out.ctypes.data_as(cn.FLOAT_P)
    encoded = [s.encode("utf-8") for s in prompts]

    def cn_embed(i):
        arr = (ctypes.c_char_p * 1)(encoded[i])
        cn.check(lib, lib.cn_embed(model, arr, 1, None, out_p, out.size, err), err)
        return out.copy()

    def ref(i):
        with torch.inference_mode():
            return st.encode([prompts[i]], convert_to_numpy=True)[0]

    ntok = [len(st.tokenizer(s)["input_ids"]) for s in prompts]
    cos = [float(np.dot(cn_embed(i), ref(i))) for i in range(len(prompts))]
    results = {}
    cn_label = "cutenative" + (" bf16" if args.dtype == "bf16" else "")
    for name, fn in (("sentence-transformers", ref), (cn_label, cn_embed)):
        for i in range(20):
            fn(i % len(prompts))
        per = [[] for _ in prompts]
        for _ in range(args.repeats):
            for i in range(len(prompts)):
                t0 = time.perf_counter()
                fn(i)
                per[i].append(time.perf_counter() - t0)
        results[name] = [statistics.median(v) * 1e3 for v in per]

    lines = ["Machine: %s, %s; torch %s (threads 1), sentence-transformers %s; %s UTC" % (
        platform.processor() or platform.machine(), open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip(": \t"),
        torch.__version__, sentence_transformers.__version__, datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M")), "",
        "Prompts: %d (tokens incl. [CLS]/[SEP]: median %d, min %d, max %d); cosine(cutenative, reference) min %.7f" % (
        len(prompts), statistics.median(ntok), min(ntok), max(ntok), min(cos)), "",
        "| implementation | median ms / prompt | p90 ms | median ms, <= 8 tokens | median ms, 9-16 | median ms, 17-32 | median ms, > 32 |",
        "|---|---:|---:|---:|---:|---:|---:|"]
    for name, ms in results.items():
        def bucket(lo, hi):
            v = [m for m, n in zip(ms, ntok) if lo <= n <= hi]
            return "%.3f" % statistics.median(v) if v else "-"
        lines.append("| %s | %.3f | %.3f | %s | %s | %s | %s |" % (
            name, statistics.median(ms), np.percentile(ms, 90), bucket(0, 8), bucket(9, 16), bucket(17, 32), bucket(33, 10**9)))
    r, c = statistics.median(results["sentence-transformers"]), statistics.median(results[cn_label])
    lines += ["", "Speedup (median): %.1fx" % (r / c)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

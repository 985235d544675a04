#!/usr/bin/env python3
"""Kronos benchmark: the reference predictor (shiyu-coder/Kronos, eval mode) against cutenative's cn_forecast
(through ctypes) in the same process on the same GPU.

    python3 scripts/bench_kronos.py --lib build-gpu/libcutenative.so --kronos-src DIR --out report.md

--kronos-src: a checkout of https://github.com/shiyu-coder/Kronos (its model/ package is imported).
Model: random-weight Kronos-small (d 512, 8 layers, 8 heads, ff 1024, 10+10 bits; 24.7 M parameters) with
Kronos-Tokenizer-base (d 256, 3+3 blocks), built with the reference classes and saved in the HF layout (timings
do not depend on weight values). Workloads (seeded random-walk candles, 5-minute bars):
  (a) B=2, context 64, 16 steps (the seeds' workload)  (b) B=1, context 512, 64 steps  (c) B=32, context 256, 16 steps
sample_count 1, T=1.0, top_p 0.9, top_k 0, max_context 512. Rows: reference (KronosPredictor.predict_batch,
eval mode), cutenative eager (the reference's algorithm), cutenative fused (KV cache while the window has not
slid; in (b) the window slides from the second step, so fused falls back to the full recompute there),
cutenative graph (the cached decode step replayed from a CUDA graph; same fallback), and graph mode with bf16
weights and activations (sampling in fp32; not exact: its values are compared by relative MAE).
Timing: 2 warm-up calls, median of N timed calls (wall clock, torch.cuda.synchronize on both sides),
torch.manual_seed / the run options' seed set to the same value before every call. Agreement: share of the
sampled mean-path values equal to the reference's within 1e-4 relative (CUDA draws use the same Philox
generator, so equal logits give equal tokens).
"""

import argparse
import ctypes
import datetime
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import pandas as pd
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cutenative_ctypes as cn  # noqa: E402  (the C ABI: structs, enums, prototypes)

SMALL = dict(s1_bits=10, s2_bits=10, n_layers=8, d_model=512, n_heads=8, ff_dim=1024, ffn_dropout_p=0.25,
             attn_dropout_p=0.1, resid_dropout_p=0.25, token_dropout_p=0.1, learn_te=True)
TOK_BASE = dict(d_in=6, d_model=256, n_heads=4, ff_dim=512, n_enc_layers=4, n_dec_layers=4, ffn_dropout_p=0.0,
                attn_dropout_p=0.0, resid_dropout_p=0.0, s1_bits=10, s2_bits=10, beta=0.05, gamma0=1.0, gamma=1.1,
                zeta=0.05, group_size=4)
WORKLOADS = [("a", "B=2, context 64, 16 steps", 2, 64, 16), ("b", "B=1, context 512, 64 steps", 1, 512, 64),
             ("c", "B=32, context 256, 16 steps", 32, 256, 16)]


class Cn:
    def __init__(self, lib_path, model_dir, device, mode, dtype=cn.CN_DTYPE_F32):
        self.lib = lib = cn.load_library(lib_path)
        self.err = ctypes.c_void_p()
        self.check(lib.cn_error_create(ctypes.byref(self.err)))
        p = cn.ModelParams()
        lib.cn_model_params_init(ctypes.byref(p))
        p.device_type = cn.CN_DEVICE_CUDA if device == "cuda" else cn.CN_DEVICE_CPU
        p.mode = mode
        p.dtype = dtype
        self.m = ctypes.c_void_p()
        self.check(lib.cn_model_create(os.fsencode(model_dir), ctypes.byref(p), ctypes.byref(self.m), self.err))
        self.opts = ctypes.c_void_p()
        self.check(lib.cn_run_options_create(ctypes.byref(self.opts), self.err))

    def check(self, st):
        cn.check(self.lib, st, self.err)

    def forecast(self, series, pred_len, seed, T=1.0, top_k=0, top_p=0.9, S=1):
        """series: list of (x [n, 6] float32, hist_ts int64, fut_ts int64) -> mean paths [B, pred_len, 6]."""
        lib = self.lib
        req = ctypes.c_void_p()
        self.check(lib.cn_forecast_request_create(ctypes.byref(req), self.err))
        try:
            first = []
            for g, (x, h, f) in enumerate(series):
                cols = [np.ascontiguousarray(x[:, c]) for c in range(6)]
                idx = ctypes.c_size_t()
                for k, col in enumerate(cols):
                    self.check(lib.cn_forecast_request_add_series(req, col.ctypes.data_as(cn.FLOAT_P), col.size, g,
                                                                  ctypes.byref(idx), self.err))
                    if k == 0:
                        first.append(idx.value)
                self.check(lib.cn_forecast_request_set_timestamps(req, first[-1], h.ctypes.data_as(cn.INT64_P), h.size,
                                                                  f.ctypes.data_as(cn.INT64_P), f.size, self.err))
            self.check(lib.cn_forecast_request_set_horizon(req, pred_len, self.err))
            self.check(lib.cn_forecast_request_set_sampling(req, T, top_k, top_p, S, self.err))
            self.check(lib.cn_run_options_set_seed(self.opts, seed, self.err))
            out = np.empty(len(series) * 6 * pred_len, np.float32)
            self.check(lib.cn_forecast(self.m, req, self.opts, out.ctypes.data_as(cn.FLOAT_P), out.size, None, 0,
                                       self.err))
            return out.reshape(len(series), 6, pred_len).transpose(0, 2, 1)
        finally:
            lib.cn_forecast_request_free(req)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--kronos-src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workloads", default="a,b,c")
    ap.add_argument("--profile", action="store_true", help="also profile the graph row on the first workload (torch.profiler)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.kronos_src))
    from model import Kronos, KronosPredictor, KronosTokenizer

    dev = args.device
    torch.manual_seed(0)
    tok, mdl = KronosTokenizer(**TOK_BASE), Kronos(**SMALL)
    tok.eval()
    mdl.eval()
    d = tempfile.mkdtemp(prefix="kronos-bench-")
    mdl.save_pretrained(d)
    tok.save_pretrained(os.path.join(d, "tokenizer"))
    n_params = sum(p.numel() for p in mdl.parameters())
    pred = KronosPredictor(mdl, tok, device=dev, max_context=512)
    GRAPH = "cutenative graph (KV cache + CUDA graphs)"
    f32, bf16 = cn.CN_DTYPE_F32, cn.CN_DTYPE_BF16
    rows = [("reference", None, f32), ("cutenative eager", cn.CN_MODE_EAGER, f32),
            ("cutenative fused (KV cache)", cn.CN_MODE_FUSED, f32), (GRAPH, cn.CN_MODE_GRAPH, f32),
            ("cutenative graph, bf16", cn.CN_MODE_GRAPH, bf16)]
    cns = {label: Cn(args.lib, d, dev, m, dt) for label, m, dt in rows if m is not None}

    rng = np.random.default_rng(5)
    lines = ["# Kronos benchmark: reference predictor vs cutenative", "",
             "- Date (UTC): %s" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
             "- Device: %s; torch %s" % (torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", torch.__version__),
             "- Model: random-weight Kronos-small (%.1f M params) + Kronos-Tokenizer-base, fp32, max_context 512, "
             "T 1.0, top_p 0.9, sample_count 1" % (n_params / 1e6), ""]
    sync = (lambda: torch.cuda.synchronize()) if dev == "cuda" else (lambda: None)
    for key, title, B, C, P in WORKLOADS:
        if key not in args.workloads.split(","):
            continue
        series, dfs, xts, yts = [], [], [], []
        for b in range(B):
            close = 50 * np.exp(np.cumsum(rng.normal(0, 0.01, C)))
            df = pd.DataFrame(dict(open=close * 1.001, high=close * 1.004, low=close * 0.996, close=close,
                                   volume=1e4 * np.exp(rng.normal(0, 0.3, C)), amount=5e5 * np.exp(rng.normal(0, 0.3, C))))
            df = df.astype(np.float32).astype(np.float64)
            ts = pd.Series(pd.date_range("2024-05-01 09:30", periods=C + P, freq="5min"))
            dfs.append(df), xts.append(ts[:C]), yts.append(ts[C:].reset_index(drop=True))
            series.append((df.values.astype(np.float32), np.array([int(t.timestamp()) for t in ts[:C]], np.int64),
                           np.array([int(t.timestamp()) for t in ts[C:]], np.int64)))
        results = {}
        for label, mode, _ in rows:
            def call():
                if mode is None:
                    torch.manual_seed(123)
                    out = pred.predict_batch(dfs, xts, yts, pred_len=P, T=1.0, top_k=0, top_p=0.9, sample_count=1, verbose=False)
                    return np.stack([o.values for o in out]).astype(np.float32)
                return cns[label].forecast(series, P, 123)
            for _ in range(2):
                call()
            ts_ = []
            for _ in range(args.runs):
                sync()
                t0 = time.perf_counter()
                y = call()
                sync()
                ts_.append(time.perf_counter() - t0)
            results[label] = (statistics.median(ts_) * 1e3, y)
        ref_ms, ref_y = results["reference"]
        lines += ["## (%s) %s" % (key, title), "",
                  "| row | median ms | speedup | values equal to the reference (1e-4 rel.) | rel. MAE vs reference |",
                  "|---|---:|---:|---:|---:|"]
        for label, _, _ in rows:
            ms, y = results[label]
            eq = np.mean(np.abs(y - ref_y) <= 1e-4 * np.abs(ref_y) + 1e-6)
            mae = np.mean(np.abs(y - ref_y)) / np.mean(np.abs(ref_y))
            lines.append("| %s | %.2f | %.1fx | %.1f %% | %.2e |" % (label, ms, ref_ms / ms, 100 * eq, mae))
        lines.append("")
        if args.profile and dev == "cuda":
            from torch.profiler import ProfilerActivity, profile
            calls = 5
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(calls):
                    cns[GRAPH].forecast(series, P, 123)
                sync()
            ev = prof.key_averages()
            cuda_total = sum(e.self_device_time_total for e in ev) / calls / 1e3
            kernels = sum(e.count for e in ev if e.self_device_time_total > 0) / calls
            lines += ["### Profile: graph row, (%s), %d calls" % (key, calls), "",
                      "GPU busy %.2f ms per call in %.0f device ops" % (cuda_total, kernels), "",
                      "| op | calls per call | CPU self ms per call | GPU ms per call |", "|---|---:|---:|---:|"]
            top = sorted(ev, key=lambda e: -e.self_cpu_time_total)[:25]
            for e in top:
                lines.append("| `%s` | %.0f | %.3f | %.3f |" % (e.key[:70], e.count / calls, e.self_cpu_time_total / calls / 1e3,
                                                            e.self_device_time_total / calls / 1e3))
            lines.append("")
            # Device kernels by name (graph replays included: their kernels have no ATen op above them).
            kern = {}
            for e in prof.events():
                if e.device_type == torch.autograd.DeviceType.CUDA:
                    name = e.name if len(e.name) <= 90 else e.name[:87] + "..."
                    c, t = kern.get(name, (0, 0.0))
                    kern[name] = (c + 1, t + e.time_range.elapsed_us())
            lines += ["| device kernel | launches per call | GPU ms per call | mean µs |", "|---|---:|---:|---:|"]
            for name, (c, t) in sorted(kern.items(), key=lambda kv: -kv[1][1])[:30]:
                lines.append("| `%s` | %.0f | %.3f | %.2f |" % (name.replace("|", "/"), c / calls, t / calls / 1e3, t / c))
            lines.append("")
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

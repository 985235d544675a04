#!/usr/bin/env python3
"""Toto benchmark: the reference forecaster (toto-ts 0.2.0's TotoForecaster, eval mode, fp32, SDPA attention; no
xformers) against cutenative's cn_forecast (through ctypes) in the same process on the same GPU.

    python3 scripts/bench_toto.py --lib build-gpu/libcutenative.so [--toto-site DIR] [--rows 1,2,...] [--runs 3]

--toto-site: where toto-ts 0.2.0, rotary-embedding-torch 0.8.6, einops and jaxtyping are (default: .whl/toto-site,
a copy of the reference venv's toto-site that scripts/setup_reference_venv.sh makes); scripts/toto_shim stands in
for gluonts. Model: random-weight Toto-Open-Base-1.0 shape (patch 64, 768 wide, 12 layers, 12 heads, SwiGLU 3072,
K 24; 151 M parameters), built with the reference's TotoBackbone under torch.manual_seed(0) and saved in the
reference's layout (timings do not depend on weight values). Series: seeded noisy sines with trend (fp32).
Rows: the 32-row matrix below (--rows picks keys). Columns: the reference (KV cache on, samples_per_batch as the
row says), cutenative eager (the reference's algorithm; only with --eager: it takes about the reference's time),
fused (the prefill once per series for all its sample copies), graph (fused's sample batches replayed from CUDA
graphs) and both again in bf16; fp32 with TF32 off on both sides otherwise. Timing: one warm-up call, then the
median of --runs calls (wall clock, torch.cuda.synchronize; one call when the warm-up took over 5 s), the same
seed before every call (graph mode's warm-up call captures, its timed calls replay). Peak memory: torch.cuda.max_memory_allocated over the
timed calls (the library runs on the same caching allocator in this process). Agreement: CUDA draws come from the same Philox generator in the
same order and shapes, so the sample paths agree up to rounding: the share of sample values within 1e-3 of the
reference's relative to the series' spread, and the largest median difference in those units.
"""

import argparse
import ctypes
import datetime
import json
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))
import cutenative_ctypes as cn  # noqa: E402

CONFIG = dict(patch_size=64, stride=64, embed_dim=768, num_layers=12, num_heads=12, mlp_hidden_dim=3072, dropout=0.1,
              spacewise_every_n_layers=12, spacewise_first=False,
              scaler_cls="<class 'model.scaler.CausalPatchStdMeanScaler'>",
              output_distribution_classes=["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
              output_distribution_kwargs={"k_components": 24}, use_memory_efficient_attention=False,
              stabilize_with_global=True, scale_factor_exponent=10.0)
# The matrix #38 asks for: B in {1, 32} series x V in {1, 7} variates x context {512, 2048} x samples {64, 256} x
# horizon {96, 336}, keyed 1..32 in that order. Samples per batch (the reference's samples_per_batch, which both
# sides honour because it changes the random stream): the largest power of two dividing the samples that keeps a
# batch at <= 7168 rows (B x V x samples per batch) at context 512 and <= 1792 at context 2048 (about the same
# tokens per batch).
def matrix():
    rows = []
    for B in (1, 32):
        for V in (1, 7):
            for T in (512, 2048):
                for S in (64, 256):
                    for H in (96, 336):
                        cap = 7168 if T == 512 else 1792
                        sbs = S
                        while sbs > 1 and B * V * sbs > cap:
                            sbs //= 2
                        rows.append((str(len(rows) + 1), B, V, T, S, sbs, H))
    return rows


ROWS = matrix()


class Cn:
    def __init__(self, lib_path, model_dir, mode, device, dtype=cn.CN_DTYPE_F32):
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

    def forecast(self, x, horizon, samples, sbs, seed):
        """x: [B, V, T] float32 -> sample paths [B, V, horizon, samples] (the reference's layout)."""
        lib = self.lib
        B, V, T = x.shape
        req = ctypes.c_void_p()
        self.check(lib.cn_forecast_request_create(ctypes.byref(req), self.err))
        try:
            flat = np.ascontiguousarray(x.reshape(B * V, T))
            for b in range(B):
                for v in range(V):
                    row = flat[b * V + v]
                    self.check(lib.cn_forecast_request_add_series(req, row.ctypes.data_as(cn.FLOAT_P), T, b, None, self.err))
            self.check(lib.cn_forecast_request_set_horizon(req, horizon, self.err))
            self.check(lib.cn_forecast_request_set_sampling(req, 1.0, 0, 0.9, samples, self.err))
            self.check(lib.cn_forecast_request_set_decoding(req, sbs, 1, 0, self.err))
            shape = cn.ForecastShape()
            lib.cn_forecast_shape_init(ctypes.byref(shape))
            self.check(lib.cn_forecast_get_shape(self.m, req, ctypes.byref(shape), self.err))
            self.check(lib.cn_run_options_set_seed(self.opts, seed, self.err))
            out = np.empty(shape.n_values, np.float32)
            paths = np.empty(shape.n_sample_values, np.float32)
            self.check(lib.cn_forecast(self.m, req, self.opts, out.ctypes.data_as(cn.FLOAT_P), out.size,
                                       paths.ctypes.data_as(cn.FLOAT_P), paths.size, self.err))
            return paths.reshape(B, V, samples, horizon).transpose(0, 1, 3, 2)
        finally:
            lib.cn_forecast_request_free(req)


def series(B, V, T, rng):
    t = np.arange(T, dtype=np.float64)
    x = np.empty((B, V, T), np.float32)
    for b in range(B):
        for v in range(V):
            period = rng.uniform(12, 96)
            x[b, v] = (rng.uniform(1, 100) + rng.uniform(-0.05, 0.05) * t + rng.uniform(1, 20) * np.sin(2 * np.pi * t / period)
                       + rng.normal(0, 1, T)).astype(np.float32)
    return x


def timed(fn, runs):
    """(median seconds, peak bytes above the start, last output). One warm-up call, then `runs` timed calls, or one
    when the warm-up call took over 5 s."""
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    base = 0
    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    t0 = time.perf_counter()
    out = fn()  # warm-up
    sync()
    first = time.perf_counter() - t0
    if first > 5.0:
        runs = 1
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(runs):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), (torch.cuda.max_memory_allocated() - base if cuda else float("nan")), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--toto-site", default=os.path.join(HERE, "..", ".whl", "toto-site"))
    ap.add_argument("--rows", default=",".join(r[0] for r in ROWS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--eager", action="store_true", help="also time cutenative eager (about the reference's time)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script (slow; no memory figures)")
    ap.add_argument("--profile", default=None, help="a row key: print where fused mode's GPU time goes on it (torch.profiler)")
    args = ap.parse_args()
    sys.path[:0] = [os.path.join(HERE, "toto_shim"), os.path.abspath(args.toto_site)]
    import warnings
    warnings.simplefilter("ignore")
    from toto.data.util.dataset import MaskedTimeseries
    from toto.inference.forecaster import TotoForecaster
    from toto.model.backbone import TotoBackbone
    import safetensors.torch as st

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    backbone = TotoBackbone(**CONFIG).eval()
    n_params = sum(p.numel() for p in backbone.parameters())
    d = tempfile.mkdtemp(prefix="toto-bench-")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(CONFIG, f)
    st.save_file({"model." + k: v.contiguous() for k, v in backbone.state_dict().items()}, os.path.join(d, "model.safetensors"))
    dev = args.device
    backbone = backbone.to(dev)
    forecaster = TotoForecaster(backbone)
    eager, fused = Cn(args.lib, d, cn.CN_MODE_EAGER, args.device), Cn(args.lib, d, cn.CN_MODE_FUSED, args.device)
    bf16 = Cn(args.lib, d, cn.CN_MODE_FUSED, args.device, cn.CN_DTYPE_BF16) if args.device == "cuda" else None
    graph = Cn(args.lib, d, cn.CN_MODE_GRAPH, args.device) if args.device == "cuda" else None
    graph16 = Cn(args.lib, d, cn.CN_MODE_GRAPH, args.device, cn.CN_DTYPE_BF16) if args.device == "cuda" else None

    rng = np.random.default_rng(5)
    lines = ["# Toto benchmark: toto-ts 0.2.0 TotoForecaster vs cutenative", "",
             "- Date (UTC): %s" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"),
             "- Device: %s; torch %s; fp32, TF32 off" % (torch.cuda.get_device_name(0) if dev == "cuda" else "cpu", torch.__version__),
             "- Model: random-weight Toto-Open-Base-1.0 shape (%.1f M parameters), KV cache on" % (n_params / 1e6), "",
             "| row | B | V | context | samples (per batch) | horizon | reference ms | eager ms | fused ms (x) | graph ms (x) "
             "| fused bf16 ms (x) | graph bf16 ms (x) | peak MB ref / eager / fused / bf16 | samples within 1e-3 (eager, fused) "
             "| max median diff, fused | graph = fused | CRPS vs the fp32 median: bf16 / fp32 |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    seed = 1234
    for key, B, V, T, S, sbs, H in ROWS:
        if key not in args.rows.split(","):
            continue
        x = series(B, V, T, rng)
        xt = torch.from_numpy(x).to(dev)
        inputs = MaskedTimeseries(series=xt, padding_mask=torch.ones_like(xt, dtype=torch.bool),
                                  id_mask=torch.zeros(B, V, T, dtype=torch.int32, device=dev),
                                  timestamp_seconds=torch.zeros(B, V, T, dtype=torch.int64, device=dev),
                                  time_interval_seconds=torch.full((B, V), 60, dtype=torch.int64, device=dev))

        def ref():
            torch.manual_seed(seed)
            with torch.no_grad():
                return forecaster.forecast(inputs, prediction_length=H, num_samples=S, samples_per_batch=sbs,
                                           use_kv_cache=True).samples

        try:
            t_ref, m_ref, s_ref = timed(ref, args.runs)
            s_ref = s_ref.float().cpu().numpy()
        except torch.OutOfMemoryError:
            t_ref, m_ref, s_ref = float("nan"), float("nan"), None
            torch.cuda.empty_cache()
        t_e, m_e, s_e = float("nan"), float("nan"), None
        if args.eager:
            t_e, m_e, s_e = timed(lambda: eager.forecast(x, H, S, sbs, seed), args.runs)
        t_f, m_f, s_f = timed(lambda: fused.forecast(x, H, S, sbs, seed), args.runs)
        t_b, m_b, s_b = float("nan"), float("nan"), None
        t_g, t_g16, same = float("nan"), float("nan"), "n/a"
        if bf16 is not None:
            t_b, m_b, s_b = timed(lambda: bf16.forecast(x, H, S, sbs, seed), args.runs)
            # graph mode: the warm-up call captures the shape; the timed calls replay it
            t_g, _, s_g = timed(lambda: graph.forecast(x, H, S, sbs, seed), args.runs)
            t_g16, _, _ = timed(lambda: graph16.forecast(x, H, S, sbs, seed), args.runs)
            same = "yes" if np.array_equal(s_g, s_f) else "max |d| %.2e" % float(np.max(np.abs(s_g - s_f)))
        unit = np.sqrt(x.var(axis=-1) + 0.1)[:, :, None, None]
        agree, med = "n/a", "n/a"
        if s_ref is not None:
            share = ["%.4f" % float(np.mean(np.abs(s - s_ref) <= 1e-3 * unit)) if s is not None else "-" for s in (s_e, s_f)]
            agree = "%s, %s" % tuple(share)
            md = np.max(np.abs(np.median(s_f, -1) - np.median(s_ref, -1)) / unit[..., 0])
            med = "%.2e" % md
        crps = "n/a"
        if s_b is not None:
            # Against held-out truth we have none (random weights); instead the CRPS of each sample set against the
            # fp32 fused median path, relative: how much the bf16 distribution moved, in units of the fp32 one's.
            truth = np.median(s_f, -1, keepdims=True)

            def crps_of(s):  # E|X - y| - E|X - X'| / 2, the pair term from the sorted samples
                xs = np.sort(s, -1).astype(np.float64)
                i = np.arange(S)
                pair = 2.0 * np.sum((2 * i - S + 1) * xs, -1) / S**2
                return float(np.mean(np.mean(np.abs(s - truth), -1) - pair / 2))
            crps = "%.4f / %.4f" % (crps_of(s_b), crps_of(s_f))
        def ms(t):
            return "-" if math.isnan(t) else "%.1f" % (t * 1e3)

        def msx(t):
            return "-" if math.isnan(t) else "%.1f (%.1fx)" % (t * 1e3, t_ref / t)

        def mb(m):
            return "-" if math.isnan(m) else "%.0f" % (m / 2**20)
        lines.append("| %s | %d | %d | %d | %d (%d) | %d | %s | %s | %s | %s | %s | %s | %s / %s / %s / %s | %s | %s | %s | %s |" % (
            key, B, V, T, S, sbs, H, ms(t_ref), ms(t_e), msx(t_f), msx(t_g), msx(t_b), msx(t_g16),
            mb(m_ref), mb(m_e), mb(m_f), mb(m_b), agree, med, same, crps))
        print(lines[-1], flush=True)
        if args.profile == key and dev == "cuda":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                fused.forecast(x, H, S, sbs, seed)
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25))
        if dev == "cuda":
            torch.cuda.empty_cache()
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Chronos-2 benchmark: the reference Python pipeline against cutenative's C ABI (through ctypes).

    python3 scripts/bench_chronos2.py --lib build-gpu/libcutenative.so --out $OUT/bench.md [--quick]

Debug mode, no GPU (a tiny config, shrunken workloads, the CPU build of the library):
    ~/.cache/cutenative/venv-ref/bin/python scripts/bench_chronos2.py --device cpu --tiny \
        --lib build/libcutenative.so --out /tmp/b.md

What it does
  1. Builds a random-weight checkpoint of the amazon/chronos-2 *base* configuration (d_model 768, 12 layers,
     12 heads, d_ff 3072, patch 16, 21 quantiles; 119.48M parameters) in the Hugging Face layout with the
     reference classes (chronos.chronos2.Chronos2CoreConfig / Chronos2Model / Chronos2Pipeline.save_pretrained),
     seeded; every parameter is re-drawn (matrices std 1/sqrt(fan_in), biases small, norm weights ~1) so the
     outputs depend on the inputs. Timings do not depend on the weight values.
  2. Workloads (seeded random walk + seasonal inputs, fp32):
       (a) B=1, context 512, H=16        (b) B=1, context 2048, H=64        (c) B=32, context 512, H=16
       (d) rolling: 7 series of length 448+512; 448 windows of context 512 ending at successive points, H=16,
           run as 448 sequential calls of 7 series ("rolling seq") and as one call of 448*7 series
           ("rolling batched"). --quick: 32 windows.
  3. Rows: reference fp32, reference bf16 (Chronos2Pipeline.from_pretrained(dir, device_map=..., dtype=...);
     predict_quantiles with all 21 model levels; batch_size = the number of series, i.e. one batch, except for
     the rolling workloads, which use the pipeline's default batch_size 256), cutenative eager f32 / bf16,
     cutenative graph f32 / bf16 (only where cn_model_set_mode(GRAPH) returns OK; else "n/a (STATUS)"),
     cutenative fused f32 / bf16 (cutenative's kernels, captured in CUDA graphs on CUDA).
     A cutenative call is timed from building the request to the results being in the host buffer.
  4. Timing: 3 warm-up calls, then the median of N timed runs (N = 20; 5 for rolling seq; --quick: 5 and 3),
     wall clock (time.perf_counter) with torch.cuda.synchronize() on both sides.
  5. Accuracy: Mean|Δ|, Max|Δ| and Rel MAE % = 100 * mean|Δ| / mean|ref| against the reference fp32 outputs of
     the same workload, per (series, quantile, step); cutenative rows also against cutenative eager f32.
     Memory: torch.cuda.max_memory_allocated() over the row's runs of that workload (peak reset after the model
     is loaded, so the weights count). cutenative allocates through LibTorch's caching allocator, the same one
     as the Python torch in this process, so the figure covers both kinds of rows.
  6. Floors per workload (H100 3.35 TB/s, H200 4.8 TB/s; 990 TFLOP/s bf16 dense, 67 TFLOP/s fp32): see
     `floors()`.
  7. Markdown tables per workload, with a header (device, torch, CUDA, driver, date); printed and written to
     --out (rewritten after every row, so a run cut short still leaves what it measured).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import gc
import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np
import torch  # before the library: libcutenative then binds to this process's LibTorch (same allocator)

# ======================================================================================================
# Constants
# ======================================================================================================

Q21 = [0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
       0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99]

# amazon/chronos-2 (base), as published on the Hugging Face hub.
BASE_CORE = dict(d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_heads=12, feed_forward_proj="relu",
                 layer_norm_epsilon=1e-6, rope_theta=10000.0)
BASE_CHRONOS = dict(context_length=8192, input_patch_size=16, input_patch_stride=16, output_patch_size=16,
                    max_output_patches=64, quantiles=Q21, use_reg_token=True, use_arcsinh=True,
                    time_encoding_scale=8192)
# --tiny (debug): the same structure, small.
TINY_CORE = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, feed_forward_proj="relu",
                 layer_norm_epsilon=1e-6, rope_theta=10000.0)
TINY_CHRONOS = dict(context_length=512, input_patch_size=16, input_patch_stride=16, output_patch_size=16,
                    max_output_patches=4, quantiles=Q21, use_reg_token=True, use_arcsinh=True,
                    time_encoding_scale=512)

MODEL_SEED = 20240611
DATA_SEED = 777

REF_DEFAULT_BATCH = 256  # Chronos2Pipeline.predict's default batch_size, used for the rolling workloads

# Peak figures for the floors (dense, no sparsity).
PEAK_BW = {"H100": 3.35e12, "H200": 4.8e12}     # bytes/s (HBM3 SXM / HBM3e)
PEAK_FLOPS = {"bf16": 990e12, "f32": 67e12}      # FLOP/s, H100 and H200 alike (fp32 = non-tensor-core)

# C ABI
CN_ABI_VERSION_MAJOR = 0
CN_ABI_VERSION_MINOR = 1
CN_STATUS_OK = 0
CN_DEVICE_CPU, CN_DEVICE_CUDA = 0, 1
CN_DTYPE_F32, CN_DTYPE_BF16 = 0, 1
CN_MODE_EAGER, CN_MODE_GRAPH, CN_MODE_FUSED = 0, 1, 2

ROWS = [  # (key, label, kind, dtype, mode)
    ("ref-f32", "reference fp32", "ref", "f32", None),
    ("ref-bf16", "reference bf16", "ref", "bf16", None),
    ("cn-eager-f32", "cutenative eager f32", "cn", "f32", CN_MODE_EAGER),
    ("cn-eager-bf16", "cutenative eager bf16", "cn", "bf16", CN_MODE_EAGER),
    ("cn-graph-f32", "cutenative graph f32", "cn", "f32", CN_MODE_GRAPH),
    ("cn-graph-bf16", "cutenative graph bf16", "cn", "bf16", CN_MODE_GRAPH),
    ("cn-fused-f32", "cutenative fused f32", "cn", "f32", CN_MODE_FUSED),
    ("cn-fused-bf16", "cutenative fused bf16", "cn", "bf16", CN_MODE_FUSED),
]
REF_ROW = "ref-f32"
CN_REF_ROW = "cn-eager-f32"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ======================================================================================================
# cutenative through ctypes
# ======================================================================================================


class ModelParams(ctypes.Structure):
    """cn_model_params, fields in header order."""
    _fields_ = [("struct_size", ctypes.c_uint64), ("device_type", ctypes.c_int32), ("device_index", ctypes.c_int32),
                ("dtype", ctypes.c_int32), ("mode", ctypes.c_int32), ("n_threads", ctypes.c_int32),
                ("check_tensors", ctypes.c_int32), ("mmap_weights", ctypes.c_int32), ("reserved0", ctypes.c_int32)]


class ModelInfo(ctypes.Structure):
    """cn_model_info, fields in header order."""
    _fields_ = [("struct_size", ctypes.c_uint64), ("kind", ctypes.c_int32), ("device_type", ctypes.c_int32),
                ("device_index", ctypes.c_int32), ("dtype", ctypes.c_int32), ("mode", ctypes.c_int32),
                ("reserved0", ctypes.c_int32), ("n_parameters", ctypes.c_uint64), ("weight_bytes", ctypes.c_uint64),
                ("graph_pool_bytes", ctypes.c_uint64), ("workspace_bytes", ctypes.c_uint64),
                ("context_length", ctypes.c_int64), ("native_horizon", ctypes.c_int64),
                ("max_horizon", ctypes.c_int64), ("n_default_quantiles", ctypes.c_int64),
                ("embedding_dim", ctypes.c_int64), ("max_tokens", ctypes.c_int64)]


class ForecastShape(ctypes.Structure):
    """cn_forecast_shape, fields in header order."""
    _fields_ = [("struct_size", ctypes.c_uint64), ("n_series", ctypes.c_uint64), ("n_outputs", ctypes.c_uint64),
                ("horizon", ctypes.c_uint64), ("n_values", ctypes.c_uint64), ("n_samples", ctypes.c_uint64),
                ("n_sample_values", ctypes.c_uint64)]


class CnError(RuntimeError):
    def __init__(self, status_name, message):
        super().__init__("%s: %s" % (status_name, message))
        self.status_name = status_name


def load_cn(path):
    lib = ctypes.CDLL(os.path.abspath(path))
    st, vp, sz = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t
    pf = ctypes.POINTER(ctypes.c_float)
    sigs = {
        "cn_abi_version": (None, [ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32)]),
        "cn_version": (ctypes.c_char_p, []),
        "cn_build_info": (ctypes.c_char_p, []),
        "cn_cuda_device_count": (ctypes.c_int32, []),
        "cn_status_name": (ctypes.c_char_p, [st]),
        "cn_error_create": (st, [ctypes.POINTER(vp)]),
        "cn_error_free": (None, [vp]),
        "cn_error_status": (st, [vp]),
        "cn_error_message": (ctypes.c_char_p, [vp]),
        "cn_model_params_init": (None, [ctypes.POINTER(ModelParams)]),
        "cn_model_create": (st, [ctypes.c_char_p, ctypes.POINTER(ModelParams), ctypes.POINTER(vp), vp]),
        "cn_model_free": (None, [vp]),
        "cn_model_info_init": (None, [ctypes.POINTER(ModelInfo)]),
        "cn_model_get_info": (st, [vp, ctypes.POINTER(ModelInfo), vp]),
        "cn_model_get_quantiles": (st, [vp, pf, sz, ctypes.POINTER(sz), vp]),
        "cn_model_set_mode": (st, [vp, ctypes.c_int, vp]),
        "cn_forecast_request_create": (st, [ctypes.POINTER(vp), vp]),
        "cn_forecast_request_free": (None, [vp]),
        # values as a raw address (c_void_p): row pointers are computed once, outside the timed region
        "cn_forecast_request_add_series": (st, [vp, vp, sz, ctypes.c_int64, ctypes.POINTER(sz), vp]),
        "cn_forecast_request_set_horizon": (st, [vp, ctypes.c_int64, vp]),
        "cn_forecast_shape_init": (None, [ctypes.POINTER(ForecastShape)]),
        "cn_forecast_get_shape": (st, [vp, vp, ctypes.POINTER(ForecastShape), vp]),
        "cn_forecast": (st, [vp, vp, vp, vp, sz, vp, sz, vp]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)  # AttributeError names the missing symbol
        fn.restype = restype
        fn.argtypes = argtypes
    major, minor = ctypes.c_uint32(0), ctypes.c_uint32(0)
    lib.cn_abi_version(ctypes.byref(major), ctypes.byref(minor))
    if major.value != CN_ABI_VERSION_MAJOR or minor.value < CN_ABI_VERSION_MINOR:
        raise RuntimeError("libcutenative ABI %d.%d is incompatible with %d.%d"
                           % (major.value, minor.value, CN_ABI_VERSION_MAJOR, CN_ABI_VERSION_MINOR))
    return lib


class CnModel:
    """One loaded cutenative model plus its own error object."""

    def __init__(self, lib, model_dir, device, dtype):
        self.lib = lib
        self.err = ctypes.c_void_p()
        self.model = ctypes.c_void_p()
        if lib.cn_error_create(ctypes.byref(self.err)) != CN_STATUS_OK:
            raise RuntimeError("cn_error_create failed")
        p = ModelParams()
        lib.cn_model_params_init(ctypes.byref(p))
        p.device_type = CN_DEVICE_CUDA if device == "cuda" else CN_DEVICE_CPU
        p.device_index = 0
        p.dtype = CN_DTYPE_BF16 if dtype == "bf16" else CN_DTYPE_F32
        p.mode = CN_MODE_EAGER
        try:
            self.check(lib.cn_model_create(os.fsencode(model_dir), ctypes.byref(p), ctypes.byref(self.model),
                                           self.err))
        except Exception:
            self.close()
            raise

    def status_name(self, status):
        return self.lib.cn_status_name(status).decode("ascii", "replace")

    def check(self, status):
        if status != CN_STATUS_OK:
            msg = self.lib.cn_error_message(self.err).decode("utf-8", "replace")
            raise CnError(self.status_name(status), msg)

    def info(self):
        info = ModelInfo()
        self.lib.cn_model_info_init(ctypes.byref(info))
        self.check(self.lib.cn_model_get_info(self.model, ctypes.byref(info), self.err))
        return info

    def quantiles(self):
        n = ctypes.c_size_t(0)
        self.check(self.lib.cn_model_get_quantiles(self.model, None, 0, ctypes.byref(n), self.err))
        buf = (ctypes.c_float * max(n.value, 1))()
        self.check(self.lib.cn_model_get_quantiles(self.model, buf, n.value, ctypes.byref(n), self.err))
        return [float(x) for x in buf[:n.value]]

    def set_mode(self, mode):
        """Returns the status (an int); the caller decides what a non-OK status means."""
        return self.lib.cn_model_set_mode(self.model, mode, self.err)

    def forecast(self, rows, horizon):
        """rows: list of (address, length) of float32 series, one univariate task each (group -1).
        Builds the request, sizes and allocates the output, runs, frees the request; returns a flat float32
        array [series][quantile][step] and the shape. This whole function is what a timing covers."""
        lib, err = self.lib, self.err
        req = ctypes.c_void_p()
        self.check(lib.cn_forecast_request_create(ctypes.byref(req), err))
        try:
            add = lib.cn_forecast_request_add_series
            for addr, n in rows:
                st = add(req, addr, n, -1, None, err)
                if st:
                    self.check(st)
            self.check(lib.cn_forecast_request_set_horizon(req, horizon, err))
            shape = ForecastShape()
            lib.cn_forecast_shape_init(ctypes.byref(shape))
            self.check(lib.cn_forecast_get_shape(self.model, req, ctypes.byref(shape), err))
            out = np.empty(max(int(shape.n_values), 1), dtype=np.float32)
            self.check(lib.cn_forecast(self.model, req, None, out.ctypes.data, int(shape.n_values), None, 0, err))
        finally:
            lib.cn_forecast_request_free(req)
        return out, (int(shape.n_series), int(shape.n_outputs), int(shape.horizon))

    def close(self):
        if self.model:
            self.lib.cn_model_free(self.model)
            self.model = ctypes.c_void_p()
        if self.err:
            self.lib.cn_error_free(self.err)
            self.err = ctypes.c_void_p()


# ======================================================================================================
# Checkpoint
# ======================================================================================================


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


def linear_param_counts(cfg):
    """(encoder linears per token, input-embedding linears per patch token, output-embedding linears per
    output patch); each counts weights + biases."""
    d, dff, inner, L = cfg["d_model"], cfg["d_ff"], cfg["num_heads"] * cfg["d_kv"], cfg["num_layers"]
    cc = cfg["chronos_config"]
    p_in, p_out, nq = cc["input_patch_size"], cc["output_patch_size"], len(cc["quantiles"])
    enc = L * (2 * 4 * d * inner + 2 * d * dff)                       # time + group attention q,k,v,o; MLP wi,wo
    emb_in = (3 * p_in * dff + dff) + (dff * d + d) + (3 * p_in * d + d)  # ResidualBlock hidden/output/residual
    emb_out = (d * dff + dff) + (dff * nq * p_out + nq * p_out) + (d * nq * p_out + nq * p_out)
    return enc, emb_in, emb_out


# ======================================================================================================
# Workloads
# ======================================================================================================


def make_series(rng, n_series, length):
    """Random walk + two seasonal components + noise, random level and scale; float32 (n_series, length)."""
    t = np.arange(length, dtype=np.float64)
    out = np.empty((n_series, length), dtype=np.float32)
    for i in range(n_series):
        period = rng.uniform(7.0, 60.0)
        phase = rng.uniform(0.0, 2 * np.pi)
        walk = np.cumsum(rng.standard_normal(length)) * rng.uniform(0.05, 0.5)
        seas = (rng.uniform(0.5, 3.0) * np.sin(2 * np.pi * t / period + phase)
                + 0.5 * np.sin(2 * np.pi * t / (period * 3.1) + 2 * phase))
        noise = 0.2 * rng.standard_normal(length)
        level, scale = rng.uniform(-50, 50), 10.0 ** rng.uniform(-1, 2)
        out[i] = (level + scale * (walk + seas + noise)).astype(np.float32)
    return out


class Workload:
    """A set of univariate series forecast H steps. `calls` splits it: [(start, stop)] row ranges, one per
    library/pipeline call (one range, or one per window for the sequential rolling run)."""

    def __init__(self, key, title, contexts, horizon, calls, ref_batch):
        self.key, self.title, self.horizon = key, title, horizon
        self.x = np.ascontiguousarray(contexts, dtype=np.float32)  # (n_series, C)
        self.calls = calls
        self.ref_batch = ref_batch
        self.n_series, self.context = self.x.shape
        base = self.x.ctypes.data
        stride = self.x.strides[0]
        # host data is given; the addresses are computed here, not in the timed region
        self.cn_rows = [(base + i * stride, self.context) for i in range(self.n_series)]
        self.torch_x = torch.from_numpy(self.x)

    @property
    def sequential(self):
        return len(self.calls) > 1


def make_workloads(tiny, quick, which):
    rng = np.random.default_rng(DATA_SEED)
    if tiny:
        spec = dict(a=(1, 64, 16), b=(1, 256, 32), c=(4, 64, 16))
        n_win, n_roll, c_roll, h_roll = 6, 7, 64, 16
    else:
        spec = dict(a=(1, 512, 16), b=(1, 2048, 64), c=(32, 512, 16))
        n_win, n_roll, c_roll, h_roll = (32 if quick else 448), 7, 512, 16
    out = []
    for k, (b, c, h) in spec.items():
        x = make_series(rng, b, c)
        if k in which:
            out.append(Workload(k, "(%s) B=%d, context %d, H=%d" % (k, b, c, h), x, h, [(0, b)], max(b, 1)))
    # rolling: n_roll series of length n_win + c_roll; window w = x[:, w+1 : w+1+c_roll] (the last one ends at
    # the series' end); rows ordered [window][series], so the sequential and the batched run see the same rows.
    base = make_series(rng, n_roll, n_win + c_roll)
    wins = np.stack([base[:, w + 1:w + 1 + c_roll] for w in range(n_win)])  # (n_win, n_roll, C)
    rows = wins.reshape(n_win * n_roll, c_roll)
    if "d" in which:
        seq_calls = [(w * n_roll, (w + 1) * n_roll) for w in range(n_win)]
        out.append(Workload("d-seq", "(d) rolling seq: %d sequential calls x %d series, context %d, H=%d"
                            % (n_win, n_roll, c_roll, h_roll), rows, h_roll, seq_calls, REF_DEFAULT_BATCH))
        out.append(Workload("d-batched", "(d) rolling batched: 1 call x %d series (%d windows x %d), context %d, "
                            "H=%d" % (n_win * n_roll, n_win, n_roll, c_roll, h_roll), rows, h_roll,
                            [(0, n_win * n_roll)], REF_DEFAULT_BATCH))
    return out


# ======================================================================================================
# Floors
# ======================================================================================================


def floors(wl, cfg, n_params, gpu):
    """Lower bounds on one workload's latency for bf16 and f32 weights/compute.

    Per model call with B series, context C, horizon H (patch P = 16, 21 quantiles):
      context patches Nc = ceil(C/P), output patches Nh = ceil(H/P), tokens per series T = Nc + 1 (REG) + Nh
      bytes  = n_params * bytes_per_weight (2 bf16, 4 f32; the weights read once)
               + B*C*4 (fp32 inputs) + B*21*H*4 (fp32 outputs)
      FLOPs  = 2 * (enc_linear * B*T + emb_in_linear * B*(Nc+Nh) + emb_out_linear * B*Nh)
               + attention: per layer 4*B*T*T*inner (time attention, QK^T and PV)
                                      + 4*B*T*g*inner (group attention; g = 1, every series its own group)
      where enc_linear = num_layers * (8*d*inner + 2*d*d_ff) is the number of weights in the encoder's linear
      layers (the brief's "2 x params-in-linears x tokens", with the embedding blocks counted on the tokens
      they actually see: the input block on the patches, the output block on the Nh output patches; the REG
      token is an embedding lookup), inner = num_heads*d_kv.
      time   = max(bytes / peak bandwidth, FLOPs / peak FLOP/s)
    The sequential rolling run is len(calls) such calls (weights read once per call); the others one call.
    Peak figures: bandwidth 3.35 TB/s (H100 SXM) or 4.8 TB/s (H200); 990 TFLOP/s dense bf16 tensor core,
    67 TFLOP/s fp32 (non-tensor core; TF32 would be ~495).
    """
    cc = cfg["chronos_config"]
    P, Q = cc["input_patch_size"], len(cc["quantiles"])
    inner, L = cfg["num_heads"] * cfg["d_kv"], cfg["num_layers"]
    enc, emb_in, emb_out = linear_param_counts(cfg)
    bw = PEAK_BW[gpu]
    res = {}
    for dt, wbytes in (("bf16", 2), ("f32", 4)):
        t_mem = t_cmp = 0.0
        tot_bytes = tot_flops = 0.0
        for (s, e) in wl.calls:
            B, C, H = e - s, wl.context, wl.horizon
            nc, nh = -(-C // P), -(-H // P)
            T = nc + 1 + nh
            by = n_params * wbytes + B * C * 4 + B * Q * H * 4
            fl = 2.0 * (enc * B * T + emb_in * B * (nc + nh) + emb_out * B * nh)
            fl += L * (4.0 * B * T * T * inner + 4.0 * B * T * 1 * inner)
            tot_bytes += by
            tot_flops += fl
            t_mem += by / bw
            t_cmp += fl / PEAK_FLOPS[dt]
        res[dt] = dict(bytes=tot_bytes, flops=tot_flops, t_mem=t_mem, t_cmp=t_cmp, t=max(t_mem, t_cmp))
    return res


# ======================================================================================================
# Runners
# ======================================================================================================


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def load_reference(model_dir, device, dtype):
    """Chronos2Pipeline.from_pretrained(dir, device_map=device, dtype=...). Newer transformers take `dtype`,
    older ones `torch_dtype`: try `dtype`, check the loaded model's dtype, fall back to `torch_dtype`.
    Returns (pipeline, the kwarg that worked)."""
    from chronos.chronos2 import Chronos2Pipeline
    want = torch.bfloat16 if dtype == "bf16" else torch.float32
    errors = []
    for kw in ("dtype", "torch_dtype"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pipe = Chronos2Pipeline.from_pretrained(model_dir, device_map=device, **{kw: want})
        except Exception as e:  # noqa: BLE001 - try the other spelling
            errors.append("%s=: %s" % (kw, e))
            continue
        if pipe.model.dtype == want and pipe.model.device.type == device:
            pipe.model.eval()
            return pipe, kw
        errors.append("%s=: loaded %s on %s" % (kw, pipe.model.dtype, pipe.model.device))
        del pipe
        gc.collect()
    raise RuntimeError("cannot load the reference in %s on %s: %s" % (dtype, device, "; ".join(errors)))


class RefRunner:
    def __init__(self, model_dir, device, dtype):
        self.pipe, self.kwarg = load_reference(model_dir, device, dtype)
        self.levels = list(self.pipe.quantiles)

    def call(self, wl, s, e):
        q, _mean = self.pipe.predict_quantiles(wl.torch_x[s:e].unsqueeze(1), prediction_length=wl.horizon,
                                               quantile_levels=self.levels, batch_size=wl.ref_batch)
        return q  # list of (1, H, Q) fp32 CPU tensors

    def to_numpy(self, raws):
        q = torch.cat([torch.stack(r) for r in raws])          # (N, 1, H, Q)
        return q[:, 0].permute(0, 2, 1).contiguous().numpy()   # (N, Q, H), cutenative's layout

    def close(self):
        del self.pipe


class CnRunner:
    def __init__(self, lib, model_dir, device, dtype, mode):
        self.m = CnModel(lib, model_dir, device, dtype)
        self.mode_status = None
        if mode != CN_MODE_EAGER:
            st = self.m.set_mode(mode)
            if st != CN_STATUS_OK:
                self.mode_status = self.m.status_name(st)
                msg = lib.cn_error_message(self.m.err).decode("utf-8", "replace")
                self.m.close()
                raise CnError(self.mode_status, msg)
        self.info = self.m.info()
        self.levels = self.m.quantiles()

    def call(self, wl, s, e):
        return self.m.forecast(wl.cn_rows[s:e], wl.horizon)

    def to_numpy(self, raws):
        parts = []
        for out, (n, q, h) in raws:
            parts.append(out[:n * q * h].reshape(n, q, h))
        return np.concatenate(parts)

    def close(self):
        self.m.close()


def time_workload(runner, wl, device, warmup, n_runs):
    """Warm-up calls (single calls: one window for the sequential rolling run), then n_runs timed runs of the
    whole workload. Returns (median seconds, all times, outputs (N, Q, H) of the first timed run)."""
    s0, e0 = wl.calls[0]
    for _ in range(warmup):
        runner.call(wl, s0, e0)
    times, first = [], None
    for _ in range(n_runs):
        sync(device)
        t0 = time.perf_counter()
        raws = [runner.call(wl, s, e) for (s, e) in wl.calls]
        sync(device)
        times.append(time.perf_counter() - t0)
        if first is None:
            first = raws
    return statistics.median(times), times, runner.to_numpy(first)


def profile_row(lib, model_dir, device, row_key, wl, calls=10):
    """Where the time goes: one cutenative row on one workload under torch.profiler (same process, same
    LibTorch, so its CUDA kernels are recorded). Returns a markdown section."""
    from torch.profiler import ProfilerActivity, profile

    row = next((r for r in ROWS if r[0] == row_key), None)
    if row is None or row[2] != "cn":
        return "\n## Profile\n\n(--profile %s: not a cutenative row)\n" % row_key
    _, label, _, dt, mode = row
    runner = CnRunner(lib, model_dir, device, dt, mode)
    try:
        s0, e0 = wl.calls[0]
        for _ in range(3):
            runner.call(wl, s0, e0)
        sync(device)
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                runner.call(wl, s0, e0)
            sync(device)
        wall = (time.perf_counter() - t0) / calls
    finally:
        runner.close()
    kernels = {}
    for ev in prof.events():
        if getattr(ev, "device_type", None) is not None and "CUDA" in str(ev.device_type):
            k = kernels.setdefault(ev.name, [0, 0.0])
            k[0] += 1
            k[1] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
    n_kernels = sum(c for c, _ in kernels.values()) / calls
    gpu_us = sum(t for _, t in kernels.values()) / calls
    lines = ["", "## Profile: %s, %s (per call, %d calls under torch.profiler)" % (label, wl.title, calls), "",
             "- wall time %.3f ms (profiler overhead included); GPU busy %.3f ms in %.0f kernels (%.2f µs each on average)"
             % (wall * 1e3, gpu_us / 1e3, n_kernels, gpu_us / max(n_kernels, 1)), "",
             "| kernel | launches per call | GPU µs per call | share |", "|---|---:|---:|---:|"]
    for name, (c, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:20]:
        lines.append("| `%s` | %.0f | %.1f | %.1f%% |" % (name[:90].replace("|", "/"), c / calls, t / calls,
                                                          100.0 * t / max(sum(x for _, x in kernels.values()), 1e-9)))
    return "\n".join(lines) + "\n"


# ======================================================================================================
# Report
# ======================================================================================================


def short_err(e, limit=160):
    s = "%s: %s" % (type(e).__name__, e) if not isinstance(e, CnError) else str(e)
    s = " ".join(s.split()).replace("|", "/")
    return s if len(s) <= limit else s[:limit - 3] + "..."


def deltas(out, ref):
    if out is None or ref is None:
        return None
    if out.shape != ref.shape:
        return dict(error="shape %s vs %s" % (out.shape, ref.shape))
    d = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    nonfinite = int((~np.isfinite(out)).sum())
    mean_ref = float(np.mean(np.abs(ref.astype(np.float64))))
    return dict(mean=float(d.mean()), max=float(d.max()), rel=100.0 * float(d.mean()) / mean_ref if mean_ref else
                float("nan"), nonfinite=nonfinite)


def fmt_g(v):
    return "%.3g" % v


def delta_cells(dl):
    if dl is None:
        return ["–", "–", "–"]
    if "error" in dl:
        return [dl["error"], "–", "–"]
    cells = [fmt_g(dl["mean"]), fmt_g(dl["max"]), fmt_g(dl["rel"])]
    if dl["nonfinite"]:
        cells[0] += " (%d non-finite)" % dl["nonfinite"]
    return cells


def fmt_time(sec):
    if sec < 1e-3:
        return "%.3g µs" % (sec * 1e6)
    if sec < 1.0:
        return "%.3g ms" % (sec * 1e3)
    return "%.3g s" % sec


def driver_version():
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=20)
        v = r.stdout.strip().splitlines()
        return v[0].strip() if r.returncode == 0 and v else "unknown"
    except Exception:  # noqa: BLE001
        return "unknown (no nvidia-smi)"


def render(ctx, workloads, results, row_keys):
    """results[(row_key, wl_key)] = dict(ms=..., times=..., out=..., mem=..., error=...)."""
    L = []
    L.append("# Chronos-2 benchmark: reference pipeline vs cutenative")
    L.append("")
    for k, v in ctx["header"]:
        L.append("- %s: %s" % (k, v))
    L.append("")
    L.append("Latency: median wall clock of %s runs after %d warm-up calls (rolling seq: %d runs; its warm-up: "
             "%d single-window calls), torch.cuda.synchronize() on both sides. cutenative timings cover building "
             "the request, cn_forecast_get_shape, the output allocation, cn_forecast (results on the host) and "
             "freeing the request. The reference's cover predict_quantiles from CPU inputs to CPU outputs. "
             "Speedup = reference fp32 / row. Deltas are over every (series, quantile, step) of the 21 model "
             "quantiles; Rel MAE %% = 100 * mean|Δ| / mean|reference fp32|. Memory = "
             "torch.cuda.max_memory_allocated() during the row's runs of that workload, weights included "
             "(LibTorch's caching allocator, shared by both)."
             % (ctx["n_runs"], ctx["warmup"], ctx["n_runs_seq"], ctx["warmup"]))
    L.append("")
    for note in ctx["notes"]:
        L.append("- " + note)
    L.append("")
    labels = {k: lab for (k, lab, *_rest) in ROWS}
    for wl in workloads:
        L.append("## " + wl.title)
        L.append("")
        fl = floors(wl, ctx["cfg"], ctx["n_params"], ctx["gpu"])
        L.append("Floor (%s%s): bf16 **%s** (weights+I/O %.1f MB at %.2f TB/s: %s; %.3g GFLOP at 990 TFLOP/s: %s); "
                 "f32 **%s** (%.1f MB: %s; %.3g GFLOP at 67 TFLOP/s: %s). Reference batch_size %d."
                 % (ctx["gpu"], "" if ctx["gpu_detected"] else ", assumed", fmt_time(fl["bf16"]["t"]),
                    fl["bf16"]["bytes"] / 1e6, PEAK_BW[ctx["gpu"]] / 1e12, fmt_time(fl["bf16"]["t_mem"]),
                    fl["bf16"]["flops"] / 1e9, fmt_time(fl["bf16"]["t_cmp"]), fmt_time(fl["f32"]["t"]),
                    fl["f32"]["bytes"] / 1e6, fmt_time(fl["f32"]["t_mem"]), fl["f32"]["flops"] / 1e9,
                    fmt_time(fl["f32"]["t_cmp"]), wl.ref_batch))
        L.append("")
        L.append("| Strategy | Latency (ms) | Speedup | Mean\\|Δ\\| | Max\\|Δ\\| | Rel MAE % | Memory (MB) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        ref = results.get((REF_ROW, wl.key), {})
        for rk in row_keys:
            r = results.get((rk, wl.key))
            if r is None:
                L.append("| %s | (not run) | | | | | |" % labels[rk])
                continue
            if r.get("error"):
                L.append("| %s | %s | | | | | |" % (labels[rk], r["error"]))
                continue
            ms = r["ms"]
            sp = ("%.2fx" % (ref["ms"] / ms)) if ref.get("ms") else "–"
            cells = delta_cells(deltas(r["out"], ref.get("out")))
            mem = "%.0f" % r["mem"] if r.get("mem") is not None else "n/a"
            L.append("| %s | %.3f | %s | %s | %s | %s | %s |" % (labels[rk], ms, sp, *cells, mem))
        cn_keys = [k for k in row_keys if k.startswith("cn-")]
        base = results.get((CN_REF_ROW, wl.key), {})
        if cn_keys and base.get("out") is not None:
            L.append("")
            L.append("Against cutenative eager f32 (same inputs):")
            L.append("")
            L.append("| Strategy | Mean\\|Δ\\| | Max\\|Δ\\| | Rel MAE % |")
            L.append("|---|---:|---:|---:|")
            for rk in cn_keys:
                r = results.get((rk, wl.key))
                if not r or r.get("error") or rk == CN_REF_ROW:
                    continue
                L.append("| %s | %s | %s | %s |" % (labels[rk], *delta_cells(deltas(r["out"], base["out"]))))
        if ref.get("out") is not None:
            y = ref["out"]
            L.append("")
            L.append("Reference fp32 output (sanity, random weights): mean|y| %.4g, spread over the quantile levels "
                     "(mean std) %.4g, over steps %.4g, over series %.4g, non-finite %d; input mean|x| %.4g."
                     % (float(np.mean(np.abs(y))), float(np.mean(np.std(y, axis=1))),
                        float(np.mean(np.std(y, axis=2))), float(np.mean(np.std(y, axis=0))) if len(y) > 1 else 0.0,
                        int((~np.isfinite(y)).sum()), float(np.mean(np.abs(wl.x)))))
        if wl.sequential:
            L.append("")
            per = ["%s %.3f" % (labels[rk], results[(rk, wl.key)]["ms"] / len(wl.calls))
                   for rk in row_keys if results.get((rk, wl.key), {}).get("ms")]
            if per:
                L.append("Per call (ms): " + "; ".join(per) + ".")
        L.append("")
    return "\n".join(L) + "\n"


# ======================================================================================================
# Main
# ======================================================================================================


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--lib", required=True, help="path to libcutenative.so")
    ap.add_argument("--out", required=True, help="markdown report to write")
    ap.add_argument("--quick", action="store_true", help="32 rolling windows, fewer repetitions")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--tiny", action="store_true", help="debug: tiny config and workloads")
    ap.add_argument("--rows", default=",".join(k for k, *_ in ROWS),
                    help="comma-separated subset of: " + ", ".join(k for k, *_ in ROWS))
    ap.add_argument("--workloads", default="a,b,c,d", help="comma-separated subset of a,b,c,d")
    ap.add_argument("--checkpoint", help="directory for the checkpoint (kept; reused if it has config.json)")
    ap.add_argument("--profile", default="", help="row key to profile on the first workload (torch.profiler, CUDA "
                    "kernels by GPU time) after the timings; appended to the report")
    args = ap.parse_args(argv)

    row_keys = [k for k in args.rows.split(",") if k]
    bad = [k for k in row_keys if k not in {r[0] for r in ROWS}]
    if bad:
        ap.error("unknown rows: %s" % ", ".join(bad))
    row_keys = [r[0] for r in ROWS if r[0] in row_keys]  # table order
    which = set(w for w in args.workloads.split(",") if w)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch.cuda.is_available() is False (use --device cpu)")

    # quiet the reference's loaders
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001
        pass
    import transformers
    try:
        import chronos
        chronos_version = getattr(chronos, "__version__", "?")
    except ImportError as e:
        sys.exit("cannot import chronos (chronos-forecasting); put it on PYTHONPATH: %s" % e)

    if args.tiny:
        warmup, n_runs, n_runs_seq = 1, 3, 2
    elif args.quick:
        warmup, n_runs, n_runs_seq = 3, 5, 3
    else:
        warmup, n_runs, n_runs_seq = 3, 20, 5

    # ---- header ----
    if device == "cuda":
        dev_name = torch.cuda.get_device_name(0)
        gpu = "H200" if "H200" in dev_name else "H100"
        gpu_detected = "H200" in dev_name or "H100" in dev_name
        drv = driver_version()
    else:
        dev_name = "CPU (%s, %d threads)" % (platform.processor() or platform.machine(), torch.get_num_threads())
        gpu, gpu_detected, drv = "H100", False, "n/a"
    lib = load_cn(args.lib)
    header = [
        ("Date (UTC)", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")),
        ("Device", dev_name),
        ("Driver", drv),
        ("torch", torch.__version__),
        ("CUDA (torch)", torch.version.cuda or "none"),
        ("cuDNN", str(torch.backends.cudnn.version()) if device == "cuda" else "n/a"),
        ("TF32 matmul (torch, reference)", str(torch.backends.cuda.matmul.allow_tf32)),
        ("transformers / chronos-forecasting", "%s / %s" % (transformers.__version__, chronos_version)),
        ("Python", platform.python_version()),
        ("cutenative", "%s (%s)" % (lib.cn_version().decode(), lib.cn_build_info().decode())),
        ("Library", os.path.abspath(args.lib)),
        ("Mode", ("tiny debug" if args.tiny else "chronos-2 base") + (", quick" if args.quick else "")),
    ]

    # ---- checkpoint ----
    tmp = None
    if args.checkpoint and os.path.isfile(os.path.join(args.checkpoint, "config.json")):
        model_dir = args.checkpoint
        cfg = json.loads(open(os.path.join(model_dir, "config.json")).read())
        n_params = safetensors_numel(model_dir)
        log("reusing checkpoint %s" % model_dir)
    else:
        model_dir = args.checkpoint or tempfile.mkdtemp(prefix="cn_bench_chronos2_")
        tmp = None if args.checkpoint else model_dir
        os.makedirs(model_dir, exist_ok=True)
        t0 = time.perf_counter()
        n_params, cfg = build_checkpoint(model_dir, args.tiny)
        log("checkpoint: %s (%.1f s)" % (model_dir, time.perf_counter() - t0))
    print("parameters: %d (%.2fM)" % (n_params, n_params / 1e6), flush=True)
    header.insert(0, ("Model", "random-weight Chronos-2 %s: d_model %d, %d layers, %d heads, d_ff %d, patch %d, "
                              "%d quantiles; %d parameters (%.2fM)"
                      % ("tiny" if args.tiny else "base", cfg["d_model"], cfg["num_layers"], cfg["num_heads"],
                         cfg["d_ff"], cfg["chronos_config"]["input_patch_size"],
                         len(cfg["chronos_config"]["quantiles"]), n_params, n_params / 1e6)))

    workloads = make_workloads(args.tiny, args.quick, which)
    ctx = dict(header=header, notes=[], cfg=cfg, n_params=n_params, gpu=gpu, gpu_detected=gpu_detected,
               n_runs=n_runs, n_runs_seq=n_runs_seq, warmup=warmup)
    results = {}

    def write_report():
        text = render(ctx, workloads, results, row_keys)
        d = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(d, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        return text

    def free_device():
        gc.collect()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    labels = {k: lab for (k, lab, *_r) in ROWS}
    try:
        for (rk, label, kind, dt, mode) in ROWS:
            if rk not in row_keys:
                continue
            log("== %s" % label)
            free_device()
            runner = None
            try:
                t0 = time.perf_counter()
                if kind == "ref":
                    runner = RefRunner(model_dir, device, dt)
                    ctx["notes"].append("%s: loaded with from_pretrained(dir, device_map=%r, %s=torch.%s) in %.1f s."
                                        % (label, device, runner.kwarg,
                                           "bfloat16" if dt == "bf16" else "float32", time.perf_counter() - t0))
                else:
                    runner = CnRunner(lib, model_dir, device, dt, mode)
                    inf = runner.info
                    ctx["notes"].append(
                        "%s: cn_model_info weight_bytes %d (%.1f MB), n_parameters %d, graph_pool_bytes %d, "
                        "workspace_bytes %d; loaded in %.1f s%s."
                        % (label, inf.weight_bytes, inf.weight_bytes / 2**20, inf.n_parameters,
                           inf.graph_pool_bytes, inf.workspace_bytes, time.perf_counter() - t0,
                           "" if [round(q, 4) for q in runner.levels] == [round(q, 4) for q in Q21]
                           else "; its quantile levels differ from the reference's: %s" % runner.levels))
            except Exception as e:  # noqa: BLE001
                if isinstance(e, CnError) and mode != CN_MODE_EAGER:
                    msg = "n/a (%s)" % e.status_name
                    ctx["notes"].append("%s: cn_model_set_mode(%d) -> %s" % (label, mode, short_err(e)))
                else:
                    msg = "error: " + short_err(e)
                    log(traceback.format_exc())
                log("%s: %s" % (label, msg))
                for wl in workloads:
                    results[(rk, wl.key)] = dict(error=msg)
                runner = None
                free_device()
                write_report()
                continue
            for wl in workloads:
                n = n_runs_seq if wl.sequential else n_runs
                try:
                    if device == "cuda":
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                    med, times, out = time_workload(runner, wl, device, warmup, n)
                    mem = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
                    results[(rk, wl.key)] = dict(ms=med * 1e3, times=times, out=out, mem=mem)
                    log("  %-60s %10.3f ms (min %.3f, max %.3f, n=%d)%s"
                        % (wl.title[:60], med * 1e3, min(times) * 1e3, max(times) * 1e3, n,
                           "" if mem is None else ", peak %.0f MB" % mem))
                except Exception as e:  # noqa: BLE001
                    results[(rk, wl.key)] = dict(error="error: " + short_err(e))
                    log("  %s: %s" % (wl.title, short_err(e, 400)))
                    if not isinstance(e, (CnError, torch.cuda.OutOfMemoryError)):
                        log(traceback.format_exc())
                    free_device()
            try:
                runner.close()
            except Exception as e:  # noqa: BLE001
                log("closing %s: %s" % (label, e))
            del runner
            free_device()
            write_report()
        if args.profile:
            ctx["profile"] = profile_row(lib, model_dir, device, args.profile, workloads[0])
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    text = write_report()
    if ctx.get("profile"):
        text += ctx["profile"]
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(ctx["profile"])
    print(text, end="", flush=True)
    log("wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Workloads (seeded inputs, split into calls) and the floors on their latency."""

import ctypes

import numpy as np
import torch

import cutenative_ctypes as cn

from .config import DATA_SEED, PEAK_BW, PEAK_FLOPS, REF_DEFAULT_BATCH, SWEEP_CONTEXT, SWEEP_HORIZON


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
    library/pipeline call (one range, or one per window for the sequential rolling run). A batch-sweep workload
    has sweep_b (its batch size) and its own warm-up and run counts (None elsewhere: the run's counts)."""

    def __init__(self, key, title, contexts, horizon, calls, ref_batch, sweep_b=None, warmup=None, n_runs=None):
        self.key, self.title, self.horizon = key, title, horizon
        self.sweep_b, self.warmup, self.n_runs = sweep_b, warmup, n_runs
        self.x = np.ascontiguousarray(contexts, dtype=np.float32)  # (n_series, C)
        self.calls = calls
        self.ref_batch = ref_batch
        self.n_series, self.context = self.x.shape
        base = self.x.ctypes.data
        stride = self.x.strides[0]
        # host data is given; the row pointers are computed here, not in the timed region
        self.cn_rows = [(ctypes.cast(base + i * stride, cn.FLOAT_P), self.context) for i in range(self.n_series)]
        self.torch_x = torch.from_numpy(self.x)

    def cn_block(self, s, e):
        """Series s..e-1 as one block for cn_forecast_request_add_series_batch: (float* to row s, e - s, C)."""
        return (self.cn_rows[s][0], e - s, self.context)

    @property
    def sequential(self):
        return len(self.calls) > 1


def sweep_repeats(b, tiny, quick):
    """(warm-up calls, timed runs) of the sweep's batch size b: fewer runs for the big batches."""
    if tiny:
        return 1, 3
    if quick:
        return (3, 5) if b <= 16 else (2, 5) if b <= 64 else (2, 3)
    return (3, 20) if b <= 16 else (3, 10) if b <= 64 else (2, 5) if b <= 256 else (2, 3)


def make_workloads(tiny, quick, which, sweep_batches=()):
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
    # (s) batch sweep: one pool of series from its own generator (the workloads above keep their inputs); batch
    # size b takes the pool's first b series, in one call (the reference: batch_size b, one batch). Context 512
    # and H=16 with --tiny too (the tiny config's context_length is 512).
    if "s" in which and sweep_batches:
        pool = make_series(np.random.default_rng(DATA_SEED + 1), max(sweep_batches), SWEEP_CONTEXT)
        for b in sweep_batches:
            w, n = sweep_repeats(b, tiny, quick)
            out.append(Workload("s-%d" % b, "(s) sweep B=%d, context %d, H=%d" % (b, SWEEP_CONTEXT, SWEEP_HORIZON),
                                pool[:b], SWEEP_HORIZON, [(0, b)], b, sweep_b=b, warmup=w, n_runs=n))
    return out


# ======================================================================================================
# Floors
# ======================================================================================================


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

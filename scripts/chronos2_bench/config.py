"""Constants of the Chronos-2 benchmark: model configurations, seeds, peak figures, the table's rows."""

import sys

import cutenative_ctypes as cn

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

# (s) batch sweep: univariate series at one context and horizon, each batch size one call (issue #19).
SWEEP_CONTEXT, SWEEP_HORIZON = 512, 16
SWEEP_BATCHES = {"cuda": [1, 4, 16, 64, 256, 1024], "cpu": [1, 8]}
SWEEP_ROWS = {  # the rows a sweep-only run takes when --rows is not given
    "cuda": ["ref-f32", "ref-bf16", "cn-eager-f32", "cn-eager-bf16", "cn-graph-bf16", "cn-fused-f32",
             "cn-fused-bf16"],
    "cpu": ["ref-f32", "cn-eager-f32", "cn-fused-f32"],
}
SWEEP_MAX_CALL_S = 3.0  # default --sweep-max-call-s

# Peak figures for the floors (dense, no sparsity).
PEAK_BW = {"H100": 3.35e12, "H200": 4.8e12}     # bytes/s (HBM3 SXM / HBM3e)
PEAK_FLOPS = {"bf16": 990e12, "f32": 67e12}      # FLOP/s, H100 and H200 alike (fp32 = non-tensor-core)

ROWS = [  # (key, label, kind, dtype, mode)
    ("ref-f32", "reference fp32", "ref", "f32", None),
    ("ref-bf16", "reference bf16", "ref", "bf16", None),
    ("cn-eager-f32", "cutenative eager f32", "cn", "f32", cn.CN_MODE_EAGER),
    ("cn-eager-bf16", "cutenative eager bf16", "cn", "bf16", cn.CN_MODE_EAGER),
    ("cn-graph-f32", "cutenative graph f32", "cn", "f32", cn.CN_MODE_GRAPH),
    ("cn-graph-bf16", "cutenative graph bf16", "cn", "bf16", cn.CN_MODE_GRAPH),
    ("cn-fused-f32", "cutenative fused f32", "cn", "f32", cn.CN_MODE_FUSED),
    ("cn-fused-bf16", "cutenative fused bf16", "cn", "bf16", cn.CN_MODE_FUSED),
]
REF_ROW = "ref-f32"
CN_REF_ROW = "cn-eager-f32"


def log(msg):
    print(msg, file=sys.stderr, flush=True)

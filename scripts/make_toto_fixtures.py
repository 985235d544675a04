#!/usr/bin/env python3
"""Toto (Datadog Toto-Open-Base-1.0 architecture, PyPI toto-ts==0.2.0) parity fixtures: two small random-weight
checkpoints written by the reference's own classes, and forecasts of the reference TotoForecaster on them, CPU fp32,
one thread, seeded right before each forecast.

    bash scripts/setup_reference_venv.sh      # once: the venv plus its toto-site (toto-ts, huggingface_hub<1.0, ...)
    ~/.cache/cutenative/venv-ref/bin/python scripts/make_toto_fixtures.py

The script puts scripts/toto_shim (a four-name stand-in for gluonts, numerically identical; specs/toto.md §2.4) and
$CN_REF_VENV/toto-site (default ~/.cache/cutenative/venv-ref/toto-site) in front of sys.path itself; xformers must
be absent (it is checked). Regenerating on the same machine and versions gives byte-identical files (single-threaded
CPU kernels, MKL_CBWR=AUTO); another CPU capability may change low bits.

Writes tests/fixtures/toto/:
  tiny_a/, tiny_b/      config.json + model.safetensors (see MODELS below: what each one exercises)
  cases.json            the case list, conventions (the exact reference call sequence), model facts
  cases.safetensors     "<case>/<array>" inputs, outputs and first-call (prefill) intermediates
"""

import json
import os
import sys
import warnings

# The reference's MKL GEMMs in the mode cutenative runs them (as the other fixture scripts). Set before torch loads.
os.environ.setdefault("MKL_CBWR", "AUTO")

HERE = os.path.dirname(os.path.abspath(__file__))
VENV = os.environ.get("CN_REF_VENV", os.path.expanduser("~/.cache/cutenative/venv-ref"))
TOTO_SITE = os.path.join(VENV, "toto-site")
if not os.path.isdir(os.path.join(TOTO_SITE, "toto")):
    sys.exit(f"no toto-ts in {TOTO_SITE}: run scripts/setup_reference_venv.sh")
# Order: shim, toto-site, then the venv (its huggingface_hub 2.x must not win over the site's 0.x).
sys.path[:0] = [os.path.join(HERE, "toto_shim"), TOTO_SITE]

import numpy as np  # noqa: E402
import safetensors.torch as st  # noqa: E402
import torch  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the "xFormers not found" ImportWarnings
    import huggingface_hub  # noqa: E402
    import rotary_embedding_torch  # noqa: E402,F401
    from toto.data.util.dataset import MaskedTimeseries  # noqa: E402
    from toto.inference.forecaster import TotoForecaster  # noqa: E402
    from toto.model import attention as toto_attention  # noqa: E402
    from toto.model import transformer as toto_transformer  # noqa: E402
    from toto.model.toto import Toto  # noqa: E402

OUT = os.path.join(HERE, "..", "tests", "fixtures", "toto")
QUANTILES = [0.1, 0.5, 0.9]
SCALER = "<class 'model.scaler.CausalPatchStdMeanScaler'>"
MIXTURE = "<class 'model.distribution.MixtureOfStudentTsOutput'>"

# Every key of the reference's Toto.__init__ (the published config has exactly these); the build always passes
# use_memory_efficient_attention=False (no xformers), the written config.json may omit keys (see "omit").
MODELS = {
    # The published shape family, shrunk. Unfused runtime MLP names; plus *.rotary_emb.freqs keys the loader drops.
    "tiny_a": dict(
        seed=1001,
        config=dict(
            patch_size=16,
            stride=16,
            embed_dim=32,
            num_layers=3,
            num_heads=4,
            mlp_hidden_dim=64,
            dropout=0.1,
            spacewise_every_n_layers=3,
            scaler_cls=SCALER,
            output_distribution_classes=[MIXTURE],
            spacewise_first=False,
            output_distribution_kwargs={"k_components": 5},
            use_memory_efficient_attention=False,
            stabilize_with_global=True,
            scale_factor_exponent=10.0,
        ),
        omit=[],
        xformers_mlp_names=False,
        rotary_freqs_keys=True,
    ),
    # Unusual: patch 8, head_dim 12 (rotary dim 12), space-wise first and every 2nd layer, K=3, no global
    # stabilisation, exponent 5. config.json omits spacewise_first (default True) and use_memory_efficient_attention
    # (default True, forced to False by load_from_checkpoint without xformers); MLP weights under xformers' fused
    # SwiGLU names mlp.0.w12.* / mlp.0.w3.* (remapped by Toto._map_state_dict_keys).
    "tiny_b": dict(
        seed=2002,
        config=dict(
            patch_size=8,
            stride=8,
            embed_dim=24,
            num_layers=4,
            num_heads=2,
            mlp_hidden_dim=40,
            dropout=0.1,
            spacewise_every_n_layers=2,
            scaler_cls=SCALER,
            output_distribution_classes=[MIXTURE],
            spacewise_first=True,
            output_distribution_kwargs={"k_components": 3},
            use_memory_efficient_attention=False,
            stabilize_with_global=False,
            scale_factor_exponent=5.0,
        ),
        omit=["spacewise_first", "use_memory_efficient_attention"],
        xformers_mlp_names=True,
        rotary_freqs_keys=False,
    ),
}


def perturb(model, seed):
    """Less trivial than default init: RMSNorm scales around 1, sharper attention, head projections scaled so that
    df, component scales and mixture weights vary across steps and components."""
    g = torch.Generator().manual_seed(seed)

    def rn(t):
        return torch.randn(t.shape, generator=g, dtype=t.dtype)

    bb = model.model
    with torch.no_grad():
        for layer in bb.transformer.layers:
            layer.norm1.scale.copy_(1.0 + 0.2 * rn(layer.norm1.scale))
            layer.norm2.scale.copy_(1.0 + 0.2 * rn(layer.norm2.scale))
            layer.attention.wQKV.weight.mul_(2.0)
            layer.mlp[0].bias.copy_(0.1 * rn(layer.mlp[0].bias))
        od = bb.output_distribution
        od.df.weight.mul_(4.0)
        od.df.bias.copy_(1.0 * rn(od.df.bias) + 1.0)
        od.loc_proj.weight.mul_(3.0)
        od.loc_proj.bias.copy_(0.5 * rn(od.loc_proj.bias))
        od.scale_proj.weight.mul_(3.0)
        od.scale_proj.bias.copy_(0.5 * rn(od.scale_proj.bias) - 0.5)
        od.mixture_weights.weight.mul_(5.0)
        od.mixture_weights.bias.copy_(1.0 * rn(od.mixture_weights.bias))


def layer_types(model):
    return [layer.attention_axis.name.lower() for layer in model.model.transformer.layers]


def file_state(model, spec):
    """The tensors as written to model.safetensors (names as a checkpoint of this kind would have them)."""
    sd = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    if spec["xformers_mlp_names"]:
        ren = {"mlp.0.weight": "mlp.0.w12.weight", "mlp.0.bias": "mlp.0.w12.bias",
               "mlp.2.weight": "mlp.0.w3.weight", "mlp.2.bias": "mlp.0.w3.bias"}
        out = {}
        for k, v in sd.items():
            for a, b in ren.items():
                if k.endswith("." + a):
                    k = k[: -len(a)] + b
                    break
            out[k] = v
        sd = out
    if spec["rotary_freqs_keys"]:
        # rotary-embedding-torch made freqs an nn.Parameter; toto re-registers it as a non-persistent buffer, so a
        # state_dict of this build has none. A checkpoint saved with freqs as a parameter has it under the shared
        # module's path and under every time-wise attention that holds the same module; the loader drops any key
        # ending in "rotary_emb.freqs" (and any key the instance lacks). The values written are the real ones.
        freqs = model.model.transformer.rotary_emb.freqs.detach().clone()
        sd["model.transformer.rotary_emb.freqs"] = freqs
        for i, layer in enumerate(model.model.transformer.layers):
            if layer.attention_axis.name == "TIME":
                sd[f"model.transformer.layers.{i}.attention.rotary_emb.freqs"] = freqs.clone()
    return sd


def build_model(name, spec):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(spec["seed"])
    model = Toto(**spec["config"])
    perturb(model, spec["seed"] + 1)
    cfg = {k: v for k, v in spec["config"].items() if k not in spec["omit"]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    written = file_state(model, spec)
    st.save_file(written, os.path.join(d, "model.safetensors"))
    # The reference's strict local loader; everything below uses the reloaded instance.
    loaded = Toto.load_from_checkpoint(d)
    loaded.eval()
    ref = model.state_dict()
    got = loaded.state_dict()
    assert list(ref) == list(got), (name, set(ref) ^ set(got))
    for k in ref:
        assert torch.equal(ref[k], got[k]), (name, k)
    assert loaded.model.use_memory_efficient_attention is False
    info = {
        "config_json": cfg,
        "omitted_keys": spec["omit"],
        "construction": "torch.manual_seed(%d); Toto(**config, use_memory_efficient_attention=False); "
        "weights perturbed (see perturb())" % spec["seed"],
        "layer_types": layer_types(loaded),
        "spacewise_layers": [i for i, t in enumerate(layer_types(loaded)) if t == "space"],
        "head_dim": spec["config"]["embed_dim"] // spec["config"]["num_heads"],
        "rotary_dim": int(loaded.model.transformer.rotary_emb.freqs.numel() * 2),
        "file_keys": {k: list(v.shape) for k, v in sorted(written.items())},
        "file_only_keys": sorted(set(written) - set(got)),  # remapped (MLP) or dropped (rotary freqs) on load
        "runtime_only_keys": sorted(set(got) - set(written)),  # what the MLP keys become after the remap
    }
    return loaded, info


# ---------------------------------------------------------------------------------------------------------------
# Inputs


def rng(seed):
    return np.random.RandomState(seed)


def wave(r, t, level, amp, noise, period):
    x = np.arange(t, dtype=np.float64)
    return level + amp * np.sin(2 * np.pi * x / period + r.uniform(0, 6.28)) + 0.02 * level * x / t + noise * r.randn(t)


def series_a():
    r = rng(11)
    s = wave(r, 40, 10.0, 3.0, 0.5, 12)[None, None]
    return s.astype(np.float32), np.ones_like(s, dtype=bool)


def series_b():
    r = rng(22)
    B, V, T = 2, 3, 48
    s = np.zeros((B, V, T))
    for b in range(B):
        s[b, 0] = wave(r, T, 10.0 + 5 * b, 3.0, 0.5, 12)
        s[b, 1] = wave(r, T, -3.0, 1.0, 0.3, 7)
        s[b, 2] = wave(r, T, 100.0 * (b + 1), 20.0, 4.0, 24)
    m = np.ones((B, V, T), dtype=bool)
    m[0, 1, :13] = False  # a left stretch without values on one variate
    m[1, 2, 20:27] = False  # a missing stretch in the middle of another
    m[0, 2, 30:33] = False
    s[~m] = 0.0  # masked positions hold 0.0 (the reference would let a NaN poison the scaler)
    return s.astype(np.float32), m


def series_g():  # constant variates, one at 5.0 and one at 0
    s = np.zeros((1, 2, 40))
    s[0, 0] = 5.0
    return s.astype(np.float32), np.ones_like(s, dtype=bool)


def series_h():  # one variate entirely masked next to a normal one
    r = rng(44)
    s = np.zeros((1, 2, 40))
    s[0, 0] = wave(r, 40, 2.0, 1.0, 0.2, 10)
    m = np.ones_like(s, dtype=bool)
    m[0, 1] = False
    return s.astype(np.float32), m


def series_i():  # extreme magnitudes: around 1e6 with small noise, around 1e-6
    r = rng(55)
    s = np.zeros((1, 2, 40))
    s[0, 0] = 1e6 + 3.0 * r.randn(40) + 10.0 * np.sin(np.arange(40) / 3.0)
    s[0, 1] = 1e-6 * (1.0 + 0.1 * r.randn(40))
    return s.astype(np.float32), np.ones_like(s, dtype=bool)


def series_j():  # tiny_b: T=38 -> left-padded to 40 = 5 patches of 8 (odd N)
    r = rng(66)
    s = np.stack([wave(r, 38, 4.0, 2.0, 0.3, 9), wave(r, 38, -20.0, 5.0, 1.0, 6)])[None]
    return s.astype(np.float32), np.ones_like(s, dtype=bool)


def case(name, model, inputs, seed, pred_len, num_samples, sbs, kv, note):
    return dict(name=name, model=model, inputs=inputs, seed=seed, pred_len=pred_len, num_samples=num_samples,
                samples_per_batch=sbs, use_kv_cache=kv, note=note)


CASES = [
    case("a_univariate", "tiny_a", "a", 101, 40, 8, 4, True,
         "B=1 V=1 T=40 (left-padded to 48, N=3 odd); 3 model calls; samples, KV cache"),
    case("b_multivariate_masked", "tiny_a", "b", 102, 33, 6, 3, True,
         "B=2 V=3 T=48; padding_mask False on a left stretch / in the middle; 3 calls"),
    case("c_univariate_nocache", "tiny_a", "a", 101, 40, 8, 4, False, "as a_univariate without KV cache"),
    case("d_univariate_sbs8", "tiny_a", "a", 101, 40, 8, 8, True, "as a_univariate with samples_per_batch=8"),
    case("e_mean_cache", "tiny_a", "b", 105, 33, None, None, True, "mean mode on b's input, KV cache"),
    case("f_mean_nocache", "tiny_a", "b", 105, 33, None, None, False, "mean mode on b's input, no KV cache"),
    case("g_constant", "tiny_a", "g", 107, 20, 4, 2, True, "V=2 constant series (5.0 and 0.0)"),
    case("h_all_masked_variate", "tiny_a", "h", 108, 20, 4, 2, True, "variate 1 entirely masked (values 0)"),
    case("i_extreme_magnitudes", "tiny_a", "i", 109, 20, 4, 2, True, "variates around 1e6 and 1e-6"),
    case("j_tinyb", "tiny_b", "j", 110, 30, 4, 2, True, "B=1 V=2 T=38 (-> 40, N=5 odd), patch 8; 4 calls"),
    case("k_tinyb_nocache", "tiny_b", "j", 110, 30, 4, 2, False, "as j_tinyb without KV cache"),
    case("l_tinyb_mean", "tiny_b", "j", 112, 30, None, None, True, "mean mode on j's input, KV cache"),
]
INPUTS = {"a": series_a, "b": series_b, "g": series_g, "h": series_h, "i": series_i, "j": series_j}


def masked_timeseries(series, mask):
    B, V, T = series.shape
    return MaskedTimeseries(
        series=torch.from_numpy(series),  # float32 [B,V,T]
        padding_mask=torch.from_numpy(mask),  # bool [B,V,T], True = observed
        id_mask=torch.zeros((B, V, T), dtype=torch.int32),  # all variates of one series attend to each other
        timestamp_seconds=torch.zeros((B, V, T), dtype=torch.int64),  # carried along, never used
        time_interval_seconds=torch.full((B, V), 60, dtype=torch.int64),  # idem
    )


# ---------------------------------------------------------------------------------------------------------------
# First-call (prefill) capture


class Capture:
    """Records the deterministic intermediates of the first TotoBackbone call after arm()."""

    def __init__(self, model):
        self.bb = model.model
        self.armed = False
        self.out = {}
        self.handles = []
        self.orig_scaler = self.bb.scaler
        cap = self

        class ScalerTap:  # the scaler is a plain object (gluonts Scaler is no nn.Module): no hooks, so wrap it
            def __call__(self, *args, **kwargs):
                res = cap.orig_scaler(*args, **kwargs)
                if cap.armed:
                    scaled, loc, scale = res
                    cap.out.update(scaled=scaled, loc=loc, scale=scale)
                return res

        self.bb.scaler = ScalerTap()

        def on(name, pick=lambda o: o):
            def hook(mod, args, output):
                if cap.armed:
                    cap.out[name] = pick(output)

            return hook

        self.handles.append(self.bb.patch_embed.register_forward_hook(on("embed", lambda o: o[0])))
        for i, layer in enumerate(self.bb.transformer.layers):
            self.handles.append(layer.register_forward_hook(on(f"layer{i}")))
        od = self.bb.output_distribution
        self.handles.append(od.mixture_weights.register_forward_hook(on("logits")))

        def head(mod, args, dist):
            if cap.armed:
                comp = dist.component_distribution
                cap.out.update(df=comp.df, loc_k=comp.loc, scale_k=comp.scale,
                               probs=torch.softmax(cap.out["logits"], dim=-1),  # F.softmax as in forward()
                               probs_norm=dist.mixture_distribution.probs)  # Categorical's renormalised copy
                cap.armed = False  # only the first call

        self.handles.append(od.register_forward_hook(head))

    def arm(self):
        self.out = {}
        self.armed = True

    def close(self):
        for h in self.handles:
            h.remove()
        self.bb.scaler = self.orig_scaler


# ---------------------------------------------------------------------------------------------------------------


def run_case(c, model, arrays):
    series, mask = INPUTS[c["inputs"]]()
    B, V, T = series.shape
    P = model.model.patch_embed.stride
    L = -(-T // P) * P
    rounded = -(-c["pred_len"] // P) * P
    meta = {k: v for k, v in c.items() if k != "inputs"}
    meta.update(input=c["inputs"], B=B, V=V, T=T, padded_T=L, num_patches=L // P, model_calls=rounded // P,
                quantile_levels=QUANTILES if c["num_samples"] else None)
    n = c["name"]
    arrays[f"{n}/series"] = torch.from_numpy(series)
    arrays[f"{n}/padding_mask"] = torch.from_numpy(mask.astype(np.uint8))
    forecaster = TotoForecaster(model.model)
    cap = Capture(model)
    inputs = masked_timeseries(series, mask)
    kwargs = dict(prediction_length=c["pred_len"], num_samples=c["num_samples"], use_kv_cache=c["use_kv_cache"])
    if c["num_samples"] is not None:
        kwargs["samples_per_batch"] = c["samples_per_batch"]
    try:
        cap.arm()
        torch.manual_seed(c["seed"])
        fc = forecaster.forecast(inputs, **kwargs)
    except Exception as e:  # noqa: BLE001 - recorded as the reference's behaviour
        meta["raises"] = f"{type(e).__name__}: {e}"
        cap.close()
        print(f"{n}: raises {meta['raises']}")
        return meta
    cap.close()
    for k in ["loc", "scale", "scaled", "embed"] + [f"layer{i}" for i in range(len(model.model.transformer.layers))] \
            + ["logits", "df", "loc_k", "scale_k", "probs", "probs_norm"]:
        arrays[f"{n}/prefill/{k}"] = cap.out[k].detach().contiguous().clone()
    meta["prefill_rows"] = int(cap.out["scaled"].shape[0])
    arrays[f"{n}/mean"] = fc.mean.contiguous().clone()
    summary = f"mean {tuple(fc.mean.shape)} [{fc.mean.min().item():.6g}, {fc.mean.max().item():.6g}]"
    if fc.samples is not None:
        arrays[f"{n}/samples"] = fc.samples.contiguous().clone()
        arrays[f"{n}/quantiles"] = torch.stack([fc.quantile(q) for q in QUANTILES]).contiguous()
        arrays[f"{n}/median"] = fc.median.contiguous().clone()
        arrays[f"{n}/std"] = fc.std.contiguous().clone()
        s = fc.samples
        meta["samples_min"], meta["samples_max"] = float(s.min()), float(s.max())
        summary = f"samples {tuple(s.shape)} [{s.min().item():.6g}, {s.max().item():.6g}]; " + summary
    pf = cap.out
    meta["prefill_df_range"] = [float(pf["df"].min()), float(pf["df"].max())]
    meta["prefill_probs_range"] = [float(pf["probs"].min()), float(pf["probs"].max())]
    print(f"{n}: {c['model']} B={B} V={V} T={T}->{L} calls={rounded // P} kv={c['use_kv_cache']} "
          f"sbs={c['samples_per_batch']}: {summary}; df [{meta['prefill_df_range'][0]:.4g}, "
          f"{meta['prefill_df_range'][1]:.4g}]")
    return meta


# Requests that span several reference calls: cutenative forecasts tasks with as many variates and the same padded
# history as one batch, batches in order of first appearance, on one generator seeded once; the reference then is
# torch.manual_seed(seed) followed by one forecast per batch, in that order.
MULTI_BATCH_CASES = [
    dict(name="m_two_batches", model="tiny_a", seed=113, pred_len=20, num_samples=4, samples_per_batch=2, use_kv_cache=True,
         note="batch 0: V=2 T=40 (h's input); batch 1: V=1 T=20 (a's first 20 steps): one generator across both calls"),
]


def multi_batch_inputs():
    s0, m0 = series_h()
    s1, m1 = series_a()
    return [(s0, m0), (s1[:, :, :20].copy(), m1[:, :, :20].copy())]


def run_multi_batch(c, model, arrays):
    forecaster = TotoForecaster(model.model)
    meta = dict(c)
    n = c["name"]
    torch.manual_seed(c["seed"])
    shapes = []
    for k, (series, mask) in enumerate(multi_batch_inputs()):
        arrays[f"{n}/batch{k}/series"] = torch.from_numpy(series)
        arrays[f"{n}/batch{k}/padding_mask"] = torch.from_numpy(mask.astype(np.uint8))
        fc = forecaster.forecast(masked_timeseries(series, mask), prediction_length=c["pred_len"], num_samples=c["num_samples"],
                                 samples_per_batch=c["samples_per_batch"], use_kv_cache=c["use_kv_cache"])
        arrays[f"{n}/batch{k}/samples"] = fc.samples.contiguous().clone()
        arrays[f"{n}/batch{k}/mean"] = fc.mean.contiguous().clone()
        arrays[f"{n}/batch{k}/quantiles"] = torch.stack([fc.quantile(q) for q in QUANTILES]).contiguous()
        shapes.append(list(series.shape))
    meta.update(batches=len(shapes), batch_shapes=shapes, quantile_levels=QUANTILES)
    print(f"{n}: {len(shapes)} reference calls {shapes}")
    return meta


CONVENTIONS = {
    "inputs": "MaskedTimeseries(series=float32 [B,V,T] from <case>/series (masked positions hold 0.0), "
    "padding_mask=bool [B,V,T] from <case>/padding_mask (uint8 here; 1 = observed), "
    "id_mask=zeros int32 [B,V,T], timestamp_seconds=zeros int64 [B,V,T], "
    "time_interval_seconds=full 60 int64 [B,V]); already batched (3-D), so no default_collate",
    "call_sequence": [
        "model = Toto.load_from_checkpoint(tests/fixtures/toto/<model>)  # strict; model.eval()",
        "forecaster = TotoForecaster(model.model)",
        "torch.manual_seed(seed)  # immediately before forecast; nothing else touches the RNG in between",
        "fc = forecaster.forecast(inputs, prediction_length=pred_len, num_samples=num_samples, "
        "samples_per_batch=samples_per_batch, use_kv_cache=use_kv_cache)  "
        "# mean mode: num_samples=None and samples_per_batch not passed",
    ],
    "outputs": {
        "samples": "fc.samples.contiguous(): float32 [B,V,pred_len,S], sample index = batch_idx*sbs + s",
        "mean": "fc.mean [B,V,pred_len] (samples.mean(-1) on the permuted view; mean mode: the mixture-mean rollout)",
        "quantiles": "stack([fc.quantile(q) for q in quantile_levels]) [Q,B,V,pred_len] (q a Python float)",
        "median": "fc.median = fc.quantile(0.5)",
        "std": "fc.std = samples.std(-1) (unbiased)",
    },
    "prefill": "<case>/prefill/* are taken from the FIRST TotoBackbone call of the forecast (first sample batch; "
    "rows B* = samples_per_batch*B in sample mode, B in mean mode, row r = s*B + b): loc/scale/scaled = the "
    "scaler's returned per-step patch loc, patch scale and scaled input [B*,V,L]; embed = patch_embed output "
    "[B*,V,N,D]; layer{i} = transformer layer i output [B*,V,N,D]; logits = mixture_weights Linear output; "
    "df/loc_k/scale_k = the StudentT components' df, loc, scale [B*,V,L,K]; probs = softmax(logits) as the head "
    "computes it; probs_norm = Categorical(probs).probs (renormalised, what sampling and the mean use)",
    "threads": "torch.set_num_threads(1); MKL_CBWR=AUTO",
}


def processor_name():
    """The "model name" of /proc/cpuinfo, as cutenative's cpu_numerics reports it."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown processor"


def main():
    torch.set_num_threads(1)
    assert torch.get_default_dtype() == torch.float32
    assert not toto_attention.XFORMERS_AVAILABLE and not toto_transformer.XFORMERS_SWIGLU_AVAILABLE
    os.makedirs(OUT, exist_ok=True)
    models, infos = {}, {}
    for name, spec in MODELS.items():
        models[name], infos[name] = build_model(name, spec)
        print(f"{name}: layers {infos[name]['layer_types']}, omitted {spec['omit']}, "
              f"{len(infos[name]['file_keys'])} file tensors")
    arrays, metas = {}, []
    for c in CASES:
        metas.append(run_case(c, models[c["model"]], arrays))
    multi = [run_multi_batch(c, models[c["model"]], arrays) for c in MULTI_BATCH_CASES]
    by = {m["name"]: m for m in metas}
    diffs = {}
    for x, y in [("a_univariate", "c_univariate_nocache"), ("e_mean_cache", "f_mean_nocache"),
                 ("j_tinyb", "k_tinyb_nocache"), ("a_univariate", "d_univariate_sbs8")]:
        key = "samples" if by[x]["num_samples"] else "mean"
        d = (arrays[f"{x}/{key}"] - arrays[f"{y}/{key}"]).abs().max().item()
        diffs[f"{x} vs {y}"] = {"compared": key, "max_abs_diff": d, "bitwise_equal": d == 0.0}
        print(f"{x} vs {y}: {key} max |diff| {d:.6g}")
    doc = {
        "generator": "scripts/make_toto_fixtures.py",
        "versions": {
            "torch": torch.__version__,
            "toto-ts": "0.2.0",
            "rotary-embedding-torch": "0.8.6",
            "huggingface_hub": huggingface_hub.__version__,
            "numpy": np.__version__,
            "gluonts": "local shim scripts/toto_shim (no real gluonts)",
            "xformers": None,
        },
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "processor": processor_name(),  # the parity test expects bit-equal samples on this processor only
        "threads": 1,
        "conventions": CONVENTIONS,
        "models": infos,
        "cache_vs_nocache": diffs,
        "cases": metas,
        "multi_batch_cases": multi,
    }
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    st.save_file({k: v.contiguous() for k, v in arrays.items()}, os.path.join(OUT, "cases.safetensors"))
    total = 0
    for root, _, files in os.walk(OUT):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(f"wrote {OUT}: {total} bytes")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Kronos parity fixtures: random-weight checkpoints written by the reference's own classes, and predictions
of the reference predictor on them, in eval mode, seeded right before each prediction.

    ~/.cache/cutenative/venv-ref/bin/python scripts/make_kronos_fixtures.py --kronos-src /path/to/Kronos

--kronos-src is a checkout of https://github.com/shiyu-coder/Kronos (read at 67b630e: model/kronos.py,
model/module.py); its model package is imported from there (nothing of it is copied into this repository).

Writes tests/fixtures/kronos/<name>/ (config.json + model.safetensors of the predictor, with a "max_context"
key added: KronosPredictor's argument, which cutenative reads from the config; tokenizer/ holds the tokenizer's
config.json + model.safetensors) and tests/fixtures/kronos/cases.json. Each case: the OHLCV(+amount) history,
Unix-second timestamps (UTC) of history and horizon, the sampling parameters, the seed, and the reference's
outputs: the mean path [series][horizon][6], every sample path [series][sample][horizon][6] (the predictor
averages them; computed here with the same code path but keeping the samples), and the sampled tokens
[series*sample][horizon] (s1 and s2) for the tokens-identical check.

Series of different history lengths cannot share one reference call (predict_batch refuses); such a case is
run as consecutive calls, one per length in order of first appearance, without reseeding in between - the
order cutenative's engine uses.
"""

import argparse
import json
import os
import sys

# The reference's MKL GEMMs in the mode cutenative runs them (conditional reproducibility AUTO: no dependence on
# operand alignment), so a re-run on the same machine reproduces the outputs bit for bit. Set before torch loads.
os.environ.setdefault("MKL_CBWR", "AUTO")

import numpy as np
import pandas as pd
import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "kronos")

CONFIGS = {
    # tokenizer: 2 encoder blocks, 2 decoder blocks (n_*_layers - 1), 6+6 bits; predictor: 2 layers, 4 heads
    "tiny_a": dict(
        tokenizer=dict(d_in=6, d_model=32, n_heads=4, ff_dim=64, n_enc_layers=3, n_dec_layers=3, ffn_dropout_p=0.0,
                       attn_dropout_p=0.0, resid_dropout_p=0.0, s1_bits=6, s2_bits=6, beta=0.05, gamma0=1.0,
                       gamma=1.1, zeta=0.05, group_size=4),
        predictor=dict(s1_bits=6, s2_bits=6, n_layers=2, d_model=32, n_heads=4, ff_dim=64, ffn_dropout_p=0.2,
                       attn_dropout_p=0.1, resid_dropout_p=0.2, token_dropout_p=0.1, learn_te=True),
        max_context=40),
    # odd sizes: head dim 10 in the predictor (dependency layer: 4 heads of 10), 1 encoder block, 5+5 bits
    "tiny_b": dict(
        tokenizer=dict(d_in=6, d_model=24, n_heads=2, ff_dim=40, n_enc_layers=2, n_dec_layers=3, ffn_dropout_p=0.0,
                       attn_dropout_p=0.0, resid_dropout_p=0.0, s1_bits=5, s2_bits=5, beta=0.05, gamma0=1.0,
                       gamma=1.1, zeta=0.05, group_size=5),
        predictor=dict(s1_bits=5, s2_bits=5, n_layers=3, d_model=40, n_heads=4, ff_dim=72, ffn_dropout_p=0.0,
                       attn_dropout_p=0.0, resid_dropout_p=0.0, token_dropout_p=0.0, learn_te=True),
        max_context=32),
}


def candles(rng, n, start_price, vol_scale):
    """A random-walk OHLCV+amount frame."""
    close = start_price * np.exp(np.cumsum(rng.normal(0, 0.01, n)))
    open_ = np.concatenate([[start_price], close[:-1]]) * np.exp(rng.normal(0, 0.002, n))
    high = np.maximum(open_, close) * np.exp(np.abs(rng.normal(0, 0.004, n)))
    low = np.minimum(open_, close) * np.exp(-np.abs(rng.normal(0, 0.004, n)))
    volume = vol_scale * np.exp(rng.normal(0, 0.5, n))
    amount = volume * (open_ + high + low + close) / 4 * np.exp(rng.normal(0, 0.01, n))
    df = pd.DataFrame(dict(open=open_, high=high, low=low, close=close, volume=volume, amount=amount))
    return df.astype(np.float32).astype(np.float64)  # the values a float32 C caller can pass, exactly


def frame(o, h, l, c, v=None, a=None):
    """An OHLC[V[A]] frame of float32-exact float64 columns."""
    cols = dict(open=o, high=h, low=l, close=c)
    if v is not None:
        cols["volume"] = v
    if a is not None:
        cols["amount"] = a
    return pd.DataFrame({k: np.asarray(x, dtype=np.float32).astype(np.float64) for k, x in cols.items()})


def near_constant(n, c, every=3):
    """c with every `every`-th value one ulp (float32) above it."""
    y = np.full(n, c, dtype=np.float32)
    y[::every] = np.nextafter(np.float32(c), np.float32(np.inf))
    return y


def degenerate_cases(case):
    """Degenerate families: the channels' mean and std decide the normalisation's branch here (a std of exactly 0,
    or the tiny non-zero std of a sum one ulp off, which normalises a constant channel to about -0.43 instead of 0),
    so they must be computed in numpy's pairwise order. A halted instrument (open = high = low = close, no volume)
    at several prices and history lengths around numpy's 8- and 128-value blocks, constant prices with live volume,
    near-constant prices, a single bar, extreme magnitudes (1e-30; 1e18, the largest whose squares stay finite),
    alternating values, and more than 8 sample paths (the path average is a sequential numpy sum)."""
    rng = np.random.default_rng(15)

    def halted(n, c):
        p = np.full(n, c)
        return frame(p, p, p, p, np.zeros(n), np.zeros(n))

    for n, c in ((7, 97.3), (9, 97.3), (20, 0.1), (129, 97.3), (300, 1e4), (257, 3.3333)):
        case(f"deg_a_halted_{c:g}_len{n}".replace(".", "_"), "tiny_a", [n], 4, top_k=1, top_p=1.0, frames=[halted(n, c)])
    n = 150
    vol = 1e4 * np.exp(rng.normal(0, 0.5, n))
    p = np.full(n, 97.3)
    case("deg_a_constant_prices_live_volume", "tiny_a", [n], 5, T=1.0, top_p=0.9, S=3, seed=31,
         frames=[frame(p, p, p, p, vol, vol * 97.3)])
    nc = near_constant(64, 97.3)
    case("deg_a_near_constant", "tiny_a", [64], 4, top_k=1, top_p=1.0,
         frames=[frame(nc, near_constant(64, 97.3, 2), nc, near_constant(64, 97.3, 5), np.full(64, 5.0),
                       np.full(64, 486.5))])
    case("deg_a_single_bar", "tiny_a", [1], 3, top_k=1, top_p=1.0, frames=[frame([10.0], [10.5], [9.5], [10.25],
                                                                                   [100.0], [1025.0])])
    tiny = (candles(rng, 40, 1.0, 1.0) * 1e-30).astype(np.float32).astype(np.float64)
    case("deg_a_magnitude_1e-30", "tiny_a", [40], 4, top_k=1, top_p=1.0, frames=[tiny])
    huge = (candles(rng, 40, 5.0, 1.0) * 2e17).astype(np.float32).astype(np.float64)
    case("deg_a_magnitude_1e18", "tiny_a", [40], 4, top_k=1, top_p=1.0, frames=[huge])
    alt = np.where(np.arange(50) % 2 == 0, 42.5, 41.5)
    case("deg_a_alternating", "tiny_a", [50], 4, T=1.0, top_p=0.9, seed=33,
         frames=[frame(alt, alt + 0.5, alt - 0.5, alt[::-1].copy(), np.full(50, 7.0))], cols=5)
    case("deg_a_many_samples_halted", "tiny_a", [129], 3, T=1.0, top_p=0.95, S=12, seed=35,
         frames=[halted(129, 97.3)])
    case("deg_b_halted_batch", "tiny_b", [40, 40], 4, top_k=1, top_p=1.0,
         frames=[halted(40, 97.3), halted(40, 1e4)])


def stamps(start, n, freq):
    return pd.Series(pd.date_range(start=start, periods=n, freq=freq))


def run_group(Kronos_mod, predictor, dfs, xts, yts, pred_len, T, top_k, top_p, S):
    """predict_batch's preprocessing + auto_regressive_inference, keeping the sample paths and tokens."""
    km = Kronos_mod
    xs, xst, yst, means, stds = [], [], [], [], []
    for df, xt, yt in zip(dfs, xts, yts):
        df = df.copy()
        if "volume" not in df.columns:
            df["volume"] = 0.0
            df["amount"] = 0.0
        if "amount" not in df.columns:
            df["amount"] = df["volume"] * df[["open", "high", "low", "close"]].mean(axis=1)
        x = df[["open", "high", "low", "close", "volume", "amount"]].values.astype(np.float32)
        m, s = np.mean(x, axis=0), np.std(x, axis=0)
        xn = np.clip((x - m) / (s + 1e-5), -predictor.clip, predictor.clip)
        xs.append(xn)
        xst.append(km.calc_time_stamps(xt).values.astype(np.float32))
        yst.append(km.calc_time_stamps(yt).values.astype(np.float32))
        means.append(m)
        stds.append(s)
    x = torch.from_numpy(np.stack(xs).astype(np.float32))
    x_stamp = torch.from_numpy(np.stack(xst).astype(np.float32))
    y_stamp = torch.from_numpy(np.stack(yst).astype(np.float32))

    # auto_regressive_inference with its sampler wrapped to record the tokens; the arithmetic is the reference's.
    drawn = []
    orig = km.sample_from_logits

    def recording(*a, **k):
        out = orig(*a, **k)
        drawn.append(out.squeeze(-1).clone())
        return out

    km.sample_from_logits = recording
    # keep the per-sample paths: the same function, but with sample_count folded out after decoding
    orig_mean = np.mean
    kept = {}

    def mean_keep(a, axis=None, **kw):
        if axis == 1 and isinstance(a, np.ndarray) and a.ndim == 4:
            kept["paths"] = a.copy()
        return orig_mean(a, axis=axis, **kw)

    km.np.mean = mean_keep
    try:
        preds = km.auto_regressive_inference(predictor.tokenizer, predictor.model, x, x_stamp, y_stamp,
                                             predictor.max_context, pred_len, predictor.clip, T, top_k, top_p, S)
    finally:
        km.sample_from_logits = orig
        km.np.mean = orig_mean
    preds = preds[:, -pred_len:, :]
    paths = kept["paths"][:, :, -pred_len:, :]
    out_mean, out_paths = [], []
    for i in range(len(dfs)):
        out_mean.append(preds[i] * (stds[i] + 1e-5) + means[i])
        out_paths.append(paths[i] * (stds[i] + 1e-5) + means[i])
    s1 = torch.stack(drawn[0::2], 1).numpy()  # [N, P]
    s2 = torch.stack(drawn[1::2], 1).numpy()
    return out_mean, out_paths, s1, s2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kronos-src", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.kronos_src))
    import model.kronos as km
    from model import Kronos, KronosPredictor, KronosTokenizer

    torch.use_deterministic_algorithms(False)
    os.makedirs(OUT, exist_ok=True)
    predictors = {}
    for name, cfg in CONFIGS.items():
        torch.manual_seed(1000 + len(name) + ord(name[-1]))
        tok = KronosTokenizer(**cfg["tokenizer"])
        mdl = Kronos(**cfg["predictor"])
        # The reference init leaves biases and norms at 0 / 1; draw every parameter so all of them matter.
        with torch.no_grad():
            for mod in (tok, mdl):
                for pname, p in mod.named_parameters():
                    if pname.endswith("bias"):
                        p.normal_(0, 0.05)
                    elif p.dim() == 1:
                        p.uniform_(0.7, 1.3)
        tok.eval()
        mdl.eval()
        d = os.path.join(OUT, name)
        mdl.save_pretrained(d)
        tok.save_pretrained(os.path.join(d, "tokenizer"))
        for readme in (os.path.join(d, "README.md"), os.path.join(d, "tokenizer", "README.md")):  # hub model cards
            if os.path.exists(readme):
                os.remove(readme)
        with open(os.path.join(d, "config.json")) as f:
            c = json.load(f)
        c["max_context"] = cfg["max_context"]
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f, indent=2, sort_keys=True)
        predictors[name] = KronosPredictor(mdl, tok, device="cpu", max_context=cfg["max_context"], clip=5)

    rng = np.random.default_rng(20261122)
    cases = []

    def case(name, model, groups, pred_len, T=1.0, top_k=0, top_p=0.9, S=1, seed=0, cols=6, freq="5min", frames=None):
        """groups: history lengths of the series, in request order. frames: the series' DataFrames (else random
        candles of those lengths)."""
        pr = predictors[model]
        series = []
        for i, n in enumerate(groups):
            df = frames[i] if frames is not None else candles(rng, n, 50 + 40 * rng.random(), 1e4 * (1 + rng.random()))
            start = pd.Timestamp("2024-03-29 22:35:00") + pd.Timedelta(days=int(rng.integers(0, 40)))
            ts = stamps(start, n + pred_len, freq)
            series.append((df.iloc[:, :cols], ts[:n], ts[n:].reset_index(drop=True)))
        torch.manual_seed(seed)
        order = []
        for n in groups:
            if n not in order:
                order.append(n)
        result = {}
        s1_all, s2_all = {}, {}
        for n in order:
            idx = [i for i, g in enumerate(groups) if g == n]
            m, p, s1, s2 = run_group(km, pr, [series[i][0] for i in idx], [series[i][1] for i in idx],
                                     [series[i][2] for i in idx], pred_len, T, top_k, top_p, S)
            for j, i in enumerate(idx):
                result[i] = (m[j], p[j])
                s1_all[i] = s1[j * S:(j + 1) * S]
                s2_all[i] = s2[j * S:(j + 1) * S]
        c = dict(name=name, model=model, pred_len=pred_len, temperature=T, top_k=top_k, top_p=top_p,
                 sample_count=S, seed=seed, columns=cols, series=[])
        for i, (df, xt, yt) in enumerate(series):
            c["series"].append(dict(
                values=[df[col].astype(np.float32).tolist() for col in df.columns],  # [channel][time]
                history_ts=[int(t.timestamp()) for t in xt], future_ts=[int(t.timestamp()) for t in yt],
                mean=result[i][0].astype(np.float32).tolist(), paths=result[i][1].astype(np.float32).tolist(),
                s1=s1_all[i].tolist(), s2=s2_all[i].tolist()))
        cases.append(c)

    case("a_greedy", "tiny_a", [30], 6, top_k=1, top_p=1.0)
    case("a_top_p", "tiny_a", [30], 6, T=0.8, top_p=0.9, seed=7)
    case("a_top_k", "tiny_a", [24], 5, T=1.2, top_k=5, seed=11)
    case("a_samples", "tiny_a", [28], 4, T=1.0, top_p=0.95, S=4, seed=3)
    case("a_sliding", "tiny_a", [60], 8, T=0.9, top_p=0.9, S=2, seed=5)          # history > max_context
    case("a_slides_during", "tiny_a", [36], 9, top_k=1, top_p=1.0)               # window starts sliding mid-way
    case("a_batch_equal", "tiny_a", [20, 20, 20], 4, T=1.0, top_p=0.8, S=2, seed=9)
    case("a_batch_ragged", "tiny_a", [20, 33, 20], 5, T=1.0, top_p=0.9, S=2, seed=13)
    case("a_no_volume", "tiny_a", [25], 4, top_k=1, top_p=1.0, cols=4)
    case("a_no_amount", "tiny_a", [25], 4, T=0.7, top_p=0.9, seed=2, cols=5)
    case("a_daily", "tiny_a", [26], 5, T=1.0, top_p=0.9, seed=4, freq="1D")
    case("b_greedy", "tiny_b", [22], 6, top_k=1, top_p=1.0)
    case("b_top_p_samples", "tiny_b", [25], 5, T=1.1, top_p=0.7, S=3, seed=21)
    case("b_sliding_topk", "tiny_b", [45], 6, T=1.0, top_k=3, S=2, seed=8)
    case("b_batch", "tiny_b", [18, 18], 7, T=0.9, top_p=0.95, S=2, seed=17, freq="1h")
    degenerate_cases(case)

    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(dict(generator="scripts/make_kronos_fixtures.py", reference="shiyu-coder/Kronos 67b630e (eval mode)",
                       torch=torch.__version__, cases=cases), f, separators=(",", ":"))
    print("wrote", len(cases), "cases")


if __name__ == "__main__":
    main()

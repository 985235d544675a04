#!/usr/bin/env python3
"""Trains cutenative's embedded default forecaster: a small Chronos-2-architecture model (about 0.5 M
parameters, ~2 MB in fp32) in the real Hugging Face layout, then evaluates it on held-out real series.

    python scripts/train_default_model.py --out DIR [--steps 6000] [--device cuda|cpu] [--seed 0]

Needs the reference venv (scripts/setup_reference_venv.sh: chronos-forecasting, torch) plus statsmodels
for the public data sets it ships. The model class, its loss and its save format are the reference
package's own (Chronos2Model, forward(..., future_target=...)), so the checkpoint is exactly what
chronos-forecasting would load.

Training data (a fresh batch every step):
  - synthetic series: level + trend (linear, damped, piecewise) + 1-3 seasonalities (periods 4, 7, 12,
    24, 52, ...) + noise (Gaussian, Student-t), random walks, AR(1), multiplicative seasonality, level
    shifts, spikes, intermittent counts;
  - windows of real series from statsmodels' data sets that are NOT used for evaluation: macrodata
    (14 US quarterly macro series), fertility (world fertility rates, 219 countries, yearly), grunfeld
    (firm investment, yearly), interest_inflation, danish_data.
Evaluation (held out, never seen in training): AirPassengers (examples/data), Mauna Loa CO2 (statsmodels
co2, weekly -> monthly means), El Nino sea-surface temperatures (statsmodels elnino, monthly), sunspots
(yearly), Nile flow (yearly). For each series the last H points are forecast from the history before
them; MASE is scaled by the in-sample seasonal-naive error; the table compares the model's median with
the seasonal-naive forecast. Written to <out>/evaluation.md and printed.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch

from chronos.chronos2 import Chronos2Model, Chronos2Pipeline
from chronos.chronos2.config import Chronos2CoreConfig

QUANTILES = [0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
             0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99]
PATCH = 16
CONTEXT = 512
MAX_OUT_PATCHES = 4
HERE = os.path.dirname(os.path.abspath(__file__))


def model_config():
    return Chronos2CoreConfig(
        d_model=64, d_kv=16, num_heads=4, d_ff=256, num_layers=4, dropout_rate=0.0,
        architectures=["Chronos2Model"],
        chronos_config=dict(context_length=CONTEXT, input_patch_size=PATCH, input_patch_stride=PATCH,
                            output_patch_size=PATCH, max_output_patches=MAX_OUT_PATCHES, quantiles=QUANTILES,
                            use_reg_token=True, use_arcsinh=True, time_encoding_scale=CONTEXT),
    )


# ---------------------------------------------------------------------------------------------------
# data

def synthetic(rng, n):
    t = np.arange(n, dtype=np.float64)
    kind = rng.integers(0, 6)
    level = rng.normal(0, 10) + rng.choice([0, 1]) * rng.uniform(10, 1000)
    x = np.full(n, level)
    if kind in (0, 1, 2):  # trend + seasonality + noise
        slope = rng.normal(0, 0.05) * rng.choice([0, 1, 1])
        if rng.random() < 0.3:  # damped / piecewise
            cp = rng.integers(1, n)
            x += slope * np.minimum(t, cp) + rng.normal(0, 0.05) * np.maximum(t - cp, 0)
        else:
            x += slope * t
        periods = rng.choice([4, 7, 12, 24, 52, 30, 48, 96, 168], size=rng.integers(1, 4), replace=False)
        season = np.zeros(n)
        for p in periods:
            phase = rng.uniform(0, 2 * np.pi)
            shape = rng.integers(0, 3)
            w = np.sin(2 * np.pi * t / p + phase)
            if shape == 1:
                w = np.sign(w)
            elif shape == 2:
                w = ((t + phase) % p) / p - 0.5
            season += rng.uniform(0.5, 5) * w
        if kind == 1:  # multiplicative
            x = x * (1 + 0.1 * season / (np.abs(season).max() + 1e-9)) + season * 0.1
        else:
            x += season
        sigma = rng.uniform(0.05, 1.5)
        x += sigma * (rng.standard_t(4, n) if rng.random() < 0.3 else rng.normal(0, 1, n))
    elif kind == 3:  # random walk with drift
        x += np.cumsum(rng.normal(rng.normal(0, 0.1), rng.uniform(0.1, 2), n))
    elif kind == 4:  # AR(1) around a seasonal mean
        from scipy.signal import lfilter
        phi = rng.uniform(0.3, 0.98)
        y = lfilter([1.0], [1.0, -phi], rng.normal(0, 1, n))
        p = rng.choice([7, 12, 24])
        x += y * rng.uniform(0.2, 3) + rng.uniform(0, 3) * np.sin(2 * np.pi * t / p)
    else:  # intermittent counts
        rate = rng.uniform(0.1, 3)
        x = rng.poisson(rate * (1 + 0.5 * np.sin(2 * np.pi * t / rng.choice([7, 12]))), n).astype(np.float64)
    if rng.random() < 0.1:  # level shift
        x[rng.integers(1, n):] += rng.normal(0, 5)
    if rng.random() < 0.1:  # spikes
        idx = rng.integers(0, n, size=rng.integers(1, 4))
        x[idx] += rng.normal(0, 10, len(idx))
    return x


def real_training_series():
    import statsmodels.api as sm
    out = []
    md = sm.datasets.macrodata.load_pandas().data
    for c in md.columns:
        if c not in ("year", "quarter"):
            out.append(md[c].to_numpy(np.float64))
    fert = sm.datasets.fertility.load_pandas().data
    years = [c for c in fert.columns if c.isdigit()]
    for _, row in fert.iterrows():
        v = row[years].to_numpy(np.float64)
        v = v[~np.isnan(v)]
        if len(v) > 20:
            out.append(v)
    gr = sm.datasets.grunfeld.load_pandas().data
    for firm, g in gr.groupby("firm"):
        for c in ("invest", "value", "capital"):
            out.append(g[c].to_numpy(np.float64))
    ii = sm.datasets.interest_inflation.load_pandas().data
    for c in ("Dp", "R"):
        out.append(ii[c].to_numpy(np.float64))
    dd = sm.datasets.danish_data.load_pandas().data
    for c in dd.columns:
        out.append(dd[c].to_numpy(np.float64))
    return out


def make_batch(rng, real, batch, device):
    n_out = int(rng.integers(1, MAX_OUT_PATCHES + 1))
    horizon = n_out * PATCH
    ctx_len = int(rng.integers(32, CONTEXT + 1))
    contexts, targets = [], []
    for _ in range(batch):
        if real and rng.random() < 0.2:
            s = real[rng.integers(0, len(real))]
            h = min(horizon, max(1, len(s) // 4))
            end = int(rng.integers(max(2, len(s) - 3 * h), len(s) - h + 1)) if len(s) > h + 2 else len(s) - h
            c = s[max(0, end - ctx_len):end]
            f = s[end:end + h]
            f = np.concatenate([f, np.full(horizon - len(f), np.nan)])
        else:
            s = synthetic(rng, ctx_len + horizon)
            c, f = s[:ctx_len], s[ctx_len:]
            if rng.random() < 0.1:  # missing values in the context
                c = c.copy()
                c[rng.random(len(c)) < rng.uniform(0.01, 0.2)] = np.nan
        contexts.append(c)
        targets.append(f)
    L = max(len(c) for c in contexts)
    ctx = np.full((batch, L), np.nan)
    for i, c in enumerate(contexts):
        ctx[i, L - len(c):] = c
    return (torch.tensor(ctx, dtype=torch.float32, device=device),
            torch.tensor(np.stack(targets), dtype=torch.float32, device=device), n_out)


# ---------------------------------------------------------------------------------------------------
# evaluation

def eval_series():
    import statsmodels.api as sm
    series = []
    ap = np.loadtxt(os.path.join(HERE, "..", "examples", "data", "airpassengers.csv"), delimiter=",",
                    skiprows=1, usecols=1)
    series.append(("AirPassengers (monthly)", ap, 12, 24))
    co2 = sm.datasets.co2.load_pandas().data["co2"]
    monthly = co2.resample("MS").mean().interpolate().to_numpy(np.float64)
    series.append(("Mauna Loa CO2 (monthly)", monthly, 12, 24))
    el = sm.datasets.elnino.load_pandas().data.drop(columns=["YEAR"]).to_numpy(np.float64).reshape(-1)
    series.append(("El Nino SST (monthly)", el, 12, 24))
    ss = sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy(np.float64)
    series.append(("Sunspots (yearly)", ss, 11, 11))
    nile = sm.datasets.nile.load_pandas().data["volume"].to_numpy(np.float64)
    series.append(("Nile flow (yearly)", nile, 1, 10))
    return series


def mase(y, f, history, m):
    scale = np.mean(np.abs(history[m:] - history[:-m]))
    return float(np.mean(np.abs(y - f)) / scale)


def evaluate(pipeline, out_dir):
    rows = []
    for name, s, m, h in eval_series():
        hist, y = s[:-h], s[-h:]
        q, mean = pipeline.predict_quantiles([torch.tensor(hist[-CONTEXT:], dtype=torch.float32)],
                                             prediction_length=h, quantile_levels=[0.1, 0.5, 0.9])
        med = mean[0][0].numpy()
        snaive = np.array([hist[len(hist) - m + (i % m)] for i in range(h)])
        lo, hi = q[0][0, :, 0].numpy(), q[0][0, :, 2].numpy()
        cover = float(np.mean((y >= lo) & (y <= hi)))
        rows.append((name, len(hist), h, m, mase(y, med, hist, m), mase(y, snaive, hist, m), cover))
    lines = ["| series | history | horizon | season | MASE model (median) | MASE seasonal naive | 10-90% coverage |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.3f} | {r[5]:.3f} | {r[6]:.0%} |")
    mm = np.mean([r[4] for r in rows])
    ms = np.mean([r[5] for r in rows])
    lines.append(f"| **mean** | | | | **{mm:.3f}** | **{ms:.3f}** | |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out_dir, "evaluation.md"), "w") as f:
        f.write(text)
    print(text)
    return mm, ms


# ---------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=6000)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    model = Chronos2Model(model_config()).to(args.device)
    model.train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params}, device {args.device}")
    real = real_training_series()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=args.steps, pct_start=0.05)
    t0 = time.time()
    ema = None
    for step in range(args.steps):
        ctx, fut, n_out = make_batch(rng, real, args.batch, args.device)
        out = model(context=ctx, future_target=fut, num_output_patches=n_out)
        loss = out.loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 250 == 0 or step == args.steps - 1:
            print(f"step {step:6d} loss {ema:.4f} {time.time() - t0:.0f}s", flush=True)

    model.eval()
    model = model.to("cpu")
    os.makedirs(args.out, exist_ok=True)
    pipeline = Chronos2Pipeline(model)
    pipeline.save_pretrained(args.out)
    settings = vars(args) | {"params": n_params, "train_seconds": round(time.time() - t0, 1),
                             "torch": torch.__version__}
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(settings, f, indent=2)
    pipeline = Chronos2Pipeline.from_pretrained(args.out, device_map="cpu")
    mm, ms = evaluate(pipeline, args.out)
    print(f"mean MASE model {mm:.3f} vs seasonal naive {ms:.3f}: {'beats' if mm < ms else 'DOES NOT beat'} it")


if __name__ == "__main__":
    main()

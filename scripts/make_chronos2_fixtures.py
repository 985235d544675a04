"""Generate Chronos-2 parity fixtures with the *reference* Python package (chronos-forecasting).

What it writes (all under tests/fixtures/chronos2/):
  tiny_a/config.json, tiny_a/model.safetensors   small random-weight Chronos-2 checkpoint (HF layout)
  tiny_b/config.json, tiny_b/model.safetensors   a second one: other width/depth/patch size/quantile set,
                                                 and no "time_encoding_scale" key (default path)
  cases.json                                     inputs + reference outputs of Chronos2Pipeline.predict_quantiles

The checkpoints are built with the reference's own classes (Chronos2CoreConfig + Chronos2Model) and saved with
Chronos2Pipeline.save_pretrained. The default init (initializer_factor 0.05) gives near-constant outputs, so every
parameter is re-drawn from a seeded normal of a sensible scale before saving. Each checkpoint is then loaded back
with Chronos2Pipeline.from_pretrained(dir, device_map="cpu") (fp32, default attention implementation) and run on
the cases below. Everything is seeded; re-running rewrites byte-identical files on the same machine and versions.

How to run (CPU only, from the repository root or anywhere):
  ~/.cache/cutenative/venv-ref/bin/python scripts/make_chronos2_fixtures.py
The reference venv comes from scripts/setup_reference_venv.sh (pinned torch / chronos-forecasting versions).

cases.json layout:
  {"generator", "reference", "torch", "defaults", "models", "cases": [
     {"name", "model", "prediction_length", "quantile_levels", "batch_size", "api", "description",
      "tasks": [{"target": [[...]] (n_targets x T, null = NaN),
                 "past_covariates": {name: [float|null|str]},      (omitted when empty)
                 "future_covariates": {name: [float|null|str]}}],  (omitted when empty)
      "quantiles": per task [n_targets][prediction_length][len(quantile_levels)],
      "mean":      per task [n_targets][prediction_length]}]}
  "api" says how the reference was called: "list_of_dicts" (each task passed as {"target", "past_covariates",
  "future_covariates"}) or "list_of_arrays" (each task passed as a 1-d or 2-d array; needed to mix univariate and
  multivariate tasks in one call, since the dict API requires one schema per call). For covariate-free tasks
  both APIs build identical model inputs. Floats are float32 values written as exact doubles.

Row order inside a task (reference chronos/chronos2/preprocess.py, from_list_of_dicts + _build_prepared_inputs):
  the target rows in their given order, then the past-only covariates, then the known-future covariates
  (a covariate is known-future when its name is a key of "future_covariates"); within each of the two covariate
  groups the rows follow the *sorted* covariate names. The cases below name covariates so that sorted order equals
  the order they are listed in, and past-only names sort before known-future ones, so the listed order is the row
  order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import shutil
import sys
import warnings

# The reference's MKL GEMMs in the mode cutenative runs them (conditional reproducibility AUTO: no dependence on
# operand alignment), so a re-run on the same machine reproduces the outputs bit for bit. Set before torch loads.
os.environ.setdefault("MKL_CBWR", "AUTO")
from importlib.metadata import version as pkg_version
from pathlib import Path

import numpy as np
import torch
from transformers.utils import logging as hf_logging

from chronos.chronos2 import Chronos2CoreConfig, Chronos2Model, Chronos2Pipeline

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "chronos2"
GENERATOR = "scripts/make_chronos2_fixtures.py"

DEFAULT_BATCH_SIZE = 256  # Chronos2Pipeline.predict default
DEFAULT_QUANTILES = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]  # predict_quantiles default
DEFAULT_UNROLLED = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]  # predict's default unrolled_quantiles

Q21 = [0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
       0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99]
Q13 = [0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99]

MODELS = {
    "tiny_a": {
        "seed": 1234,
        "core": dict(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2),
        "chronos_config": {
            "context_length": 128,
            "input_patch_size": 8,
            "input_patch_stride": 8,
            "output_patch_size": 8,
            "max_output_patches": 4,
            "quantiles": Q21,
            "use_reg_token": True,
            "use_arcsinh": True,
            "time_encoding_scale": 128,
        },
    },
    "tiny_c": {  # a long context: the reference's fp32 sums cascade through more levels (kernels/cascade_sum.h)
        "seed": 9012,
        "core": dict(d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=1),
        "chronos_config": {
            "context_length": 2048,
            "input_patch_size": 16,
            "input_patch_stride": 16,
            "output_patch_size": 16,
            "max_output_patches": 2,
            "quantiles": Q13,
            "use_reg_token": True,
            "use_arcsinh": True,
            "time_encoding_scale": 2048,
        },
    },
    "tiny_b": {
        "seed": 5678,
        "core": dict(d_model=48, d_kv=8, num_heads=6, d_ff=96, num_layers=3),
        "chronos_config": {  # no time_encoding_scale: the reference then uses context_length
            "context_length": 96,
            "input_patch_size": 4,
            "input_patch_stride": 4,
            "output_patch_size": 4,
            "max_output_patches": 6,
            "quantiles": Q13,
            "use_reg_token": True,
            "use_arcsinh": True,
        },
    },
}


# ----------------------------------------------------------------------------------------------------------------
# checkpoints


def rerandomize(model: torch.nn.Module, seed: int) -> None:
    """Re-draw every parameter from a seeded normal so the outputs depend on the inputs."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if name == "shared.weight":
                val = noise
            elif name.endswith("layer_norm.weight"):  # T5-style RMS norms (layer_norm / final_layer_norm)
                val = 1.0 + 0.1 * noise
            elif p.ndim == 2:  # Linear weights, (out, in)
                val = noise / math.sqrt(p.shape[1])
            elif name.endswith(".bias"):
                val = 0.1 * noise
            else:
                raise RuntimeError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(val.to(p.dtype))


def make_checkpoint(name: str, spec: dict) -> Path:
    out_dir = OUT / name
    if out_dir.exists():
        shutil.rmtree(out_dir)
    torch.manual_seed(spec["seed"])
    chronos_config = json.loads(json.dumps(spec["chronos_config"]))  # deep copy; the model mutates it
    config = Chronos2CoreConfig(**spec["core"], chronos_config=chronos_config)
    model = Chronos2Model(config)
    rerandomize(model, spec["seed"] + 1)
    model.eval()
    Chronos2Pipeline(model).save_pretrained(out_dir)

    cfg_path = out_dir / "config.json"
    cfg = json.loads(cfg_path.read_text())
    # Chronos2Model.__init__ writes the default time_encoding_scale (= context_length) back into
    # config.chronos_config; restore the dict as specified so the key stays absent for tiny_b.
    cfg["chronos_config"] = spec["chronos_config"]
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")

    files = sorted(p.name for p in out_dir.iterdir())
    assert files == ["config.json", "model.safetensors"], files
    assert cfg.get("architectures") == ["Chronos2Model"], cfg.get("architectures")
    return out_dir


def load_pipeline(out_dir: Path, spec: dict) -> Chronos2Pipeline:
    pipe = Chronos2Pipeline.from_pretrained(out_dir, device_map="cpu")
    assert pipe.model.dtype == torch.float32
    cc = pipe.model.chronos_config
    want_tes = spec["chronos_config"].get("time_encoding_scale", spec["chronos_config"]["context_length"])
    assert cc.time_encoding_scale == want_tes, (cc.time_encoding_scale, want_tes)
    assert list(cc.quantiles) == spec["chronos_config"]["quantiles"]
    return pipe


# ----------------------------------------------------------------------------------------------------------------
# data


def f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def seasonal(rng: np.random.Generator, n: int, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    period = rng.uniform(6.0, 30.0)
    phase = rng.uniform(0.0, 2.0 * np.pi)
    y = (
        1.5 * np.sin(2.0 * np.pi * t / period + phase)
        + 0.5 * np.sin(2.0 * np.pi * t / (period * 2.7))
        + rng.uniform(-0.03, 0.03) * t
        + 0.3 * rng.standard_normal(n)
    )
    return f32(offset + scale * y)


def random_walk(rng: np.random.Generator, n: int, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    return f32(offset + scale * np.cumsum(rng.standard_normal(n)))


def categorical(rng: np.random.Generator, n: int, labels: list[str], p_missing: float = 0.0) -> np.ndarray:
    vals = rng.choice(labels, size=n).astype(object)
    if p_missing > 0:
        vals[rng.random(n) < p_missing] = None
    return vals


def build_cases() -> list[dict]:
    """Each case: name, model, prediction_length, quantile_levels, batch_size, api, description, tasks.

    A task is {"target": 1-d or 2-d float32 array, "past_covariates": {...}, "future_covariates": {...}}.
    """
    rng = np.random.default_rng(20240611)
    cases: list[dict] = []

    def add(name, model, pl, tasks, *, ql=None, batch_size=DEFAULT_BATCH_SIZE, api="list_of_dicts", desc=""):
        cases.append(
            dict(
                name=name,
                model=model,
                prediction_length=pl,
                quantile_levels=list(DEFAULT_QUANTILES if ql is None else ql),
                batch_size=batch_size,
                api=api,
                description=desc,
                tasks=tasks,
            )
        )

    # ---------------- tiny_a: context 128, patch 8, native horizon 4*8 = 32, 21 quantiles ----------------
    add("a_univariate_short", "tiny_a", 8, [{"target": seasonal(rng, 5)}],
        desc="5 observations, shorter than one input patch (8)")
    add("a_univariate_long", "tiny_a", 32, [{"target": seasonal(rng, 128, 2.0, 10.0)}], ql=Q21,
        desc="full context (128) and full native horizon (32); all 21 model quantiles requested")
    add("a_ragged_batch", "tiny_a", 16,
        [{"target": seasonal(rng, n)} for n in (17, 64, 128, 40, 9)],
        desc="5 univariate tasks of different lengths in one batch (left NaN padding)")
    add("a_multivariate", "tiny_a", 24,
        [{"target": np.stack([seasonal(rng, 100), random_walk(rng, 100), seasonal(rng, 100, 3.0, -2.0)])}],
        ql=[0.1, 0.5, 0.9], desc="one task, 3 target series (one group)")
    tasks = []
    for n in (90, 70):
        y = seasonal(rng, n)
        tasks.append({"target": y, "past_covariates": {
            "cov_0": f32(0.8 * y + 0.2 * rng.standard_normal(n)),
            "cov_1": random_walk(rng, n)}})
    add("a_past_covariates", "tiny_a", 16, tasks, desc="2 tasks, each 1 target + 2 past-only numeric covariates")
    y = seasonal(rng, 110, 1.0, 4.0)
    y[[3, 7, 20, 21, 90]] = np.nan
    y[40:56] = np.nan  # a gap covering at least one whole patch
    add("a_nan_inside", "tiny_a", 16, [{"target": y}], desc="NaNs scattered inside the context + a 16-step gap")
    add("a_constant", "tiny_a", 12, [{"target": f32(np.full(60, 3.7))}],
        desc="constant series (scale falls back to eps = 1e-5)")
    add("a_scale_1e6", "tiny_a", 20, [{"target": seasonal(rng, 100, 1e6, 5e6)}], desc="values around 5e6 +- 2e6")
    add("a_long_horizon", "tiny_a", 80,
        [{"target": seasonal(rng, 100)}, {"target": random_walk(rng, 70)}],
        desc="prediction_length 80 > native 32: 32 + autoregressive rollout 32 + 16 (3 model calls)")
    add("a_quantiles_subset", "tiny_a", 16, [{"target": seasonal(rng, 80)}], ql=[0.9, 0.05, 0.5, 0.25, 0.99],
        desc="custom levels, all in the model's set (unsorted order kept as given)")
    add("a_quantiles_extrapolated", "tiny_a", 16, [{"target": random_walk(rng, 80)}],
        ql=[0.001, 0.025, 0.5, 0.975, 0.999],
        desc="levels not in the model's set: interpolated; 0.001 / 0.999 outside [0.01, 0.99] are clamped")
    y = seasonal(rng, 80)
    add("a_categorical_past", "tiny_a", 12,
        [{"target": y, "past_covariates": {"cov_0": categorical(rng, 80, ["lo", "mid", "hi"])}}],
        desc="single target + one categorical (string) past-only covariate: target encoding")
    tasks = []
    for n in (72, 50):
        y = seasonal(rng, n)
        tasks.append({
            "target": y,
            "past_covariates": {
                "cov_0": categorical(rng, n, ["red", "green", "blue"], p_missing=0.1),
                "cov_1": seasonal(rng, n),
                "cov_2": categorical(rng, n, ["on", "off"]),
            },
            "future_covariates": {
                "cov_1": seasonal(rng, 12),
                "cov_2": np.array(["on", "off", "maybe", None, "on", "on", "off", "maybe", "off", None, "on", "off"],
                                  dtype=object),
            },
        })
    add("a_categorical_future_mixed", "tiny_a", 12, tasks,
        desc="2 tasks: categorical past-only cov_0 with missing labels, numeric known-future cov_1, categorical "
             "known-future cov_2 with an unseen label ('maybe') and missing labels in the future")
    y = seasonal(rng, 100)
    x = seasonal(rng, 148)
    fut = x[100:].copy()
    fut[[5, 30, 31]] = np.nan
    add("a_future_covariates_long_horizon", "tiny_a", 48,
        [{"target": f32(y + 0.7 * x[:100]), "past_covariates": {"cov_0": x[:100]},
          "future_covariates": {"cov_0": fut}}],
        desc="known-future covariate (with 3 NaNs in the future) and prediction_length 48 > 32: the rollout "
             "slides the known future values into the context")
    add("a_mixed_tasks", "tiny_a", 20,
        [{"target": np.stack([seasonal(rng, 60) for _ in range(3)])},
         {"target": seasonal(rng, 100)},
         {"target": random_walk(rng, 30)},
         {"target": np.stack([seasonal(rng, 45), random_walk(rng, 45)])}],
        api="list_of_arrays",
        desc="one call mixing a 3-series multivariate task, two univariate tasks and a 2-series task")

    # ---------------- tiny_b: context 96, patch 4, native horizon 6*4 = 24, 13 quantiles ----------------
    add("b_univariate_short", "tiny_b", 5, [{"target": seasonal(rng, 3)}],
        desc="3 observations (< patch 4); horizon 5 is not a multiple of the patch")
    add("b_univariate_long", "tiny_b", 24, [{"target": seasonal(rng, 96, 0.5, -3.0)}], ql=Q13,
        desc="full context (96) and full native horizon (24); all 13 model quantiles requested")
    add("b_multivariate", "tiny_b", 12,
        [{"target": np.stack([random_walk(rng, 80), seasonal(rng, 80), seasonal(rng, 80, 10.0)])}],
        desc="one task, 3 target series")
    tasks = []
    for n in (85, 60):
        x = seasonal(rng, n + 10)
        tasks.append({
            "target": f32(seasonal(rng, n) + 0.5 * x[:n]),
            "past_covariates": {"cov_0": random_walk(rng, n), "cov_1": x[:n]},
            "future_covariates": {"cov_1": x[n:]},
        })
    add("b_future_covariates", "tiny_b", 10, tasks,
        desc="2 tasks: target + past-only cov_0 + known-future cov_1 (horizon 10, not a patch multiple)")
    y1 = seasonal(rng, 70)
    y1[:13] = np.nan
    y2 = random_walk(rng, 60)
    y2[:30] = np.nan
    add("b_nan_start", "tiny_b", 12, [{"target": y1}, {"target": y2}],
        desc="leading NaNs (13 and 30 of them)")
    add("b_scale_1e-4", "tiny_b", 12, [{"target": seasonal(rng, 80, 1e-4)}], desc="values of order 1e-4")
    add("b_context_longer", "tiny_b", 24, [{"target": seasonal(rng, 250)}],
        desc="250 observations > context_length 96: only the last 96 are used")
    add("b_quantiles_interpolated", "tiny_b", 12, [{"target": seasonal(rng, 70)}],
        ql=[0.025, 0.25, 0.5, 0.75, 0.975],
        desc="levels 0.025 / 0.25 / 0.75 / 0.975 are not in the model's set: linear interpolation")
    add("b_long_horizon_mixed", "tiny_b", 60,
        [{"target": np.stack([seasonal(rng, 70), random_walk(rng, 70)])},
         {"target": seasonal(rng, 50)},
         {"target": random_walk(rng, 20)}],
        api="list_of_arrays",
        desc="prediction_length 60 > native 24 (24 + 24 + 12) with a multivariate group in the rollout")
    y = seasonal(rng, 90)
    add("b_long_horizon_past_covariates", "tiny_b", 40,
        [{"target": y, "past_covariates": {"cov_0": f32(y + 0.3 * rng.standard_normal(90))}}],
        desc="past-only covariate in the rollout (its own predictions are appended to its context)")
    add("b_ragged_small_batch", "tiny_b", 8,
        [{"target": seasonal(rng, 30)},
         {"target": np.stack([seasonal(rng, 50), seasonal(rng, 50)])},
         {"target": random_walk(rng, 96)},
         {"target": np.stack([seasonal(rng, 40) for _ in range(3)])},
         {"target": seasonal(rng, 10)}],
        batch_size=3, api="list_of_arrays",
        desc="batch_size 3 rows: batches are [task0, task1] (3 rows), [task2, task3] (4 rows), [task4] (1 row)")
    tasks = []
    for n in (64, 44):
        tasks.append({
            "target": np.stack([seasonal(rng, n), random_walk(rng, n)]),
            "past_covariates": {
                "cov_0": categorical(rng, n, ["b", "a", "c"], p_missing=0.1),
                "cov_1": categorical(rng, n, ["x", "y"]),
            },
            "future_covariates": {
                "cov_1": np.array(["y", "x", "z", None, "x", "y", "y", "x"], dtype=object),
            },
        })
    add("b_categorical_multivariate_ordinal", "tiny_b", 8, tasks,
        desc="2 targets => categorical covariates are ordinal-encoded (codes of the sorted categories, "
             "missing = n_categories, unseen future label 'z' = NaN)")
    add_degenerate(add)
    return cases


def near_constant(n: int, c: float, every: int = 3) -> np.ndarray:
    """c with every `every`-th value one ulp above it."""
    y = np.full(n, c, dtype=np.float32)
    y[::every] = np.nextafter(np.float32(c), np.float32(np.inf))
    return y


def add_degenerate(add) -> None:
    """Degenerate families: the normalisation's statistics decide a branch here (a scale of exactly 0 -> eps, or
    the tiny non-zero scale of a sum that came out one ulp off), so they must be computed in the reference's
    summation order. Constant series at several magnitudes and lengths (around the order's 8-, 32- and 512-value
    boundaries), near-constant series, a single observation, all missing but one, extreme magnitudes, alternating
    signs, a constant channel inside a group. Values whose fp32 squares overflow (|x - loc| > ~1.8e19) are left
    out: the reference's forecast is then not finite. Own generator, so the cases above keep their inputs."""
    rng = np.random.default_rng(15)
    for n in (7, 9, 33, 127):
        add(f"deg_a_constant_97_3_len{n}", "tiny_a", 8, [{"target": f32(np.full(n, 97.3))}],
            desc=f"constant 97.3, {n} values")
    mags = (1e-30, 1e-3, 0.1, 97.3, 1e4, 3e7, 0.0, -7.77)
    add("deg_a_constant_magnitudes", "tiny_a", 8, [{"target": f32(np.full(60, c))} for c in mags],
        api="list_of_arrays", desc="constant series of 60 values at magnitudes " + ", ".join(map(str, mags)))
    add("deg_a_near_constant", "tiny_a", 12,
        [{"target": near_constant(100, 97.3)}, {"target": near_constant(64, 0.1, every=7)}],
        api="list_of_arrays", desc="constant but every 3rd (7th) value one ulp above")
    add("deg_a_single_observation", "tiny_a", 8, [{"target": f32([42.0])}], desc="one value")
    y = np.full(80, np.nan, dtype=np.float32)
    y[50] = 3.25
    z = np.full(80, np.nan, dtype=np.float32)
    z[-1] = -1e4
    add("deg_a_all_missing_but_one", "tiny_a", 8, [{"target": y}, {"target": z}], api="list_of_arrays",
        desc="80 values, all NaN but one (inside, and last)")
    add("deg_a_extreme_magnitudes", "tiny_a", 8,
        [{"target": seasonal(rng, 90, 1e-30)}, {"target": seasonal(rng, 90, 1e15, 3e15)}], api="list_of_arrays",
        desc="seasonal series of order 1e-30 (squares underflow: scale 0 -> eps) and of order 1e15")
    alt = f32(np.where(np.arange(64) % 2 == 0, 42.5, -42.5))
    add("deg_a_alternating_signs", "tiny_a", 8, [{"target": alt}, {"target": alt[:63]}], api="list_of_arrays",
        desc="+-42.5 alternating, 64 and 63 values")
    add("deg_a_constant_channel_in_group", "tiny_a", 12,
        [{"target": np.stack([seasonal(rng, 70, 2.0, 10.0), f32(np.full(70, 97.3)), near_constant(70, 5.0)])}],
        desc="one 3-series group: a varying channel, a constant channel and a near-constant channel")
    for n in (3, 95):
        add(f"deg_b_constant_97_3_len{n}", "tiny_b", 8, [{"target": f32(np.full(n, 97.3))}],
            desc=f"constant 97.3, {n} values (patch 4)")
    add("deg_b_single_observation", "tiny_b", 8, [{"target": f32([-3.5])}], desc="one value")
    for n in (513, 1025, 2048, 3000):
        add(f"deg_c_constant_97_3_len{n}", "tiny_c", 16, [{"target": f32(np.full(n, 97.3))}],
            desc=f"constant 97.3, {n} values (context 2048: the sums' cascade levels)")
    add("deg_c_near_constant_long", "tiny_c", 16, [{"target": near_constant(1500, 1234.5678)}],
        desc="1500 near-constant values")
    add("deg_c_long_random_walk", "tiny_c", 32, [{"target": random_walk(rng, 2048, 1.0, 100.0)}],
        desc="a full 2048-value context")


# ----------------------------------------------------------------------------------------------------------------
# running and writing


def jfloat(x) -> float | None:
    v = np.float32(x)
    return None if np.isnan(v) else float(v)


def jseries(a: np.ndarray) -> list:
    a = np.asarray(a)
    if a.dtype == object or a.dtype.kind in "US":
        return [None if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v) for v in a.tolist()]
    return [jfloat(v) for v in a.astype(np.float32).tolist()]


def task_to_json(task: dict) -> dict:
    t = np.asarray(task["target"], dtype=np.float32)
    t2 = t.reshape(1, -1) if t.ndim == 1 else t
    out = {"target": [jseries(row) for row in t2]}
    if task.get("past_covariates"):
        out["past_covariates"] = {k: jseries(v) for k, v in task["past_covariates"].items()}
    if task.get("future_covariates"):
        out["future_covariates"] = {k: jseries(v) for k, v in task["future_covariates"].items()}
    return out


def check_covariate_names(case: dict) -> None:
    """Listed order must equal the reference's row order (sorted names; past-only before known-future)."""
    t0 = case["tasks"][0]
    past = list(t0.get("past_covariates", {}).keys())
    fut = set(t0.get("future_covariates", {}).keys())
    assert past == sorted(past), (case["name"], past)
    row_order = [k for k in sorted(past) if k not in fut] + [k for k in sorted(past) if k in fut]
    assert row_order == past, (case["name"], past, row_order)


def capture_instance_norm(pipe: Chronos2Pipeline):
    """Records the reference's InstanceNorm statistics (loc, scale per row) of every context it normalises."""
    seen: list = []

    def hook(module, args, kwargs, out):
        if len(args) == 1 and kwargs.get("loc_scale") is None:  # the context, not future covariates
            loc, scale = out[1]
            seen.append((loc.detach().flatten().tolist(), scale.detach().flatten().tolist()))

    handle = pipe.model.instance_norm.register_forward_hook(hook, with_kwargs=True)
    return seen, handle


def run_case(pipe: Chronos2Pipeline, case: dict) -> tuple[list, list]:
    if case["api"] == "list_of_arrays":
        assert all(set(t) == {"target"} for t in case["tasks"])
        inputs = [np.asarray(t["target"], dtype=np.float32) for t in case["tasks"]]
    else:
        inputs = []
        for t in case["tasks"]:
            d = {"target": np.asarray(t["target"], dtype=np.float32)}
            for key in ("past_covariates", "future_covariates"):
                if t.get(key):
                    d[key] = {k: (v if v.dtype == object else v.astype(np.float32)) for k, v in t[key].items()}
            inputs.append(d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # long-horizon / context-length advisories
        quantiles, mean = pipe.predict_quantiles(
            inputs,
            prediction_length=case["prediction_length"],
            quantile_levels=case["quantile_levels"],
            batch_size=case["batch_size"],
        )
    assert len(quantiles) == len(mean) == len(case["tasks"])
    q_out, m_out = [], []
    for t, q, m in zip(case["tasks"], quantiles, mean):
        n_targets = 1 if np.ndim(t["target"]) == 1 else np.shape(t["target"])[0]
        q = q.detach().to(torch.float32).numpy()
        m = m.detach().to(torch.float32).numpy()
        assert q.shape == (n_targets, case["prediction_length"], len(case["quantile_levels"])), q.shape
        assert m.shape == (n_targets, case["prediction_length"]), m.shape
        assert np.isfinite(q).all() and np.isfinite(m).all(), f"non-finite output in {case['name']}"
        q_out.append([[[float(v) for v in step] for step in row] for row in q])
        m_out.append([[float(v) for v in row] for row in m])
    return q_out, m_out


def machine() -> str:
    """The processor and ATen's CPU kernels the outputs were computed with (they differ at rounding level between
    processors; the statistics that decide branches do not)."""
    name = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name}; ATen CPU {torch.backends.cpu.get_cpu_capability()}; MKL_CBWR={os.environ.get('MKL_CBWR')}"


def main() -> int:
    torch.set_num_threads(1)  # single-threaded CPU kernels: reproducible reductions
    torch.use_deterministic_algorithms(True)
    logging.getLogger("chronos").setLevel(logging.ERROR)
    hf_logging.disable_progress_bar()
    OUT.mkdir(parents=True, exist_ok=True)

    pipes = {}
    models_json = {}
    for name, spec in MODELS.items():
        d = make_checkpoint(name, spec)
        pipes[name] = load_pipeline(d, spec)
        cfg = json.loads((d / "config.json").read_text())
        models_json[name] = {
            "dir": name,
            "core": spec["core"],
            "chronos_config": cfg["chronos_config"],
            "native_prediction_length": spec["chronos_config"]["max_output_patches"]
            * spec["chronos_config"]["output_patch_size"],
            "n_parameters": sum(p.numel() for p in pipes[name].model.parameters()),
        }

    cases = build_cases()
    out_cases = []
    for case in cases:
        check_covariate_names(case)
        seen, handle = capture_instance_norm(pipes[case["model"]])
        try:
            q, m = run_case(pipes[case["model"]], case)
        finally:
            handle.remove()
        extra = {}
        if case["name"].startswith("deg_"):
            # The first forward pass's statistics, one per row of the call (targets in task order), for
            # tests/kernels' check that cutenative normalises these contexts with the reference's bits.
            assert len(seen) >= 1
            extra["instance_norm"] = {"loc": seen[0][0], "scale": seen[0][1]}
        out_cases.append({
            "name": case["name"],
            "model": case["model"],
            "prediction_length": case["prediction_length"],
            "quantile_levels": case["quantile_levels"],
            "batch_size": case["batch_size"],
            "api": case["api"],
            "description": case["description"],
            "tasks": [task_to_json(t) for t in case["tasks"]],
            "quantiles": q,
            "mean": m,
            **extra,
        })
    names = [c["name"] for c in out_cases]
    assert len(names) == len(set(names))

    doc = {
        "generator": GENERATOR,
        "reference": f"chronos-forecasting {pkg_version('chronos-forecasting')}",
        "torch": torch.__version__,
        "machine": machine(),
        "defaults": {
            "unrolled_quantiles": DEFAULT_UNROLLED,
            "context_length": "model chronos_config.context_length",
            "cross_learning": False,
            "dtype": "float32",
            "device": "cpu",
        },
        "models": models_json,
        "cases": out_cases,
    }
    cases_path = OUT / "cases.json"
    cases_path.write_text(json.dumps(doc, allow_nan=False, separators=(",", ":")) + "\n")

    # sanity: loads back, outputs are finite and actually depend on the input
    back = json.loads(cases_path.read_text())
    assert len(back["cases"]) == len(out_cases)
    medians = {c["name"]: np.asarray(c["mean"][0][0]) for c in back["cases"]}

    print(f"reference: {doc['reference']}, torch {doc['torch']}")
    print(f"{'case':40s} {'model':7s} {'pl':>4s} {'tasks':>5s} {'rows':>4s} {'nq':>3s}  median range")
    for c in back["cases"]:
        rows = sum(len(t["target"]) + len(t.get("past_covariates", {})) for t in c["tasks"])
        med = medians[c["name"]]
        print(f"{c['name']:40s} {c['model']:7s} {c['prediction_length']:4d} {len(c['tasks']):5d} {rows:4d} "
              f"{len(c['quantile_levels']):3d}  [{med.min():.4g}, {med.max():.4g}]")
    total = 0
    print("files:")
    for p in sorted(OUT.rglob("*")):
        if p.is_file():
            size = p.stat().st_size
            total += size
            sha = hashlib.sha256(p.read_bytes()).hexdigest()[:16]
            print(f"  {p.relative_to(REPO)}  {size} bytes  sha256:{sha}")
    print(f"total {total} bytes ({total / 1024:.1f} KiB) in {len(out_cases)} cases")
    assert total < 3 * 1024 * 1024, "fixtures exceed 3 MB"
    return 0


if __name__ == "__main__":
    sys.exit(main())

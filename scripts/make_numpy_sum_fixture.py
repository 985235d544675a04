#!/usr/bin/env python3
"""numpy's float32 column statistics as Kronos' reference computes them, for core/common/numpy_sum.h's test.

    ~/.cache/cutenative/venv-ref/bin/python scripts/make_numpy_sum_fixture.py

Writes tests/fixtures/kronos/numpy_sums.json: for columns defined by a formula both sides evaluate (a 64-bit LCG
and float64 arithmetic rounded once to float32, so no values are stored), the float32 bit patterns of np.mean and
np.std along axis 0 of the array KronosPredictor builds (df[cols].values.astype(np.float32): column-contiguous),
and of np.mean along axis 1 of a [1, S, 3, 6] array (the sample-path average over S = min(n, 64) paths). The C++ test regenerates each
column and compares bit for bit.
"""

import json
import os

import numpy as np
import pandas as pd

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "kronos", "numpy_sums.json")
MASK = (1 << 64) - 1
KINDS = ("walk", "constant", "near_constant", "alternating", "tiny", "huge")
CONSTANTS = (97.3, 0.1, 3.3333, 1e4, 1e-3, 0.0)


def column(kind: str, n: int, seed: int) -> np.ndarray:
    """The shared definition (tests/common/test_numpy_sum.cpp implements the same)."""
    state = seed
    out = np.empty(n, dtype=np.float32)
    c = np.float32(CONSTANTS[(seed // 6) % len(CONSTANTS)])
    for i in range(n):
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK
        u = (state >> 40) / 16777216.0  # 24 random bits in [0, 1)
        if kind == "walk":
            v = 97.3 + (u - 0.5)
        elif kind == "constant":
            v = float(c)
        elif kind == "near_constant":
            v = float(np.nextafter(c, np.float32(np.inf))) if i % 3 == 0 else float(c)
        elif kind == "alternating":
            v = 42.5 if i % 2 == 0 else -42.5
        elif kind == "tiny":
            v = 1e-30 * (u + 0.5)
        else:  # huge: squares stay finite in float32 up to ~1.8e19
            v = 1e18 * (u + 0.5)
        out[i] = np.float32(v)
    return out


def bits(x) -> int:
    return int(np.asarray(x, dtype=np.float32).view(np.uint32))


def main() -> None:
    lengths = list(range(1, 41)) + [63, 64, 65, 127, 128, 129, 130, 255, 256, 257, 511, 512, 513, 1000, 1024, 4097,
                                    8193, 20000]
    rows = []
    seed = 1
    for n in lengths:
        cols = {}
        for kind in KINDS:
            seed += 1
            cols[(kind, seed)] = column(kind, n, seed)
        # the reference's array: a DataFrame of float64 columns -> .values.astype(np.float32) (column-contiguous)
        df = pd.DataFrame({f"c{j}": v.astype(np.float64) for j, v in enumerate(cols.values())})
        x = df.values.astype(np.float32)
        assert x.flags.f_contiguous
        with np.errstate(over="ignore"):  # "huge" columns of 20,000 values: the squares' sum overflows, std = inf
            mean, std = np.mean(x, axis=0), np.std(x, axis=0)
        for j, (kind, s) in enumerate(cols):
            # up to 64 sample paths as auto_regressive_inference averages them: preds [B, S, L, 6] C-contiguous
            v = cols[(kind, s)][:64]
            paths = np.zeros((1, len(v), 3, 6), dtype=np.float32)
            paths[0, :, 1, 2] = v
            rows.append(dict(kind=kind, n=n, seed=s, mean=bits(mean[j]), std=bits(std[j]),
                             path_mean=bits(np.mean(paths, axis=1)[0, 1, 2])))
    with open(OUT, "w") as f:
        json.dump(dict(generator="scripts/make_numpy_sum_fixture.py", numpy=np.__version__, pandas=pd.__version__,
                       columns=rows), f, separators=(",", ":"))
    print("wrote", len(rows), "columns to", OUT)


if __name__ == "__main__":
    main()

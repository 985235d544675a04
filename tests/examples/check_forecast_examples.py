#!/usr/bin/env python3
"""ctest: the C example (cn_forecast_csv) and the Python ctypes example print the same numbers, and
those numbers are the reference's (tests/fixtures/chronos2/cases.json) for a univariate case.

    check_forecast_examples.py <cn_forecast_csv> <libcutenative.so> <fixtures dir> [case name]

Standard library only. Tolerance as in the C++ parity test: 1e-4 relative + 1e-4 x the series' std
(the printed values carry 6 significant digits, so 1e-5 relative is added for the rounding)."""
import json
import math
import os
import subprocess
import sys
import tempfile

exe, lib, fixtures = sys.argv[1:4]
name = sys.argv[4] if len(sys.argv) > 4 else "a_univariate_long"
here = os.path.dirname(os.path.abspath(__file__))
example_py = os.path.join(here, "..", "..", "examples", "python", "forecast_ctypes.py")

cases = json.load(open(os.path.join(fixtures, "chronos2", "cases.json")))["cases"]
case = next(c for c in cases if c["name"] == name)
assert len(case["tasks"]) == 1 and len(case["tasks"][0]["target"]) == 1, "pick a univariate case"
series = case["tasks"][0]["target"][0]
levels = case["quantile_levels"]
H = case["prediction_length"]
ref = case["quantiles"][0][0]  # [H][nq]
model_dir = os.path.join(fixtures, "chronos2", case["model"])

with tempfile.TemporaryDirectory() as tmp:
    csv_path = os.path.join(tmp, "series.csv")
    with open(csv_path, "w") as f:
        f.write("t,value\n")
        for i, v in enumerate(series):
            f.write(f"t{i},{'' if v is None else repr(v)}\n")
    # The README runs the examples on the committed copy of this CSV: it must be the case's series.
    committed = os.path.join(fixtures, "chronos2", name + ".csv")
    if os.path.exists(committed) and open(committed).read() != open(csv_path).read():
        sys.exit(f"{committed} is not the series of case {name} (regenerate it as this script writes it)")
    lv = ",".join(repr(q) for q in levels)
    out_c = subprocess.run([exe, model_dir, csv_path, str(H), lv], capture_output=True, text=True)
    out_py = subprocess.run([sys.executable, example_py, "--lib", lib, model_dir, csv_path, str(H), lv],
                            capture_output=True, text=True)
for label, r in (("C", out_c), ("Python", out_py)):
    if r.returncode != 0:
        sys.exit(f"{label} example failed ({r.returncode}): {r.stderr}")
if out_c.stdout != out_py.stdout:
    sys.exit("the C and Python examples disagree:\n" + out_c.stdout + "\n---\n" + out_py.stdout)

obs = [v for v in series if v is not None]
mean = sum(obs) / len(obs)
std = math.sqrt(sum((v - mean) ** 2 for v in obs) / len(obs))
lines = out_c.stdout.strip().splitlines()[1:]
assert len(lines) == H, f"expected {H} rows, got {len(lines)}"
worst = 0.0
for h, line in enumerate(lines):
    vals = [float(x) for x in line.split()[2:]]
    assert len(vals) == len(levels)
    for q, (o, r) in enumerate(zip(vals, ref[h])):
        tol = 1e-4 * abs(r) + 1e-4 * std + 1e-5 * abs(r)
        err = abs(o - r)
        worst = max(worst, err / tol)
        if err > tol:
            sys.exit(f"step {h + 1} level {levels[q]}: example prints {o}, reference {r}")
print(out_c.stdout, end="")
print(f"{name}: C and Python examples agree with each other and with the reference (worst |err|/tol {worst:.3g})")
print("1 passed, 0 failed")

"""The markdown report: deltas, formatting, the tables per workload."""

import subprocess

import numpy as np

import cutenative_ctypes as cn

from .config import CN_REF_ROW, PEAK_BW, REF_ROW, ROWS
from .workloads import floors


def short_err(e, limit=160):
    s = "%s: %s" % (type(e).__name__, e) if not isinstance(e, cn.CnError) else str(e)
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

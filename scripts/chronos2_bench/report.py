"""The markdown report: deltas, formatting, the tables per workload."""

import platform
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


def cpu_name():
    """The processor's model name (/proc/cpuinfo on Linux; platform.processor() elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


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
             "the request (one cn_forecast_request_add_series_batch call), cn_forecast_get_shape, the output allocation, cn_forecast (results on the host) and "
             "freeing the request. The reference's cover predict_quantiles from CPU inputs to CPU outputs. "
             "Speedup = reference fp32 / row. Deltas are over every (series, quantile, step) of the 21 model "
             "quantiles; Rel MAE %% = 100 * mean|Δ| / mean|reference fp32|. Memory = "
             "torch.cuda.max_memory_allocated() during the row's runs of that workload, weights included "
             "(LibTorch's caching allocator, shared by both). The batch sweep (s) has its own run counts, stated "
             "in its table."
             % (ctx["n_runs"], ctx["warmup"], ctx["n_runs_seq"], ctx["warmup"]))
    L.append("")
    for note in ctx["notes"]:
        L.append("- " + note)
    L.append("")
    labels = {k: lab for (k, lab, *_rest) in ROWS}
    for wl in workloads:
        if wl.sweep_b is not None:
            continue  # one section for the whole sweep, below
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
    L += render_sweep(ctx, [wl for wl in workloads if wl.sweep_b is not None], results, row_keys)
    return "\n".join(L) + "\n"


def tokens_per_series(cfg, context, horizon):
    """Encoder tokens of one univariate series: context patches (left-padded to whole patches), the REG token
    if the config has one, output patches."""
    cc = cfg["chronos_config"]
    nc = -(-context // cc["input_patch_size"])
    nh = -(-horizon // cc["output_patch_size"])
    return nc + (1 if cc.get("use_reg_token", True) else 0) + nh, nc, nh


def render_sweep(ctx, sweep, results, row_keys):
    """The batch sweep (s): one table row per batch size, one column per strategy; then the ratios, accuracy
    and (CUDA) memory tables. Returns lines."""
    if not sweep:
        return []
    labels = {k: lab for (k, lab, *_rest) in ROWS}
    dtypes = {k: dt for (k, _lab, _kind, dt, _mode) in ROWS}
    hdr = dict(ctx["header"])
    cuda = ctx["device"] == "cuda"
    gpu = ctx["gpu"]
    wl0 = sweep[0]
    T, nc, nh = tokens_per_series(ctx["cfg"], wl0.context, wl0.horizon)
    L = ["## (s) batch sweep: B univariate series, context %d, H=%d, one call per B (%s, %s UTC)"
         % (wl0.context, wl0.horizon, hdr.get("Device", "?"), hdr.get("Date (UTC)", "?")), ""]
    L.append("Median wall clock (ms) of the timed runs after the warm-up calls, both stated per B; one call of B "
             "series (the reference: predict_quantiles with batch_size B, one batch); inputs: the first B series of "
             "one seeded pool, so each B's series are a prefix of the next B's. %d tokens per series (%d context "
             "patches, REG, %d output patch%s). GFLOP = the floor's FLOPs of one call: 2 x weights of the linear "
             "layers x the tokens they see, plus attention (workloads.floors())."
             % (T, nc, nh, "" if nh == 1 else "es"))
    if cuda:
        L.append("Floor = max(bytes / %.2f TB/s, FLOPs / peak) with bytes = the weights once (2 B bf16, 4 B f32) + "
                 "fp32 inputs and outputs, peak 990 TFLOP/s bf16 and 67 TFLOP/s f32 (%s%s)."
                 % (PEAK_BW[gpu] / 1e12, gpu, "" if ctx["gpu_detected"] else ", assumed"))
    else:
        L.append("No floor on the CPU (the floors' peak figures are the GPU's); GFLOP / latency gives the achieved "
                 "rate.")
    if hdr.get("Host load average (1, 5, 15 min) at the start"):
        L.append("Host load average (1, 5, 15 min) at the start of the run: %s (%s)."
                 % (hdr["Host load average (1, 5, 15 min) at the start"], hdr.get("Host CPU", "?")))
    if ctx.get("sweep_max_call_s"):
        L.append("A row skips the B whose call would take more than %.3g s, predicted linearly in B from the "
                 "fastest run at its previous B (--sweep-max-call-s)." % ctx["sweep_max_call_s"])
    L.append("")
    keys = [k for k in row_keys if any((k, wl.key) in results for wl in sweep)] or row_keys
    fl = {wl.key: floors(wl, ctx["cfg"], ctx["n_params"], gpu) for wl in sweep}
    notes = []

    def cell(rk, wl, fmt):
        r = results.get((rk, wl.key))
        if r is None:
            return "(not run)"
        if r.get("skipped"):
            notes.append("%s, B=%d: %s" % (labels[rk], wl.sweep_b, r["skipped"]))
            return "skipped"
        if r.get("error"):
            notes.append("%s, B=%d: %s" % (labels[rk], wl.sweep_b, r["error"]))
            return "n/a" if r["error"].startswith("n/a") else "error"
        return fmt(r)

    def ms(rk, wl):
        r = results.get((rk, wl.key)) or {}
        return r.get("ms")

    # latency
    cols = ["B", "runs (warm-up)", "GFLOP"] + [labels[k] for k in keys]
    if cuda:
        cols += ["floor bf16", "floor f32"]
    L.append("| " + " | ".join(cols) + " |")
    L.append("|" + "|".join("---:" for _ in cols) + "|")
    for wl in sweep:
        f = fl[wl.key]
        row = ["%d" % wl.sweep_b, "%d (%d)" % (wl.n_runs, wl.warmup), "%.3g" % (f["bf16"]["flops"] / 1e9)]
        row += [cell(k, wl, lambda r: "%.3f" % r["ms"]) for k in keys]
        if cuda:
            row += ["%.3f" % (f["bf16"]["t"] * 1e3), "%.3f" % (f["f32"]["t"] * 1e3)]
        L.append("| " + " | ".join(row) + " |")
    L.append("")

    # speedups: reference of the row's dtype / row
    cn_keys = [k for k in keys if k.startswith("cn-")]
    ref_of = {dt: "ref-" + dt for dt in ("f32", "bf16")}
    sp_keys = [k for k in cn_keys if ref_of[dtypes[k]] in keys]
    if sp_keys:
        L.append("Speedup over the reference of the row's dtype (reference ms / row ms; > 1: cutenative faster):")
        L.append("")
        L.append("| B | " + " | ".join("%s vs %s" % (labels[k], labels[ref_of[dtypes[k]]]) for k in sp_keys) + " |")
        L.append("|---:|" + "|".join("---:" for _ in sp_keys) + "|")
        for wl in sweep:
            row = ["%d" % wl.sweep_b]
            for k in sp_keys:
                a, b = ms(ref_of[dtypes[k]], wl), ms(k, wl)
                row.append("%.2fx" % (a / b) if a and b else "–")
            L.append("| " + " | ".join(row) + " |")
        L.append("")
    if cuda:
        L.append("Times the floor of the row's dtype (row ms / floor ms; 1 = at the floor):")
        L.append("")
        L.append("| B | " + " | ".join(labels[k] for k in keys) + " |")
        L.append("|---:|" + "|".join("---:" for _ in keys) + "|")
        for wl in sweep:
            row = ["%d" % wl.sweep_b]
            for k in keys:
                b = ms(k, wl)
                row.append("%.1fx" % (b / (fl[wl.key][dtypes[k]]["t"] * 1e3)) if b else "–")
            L.append("| " + " | ".join(row) + " |")
        L.append("")

    # accuracy against the reference fp32 of the same B
    acc_keys = [k for k in keys if k != REF_ROW]
    if REF_ROW in keys and acc_keys:
        L.append("Rel MAE % against reference fp32 at the same B (100 * mean|Δ| / mean|reference fp32| over every "
                 "series, quantile and step):")
        L.append("")
        L.append("| B | " + " | ".join(labels[k] for k in acc_keys) + " |")
        L.append("|---:|" + "|".join("---:" for _ in acc_keys) + "|")
        for wl in sweep:
            ref = (results.get((REF_ROW, wl.key)) or {}).get("out")
            row = ["%d" % wl.sweep_b]
            for k in acc_keys:
                r = results.get((k, wl.key)) or {}
                dl = deltas(r.get("out"), ref)
                row.append("–" if dl is None else dl["error"] if "error" in dl else
                           fmt_g(dl["rel"]) + (" (%d non-finite)" % dl["nonfinite"] if dl["nonfinite"] else ""))
            L.append("| " + " | ".join(row) + " |")
        L.append("")
    if cuda:
        L.append("Peak memory (MB, torch.cuda.max_memory_allocated() during the row's runs at that B, weights "
                 "included):")
        L.append("")
        L.append("| B | " + " | ".join(labels[k] for k in keys) + " |")
        L.append("|---:|" + "|".join("---:" for _ in keys) + "|")
        for wl in sweep:
            row = ["%d" % wl.sweep_b]
            for k in keys:
                r = results.get((k, wl.key)) or {}
                row.append("%.0f" % r["mem"] if r.get("mem") is not None else "–")
            L.append("| " + " | ".join(row) + " |")
        L.append("")
    if notes:
        L += ["- " + n for n in dict.fromkeys(notes)] + [""]
    return L

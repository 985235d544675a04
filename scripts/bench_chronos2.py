#!/usr/bin/env python3
"""Chronos-2 benchmark: the reference Python pipeline against cutenative's C ABI (through ctypes).

    python3 scripts/bench_chronos2.py --lib build-gpu/libcutenative.so --out $OUT/bench.md [--quick]

Debug mode, no GPU (a tiny config, shrunken workloads, the CPU build of the library):
    ~/.cache/cutenative/venv-ref/bin/python scripts/bench_chronos2.py --device cpu --tiny \
        --lib build/libcutenative.so --out /tmp/b.md

Batch sweep (s) alone, on the GPU and on a CPU with 2 threads (its default batches and rows per device):
    python3 scripts/bench_chronos2.py --lib build-gpu/libcutenative.so --workloads s --out $OUT/sweep.md
    python3 scripts/bench_chronos2.py --lib build/libcutenative.so --device cpu --threads 2 --workloads s \
        --out /tmp/sweep-cpu.md

What it does
  1. Builds a random-weight checkpoint of the amazon/chronos-2 *base* configuration (d_model 768, 12 layers,
     12 heads, d_ff 3072, patch 16, 21 quantiles; 119.48M parameters) in the Hugging Face layout with the
     reference classes (chronos.chronos2.Chronos2CoreConfig / Chronos2Model / Chronos2Pipeline.save_pretrained),
     seeded; every parameter is re-drawn (matrices std 1/sqrt(fan_in), biases small, norm weights ~1) so the
     outputs depend on the inputs. Timings do not depend on the weight values.
  2. Workloads (seeded random walk + seasonal inputs, fp32):
       (a) B=1, context 512, H=16        (b) B=1, context 2048, H=64        (c) B=32, context 512, H=16
       (d) rolling: 7 series of length 448+512; 448 windows of context 512 ending at successive points, H=16,
           run as 448 sequential calls of 7 series ("rolling seq") and as one call of 448*7 series
           ("rolling batched"). --quick: 32 windows.
       (s) batch sweep (only with --workloads s): B univariate series at context 512, H=16, each B one call;
           B = 1, 4, 16, 64, 256, 1024 on CUDA, 1 and 8 on the CPU (--sweep-batches); the series of B are the
           first B of one seeded pool. Fewer timed runs for big B: 3 warm-up + 20 runs up to B=16, 3 + 10 up to
           64, 2 + 5 up to 256, 2 + 3 above (--quick: 5, 5, 3, 3 runs; --tiny: 1 + 3). On CUDA a row skips the
           B whose call would take more than --sweep-max-call-s (3 s), predicted linearly in B from the fastest
           run at its previous B (the eager rows at big B). One table for the sweep: latency per B and
           strategy with the floors, speedups over the reference of the same dtype, times the floor, Rel MAE %
           against reference fp32, peak memory.
  3. Rows: reference fp32, reference bf16 (Chronos2Pipeline.from_pretrained(dir, device_map=..., dtype=...);
     predict_quantiles with all 21 model levels; batch_size = the number of series, i.e. one batch, except for
     the rolling workloads, which use the pipeline's default batch_size 256), cutenative eager f32 / bf16,
     cutenative graph f32 / bf16 (only where cn_model_set_mode(GRAPH) returns OK; else "n/a (STATUS)"),
     cutenative fused f32 / bf16 (cutenative's kernels, captured in CUDA graphs on CUDA).
     A cutenative call is timed from building the request (one cn_forecast_request_add_series_batch call for
     its equal-length series, ABI 0.4; before it one add_series per series) to the results being in the host buffer.
  4. Timing: 3 warm-up calls, then the median of N timed runs (N = 20; 5 for rolling seq; --quick: 5 and 3),
     wall clock (time.perf_counter) with torch.cuda.synchronize() on both sides.
  5. Accuracy: Mean|Δ|, Max|Δ| and Rel MAE % = 100 * mean|Δ| / mean|ref| against the reference fp32 outputs of
     the same workload, per (series, quantile, step); cutenative rows also against cutenative eager f32.
     Memory: torch.cuda.max_memory_allocated() over the row's runs of that workload (peak reset after the model
     is loaded, so the weights count). cutenative allocates through LibTorch's caching allocator, the same one
     as the Python torch in this process, so the figure covers both kinds of rows.
  6. Floors per workload (H100 3.35 TB/s, H200 4.8 TB/s; 990 TFLOP/s bf16 dense, 67 TFLOP/s fp32): see
     `floors()`.
  7. Markdown tables per workload, with a header (device, torch, CUDA, driver, date); printed and written to
     --out (rewritten after every row, so a run cut short still leaves what it measured).
  8. CPU runs (--device cpu): f32 rows make sense (the graph modes answer n/a); --threads N sets the intra-op
     threads of this process (torch.set_num_threads, which the reference and the library share, and
     cn_model_params.n_threads); the header names the processor (/proc/cpuinfo).

The code: this file has the command line and main(); scripts/chronos2_bench/ the rest (config, checkpoint,
workloads and floors, runners, report); python/cutenative_ctypes.py the C ABI.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
import traceback

import numpy as np
import torch  # before the library: libcutenative then binds to this process's LibTorch (same allocator)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cutenative_ctypes as cn  # noqa: E402  (the C ABI: structs, enums, prototypes)
from chronos2_bench.checkpoint import build_checkpoint, safetensors_numel  # noqa: E402
from chronos2_bench.config import Q21, ROWS, SWEEP_BATCHES, SWEEP_MAX_CALL_S, SWEEP_ROWS, log  # noqa: E402
from chronos2_bench.report import cpu_name, driver_version, render, short_err  # noqa: E402
from chronos2_bench.runners import CnRunner, RefRunner, profile_row, time_workload  # noqa: E402
from chronos2_bench.workloads import make_workloads  # noqa: E402


def load_average():
    try:
        return "%.2f, %.2f, %.2f" % os.getloadavg()
    except OSError:
        return "n/a"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--lib", required=True, help="path to libcutenative.so")
    ap.add_argument("--out", required=True, help="markdown report to write")
    ap.add_argument("--quick", action="store_true", help="32 rolling windows, fewer repetitions")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--tiny", action="store_true", help="debug: tiny config and workloads")
    ap.add_argument("--rows", default=None,
                    help="comma-separated subset of: " + ", ".join(k for k, *_ in ROWS) + " (default: all; with "
                    "--workloads s alone: %s on CUDA, %s on the CPU)"
                    % (",".join(SWEEP_ROWS["cuda"]), ",".join(SWEEP_ROWS["cpu"])))
    ap.add_argument("--workloads", default="a,b,c,d", help="comma-separated subset of a,b,c,d,s (s: the batch sweep)")
    ap.add_argument("--sweep-batches", default=None,
                    help="batch sizes of the sweep (s), comma-separated (default: %s on CUDA, %s on the CPU)"
                    % (",".join(map(str, SWEEP_BATCHES["cuda"])), ",".join(map(str, SWEEP_BATCHES["cpu"]))))
    ap.add_argument("--sweep-max-call-s", type=float, default=None,
                    help="sweep: a row skips a B whose call would take longer (seconds, predicted linearly in B from "
                    "the fastest run at the row's previous B; 0: never skip); default %g on CUDA, 0 on the CPU"
                    % SWEEP_MAX_CALL_S)
    ap.add_argument("--threads", type=int, default=0,
                    help="intra-op threads (torch.set_num_threads and cn_model_params.n_threads); 0: leave as is")
    ap.add_argument("--dump-outputs", default="",
                    help="directory: each row's outputs of each workload saved as <row>_<workload>.npy (the first "
                         "timed run), to compare two libraries bit for bit")
    ap.add_argument("--checkpoint", help="directory for the checkpoint (kept; reused if it has config.json)")
    ap.add_argument("--profile", default="", help="row key to profile on the first workload (torch.profiler, CUDA "
                    "kernels by GPU time) after the timings; appended to the report")
    args = ap.parse_args(argv)

    which = set(w for w in args.workloads.split(",") if w)
    bad = sorted(which - set("abcds"))
    if bad:
        ap.error("unknown workloads: %s" % ", ".join(bad))
    device = args.device
    if args.rows is None:
        args.rows = ",".join(SWEEP_ROWS[device] if which == {"s"} else [k for k, *_ in ROWS])
    row_keys = [k for k in args.rows.split(",") if k]
    bad = [k for k in row_keys if k not in {r[0] for r in ROWS}]
    if bad:
        ap.error("unknown rows: %s" % ", ".join(bad))
    row_keys = [r[0] for r in ROWS if r[0] in row_keys]  # table order
    try:
        sweep_batches = sorted(set(int(b) for b in args.sweep_batches.split(",") if b.strip())) \
            if args.sweep_batches is not None else SWEEP_BATCHES[device]
    except ValueError:
        ap.error("--sweep-batches: comma-separated integers, got %r" % args.sweep_batches)
    if "s" in which and (not sweep_batches or sweep_batches[0] < 1):
        ap.error("--sweep-batches: batch sizes >= 1, got %r" % args.sweep_batches)
    if args.threads < 0:
        ap.error("--threads: >= 0")
    if device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda but torch.cuda.is_available() is False (use --device cpu)")
    if args.sweep_max_call_s is None:
        args.sweep_max_call_s = SWEEP_MAX_CALL_S if device == "cuda" else 0.0
    if args.threads:
        torch.set_num_threads(args.threads)

    # quiet the reference's loaders
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001
        pass
    import transformers
    try:
        import chronos
        chronos_version = getattr(chronos, "__version__", "?")
    except ImportError as e:
        sys.exit("cannot import chronos (chronos-forecasting); put it on PYTHONPATH: %s" % e)

    if args.tiny:
        warmup, n_runs, n_runs_seq = 1, 3, 2
    elif args.quick:
        warmup, n_runs, n_runs_seq = 3, 5, 3
    else:
        warmup, n_runs, n_runs_seq = 3, 20, 5

    # ---- header ----
    if device == "cuda":
        dev_name = torch.cuda.get_device_name(0)
        gpu = "H200" if "H200" in dev_name else "H100"
        gpu_detected = "H200" in dev_name or "H100" in dev_name
        drv = driver_version()
    else:
        dev_name = "CPU: %s, %d threads (%d logical CPUs)" % (cpu_name(), torch.get_num_threads(), os.cpu_count() or 0)
        gpu, gpu_detected, drv = "H100", False, "n/a"
    lib = cn.load_library(args.lib)
    header = [
        ("Date (UTC)", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")),
        ("Device", dev_name),
        ("Host CPU", "%s, %d logical CPUs, torch intra-op threads %d" % (cpu_name(), os.cpu_count() or 0,
                                                                        torch.get_num_threads())),
        ("Driver", drv),
        ("torch", torch.__version__),
        ("CUDA (torch)", torch.version.cuda or "none"),
        ("cuDNN", str(torch.backends.cudnn.version()) if device == "cuda" else "n/a"),
        ("TF32 matmul (torch, reference)", str(torch.backends.cuda.matmul.allow_tf32)),
        ("transformers / chronos-forecasting", "%s / %s" % (transformers.__version__, chronos_version)),
        ("Python", platform.python_version()),
        ("cutenative", "%s (%s)" % (lib.cn_version().decode(), lib.cn_build_info().decode())),
        ("Library", os.path.abspath(args.lib)),
        ("Mode", ("tiny debug" if args.tiny else "chronos-2 base") + (", quick" if args.quick else "")),
        ("Host load average (1, 5, 15 min) at the start", load_average()),
    ]

    # ---- checkpoint ----
    tmp = None
    if args.checkpoint and os.path.isfile(os.path.join(args.checkpoint, "config.json")):
        model_dir = args.checkpoint
        cfg = json.loads(open(os.path.join(model_dir, "config.json")).read())
        n_params = safetensors_numel(model_dir)
        log("reusing checkpoint %s" % model_dir)
    else:
        model_dir = args.checkpoint or tempfile.mkdtemp(prefix="cn_bench_chronos2_")
        tmp = None if args.checkpoint else model_dir
        os.makedirs(model_dir, exist_ok=True)
        t0 = time.perf_counter()
        n_params, cfg = build_checkpoint(model_dir, args.tiny)
        log("checkpoint: %s (%.1f s)" % (model_dir, time.perf_counter() - t0))
    print("parameters: %d (%.2fM)" % (n_params, n_params / 1e6), flush=True)
    header.insert(0, ("Model", "random-weight Chronos-2 %s: d_model %d, %d layers, %d heads, d_ff %d, patch %d, "
                              "%d quantiles; %d parameters (%.2fM)"
                      % ("tiny" if args.tiny else "base", cfg["d_model"], cfg["num_layers"], cfg["num_heads"],
                         cfg["d_ff"], cfg["chronos_config"]["input_patch_size"],
                         len(cfg["chronos_config"]["quantiles"]), n_params, n_params / 1e6)))

    workloads = make_workloads(args.tiny, args.quick, which, sweep_batches if "s" in which else ())
    ctx = dict(header=header, notes=[], cfg=cfg, n_params=n_params, gpu=gpu, gpu_detected=gpu_detected,
               n_runs=n_runs, n_runs_seq=n_runs_seq, warmup=warmup, device=device,
               sweep_max_call_s=args.sweep_max_call_s)
    results = {}

    def write_report():
        text = render(ctx, workloads, results, row_keys)
        d = os.path.dirname(os.path.abspath(args.out))
        os.makedirs(d, exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        return text

    def free_device():
        gc.collect()
        if device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()

    labels = {k: lab for (k, lab, *_r) in ROWS}
    try:
        for (rk, label, kind, dt, mode) in ROWS:
            if rk not in row_keys:
                continue
            log("== %s" % label)
            free_device()
            runner = None
            try:
                t0 = time.perf_counter()
                if kind == "ref":
                    runner = RefRunner(model_dir, device, dt)
                    ctx["notes"].append("%s: loaded with from_pretrained(dir, device_map=%r, %s=torch.%s) in %.1f s."
                                        % (label, device, runner.kwarg,
                                           "bfloat16" if dt == "bf16" else "float32", time.perf_counter() - t0))
                else:
                    runner = CnRunner(lib, model_dir, device, dt, mode, args.threads)
                    inf = runner.info
                    ctx["notes"].append(
                        "%s: cn_model_info weight_bytes %d (%.1f MB), n_parameters %d, graph_pool_bytes %d, "
                        "workspace_bytes %d; loaded in %.1f s%s."
                        % (label, inf.weight_bytes, inf.weight_bytes / 2**20, inf.n_parameters,
                           inf.graph_pool_bytes, inf.workspace_bytes, time.perf_counter() - t0,
                           "" if [round(q, 4) for q in runner.levels] == [round(q, 4) for q in Q21]
                           else "; its quantile levels differ from the reference's: %s" % runner.levels))
            except Exception as e:  # noqa: BLE001
                if isinstance(e, cn.CnError) and mode != cn.CN_MODE_EAGER:
                    msg = "n/a (%s)" % e.status_name
                    ctx["notes"].append("%s: cn_model_set_mode(%d) -> %s" % (label, mode, short_err(e)))
                else:
                    msg = "error: " + short_err(e)
                    log(traceback.format_exc())
                log("%s: %s" % (label, msg))
                for wl in workloads:
                    results[(rk, wl.key)] = dict(error=msg)
                runner = None
                free_device()
                write_report()
                continue
            last_sweep = None  # (B, fastest run in seconds) of this row's previous sweep workload
            for wl in workloads:
                n = wl.n_runs or (n_runs_seq if wl.sequential else n_runs)
                w = warmup if wl.warmup is None else wl.warmup
                if wl.sweep_b is not None and last_sweep and args.sweep_max_call_s > 0:
                    pred = last_sweep[1] * wl.sweep_b / last_sweep[0]
                    if pred > args.sweep_max_call_s:
                        results[(rk, wl.key)] = dict(skipped="skipped: %.3g s per call predicted from %.3g s (fastest "
                                                     "run) at B=%d "
                                                     "(--sweep-max-call-s %g)" % (pred, last_sweep[1], last_sweep[0],
                                                                                  args.sweep_max_call_s))
                        log("  %-60s skipped (%.3g s per call predicted)" % (wl.title[:60], pred))
                        continue
                try:
                    if device == "cuda":
                        torch.cuda.synchronize()
                        torch.cuda.reset_peak_memory_stats()
                    med, times, out = time_workload(runner, wl, device, w, n)
                    if wl.sweep_b is not None:
                        last_sweep = (wl.sweep_b, min(times))
                    mem = torch.cuda.max_memory_allocated() / 2**20 if device == "cuda" else None
                    results[(rk, wl.key)] = dict(ms=med * 1e3, times=times, out=out, mem=mem)
                    if args.dump_outputs:
                        os.makedirs(args.dump_outputs, exist_ok=True)
                        np.save(os.path.join(args.dump_outputs, "%s_%s.npy" % (rk, wl.key)), np.asarray(out))
                    log("  %-60s %10.3f ms (min %.3f, max %.3f, n=%d)%s"
                        % (wl.title[:60], med * 1e3, min(times) * 1e3, max(times) * 1e3, n,
                           "" if mem is None else ", peak %.0f MB" % mem))
                except Exception as e:  # noqa: BLE001
                    results[(rk, wl.key)] = dict(error="error: " + short_err(e))
                    log("  %s: %s" % (wl.title, short_err(e, 400)))
                    if not isinstance(e, (cn.CnError, torch.cuda.OutOfMemoryError)):
                        log(traceback.format_exc())
                    free_device()
            try:
                runner.close()
            except Exception as e:  # noqa: BLE001
                log("closing %s: %s" % (label, e))
            del runner
            free_device()
            write_report()
        if args.profile:
            ctx["profile"] = profile_row(lib, model_dir, device, args.profile, workloads[0], n_threads=args.threads)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    ctx["notes"].append("Host load average (1, 5, 15 min) at the end: %s." % load_average())
    text = write_report()
    if ctx.get("profile"):
        text += ctx["profile"]
        with open(args.out, "a", encoding="utf-8") as f:
            f.write(ctx["profile"])
    print(text, end="", flush=True)
    log("wrote %s" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

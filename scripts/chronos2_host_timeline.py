#!/usr/bin/env python3
"""Where a small Chronos-2 call's wall time goes on the host, without a profiler (issue #19; device stage `host` of
scripts/device_chronos2_perf.sh). Under torch.profiler cudaGraphLaunch takes 20-60x its time, so the profiler's host
timeline cannot say how long the device waits for the host; this does, with scripts/chronos2_bench/api_timer.c
preloaded:

    gcc -O2 -shared -fPIC -o /tmp/cn_api_timer.so scripts/chronos2_bench/api_timer.c -ldl
    CN_API_TIMER_OUT=/tmp/ev.txt LD_PRELOAD=/tmp/cn_api_timer.so \\
        scripts/chronos2_host_timeline.py --lib build-gpu/libcutenative.so --checkpoint DIR --batch 16 \\
        --events /tmp/ev.txt --out /tmp/b16.json
    scripts/chronos2_host_timeline.py --table /tmp/b1.json /tmp/b16.json ...   (after the process has exited)

One model (fused mode, bf16 on CUDA unless --device/--dtype say otherwise), --calls calls of B random series of 512
values, horizon 16, one after another with no synchronisation between them (the library waits for its own
results), each timed in steps on the clock the preloaded timer uses (CLOCK_MONOTONIC): the request's creation, its
series (one cn_forecast_request_add_series_batch), horizon and shape, the output array, cn_forecast, the request's
release. The timer's events (a graph replay, the host-to-device copies, the waits) place the device's part inside
cn_forecast. The first --skip calls (warm-up: graph capture, rows_gemm's choices) are left out; the table gives medians
over the rest. Needs NumPy and python/cutenative_ctypes.py; no torch.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

STEPS = ["create", "add series", "horizon + shape", "output array", "cn_forecast", "free"]


def run(args):
    import numpy as np
    import cutenative_ctypes as cn

    lib = cn.load_library(args.lib)
    err = ctypes.c_void_p()
    model = ctypes.c_void_p()

    def check(st):
        cn.check(lib, st, err)

    check(lib.cn_error_create(ctypes.byref(err)))
    p = cn.ModelParams()
    lib.cn_model_params_init(ctypes.byref(p))
    p.device_type = cn.CN_DEVICE_CUDA if args.device == "cuda" else cn.CN_DEVICE_CPU
    p.dtype = cn.CN_DTYPE_BF16 if args.dtype == "bf16" else cn.CN_DTYPE_F32
    p.mode = cn.CN_MODE_FUSED
    check(lib.cn_model_create(os.fsencode(args.checkpoint), ctypes.byref(p), ctypes.byref(model), err))
    rng = np.random.default_rng(0)
    x = np.ascontiguousarray((rng.standard_normal((args.batch, 512)) * 10 + 100).astype(np.float32))
    values = x.ctypes.data_as(cn.FLOAT_P)
    now = lambda: time.monotonic_ns() / 1e3  # noqa: E731 (the timer's clock, microseconds)
    marks = []
    for _ in range(args.calls):
        t = [now()]
        req = ctypes.c_void_p()
        check(lib.cn_forecast_request_create(ctypes.byref(req), err))
        t.append(now())
        check(lib.cn_forecast_request_add_series_batch(req, values, args.batch, 512, None, None, err))
        t.append(now())
        check(lib.cn_forecast_request_set_horizon(req, 16, err))
        shape = cn.ForecastShape()
        lib.cn_forecast_shape_init(ctypes.byref(shape))
        check(lib.cn_forecast_get_shape(model, req, ctypes.byref(shape), err))
        t.append(now())
        out = np.empty(int(shape.n_values), dtype=np.float32)
        t.append(now())
        check(lib.cn_forecast(model, req, None, out.ctypes.data_as(cn.FLOAT_P), int(shape.n_values), None, 0, err))
        t.append(now())
        lib.cn_forecast_request_free(req)
        t.append(now())
        marks.append(t)
    lib.cn_model_free(model)
    lib.cn_error_free(err)
    with open(args.out, "w") as f:
        json.dump({"batch": args.batch, "device": args.device, "dtype": args.dtype, "skip": args.skip,
                   "events": args.events, "marks": marks}, f)


def summarise(path):
    """One row of the table from a run's marks and the timer's events (read after the run's process exited)."""
    d = json.load(open(path))
    marks = d["marks"][d["skip"]:]
    events = []
    ev_path = d["events"]
    if ev_path and not os.path.exists(ev_path):
        # Runs copied from another machine: the timer's file beside the run's JSON.
        ev_path = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(ev_path))
    if d["events"] and not os.path.exists(ev_path):
        print("%s: no timer file (%s); the event columns stay empty" % (path, d["events"]), file=sys.stderr)
    elif ev_path:
        for line in open(ev_path):
            k, a, b = line.split()
            events.append((k, float(a), float(b)))
    med = statistics.median
    row = {"B": d["batch"], "calls": len(marks), "calls with events": 0}
    row["cycle"] = med([marks[i + 1][0] - marks[i][0] for i in range(len(marks) - 1)])
    for i, s in enumerate(STEPS):
        row[s] = med([m[i + 1] - m[i] for m in marks])
    inside = {"first H2D": [], "graph launched": [], "graph launch": [], "wait begins": [], "wait ends": [],
              "after the wait": [], "graphs": []}
    for m in marks:
        s0, s1 = m[4], m[5]
        ev = [e for e in events if e[1] >= s0 and e[2] <= s1]
        h = [e for e in ev if e[0] == "H"]
        g = [e for e in ev if e[0] == "G"]
        w = [e for e in ev if e[0] in "ES"]
        if not (h and g and w):
            continue
        inside["first H2D"].append(h[0][1] - s0)
        inside["graph launched"].append(g[0][2] - s0)
        inside["graph launch"].append(med([e[2] - e[1] for e in g]))
        inside["wait begins"].append(w[-1][1] - s0)
        inside["wait ends"].append(w[-1][2] - s0)
        inside["after the wait"].append(s1 - w[-1][2])
        inside["graphs"].append(len(g))
        row["calls with events"] += 1
    for k, v in inside.items():
        row[k] = med(v) if v else None
    if row["graphs"] is not None:
        row["graphs"] = int(round(row["graphs"]))
    return row


def table(paths):
    rows = [summarise(p) for p in paths]
    cols = (["B", "calls", "calls with events", "cycle"] + STEPS +
            ["first H2D", "graph launched", "graph launch", "graphs", "wait begins", "wait ends", "after the wait"])
    fmt = lambda v: "-" if v is None else ("%d" % v if isinstance(v, int) else "%.1f" % v)  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r[c]) for c in cols) + " |")
    print("Median µs per call over the calls after the warm-up (calls; calls with events: those whose cn_forecast "
          "holds a host-to-device copy, a graph replay and a wait, over which the event columns are taken). cycle: "
          "from one call's start to the next's; the steps: Python's, around each C call; first H2D .. after the wait: "
          "inside cn_forecast, from its start (the timer's events: the first host-to-device copy begins, the first "
          "graph replay has returned, the last wait begins and ends, cn_forecast returns that long after it); graph "
          "launch: one cudaGraphLaunch's time on the host; graphs: replays per call.")
    print()
    print("\n".join(lines))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", help="libcutenative.so")
    ap.add_argument("--checkpoint", help="a Chronos-2 directory (context length 512)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--skip", type=int, default=30, help="warm-up calls left out of the table")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--events", help="the timer's file (CN_API_TIMER_OUT of this process)")
    ap.add_argument("--out", help="this run's marks (JSON)")
    ap.add_argument("--table", nargs="+", metavar="RUN_JSON", help="print the table of earlier runs and exit")
    args = ap.parse_args(argv)
    if args.table:
        table(args.table)
        return 0
    if not (args.lib and args.checkpoint and args.out):
        ap.error("--lib, --checkpoint and --out are needed for a run")
    if args.calls <= args.skip + 1:
        ap.error("--calls must exceed --skip + 1")
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())

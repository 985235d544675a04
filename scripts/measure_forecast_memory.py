#!/usr/bin/env python3
"""Measures the peak host memory (RSS) and the wall time of single CPU forecast calls of cutenative, one fresh
process per measurement, for Kronos and Chronos-2 models: the data behind the admission formulas a server uses to
refuse a request whose estimate exceeds a per-model memory budget.

    measure_forecast_memory.py grid kronos <model_dir> <results.jsonl> [--modes eager,fused] [--tasks 1,6]
                               [--samples 1,64,512,4096] [--bars 4,32,256] [--horizons 1,8,40]
    measure_forecast_memory.py grid chronos2 <model_dir> <results.jsonl> [--modes eager,fused] [--series 1,64,1024]
                               [--contexts 16,512] [--horizon-mult 1,4,256]
    measure_forecast_memory.py one '<json spec>'          (what grid runs in each child process)

Every measurement runs in a child process (threads 1, f32, CPU) that loads the model, runs a tiny warm-up call,
allocates and touches the output buffers, resets VmHWM (/proc/self/clear_refs "5"), runs the call, and reports:
  base_kb     VmRSS just before the call (model loaded, warm, output buffers touched)
  peak_kb     VmHWM after the call minus base_kb: the call's peak RSS increase
  kept_kb     VmRSS after the call returned minus base_kb
  trim_kb     VmRSS after malloc_trim(0) minus base_kb
  time_s      wall time of cn_forecast
  mallinfo2 (glibc's own accounting) before and after the call.
Results are appended as JSON lines; a spec already in the file is skipped (the grid resumes). A child runs with
RLIMIT_AS (--as-limit-gb, default 19) so a request that would exhaust the machine fails inside the library
(OUT_OF_HOST_MEMORY) instead; that status is recorded.

Extra child options (spec keys): "calls" (run the call this many times in a row; peak/kept per call),
"thread_calls" (run each call on a fresh thread), "concurrent" (run that many calls at once on as many threads),
and the environment ("env": MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, ...).

Standard library only; the C ABI comes from python/cutenative_ctypes.py, as in examples/python/forecast_ctypes.py.
"""

import argparse
import ctypes
import json
import math
import os
import random
import resource
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
import cutenative_ctypes as cn  # noqa: E402


# ---- process memory ----------------------------------------------------------------------------------------


def status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def reset_hwm():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = MallInfo2
_libc.malloc_trim.argtypes = [ctypes.c_size_t]
_libc.malloc_trim.restype = ctypes.c_int


def mallinfo():
    m = _libc.mallinfo2()
    # arena: bytes from sbrk/arena heaps; hblkhd: bytes in mmapped chunks; uordblks: in use (non-mmapped);
    # fordblks: free but held.
    return {"arena_kb": m.arena // 1024, "mmap_kb": m.hblkhd // 1024, "inuse_kb": m.uordblks // 1024,
            "free_kb": m.fordblks // 1024}


# ---- requests ----------------------------------------------------------------------------------------------


class Api:
    def __init__(self):
        self.lib = cn.load_library()
        self.err = ctypes.c_void_p()
        cn.check(self.lib, self.lib.cn_error_create(ctypes.byref(self.err)), None)

    def check(self, status):
        cn.check(self.lib, status, self.err)

    def load(self, model_dir, mode):
        lib = self.lib
        p = cn.ModelParams()
        lib.cn_model_params_init(ctypes.byref(p))
        p.n_threads = 1
        p.dtype = cn.CN_DTYPE_F32
        p.mode = {"eager": cn.CN_MODE_EAGER, "fused": cn.CN_MODE_FUSED}[mode]
        m = ctypes.c_void_p()
        self.check(lib.cn_model_create(model_dir.encode(), ctypes.byref(p), ctypes.byref(m), self.err))
        info = cn.ModelInfo()
        lib.cn_model_info_init(ctypes.byref(info))
        self.check(lib.cn_model_get_info(m, ctypes.byref(info), self.err))
        return m, info


def kronos_request(api, tasks, samples, bars, horizon, seed=1):
    lib = api.lib
    rng = random.Random(seed)
    req = ctypes.c_void_p()
    api.check(lib.cn_forecast_request_create(ctypes.byref(req), api.err))
    t0 = 1713566100
    hist = (ctypes.c_int64 * bars)(*[t0 + 300 * i for i in range(bars)])
    fut = (ctypes.c_int64 * horizon)(*[t0 + 300 * (bars + i) for i in range(horizon)])
    for t in range(tasks):
        price, rows = 50.0 + 10 * t, []
        for _ in range(bars):
            o = price
            c = o * math.exp(rng.gauss(0, 0.01))
            h, l = max(o, c) * (1 + abs(rng.gauss(0, 0.003))), min(o, c) * (1 - abs(rng.gauss(0, 0.003)))
            v = abs(rng.gauss(15000, 5000))
            rows.append((o, h, l, c, v, v * (o + c) / 2))
            price = c
        cols = [c for k in range(6) for c in [r[k] for r in rows]]
        vals = (ctypes.c_float * (6 * bars))(*cols)
        groups = (ctypes.c_int64 * 6)(*([t] * 6))
        first = ctypes.c_size_t()
        api.check(lib.cn_forecast_request_add_series_batch(req, vals, 6, bars, groups, ctypes.byref(first), api.err))
        api.check(lib.cn_forecast_request_set_timestamps(req, first.value, hist, bars, fut, horizon, api.err))
    api.check(lib.cn_forecast_request_set_horizon(req, horizon, api.err))
    api.check(lib.cn_forecast_request_set_sampling(req, 1.0, 0, 0.9, samples, api.err))
    return req


def chronos2_request(api, series, length, horizon, seed=1):
    lib = api.lib
    rng = random.Random(seed)
    req = ctypes.c_void_p()
    api.check(lib.cn_forecast_request_create(ctypes.byref(req), api.err))
    base = [10 + math.sin(i / 7.0) + 0.3 * math.sin(i / 23.0) for i in range(length)]
    vals = (ctypes.c_float * (series * length))()
    for s in range(series):
        a, b = rng.uniform(0.5, 2), rng.uniform(-5, 5)
        for i in range(length):
            vals[s * length + i] = a * base[i] + b + rng.gauss(0, 0.1)
    api.check(lib.cn_forecast_request_add_series_batch(req, vals, series, length, None, None, api.err))
    api.check(lib.cn_forecast_request_set_horizon(req, horizon, api.err))
    return req


# ---- one measurement (child) -------------------------------------------------------------------------------


def run_one(spec):
    out = {"spec": spec}
    rss0 = status_kb("VmRSS")
    api = Api()
    lib = api.lib
    model, info = api.load(spec["model"], spec["mode"])
    out["rss_loaded_kb"] = status_kb("VmRSS")
    out["rss_libload_kb"] = rss0
    kind = spec["kind"]

    def make(small=False):
        if kind == "kronos":
            if small:
                return kronos_request(api, 1, 1, 4, 1)
            return kronos_request(api, spec["tasks"], spec["samples"], spec["bars"], spec["horizon"])
        if small:
            return chronos2_request(api, 1, 16, 1)
        return chronos2_request(api, spec["series"], spec["context"], spec["horizon"])

    opts = ctypes.c_void_p()
    api.check(lib.cn_run_options_create(ctypes.byref(opts), api.err))
    api.check(lib.cn_run_options_set_seed(opts, 7, api.err))

    def buffers(req):
        shape = cn.ForecastShape()
        lib.cn_forecast_shape_init(ctypes.byref(shape))
        api.check(lib.cn_forecast_get_shape(model, req, ctypes.byref(shape), api.err))
        buf = (ctypes.c_float * shape.n_values)()
        ctypes.memset(buf, 1, ctypes.sizeof(buf))  # touched: counted in the base
        return shape, buf

    # Warm-up: a tiny call (thread pools, one-time tables).
    wreq = make(small=True)
    wshape, wbuf = buffers(wreq)
    api.check(lib.cn_forecast(model, wreq, opts, wbuf, wshape.n_values, None, 0, api.err))
    lib.cn_forecast_request_free(wreq)
    out["rss_warm_kb"] = status_kb("VmRSS")

    req = make()
    shape, buf = buffers(req)
    out["n_values"] = shape.n_values
    calls = spec.get("calls", 1)
    concurrent = spec.get("concurrent", 1)
    bufs = [buf] + [buffers(req)[1] for _ in range(concurrent - 1)]
    out["mallinfo_base"] = mallinfo()
    base = status_kb("VmRSS")
    anon0, file0 = status_kb("RssAnon"), status_kb("RssFile")
    out["base_kb"] = base
    out["calls"] = []

    def call(i, res):
        e = ctypes.c_void_p()
        lib.cn_error_create(ctypes.byref(e))
        o = ctypes.c_void_p()
        lib.cn_run_options_create(ctypes.byref(o), e)
        lib.cn_run_options_set_seed(o, 7, e)
        t = time.perf_counter()
        st = lib.cn_forecast(model, req, o, bufs[i], shape.n_values, None, 0, e)
        res[i] = (st, time.perf_counter() - t, lib.cn_error_message(e).decode())
        lib.cn_run_options_free(o)
        lib.cn_error_free(e)

    pool = spec.get("pool", 0)
    if pool:
        # A pool of `pool` long-lived threads (as a Go program's Ms making cgo calls): call c runs on thread c % pool.
        import queue
        qs = [queue.Queue() for _ in range(pool)]

        def worker(q):
            while True:
                job = q.get()
                if job is None:
                    return
                job[0](0, job[1])
                job[2].set()

        workers = [threading.Thread(target=worker, args=(q,), daemon=True) for q in qs]
        for w in workers:
            w.start()
    for c in range(calls):
        reset_hwm()
        res = [None] * concurrent
        if pool:
            done = threading.Event()
            qs[c % pool].put((call, res, done))
            done.wait()
        elif concurrent > 1 or spec.get("thread_calls"):
            ths = [threading.Thread(target=call, args=(i, res)) for i in range(concurrent)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
        else:
            call(0, res)
        rec = {"status": cn.status_name(lib, res[0][0]), "time_s": res[0][1], "peak_kb": status_kb("VmHWM") - base,
               "anon_kb": status_kb("RssAnon") - anon0, "file_kb": status_kb("RssFile") - file0, "threads": status_kb("Threads"),
               "kept_kb": status_kb("VmRSS") - base, "mallinfo_after": mallinfo()}
        if concurrent > 1:
            rec["times_s"] = [r[1] for r in res]
        if res[0][0] != cn.CN_STATUS_OK:
            rec["error"] = res[0][2][:300]
        out["calls"].append(rec)
        if res[0][0] != cn.CN_STATUS_OK:
            break
    t = time.perf_counter()
    _libc.malloc_trim(0)
    out["trim_s"] = time.perf_counter() - t
    out["trim_kb"] = status_kb("VmRSS") - base
    out["mallinfo_trim"] = mallinfo()
    c0 = out["calls"][0]
    out.update(status=c0["status"], time_s=c0["time_s"], peak_kb=c0["peak_kb"], kept_kb=c0["kept_kb"])
    if "error" in c0:
        out["error"] = c0["error"]
    print("RESULT " + json.dumps(out), flush=True)


# ---- the grid (parent) -------------------------------------------------------------------------------------


def spec_key(spec):
    return json.dumps(spec, sort_keys=True)


def run_child(spec, as_limit_gb, timeout):
    env = dict(os.environ)
    env.update(spec.get("env", {}))

    def limit():
        lim = int(as_limit_gb * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))

    t = time.time()
    try:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "one", json.dumps(spec)], env=env,
                           preexec_fn=limit, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"spec": spec, "status": "TIMEOUT", "wall_s": time.time() - t}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["wall_s"] = time.time() - t
            return r
    return {"spec": spec, "status": "CHILD_FAILED", "rc": p.returncode, "stderr": p.stderr[-2000:],
            "wall_s": time.time() - t}


def ints(s):
    return [int(x) for x in s.split(",") if x]


def grid(args):
    model = os.path.abspath(args.model_dir)
    specs = []
    for mode in args.modes.split(","):
        if args.kind == "kronos":
            for tasks in ints(args.tasks):
                for samples in ints(args.samples):
                    for bars in ints(args.bars):
                        for horizon in ints(args.horizons):
                            specs.append({"kind": "kronos", "model": model, "mode": mode, "tasks": tasks,
                                          "samples": samples, "bars": bars, "horizon": horizon})
        else:
            cfg = json.load(open(os.path.join(model, "config.json")))["chronos_config"]
            native = cfg["max_output_patches"] * cfg["output_patch_size"]
            for series in ints(args.series):
                for ctx in ints(args.contexts):
                    for mult in ints(args.horizon_mult):
                        specs.append({"kind": "chronos2", "model": model, "mode": mode, "series": series,
                                      "context": ctx, "horizon": mult * native})
    extra = json.loads(args.extra) if args.extra else {}
    for s in specs:
        s.update(extra)
    done = set()
    if os.path.exists(args.results):
        for line in open(args.results):
            done.add(spec_key(json.loads(line)["spec"]))
    for s in specs:
        if spec_key(s) in done:
            continue
        r = run_child(s, args.as_limit_gb, args.timeout)
        with open(args.results, "a") as f:
            f.write(json.dumps(r) + "\n")
        print("%-70s %-22s peak %9.1f MB kept %9.1f MB t %8.3f s" % (
            json.dumps({k: v for k, v in s.items() if k not in ("model", "kind")}), r.get("status"),
            r.get("peak_kb", 0) / 1024, r.get("kept_kb", 0) / 1024, r.get("time_s") or 0), flush=True)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "one":
        run_one(json.loads(sys.argv[2]))
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("grid")
    g.add_argument("kind", choices=["kronos", "chronos2"])
    g.add_argument("model_dir")
    g.add_argument("results")
    g.add_argument("--modes", default="eager,fused")
    g.add_argument("--tasks", default="1,6")
    g.add_argument("--samples", default="1,64,512,4096")
    g.add_argument("--bars", default="4,32,256")
    g.add_argument("--horizons", default="1,8,40")
    g.add_argument("--series", default="1,64,1024")
    g.add_argument("--contexts", default="16,512")
    g.add_argument("--horizon-mult", default="1,4,256")
    g.add_argument("--extra", default="", help="JSON merged into every spec (calls, env, thread_calls, concurrent)")
    g.add_argument("--as-limit-gb", type=float, default=19.0)
    g.add_argument("--timeout", type=float, default=1800.0)
    args = ap.parse_args()
    grid(args)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Helper of scripts/bench_server_gpu.sh: the server side's levels (cutenative-load, or an HTTP client here for
request shapes cutenative-load cannot send) with the batch sizes the server reached, and the same requests as
direct C calls (python/cutenative_ctypes.py) from threads. Standard library only (no NumPy, no torch).

    direct_load.py direct --lib build-gpu/libcutenative.so.0 --model DIR --device cuda --dtype bf16 --mode fused \
        --csv series.csv --context 120,512 --horizon 16 --concurrency 1,16,64 --duration 10 --one-call 64
    direct_load.py load --url http://127.0.0.1:18080 --csv series.csv --horizon 16 --concurrency 1,16,64 \
        --duration 10 -- .device/bin/cutenative-load
    direct_load.py http --url http://127.0.0.1:18080 --csv series.csv --context 512 --horizon 16 ...
    direct_load.py answers --url http://127.0.0.1:18080 --csv series.csv --context 120,512 --horizon 16 >answers.json
    direct_load.py ready --url http://127.0.0.1:18080 --pid PID --timeout 600
    direct_load.py table --title TEXT ROWS.jsonl...

The request, every way: one univariate series, the last --context values of the CSV's second column (header
row skipped; empty cells NaN), horizon --horizon, quantile levels 0.1, 0.5, 0.9 (the server's defaults; over
HTTP the request names none, as cutenative-load's does). cutenative-load (default -length 120) sends the CSV's last 120
values, so `load` rows have context 120.

direct: one model loaded as the server loads it (device, dtype, mode in cn_model_params); per call what the
server's binding does per library call: create the request, add the series, set horizon and levels, get the
shape, allocate the output, cn_forecast, free the request (no run options: the server's carry a deadline,
which costs nothing measurable). Each level runs `concurrency` threads issuing calls back to back for
--duration seconds (calls in flight then complete), after --warmup seconds of the same, not counted. ctypes
releases the GIL for each foreign call, so the threads' library calls overlap; the Python work between them
(a few microseconds a call) does not. --one-call B adds a row per context: one call of B copies of the
series (what perfect merging of B requests costs), --one-call-runs timed calls after 3 warm-up calls; its
"rps" is series per second, its p50/p99 those of the call.

load: per level, one run of the given cutenative-load (-concurrency C -duration D -csv -horizon), its table
row parsed; before it, one uncounted run at every level for --warmup seconds each (fused/graph modes capture
a CUDA graph per batch shape on first use). http: the same levels from threads here, one keep-alive
connection each (a Python client: compare its context-120 rows with cutenative-load's to see what it costs).
Both scrape /metrics before and after each level: library calls, series per call (mean, and the histogram
bucket bounds that hold the median and the largest), mean time per library call and in the queue.

answers: the server's answer to one request per context (JSON); direct --compare checks its first call of each
context against it (a "check" line: bit-identical or the largest difference), so the two sides are known to
do the same work.

Output of direct/load/http: one JSON object per line on stdout, one per level. Percentiles are nearest-rank
over the successful requests, throughput = successes / elapsed, as in cutenative-load.
"""

import argparse
import csv
import ctypes
import http.client
import json
import math
import os
import re
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import cutenative_ctypes as cn  # noqa: E402

LEVELS = [0.1, 0.5, 0.9]  # go/server/forecast.go defaultQuantiles
LOAD_TOOL_LENGTH = 120    # go/cmd/cutenative-load seriesLength: the values it sends


def log(msg):
    print("direct_load: " + msg, file=sys.stderr, flush=True)


def read_values(path):
    """The CSV's second column after the header row, as cutenative-load reads it (empty cell: NaN)."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    out = []
    for rec in rows[1:]:
        s = rec[1].strip()
        out.append(float(s) if s else math.nan)
    return out


def last(values, n):
    if len(values) < n:
        sys.exit("direct_load: the CSV has %d values, fewer than a context of %d" % (len(values), n))
    return values[len(values) - n:]


def percentile(sorted_vals, p):
    """Nearest rank, as cutenative-load computes it."""
    if not sorted_vals:
        return 0.0
    rank = int(math.ceil(p / 100.0 * len(sorted_vals)))
    return sorted_vals[min(max(rank, 1), len(sorted_vals)) - 1]


def emit(r):
    print(json.dumps(r), flush=True)


def level_row(kind, context, conc, lat, requests, errors, elapsed, series_per_call=None, rps=None):
    return {"kind": kind, "context": context, "concurrency": conc, "requests": requests, "errors": errors,
            "seconds": round(elapsed, 3),
            "rps": round(rps if rps is not None else (len(lat) / elapsed if elapsed > 0 else 0.0), 1),
            "p50_ms": round(percentile(lat, 50) * 1e3, 3), "p99_ms": round(percentile(lat, 99) * 1e3, 3),
            "series_per_call": series_per_call}


# ---- loopback HTTP -------------------------------------------------------------------------------------


def split_url(url):
    u = urllib.parse.urlsplit(url)
    if u.hostname not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("direct_load: --url must be a loopback address, got %s" % url)
    return u.hostname, u.port or 80


def http_get(url, path, timeout=10):
    host, port = split_url(url)
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


_METRIC = re.compile(r'^(cutenative_(?:batch_series|batch_jobs|inference_seconds|queue_seconds)_(bucket|sum|count))'
                     r'\{([^}]*)\}\s+(\S+)$')


def scrape(url):
    """The server's batch histograms, summed over models and lanes: {name: {"le": {bound: n}, "sum", "count"}}."""
    status, text = http_get(url, "/metrics")
    if status != 200:
        raise RuntimeError("/metrics answered %d" % status)
    out = {}
    for line in text.splitlines():
        m = _METRIC.match(line)
        if not m:
            continue
        name, part, labels, val = m.group(1).rsplit("_", 1)[0], m.group(2), m.group(3), float(m.group(4))
        h = out.setdefault(name, {"le": {}, "sum": 0.0, "count": 0.0})
        if part == "bucket":
            le = re.search(r'le="([^"]*)"', labels).group(1)
            h["le"][le] = h["le"].get(le, 0.0) + val
        else:
            h[part] += val
    return out


def metrics_delta(before, after):
    """What the server did between two scrapes: calls, series per call, time per call and in the queue."""
    def d(name):
        a, b = after.get(name), before.get(name, {"le": {}, "sum": 0.0, "count": 0.0})
        if a is None:
            return None
        return {"le": {k: v - b["le"].get(k, 0.0) for k, v in a["le"].items()}, "sum": a["sum"] - b["sum"],
                "count": a["count"] - b["count"]}

    s = d("cutenative_batch_series")
    if not s or s["count"] <= 0:
        return {"calls": 0}
    calls = s["count"]

    def bound_at(fraction):  # the smallest bucket bound holding `fraction` of the calls
        for le, n in sorted(s["le"].items(), key=lambda kv: float(kv[0])):
            if n >= fraction * calls - 1e-9:
                return le
        return "+Inf"

    out = {"calls": int(calls), "series_mean": round(s["sum"] / calls, 2), "series_p50_le": bound_at(0.5),
           "series_max_le": bound_at(1.0)}
    for name, key in (("cutenative_inference_seconds", "call_ms_mean"), ("cutenative_queue_seconds", "queue_ms_mean")):
        h = d(name)
        if h and h["count"] > 0:
            out[key] = round(h["sum"] / h["count"] * 1e3, 3)
    return out


def cmd_ready(a):
    """Polls /readyz until 200; fails if the server process (--pid) exits or --timeout passes."""
    t0 = time.time()
    while time.time() - t0 < a.timeout:
        if a.pid and not os.path.exists("/proc/%d" % a.pid):
            sys.exit("direct_load: the server (pid %d) exited before it was ready" % a.pid)
        try:
            if http_get(a.url, "/readyz", timeout=2)[0] == 200:
                log("server ready after %.1f s" % (time.time() - t0))
                return
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("direct_load: the server was not ready after %.0f s" % a.timeout)


# ---- levels --------------------------------------------------------------------------------------------


def run_level(make_worker, conc, duration, warmup, on_start=None):
    """conc threads, each calling its worker's send() back to back: warmup seconds uncounted, then duration
    seconds counted (on_start() is called between the two, while every thread is idle). Returns (successes'
    latencies sorted, requests, errors, elapsed seconds)."""
    workers = [make_worker() for _ in range(conc)]
    barrier = threading.Barrier(conc + 1)
    go = threading.Event()
    state = {"phase": "warmup", "deadline": 0.0}
    results = [None] * conc
    first_error = []

    def body(i):
        w = workers[i]
        lat, n, nerr = [], 0, 0
        barrier.wait()
        while state["phase"] == "warmup":
            try:
                w.send()
            except Exception as e:  # noqa: BLE001 - reported once
                if not first_error:
                    first_error.append(repr(e))
                time.sleep(0.01)
        barrier.wait()  # every thread idle
        go.wait()
        deadline = state["deadline"]
        while True:
            t0 = time.perf_counter()
            if t0 >= deadline:
                break
            try:
                w.send()
                lat.append(time.perf_counter() - t0)
            except Exception as e:  # noqa: BLE001 - counted, reported once
                nerr += 1
                if not first_error:
                    first_error.append(repr(e))
                time.sleep(0.01)  # as cutenative-load: do not spin on a refusing server
            n += 1
        results[i] = (lat, n, nerr)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(conc)]
    for t in threads:
        t.start()
    barrier.wait()
    time.sleep(warmup)
    state["phase"] = "measure"
    barrier.wait()  # the warm-up calls in flight have ended
    if on_start:
        on_start()
    start = time.perf_counter()
    state["deadline"] = start + duration
    go.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    for w in workers:
        w.close()
    lat = sorted(x for r in results for x in r[0])
    if first_error:
        log("first error at concurrency %d: %s" % (conc, first_error[0]))
    return lat, sum(r[1] for r in results), sum(r[2] for r in results), elapsed


class Model:
    """One loaded model; forecast() may be called from many threads, each with its own error object."""

    def __init__(self, lib, model_dir, device, dtype, mode):
        self.lib = lib
        err = ctypes.c_void_p()
        cn.check(lib, lib.cn_error_create(ctypes.byref(err)), None)
        self.err = err
        p = cn.ModelParams()
        lib.cn_model_params_init(ctypes.byref(p))
        dev, _, idx = device.partition(":")
        p.device_type = cn.CN_DEVICE_CUDA if dev == "cuda" else cn.CN_DEVICE_CPU
        p.device_index = int(idx or 0)
        p.dtype = {"f32": cn.CN_DTYPE_F32, "bf16": cn.CN_DTYPE_BF16, "f16": cn.CN_DTYPE_F16}[dtype]
        p.mode = {"eager": cn.CN_MODE_EAGER, "graph": cn.CN_MODE_GRAPH, "fused": cn.CN_MODE_FUSED}[mode]
        self.model = ctypes.c_void_p()
        # As the Go binding opens it (cutenative.Open): device, dtype and mode in the params.
        cn.check(lib, lib.cn_model_create(os.fsencode(model_dir), ctypes.byref(p), ctypes.byref(self.model), err),
                 err)

    def new_error(self):
        e = ctypes.c_void_p()
        cn.check(self.lib, self.lib.cn_error_create(ctypes.byref(e)), None)
        return e

    def forecast(self, series, n_copies, horizon, levels, err):
        """One library call: n_copies of `series` (a ctypes float array). Returns the output buffer."""
        lib = self.lib
        req = ctypes.c_void_p()
        cn.check(lib, lib.cn_forecast_request_create(ctypes.byref(req), err), err)
        try:
            for _ in range(n_copies):
                cn.check(lib, lib.cn_forecast_request_add_series(req, series, len(series), -1, None, err), err)
            cn.check(lib, lib.cn_forecast_request_set_horizon(req, horizon, err), err)
            cn.check(lib, lib.cn_forecast_request_set_quantiles(req, levels, len(levels), err), err)
            shape = cn.ForecastShape()
            lib.cn_forecast_shape_init(ctypes.byref(shape))
            cn.check(lib, lib.cn_forecast_get_shape(self.model, req, ctypes.byref(shape), err), err)
            out = (ctypes.c_float * int(shape.n_values))()
            cn.check(lib, lib.cn_forecast(self.model, req, None, out, int(shape.n_values), None, 0, err), err)
        finally:
            lib.cn_forecast_request_free(req)
        return out

    def close(self):
        self.lib.cn_model_free(self.model)
        self.lib.cn_error_free(self.err)


def cmd_direct(a, values):
    lib = cn.load_library(a.lib)
    t0 = time.perf_counter()
    m = Model(lib, a.model, a.device, a.dtype, a.mode)
    log("model loaded in %.1f s (%s, %s, %s)" % (time.perf_counter() - t0, a.device, a.dtype, a.mode))
    levels = (ctypes.c_float * len(LEVELS))(*LEVELS)
    answers = {}
    if a.compare:
        with open(a.compare) as f:
            answers = json.load(f)
    try:
        for context in a.context:
            v = last(values, context)
            series = (ctypes.c_float * len(v))(*v)
            if str(context) in answers:
                err = m.new_error()
                same, diff = compare(answers[str(context)], m.forecast(series, 1, a.horizon, levels, err), a.horizon)
                lib.cn_error_free(err)
                emit({"kind": "check", "context": context, "identical": same, "max_abs_diff": diff})

            class Worker:
                def __init__(self):
                    self.err = m.new_error()

                def send(self):
                    m.forecast(series, 1, a.horizon, levels, self.err)

                def close(self):
                    lib.cn_error_free(self.err)

            for conc in a.concurrency:
                lat, n, nerr, el = run_level(Worker, conc, a.duration, a.warmup)
                emit(level_row("direct", context, conc, lat, n, nerr, el, series_per_call=1))
            if a.one_call > 0:
                err = m.new_error()
                for _ in range(3):
                    m.forecast(series, a.one_call, a.horizon, levels, err)
                lat = []
                for _ in range(a.one_call_runs):
                    t = time.perf_counter()
                    m.forecast(series, a.one_call, a.horizon, levels, err)
                    lat.append(time.perf_counter() - t)
                lib.cn_error_free(err)
                lat.sort()
                emit(level_row("one-call", context, 1, lat, len(lat), 0, sum(lat), series_per_call=a.one_call,
                               rps=a.one_call / percentile(lat, 50)))
    finally:
        m.close()


def http_body(values, horizon):
    """The JSON request cutenative-load sends (NaN as null; no levels: the server's defaults)."""
    return json.dumps({"horizon": horizon, "series": [{"values": [None if math.isnan(x) else x for x in values]}]}
                      ).encode()


def cmd_answers(a, values):
    """The server's answer to one request per context: {context: [[level][step]]}, for direct --compare."""
    host, port = split_url(a.url)
    out = {}
    for context in a.context:
        c = http.client.HTTPConnection(host, port, timeout=60)
        try:
            c.request("POST", "/v1/forecast", http_body(last(values, context), a.horizon),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
        finally:
            c.close()
        if r.status != 200:
            sys.exit("direct_load: HTTP %d: %s" % (r.status, data[:300]))
        resp = json.loads(data)
        if [round(q, 6) for q in resp["quantiles"]] != LEVELS:
            sys.exit("direct_load: the server answered levels %s, not %s" % (resp["quantiles"], LEVELS))
        out[str(context)] = resp["forecasts"][0]["quantiles"]
    json.dump(out, sys.stdout)
    print()


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def compare(answer, out, horizon):
    """Direct output [level][step] (flat, series 0) against the server's JSON answer, as float32."""
    diffs = [abs(f32(answer[q][h]) - f32(out[q * horizon + h])) for q in range(len(LEVELS)) for h in range(horizon)]
    return max(diffs) == 0.0, max(diffs)


def cmd_http(a, values):
    host, port = split_url(a.url)
    headers = {"Content-Type": "application/json"}
    for context in a.context:
        v = last(values, context)
        body = http_body(v, a.horizon)

        class Worker:
            def __init__(self):
                self.conn = http.client.HTTPConnection(host, port, timeout=60)

            def send(self):
                try:
                    self.conn.request("POST", "/v1/forecast", body, headers)
                    resp = self.conn.getresponse()
                    data = resp.read()
                except (http.client.HTTPException, OSError):
                    self.conn.close()  # reconnects on the next request
                    raise
                if resp.status != 200:
                    raise RuntimeError("HTTP %d: %s" % (resp.status, data[:300]))

            def close(self):
                self.conn.close()

        w = Worker()  # one request first, so that a misconfiguration is reported once
        w.send()
        w.close()
        for conc in a.concurrency:
            before = {}
            lat, n, nerr, el = run_level(Worker, conc, a.duration, a.warmup,
                                         on_start=lambda: before.update(scrape(a.url)))
            r = level_row("http", context, conc, lat, n, nerr, el)
            r.update(metrics_delta(before, scrape(a.url)))
            emit(r)


_ROW = re.compile(r"^\|\s*([^|]*?)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*([\d.]+)\s*\|"
                  r"\s*([\d.]+|-)\s*\|\s*([\d.]+|-)\s*\|$")


def cmd_load(a, tool):
    """cutenative-load, one run per level, with the server's metrics around each."""
    base = tool + ["-url", a.url, "-csv", a.csv, "-horizon", str(a.horizon)]
    if a.warmup > 0:
        warm = ",".join(str(c) for c in sorted(a.concurrency, reverse=True))
        subprocess.run(base + ["-concurrency", warm, "-duration", "%gs" % a.warmup, "-label", "warmup"],
                       check=True, stdout=subprocess.DEVNULL)
    for conc in a.concurrency:
        before = scrape(a.url)
        p = subprocess.run(base + ["-concurrency", str(conc), "-duration", "%gs" % a.duration, "-label", "server"],
                           check=True, stdout=subprocess.PIPE, text=True)
        after = scrape(a.url)
        rows = [m for m in (_ROW.match(line.strip()) for line in p.stdout.splitlines()) if m]
        if len(rows) != 1:
            sys.exit("direct_load: cannot read cutenative-load's row from:\n" + p.stdout)
        g = rows[0].groups()
        num = (lambda s: float(s) if s != "-" else 0.0)
        r = {"kind": "load", "context": LOAD_TOOL_LENGTH, "concurrency": int(g[1]), "requests": int(g[2]),
             "errors": int(g[3]), "throttled": int(g[4]), "seconds": a.duration, "rps": float(g[5]),
             "p50_ms": num(g[6]), "p99_ms": num(g[7]), "series_per_call": None}
        r.update(metrics_delta(before, after))
        emit(r)


# ---- the table -----------------------------------------------------------------------------------------

LABELS = {"load": "server, cutenative-load", "http": "server, Python HTTP client", "direct": "direct C calls",
          "one-call": "direct, one call of %d series"}


def cmd_table(a):
    rows = []
    for path in a.rows:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.strip().startswith("{")]
    checks = [r for r in rows if r["kind"] == "check"]
    rows = [r for r in rows if r["kind"] != "check"]
    order = {"load": 0, "http": 1, "direct": 2, "one-call": 3}
    rows.sort(key=lambda r: (r["context"], order[r["kind"]], r["concurrency"]))
    print("### %s" % a.title)
    print()
    for line in a.note:
        print("- " + line)
    if checks:
        print("- Same work: a direct call's output against the server's answer to the same request (one request "
              "alone, before the levels): " + "; ".join(
                  "context %d %s" % (c["context"], "bit-identical" if c["identical"] else
                                     "DIFFERENT, max |diff| %g" % c["max_abs_diff"]) for c in checks))
    print()
    print("| row | context | clients / threads | requests | errors | req/s | p50 (ms) | p99 (ms) | library calls | "
          "series per call: mean, median ≤, max ≤ | ms per library call | ms queued (mean) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in rows:
        k = r["kind"]
        if k == "one-call":
            label = LABELS[k] % r["series_per_call"]
            conc, reqs, calls = "1", "%d calls" % r["requests"], str(r["requests"])
            rps = "%.1f series/s" % r["rps"]
            batch, call_ms, queue_ms = "%d, %d, %d" % ((r["series_per_call"],) * 3), "%.3f" % r["p50_ms"], "-"
        elif k == "direct":
            label, conc, reqs, calls = LABELS[k], str(r["concurrency"]), str(r["requests"]), str(r["requests"])
            rps, batch, call_ms, queue_ms = "%.1f" % r["rps"], "1, 1, 1", "-", "-"
        else:
            label, conc, reqs = LABELS[k], str(r["concurrency"]), str(r["requests"])
            rps = "%.1f" % r["rps"]
            calls = str(r.get("calls", "?"))
            batch = ("%.2f, %s, %s" % (r["series_mean"], r["series_p50_le"], r["series_max_le"])
                     if r.get("calls") else "-")
            call_ms = "%.3f" % r["call_ms_mean"] if "call_ms_mean" in r else "-"
            queue_ms = "%.3f" % r["queue_ms_mean"] if "queue_ms_mean" in r else "-"
        print("| %s | %d | %s | %s | %d | %s | %.2f | %.2f | %s | %s | %s | %s |"
              % (label, r["context"], conc, reqs, r["errors"], rps, r["p50_ms"], r["p99_ms"], calls, batch,
                 call_ms, queue_ms))


def main():
    argv = sys.argv[1:]
    tool = []
    if "--" in argv:
        i = argv.index("--")
        argv, tool = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("what", choices=["direct", "load", "http", "answers", "ready", "table"])
    ap.add_argument("--csv", help="series CSV (header row; values in the second column)")
    ap.add_argument("--context", default=str(LOAD_TOOL_LENGTH),
                    help="comma-separated: values sent, the CSV's last N (load: always %d)" % LOAD_TOOL_LENGTH)
    ap.add_argument("--horizon", type=int, default=16)
    ap.add_argument("--concurrency", default="1,16,64")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per level")
    ap.add_argument("--warmup", type=float, default=1.0, help="seconds per level before the counted ones")
    ap.add_argument("--lib", help="direct: libcutenative path")
    ap.add_argument("--model", help="direct: model directory")
    ap.add_argument("--device", default="cuda", help="direct: cpu, cuda or cuda:N")
    ap.add_argument("--dtype", default="bf16", choices=["f32", "bf16", "f16"])
    ap.add_argument("--mode", default="fused", choices=["eager", "graph", "fused"])
    ap.add_argument("--one-call", type=int, default=0, help="direct: also time one call of this many series")
    ap.add_argument("--one-call-runs", type=int, default=20)
    ap.add_argument("--compare", help="direct: the server's answers (from `answers`) to compare the first call with")
    ap.add_argument("--url", default="http://127.0.0.1:8080", help="server base URL (loopback)")
    ap.add_argument("--pid", type=int, default=0, help="ready: the server's process id")
    ap.add_argument("--timeout", type=float, default=600, help="ready: seconds")
    ap.add_argument("--title", default="cutenative-server against direct C calls", help="table: heading")
    ap.add_argument("--note", action="append", default=[], help="table: a line under the heading (repeatable)")
    ap.add_argument("rows", nargs="*", help="table: JSON-lines files of direct/load/http")
    a = ap.parse_args(argv)
    a.concurrency = [int(x) for x in a.concurrency.split(",") if x]
    a.context = [int(x) for x in a.context.split(",") if x]
    sys.setswitchinterval(0.0005)  # hand the GIL over quickly between the threads' short Python stretches
    if a.what == "ready":
        return cmd_ready(a)
    if a.what == "table":
        return cmd_table(a)
    if not a.csv:
        sys.exit("direct_load: %s needs --csv" % a.what)
    values = read_values(a.csv)
    if a.what == "load":
        if not tool:
            sys.exit("direct_load: load needs `-- <cutenative-load> [args]`")
        last(values, LOAD_TOOL_LENGTH)
        return cmd_load(a, tool)
    if a.what == "http":
        return cmd_http(a, values)
    if a.what == "answers":
        return cmd_answers(a, values)
    if not a.lib or not a.model:
        sys.exit("direct_load: direct needs --lib and --model")
    return cmd_direct(a, values)


if __name__ == "__main__":
    main()

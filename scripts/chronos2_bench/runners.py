"""The two sides of the benchmark: the reference pipeline and cutenative (through python/cutenative_ctypes.py),
and how a workload is timed and profiled."""

import ctypes
import gc
import os
import statistics
import time
import warnings

import numpy as np
import torch

import cutenative_ctypes as cn

from .config import ROWS


class CnModel:
    """One loaded cutenative model plus its own error object."""

    def __init__(self, lib, model_dir, device, dtype, n_threads=0):
        self.lib = lib
        self.err = ctypes.c_void_p()
        self.model = ctypes.c_void_p()
        if lib.cn_error_create(ctypes.byref(self.err)) != cn.CN_STATUS_OK:
            raise RuntimeError("cn_error_create failed")
        p = cn.ModelParams()
        lib.cn_model_params_init(ctypes.byref(p))
        p.device_type = cn.CN_DEVICE_CUDA if device == "cuda" else cn.CN_DEVICE_CPU
        p.device_index = 0
        p.dtype = cn.CN_DTYPE_BF16 if dtype == "bf16" else cn.CN_DTYPE_F32
        p.mode = cn.CN_MODE_EAGER
        p.n_threads = n_threads  # 0: leave the process's intra-op thread count as it is
        try:
            self.check(lib.cn_model_create(os.fsencode(model_dir), ctypes.byref(p), ctypes.byref(self.model),
                                           self.err))
        except Exception:
            self.close()
            raise

    def check(self, status):
        cn.check(self.lib, status, self.err)

    def info(self):
        info = cn.ModelInfo()
        self.lib.cn_model_info_init(ctypes.byref(info))
        self.check(self.lib.cn_model_get_info(self.model, ctypes.byref(info), self.err))
        return info

    def quantiles(self):
        n = ctypes.c_size_t(0)
        self.check(self.lib.cn_model_get_quantiles(self.model, None, 0, ctypes.byref(n), self.err))
        buf = (ctypes.c_float * max(n.value, 1))()
        self.check(self.lib.cn_model_get_quantiles(self.model, buf, n.value, ctypes.byref(n), self.err))
        return [float(x) for x in buf[:n.value]]

    def set_mode(self, mode):
        """Returns the status (an int); the caller decides what a non-OK status means."""
        return self.lib.cn_model_set_mode(self.model, mode, self.err)

    def _add(self, req, rows):
        """rows: a list of (float* pointer, length) of float32 series, one add_series call each; or a block
        (float* pointer, n_series, length) of n_series equal-length series stored one after another, one
        add_series_batch call (ABI 0.4). Every series a univariate task of its own (group -1)."""
        lib, err = self.lib, self.err
        if isinstance(rows, tuple):
            ptr, n_series, length = rows
            self.check(lib.cn_forecast_request_add_series_batch(req, ptr, n_series, length, None, None, err))
            return
        add = lib.cn_forecast_request_add_series
        for ptr, n in rows:
            st = add(req, ptr, n, -1, None, err)
            if st:
                self.check(st)

    def forecast(self, rows, horizon, run=True):
        """rows: as _add takes them. Builds the request, sizes and allocates the output, runs, frees the request;
        returns a flat float32 array [series][quantile][step] and the shape. This whole function is what a timing
        covers. run=False stops before cn_forecast (the Python side alone, for the profile's request-building cost)
        and returns None."""
        lib, err = self.lib, self.err
        req = ctypes.c_void_p()
        self.check(lib.cn_forecast_request_create(ctypes.byref(req), err))
        try:
            self._add(req, rows)
            self.check(lib.cn_forecast_request_set_horizon(req, horizon, err))
            shape = cn.ForecastShape()
            lib.cn_forecast_shape_init(ctypes.byref(shape))
            self.check(lib.cn_forecast_get_shape(self.model, req, ctypes.byref(shape), err))
            out = np.empty(max(int(shape.n_values), 1), dtype=np.float32)
            if not run:
                return None
            self.check(lib.cn_forecast(self.model, req, None, out.ctypes.data_as(cn.FLOAT_P), int(shape.n_values),
                                       None, 0, err))
        finally:
            lib.cn_forecast_request_free(req)
        return out, (int(shape.n_series), int(shape.n_outputs), int(shape.horizon))

    def close(self):
        if self.model:
            self.lib.cn_model_free(self.model)
            self.model = ctypes.c_void_p()
        if self.err:
            self.lib.cn_error_free(self.err)
            self.err = ctypes.c_void_p()


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def load_reference(model_dir, device, dtype):
    """Chronos2Pipeline.from_pretrained(dir, device_map=device, dtype=...). Newer transformers take `dtype`,
    older ones `torch_dtype`: try `dtype`, check the loaded model's dtype, fall back to `torch_dtype`.
    Returns (pipeline, the kwarg that worked)."""
    from chronos.chronos2 import Chronos2Pipeline
    want = torch.bfloat16 if dtype == "bf16" else torch.float32
    errors = []
    for kw in ("dtype", "torch_dtype"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pipe = Chronos2Pipeline.from_pretrained(model_dir, device_map=device, **{kw: want})
        except Exception as e:  # noqa: BLE001 - try the other spelling
            errors.append("%s=: %s" % (kw, e))
            continue
        if pipe.model.dtype == want and pipe.model.device.type == device:
            pipe.model.eval()
            return pipe, kw
        errors.append("%s=: loaded %s on %s" % (kw, pipe.model.dtype, pipe.model.device))
        del pipe
        gc.collect()
    raise RuntimeError("cannot load the reference in %s on %s: %s" % (dtype, device, "; ".join(errors)))


class RefRunner:
    def __init__(self, model_dir, device, dtype):
        self.pipe, self.kwarg = load_reference(model_dir, device, dtype)
        self.levels = list(self.pipe.quantiles)

    def call(self, wl, s, e):
        q, _mean = self.pipe.predict_quantiles(wl.torch_x[s:e].unsqueeze(1), prediction_length=wl.horizon,
                                               quantile_levels=self.levels, batch_size=wl.ref_batch)
        return q  # list of (1, H, Q) fp32 CPU tensors

    def to_numpy(self, raws):
        q = torch.cat([torch.stack(r) for r in raws])          # (N, 1, H, Q)
        return q[:, 0].permute(0, 2, 1).contiguous().numpy()   # (N, Q, H), cutenative's layout

    def close(self):
        del self.pipe


class CnRunner:
    def __init__(self, lib, model_dir, device, dtype, mode, n_threads=0):
        self.m = CnModel(lib, model_dir, device, dtype, n_threads)
        self.mode_status = None
        if mode != cn.CN_MODE_EAGER:
            st = self.m.set_mode(mode)
            if st != cn.CN_STATUS_OK:
                e = cn.error_from(lib, st, self.m.err)  # before close() frees the error object
                self.mode_status = e.status_name
                self.m.close()
                raise e
        self.info = self.m.info()
        self.levels = self.m.quantiles()

    def call(self, wl, s, e):
        return self.m.forecast(wl.cn_block(s, e), wl.horizon)

    def to_numpy(self, raws):
        parts = []
        for out, (n, q, h) in raws:
            parts.append(out[:n * q * h].reshape(n, q, h))
        return np.concatenate(parts)

    def close(self):
        self.m.close()


def time_workload(runner, wl, device, warmup, n_runs):
    """Warm-up calls (single calls: one window for the sequential rolling run), then n_runs timed runs of the
    whole workload. Returns (median seconds, all times, outputs (N, Q, H) of the first timed run)."""
    s0, e0 = wl.calls[0]
    for _ in range(warmup):
        runner.call(wl, s0, e0)
    times, first = [], None
    for _ in range(n_runs):
        sync(device)
        t0 = time.perf_counter()
        raws = [runner.call(wl, s, e) for (s, e) in wl.calls]
        sync(device)
        times.append(time.perf_counter() - t0)
        if first is None:
            first = raws
    return statistics.median(times), times, runner.to_numpy(first)


def profile_row(lib, model_dir, device, row_key, wl, calls=10, n_threads=0):
    """Where the time goes: one cutenative row on one workload under torch.profiler (same process, same
    LibTorch, so its CUDA kernels are recorded). Returns a markdown section."""
    from torch.profiler import ProfilerActivity, profile, record_function

    row = next((r for r in ROWS if r[0] == row_key), None)
    if row is None or row[2] != "cn":
        return "\n## Profile\n\n(--profile %s: not a cutenative row)\n" % row_key
    _, label, _, dt, mode = row
    runner = CnRunner(lib, model_dir, device, dt, mode, n_threads)
    try:
        s0, e0 = wl.calls[0]
        for _ in range(3):
            runner.call(wl, s0, e0)
        sync(device)
        t0 = time.perf_counter()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                with record_function(CALL_MARK):
                    runner.call(wl, s0, e0)
            sync(device)
        wall = (time.perf_counter() - t0) / calls
        build_ms = []
        for rows in (wl.cn_block(s0, e0), wl.cn_rows[s0:e0]):
            t1 = time.perf_counter()
            for _ in range(calls):
                runner.m.forecast(rows, wl.horizon, run=False)
            build_ms.append((time.perf_counter() - t1) / calls * 1e3)
    finally:
        runner.close()
    kernels = {}
    spans = []  # (start µs, end µs, name) of every device event, for the idle gaps below
    cpu_ops = []  # (start µs, end µs, name) of every host-side op event (ATen ops, the library's included)
    for ev in prof.events():
        if getattr(ev, "device_type", None) is None or "CUDA" not in str(ev.device_type):
            cpu_ops.append((ev.time_range.start, ev.time_range.end, ev.name))
            continue
        if ev.name == CALL_MARK:  # the call's range as the profiler mirrors it on the device: not a kernel
            continue
        k = kernels.setdefault(ev.name, [0, 0.0])
        k[0] += 1
        k[1] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
        spans.append((ev.time_range.start, ev.time_range.end, ev.name))
    n_kernels = sum(c for c, _ in kernels.values()) / calls
    gpu_us = sum(t for _, t in kernels.values()) / calls
    lines = ["", "## Profile: %s, %s (per call, %d calls under torch.profiler)" % (label, wl.title, calls), "",
             "- wall time %.3f ms (profiler overhead included); GPU busy %.3f ms in %.0f kernels (%.2f µs each on average)"
             % (wall * 1e3, gpu_us / 1e3, n_kernels, gpu_us / max(n_kernels, 1)), "",
             "| kernel | launches per call | GPU µs per call | share |", "|---|---:|---:|---:|"]
    for name, (c, t) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:20]:
        lines.append("| `%s` | %.0f | %.1f | %.1f%% |" % (name[:90].replace("|", "/"), c / calls, t / calls,
                                                          100.0 * t / max(sum(x for _, x in kernels.values()), 1e-9)))
    lines += [""] + idle_gaps(spans, calls) + [""] + host_timeline(cpu_ops, spans)
    lines += ["", "Building the request alone through ctypes (create, add, set_horizon, get_shape, free; no forecast, "
              "not profiled): %.3f ms per call with one add_series_batch (what the timings use), %.3f ms with %d x "
              "add_series." % (build_ms[0], build_ms[1], e0 - s0)]
    return "\n".join(lines) + "\n"


CALL_MARK = "cn_bench_call"


def _union(intervals):
    """Total length of the union of (start, end, ...) intervals."""
    total, cur_s, cur_e = 0.0, None, None
    for iv in sorted(intervals):
        s0, e0 = iv[0], iv[1]
        if cur_e is None or s0 > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s0, e0
        elif e0 > cur_e:
            cur_e = e0
    return total + (cur_e - cur_s if cur_e is not None else 0.0)


def host_timeline(cpu_ops, spans, top=12):
    """Where a call's wall time goes on the host, per profiled call (each wrapped in a CALL_MARK range): from the
    call's start to the device's first event (request building, validation, the first batch's preparation and
    launches), from the device's last event to the call's end (results back and written out), and how much of the
    call the host spends inside any op event (ATen ops, the library's own, and CUDA runtime calls such as launches
    and synchronisations, which the profiler records too) against outside them (ctypes, the C ABI and pipeline
    loops, allocations not made through ATen). The library's own phase scopes (`cn::...` record_function ranges in
    the pipeline: validate, prepare_batch, launch_batch, finish_batch) are reported apart and do not count as op
    events (they contain the ATen ops of their phase)."""
    marks = sorted((s0, e0) for s0, e0, n in cpu_ops if n == CALL_MARK)
    if not marks:
        return []
    rows = []
    op_incl = {}
    phases = {}  # the library's phase scopes: name -> [count, µs, µs before the device's first event]
    pre_ops = {}  # the op events before the device's first event
    for s0, e0 in marks:
        dev = [(a, b) for a, b, _ in spans if a >= s0 and b <= e0]
        within = [(a, b, n) for a, b, n in cpu_ops if n != CALL_MARK and a >= s0 and b <= e0]
        inside = [(a, b, n) for a, b, n in within if not n.startswith("cn::")]
        if not dev:
            continue
        first, last = min(a for a, _ in dev), max(b for _, b in dev)
        before = [(a, min(b, first), n) for a, b, n in inside if a < first]
        for a, b, n in within:
            if n.startswith("cn::"):
                x = phases.setdefault(n, [0, 0.0, 0.0])
                x[0] += 1
                x[1] += b - a
                x[2] += max(0.0, min(b, first) - a)
        rows.append((e0 - s0, first - s0, e0 - last, _union(dev), _union(inside), _union(before)))
        for a, b, n in before:
            x = pre_ops.setdefault(n, [0, 0.0])
            x[0] += 1
            x[1] += b - a
        for a, b, n in inside:
            x = op_incl.setdefault(n, [0, 0.0])
            x[0] += 1
            x[1] += b - a
    if not rows:
        return []
    n = len(rows)
    mean = [sum(r[i] for r in rows) / n / 1e3 for i in range(6)]
    out = ["Host timeline per call (mean of %d calls, ms): wall %.3f; call start to the device's first event %.3f "
           "(inside op events %.3f, outside them %.3f); the device's last event to the call's end %.3f; device busy "
           "(union) %.3f; host inside op events (union) %.3f, outside them %.3f." %
           (n, mean[0], mean[1], mean[5], mean[1] - mean[5], mean[2], mean[3], mean[4], mean[0] - mean[4]), "",
           "Library phases per call (count, µs, of which before the device's first event): " + (", ".join(
               "`%s` %.1f x, %.1f µs (%.1f)" % (name, c / n, t / n, tb / n)
               for name, (c, t, tb) in sorted(phases.items(), key=lambda kv: -kv[1][1])) or "none recorded") + ".", "",
           "Op events before the device's first event: " + ", ".join(
               "`%s` %.1f x, %.1f µs" % (name[:50], c / n, t / n)
               for name, (c, t) in sorted(pre_ops.items(), key=lambda kv: -kv[1][1])[:8]) + ".", "",
           "| host op (inclusive time, nested ops counted in their parents too) | per call | µs per call |",
           "|---|---:|---:|"]
    for name, (c, t) in sorted(op_incl.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append("| `%s` | %.1f | %.1f |" % (name[:70].replace("|", "/"), c / n, t / n))
    return out


def idle_gaps(spans, calls, top=12):
    """Where the device waits: the union of the device events' intervals, the gaps between them (per call), and
    the largest gaps with the events on either side (the one before a call's first kernel includes the host's
    work between calls)."""
    if not spans:
        return []
    spans.sort()
    gaps, busy = [], 0.0
    cur_s, cur_e, cur_n = spans[0]
    for s0, e0, n in spans[1:]:
        if s0 > cur_e:
            busy += cur_e - cur_s
            gaps.append((s0 - cur_e, cur_n, n))
            cur_s, cur_e, cur_n = s0, e0, n
        elif e0 > cur_e:
            cur_e, cur_n = e0, n
    busy += cur_e - cur_s
    total = sum(g for g, _, _ in gaps)
    small = sum(g for g, _, _ in gaps if g < 10.0)
    out = ["Device idle time between the profiled calls' events, per call: union busy %.3f ms, idle %.3f ms in %.0f gaps "
           "(%.3f ms in gaps under 10 µs); the largest gaps over all calls:" %
           (busy / calls / 1e3, total / calls / 1e3, len(gaps) / calls, small / calls / 1e3), "",
           "| gap (µs) | after | before |", "|---:|---|---|"]
    for g, a, b in sorted(gaps, reverse=True)[:top]:
        out.append("| %.1f | `%s` | `%s` |" % (g, a[:60].replace("|", "/"), b[:60].replace("|", "/")))
    # Gaps grouped by the event they follow (where the idle time concentrates).
    by_after = {}
    for g, a, _ in gaps:
        x = by_after.setdefault(a[:60], [0, 0.0])
        x[0] += 1
        x[1] += g
    out += ["", "| idle after (per call) | gaps | µs |", "|---|---:|---:|"]
    for a, (c, g) in sorted(by_after.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append("| `%s` | %.1f | %.1f |" % (a.replace("|", "/"), c / calls, g / calls))
    return out

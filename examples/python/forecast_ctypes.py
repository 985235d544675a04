#!/usr/bin/env python3
"""Forecasts every numeric column of a CSV file with cutenative through ctypes and prints the quantiles.

    forecast_ctypes.py <model_dir> <csv> <horizon> [levels] [--device cpu|cuda] [--dtype f32|bf16|f16]
                       [--lib path/to/libcutenative.so]

The same program as examples/c/forecast.c, with the standard library only; both print exactly the same
output, so the two can be diffed. `levels` is a comma-separated list of quantile levels, e.g. 0.1,0.5,0.9
(default: the model's own).

The CSV has a header row. The first column is a label column (timestamps, names) and is skipped when any
of its cells is not a number; every other column is one univariate series (group -1). An empty cell, NA or
NaN is a missing value. Quoted fields are read by csv.reader(strict=True); a quoted field may not span
lines. Blank lines are skipped.

Output (stdout), one header line and then one line per series and horizon step:
    series step q<level1> q<level2> ...
    <column name> <step 1..horizon> <value1> <value2> ...
with floats formatted as '%.6g'.

The library: --lib, else $CUTENATIVE_LIB, else $CN_LIB, else build/libcutenative.so under the repository root.
The C ABI's definitions come from python/cutenative_ctypes.py in this repository (found relative to this file).
Exit status 0 on success, 1 on a cutenative error (its status and message are printed), 2 on usage or CSV
errors.
"""

import argparse
import csv
import ctypes
import math
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "python"))
import cutenative_ctypes as cn  # noqa: E402  (the C ABI: structs, enums, prototypes)

MAX_LINE = 65536         # bytes per CSV line, line terminator excluded
MAX_COLUMNS = 1024       # fields per CSV row
MAX_VALUES = 1 << 24     # numeric cells in the whole file
MAX_LEVELS = 256         # quantile levels on the command line
MAX_HORIZON = 1000000    # the model's max_horizon is the real limit; this only bounds parsing
FLT_MAX = 3.4028234663852886e38


class UsageError(Exception):
    """A command-line or CSV error: exit status 2."""


class LibraryError(Exception):
    """A failure to load or use the library: exit status 1, as for a cutenative status (cn.CnError)."""


# ---- CSV ---------------------------------------------------------------------------------------------


def is_decimal(s):
    """Whether s (already trimmed) is [+-] digits [. digits] [e [+-] digits] with at least one digit before
    the exponent: what forecast.c accepts (no hex, inf, nan, underscores or inner spaces)."""
    i, n, digits = 0, len(s), 0
    if i < n and s[i] in "+-":
        i += 1
    while i < n and "0" <= s[i] <= "9":
        i, digits = i + 1, digits + 1
    if i < n and s[i] == ".":
        i += 1
        while i < n and "0" <= s[i] <= "9":
            i, digits = i + 1, digits + 1
    if digits == 0:
        return False
    if i < n and s[i] in "eE":
        i += 1
        if i < n and s[i] in "+-":
            i += 1
        exp_digits = 0
        while i < n and "0" <= s[i] <= "9":
            i, exp_digits = i + 1, exp_digits + 1
        if exp_digits == 0:
            return False
    return i == n


def trim(s):
    return s.strip(" \t")


def parse_cell(cell):
    """A float (NaN for a missing value), None if not a number; raises ValueError outside the float range."""
    s = trim(cell)
    if s == "" or s.lower() in ("na", "nan"):
        return math.nan
    if not is_decimal(s):
        return None
    v = float(s)
    if not abs(v) <= FLT_MAX:
        raise ValueError("number outside the float32 range")
    return v


def column_name(field, k):
    s = trim(field)
    if s == "":
        s = "col%d" % k
    return "".join("_" if ord(c) <= 0x20 or ord(c) == 0x7F else c for c in s)


def read_lines(f, path):
    """Yields (line number, line without "\\n" / "\\r\\n") as latin-1 text (bytes map 1:1, as in C)."""
    line_no = 0
    while True:
        chunk = f.readline(MAX_LINE + 1)
        if not chunk:
            return
        line_no += 1
        if chunk.endswith(b"\n"):
            chunk = chunk[:-1]
        elif len(chunk) == MAX_LINE + 1:
            if b"\0" in chunk:
                raise UsageError("%s:%d: NUL byte in line" % (path, line_no))
            raise UsageError("%s:%d: line longer than %d bytes" % (path, line_no, MAX_LINE))
        if b"\0" in chunk:
            raise UsageError("%s:%d: NUL byte in line" % (path, line_no))
        if chunk.endswith(b"\r"):
            chunk = chunk[:-1]
        if b"\r" in chunk:
            raise UsageError("%s:%d: stray carriage return in line" % (path, line_no))
        yield line_no, chunk.decode("latin-1")


def read_csv(path):
    """Returns (names, columns) of the series: the numeric columns, the label column dropped."""
    try:
        f = open(path, "rb")
    except IsADirectoryError:
        raise UsageError("%s: read error" % path)  # what the C program reports
    except OSError:
        raise UsageError("%s: cannot open" % path)
    names = None
    columns = None
    n_rows = 0
    col0_is_label = False
    try:
        with f:
            for line_no, line in read_lines(f, path):
                if line == "":
                    continue  # blank line
                try:
                    fields = next(csv.reader([line], strict=True))
                except csv.Error as e:
                    raise UsageError("%s:%d: %s" % (path, line_no, e))
                if len(fields) > MAX_COLUMNS:
                    raise UsageError("%s:%d: more than %d columns" % (path, line_no, MAX_COLUMNS))
                if names is None:
                    names = [column_name(x, j + 1) for j, x in enumerate(fields)]
                    columns = [[] for _ in fields]
                    continue
                if len(fields) != len(names):
                    raise UsageError("%s:%d: %d fields, but the header has %d"
                                     % (path, line_no, len(fields), len(names)))
                if (n_rows + 1) * len(names) > MAX_VALUES:
                    raise UsageError("%s:%d: more than %d cells in the file" % (path, line_no, MAX_VALUES))
                for j, cell in enumerate(fields):
                    try:
                        v = parse_cell(cell)
                    except ValueError as e:
                        raise UsageError("%s:%d: column %d: %s" % (path, line_no, j + 1, e))
                    if v is None:
                        if j != 0:
                            raise UsageError("%s:%d: column %d: not a number" % (path, line_no, j + 1))
                        col0_is_label = True
                        v = math.nan
                    columns[j].append(v)
                n_rows += 1
    except OSError:
        raise UsageError("%s: read error" % path)
    if names is None:
        raise UsageError("%s: no header row" % path)
    if n_rows == 0:
        raise UsageError("%s: no data rows" % path)
    first = 1 if col0_is_label else 0
    if first >= len(names):
        raise UsageError("%s: no numeric column" % path)
    return names[first:], columns[first:]


# ---- command line ------------------------------------------------------------------------------------


def parse_horizon(s):
    if s == "" or not all("0" <= c <= "9" for c in s) or len(s.lstrip("0")) > 7:
        return None
    v = int(s)
    return v if 1 <= v <= MAX_HORIZON else None


def parse_levels(arg):
    out = []
    for tok in arg.split(","):
        s = trim(tok)
        if len(tok) >= 64 or len(out) == MAX_LEVELS or not is_decimal(s):
            return None
        out.append(float(s))
    return out


def fmt(v):
    return "nan" if math.isnan(v) else "%.6g" % v


def run(args):
    horizon = parse_horizon(args.horizon)
    if horizon is None:
        raise UsageError("horizon must be an integer from 1 to %d, not '%s'" % (MAX_HORIZON, args.horizon))
    user_levels = None
    if args.levels is not None:
        user_levels = parse_levels(args.levels)
        if user_levels is None:
            raise UsageError("levels must be at most %d comma-separated numbers, e.g. 0.1,0.5,0.9, not '%s'"
                             % (MAX_LEVELS, args.levels))

    try:
        lib = cn.load_library(args.lib)  # None: $CUTENATIVE_LIB, $CN_LIB, then build/; checks the ABI version
    except cn.LoadError as e:
        raise LibraryError(str(e))

    params = cn.ModelParams()
    lib.cn_model_params_init(ctypes.byref(params))
    params.device_type = cn.CN_DEVICE_CUDA if args.device == "cuda" else cn.CN_DEVICE_CPU
    dt = ctypes.c_int(0)
    if lib.cn_dtype_from_name(args.dtype.encode("utf-8"), ctypes.byref(dt)) != cn.CN_STATUS_OK:
        raise UsageError("unknown dtype %s (f32, bf16 or f16)" % args.dtype)
    params.dtype = dt.value

    names, columns = read_csv(args.csv)

    err = ctypes.c_void_p()
    model = ctypes.c_void_p()
    req = ctypes.c_void_p()
    if lib.cn_error_create(ctypes.byref(err)) != cn.CN_STATUS_OK:
        raise LibraryError("error: cannot create an error object")
    try:
        cn.check(lib, lib.cn_model_create(os.fsencode(args.model_dir), ctypes.byref(params), ctypes.byref(model),
                                          err), err)
        cn.check(lib, lib.cn_forecast_request_create(ctypes.byref(req), err), err)
        for col in columns:
            values = (ctypes.c_float * len(col))(*col)
            cn.check(lib, lib.cn_forecast_request_add_series(req, values, len(col), -1, None, err), err)
        cn.check(lib, lib.cn_forecast_request_set_horizon(req, horizon, err), err)

        if user_levels:
            levels = (ctypes.c_float * len(user_levels))(*user_levels)
            cn.check(lib, lib.cn_forecast_request_set_quantiles(req, levels, len(levels), err), err)
        else:
            count = ctypes.c_size_t(0)
            cn.check(lib, lib.cn_model_get_quantiles(model, None, 0, ctypes.byref(count), err), err)
            levels = (ctypes.c_float * max(count.value, 1))()
            cn.check(lib, lib.cn_model_get_quantiles(model, levels, count.value, ctypes.byref(count), err), err)
            levels = levels[:count.value]
        levels = list(levels)  # float32 values, printed as C prints them
        n_levels = len(levels)

        shape = cn.ForecastShape()
        lib.cn_forecast_shape_init(ctypes.byref(shape))
        cn.check(lib, lib.cn_forecast_get_shape(model, req, ctypes.byref(shape), err), err)
        if (shape.n_series != len(columns) or shape.horizon != horizon or shape.n_outputs != n_levels
                or shape.n_values != shape.n_series * shape.n_outputs * shape.horizon
                or shape.n_values > sys.maxsize // 4):
            raise LibraryError("error: unexpected forecast shape: %d series x %d outputs x %d steps (%d values) "
                               "for %d series, %d quantile levels and horizon %d"
                               % (shape.n_series, shape.n_outputs, shape.horizon, shape.n_values,
                                  len(columns), n_levels, horizon))
        out = (ctypes.c_float * max(shape.n_values, 1))()
        cn.check(lib, lib.cn_forecast(model, req, None, out, shape.n_values, None, 0, err), err)

        # out is [series][quantile][step].
        h_total = shape.horizon
        lines = ["series step" + "".join(" q" + fmt(q) for q in levels)]
        for s, name in enumerate(names):
            for h in range(h_total):
                vals = " ".join(fmt(out[(s * n_levels + q) * h_total + h]) for q in range(n_levels))
                lines.append("%s %d" % (name, h + 1) + (" " + vals if n_levels else ""))
        text = "\n".join(lines) + "\n"
    finally:
        lib.cn_forecast_request_free(req)
        lib.cn_model_free(model)
        lib.cn_error_free(err)
    try:
        sys.stdout.flush()
        sys.stdout.buffer.write(text.encode("latin-1"))  # the CSV's bytes, as the C program writes them
        sys.stdout.buffer.flush()
    except OSError:
        raise LibraryError("error: cannot write the output")


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Forecast every numeric column of a CSV file with cutenative (ctypes).", allow_abbrev=False)
    parser.add_argument("model_dir")
    parser.add_argument("csv")
    parser.add_argument("horizon")
    parser.add_argument("levels", nargs="?", help="comma-separated quantile levels, e.g. 0.1,0.5,0.9")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
    parser.add_argument("--lib", help="path to libcutenative.so (default: $CUTENATIVE_LIB, $CN_LIB, then build/)")
    args = parser.parse_intermixed_args(argv)  # options anywhere; exits 2 on a usage error
    try:
        run(args)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    except LibraryError as e:
        print(e, file=sys.stderr)
        return 1
    except cn.CnError as e:
        print("error %s" % e, file=sys.stderr)  # error <STATUS>: <message>
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

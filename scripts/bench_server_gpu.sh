#!/usr/bin/env bash
# cutenative-server on the GPU under load, against direct C calls of the same work (issue #19). Runs on the
# CUDA machine (no Go there): needs .device/bin/ from scripts/build_server_for_device.sh (built on the
# CPU machine), build-gpu/libcutenative.so.0 from scripts/device_test.sh, and, unless --checkpoint names an
# existing one, the chronos-forecasting wheel in .whl/ to make the random-weight Chronos-2 base checkpoint.
# Carry `.device` and `.whl`.
#
#   scripts/bench_server_gpu.sh [--device cuda|cpu] [--dtype bf16] [--mode fused] [--duration SECONDS]
#       [--warmup SECONDS] [--clients 1,16,64] [--contexts 120,512] [--one-call 64] [--max-batch 64]
#       [--max-wait 2ms] [--checkpoint DIR] [--tiny] [--lib PATH] [--python PY] [--port N] [--no-http]
#
# Defaults: cuda, bf16, fused, 10 s per level after 2 s of warm-up, the library build-gpu/libcutenative.so.0,
# python3, checkpoint /tmp/cn_chronos2_base_random (made if absent, reused if present).
#
# 1. The server (-device/-dtype/-mode, -models chronos2=<checkpoint>, -max-batch 64 -queue 1024, -max-wait
#    default 2ms) on 127.0.0.1:PORT; /readyz awaited.
#    Then one request per context, alone: the server's answers, which step 5 compares with a direct call's.
# 2. cutenative-load at each client count (one run per level, after an uncounted warm-up run): it sends
#    the CSV's last 120 values (its default -length), horizon 16, the server's default levels 0.1/0.5/0.9.
#    /metrics is scraped around each level: library calls, series per call, time per call and in the queue.
# 3. Unless --no-http: the same levels from a Python HTTP client (scripts/direct_load.py http) at each
#    --contexts length, 512 included, which cutenative-load cannot send; its 120 rows show what the Python
#    client costs against cutenative-load.
# 4. SIGTERM to the server; its exit status is reported.
# 5. Direct C calls (scripts/direct_load.py direct, ctypes): the same checkpoint on the same device, dtype
#    and mode, the same request at each context, from 1/16/64 threads for the same duration; then one call of
#    --one-call series (what perfect merging would cost). First, per context, one call compared with the
#    server's answer (bit-identical expected: both are calls of one series).
# 6. A markdown table on stdout (device, date, every row). With $OUT set, also there: bench_server_gpu.md,
#    rows.jsonl, server.log, metrics.txt (the server's last /metrics).
#
# Time: 15 x (duration + warmup) for the levels (180 s at the defaults), plus making the base checkpoint
# (first run), loading the model twice and the one-call rows: about 4-5 minutes; --duration 5 --warmup 1
# about 2.5. Order on the CPU machine: scripts/device_bundle.sh (it empties .device) before
# scripts/build_server_for_device.sh. On the lent machine, library and benchmark in one command (a machine
# left idle is taken back with its build-gpu/):
#   scripts/device_test.sh -DCN_BUILD_TESTS=OFF -DCN_BUILD_EXAMPLES=OFF >/dev/null; scripts/bench_server_gpu.sh
# with carry [".device", ".whl/chronos_forecasting-2.3.2-py3-none-any.whl"].
#
# Local test on a CPU machine (a tiny random checkpoint, short levels, the CPU library):
#   scripts/build_server_for_device.sh /work/main/build
#   scripts/bench_server_gpu.sh --device cpu --dtype f32 --tiny --duration 2 --warmup 0.5 \
#       --lib /work/main/build/libcutenative.so.0 --python ~/.cache/cutenative/venv-ref/bin/python
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
device=cuda dtype=bf16 mode=fused duration=10 warmup=2 clients=1,16,64 contexts=120,512 one_call=64
max_batch=64 max_wait=2ms checkpoint="" tiny=0 lib="$root/build-gpu/libcutenative.so.0" py=python3 port=18080
http=1
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device="$2"; shift 2 ;;
        --dtype) dtype="$2"; shift 2 ;;
        --mode) mode="$2"; shift 2 ;;
        --duration) duration="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --clients) clients="$2"; shift 2 ;;
        --contexts) contexts="$2"; shift 2 ;;
        --one-call) one_call="$2"; shift 2 ;;
        --max-batch) max_batch="$2"; shift 2 ;;
        --max-wait) max_wait="$2"; shift 2 ;;
        --checkpoint) checkpoint="$2"; shift 2 ;;
        --tiny) tiny=1; shift ;;
        --lib) lib="$2"; shift 2 ;;
        --python) py="$2"; shift 2 ;;
        --port) port="$2"; shift 2 ;;
        --no-http) http=0; shift ;;
        -h | --help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench_server_gpu.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "bench_server_gpu.sh: $*" >&2; exit 1; }
bin="$root/.device/bin"
helper="$root/scripts/direct_load.py"
url="http://127.0.0.1:$port"
for f in "$bin/cutenative-server" "$bin/cutenative-load"; do
    [ -x "$f" ] || die "no $f: run scripts/build_server_for_device.sh on the CPU machine and carry .device"
done
[ -e "$lib" ] || die "no library $lib (scripts/device_test.sh builds build-gpu/)"
lib="$(cd "$(dirname "$lib")" && pwd)/$(basename "$lib")"
[ -e "$(dirname "$lib")/libcutenative.so.0" ] || die "no libcutenative.so.0 beside $lib (the binaries' soname)"
[ -z "$checkpoint" ] && checkpoint="${TMPDIR:-/tmp}/cn_chronos2_$([ "$tiny" = 1 ] && echo tiny || echo base)_random"
out="${OUT:-}"
work="$(mktemp -d "${TMPDIR:-/tmp}/cn_bench_server.XXXXXX")"
rows="$work/rows.jsonl"
: >"$rows"
status=0

# The library (and the binaries) find the torch this python has.
torchlib="$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__) + "/lib")')" ||
    die "$py cannot import torch"
LD_LIBRARY_PATH="$(dirname "$lib"):$torchlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
export CUTENATIVE_LIB="$lib"

# ---- the checkpoint ----
if [ -f "$checkpoint/config.json" ]; then
    echo "reusing checkpoint $checkpoint" >&2
else
    if ! "$py" -c 'import chronos.chronos2' 2>/dev/null; then
        whl=("$root"/.whl/chronos_forecasting-*.whl)
        [ -e "${whl[0]}" ] ||
            die "chronos (chronos-forecasting) is not importable and .whl/ has no chronos_forecasting wheel"
        site="${TMPDIR:-/tmp}/site"
        "$py" -m pip install -q --no-index --no-deps --no-compile --target "$site" "${whl[@]}" ||
            die "cannot install ${whl[*]}"
        export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    fi
    echo "making checkpoint $checkpoint" >&2
    mkdir -p "$checkpoint"
    CN_CKPT="$checkpoint" CN_TINY="$tiny" "$py" - "$root" <<'EOF' || die "cannot make the checkpoint"
import os, sys, time
root = sys.argv[1]
sys.path[:0] = [os.path.join(root, "scripts"), os.path.join(root, "python")]
from chronos2_bench.checkpoint import build_checkpoint
t0 = time.time()
n, _ = build_checkpoint(os.environ["CN_CKPT"], os.environ["CN_TINY"] == "1")
print("checkpoint: %d parameters (%.2fM), %.1f s" % (n, n / 1e6, time.time() - t0), file=sys.stderr)
EOF
fi

# ---- the series: 1024 values, seeded (trend + yearly season + noise); every request takes its tail ----
"$py" - "$work/series.csv" <<'EOF'
import math, random, sys
rng = random.Random(20261124)
with open(sys.argv[1], "w") as f:
    f.write("t,value\n")
    for i in range(1024):
        f.write("%d,%.4f\n" % (i, 100 + 0.1 * i + 20 * math.sin(2 * math.pi * i / 12) + rng.gauss(0, 3)))
EOF

# ---- what ran where ----
date_utc="$(date -u '+%Y-%m-%d %H:%M UTC')"
if [ "${device%%:*}" = cuda ]; then
    gpu="$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
else
    gpu="no GPU (--device $device)"
fi
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) CPUs"
versions="$("$py" - "$root" <<'EOF'
import ctypes, os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "python"))
import cutenative_ctypes as cn
lib = cn.load_library()
import torch
print("%s; torch %s, CUDA %s" % (lib.cn_build_info().decode(), torch.__version__, torch.version.cuda))
EOF
)" || die "cannot load $lib"
params="$("$py" -c 'import json, math, os, sys
d = sys.argv[1]; cfg = json.load(open(os.path.join(d, "config.json"))); n = 0
for f in os.listdir(d):
    if f.endswith(".safetensors"):
        fh = open(os.path.join(d, f), "rb"); h = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
        n += sum(math.prod(v["shape"]) for k, v in h.items() if k != "__metadata__")
print("d_model %d, %d layers, %.2fM parameters" % (cfg["d_model"], cfg["num_layers"], n / 1e6))' "$checkpoint")"
echo "device: $gpu; host: $cpu; $versions; $date_utc" >&2

# ---- 1-4: the server ----
server_pid=""
stop_server() {  # SIGTERM unless it has exited already; sets server_rc to its exit status
    if [ -n "$server_pid" ]; then
        kill -0 "$server_pid" 2>/dev/null && kill -TERM "$server_pid"
        wait "$server_pid"
        server_rc=$?
        server_pid=""
    fi
}
trap 'stop_server' EXIT
"$bin/cutenative-server" -listen "127.0.0.1:$port" -models "chronos2=$checkpoint" -device "$device" \
    -dtype "$dtype" -mode "$mode" -max-batch "$max_batch" -max-wait "$max_wait" -queue 1024 \
    >"$work/server.log" 2>&1 &
server_pid=$!
echo "server pid $server_pid, $url" >&2
if "$py" "$helper" ready --url "$url" --pid "$server_pid" --timeout 900; then
    "$py" "$helper" answers --url "$url" --csv "$work/series.csv" --context "$contexts" --horizon 16 \
        >"$work/answers.json" || { echo "bench_server_gpu.sh: the check requests failed" >&2; status=1; }
    "$py" "$helper" load --url "$url" --csv "$work/series.csv" --horizon 16 --concurrency "$clients" \
        --duration "$duration" --warmup "$warmup" -- "$bin/cutenative-load" >>"$rows" ||
        { echo "bench_server_gpu.sh: the cutenative-load levels failed" >&2; status=1; }
    if [ "$http" = 1 ]; then
        "$py" "$helper" http --url "$url" --csv "$work/series.csv" --context "$contexts" --horizon 16 \
            --concurrency "$clients" --duration "$duration" --warmup "$warmup" >>"$rows" ||
            { echo "bench_server_gpu.sh: the Python-client levels failed" >&2; status=1; }
    fi
    "$py" -c 'import sys; sys.path.insert(0, sys.argv[1]); import direct_load as d
print(d.http_get(sys.argv[2], "/metrics")[1], end="")' "$root/scripts" "$url" >"$work/metrics.txt" || true
else
    status=1
    tail -30 "$work/server.log" >&2
fi
server_rc=0
stop_server
trap - EXIT
echo "server exited with status $server_rc (SIGTERM sent if it was still running)" >&2
[ "$server_rc" = 0 ] || { status=1; tail -30 "$work/server.log" >&2; }

# ---- 5: direct C calls ----
compare=()
[ -s "$work/answers.json" ] && compare=(--compare "$work/answers.json")
"$py" "$helper" direct --lib "$lib" --model "$checkpoint" --device "$device" --dtype "$dtype" --mode "$mode" \
    --csv "$work/series.csv" --context "$contexts" --horizon 16 --concurrency "$clients" \
    --duration "$duration" --warmup "$warmup" --one-call "$one_call" \
    "${compare[@]}" >>"$rows" ||
    { echo "bench_server_gpu.sh: the direct calls failed" >&2; status=1; }

# ---- 6: the table ----
"$py" "$helper" table "$rows" \
    --title "cutenative-server (-device $device -dtype $dtype -mode $mode) against direct C calls, $date_utc" \
    --note "Device: $gpu; host: $cpu; $versions" \
    --note "Model: random-weight Chronos-2 $([ "$tiny" = 1 ] && echo tiny || echo base) ($params), $checkpoint" \
    --note "Request: one univariate series (context = its length), horizon 16, levels 0.1/0.5/0.9; server: -max-batch $max_batch -max-wait $max_wait -queue 1024, loopback; ${duration} s per level after ${warmup} s of uncounted warm-up" \
    --note "cutenative-load sends the last 120 values of the CSV (its default -length 120); the Python HTTP client and the direct calls send the last N for each context N. Direct calls: one model, threads calling cn_forecast (ctypes releases the GIL), one call per request; the one-call row is one call of that many copies of the series (req/s there is series/s; p50/p99 of the call)" \
    --note "Server rows: library calls, series per call, ms per library call (mean) and ms queued (mean) come from /metrics (cutenative_batch_series, cutenative_inference_seconds, cutenative_queue_seconds) scraped before and after each level; median/max are histogram bucket bounds (1, 2, 4, ... 1024); cutenative-load's one check request per level is counted in them. One-call rows: ms per library call is the median call" \
    >"$work/table.md" || status=1
cat "$work/table.md"
if [ -n "$out" ]; then
    mkdir -p "$out"
    cp "$work/table.md" "$out/bench_server_gpu.md"
    cp "$rows" "$out/rows.jsonl"
    cp "$work/server.log" "$out/server.log"
    [ -s "$work/metrics.txt" ] && cp "$work/metrics.txt" "$out/metrics.txt"
fi
rm -rf "$work"
exit "$status"

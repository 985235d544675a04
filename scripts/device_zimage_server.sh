#!/usr/bin/env bash
# On the CUDA machine, after scripts/device_zimage_lora.sh (build-gpu/ built, the full-size random-weight pipeline
# in /tmp/zimage_full): POST /v1/images/generations end to end at 1024x1024, 8 steps, against the direct
# cn_generate calls of the LoRA bench (its "base" rows). Needs .device/bin/cutenative-server from
# scripts/build_server_for_device.sh (built on the CPU machine: the GPU machine has no Go).
#   run(command="scripts/device_zimage_server.sh", carry=[".device"])
# One warm-up request, then --reps JSON requests and --reps Accept: image/png requests, one at a time; for each, the
# client's wall time (curl) and the server's timings_ms (queue, generate = the library call, encode = PNG, total);
# a summary line with the medians and the server's overhead = total - generate - encode (routing is 0: no LoRA).
# Output: $OUT/zimage_server.jsonl and the server's log.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/build-gpu-logs}"
mkdir -p "$out"
dir="${CN_ZIMAGE_GPU_DIR:-/tmp/zimage_full}"
reps="${1:-5}"
device="${CN_ZIMAGE_DEVICE:-cuda}" dtype="${CN_ZIMAGE_DTYPE:-bf16}" size="${CN_ZIMAGE_SIZE:-1024}" # a CPU check: cpu, f32, 32
port=8093
server="$root/.device/bin/cutenative-server"
[ -x "$server" ] || { echo "no $server: run scripts/build_server_for_device.sh on the CPU machine" >&2; exit 1; }
[ -d "$dir/transformer" ] || { echo "no pipeline in $dir: run scripts/device_zimage_lora.sh first" >&2; exit 1; }
"$server" -listen "127.0.0.1:$port" -models "img=$dir;device=$device;dtype=$dtype" -timeout 300s -log-level warn \
    >"$out/zimage_server.log" 2>&1 &
pid=$!
for _ in $(seq 600); do curl -sf "localhost:$port/readyz" >/dev/null && break; sleep 0.5; done
curl -sf "localhost:$port/readyz" >/dev/null || { echo "the server did not get ready" >&2; tail -20 "$out/zimage_server.log"; kill $pid; exit 1; }
body='{"prompt": "Young Chinese woman in red Hanfu, intricate embroidery, soft light", "size": "'"${size}x${size}"'", "seed": 42}'
req() { # $1: json|png; prints one JSON line
    local kind=$1 hdr=() t
    [ "$kind" = png ] && hdr=(-H 'Accept: image/png' -D /tmp/zs_h)
    t=$(curl -s --fail-with-body -o /tmp/zs_body -w '%{time_total}' "localhost:$port/v1/images/generations" \
        -H 'Content-Type: application/json' "${hdr[@]}" -d "$body") || { cat /tmp/zs_body; return 1; }
    python3 - "$kind" "$t" <<'PY'
import json, sys
kind, t = sys.argv[1], float(sys.argv[2]) * 1000
if kind == "png":
    facts = json.loads([l.split(":", 1)[1] for l in open("/tmp/zs_h") if l.lower().startswith("x-cutenative:")][0])
    size = len(open("/tmp/zs_body", "rb").read())
else:
    facts = json.load(open("/tmp/zs_body"))["cutenative"]
    size = len(open("/tmp/zs_body", "rb").read())
tm = facts["timings_ms"]
print(json.dumps({"kind": kind, "client_ms": round(t, 2), "bytes": size, **{k: round(v, 3) for k, v in sorted(tm.items())},
                  "overhead_ms": round(tm["total"] - tm["generate"] - tm["encode"] - tm["route"], 3)}))
PY
}
rc=0
req json >/dev/null || rc=1 # warm-up
: >"$out/zimage_server.jsonl"
for kind in json png; do
    for _ in $(seq "$reps"); do
        line=$(req "$kind") || rc=1
        echo "$line" | tee -a "$out/zimage_server.jsonl"
    done
done
python3 - "$out/zimage_server.jsonl" <<'PY' | tee -a "$out/zimage_server.jsonl"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{\"kind")]
out = {}
for kind in ("json", "png"):
    r = [x for x in rows if x["kind"] == kind]
    if r:
        out[kind] = {k: round(statistics.median(x[k] for x in r), 3) for k in ("client_ms", "total", "generate", "encode", "overhead_ms", "queue", "denoise", "text", "decode")}
print(json.dumps({"summary": out}))
PY
curl -s "localhost:$port/metrics" | grep -E '^cutenative_(images|image_steps|image_denoise|inference_seconds_(sum|count))' >"$out/zimage_server_metrics.txt"
kill -TERM $pid; wait $pid
exit "$rc"

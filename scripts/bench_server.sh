#!/usr/bin/env bash
# Loopback load test of cutenative-server on its embedded default model: 1, 16 and 64 concurrent
# clients, with micro-batching on (-max-batch 64) and off (-max-batch 1). Prints markdown rows for
# docs/benchmarks.md.
#   scripts/bench_server.sh [duration per level, default 10s]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
duration="${1:-10s}"
"$CN_ROOT/scripts/build.sh" >/dev/null
bin="$CN_BUILD/bin"
mkdir -p "$bin"
"$CN_ROOT/scripts/go.sh" build -o "$bin/cutenative-server" ./cmd/cutenative-server
"$CN_ROOT/scripts/go.sh" build -o "$bin/cutenative-load" ./cmd/cutenative-load
port=18080
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $(date -u +%Y-%m-%d)"
first=1
for batch in 64 1; do
    label="batching=$([ "$batch" = 1 ] && echo off || echo on)"
    "$bin/cutenative-server" -listen "127.0.0.1:$port" -max-batch "$batch" -queue 1024 >"$CN_BUILD/bench-server.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    out=$("$bin/cutenative-load" -url "http://127.0.0.1:$port" -concurrency 1,16,64 -duration "$duration" \
        -csv "$CN_ROOT/examples/data/airpassengers.csv" -horizon 12 -label "$label")
    if [ "$first" = 1 ]; then echo "$out"; first=0; else echo "$out" | grep -v -e '^| label' -e '^|---'; fi
    kill -TERM "$pid"; wait "$pid" || true
done

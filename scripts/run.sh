#!/usr/bin/env bash
# The README's main job: set up, build the library and the Go server, start the server on its embedded
# default model (a small Chronos-2), send it a forecast for a real public series (monthly airline
# passengers 1949-1960, examples/data/airpassengers.csv), print the forecast and write a fan chart.
#   scripts/run.sh [horizon] [png path]      (defaults: 24, ./forecast.png)
# Environment: CUTENATIVE_LISTEN (default 127.0.0.1:8080) and the server's other variables (README).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
horizon="${1:-24}"
png="${2:-$PWD/forecast.png}"
case "$png" in /*) ;; *) png="$PWD/$png" ;; esac
log() { echo "[run] $*" >&2; }
"$CN_ROOT/scripts/setup.sh"
# The build's full output goes to a log; what is being compiled shows on stderr as it goes (a cold build takes
# minutes; a built tree prints nothing), and a failed configure or build prints the log's tail on stderr.
mkdir -p "$CN_BUILD"
build_log="$CN_BUILD/build.log"
log "building the library into $CN_BUILD (full log: $build_log)"
if ! "$CN_ROOT/scripts/build.sh" 2>&1 | tee "$build_log" |
        { grep --line-buffered -E '^(-- cutenative:|\[ *[0-9]+%\] (Building|Linking))' >&2 || true; }; then
    echo "run.sh: the build failed; the end of $build_log:" >&2
    tail -n 60 "$build_log" >&2
    exit 1
fi
bin="$CN_BUILD/bin"
mkdir -p "$bin"
log "building the Go server and demo client into $bin"
"$CN_ROOT/scripts/go.sh" build -o "$bin/cutenative-server" ./cmd/cutenative-server
"$CN_ROOT/scripts/go.sh" build -o "$bin/cutenative-demo" ./cmd/cutenative-demo

listen="${CUTENATIVE_LISTEN:-127.0.0.1:8080}"
log="$CN_BUILD/cutenative-server.log"
CUTENATIVE_LISTEN="$listen" "$bin/cutenative-server" >"$log" 2>&1 &
server=$!
cleanup() {
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
}
trap cleanup EXIT
echo "server: pid $server on http://$listen (log: $log)"
"$bin/cutenative-demo" -url "http://$listen" -csv "$CN_ROOT/examples/data/airpassengers.csv" -horizon "$horizon" \
    -png "$png" -wait 120s

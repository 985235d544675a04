#!/usr/bin/env bash
# Loopback abuse test of cutenative-server (go/cmd/cutenative-abuse): for each scenario, starts a fresh
# server with the configuration the scenario needs on a free loopback port, waits for /readyz, runs the
# scenario with -pid (RSS, liveness), stops the server (SIGTERM, SIGKILL after 10 s) and goes on with a new
# one (also after a crash). Prints the machine, one markdown table and what happened to servers that ended.
#   scripts/abuse_server.sh [server binary]      # default: builds go/cmd/cutenative-server against $CN_BUILD
# Environment:
#   CN_ABUSE_SERVER     server binary (the argument wins): measure an older build with the same script
#   CN_ABUSE_DURATION   each measuring phase (default 10s)
#   CN_ABUSE_SCENARIOS  comma-separated (default: big-bodies-48,big-bodies-64,idle-flood,rollout-starve,
#                       embed-starve,kronos-memory,deadline,combined,hardening)
#   CN_ABUSE_ARGS       more flags for cutenative-abuse (e.g. "-attackers 8 -rss-limit-gb 8")
#   CN_ABUSE_LABEL      text printed after the server's version (e.g. "before: HEAD 070a5f4")
#   CN_ABUSE_KEEP=1     keep the work directory (server logs) and print its path
# The table goes to stdout, progress to stderr.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
server="${1:-${CN_ABUSE_SERVER:-}}"
duration="${CN_ABUSE_DURATION:-10s}"
scenarios="${CN_ABUSE_SCENARIOS:-big-bodies-48,big-bodies-64,idle-flood,rollout-starve,embed-starve,kronos-memory,deadline,combined,hardening}"
read -r -a extra <<<"${CN_ABUSE_ARGS:-}"

work="$(mktemp -d /tmp/cn-abuse.XXXXXX)"
pid=""
cleanup() {
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    if [ "${CN_ABUSE_KEEP:-0}" = 1 ]; then echo "abuse_server.sh: logs kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

if [ -z "$server" ]; then
    echo "abuse_server.sh: building cutenative-server" >&2
    CN_GO_DIR="$CN_ROOT/go" "$CN_ROOT/scripts/go.sh" build -o "$work/cutenative-server" ./cmd/cutenative-server
    server="$work/cutenative-server"
fi
server="$(cd "$(dirname "$server")" && pwd)/$(basename "$server")"
[ -x "$server" ] || { echo "abuse_server.sh: $server is not an executable" >&2; exit 1; }
tool="$work/cutenative-abuse"
CN_GO_DIR="$CN_ROOT/go" "$CN_ROOT/scripts/go.sh" build -o "$tool" ./cmd/cutenative-abuse

minilm="$(cn_minilm_dir)"
catalog="$CN_ROOT/go/lora/catalogs/default.json"
models="default=$CN_ROOT/go/cmd/cutenative-server/defaultmodel,kronos=$CN_ROOT/tests/fixtures/kronos/tiny_a"

# config_args NAME: the server flags a scenario needs (one per line).
config_args() {
    case "$1" in
        embed-starve) printf '%s\n' -embed-model "$minilm" -lora-catalog "$catalog" ;;
        kronos-memory) printf '%s\n' -models "$models" ;;
        combined | hardening) printf '%s\n' -models "$models" -embed-model "$minilm" -lora-catalog "$catalog" ;;
        *) ;; # the embedded default model
    esac
}
needs_minilm() { case "$1" in embed-starve | combined | hardening) return 0 ;; esac; return 1; }

alive() { [ -e "/proc/$1" ] && ! grep -q ') Z' "/proc/$1/stat" 2>/dev/null; }

# row SCENARIO TEXT: a table row for a scenario that could not run (8 columns).
row() { echo "| $1 | - | - | - | - | - | - | $2 |"; }

rows="$work/rows.md"
notes="$work/notes.md"
: >"$rows"
: >"$notes"
IFS=',' read -r -a list <<<"$scenarios"
for s in "${list[@]}"; do
    s="$(echo "$s" | xargs)"
    [ -n "$s" ] || continue
    if needs_minilm "$s" && [ -z "$minilm" ]; then
        row "$s" "skipped: no MiniLM model directory (scripts/setup.sh installs it; or set CN_MINILM_DIR)" >>"$rows"
        continue
    fi
    mapfile -t args < <(config_args "$s")
    port="$("$tool" -free-port)"
    log="$work/server-$s.log"
    echo "abuse_server.sh: $s: starting the server on 127.0.0.1:$port ${args[*]:-}" >&2
    "$server" -listen "127.0.0.1:$port" "${args[@]}" >"$log" 2>&1 &
    pid=$!
    if ! "$tool" -url "http://127.0.0.1:$port" -pid "$pid" -wait-ready 180s; then
        row "$s" "the server did not become ready: $(tail -3 "$log" | tr '\n|' ' /')" >>"$rows"
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
        continue
    fi
    started=$(date +%s)
    "$tool" -url "http://127.0.0.1:$port" -pid "$pid" -scenarios "$s" -duration "$duration" \
        -csv "$CN_ROOT/examples/data/airpassengers.csv" -header=false "${extra[@]}" >>"$rows" ||
        row "$s" "cutenative-abuse failed (exit status $?)" >>"$rows"
    took=$(($(date +%s) - started))
    if alive "$pid"; then
        kill -TERM "$pid"
        for _ in $(seq 100); do alive "$pid" || break; sleep 0.1; done
        if alive "$pid"; then
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            echo "- $s: after the scenario, the server had not exited 10 s after SIGTERM: SIGKILL" >>"$notes"
        else
            status=0
            wait "$pid" || status=$?
            [ "$status" = 0 ] || echo "- $s: after the scenario, the server exited with status $status on SIGTERM" >>"$notes"
        fi
    else
        status=0
        wait "$pid" || status=$?
        why="$(grep -m3 -E 'fatal error|out of memory|panic|SIGSEGV|signal' "$log" | cut -c1-200 | tr '\n' ' ' || true)"
        echo "- $s: the server ended during the scenario (exit status $status$([ "$status" -gt 128 ] && echo ", signal $((status - 128))")); its log: ${why:-nothing about it}" >>"$notes"
    fi
    pid=""
    echo "abuse_server.sh: $s done in ${took}s" >&2
done

echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo) memory; $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "server: $server ($("$server" -version 2>/dev/null | head -1 || echo "version unknown"))${CN_ABUSE_LABEL:+, $CN_ABUSE_LABEL}; duration per phase: $duration"
echo
"$tool" -header-only
cat "$rows"
if [ -s "$notes" ]; then
    echo
    echo "Server exits:"
    echo
    cat "$notes"
fi

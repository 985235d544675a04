#!/usr/bin/env bash
# The README's test command: sets up what is missing, builds, runs every C++ test (ctest; "gpu"-labelled
# tests skip without a CUDA device), the Go tests with the race detector, the server's abuse tests without it,
# a short fuzz run of the server's request
# decoding, go vet of examples/go, a gofmt check, the C/C++ format check (scripts/check_format.sh) and the
# README's sh blocks (scripts/check_readme.py).
#   scripts/test.sh [--no-go]      (--no-go on machines without Go, e.g. the CUDA machine)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
setup_flags=()
run_go=1
for a in "$@"; do
    case "$a" in
        --no-go) run_go=0; setup_flags+=(--no-go) ;;
        *) setup_flags+=("$a") ;;
    esac
done
"$CN_ROOT/scripts/setup.sh" "${setup_flags[@]}"
"$CN_ROOT/scripts/build.sh"
# The embedding tests run on the real MiniLM weights that setup.sh installed; they must not skip here.
CN_MINILM_DIR="$(cn_minilm_dir)"
export CN_MINILM_DIR CN_REQUIRE_MINILM=1
# Likewise the Z-Image tokenizer tests on the real Qwen3 tokenizer files.
CN_QWEN_TOKENIZER_DIR="$(cn_qwen_tokenizer_dir)"
export CN_QWEN_TOKENIZER_DIR CN_REQUIRE_QWEN_TOKENIZER=1
# And the OpenAPI document's validation by openapi-spec-validator (setup.sh installs it into $CN_VENV).
export CN_VENV CN_REQUIRE_OPENAPI_VALIDATOR=1
echo "== cpu"
# The processor and the numerics path the tests run on (results must not depend on them; see docs/architecture.md).
grep -m1 "model name" /proc/cpuinfo 2>/dev/null || true
echo "flags: $(grep -m1 -o -w -E 'avx2|avx512f|fma|amx_tile' /proc/cpuinfo 2>/dev/null | sort -u | tr '\n' ' ')"
"$CN_BUILD/examples/c/cn_model_info" --numerics || true
# Every suite runs even when an earlier one fails (a failing C++ test must not hide the Go results); the
# script fails at the end if any did.
failed=()
echo "== ctest"
(cd "$CN_BUILD" && ctest --output-on-failure -j "${CN_JOBS:-$(nproc)}") || failed+=("ctest")
echo "== clang-format (C/C++/CUDA)"
"$CN_ROOT/scripts/check_format.sh" || failed+=("format")
if [ "$run_go" = 1 ]; then
    echo "== go test -race"
    "$CN_ROOT/scripts/go.sh" test -race -count=1 ./... || failed+=("go test")
    # The abuse tests measure memory and latency, which the race detector distorts: they build without it
    # (go/server/abuse_test.go), so they run here, after the race run, in one process of their own.
    echo "== go test (abuse: 8 MB bodies, expensive small requests; no race detector)"
    "$CN_ROOT/scripts/go.sh" test -count=1 -run '^TestAbuse' ./server || failed+=("go abuse")
    echo "== go fuzz (request decoding, 15 s)"
    "$CN_ROOT/scripts/go.sh" test -run '^$' -fuzz '^FuzzDecodeForecast$' -fuzztime 15s ./server || failed+=("go fuzz")
    "$CN_ROOT/scripts/go.sh" test -run '^$' -fuzz '^FuzzDecodeImageRequest$' -fuzztime 10s ./server || failed+=("go fuzz images")
    echo "== go vet (examples/go)"
    CN_GO_DIR="$CN_ROOT/examples/go" "$CN_ROOT/scripts/go.sh" vet ./... || failed+=("go vet")
    echo "== gofmt -l (go, examples/go)"
    unformatted=$("$("$(cn_go)" env GOROOT)/bin/gofmt" -l "$CN_ROOT/go" "$CN_ROOT/examples/go")
    if [ -n "$unformatted" ]; then
        echo "not gofmt-formatted (run: gofmt -w on them):" >&2
        echo "$unformatted" >&2
        failed+=("gofmt")
    fi
    # The README's sh blocks, run as written (they name build/ and need Go; ~1 minute on a built tree).
    echo "== README blocks (scripts/check_readme.py)"
    if [ "$(cd "$CN_BUILD" && pwd -P)" = "$(cd "$CN_ROOT" && pwd -P)/build" ]; then
        python3 "$CN_ROOT/scripts/check_readme.py" || failed+=("README")
    else
        echo "skipped: the README's commands use build/, and CN_BUILD is $CN_BUILD"
    fi
fi
if [ ${#failed[@]} -gt 0 ]; then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "== all tests passed"

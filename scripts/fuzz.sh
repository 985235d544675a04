#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan + UBSan and runs them:
#   fuzz_format  the LibTorch-free parsers and the WordPiece tokenizer (tests/fuzz/fuzz_format.cpp)
#   fuzz_bpe     the Qwen2 byte-level BPE tokenizer and its text layer (tests/fuzz/fuzz_bpe.cpp; with
#                $CN_QWEN_TOKENIZER_DIR set, selector 1 encodes with the real Qwen3 tokenizer)
#   scripts/fuzz.sh [runs] [target...]   (default 1000000 executions of each target; 0 = only replay the seed
#                                         corpora; targets default to all)
# New inputs the fuzzer finds go to $CN_CACHE/fuzz-corpus[-<target>] (outside the repo); crashes to
# $CN_CACHE/fuzz-crashes. CN_FUZZ_SECONDS=n bounds each run by time instead (-max_total_time).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
runs="${1:-1000000}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_format fuzz_bpe)
CXX="${CN_FUZZ_CXX:-clang++}"
out="$CN_CACHE/fuzz"
mkdir -p "$out" "$CN_CACHE/fuzz-crashes"
text_srcs=(core/tokenizers/wordpiece.cpp core/tokenizers/utf8.cpp core/tokenizers/unicode_tables.cpp core/tokenizers/bpe.cpp
           core/tokenizers/bpe_unicode.cpp core/tokenizers/bpe_unicode_tables.cpp core/tokenizers/bpe_decomp_tables.cpp)
format_srcs=(core/format/json_strict.cpp core/format/mapped_file.cpp core/format/safetensors.cpp
             core/format/shard_index.cpp core/format/checkpoint.cpp core/format/model_config.cpp
             core/models/chronos2/chronos2_config.cpp)
cd "$CN_ROOT"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
for target in "${targets[@]}"; do
    case "$target" in
        fuzz_format) seeds=tests/fuzz/corpus; found="$CN_CACHE/fuzz-corpus" ;;
        fuzz_bpe) seeds=tests/fuzz/corpus_bpe; found="$CN_CACHE/fuzz-corpus-bpe" ;;
        *) echo "fuzz.sh: unknown target $target" >&2; exit 2 ;;
    esac
    mkdir -p "$found"
    "$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
        -fno-sanitize-recover=undefined -I"$CN_ROOT" -DCN_FIXTURES_DIR="\"$CN_ROOT/tests/fixtures\"" \
        "${format_srcs[@]}" "${text_srcs[@]}" "tests/fuzz/$target.cpp" -o "$out/$target"
    if [ "$runs" = 0 ]; then
        "$out/$target" -runs=0 "$seeds"
    else
        limit=(-runs="$runs")
        [ -z "${CN_FUZZ_SECONDS:-}" ] || limit=(-max_total_time="$CN_FUZZ_SECONDS")
        "$out/$target" "${limit[@]}" -max_len=4096 -artifact_prefix="$CN_CACHE/fuzz-crashes/" \
            -print_final_stats=1 "$found" "$seeds"
    fi
done

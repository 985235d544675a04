#!/usr/bin/env bash
# Builds the libFuzzer target over the LibTorch-free parsers and the WordPiece tokenizer with clang + ASan + UBSan and runs it.
#   scripts/fuzz.sh [runs]     (default 1000000 executions; 0 = only replay the seed corpus)
# New inputs the fuzzer finds go to $CN_CACHE/fuzz-corpus (outside the repo); crashes to $CN_CACHE/fuzz-crashes.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
runs="${1:-1000000}"
CXX="${CN_FUZZ_CXX:-clang++}"
out="$CN_CACHE/fuzz"
mkdir -p "$out" "$CN_CACHE/fuzz-corpus" "$CN_CACHE/fuzz-crashes"
srcs=(core/format/json_strict.cpp core/format/mapped_file.cpp core/format/safetensors.cpp
      core/format/shard_index.cpp core/format/checkpoint.cpp core/format/model_config.cpp
      core/models/chronos2/chronos2_config.cpp core/tokenizers/wordpiece.cpp core/tokenizers/unicode_tables.cpp
      tests/fuzz/fuzz_format.cpp)
cd "$CN_ROOT"
"$CXX" -std=c++17 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -I"$CN_ROOT" "${srcs[@]}" -o "$out/fuzz_format"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
if [ "$runs" = 0 ]; then
    "$out/fuzz_format" -runs=0 tests/fuzz/corpus
else
    "$out/fuzz_format" -runs="$runs" -max_len=4096 -artifact_prefix="$CN_CACHE/fuzz-crashes/" \
        -print_final_stats=1 "$CN_CACHE/fuzz-corpus" tests/fuzz/corpus
fi

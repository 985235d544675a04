#!/usr/bin/env bash
# The README's main job. Until the server exists it builds the library and runs the C example on a
# small generated Chronos-2 checkpoint, printing what the library knows about the model.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$CN_ROOT/scripts/setup.sh" --no-go
"$CN_ROOT/scripts/build.sh"
model_dir="$CN_CACHE/models/test-chronos2"
mkdir -p "$model_dir"
"$CN_BUILD/tests/make_test_checkpoint" "$model_dir"
"$CN_BUILD/examples/c/cn_model_info" "$model_dir"

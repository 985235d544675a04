#!/usr/bin/env bash
# Prepares .device/ (git-ignored): what the CUDA machine lacks and cannot download, to be carried there
# with the working tree: the nlohmann-json headers and the googletest sources from this machine's Debian
# packages. Run before a `device` call that builds; name `.device` in its carry list.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$CN_ROOT/scripts/setup.sh" --no-go >/dev/null
dst="$CN_ROOT/.device"
rm -rf "$dst"
mkdir -p "$dst/include"
cp -r /usr/include/nlohmann "$dst/include/"
cp -r /usr/src/googletest "$dst/googletest"
echo "bundled into $dst: $(du -sh "$dst" | cut -f1)"

#!/usr/bin/env bash
# Runs the go tool in go/ (or $CN_GO_DIR, e.g. examples/go) against the library in $CN_BUILD:
#   scripts/go.sh test -race ./...
#   CN_GO_DIR=examples/go scripts/go.sh run . <model_dir> <csv> <horizon>
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
GO="$(cn_go)" || { echo "go.sh: no Go >= 1.22; run scripts/setup.sh" >&2; exit 1; }
export CGO_ENABLED=1
# The binding finds the library through `#cgo pkg-config: cutenative`: the build tree's cutenative-uninstalled.pc
# (pkg-config prefers it over an installed cutenative.pc); the rpath lets test binaries run in place.
export PKG_CONFIG_PATH="$CN_BUILD${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export CGO_LDFLAGS="-Wl,-rpath,$CN_BUILD ${CGO_LDFLAGS:-}"
export GOPROXY=off GOTOOLCHAIN=local
export GOCACHE="${GOCACHE:-$CN_CACHE/go-build}"
export CN_TEST_BUILD_DIR="$CN_BUILD"
export GOFLAGS="${GOFLAGS:--mod=mod}"  # examples/go replaces the module with ../../go (no download)
cd "${CN_GO_DIR:-$CN_ROOT/go}"
exec "$GO" "$@"

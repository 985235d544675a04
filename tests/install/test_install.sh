#!/usr/bin/env bash
# Installs the build into a temporary prefix with LibTorch bundled (CN_BUNDLE_TORCH at install time), copies the
# prefix elsewhere and deletes the original, then, with no environment variables at run time (env -i):
#   - checks that no installed ELF file has an absolute RUNPATH/RPATH and that every library the consumers load
#     comes from the copied prefix or the system (none from the build machine's torch wheel or build tree);
#   - builds examples/c/model_info.c through pkg-config (+ an rpath) and through find_package(cutenative), and
#     runs both on the Chronos-2 fixture;
#   - runs the installed Go tools (bin/);
#   - builds a Go module outside the repository that requires github.com/cutenative/cutenative/go, fetched from
#     a file-system module proxy holding a zip of go/ (what `go get` downloads: nothing outside go/), no replace,
#     against the copied prefix through pkg-config, and runs it.
# Usage: test_install.sh <source dir> <build dir> [go executable]
set -euo pipefail
src="$(cd "$1" && pwd)"
build="$(cd "$2" && pwd)"
go_exe="${3:-}"
fixture="$src/tests/fixtures/chronos2/tiny_a"

tmp="$(mktemp -d)"
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- install with bundling, copy, delete the original ----
cmake -DCMAKE_INSTALL_PREFIX="$tmp/orig" -DCN_BUNDLE_TORCH=ON -P "$build/cmake_install.cmake" >"$tmp/install.log" ||
    { cat "$tmp/install.log"; fail "install"; }
# Hard links where the file system allows (the bundle is GBs with CUDA): every file at a new path, the original
# paths then deleted, which is what the loader sees of a copy.
cp -al "$tmp/orig" "$tmp/copied" 2>/dev/null || { rm -rf "$tmp/copied"; cp -a "$tmp/orig" "$tmp/copied"; }
rm -rf "$tmp/orig"
p="$tmp/copied"
lib="$p/lib"
[ -d "$lib" ] || lib="$p/lib64"
echo "bundled: $(ls "$lib/cutenative" | tr '\n' ' ')"
echo "bundle size: $(du -sh "$lib/cutenative" | cut -f1)"

# ---- no absolute search paths in anything installed ----
while IFS= read -r -d '' f; do
    head -c 4 "$f" | grep -q ELF || continue
    paths="$(readelf -d "$f" | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]/\2/p')"
    IFS=':' read -r -a entries <<<"$paths"
    for e in "${entries[@]}"; do
        case "$e" in '$ORIGIN'*|'${ORIGIN}'*|'') ;; *) fail "$f: absolute search path '$e' (in '$paths')";; esac
    done
done < <(find "$p" -type f -print0)
readelf -d "$lib/libcutenative.so" | grep -q 'RUNPATH.*\[\$ORIGIN:\$ORIGIN/cutenative\]' ||
    fail "libcutenative.so RUNPATH: $(readelf -d "$lib/libcutenative.so" | grep PATH)"

# What a program loads: every non-system library from the copied prefix.
check_loaded() {
    local out
    out="$(env -i ldd "$1")" || fail "ldd $1"
    if grep -q "not found" <<<"$out"; then echo "$out"; fail "$1: unresolved libraries"; fi
    local bad
    bad="$(grep '=>' <<<"$out" | awk '{print $3}' | grep -v -e "^$tmp/" -e '^/lib' -e '^/usr/lib' || true)"
    [ -z "$bad" ] || fail "$1 loads from outside the prefix and the system: $bad"
}

# ---- C consumer through pkg-config, with an rpath ----
pc="$(PKG_CONFIG_PATH="$lib/pkgconfig" pkg-config --cflags --libs cutenative)"
cc -std=c99 -o "$tmp/model_info_pc" "$src/examples/c/model_info.c" $pc -Wl,-rpath,"$lib"
check_loaded "$tmp/model_info_pc"
out="$(env -i "$tmp/model_info_pc" "$fixture")" || { echo "$out"; fail "model_info (pkg-config)"; }
grep -Eq 'kind: +chronos2' <<<"$out" || { echo "$out"; fail "model_info (pkg-config): no 'kind: chronos2'"; }
echo "pkg-config consumer: ok"

# ---- C consumer through find_package(cutenative) ----
cmake -S "$src/tests/install/cmake_consumer" -B "$tmp/cmake_consumer" -DCMAKE_PREFIX_PATH="$p" \
    -DCN_EXAMPLE="$src/examples/c/model_info.c" -DCMAKE_BUILD_TYPE=Release >"$tmp/consumer.log" 2>&1 &&
    cmake --build "$tmp/cmake_consumer" >>"$tmp/consumer.log" 2>&1 || { cat "$tmp/consumer.log"; fail "CMake consumer build"; }
check_loaded "$tmp/cmake_consumer/model_info"
out="$(env -i "$tmp/cmake_consumer/model_info" "$fixture")" || { echo "$out"; fail "model_info (CMake)"; }
grep -Eq 'kind: +chronos2' <<<"$out" || { echo "$out"; fail "model_info (CMake): no 'kind: chronos2'"; }
echo "find_package consumer: ok"

# ---- the installed Go tools start (they load the library before parsing flags) ----
for t in cutenative-server cutenative-load cutenative-loraeval; do
    if [ -x "$p/bin/$t" ]; then
        check_loaded "$p/bin/$t"
        rc=0
        out="$(env -i "$p/bin/$t" -h 2>&1)" || rc=$?
        # -h: the usage text (exit 0, 1 or 2 depending on the tool); a loader failure is 127 and its message.
        if [ "$rc" -gt 2 ] || [ -z "$out" ] || grep -q "error while loading shared libraries" <<<"$out"; then
            echo "$out"; fail "$t -h exited $rc"
        fi
        echo "bin/$t: ok"
    elif [ -n "$go_exe" ]; then
        fail "bin/$t not installed"
    fi
done

# ---- a Go module outside the repository, no replace ----
if [ -z "$go_exe" ]; then
    echo "no Go toolchain: Go consumer skipped"
    exit 0
fi
ver="v$(sed -n 's/^#define CN_ABI_VERSION_MAJOR \([0-9]*\)/\1/p' "$src/capi/include/cutenative.h").$(sed -n 's/^#define CN_ABI_VERSION_MINOR \([0-9]*\)/\1/p' "$src/capi/include/cutenative.h").0"
mod="github.com/cutenative/cutenative/go"
proxy="$tmp/proxy"
# The module zip as a proxy serves it: the files of go/ (tracked or not ignored), below <module>@<version>/.
python3 - "$src" "$proxy" "$mod" "$ver" <<'EOF'
import os, subprocess, sys, zipfile
src, proxy, mod, ver = sys.argv[1:]
files = subprocess.run(["git", "-C", src, "ls-files", "-co", "--exclude-standard", "go"], check=True,
                       capture_output=True, text=True).stdout.split()
d = os.path.join(proxy, mod, "@v")
os.makedirs(d)
with zipfile.ZipFile(os.path.join(d, ver + ".zip"), "w") as z:
    for f in files:
        if os.path.isfile(os.path.join(src, f)):
            z.write(os.path.join(src, f), f"{mod}@{ver}/" + f[len("go/"):])
with open(os.path.join(src, "go", "go.mod")) as f:
    gomod = f.read()
open(os.path.join(d, ver + ".mod"), "w").write(gomod)
open(os.path.join(d, ver + ".info"), "w").write('{"Version":"%s","Time":"2026-01-01T00:00:00Z"}' % ver)
open(os.path.join(d, "list"), "w").write(ver + "\n")
EOF
mkdir "$tmp/gomod"
cp "$src/tests/install/go_consumer.go" "$tmp/gomod/main.go"
printf 'module example.com/consumer\n\ngo 1.22\n\nrequire %s %s\n' "$mod" "$ver" >"$tmp/gomod/go.mod"
(
    cd "$tmp/gomod"
    export GOPROXY="file://$proxy" GOSUMDB=off GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=1
    export GOMODCACHE="$tmp/gomodcache" GOPATH="$tmp/gopath" GOCACHE="${GOCACHE:-$build/go-cache}"
    export PKG_CONFIG_PATH="$lib/pkgconfig" CGO_LDFLAGS="-Wl,-rpath,$lib"
    unset CGO_CFLAGS
    "$go_exe" build -o "$tmp/go_consumer" . >"$tmp/go.log" 2>&1 || { cat "$tmp/go.log"; exit 1; }
) || fail "Go consumer build"
check_loaded "$tmp/go_consumer"
out="$(env -i "$tmp/go_consumer" "$fixture")" || { echo "$out"; fail "Go consumer run"; }
grep -Eq 'kind: chronos2' <<<"$out" || { echo "$out"; fail "Go consumer: no 'kind: chronos2'"; }
echo "Go consumer (module $mod $ver from a module proxy): ok"
echo "install test: ok"

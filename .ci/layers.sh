#!/usr/bin/env bash
# Check the layers contract (.importlinter) on the package as it installs. The layers live in
# top-level folders mapped into agemem.* by setuptools' package-dir, so import-linter, which walks
# a package's folder, needs the installed tree: build it into a temporary directory and lint that.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
python -m pip install --quiet --no-deps --target "$stage" "$repo" >/dev/null  # isolated build: setuptools>=68 from pyproject, whatever the machine has
rm -rf "$repo/build"  # setuptools' scratch folder, not ours to keep
cd "$stage"
PYTHONPATH="$stage" lint-imports --config "$repo/.importlinter" --no-cache

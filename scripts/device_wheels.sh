#!/usr/bin/env bash
# Prepare .whl/ for a GPU machine without network (this workplace's device tool): the project's
# dependencies its image lacks, as CPython 3.12 manylinux wheels, with llvmlite stripped and
# xz-compressed to fit the 64 MiB the working tree may carry. Run from the repository root; then
# name ".whl" in the device call's carry and begin its command with `source scripts/device_setup.sh`.
set -euo pipefail
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
mkdir -p .whl
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${platforms[@]}" \
    -d .whl "xdsl>=0.74,<0.75" "immutabledict<4.3.2" "ordered-set==4.1.0" "filecheck>=1,<2" "nvmath-python>=1.0,<2" \
    "llvmlite>=0.50,<0.52"
work=$(mktemp -d)
(cd "$work" && unzip -q "$OLDPWD"/.whl/llvmlite-*.whl && strip llvmlite/binding/*.so*)
tar cf - -C "$work" . | xz -T0 -9 > .whl/llvmlite.tar.xz
rm -rf "$work" .whl/llvmlite-*.whl
du -sh .whl

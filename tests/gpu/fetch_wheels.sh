#!/usr/bin/env bash
# Download the wheels tests/gpu/run_all.py needs on a GPU machine without internet, in one command:
#
#     tests/gpu/fetch_wheels.sh [DEST]            # default DEST: .whl (git ignores it)
#     PYVER=3.11 ARCH=aarch64 tests/gpu/fetch_wheels.sh
#
# PYVER is the GPU machine's Python (default 3.12), ARCH its CPU (x86_64, or aarch64 for GH200).
# Run it where pip reaches PyPI, then copy DEST next to the checkout on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
dest="${1:-.whl}"
pyver="${PYVER:-3.12}"
arch="${ARCH:-x86_64}"
python3 -m pip download --no-deps --only-binary=:all: \
    --python-version "$pyver" --implementation cp \
    --platform "manylinux_2_28_$arch" --platform "manylinux_2_17_$arch" --platform "manylinux2014_$arch" \
    -d "$dest" -r tests/gpu/wheels.txt
if [ "$(printf '%s\n' "$pyver" 3.11 | sort -V | head -n1)" != 3.11 ]; then
    # Python 3.10: pytest also needs these two backports
    python3 -m pip download --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
        -d "$dest" exceptiongroup==1.3.0 tomli==2.2.1
fi
echo "wheels in $dest: $(ls "$dest"/*.whl | wc -l); carry $dest to the GPU machine and run: python3 tests/gpu/run_all.py OUT"

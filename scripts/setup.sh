#!/bin/bash
# Install everything workspace and its test suite need on this machine
# (Debian/Ubuntu, as root or with sudo). Idempotent: a second run is quick.
# Each step lives in scripts/setup.d/NN-name.sh and runs in order.
set -euo pipefail
cd "$(dirname "$0")/.."
for step in scripts/setup.d/*.sh; do
    echo "==> ${step##*/}"
    started=$SECONDS
    bash "$step" || { rc=$?; echo "setup: ${step##*/} FAILED (exit $rc); its messages are above" >&2; exit "$rc"; }
    echo "    ${step##*/}: $((SECONDS - started)) s"
done

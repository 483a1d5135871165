#!/bin/bash
# A virtual environment in .venv with workspace installed (editable) and the test tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The system's python3 by default, not one under root's home (pyenv): the tests run a second time
# as an ordinary user (60-testuser), who must be able to run this interpreter, and it is the
# Python users have.
PY=${PYTHON:-/usr/bin/python3}
home=$("$PY" -c 'import os, sys; print(os.path.dirname(os.path.abspath(sys._base_executable)))')
if [[ ! -x .venv/bin/python ]] || ! grep -qx "home = $home" .venv/pyvenv.cfg 2>/dev/null; then
    "$PY" -m venv --clear .venv
fi
stamp=.venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)
if [[ ! -e $stamp ]]; then
    .venv/bin/python -m pip install -q --upgrade pip
    # compat mode: a plain path in a .pth file, not an import hook (~9 ms less per interpreter
    # start, which every hook and test subprocess pays)
    .venv/bin/python -m pip install -q -e ".[test]" --config-settings editable_mode=compat
    rm -f .venv/.installed-* && touch "$stamp"
fi
echo "python: $(.venv/bin/python --version), workspace $(.venv/bin/workspace --version)"

#!/bin/bash
# System packages for the built-in overlay engine and the tests.
set -euo pipefail
SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo
need=()
for pkg in util-linux mount attr git procps python3-venv gdb; do  # gdb: the ptrace of tests/security/test_call_hijacks_its_view.py
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
    echo "installed: ${need[*]}"
else
    echo "system packages present"
fi

"""Found by the lead while closing attack pass 11: the overlay engine resolved a working
directory it could not see from the holder's root (a symlink to an absolute path inside
the sandbox, a directory made outside after the holder started) by running ``/bin/sh``
from the sandbox's root in its user and mount namespaces, but not its pid namespace. The
sandbox writes ``/bin/sh`` like any other file: the agent's program ran in the host's pid
namespace, where the user's own processes (the client, its shell) are in reach: it
signalled one here (and could ptrace it: the same uid).

Rule: what the host runs is never a program of the sandbox's; the directory is resolved by
a fork of the CLI itself in the view's namespaces and root (engine.resolve_inside).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.engines import accounts

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

# The sandbox's /bin/sh signals the host process named in the victim file, then is sh.
PLANT = r"""
ln -s "$2" "$1/link"
mkdir -p "$2"
rm -f /bin/sh
printf '#!/bin/bash\nkill -TERM "$(cat %s)" 2>/dev/null\nexec /bin/dash "$@"\n' "$3" > /bin/sh
chmod 755 /bin/sh
"""


def test_resolving_a_working_directory_runs_no_program_of_the_sandbox(tmp_path: Path) -> None:
    """Run by root, whose calls may replace /bin/sh (an ordinary user's may not: it is not
    theirs, with or without subordinate ids)."""
    account = accounts.make("self", tmp_path)
    victim = subprocess.Popen([*account.prefix, "sleep", "120"])
    try:
        pid_file = account.base / "victim.pid"
        pid_file.write_text(f"{victim.pid}\n")
        account.chown(pid_file)
        target = account.base / "only-inside"
        planted = account.ws("run", "--", "bash", "-c", PLANT, "bash", str(account.project),
                             str(target), str(pid_file))
        assert planted.returncode == 0, planted
        proc = account.ws("run", "--cwd", str(account.project / "link"), "--", "pwd")
        assert proc.stdout.strip() == str(target), proc
        assert victim.poll() is None, "a program the sandbox wrote ran on the host and " \
            "signalled a host process"
    finally:
        victim.kill()
        victim.wait()
        accounts.clean(account)

"""Attack pass 11: a call that is root of the namespace reaches the host's filesystem through
the overlay holder's own descriptors.

The holder keeps descriptors of the host's filesystem open after its pivot (the host's ``/``,
``/tmp``, ``/var/tmp``, the session's sandbox directory, the host's mount namespace: it reads
the real files through them). It lives in the sandbox's user namespace, as that namespace's
root. A call that is root there too (the engine run by root, or an ordinary user without
subordinate ids) unmounts its own ``/proc`` (``umount -l /proc``), which shows the host's
process list below (docs/security.md says so, and that "its processes' roots, memory and
descriptors are refused: they are in the host's user namespace"; the holder is not), finds
the holder (or the entry process, fd 94), and opens ``/proc/HOLDER/fd/N/tmp/...`` where ``N`` is the
host's ``/``: a write lands on the real disk at once, as the account (root: anywhere; an
ordinary user: ``~/.bashrc``, the hook's venv, ``~/.claude``), and every hidden path is read
the same way. Reproduced as root and as wstest with newuidmap/newgidmap off PATH; with
subordinate ids the call cannot unmount ``/proc`` and holds.

Closed by the calls' views (holder/views.py): a call runs in a user namespace nested in the
holder's, whose /proc is the session's pid namespace's alone (the holder is in no pid
namespace a call can list), mounted before the copy, so the kernel locks it there with
every other mount; the session's init, of the holder's namespace, is not dumpable.

Rule broken: nothing an agent's commands do reaches the real system until the user commits
(promise 1); hidden paths are never readable inside (promise 3).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import accounts
from tests.engines.test_overlay_user import _path_without

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

# Every process the host's /proc lists whose descriptor names "/" (the holder's), written
# through: the canary's path is the host's.
ATTACK = r"""
canary=$1
umount -l /proc 2>/dev/null
for fd in /proc/[0-9]*/fd/*; do
    [ "$(readlink "$fd" 2>/dev/null)" = / ] || continue
    echo ESCAPED > "$fd$canary" 2>/dev/null && echo "wrote through $fd"
done
echo done
"""


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_no_call_writes_the_host_through_the_holders_descriptors(ids: str, tmp_path: Path) -> None:
    account = accounts.make("self" if ids == "root" else "ordinary", tmp_path)
    try:
        canary = account.base / "escape-canary"
        env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} \
            if ids == "single-mapping" else {}
        proc = account.ws("run", "--", "sh", "-c", ATTACK, "sh", str(canary), env=env)
        assert "done" in proc.stdout, proc
        assert not canary.exists(), (
            f"a sandboxed call wrote the host's {canary} through the holder's descriptor of "
            f"the host's root: {proc.stdout.strip()}")
    finally:
        accounts.clean(account)


@pytest.mark.parametrize("ids", ["single-mapping", "subordinate-ids"])
def test_doctor_measures_whether_calls_reach_the_hosts_proc(ids: str, tmp_path: Path) -> None:
    """Doctor measures it with its trial call (the call's /proc unmounted, is the host's
    below?): nothing reached, for the single mapping as with subordinate ids (root:
    tests/security/test_host_handles.py)."""
    account = accounts.make("ordinary", tmp_path)
    try:
        env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} \
            if ids == "single-mapping" else {}
        said = account.ws("doctor", "--engine", "overlay", env=env).stdout
        line = next(line for line in said.splitlines() if " security: " in line)
        assert line.startswith("  ok   security: writes anywhere are held"), said
    finally:
        accounts.clean(account)

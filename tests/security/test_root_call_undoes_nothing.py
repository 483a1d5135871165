"""The class behind attack pass 11's two findings: a call that is root of the overlay
engine's namespace (the engine run by root, or an ordinary user without subordinate ids)
undid what the holder had set up for it: it unmounted its /proc (the host's lay below) and
remounted a read-only bind of a real file read-write.

The rule: calls run in a view nested in the holder's user namespace (holder/views.py), so
the kernel locks every mount they inherit, with its flags, and they hold no capability over
the namespaces the holder's owns (the session's network namespace among them). Tried here
as the class, not the case: every mount in a call's table is unmounted and every read-only
one remounted read-write, the watched veth pair of ``network: off`` deleted and loopback
taken down; none may succeed, for all three accounts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import accounts
from tests.engines.test_overlay_user import _path_without

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

# Deepest first, so that a mount is tried before the one it sits on; each success printed.
UNDO_MOUNTS = r"""
awk '{print $2, $4}' /proc/self/mounts | sort -r | while read -r point options; do
    point=$(printf '%b' "${point//\\/\\0}")
    case ",$options," in *,ro,*) mount -o remount,rw,bind "$point" 2>/dev/null &&
        echo "remounted $point read-write";; esac
    umount -l "$point" 2>/dev/null && echo "unmounted $point"
done
echo done
"""

UNDO_NETWORK = """/usr/bin/python3 - <<'EOF'
import socket, struct
nl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
for name, kind, flags in (("ws0", 17, 0), ("lo", 16, 0)):   # RTM_DELLINK; RTM_NEWLINK: lo down
    body = struct.pack("=BxHiII", 0, 0, socket.if_nametoindex(name), flags, 1)
    nl.send(struct.pack("=IHHII", 16 + len(body), kind, 5, 1, 0) + body)   # request, ack
    print(name, -struct.unpack_from("=i", nl.recv(4096), 16)[0])
EOF
"""


def _account(ids: str, tmp_path: Path) -> tuple[accounts.Account, dict[str, str]]:
    account = accounts.make("self" if ids == "root" else "ordinary", tmp_path)
    env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} \
        if ids == "single-mapping" else {}
    return account, env


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_a_call_can_neither_unmount_nor_remount_what_it_inherits(ids: str, tmp_path: Path) -> None:
    account, env = _account(ids, tmp_path)
    try:
        proc = account.ws("run", "--", "bash", "-c", UNDO_MOUNTS, env=env)
        assert proc.stdout.splitlines()[-1:] == ["done"], proc
        assert proc.stdout.splitlines()[:-1] == [], f"a call undid its sandbox: {proc.stdout}"
    finally:
        accounts.clean(account)


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_a_call_cannot_change_the_sessions_network(ids: str, tmp_path: Path) -> None:
    """With ``network: off`` the session's network namespace is the holder's: a call may
    neither delete the watched veth (whose attempts would then go unrecorded) nor take
    loopback down (EPERM, 1)."""
    account, env = _account(ids, tmp_path)
    try:
        config = account.base / "config" / "workspace"
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.yaml").write_text("network: off\n")
        account.chown(config, config / "config.yaml")
        proc = account.ws("run", "--", "bash", "-c", UNDO_NETWORK, env=env)
        assert proc.stdout.split() == ["ws0", "1", "lo", "1"], proc
    finally:
        accounts.clean(account)

"""Attack pass 12: a call that is root of its namespace signals the session's init (minor).

The session's init (pid 1 of the session's pid namespace) is of the holder's user namespace,
undumpable, "not within a call's reach" (holder/views.py). The kernel drops a signal sent to a
pid namespace's init from inside it only when the init left that signal's default action;
the init is Python, which handles SIGINT (KeyboardInterrupt): a call of the same host uid
(the engine run by root; the single mapping) sends ``kill -INT 1``, the init's loop raises,
it exits, and the kernel kills the whole session pid namespace: every other call and what
it left running (a server in the background), the sender included.

Reproduction (root, or the single mapping): workspace run -- bash -c 'kill -INT 1; sleep 1;
echo alive'  -> killed (137), "alive" never printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import accounts
from tests.engines.test_overlay_user import _path_without

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_a_call_cannot_end_the_sessions_init(ids: str, tmp_path: Path) -> None:
    account = accounts.make("self" if ids == "root" else "ordinary", tmp_path)
    env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} \
        if ids == "single-mapping" else {}
    try:
        proc = account.ws("run", "--", "bash", "-c",
                          "kill -INT 1 2>/dev/null; kill -HUP 1 2>/dev/null; sleep 1; echo alive",
                          env=env)
        assert (proc.returncode, proc.stdout.strip()) == (0, "alive"), \
            f"a call ended the session's init (and with it the session): {proc}"
    finally:
        accounts.clean(account)

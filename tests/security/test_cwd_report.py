"""Attack pass 3: the final-directory report is the command's to write, and a bad one
stopped every later call of the session.

The EXIT trap that reports the sandbox's final directory (fd 97 on the overlay engine and
try, ``/run/ws-calls/ID.m`` in a container) belongs to the command's own shell: the command
replaces it (``trap 'echo /nonexistent >&97' EXIT``). finish.sh records any absolute path
it reads, and the next call started there: "does not exist in the sandbox", exit 125, the
command not run; and so every call after it (a failed call records nothing), also after
`workspace discard`, until the client's directory changed. One Bash call disabled the
session's Bash tool. Now the report is a hint: where it does not exist inside, the call
starts in the client's own directory (the hook hands it to the entry) and says so.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

FORGE = ("trap 'echo /nonexistent/dir >&97; echo /nonexistent/dir >\"/run/ws-calls/$WS_CALL_ID.m\"' "
         "EXIT 2>/dev/null; echo set")


@pytest.fixture(params=["overlay", "try-main", "docker"])
def any_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


@pytest.mark.engine
def test_a_forged_cwd_report_does_not_disable_later_calls(any_engine: str, claude: Claude):
    claude.start()   # the engine's environment first: the client's is a copy
    first = claude.bash(FORGE)
    assert first.returncode == 0, first.stderr
    later = [claude.bash(f"echo call-{i}; pwd") for i in range(2)]
    for i, run in enumerate(later):
        assert run.returncode == 0 and f"call-{i}" in run.stdout, run.stderr
        assert run.stdout.split()[-1] == str(claude.project), run.stdout
    assert "starting in" in later[0].stderr, later[0].stderr

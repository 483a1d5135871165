"""The hook answers the bash launcher gives for itself are the ones protocol.py builds (issue 9).

``bin/workspace-hook`` answers without Python when workspace is not installed
yet, so it spells the hook JSON in printf formats; they must say exactly what
:mod:`manager.claude.protocol` says.
"""

from __future__ import annotations

import json
import re

import pytest

from manager.claude import protocol

from .conftest import REPO

REASON = 'workspace is "installing"\tpath C:\\x\nnext'


def _launcher_answers() -> dict[str, str]:
    text = (REPO / "bin" / "workspace-hook").read_text()
    body = text[text.index("answer() {"):text.index("exit 0\n}")]
    found = dict(re.findall(r"^\s*([A-Za-z*]+)\)\s*\n(?:.*\n)*?\s*printf '([^']*)'", body, re.M))
    assert set(found) == {"PreToolUse", "SessionStart", "*"}
    return found


def _bash_json(text: str) -> str:
    """ws_json_string from bin/lib.sh, applied to ``text``."""
    import subprocess

    lib = REPO / "bin" / "lib.sh"
    done = subprocess.run(["bash", "-c", 'source "$0"; ws_json_string "$1"; printf %s "$WS_JSON"',
                           str(lib), text], capture_output=True, text=True, check=True)
    return done.stdout


@pytest.mark.parametrize(("event", "expected"), [
    ("PreToolUse", protocol.deny(REASON)),
    ("SessionStart", protocol.answer("SessionStart", notice=REASON, context=REASON)),
    ("*", protocol.answer("Stop", notice=REASON)),
])
def test_launcher_answers_are_protocol_answers(event, expected):
    literal = _bash_json(REASON)
    assert json.loads(literal) == REASON
    printed = _launcher_answers()[event].replace("%s", literal)
    assert json.loads(printed) == expected

"""Every line a workspace command writes for a person goes through the one sink filter
(``manager.ui``: ``out``, ``err``, ``page``), which escapes control characters but our own
colours: agent-made text (a file name, a host, an HTTP method, an error naming either) can
then never move the cursor, erase a line or set the title. Attack pass 7 found
``status --network`` printing the egress record with a bare ``print``, past the filter.

The class, checked over the source: no ``print`` and no direct ``sys.stdout``/``sys.stderr``
write in manager/ but the sink itself, the hook's JSON answer (exact JSON, read by the
client, not a terminal) and the overlay holder (its own program: its output is a protocol
and a log, never shown raw)."""

from __future__ import annotations

import ast
from pathlib import Path

import manager

ROOT = Path(manager.__file__).parent
SINK = ROOT / "ui.py"
JSON_ANSWER = ROOT / "claude" / "protocol.py"
OWN_PROGRAM = ROOT / "engines" / "overlay" / "holder"


def _writes(tree: ast.AST) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        printed = isinstance(func, ast.Name) and func.id == "print"
        written = isinstance(func, ast.Attribute) and func.attr == "write" and \
            isinstance(func.value, ast.Attribute) and func.value.attr in ("stdout", "stderr")
        if printed or written:
            found.append(node.lineno)
    return found


def test_no_output_bypasses_the_sink():
    bypass = {}
    for path in ROOT.rglob("*.py"):
        if path in (SINK, JSON_ANSWER) or OWN_PROGRAM in path.parents:
            continue
        lines = _writes(ast.parse(path.read_text(), str(path)))
        if lines:
            bypass[str(path.relative_to(ROOT))] = lines
    assert bypass == {}, f"output past manager.ui's filter: {bypass}"


def test_an_error_naming_agent_text_is_escaped(ws, project: Path):
    """An error naming a path the agent chose (``run``'s, the hook's cwd) is escaped too."""
    proc = ws("run", "--cwd", "/no\x1b[2K\x1b[1Awhere", "--", "true")
    assert proc.returncode == 125 and "\\033[2K" in proc.stderr, proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr, (proc.stdout, proc.stderr)

"""Output for people: colour on a terminal, plain when piped; JSON for scripts."""

from __future__ import annotations

import itertools
import os
import re
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: every command would import typing
if TYPE_CHECKING:
    from collections.abc import Iterable
    from collections.abc import Iterator
    from typing import Any

def count(n: int, word: str, plural: str | None = None) -> str:
    """``1 file``, ``2,048 files``: a number and its noun, as git words them."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


# What review shows of agent-controlled text (names, file content, commit subjects, ref
# names): everything, and nothing that can move the cursor, erase, recolour or reorder
# what a terminal shows. Names are quoted as git quotes them (core.quotePath, its
# default: any byte that is a control, a quote, a backslash or not ASCII is a C escape,
# and the name is in double quotes); other text keeps what is printable, including
# UTF-8, and shows each control, line separator and bidirectional control as an escape.
# Every line written by out/err/page passes the same filter again, keeping only the
# colours paint and the diff add: text that reached them unescaped still cannot lie.
_CONTROLS = "\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_TEXT = re.compile("[\x00-\x08\n" + _CONTROLS + "]")
_UNSAFE_LINES = re.compile("[\x00-\x08" + _CONTROLS + "]")
# The sink keeps newlines (a caller may write several lines at once) and our own colours.
_UNSAFE_OUT = re.compile("(\033\\[(?:[012]|3[1-46])m)|[\x00-\x08" + _CONTROLS + "]")
_C_ESCAPES = {7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r",
              34: '\\"', 92: "\\\\"}


def quote(name: str) -> str:
    """A name (path, ref) as ``git status`` shows it: as it is when it is plain printable
    ASCII without quotes or backslashes; otherwise in double quotes with C escapes and
    octal bytes, ``"zz\\r\\033[2K"``, ``"caf\\303\\251"`` (bytes a file system name
    holds that are not UTF-8 come back as they were: os.fsencode)."""
    if name.isascii() and name.isprintable() and '"' not in name and "\\" not in name:
        return name
    out = []
    for byte in os.fsencode(name):
        if byte in _C_ESCAPES:
            out.append(_C_ESCAPES[byte])
        elif byte < 0x20 or byte >= 0x7f:
            out.append(f"\\{byte:03o}")
        else:
            out.append(chr(byte))
    return '"' + "".join(out) + '"'


def shown(text: str, lines: bool = False) -> str:
    """Agent-controlled text (a file's line, a commit subject, a message) for a terminal:
    tabs and printable characters as they are, every other control character, line
    separator and bidirectional control as an escape (``\\r``, ``\\033``, ``\\u202e``);
    with ``lines``, newlines are kept (a message of several lines)."""
    unsafe = _UNSAFE_LINES if lines else _UNSAFE_TEXT
    if unsafe.search(text) is None:
        return text
    return unsafe.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    if match.lastindex:              # one of our colours, kept by the sink
        return match.group(1)
    char = match.group()
    code = ord(char)
    if code in _C_ESCAPES:
        return _C_ESCAPES[code]
    if code < 0x80:
        return f"\\{code:03o}"
    if 0xdc80 <= code <= 0xdcff:     # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xdc00:02x}"
    return f"\\u{code:04x}"


def _safe(text: str) -> str:
    """The sink's filter: see the comment above _UNSAFE."""
    if _UNSAFE_OUT.search(text) is None:
        return text
    return _UNSAFE_OUT.sub(_escape, text)


COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "bold": "1", "dim": "2"}


def use_colour(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


_STDOUT_COLOUR: list[bool] = []


def forget_terminal() -> None:
    """Decide colour again at the next paint (a forked child with other outputs)."""
    _STDOUT_COLOUR.clear()


def paint(text: str, colour: str, enabled: bool | None = None) -> str:
    if enabled is None:
        if not _STDOUT_COLOUR:          # once per process: a status may paint 100,000 lines
            _STDOUT_COLOUR.append(use_colour())
        enabled = _STDOUT_COLOUR[0]
    return f"\033[{COLOURS[colour]}m{text}\033[0m" if enabled else text


def out(text: str = "") -> None:
    print(_safe(text))


def err(text: str) -> None:
    print(_safe(text), file=sys.stderr)


def ask(prompt: str) -> None:
    """A prompt on stdout, left open for the answer."""
    sys.stdout.write(_safe(prompt))
    sys.stdout.flush()


def dump_json(value: Any) -> None:
    import json

    print(json.dumps(value, indent=2, sort_keys=True))


def page(lines: Iterable[str], enabled: bool = True) -> None:
    """Print ``lines``; through a pager when they overflow a terminal, as git does.

    ``lines`` may be a generator: it is written as it comes (a 100,000-file diff is
    never one string), after the first screenful decided whether a pager is needed."""
    it = iter(lines)
    if not enabled or not sys.stdout.isatty():
        _write(sys.stdout, it)
        return
    screen = _screen_lines()
    head = list(itertools.islice(it, screen))
    if len(head) < screen:
        _write(sys.stdout, head)
        return
    _to_pager(itertools.chain(head, it))


def _write(stream: Any, lines: Iterable[str]) -> None:
    # In batches: one write per line costs more than building a 100,000-line diff.
    batch: list[str] = []
    for line in lines:
        batch.append(_safe(line))
        if len(batch) == 1024:
            batch.append("")
            stream.write("\n".join(batch))
            batch.clear()
    if batch:
        batch.append("")
        stream.write("\n".join(batch))


def _to_pager(lines: Iterator[str]) -> None:
    import io
    import shlex
    import subprocess

    pager = os.environ.get("WORKSPACE_PAGER") or os.environ.get("PAGER") or "less"
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")     # quit if one screen, keep colour, leave text on screen
    try:
        proc = subprocess.Popen(shlex.split(pager), stdin=subprocess.PIPE, env=env)
    except (OSError, ValueError):
        _write(sys.stdout, lines)
        return
    assert proc.stdin is not None
    try:
        with io.TextIOWrapper(proc.stdin, encoding="utf-8", errors="surrogateescape") as stdin:
            _write(stdin, lines)
    except BrokenPipeError:
        pass
    proc.wait()


def _screen_lines() -> int:
    import shutil

    return shutil.get_terminal_size((80, 24)).lines


def progress(verb: str) -> Any:
    """A ``(done, total, bytes)`` reporter for long work, on a terminal's stderr only."""
    if not sys.stderr.isatty():
        return None

    def report(done: int, total: int, written: int) -> None:
        end = "\n" if done >= total else ""
        sys.stderr.write(f"\r{verb}: {done:,}/{total:,} paths, {human_bytes(written)}{end}")
        sys.stderr.flush()

    return report


def human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"

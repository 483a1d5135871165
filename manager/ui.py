"""Output for people: colour on a terminal, plain when piped; JSON for scripts."""

from __future__ import annotations

import itertools
import os
import sys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: every command would import typing
if TYPE_CHECKING:
    from collections.abc import Iterable
    from collections.abc import Iterator
    from typing import Any

def count(n: int, word: str, plural: str | None = None) -> str:
    """``1 file``, ``2,048 files``: a number and its noun, as git words them."""
    return f"{n:,} {word if n == 1 else plural or word + 's'}"


COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "bold": "1", "dim": "2"}


def use_colour(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


_STDOUT_COLOUR: list[bool] = []


def paint(text: str, colour: str, enabled: bool | None = None) -> str:
    if enabled is None:
        if not _STDOUT_COLOUR:          # once per process: a status may paint 100,000 lines
            _STDOUT_COLOUR.append(use_colour())
        enabled = _STDOUT_COLOUR[0]
    return f"\033[{COLOURS[colour]}m{text}\033[0m" if enabled else text


def out(text: str = "") -> None:
    print(text)


def err(text: str) -> None:
    print(text, file=sys.stderr)


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
        batch.append(line)
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

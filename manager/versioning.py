"""Format versions of the records workspace persists, and the rules for reading them.

Every JSON record carries ``"format": N`` (the commit journal: ``"version": N``)
and ``"written_by"``, the workspace release that wrote it. A reader meets one
of three cases (docs/layout.md, "Format versions"):

* the current format: read it;
* an older one: read it as it is, or migrate it in place through
  :func:`migrate_file` (atomic, the replaced bytes kept beside it until the
  migration has finished);
* a newer one: :class:`NewerFormat`, naming the release that wrote it;
  nothing is touched.

Records written before formats were recorded carry none: they are format 1.
``fastjson`` and ``os`` only: the hook's hot path reads ``claude.json`` here.
"""

from __future__ import annotations

import os

from manager import __version__
from manager import fastjson
from manager.errors import StateError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

KEY = "format"
BY = "written_by"
RELEASE = __version__
UNVERSIONED = 1   # what a record without a format key is (the releases before formats)

# kind -> (current format, what people call it)
KINDS = {
    "session": (1, "session record"),
    "pointer": (1, "current-session pointer"),
    "claude": (1, "Claude hook state"),
    "guardrails": (1, "guard-rail state"),
    "journal": (2, "commit journal"),   # 2: each step's `judged` (commit/judged.py)
    "checkpoints": (1, "checkpoint store"),
    "trust": (1, "record of trusted project files"),
}
KEYS = {"journal": "version"}  # the journal had a version key before formats were recorded

# (kind, from format) -> function returning the record in format + 1.
MIGRATIONS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


class NewerFormat(StateError):
    """A record written by a newer workspace than this one."""

    def __init__(self, kind: str, path: str, found: int, by: str | None) -> None:
        current, name = KINDS[kind]
        who = f"workspace {by}" if by else "a newer workspace"
        need = f"{by} or later" if by else f"a release that reads {name} format {found}"
        super().__init__(
            f"{name} {path} was written by {who} (format {found}); this workspace "
            f"({RELEASE}) reads up to format {current}. Nothing was changed",
            hint=f"upgrade workspace to {need}")
        self.kind, self.path, self.found, self.by = kind, path, found, by


def current(kind: str) -> int:
    return KINDS[kind][0]


def stamp(kind: str, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` marked with this release's format of ``kind``."""
    return dict(record, **{KEYS.get(kind, KEY): current(kind), BY: RELEASE})


def check(kind: str, raw: Any, path: object) -> int:
    """The format of a parsed record; :class:`NewerFormat` when this release cannot read it."""
    found = raw.get(KEYS.get(kind, KEY), UNVERSIONED) if isinstance(raw, dict) else UNVERSIONED
    if type(found) is not int or found < 1:
        raise StateError(f"{KINDS[kind][1]} {path} has an unknown format {found!r}; "
                         "nothing was changed", hint=f"inspect {path}")
    if found > current(kind):
        by = raw.get(BY) if isinstance(raw, dict) else None
        raise NewerFormat(kind, str(path), found, by if isinstance(by, str) else None)
    return found


def load(kind: str, path: str | os.PathLike[str]) -> Any:
    """A JSON record, checked (``FileNotFoundError`` and ``ValueError`` pass through)."""
    with open(path, encoding="utf-8") as f:
        raw = fastjson.loads(f.read())
    check(kind, raw, path)
    return raw


def migrate_file(kind: str, path: str, raw: dict[str, Any]) -> dict[str, Any]:
    """Bring an older record at ``path`` to the current format, in place.

    The old bytes are kept as ``<path>.format-<N>`` until the new record has
    replaced them (a crash leaves both, and the record still readable as the
    old format); then the copy goes.
    """
    found = check(kind, raw, path)
    if found == current(kind):
        return raw
    from pathlib import Path

    from manager.fs.util import write_atomic
    from manager.fs.util import write_json_atomic

    keep = Path(f"{path}.format-{found}")
    write_atomic(keep, Path(path).read_bytes())
    record = raw
    for step in range(found, current(kind)):
        record = MIGRATIONS[(kind, step)](record)
    record = stamp(kind, record)
    write_json_atomic(Path(path), record)
    keep.unlink()
    return record

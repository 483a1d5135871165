"""The commit journal: the planned steps, written before the first real change.

If a commit dies (SIGKILL, power loss) the journal survives in the session
directory; the next commit finishes exactly its steps first. Every step is
idempotent and knows when it is already done (see :mod:`manager.commit.apply`), so a
journal never needs updating while the commit runs.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from manager import versioning
from manager.changes.model import Layer
from manager.errors import StateError
from manager.fs.util import write_json_atomic

JOURNAL = "commit-journal.json"


@dataclass(frozen=True)
class Step:
    """One real path to bring to its new state.

    ``write``: put the upper file/symlink/special file at ``path``.
    ``dir``: make ``path`` a directory with the upper directory's metadata.
    ``tree``: put the new upper directory at ``path`` whole (:mod:`manager.commit.trees`).
    ``remove``: remove ``path`` (a whiteout's target, or a real entry an opaque
    directory hides); ``upper`` is the whiteout, ``None`` for hidden entries.
    """

    action: str
    layer: int
    path: str
    upper: str | None
    keep_upper: bool = False  # an uncommitted opaque parent still needs the upper copy
    judged: str | None = None  # the upper entry's fingerprint as planned (commit/judged.py)


@dataclass(frozen=True)
class Journal:
    token: str
    layers: list[Layer]
    steps: list[Step]
    force: bool
    started_ns: int = 0  # the journal's ctime: real paths changed later were not planned for


def path_for(session_dir: Path) -> Path:
    return session_dir / JOURNAL


def new_token() -> str:
    return secrets.token_hex(6)


def write(session_dir: Path, journal: Journal) -> Journal:
    path = path_for(session_dir)
    record = versioning.stamp("journal", {
        "token": journal.token,
        "force": journal.force,
        "layers": [[str(layer.upper), str(layer.target)] for layer in journal.layers],
        "steps": [vars(step) for step in journal.steps],   # flat: asdict's deep copy is slow
    })
    write_json_atomic(path, record, indent=None, sort_keys=False)
    return Journal(journal.token, journal.layers, journal.steps, journal.force,
                   os.stat(path).st_ctime_ns)


def read(session_dir: Path) -> Journal | None:
    path = path_for(session_dir)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        started = os.stat(path).st_ctime_ns
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(f"commit journal {path} is unreadable ({exc})",
                         hint=_hint(path)) from exc
    return _parse(raw, path, started)


def _parse(raw: object, path: Path, started: int) -> Journal:
    versioning.check("journal", raw, path)   # a newer one: NewerFormat, nothing touched
    try:
        if not isinstance(raw, dict):
            raise ValueError("not a journal")
        layers = [Layer(Path(upper), Path(target)) for upper, target in raw["layers"]]
        steps = [Step(**step) for step in raw["steps"]]
        return Journal(str(raw["token"]), layers, steps, bool(raw["force"]), started)
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"commit journal {path} is malformed ({exc!r})",
                         hint=_hint(path)) from exc


def remove(session_dir: Path) -> None:
    path_for(session_dir).unlink(missing_ok=True)


def _hint(path: Path) -> str:
    return f"inspect {path}; remove it to abandon the interrupted commit"

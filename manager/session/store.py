"""The session store: one directory per session under ``$XDG_STATE_HOME/workspace``.

Layout::

    sessions/<id>/session.json   the record (written atomically)
    sessions/<id>/lock           flock: shared while a command runs, exclusive to commit
    sessions/<id>/sandbox/       the engine's sandbox (upperdir/, workdir/, temproot/ ...)
    projects/<key>.json          the project's current session
"""

from __future__ import annotations

import time
from pathlib import Path

from manager import fastjson
from manager import versioning
from manager.errors import StateError
from manager.fs.util import locked
from manager.fs.util import write_json_atomic
from manager.record import Record
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Any

RECORD = "session.json"
LOCK = "lock"
SANDBOX = "sandbox"


class Session(Record):
    __slots__ = ("id", "project", "engine", "engine_source", "origin", "created", "updated",
                 "client_pid", "client_start", "notes", "extra")

    def __init__(self, id: str, project: str, engine: str, engine_source: str = "default",
                 origin: str = "cli", created: float | None = None, updated: float | None = None,
                 client_pid: int | None = None, client_start: int | None = None,
                 notes: list[str] | None = None, extra: dict[str, Any] | None = None) -> None:
        self.id = id
        self.project = project
        self.engine = engine
        self.engine_source = engine_source
        self.origin = origin
        self.created = created if created is not None else time.time()
        self.updated = updated if updated is not None else time.time()
        self.client_pid = client_pid
        self.client_start = client_start
        self.notes = notes if notes is not None else []
        self.extra = extra if extra is not None else {}

    @property
    def dir(self) -> Path:
        return session_dir(self.id)

    @property
    def sandbox(self) -> Path:
        return self.dir / SANDBOX

    @property
    def lock_path(self) -> Path:
        return self.dir / LOCK

    @property
    def project_path(self) -> Path:
        return Path(self.project)


def validate_id(session_id: str) -> str:
    if not paths.valid_id(session_id):
        raise StateError(f"invalid session id {session_id!r}: use letters, digits, '.', '_' and '-'")
    return session_id


def new_id() -> str:
    import secrets  # lazy: only new sessions need it (keeps `workspace run` lean)

    return "ws-" + secrets.token_hex(4)


def session_dir(session_id: str) -> Path:
    return paths.sessions_dir() / validate_id(session_id)


def create(project: Path, engine: str, *, session_id: str | None = None,
           origin: str = "cli", engine_source: str = "default") -> Session:
    _refuse_newer_pointer(project)
    session = Session(id=validate_id(session_id or new_id()), project=str(project),
                      engine=engine, engine_source=engine_source, origin=origin)
    session.dir.mkdir(parents=True, exist_ok=False)
    session.sandbox.mkdir(mode=0o700)
    save(session)
    return session


def exists(session_id: str) -> bool:
    return (session_dir(session_id) / RECORD).exists()


def load(session_id: str) -> Session:
    path = session_dir(session_id) / RECORD
    try:
        raw = fastjson.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StateError(f"no session {session_id!r}", hint="`workspace sessions` lists them") from None
    except (OSError, ValueError) as exc:
        raise StateError(
            f"session record {path} is unreadable ({exc}); nothing was changed",
            hint=f"inspect or remove {path.parent} by hand; its sandbox is kept",
        ) from exc
    versioning.check("session", raw, path)
    return _from_dict(raw, path)


def _from_dict(raw: Any, path: Path) -> Session:
    names = set(Session.FIELDS)
    if not isinstance(raw, dict) or not {"id", "project", "engine"} <= raw.keys():
        raise StateError(
            f"session record {path} is malformed (missing id/project/engine); nothing was changed")
    try:
        return Session(**{k: v for k, v in raw.items() if k in names})
    except TypeError as exc:
        raise StateError(f"session record {path} is malformed: {exc}") from exc


def save(session: Session) -> None:
    session.updated = time.time()
    write_json_atomic(session.dir / RECORD, versioning.stamp("session", session.as_dict()))


def list_sessions() -> tuple[list[Session], list[StateError]]:
    """Every readable session, and the errors of those that are not."""
    sessions: list[Session] = []
    errors: list[StateError] = []
    root = paths.sessions_dir()
    if not root.is_dir():
        return sessions, errors
    for entry in sorted(root.iterdir()):
        if not (entry / RECORD).exists():
            continue
        try:
            sessions.append(load(entry.name))
        except StateError as exc:
            errors.append(exc)
    sessions.sort(key=lambda s: s.created)
    return sessions, errors


def remove(session: Session) -> None:
    """Delete a session directory; callers make sure nothing holds it."""
    from manager.fs.util import remove_tree

    remove_tree(session.dir)   # any depth; read-only directories opened up on the way
    pointer = _pointer_path(session.project_path)
    if current_id(session.project_path) == session.id:
        pointer.unlink(missing_ok=True)


def _pointer_path(project: Path) -> Path:
    return Path(paths.pointer_file(str(project)))


def current_id(project: Path) -> str | None:
    path = _pointer_path(project)
    try:
        raw = fastjson.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise StateError(f"current-session pointer {path} is unreadable ({exc})",
                         hint=f"remove {path}; no session data lives there") from exc
    versioning.check("pointer", raw, path)
    session_id = raw.get("session") if isinstance(raw, dict) else None
    if not isinstance(session_id, str) or raw.get("project") != str(project):
        raise StateError(f"current-session pointer {path} is malformed",
                         hint=f"remove {path}; no session data lives there")
    return session_id


def set_current(project: Path, session_id: str) -> None:
    paths.projects_dir().mkdir(parents=True, exist_ok=True)
    _refuse_newer_pointer(project)
    write_json_atomic(_pointer_path(project),
                      versioning.stamp("pointer", {"project": str(project), "session": session_id}))


def _refuse_newer_pointer(project: Path) -> None:
    """A pointer a newer workspace wrote stays as it is (an unreadable one may be replaced)."""
    path = _pointer_path(project)
    try:
        raw = fastjson.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    versioning.check("pointer", raw, path)


def current(project: Path) -> Session | None:
    session_id = current_id(project)
    if session_id is None or not exists(session_id):
        return None
    return load(session_id)


def lock(session: Session, shared: bool = False, timeout: float | None = None) -> Any:
    return locked(session.lock_path, shared=shared, timeout=timeout, what=f"session {session.id}")


def store_lock(timeout: float | None = 30.0) -> Any:
    """Serialises creating sessions and moving current pointers."""
    paths.state_home().mkdir(parents=True, exist_ok=True)
    return locked(paths.state_home() / "store.lock", timeout=timeout, what="the session store")

"""From where a command is run to its project, configuration, session and engine."""

from __future__ import annotations

import os
from pathlib import Path

from manager import config as config_mod
from manager.config import Config
from manager.engines import registry
from manager.errors import WorkspaceError
from manager.record import Record
from manager.session import paths
from manager.session import store
from manager.session.store import Session

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Any

    from manager.engines.base import Engine


def find_project(start: Path) -> Path:
    """The enclosing git work tree, else ``start`` itself (:func:`paths.project_of`)."""
    return Path(paths.project_of(str(start)))


class Context(Record):
    __slots__ = ("project", "config")

    def __init__(self, project: Path, config: Config) -> None:
        self.project = project
        self.config = config

    @classmethod
    def load(cls, project: str | None = None, flags: dict[str, Any] | None = None, *,
             lenient: bool = False) -> Context:
        """``lenient``: review, commit and discard (see :func:`manager.config.load`)."""
        root = Path(project).resolve() if project else find_project(Path(os.getcwd()))
        return cls(root, config_mod.load(root, flags, lenient=lenient))

    def engine(self, session: Session) -> Engine:
        # The engine recorded for an existing session wins over the configuration,
        # so a setting cannot silently retarget a sandbox that holds work.
        engine: Engine = registry.make(session.engine, self.config)
        return engine

    def engine_drift(self, session: Session) -> str | None:
        """What the configuration says of the engine that this session does not do: a
        different engine named (the session keeps its own, whose sandbox holds its work),
        or an `engine:` setting ignored because its file is not trusted. None when they
        agree (``auto`` agrees with whatever the session chose)."""
        if "engine" in self.config.ignored:
            return f"the project's engine setting is ignored: {self.config.ignored['engine']}"
        wanted = self.config["engine"]
        if wanted in (registry.AUTO, session.engine):
            return None
        return (f"the configuration says engine {wanted} ({self.config.sources['engine']}); "
                f"this session keeps {session.engine}, whose sandbox holds its work (commit or "
                f"discard it, then the next session uses {wanted})")

    def find_session(self, session_id: str | None = None) -> Session | None:
        """The one session resolver: the named session, else (no name given) the project's
        current one; None when there is no such record."""
        if session_id:
            return store.load(session_id) if store.exists(session_id) else None
        return store.current(self.project)

    def session(self, session_id: str | None = None) -> Session:
        """:meth:`find_session`, an error when there is none."""
        found = self.find_session(session_id)
        if found is not None:
            return found
        if session_id:
            return store.load(session_id)       # raises "no session ...", with its hint
        raise WorkspaceError(f"no workspace session for {self.project}",
                             hint="`workspace run -- CMD` starts one")

    def open_or_create(self, session_id: str | None = None, new: bool = False,
                       origin: str = "cli") -> Session:
        """Resume the session (:meth:`find_session`) or create it."""
        with store.store_lock():
            found = None if new else self.find_session(session_id)
            return found if found is not None else self._create(session_id, origin)

    def _create(self, session_id: str | None, origin: str) -> Session:
        name, source, skipped = registry.resolve(self.config)
        session = store.create(self.project, name, session_id=session_id,
                               origin=origin, engine_source=source)
        if skipped:
            session.notes.extend(f"engine skipped: {reason}" for reason in skipped)
            store.save(session)
        store.set_current(self.project, session.id)
        return session

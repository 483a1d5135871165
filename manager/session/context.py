"""From where a command is run to its project, configuration, session and engine."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager import config as config_mod
from manager.config import Config
from manager.engines import registry
from manager.engines.base import Engine
from manager.errors import WorkspaceError
from manager.session import store
from manager.session.store import Session


def find_project(start: Path) -> Path:
    """The enclosing git work tree, else ``start`` itself."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


@dataclass
class Context:
    project: Path
    config: Config

    @classmethod
    def load(cls, project: str | None = None, flags: dict[str, Any] | None = None) -> Context:
        root = Path(project).resolve() if project else find_project(Path(os.getcwd()))
        return cls(root, config_mod.load(root, flags))

    def engine(self, session: Session) -> Engine:
        # The engine recorded for an existing session wins over the configuration,
        # so a setting cannot silently retarget a sandbox that holds work.
        engine: Engine = registry.get(session.engine)(self.config)
        return engine

    def session(self, session_id: str | None = None) -> Session:
        """The named session, else the project's current one (error when none)."""
        if session_id:
            return store.load(session_id)
        found = store.current(self.project)
        if found is None:
            raise WorkspaceError(f"no workspace session for {self.project}",
                                 hint="`workspace run -- CMD` starts one")
        return found

    def open_or_create(self, session_id: str | None = None, new: bool = False,
                       origin: str = "cli") -> Session:
        """Resume the session (by id, or the project's current one) or create it."""
        with store.store_lock():
            if not new:
                if session_id and store.exists(session_id):
                    return store.load(session_id)
                if not session_id:
                    found = store.current(self.project)
                    if found is not None:
                        return found
            return self._create(session_id, origin)

    def _create(self, session_id: str | None, origin: str) -> Session:
        name, source, skipped = registry.resolve(self.config)
        session = store.create(self.project, name, session_id=session_id,
                               origin=origin, engine_source=source)
        if skipped:
            session.notes.extend(f"engine skipped: {reason}" for reason in skipped)
            store.save(session)
        store.set_current(self.project, session.id)
        return session

"""The try engine: binpash/try runs each command over the session's sandbox.

The session's sandbox directory is try's ``DIR``, reused across calls, so
``try summary DIR`` and ``try commit DIR`` work on it and our change model reads
its ``upperdir/``. Our own files live in ``DIR/ws/``. Every call goes through
``try_enter.sh`` (see there why calls on one sandbox run one at a time).
"""

from __future__ import annotations

import os
from pathlib import Path

from manager.changes.model import Layer
from manager.config import Config
from manager.engines import procs
from manager.engines.base import Check
from manager.engines.base import RunRequest
from manager.engines.base import first_failure
from manager.engines.try_ import probe as try_probe
from manager.engines.try_.layout import INFO_CACHE
from manager.engines.try_.layout import OURS
from manager.engines.try_.layout import busy
from manager.engines.try_.layout import entry_command
from manager.engines.try_.layout import make_layout
from manager.engines.try_.layout import scaffold
from manager.engines.try_.probe import TryInfo
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.fs.util import remove_tree
from manager.session.store import Session


class TryEngine:
    name = "try"

    def __init__(self, config: Config) -> None:
        self.config = config

    # -- availability -------------------------------------------------------

    def health_check(self) -> str | None:
        return first_failure(self.checks())

    def checks(self) -> list[Check]:
        return [*try_probe.checks(self.config["try.path"]), try_probe.network_check(self.config)]

    # -- sandbox ------------------------------------------------------------

    def refresh(self, session: Session) -> None:
        """The upper dirs are the live ones: nothing to bring up to date."""

    def layers(self, session: Session) -> list[Layer]:
        return [Layer(upper=session.sandbox / "upperdir", target=Path("/"),
                      scaffold=scaffold())]

    def prepare(self, session: Session) -> None:
        make_layout(session.sandbox)
        info = self._info(session)
        from manager.engines.try_ import hide as try_hide

        try_hide.prepare(self.config, session, info)

    def run(self, session: Session, request: RunRequest) -> int:
        env = dict(os.environ, WORKSPACE_NO_FALLBACK="1")
        return procs.run_tree(self.entry_argv(session, request), env, request.timeout,
                              streams=request.streams())

    def entry_argv(self, session: Session, request: RunRequest) -> list[str]:
        import dataclasses

        from manager.egress import launch  # setting `network`: -x for off, a list refused

        info = self._info(session)
        flag = launch.try_flag(self.config, session.project, info.path, info.flag)
        return entry_command(session.sandbox, session.id, dataclasses.replace(info, flag=flag),
                             request.cwd,
                             request.cwd_out, request.command)

    def running(self, session: Session) -> list[str]:
        return ["a call"] if busy(session.sandbox) else []

    def release(self, session: Session) -> None:
        # try keeps nothing running between calls; a call in flight holds the lock.
        if busy(session.sandbox):
            raise WorkspaceError(
                f"a command is still running in session {session.id}",
                hint="wait for it to finish (or stop it), then try again",
            )

    def destroy(self, session: Session) -> None:
        self.release(session)
        if session.sandbox.exists():
            remove_tree(session.sandbox)

    def _info(self, session: Session) -> TryInfo:
        path = try_probe.find(self.config["try.path"])
        if path is None:
            raise EngineUnavailable("try is not installed here", hint=try_probe.INSTALL_HINT)
        try:
            return try_probe.cached(path, session.sandbox / OURS / INFO_CACHE)
        except try_probe.TryError as exc:
            raise EngineUnavailable(str(exc), hint="run `workspace doctor --engine try`") from exc

"""What the podman and docker engines' modules share: the session's resource name and the
engine's shape as its helpers see it."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from typing import Protocol

from manager.config import Config


def resource_name(session_id: str) -> str:
    """A session's container and (volume mode) volume: one name, spelled here only."""
    return f"workspace-{session_id}"


class EngineShape(Protocol):
    """What the probes, the upper dir and the view use of a container engine, which
    :class:`manager.engines.container.engine.ContainerEngine` fills (typed without importing
    it: no cycle)."""

    name: str
    cli: str
    config: Config

    def mount_options(self, lower: str, upper: str, work: str, calls: str,
                      target: str | None = None) -> dict[str, Any]: ...

    def identity(self) -> dict[str, Any]: ...

    def clear_work_dir(self, work: Path) -> None: ...

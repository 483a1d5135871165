"""What the podman and docker engines' modules share: the session's resource name and the
engine's shape as its helpers see it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any
from typing import Protocol

from manager.config import Config

if TYPE_CHECKING:
    from manager.session.store import Session


PID_FILE = "container.pid"   # "PID START NAME MODE" of the container's init (older: no NAME)


def container_of(session: Session) -> str:
    """The session's container: the name its record gives (one made by an older version:
    unsuffixed), else the name it will be made with."""
    try:
        fields = (session.sandbox / PID_FILE).read_text().split()
    except OSError:
        return resource_name(session.id)
    return fields[2] if len(fields) > 2 else f"workspace-{session.id}"


def resource_name(session_id: str, state: str | None = None) -> str:
    """A session's container and (volume mode) volume: one name, spelled here only.

    Names are global to a daemon, which several users (the docker group) or state
    directories share, and session ids repeat across them (tests' ``sess-1``, a copied
    state): the state directory's tag keeps them apart, or one's start removed the
    other's container as a leftover of its own.
    """
    return f"workspace-{session_id}-{state_tag(state)}"


def lower_volume_name(session_id: str, state: str | None = None) -> str:
    """A remote session's project volume. Not the upper volume's name plus a suffix: podman
    finds a volume by a prefix of its name, so removing the one would remove the other. Nor
    a name :func:`resource_name` can spell: a session id starts with a letter or digit, so a
    container labelled with the id ``lower-X`` (anyone on the daemon can label one) never
    names session X's project volume to gc."""
    return f"workspace-{LOWER_MARK}{session_id}-{state_tag(state)}"


LOWER_MARK = "_lower-"


def session_of(name: str, state: str | None = None) -> str | None:
    """The session id that :func:`resource_name` or :func:`lower_volume_name` spelled
    ``name`` from, for this state directory; None for any other name."""
    suffix = "-" + state_tag(state)
    for prefix in (f"workspace-{LOWER_MARK}", "workspace-"):
        if name.startswith(prefix) and name.endswith(suffix) and \
                len(name) > len(prefix) + len(suffix):
            return name[len(prefix):-len(suffix)]
    return None


def state_tag(state: str | None = None) -> str:
    """Eight hex digits naming a state directory (``$XDG_STATE_HOME/workspace``)."""
    import hashlib

    from manager.session import paths

    return hashlib.sha256(os.fsencode(state or paths.state_root())).hexdigest()[:8]


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

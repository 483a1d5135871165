"""The one table of engines: names to classes, which hold containers, and ``auto``.

The names and ``auto``'s order are the ``engine`` setting's choices (``config.ENGINES``:
config sits below the engines); every other list of engine names (``--engine`` help,
``doctor``, gc's container sweep, the tests) is derived from :data:`ENGINES`, whose keys
tests/engines/test_registry.py holds to those choices.
"""

from __future__ import annotations

import importlib

from manager import config
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Final

    from manager.config import Config
    from manager.engines.base import Engine

    EngineFactory = Callable[[Config], Engine]


class Spec(Value):
    __slots__ = ("target", "container")
    target: Final[str]       # "module:Class", imported lazily: container engines pull in heavy libraries
    container: Final[bool]   # its sandboxes are containers (image, gc sweep)

    def __init__(self, target: str, container: bool) -> None:
        self.target = target
        self.container = container


# In ``auto``'s order: the first that works here is chosen. overlay before try: try runs
# the command as root in a chroot by its own design, which is not a security boundary.
ENGINES: dict[str, Spec] = {
    "overlay": Spec("manager.engines.overlay.engine:OverlayEngine", container=False),
    "try": Spec("manager.engines.try_.engine:TryEngine", container=False),
    "podman": Spec("manager.engines.container.engine:PodmanEngine", container=True),
    "docker": Spec("manager.engines.container.engine:DockerEngine", container=True),
}
AUTO = "auto"
AUTO_ORDER = config.ENGINES[1:]    # the setting's choices are config's; the classes are here
CHOICES = config.ENGINES
CONTAINER_ENGINES = tuple(name for name, spec in ENGINES.items() if spec.container)


def get(name: str) -> EngineFactory:
    """The engine class called ``name`` (checked against :class:`Engine` by mypy)."""
    try:
        module_name, attr = ENGINES[name].target.split(":")
    except KeyError:
        raise WorkspaceError(f"unknown engine {name!r}; choose one of {', '.join(CHOICES)}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EngineUnavailable(f"engine {name!r} is not available: {exc}") from exc
    factory: EngineFactory = getattr(module, attr)
    return factory


def make(name: str, config: Config) -> Engine:
    """The one way to make an engine: its class, given the merged configuration."""
    return get(name)(config)


def resolve(config: Config) -> tuple[str, str, list[str]]:
    """(engine name, where the choice came from, why earlier auto candidates were skipped)."""
    wanted = config["engine"]
    source = config.sources["engine"]
    if wanted != AUTO:
        return wanted, source, []
    skipped: list[str] = []
    for name in AUTO_ORDER:
        try:
            reason = make(name, config).health_check()
        except EngineUnavailable as exc:
            reason = str(exc)
        if reason is None:
            return name, f"auto ({source})", skipped
        skipped.append(f"{name}: {reason}")
    raise EngineUnavailable(
        "no sandbox engine works on this host:\n  " + "\n  ".join(skipped),
        hint="run `workspace doctor` for the fix of each",
    )


def _typed_table() -> None:
    """For mypy only: every class in the table fills the engine protocol."""
    if TYPE_CHECKING:
        from manager.engines.container.engine import DockerEngine
        from manager.engines.container.engine import PodmanEngine
        from manager.engines.overlay.engine import OverlayEngine
        from manager.engines.try_.engine import TryEngine

        _: list[EngineFactory] = [TryEngine, OverlayEngine, PodmanEngine, DockerEngine]

"""Engine names to classes, and ``auto``: the first engine that works here."""

from __future__ import annotations

import importlib
from typing import Any

from manager.config import Config
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError

# Imported lazily: container engines pull in heavy libraries.
ENGINES: dict[str, str] = {
    "try": "manager.engines.tryengine:TryEngine",
    "overlay": "manager.engines.overlay:OverlayEngine",
    "podman": "manager.engines.container:PodmanEngine",
    "docker": "manager.engines.container:DockerEngine",
}
AUTO_ORDER = ("try", "overlay", "podman", "docker")


def get(name: str) -> Any:
    try:
        module_name, attr = ENGINES[name].split(":")
    except KeyError:
        raise WorkspaceError(f"unknown engine {name!r}; choose one of auto, {', '.join(ENGINES)}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EngineUnavailable(f"engine {name!r} is not available: {exc}") from exc
    return getattr(module, attr)


def resolve(config: Config) -> tuple[str, str, list[str]]:
    """(engine name, where the choice came from, why earlier auto candidates were skipped)."""
    wanted = config["engine"]
    source = config.sources["engine"]
    if wanted != "auto":
        return wanted, source, []
    skipped: list[str] = []
    for name in AUTO_ORDER:
        try:
            reason = get(name)(config).health_check()
        except EngineUnavailable as exc:
            reason = str(exc)
        if reason is None:
            return name, f"auto ({source})", skipped
        skipped.append(f"{name}: {reason}")
    raise EngineUnavailable(
        "no sandbox engine works on this host:\n  " + "\n  ".join(skipped),
        hint="run `workspace doctor` for the fix of each",
    )

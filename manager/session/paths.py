"""Where workspace keeps its state and reads its configuration."""

from __future__ import annotations

import os
from pathlib import Path

from manager.errors import StateError

# Tests set this so that code which forgets to choose a temporary state
# directory fails loudly instead of writing into the real home directory.
_FORBID_DEFAULT = "WORKSPACE_FORBID_DEFAULT_STATE"


def _xdg(var: str, default: str) -> Path:
    value = os.environ.get(var)
    if value:
        return Path(value)
    if os.environ.get(_FORBID_DEFAULT):
        raise StateError(f"${var} is not set while {_FORBID_DEFAULT} is on (a test forgot its tmp dir)")
    return Path.home() / default


def state_home() -> Path:
    """``$XDG_STATE_HOME/workspace``: inherited identically by every subprocess."""
    return _xdg("XDG_STATE_HOME", ".local/state") / "workspace"


def config_home() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "workspace"


def sessions_dir() -> Path:
    return state_home() / "sessions"


def projects_dir() -> Path:
    return state_home() / "projects"

"""The settings the hooks need, cached in the session's hot state.

Loading the layered configuration imports YAML and half the package; the
PreToolUse hook cannot pay that on every call. The values it needs are kept in
``claude.json`` with a stamp of every file and variable they came from; a stat
of each file tells whether the cache still holds.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

KEYS = ("passthrough", "plugin.allow_model_bypass")


def _config_files(project: str) -> list[str]:
    """The files :func:`manager.config.load` reads, in the same order."""
    bases = []
    xdg = os.environ.get("XDG_CONFIG_HOME")
    bases.append(os.path.join(xdg, "workspace") if xdg
                 else os.path.join(os.path.expanduser("~"), ".config", "workspace"))
    if os.environ.get("CLAUDE_PLUGIN_DATA"):
        bases.append(os.environ["CLAUDE_PLUGIN_DATA"])
    names = ("config.yaml", "config.yml", "config.json")
    files = [os.path.join(b, n) for b in bases for n in names]
    files.append(os.path.join(project, ".workspace.yaml"))
    return files


def _trust_file() -> str:
    """The record of trusted project files (it decides what the project file may set)."""
    from manager.claude import state

    return os.path.join(state.state_home(), "trusted-projects.json")


def stamp(project: str) -> list[Any]:
    marks: list[Any] = []
    for path in _config_files(project) + [_trust_file()]:
        try:
            st = os.stat(path)
            marks.append([path, st.st_mtime_ns, st.st_size])
        except OSError:
            marks.append([path, None, None])
    for key in ("WORKSPACE_PASSTHROUGH", "WORKSPACE_PLUGIN__ALLOW_MODEL_BYPASS"):
        marks.append([key, os.environ.get(key)])
    return marks


def load(project: str) -> dict[str, Any]:
    """Read the configuration the slow way (may import YAML)."""
    from pathlib import Path

    from manager import config

    merged = config.load(Path(project))
    return {key: merged[key] for key in KEYS}


def current(hot: dict[str, Any], project: str) -> tuple[dict[str, Any], bool]:
    """(settings, whether the cache was stale and had to be reloaded)."""
    marks = stamp(project)
    if hot.get("config_stamp") == marks and isinstance(hot.get("config"), dict):
        return hot["config"], False
    hot["config"], hot["config_stamp"] = load(project), marks
    return hot["config"], True

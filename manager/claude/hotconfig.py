"""The settings the hooks need, cached in the session's hot state.

Loading the layered configuration imports YAML and half the package; the
PreToolUse hook cannot pay that on every call. The values it needs are kept in
``claude.json`` with a stamp of every file and variable they came from; a stat
of each file tells whether the cache still holds.
"""

from __future__ import annotations

import os

from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.claude.records import Hot
    from manager.claude.records import HotConfig
    from manager.config import Config

# The image: ownctr. network: the effective setting (Claude's allowed domains when it is set
# nowhere), for the passthrough judge (netreach); a change of it also replaces the sandbox
# before the next call (see pretool._config).
KEYS = ("passthrough", "plugin.allow_model_bypass", "container.image", "network")
STAMPED = KEYS


def stamp(project: str) -> list[Any]:
    marks: list[Any] = []
    for path in paths.config_files(project) + [paths.trust_file()] + claude_settings(project):
        try:
            st = os.stat(path)
            marks.append([path, st.st_mtime_ns, st.st_size])
        except OSError:
            marks.append([path, None, None])
    for key in STAMPED:
        name = paths.env_name(key)
        marks.append([name, os.environ.get(name)])
    return marks


def claude_settings(project: str) -> list[str]:
    """Claude Code's settings files, whose ``sandbox.network.allowedDomains`` the effective
    ``network`` reads (egress.launch.inputs: the same files, tested)."""
    from manager.claude import permissions

    return [os.path.join(permissions.config_dir(), "settings.json"),
            os.path.join(project, ".claude", "settings.json"),
            os.path.join(project, ".claude", "settings.local.json")]


def load(project: str) -> HotConfig:
    """Read the configuration the slow way (may import YAML)."""
    from pathlib import Path

    from manager import config

    return pick(config.load(Path(project)), project)


def pick(merged: Config, project: str) -> HotConfig:
    """The settings the hooks need, from the merged configuration (slow path only)."""
    from typing import cast

    from manager.egress import launch

    picked = {key: merged[key] for key in KEYS}
    picked["network"] = launch.effective(merged, project)
    return cast("HotConfig", picked)


def current(hot: Hot, project: str) -> tuple[HotConfig, bool]:
    """(settings, whether the cache was stale and had to be reloaded)."""
    marks = stamp(project)
    if hot.get("config_stamp") == marks and isinstance(hot.get("config"), dict):
        return hot["config"], False
    hot["config"], hot["config_stamp"] = load(project), marks
    return hot["config"], True

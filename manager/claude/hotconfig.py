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

KEYS = ("passthrough", "plugin.allow_model_bypass", "container.image")   # the image: ownctr
# Stamped too, though not in the hot config: a change of setting `network` must replace the
# sandbox before the next call (see pretool._config).
STAMPED = (*KEYS, "network")


def stamp(project: str) -> list[Any]:
    marks: list[Any] = []
    for path in paths.config_files(project) + [paths.trust_file()]:
        try:
            st = os.stat(path)
            marks.append([path, st.st_mtime_ns, st.st_size])
        except OSError:
            marks.append([path, None, None])
    for key in STAMPED:
        name = paths.env_name(key)
        marks.append([name, os.environ.get(name)])
    return marks


def load(project: str) -> HotConfig:
    """Read the configuration the slow way (may import YAML)."""
    from pathlib import Path

    from manager import config

    return pick(config.load(Path(project)))


def pick(merged: Config) -> HotConfig:
    """The settings the hooks need, from the merged configuration (slow path only)."""
    from typing import cast

    return cast("HotConfig", {key: merged[key] for key in KEYS})


def current(hot: Hot, project: str) -> tuple[HotConfig, bool]:
    """(settings, whether the cache was stale and had to be reloaded)."""
    marks = stamp(project)
    if hot.get("config_stamp") == marks and isinstance(hot.get("config"), dict):
        return hot["config"], False
    hot["config"], hot["config_stamp"] = load(project), marks
    return hot["config"], True

"""The shapes of what the plugin keeps on disk, for the type checker.

The hook modules import this only under their ``TYPE_CHECKING`` guard: at run
time the records are plain dicts read from JSON, and importing ``typing`` would
cost every Bash call milliseconds. Tests tie these keys to the code that writes
them (``hotconfig.KEYS``, ``sessions.build_hot``).
"""

from __future__ import annotations

from typing import Any
from typing import NotRequired
from typing import TypedDict

# The settings the PreToolUse hook needs (``hotconfig.KEYS``), under their dotted names.
HotConfig = TypedDict("HotConfig", {"passthrough": list[str], "plugin.allow_model_bypass": bool,
                                    "container.image": str, "network": str | list[str]})


class Hot(TypedDict):
    """``sessions/<id>/claude.json``: what the hooks need per session without the package."""

    format: NotRequired[int]       # versioning's marks, added by state.write_hot
    written_by: NotRequired[str]
    code: NotRequired[list[str]]   # [the code that built it, its release]: other code rebuilds it
    session: str
    project: str
    engine: str
    entry: list[str] | None        # the engine's entry argv with placeholders, or None:
    entry_bg: list[str] | None     # ask the engine per call (sessions.entry_argv)
    layers: list[list[str]]        # [upper, target] per layer
    config: HotConfig
    config_stamp: list[Any]        # hotconfig.stamp: files and variables the config came from

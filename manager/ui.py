"""Output for people: colour on a terminal, plain when piped; JSON for scripts."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

COLOURS = {"red": "31", "green": "32", "yellow": "33", "blue": "34", "bold": "1", "dim": "2"}


def use_colour(stream: Any = None) -> bool:
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)())


def paint(text: str, colour: str, enabled: bool | None = None) -> str:
    if enabled is None:
        enabled = use_colour()
    return f"\033[{COLOURS[colour]}m{text}\033[0m" if enabled else text


def out(text: str = "") -> None:
    print(text)


def err(text: str) -> None:
    print(text, file=sys.stderr)


def dump_json(value: Any) -> None:
    print(json.dumps(value, indent=2, sort_keys=True))

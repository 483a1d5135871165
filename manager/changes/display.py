"""Paths as the user gives them and as review shows them."""

from __future__ import annotations

import os
from pathlib import Path

from manager.changes import model
from manager.changes.model import Change


def resolve_paths(raw: list[str]) -> list[Path]:
    """User-given paths (relative to the cwd) as absolute paths, without following links."""
    return [Path(os.path.abspath(p)) for p in raw]


def display_path(change: Change, project: Path) -> str:
    """The change's path as review shows it: relative in the project, quoted as git
    quotes names (ui.quote) so that no name can write over what is shown."""
    from manager import ui

    text = change.real_path
    if change.in_project:
        top = str(project)
        text = text[len(top):].lstrip("/") or "."
    if (change.new_type or change.old_type) is model.EntryType.DIR:
        text += "/"
    return ui.quote(text)

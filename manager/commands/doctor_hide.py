"""doctor's ``hide`` section: the paths hidden from sandboxed commands, and the probe's word."""

from __future__ import annotations

from typing import Any

from manager import ui
from manager.errors import WorkspaceError
from manager.session.context import Context


def report(ctx: Context, engine: str | None) -> dict[str, Any]:
    from manager.commands import hide_probe

    found: dict[str, Any] = {"paths": hide_probe.listed(ctx.config, str(ctx.project)),
                             "engine": engine, "held": None, "detail": "no engine works here"}
    if engine is None:
        return found
    try:
        found["held"], found["detail"] = hide_probe.probe(ctx.config, engine)
    except (WorkspaceError, OSError) as exc:
        found["held"], found["detail"] = False, f"the probe could not run: {exc}"
    return found


def show(found: dict[str, Any]) -> None:
    held = found["held"]
    mark = ui.paint("ok  ", "green") if held else ui.paint("----", "yellow") if held is None \
        else ui.paint("FAIL", "red")
    ui.out(ui.paint(f"hidden from sandboxed commands: {len(found['paths'])} path(s)", "bold"))
    for path in found["paths"]:
        ui.out(f"  {path}")
    ui.out(f"  {mark} probe ({found['engine'] or 'no engine'}): {found['detail']}")

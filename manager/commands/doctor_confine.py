"""doctor's confinement section: the paths hidden from sandboxed commands, and what the
probe (commands/confine_probe.py) saw of ``hide`` and ``network`` on the engine in use."""

from __future__ import annotations

from typing import Any

from manager import ui
from manager.errors import WorkspaceError
from manager.session.context import Context

NOT_PROBED = "no engine works here"


def report(ctx: Context, engine: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ``hide`` section, the ``network`` section) of doctor's report."""
    from manager.commands import confine_probe
    from manager.egress import launch

    hidden: dict[str, Any] = {"paths": confine_probe.listed(ctx.config, str(ctx.project)),
                              "engine": engine, "held": None, "detail": NOT_PROBED}
    network: dict[str, Any] = {"setting": launch.effective(ctx.config, str(ctx.project)),
                               "engine": engine, "probed": None, "held": None,
                               "detail": NOT_PROBED}
    if engine is None:
        return hidden, network
    try:
        found = confine_probe.probe(ctx.config, engine)
    except (WorkspaceError, OSError) as exc:
        why = f"the probe could not run: {exc}"
        hidden.update(held=False, detail=why)
        network.update(held=False, detail=why)
        return hidden, network
    hidden.update(held=found.hide.held, detail=found.hide.detail, limit=found.hide.limit)
    network.update(probed=found.network_mode, held=found.network.held, detail=found.network.detail)
    return hidden, network


def failed(hidden: dict[str, Any], network: dict[str, Any]) -> bool:
    """Whether doctor fails: hiding did not hold (but for a limit the docs state, root of the
    overlay engine's namespace: a warning), or the network confinement the settings ask for
    did not (with ``network: open`` the probe's word is shown, not counted)."""
    return (hidden["held"] is False and not hidden.get("limit")) or \
        (network["held"] is False and network["setting"] != "open")


def show(hidden: dict[str, Any], network: dict[str, Any]) -> None:
    ui.out(ui.paint(f"hidden from sandboxed commands: {len(hidden['paths'])} path(s)", "bold"))
    for path in hidden["paths"]:
        ui.out(f"  {path}")
    mark = ui.paint("warn", "yellow") if hidden.get("limit") else _mark(hidden["held"])
    ui.out(f"  {mark} probe ({hidden['engine'] or 'no engine'}): {hidden['detail']}")
    setting = network["setting"]
    shown = ", ".join(setting) if isinstance(setting, list) else setting
    ui.out(ui.paint(f"network: {shown}", "bold"))
    held = network["held"]
    mark = _mark(held) if held is not False or setting != "open" else ui.paint("warn", "yellow")
    probed = f", network {network['probed']}" if network["probed"] else ""
    ui.out(f"  {mark} probe ({network['engine'] or 'no engine'}{probed}): {network['detail']}")


def _mark(held: bool | None) -> str:
    return ui.paint("ok  ", "green") if held else ui.paint("----", "yellow") if held is None \
        else ui.paint("FAIL", "red")

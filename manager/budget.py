"""The diff budget: how much changed since the session's baseline tree.

The baseline is a snapshot (:mod:`manager.shadow`) taken at session start and
on reset; the measure is ``git diff-tree --numstat -M`` from it to a snapshot of
the current state, overlay included. State: ``{"baseline", "head", "time",
"blocks"}`` under the session's ``budget`` key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import field
from typing import Any

from manager.config import Config
from manager.gitplumbing import DiffEntry
from manager.gitplumbing import GitError
from manager.shadow import Shadow
from manager.shadow import Snapshot

# What diff-tree says when a tree or blob it needs is gone (gc'ed, store removed).
_MISSING = ("bad object", "unable to read", "not a tree object", "missing", "invalid object")


@dataclass
class FileCost:
    path: str
    status: str
    added: int | None
    deleted: int | None
    kind: str        # text, binary, submodule
    cost: float

    def as_json(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "added": self.added,
                "deleted": self.deleted, "kind": self.kind, "cost": self.cost}


@dataclass
class Report:
    used: float
    limit: int
    metric: str
    files: list[FileCost] = field(default_factory=list)
    notice: str | None = None

    @property
    def over(self) -> bool:
        return self.used > self.limit

    @property
    def unit(self) -> str:
        return "lines" if self.metric == "lines" else "files"

    def figure(self) -> str:
        return f"{_num(self.used)}/{self.limit} {self.unit} changed"

    def biggest(self, n: int) -> list[FileCost]:
        return sorted(self.files, key=lambda f: (-f.cost, f.path))[:n]

    def as_json(self) -> dict[str, Any]:
        files = [f.as_json() for f in self.biggest(len(self.files))]
        return {"used": self.used, "limit": self.limit, "metric": self.metric,
                "over": self.over, "notice": self.notice, "files": files}


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def baseline_state(shadow: Shadow, session_id: str, snap: Snapshot) -> dict[str, Any]:
    """A fresh baseline at ``snap``; its tree is kept alive by a ref in the store."""
    shadow.store().update_ref(f"refs/ws-base/{ref_safe(session_id)}", snap.view)
    return {"baseline": snap.view, "head": snap.head, "time": time.time(), "blocks": 0}


def ref_safe(session_id: str) -> str:
    return session_id.replace(".", "_2E")


def measure(shadow: Shadow, config: Config, state: dict[str, Any], session_id: str,
            snap: Snapshot) -> tuple[Report, dict[str, Any]]:
    """The report and the (possibly renewed) budget state."""
    notice = None
    if not state.get("baseline"):
        state = baseline_state(shadow, session_id, snap)
        notice = "no baseline was recorded for this session; the budget counts from now"
    try:
        entries = shadow.work().diff_trees(state["baseline"], snap.view)
    except GitError as exc:
        if not any(m in exc.stderr for m in _MISSING):
            raise
        state = baseline_state(shadow, session_id, snap)
        entries = []
        notice = ("the budget baseline's objects were garbage-collected; "
                  "re-baselined at the current state")
    report = tally(entries, config)
    report.notice = notice
    return report, state


def tally(entries: list[DiffEntry], config: Config) -> Report:
    metric = config["budget.metric"]
    files = [_cost(e, config, metric) for e in entries if not e.is_tree]
    return Report(sum(f.cost for f in files), config["budget.limit"], metric, files)


def _cost(entry: DiffEntry, config: Config, metric: str) -> FileCost:
    kind = "submodule" if entry.submodule else "binary" if entry.binary else "text"
    if metric == "files" or kind == "submodule":
        cost = 1.0
    elif kind == "binary":
        cost = float(config["budget.weights.binary"])
    else:
        cost = ((entry.added or 0) * config["budget.weights.added"]
                + (entry.deleted or 0) * config["budget.weights.deleted"])
        # A pure rename or mode change still counts: something a reviewer must see.
        cost = max(cost, 1.0)
    return FileCost(entry.display, entry.status, entry.added, entry.deleted, kind, cost)

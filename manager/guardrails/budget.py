"""The diff budget: how much changed since the session's baseline tree.

The baseline is a snapshot (:mod:`manager.guardrails.shadow`) taken at session start and
on reset; the measure is ``git diff-tree --numstat -M`` from it to a snapshot of
the current state, overlay included. Its state is
:class:`manager.guardrails.state.Budget` (``last``: the changes measured for the
last snapshot's tree, reused while it is the same).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import field
from typing import TYPE_CHECKING
from typing import Any

from manager.config import Config
from manager.git.plumbing import DiffEntry
from manager.git.plumbing import GitError
from manager.guardrails.shadow import Shadow
from manager.guardrails.shadow import Snapshot

if TYPE_CHECKING:
    from manager.guardrails.state import Budget as BudgetState

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
        return f"{format_count(self.used)}/{self.limit} {self.unit} changed"

    def biggest(self, n: int) -> list[FileCost]:
        return sorted(self.files, key=lambda f: (-f.cost, f.path))[:n]

    def as_json(self) -> dict[str, Any]:
        files = [f.as_json() for f in self.biggest(len(self.files))]
        return {"used": self.used, "limit": self.limit, "metric": self.metric,
                "over": self.over, "notice": self.notice, "files": files}


def format_count(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.1f}"


def baseline_state(shadow: Shadow, session_id: str, snap: Snapshot) -> BudgetState:
    """A fresh baseline at ``snap``; its tree is kept alive by a ref in the store."""
    shadow.store().update_ref(f"refs/ws-base/{ref_safe(session_id)}", snap.view)
    return {"baseline": snap.view, "head": snap.head, "time": time.time(), "blocks": 0}


def ref_safe(session_id: str) -> str:
    return session_id.replace(".", "_2E")


def measure(shadow: Shadow, config: Config, state: BudgetState, session_id: str,
            snap: Snapshot) -> tuple[Report, BudgetState]:
    """The report and the (possibly renewed) budget state."""
    notice = None
    if not state.get("baseline"):
        state = baseline_state(shadow, session_id, snap)
        notice = "no baseline was recorded for this session; the budget counts from now"
    changes = _remembered(state, snap.view)
    if changes is None:
        try:
            changes = [_change(e) for e in shadow.work().diff_trees(state["baseline"], snap.view)
                       if not e.is_tree]
        except GitError as exc:
            if not any(m in exc.stderr for m in _MISSING):
                raise
            state = baseline_state(shadow, session_id, snap)
            changes = []
            notice = ("the budget baseline's objects were garbage-collected; "
                      "re-baselined at the current state")
        _remember(state, snap.view, changes)
    report = tally(changes, config)
    report.notice = notice
    return report, state


# What one file's change is, before weights: path, status, added, deleted, kind.
FileChange = tuple[str, str, int | None, int | None, str]
# The last measure is kept in the state so a Stop with nothing new runs no diff;
# not when it is this long (the state file is rewritten at every change).
REMEMBER_AT_MOST = 200


def _change(entry: DiffEntry) -> FileChange:
    kind = "submodule" if entry.submodule else "binary" if entry.binary else "text"
    return (entry.display, entry.status, entry.added, entry.deleted, kind)


def _remembered(state: BudgetState, view: str) -> list[FileChange] | None:
    last = state.get("last")
    if isinstance(last, dict) and last.get("view") == view:
        return [tuple(row) for row in last["changes"]]
    return None


def _remember(state: BudgetState, view: str, changes: list[FileChange]) -> None:
    if len(changes) <= REMEMBER_AT_MOST:
        state["last"] = {"view": view, "changes": [list(c) for c in changes]}
    else:
        state.pop("last", None)


def tally(changes: list[FileChange], config: Config) -> Report:
    metric = config["budget.metric"]
    files = [_cost(c, config, metric) for c in changes]
    return Report(sum(f.cost for f in files), config["budget.limit"], metric, files)


def _cost(change: FileChange, config: Config, metric: str) -> FileCost:
    path, status, added, deleted, kind = change
    if metric == "files" or kind == "submodule":
        cost = 1.0
    elif kind == "binary":
        cost = float(config["budget.weights.binary"])
    else:
        cost = ((added or 0) * config["budget.weights.added"]
                + (deleted or 0) * config["budget.weights.deleted"])
        # A pure rename or mode change still counts: something a reviewer must see.
        cost = max(cost, 1.0)
    return FileCost(path, status, added, deleted, kind, cost)

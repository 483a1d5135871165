"""Guard rails: the diff budget and checkpoints, as the hooks and the CLI use them.

For the hook layer -- each function takes an :class:`Event` (what the guard rails
read of a hook's input; the plugin parses the hook's JSON into it) and returns an
:class:`Outcome` (``Outcome()``: no opinion); the Claude plugin
(:mod:`manager.claude.guard`) turns it into the hook's JSON. None of them raises: a
failure becomes a notice so Claude is never blocked or trapped by a broken guard rail.
Call:

- SessionStart (every source):   ``on_session_start(event)``
  Captures the budget baseline unless the session already has one
  (idempotent for resume/compact/clear/fork).
- UserPromptSubmit:              ``on_prompt(event)``
  Overlap detection: continue the session's checkpoint stream or start afresh;
  with ``checkpoints.warn_other_sessions`` it may return a notice that Claude is
  told as well (``context``).
- Stop:                          ``on_stop(event)``
- SubagentStop:                  ``on_stop(event, subagent=True)``
  Takes an automatic checkpoint (Stop only) when something changed, then
  checks the budget: over the limit it returns a ``block`` (the reason) at most
  ``budget.max_blocks`` times per stop sequence (``stop_hook_active``), else
  nothing or a notice.

``event.session_id`` is the workspace session id. Outside a git repository
all of them return ``Outcome()`` (the feature turns itself off quietly).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from manager.errors import WorkspaceError
from manager.guardrails import budget
from manager.guardrails import checkpoints
from manager.guardrails import state as guardstate
from manager.guardrails.budget import Report
from manager.guardrails.shadow import Snapshot
from manager.guardrails.state import Blocks
from manager.guardrails.state import Budget
from manager.guardrails.state import Checkpoint
from manager.guardrails.state import Checkpoints
from manager.guardrails.state import GuardState
from manager.guardrails.target import Target
from manager.guardrails.target import for_hook
from manager.guardrails.target import require_git


@dataclass(frozen=True)
class Event:
    """What the guard rails read of a hook event."""

    session_id: str                 # the workspace session
    cwd: str | None = None          # where the agent is: the project, when no session says
    stop_hook_active: bool = False  # Stop: this stop follows one the guard rails refused
    agent_id: str | None = None     # SubagentStop: which subagent stops


@dataclass(frozen=True)
class Outcome:
    """What a guard rail has to say at a hook event."""

    notice: str | None = None     # for the user
    context: str | None = None    # for the model as well
    block: str | None = None      # the stop is refused: why, for the model


QUIET = Outcome()


@dataclass(frozen=True)
class Rewound:
    """What ``rewind`` did: the checkpoint restored, paths written or removed, and the
    checkpoint that undoes it (None when nothing was there to keep)."""

    rewound_to: int
    paths: int
    undo: int | None

    def as_json(self) -> dict[str, object]:
        return {"rewound_to": self.rewound_to, "paths": self.paths, "undo": self.undo}
# Subagents whose block counts are kept (their stop sequences are short).
_AGENTS_KEPT = 16


# -- hook entry points --------------------------------------------------------------


NO_SESSION = Outcome(notice="workspace guard rails: hook input has no session_id; skipped")


def on_session_start(event: Event) -> Outcome:
    return _guarded(event, _session_start)


def on_prompt(event: Event) -> Outcome:
    return _guarded(event, _prompt)


def on_stop(event: Event, subagent: bool = False) -> Outcome:
    # The egress record is no guard rail: a project without git hears of it too.
    return _guarded(event, lambda t, e: _with_egress(t, _stop(t, e, subagent)),
                    without_git=lambda t, e: _with_egress(t, QUIET))


def _with_egress(target: Target, outcome: Outcome) -> Outcome:
    """The network connections the sandbox refused since the last stop (setting
    ``network``), for the user and the model alike."""
    if target.session is None:
        return outcome
    from manager.egress import record

    refused = record.stop_context(target.session.sandbox)
    if refused is None:
        return outcome
    return Outcome(notice=_joined(outcome.notice, refused), context=_joined(outcome.context, refused),
                   block=outcome.block)


def _joined(first: str | None, second: str) -> str:
    return f"{first}\n{second}" if first else second


def _guarded(event: Event, action: Callable[[Target, Event], Outcome],
             without_git: Callable[[Target, Event], Outcome] | None = None) -> Outcome:
    if not event.session_id:
        return NO_SESSION
    try:
        target = for_hook(event.session_id, event.cwd)
        if target.shadow is None:
            return without_git(target, event) if without_git else QUIET
        return action(target, event)
    except WorkspaceError as exc:
        return Outcome(notice=f"workspace guard rails skipped: {exc}")
    except Exception as exc:  # noqa: BLE001 - a guard rail must never break the session
        return Outcome(notice=f"workspace guard rails failed unexpectedly: {exc!r}")


def _session_start(target: Target, event: Event) -> Outcome:
    with guardstate.edit(target.session_id) as state:
        _remember_project(target, state)
        if not state.get("budget", {}).get("baseline"):
            state["budget"] = budget.baseline_state(require_git(target), target.session_id,
                                                    target.snapshot())
    return QUIET


def _prompt(target: Target, event: Event) -> Outcome:
    config = target.ctx.config
    if not config["checkpoints.enabled"]:
        return QUIET
    shadow = require_git(target)
    snap = target.snapshot()
    with guardstate.edit(target.session_id) as state:
        _remember_project(target, state)
        cp = state.setdefault("checkpoints", checkpoints.fresh_state())
        checkpoints.continue_or_fresh(shadow, cp, snap)
    if not config["checkpoints.warn_other_sessions"]:
        return QUIET
    others = checkpoints.others_on_base(shadow, target.session_id, snap.head)
    if not others:
        return QUIET
    who = f"session {others[0]} holds" if len(others) == 1 else f"sessions {', '.join(others)} hold"
    text = (f"workspace: {who} uncommitted checkpoints on the "
            f"same base commit {snap.head[:10] if snap.head else ''}; their work may overlap "
            "with this session's")
    return Outcome(notice=text, context=text)


def _stop(target: Target, event: Event, subagent: bool) -> Outcome:
    config = target.ctx.config
    check = config["budget.enabled"] and (config["budget.subagents"] or not subagent)
    auto = config["checkpoints.enabled"] and config["checkpoints.auto"] and not subagent
    if not (check or auto):
        return QUIET
    snap = target.snapshot()
    with guardstate.edit(target.session_id) as state:
        _remember_project(target, state)
        if auto:
            _auto_checkpoint(target, state, snap)
        if not check:
            return QUIET
        report = _measure(target, state, snap)
        return _decide(target, _block_counter(state["budget"], event, subagent), report,
                       event.stop_hook_active)


def _block_counter(state: Budget, event: Event, subagent: bool) -> Blocks | Budget:
    """Where this stop sequence counts its blocks: the main agent's, or one per subagent.

    Separate counters, so a subagent's fresh stop sequence (``stop_hook_active``
    false) never resets the main agent's count mid-sequence, and the reverse.
    """
    if not subagent:
        return state
    key = event.agent_id or "subagent"
    agents = state.setdefault("agent_blocks", {})
    while key not in agents and len(agents) >= _AGENTS_KEPT:
        agents.pop(next(iter(agents)))          # the oldest: its sequence is long over
    return agents.setdefault(key, {})


def _auto_checkpoint(target: Target, state: GuardState, snap: Snapshot) -> None:
    shadow = require_git(target)
    cp = state.setdefault("checkpoints", checkpoints.fresh_state())
    if checkpoints.create(shadow, target.session_id, cp, snap, "automatic (Stop)", auto=True):
        keep = {ref for ref in [checkpoints.current_ref(target.session_id, cp)] if ref}
        cap = target.ctx.config["checkpoints.max_size_mb"] << 20
        checkpoints.enforce_cap(shadow, cap, keep)


def _decide(target: Target, state: Blocks | Budget, report: Report, active: bool) -> Outcome:
    if not active:
        state["blocks"] = 0
    if not report.over:
        return Outcome(notice=f"workspace: {report.notice}") if report.notice else QUIET
    if state.get("blocks", 0) >= target.ctx.config["budget.max_blocks"]:
        return Outcome(notice=f"workspace: {report.figure()} (limit {report.limit}); "
                              "not blocking again. Review, then `workspace reset`.")
    state["blocks"] = state.get("blocks", 0) + 1
    return Outcome(block=block_reason(report, target.ctx.config["budget.top_files"]))


def block_reason(report: Report, top: int) -> str:
    from manager.ui import quote

    names = ", ".join(f"{quote(f.path)} ({budget.format_count(f.cost)})" for f in report.biggest(top))
    return (f"Diff budget exceeded: {report.figure()} since the last review "
            f"(limit {report.limit}). Biggest files: {names}. Stop here and ask the user to "
            "review the changes (`workspace status`, `workspace diff`, `git diff`); "
            "after the review they run /workspace:reset (or `workspace reset`) to start a new "
            "budget.")


# -- shared with the CLI ------------------------------------------------------------------


def _remember_project(target: Target, state: GuardState) -> None:
    state["guard_project"] = str(target.ctx.project)


def _measure(target: Target, state: GuardState, snap: Snapshot) -> Report:
    report, state["budget"] = budget.measure(require_git(target), target.ctx.config,
                                             state.get("budget", {}), target.session_id, snap)
    return report


def measure(target: Target) -> Report:
    """The budget now (re-baselining if needed), for ``workspace budget``."""
    snap = target.snapshot()
    with guardstate.edit(target.session_id) as state:
        _remember_project(target, state)
        return _measure(target, state, snap)


def reset(target: Target) -> Budget:
    """Re-baseline at the current state (idempotent); the new budget state."""
    shadow = require_git(target)
    snap = target.snapshot()
    with guardstate.edit(target.session_id) as state:
        _remember_project(target, state)
        state["budget"] = budget.baseline_state(shadow, target.session_id, snap)
        return Budget(**state["budget"])


def checkpoint(target: Target, message: str) -> Checkpoint | None:
    """A checkpoint on demand; None when nothing changed since the last one."""
    shadow = require_git(target)
    snap = target.snapshot()
    with guardstate.edit(target.session_id) as state:
        _remember_project(target, state)
        cp = state.setdefault("checkpoints", checkpoints.fresh_state())
        item = checkpoints.create(shadow, target.session_id, cp, snap, message, auto=False)
        if item is not None:
            keep = {ref for ref in [checkpoints.current_ref(target.session_id, cp)] if ref}
            checkpoints.enforce_cap(shadow, target.ctx.config["checkpoints.max_size_mb"] << 20,
                                    keep)
        return item


def list_checkpoints(target: Target) -> list[Checkpoint]:
    shadow = require_git(target)
    state = guardstate.read(target.session_id).get("checkpoints") or checkpoints.fresh_state()
    return checkpoints.listing(shadow, target.session_id, state)


def rewind(target: Target, ident: str) -> Rewound:
    """Checkpoint the current state, then restore checkpoint ``ident`` exactly."""
    from manager.guardrails import rewind as rewind_mod

    shadow = require_git(target)
    with guardstate.edit(target.session_id) as state:
        cp = state.setdefault("checkpoints", checkpoints.fresh_state())
        item = checkpoints.find(checkpoints.listing(shadow, target.session_id, cp), ident)
        snap = target.snapshot()
        before = checkpoints.create(shadow, target.session_id, cp, snap,
                                    f"before rewind to {item['id']}", auto=False)
        # Without a sandbox any more (committed, removed), the view is all there is.
        wanted = item["worktree"] if target.session is not None else item["tree"]
        files = rewind_mod.restore_worktree(shadow, snap.worktree, wanted)
        if target.session is not None:
            files += rewind_mod.restore_view(target, target.snapshot().view, item["tree"])
        now = target.snapshot()
        undo = before["id"] if before else _tip_id(cp)
    if (now.worktree, now.view) != (wanted, item["tree"]):
        raise WorkspaceError(f"rewind to {item['id']} left differences (ignored files or "
                             "submodules in the way?)",
                             hint="`workspace status` and `git status` show what remains")
    return Rewound(item["id"], files, undo)


def _tip_id(cp: Checkpoints) -> int | None:
    stream = cp.get("stream")
    tip = stream["tip"] if stream is not None else None
    return next((i["id"] for i in cp["items"] if i["commit"] == tip), None)


def prune(target: Target, everything: bool, older_than: float | None,
          now: bool) -> checkpoints.PruneReport:
    """``workspace checkpoints prune``: stale streams (or all of this session's), then gc."""
    shadow = require_git(target)
    size_before = checkpoints.store_size(shadow)
    if everything:
        doomed = checkpoints.session_streams(shadow, target.session_id)
    else:
        max_age = older_than if older_than is not None else target.ctx.config[
            "checkpoints.max_age_days"]
        guardstate.forget_idle(max_age)
        doomed = checkpoints.stale_streams(shadow, max_age, guardstate.known_ids())
    checkpoints.prune(shadow, doomed, now=now)
    if everything:
        with guardstate.edit(target.session_id) as state:
            state["checkpoints"] = checkpoints.fresh_state()
    return checkpoints.PruneReport(doomed, size_before, checkpoints.store_size(shadow))

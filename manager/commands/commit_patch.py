"""``workspace commit -p``: the interactive half of ``workspace commit``.

The questions are asked without the session's lock (an agent's calls go on
meanwhile); the answers are applied under it, and only where the real file and
the sandbox's copy still hold what the questions showed.
"""

from __future__ import annotations

from pathlib import Path

from manager import ui
from manager.changes.model import Change
from manager.changes.model import select
from manager.commands.common import never_committed
from manager.commit import apply
from manager.commit import partial
from manager.commit.exclude import compile_patterns
from manager.errors import WorkspaceError
from manager.review import patch_prompt
from manager.review.grouping import group
from manager.session import shown
from manager.session.context import Context
from manager.session.sandbox import kept_out
from manager.session.sandbox import pending
from manager.session.sandbox import reviewable
from manager.session.sandbox import upper_at_rest
from manager.session.store import Session


def commit_patch(ctx: Context, session: Session, paths: list[Path], *, force: bool) -> int:
    project = session.project_path
    kept = kept_out(ctx)            # once: it resolves hide's globs
    excluded = compile_patterns(never_committed(ctx, kept), project)
    offered = [c for c in select(pending(ctx, session), paths) if not excluded(c.path)]
    seen = shown.digests(offered)   # before anything is shown
    choices = patch_prompt.choose(_units(offered, project), project, patch_prompt.terminal_ask,
                                  ui.out)
    if not choices.partial and not choices.whole:
        ui.out("nothing chosen: everything stays pending")
        return 0
    with upper_at_rest(ctx, session, unheld=True) as layers:
        # Applied only as shown: nothing runs in the sandbox from here on, so what is
        # checked now is what is applied.
        _refuse_changed(shown.changed(seen, choices.whole))
        _refuse_changed(_not_as_shown(choices.shown))
        _refuse_changed([str(p.change.path) for p in choices.partial
                         if not partial.still_shown(p.change, p.new)])

        offered_record = shown.Review(seen, {upper for upper, _, _ in seen})

        def vet(applying: list[Change]) -> None:   # what commit applies, as it reads it
            now = [c for c in reviewable(ctx, applying, kept) if not excluded(c.path)]
            _refuse_changed(shown.late(offered_record, now, choices.whole))

        # Exactly the units chosen (a directory's own change, not what was offered below it).
        result = apply.commit(session.dir, layers, project, choices.whole, force=force,
                              exclude=never_committed(ctx, kept), vet=vet, kept=kept,
                              units=True) if choices.whole else None
        written = [_write(plan) for plan in choices.partial]
        shown.forget_gone(session, result.applied_paths if result is not None else ())
    if result is not None:
        ui.out(f"committed {ui.count(len(result.applied_paths), 'path')} whole")
        for issue in [*result.conflicts, *result.errors]:
            ui.err(ui.paint(f"  {ui.quote(str(issue.path))}: {ui.shown(issue.reason)}", "red"))
    for path in written:
        ui.out(f"committed part of {ui.quote(str(path))}; the rest stays pending")
    return 0 if result is None or result.ok else 1


def _refuse_changed(late: list[str]) -> None:
    """A file chosen whole is applied only as the questions read it (a call, or a process
    one left, may write it meanwhile, through a mapping without moving its times)."""
    if late:
        names = ", ".join(ui.quote(p) for p in late[:5]) + (" ..." if len(late) > 5 else "")
        raise WorkspaceError(f"the sandbox changed {names} while you chose; nothing written",
                             hint="run `workspace commit -p` again")


def _not_as_shown(plans: list[patch_prompt.FilePlan]) -> list[str]:
    """The text files taken whole whose sandbox bytes are not those their hunks showed
    (a call wrote them between the first look and the question, then back)."""
    return [str(plan.change.path) for plan in plans if not partial.still_shown(plan.change, plan.new)]


def _units(changes: list[Change], project: Path) -> list[Change]:
    """What to ask about: a new directory once (not every file in it), .git left out
    (its history is committed through git by ``workspace commit``)."""
    groups = group(changes, project)
    entries = [*groups.project, *(e for es in groups.ignored.values() for e in es),
               *(e for es in groups.elsewhere.values() for e in es)]
    return [e.change for e in entries]


def _write(plan: patch_prompt.FilePlan) -> Path:
    change = plan.change
    if not partial.holds(change.upper, plan.new):
        raise WorkspaceError(f"the sandbox changed {change.path} while you chose hunks; "
                             "nothing written to it", hint="run `workspace commit -p` again")
    partial.write_real(change.path, plan.old, plan.result())
    partial.renew_upper(change.upper, change.path)
    return change.path

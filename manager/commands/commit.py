"""``workspace commit``: apply pending changes to the real filesystem."""

from __future__ import annotations

import argparse
from pathlib import Path

from manager import ui
from manager.changes.display import resolve_paths
from manager.changes.model import Change
from manager.changes.model import is_within
from manager.commands.common import json_arg
from manager.commands.common import never_committed
from manager.commands.common import review_context
from manager.commands.common import session_args
from manager.commit import apply
from manager.commit import btime
from manager.commit import history as history_mod
from manager.commit.session import Target
from manager.commit.session import commit_session
from manager.errors import WorkspaceError
from manager.session import reviewed
from manager.session import shown
from manager.session.sandbox import forget_review_cache
from manager.session.sandbox import kept_out
from manager.session.sandbox import reviewable
from manager.session.sandbox import upper_at_rest
from manager.session.store import Session


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("commit", help="apply pending changes (all, or the named paths)",
                       description="Apply the session's changes to the real filesystem. A path "
                                   "whose real file changed since the sandbox copied it is a "
                                   "conflict: reported and left pending unless --force. Commits, "
                                   "branches and tags the agent made are applied through git.")
    session_args(p)
    p.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below)")
    p.add_argument("--force", action="store_true", help="overwrite conflicting real files")
    p.add_argument("--allow-special", action="store_true",
                   help="also commit device nodes, setuid/setgid files and files with "
                        "capabilities (refused otherwise; `workspace status` marks them)")
    p.add_argument("-p", "--patch", action="store_true",
                   help="choose hunk by hunk, as git add -p; the rest stays pending")
    json_arg(p)
    p.set_defaults(func=commit)


def commit(args: argparse.Namespace) -> int:
    ctx = review_context(args.project)
    session = ctx.session(args.session)
    paths = resolve_paths(args.paths)
    # Less a second: file timestamps come from a coarse clock that lags time.time().
    btime.set_floor(int((session.created - 1) * 1e9))
    if args.patch:
        from manager.commands.commit_patch import commit_patch

        return commit_patch(ctx, session, paths, force=args.force)
    target = Target(session.dir, session.project_path, session.id, session.created)
    after = reviewed.since(session)
    if after is not None:
        # Read before the engine is released: its release writes the upper too (the work
        # dir cleared moves the whiteouts' shared inode; entries handed back to the user),
        # and those writes are ours, no process's.
        live = ctx.engine(session).layers(session)
        _refuse_unreviewed(reviewed.unreviewed(live, session.project_path, after), paths)
    seen = shown.current(session)   # before the release, which may tidy the call records
    kept = kept_out(ctx)            # once: it resolves hide's globs

    def vet(applying: list[Change]) -> None:
        # The sandbox is stopped: what is compared is what is applied, as commit read it.
        if seen is not None:
            _refuse_changed(session, shown.late(seen, reviewable(ctx, applying, kept), paths))

    with upper_at_rest(ctx, session, unheld=True) as layers:
        finished = _finish_interrupted(session)
        if seen is not None:   # what it finished left the upper by its hand
            seen = shown.without(seen, {str(p) for p in finished.resumed})
        done = commit_session(target, layers, paths, exclude=never_committed(ctx, kept),
                              kept=kept, force=args.force, allow_special=args.allow_special,
                              progress=ui.progress("committing"), vet=vet)
        shown.forget_gone(session, done.result.applied_paths, done.discarded)   # by its hand
    _merge(finished, done.result)
    if args.json:
        ui.dump_json(done.as_json())
    else:
        _report(done.result, done.history, done.applied)
    return 0 if done.ok else 1


def _refuse_unreviewed(late: list[Path], paths: list[Path]) -> None:
    """Nothing is applied while a process outside any call changed a path after review."""
    # Within the paths named, or above one (a new parent commit brings along).
    late = [p for p in late if not paths or any(is_within(p, n) or is_within(n, p)
                                                for n in paths)]
    if late:
        shown = ", ".join(ui.quote(str(p)) for p in late[:5]) + (" ..." if len(late) > 5 else "")
        raise WorkspaceError(
            f"{ui.count(len(late), 'path')} changed after the last call ended and after your "
            f"last review, by a process a call left running: {shown}; nothing was committed",
            hint="review again (workspace status / workspace diff), then commit: the sandbox is "
                 "stopped now, nothing changes it until the next call")


def _finish_interrupted(session: Session) -> apply.CommitResult:
    """An interrupted commit, finished first (before the check against review, which must
    not read what it finished as changed since)."""
    finished = apply.CommitResult()
    apply.resume(session.dir, session.project_path, finished)
    return finished


def _merge(finished: apply.CommitResult, result: apply.CommitResult) -> None:
    result.resumed[:0] = finished.resumed
    result.conflicts[:0] = finished.conflicts
    result.errors[:0] = finished.errors


def _refuse_changed(session: Session, late: list[str]) -> None:
    """Nothing is applied while a file's content is not what the last review read; the
    next review reads every entry afresh."""
    if late:
        forget_review_cache(session)
        names = ", ".join(ui.quote(p) for p in late[:5]) + (" ..." if len(late) > 5 else "")
        raise WorkspaceError(
            f"{ui.count(len(late), 'path')} changed after review: {names}; "
            "nothing was committed",
            hint="review again (workspace status / workspace diff), then commit: the sandbox "
                 "is stopped now, nothing changes it until the next call")


def _report(result: apply.CommitResult, history: history_mod.History | None,
            applied: history_mod.HistoryResult | None) -> None:
    if result.resumed:
        ui.out(f"finished an interrupted commit: {ui.count(len(result.resumed), 'path')} in place")
    ui.out(f"committed {ui.count(len(result.applied_paths), 'path')}")
    git_dir = history.repo.git_dir if history is not None else None
    held = set(history.flagged) if history is not None else set()
    for path in result.skipped:
        if path in held:
            ui.out(ui.paint(f"  security-relevant, still pending: {ui.quote(str(path))} (name it to commit "
                            "it: workspace commit PATH)", "yellow"))
            continue
        if git_dir is not None and is_within(path, git_dir) or \
                history is not None and path in history.kept:
            continue   # applied through git below
        ui.out(ui.paint(f"  excluded (still pending): {ui.quote(str(path))}", "dim"))
    for issue in result.conflicts:
        ui.err(ui.paint(f"  conflict: {ui.quote(str(issue.path))}: {ui.shown(issue.reason)}", "red"))
    for issue in result.refused:
        ui.err(ui.paint(f"  refused: {ui.quote(str(issue.path))}: {ui.shown(issue.reason)}", "red"))
    for issue in result.errors:
        ui.err(ui.paint(f"  error: {ui.quote(str(issue.path))}: {ui.shown(issue.reason)}", "red"))
    for issue in result.notes:
        ui.out(ui.paint(f"  note: {ui.quote(str(issue.path))}: {ui.shown(issue.reason)}", "yellow"))
    if result.refused:
        ui.err("refused paths (device nodes, setuid/setgid, file capabilities) were left "
               "pending: review them, then `workspace commit --allow-special PATH` to commit "
               "them, or discard them")
    if result.conflicts:
        ui.err("conflicting paths were left pending: review them with `workspace diff PATH`, "
               "then `workspace commit --force PATH` to overwrite, or discard them")
    if applied is not None and history is not None:
        _report_history(applied, history)


def _report_history(applied: history_mod.HistoryResult, history: history_mod.History) -> None:
    for line in applied.created:
        ui.out(f"git: created {ui.shown(line)}")
    for line in applied.moved:
        ui.out(f"git: moved {ui.shown(line)}")
    for line in applied.deleted:
        ui.out(f"git: deleted {ui.shown(line)}")
    if applied.stashed:
        ui.out(f"git: {applied.stashed} stash entr{'y' if applied.stashed == 1 else 'ies'} added")
    for ref, side in applied.diverted:
        short = ui.quote(side.removeprefix("refs/heads/").removeprefix("refs/tags/"))
        name = ui.quote(ref.removeprefix("refs/heads/"))
        ui.out(ui.paint(f"git: {name} moved since the sandbox started from it; the agent's "
                        f"commits are on {short}", "yellow"))
        ui.out(f"     merge them: git merge {short}   (or rebase: git rebase {name} {short})")
    if history.kept:
        ui.out(f"git: {ui.count(len(history.kept), 'file')} of those commits "
               f"{'stays' if len(history.kept) == 1 else 'stay'} on that branch, not in the work tree")
    for problem in applied.problems:
        ui.err(ui.paint(f"  git: {ui.shown(problem)}", "red"))

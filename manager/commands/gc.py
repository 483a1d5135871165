"""``workspace gc``: remove stale empty sessions; report stale ones that hold changes."""

from __future__ import annotations

import argparse

from manager import ui
from manager.commands.common import json_arg
from manager.commands.common import owned_records
from manager.session import lifecycle


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("gc", help="clean up sessions whose client is gone",
                       description="Remove sessions whose client process is gone (or idle longer "
                                   "than gc.max_age_days) and whose sandbox is empty. Sessions "
                                   "that still hold changes are reported, never deleted. "
                                   "Containers of stale or deleted sessions are removed "
                                   "(their changes stay in the session).")
    p.add_argument("--dry-run", action="store_true", help="only say what would happen")
    json_arg(p)
    p.set_defaults(func=gc)


def gc(args: argparse.Namespace) -> int:
    report = lifecycle.collect(owned_records(), dry_run=args.dry_run)
    if args.json:
        ui.dump_json({"removed": report.removed,
                      "kept": [{"id": i, "pending": n} for i, n in report.kept],
                      "containers": report.containers, "errors": report.errors,
                      "dry_run": args.dry_run})
        return 1 if report.errors else 0
    verb = "would remove" if args.dry_run else "removed"
    for session_id in report.removed:
        ui.out(f"{verb} {session_id} (no pending changes)")
    for session_id, pending in report.kept:
        ui.out(f"kept {session_id}: {ui.count(pending, 'pending change')}; review with "
               f"`workspace status --session {session_id}`, then commit or discard")
    for ctr in report.containers:
        ui.out(f"{verb} container {ctr['name']} ({ctr['engine']}, {ctr['reason']}: "
               f"{ctr['session']})")
    for error in report.errors:
        ui.err(f"workspace: {error}")
    if not (report.removed or report.kept or report.containers or report.errors):
        ui.out("nothing to collect")
    return 1 if report.errors else 0

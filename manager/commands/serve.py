"""``workspace serve``: run the resident hook service in the foreground (manager/service)."""

from __future__ import annotations

import argparse
import os

from manager import ui


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help="run the resident hook service (started on demand by the hook)",
                       description="Answer the plugin's per-call hooks from one resident process "
                                   "per user, so that a Bash call does not pay a Python start. "
                                   "The hook starts it on demand and falls back to answering "
                                   "itself whenever it does not answer; it exits when idle. "
                                   "It serves the hook events only: nothing it answers can "
                                   "commit, trust, change settings or turn the sandbox off.")
    p.add_argument("--idle", type=float, default=float(os.environ.get("WORKSPACE_SERVICE_IDLE")
                                                         or 1800),
                   help="exit after this many seconds without a request (default 1800)")
    p.add_argument("--status", action="store_true", help="say whether one runs, and exit")
    p.set_defaults(func=serve)


def serve(args: argparse.Namespace) -> int:
    import sys

    from manager.service import endpoint

    if args.status:
        found = endpoint.read()
        ui.out(f"workspace serve: listening on 127.0.0.1:{found[0]}" if found and
               endpoint.running() else "workspace serve: not running")
        return 0
    if endpoint.running():
        ui.out("workspace serve: already running (one per user)")
        return 0
    # The service's own process, in this one's place: it sits above the commands (it runs
    # the review commands for the plugin's launcher), so no command imports it.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-I", "-m", "manager.service.server", root,
                              str(args.idle)])

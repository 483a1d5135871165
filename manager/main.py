"""The ``workspace`` command: parse, dispatch, and map errors to exit codes.

Exit codes: 0 success, 1 expected error (message and fix on stderr), 3
unexpected error (crash log written), 130 interrupted. ``run`` returns the
sandboxed command's own status.
"""

from __future__ import annotations

import sys

from manager import __version__
from manager.errors import WorkspaceError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

COMMANDS = (
    "run", "status", "diff", "commit", "discard", "sessions", "doctor", "gc", "config",
    "reset", "budget", "checkpoint", "checkpoints", "rewind", "image", "hooks", "passthrough",
    "serve",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that command's (so ``run`` imports only what it needs)."""
    import argparse
    import importlib

    parser = argparse.ArgumentParser(
        prog="workspace",
        description="Run commands with their side effects held in a copy-on-write overlay; "
                    "review, then commit or discard.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"workspace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only else COMMANDS:
        importlib.import_module(f"manager.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None and sys.argv[1:2] == ["run"]:
        # As a program (never for a caller in this process): a run with nothing to decide
        # goes to the sandbox's entry here, before argparse and the package are imported.
        from manager.commands import run_lean

        status = run_lean.attempt(sys.argv[2:])
        if status is not None:
            import os

            os._exit(status)   # nothing written, nothing to finalize: ~4 ms of teardown spared
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except WorkspaceError as exc:
        from manager import ui
        ui.err(f"workspace: error: {exc}")
        return 1
    except BrokenPipeError:
        # Output piped into `head` and the like: not an error worth a trace.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        from manager import ui
        ui.err("workspace: interrupted")
        return 130
    except Exception:  # noqa: BLE001 - one place turns crashes into a log and exit 3
        return _crash()


def _crash() -> int:
    import os
    import platform
    import tempfile
    import traceback

    log = os.path.join(tempfile.gettempdir(), f"workspace-crash-{os.getpid()}.log")
    with open(log, "w", encoding="utf-8") as f:
        f.write(f"workspace {__version__}, Python {platform.python_version()}, "
                f"{platform.platform()}\nargv: {sys.argv!r}\n\n{traceback.format_exc()}")
    from manager import ui
    ui.err(f"workspace: unexpected error: {sys.exc_info()[1]!r}\n"
           f"a crash log was written to {log}; please include it in a bug report")
    return 3


if __name__ == "__main__":
    raise SystemExit(main())

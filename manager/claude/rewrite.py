"""The rewritten Bash command: the original, run in the session's sandbox.

Claude Code evaluates what we return in its own shell, as
``eval '<REWRITTEN>' && pwd -P >| <cwd file>``, and takes the shell's final
directory as its working directory only when that exits 0. The rewrite is::

    [VAR=value] <engine entry> <sandbox cwd> <cwd out> '<original>'; \
        . finish.sh $? <session dir> <cwd out> <state dir>

The engine's lean entry (its argv, cached as a template in the session's hot
state) runs the original in the sandbox and writes the sandbox's final working
directory to ``<cwd out>``; ``finish.sh`` then moves the client's shell there
when it is the same directory on the real filesystem and not inside the state
directory (where the sessions' upper directories are: the sandbox must not
steer the client into files it wrote), records it for the next call, and
returns the original exit status. ``VAR=value`` prefixes set variables for the
sandboxed command only (``GIT_OPTIONAL_LOCKS=0`` for a git command). ``run_in_background`` calls skip the cwd
part: the client never moves its cwd for them.
"""

from __future__ import annotations

import os

COMMAND = "@@workspace:command@@"
CWD = "@@workspace:cwd@@"
CWD_OUT = "@@workspace:cwd_out@@"
# Where to start when the sandbox cwd (the last command's report of where it ended, which the
# command can forge) does not exist in the sandbox: the client's own directory. The engines'
# entries read and unset it; a bad report never stops a call.
CWD_ELSE = "__WS_CWD_ELSE"
FINISH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "finish.sh")
# Linux limits one argument to 128 KiB, and the client quotes our command once
# more: larger commands are handed over in a file instead.
INLINE_LIMIT = 96 * 1024


def quote(text: str) -> str:
    """Single-quote for bash; safe for every character but NUL."""
    return "'" + text.replace("'", "'\"'\"'") + "'"


def choose_cwd(hook_cwd: str, record: tuple[str, str] | None) -> str:
    """Where the command starts in the sandbox.

    After a call, finish.sh records (sandbox cwd, client cwd it left). When the
    client is still where that call left it, the sandbox cwd is the truth (it
    may be a directory that exists only in the overlay); when the client has
    moved since (it reset its cwd, a user's /cd, a failed call) the client wins.
    The recorded one is the command's own report: the caller hands the entry the
    client's directory too (:data:`CWD_ELSE`), for when it does not exist inside.
    """
    if record is not None and record[1] == hook_cwd:
        return record[0]
    return hook_cwd


def fill(template: list[str], command: str, cwd: str, cwd_out: str) -> list[str]:
    values = {COMMAND: command, CWD: cwd, CWD_OUT: cwd_out}
    return [values.get(arg, arg) for arg in template]


def spill(path: str, command: str) -> str:
    """Write a too-long command to ``path``; return the short command that runs it."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)   # a command may hold a token
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with open(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(command)
    return f"eval \"$(<{quote(path)})\""


def inline_cost(command: str) -> int:
    # shlex-style quoting grows each ' to 5 characters, and the client does it again.
    return len(command.encode("utf-8", "surrogatepass")) + 24 * command.count("'")


TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Callable

    Entry = Callable[[str, str, str], list[str]]   # (command, cwd, cwd_out) -> argv


def templated(entry: list[str], entry_bg: list[str]) -> Entry:
    """An :data:`Entry` from the engine's cached argv templates."""
    return lambda command, cwd, out: fill(entry if out else entry_bg, command, cwd, out)


def build(entry: Entry, session_dir: str, tool_use_id: str, command: str,
          cwd: str, background: bool, state_dir: str = "/nonexistent",
          env: tuple[str, ...] = ()) -> str:
    calls = os.path.join(session_dir, "calls")
    script_file = ""
    if inline_cost(command) > INLINE_LIMIT:
        # Read inside the sandbox, so not under the state directory, which it never sees.
        from manager.session import paths

        script_file = os.path.join(paths.spill_root(), os.path.basename(session_dir),
                                   f"{tool_use_id}.sh")
        command = spill(script_file, command)
    if background:
        argv = entry(command, cwd, "")
        return "".join(v + " " for v in env) + " ".join(quote(a) for a in argv)
    cwd_out = os.path.join(calls, f"{tool_use_id}.cwd")
    os.makedirs(calls, exist_ok=True)
    argv = entry(command, cwd, cwd_out)
    finish = [FINISH, "$?", session_dir, cwd_out, state_dir] + \
        ([script_file] if script_file else [])
    tail = " ".join(a if a == "$?" else quote(a) for a in finish)
    return "".join(v + " " for v in env) + " ".join(quote(a) for a in argv) + "; . " + tail

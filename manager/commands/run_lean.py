"""``workspace run``'s lean path: straight to the sandbox's entry when nothing has changed.

The full path (commands/run.py) parses the arguments, loads the layered configuration
(YAML), the session store and the engine before the command starts: ~90 ms of CPU, where
the overlay engine's entry itself costs a few (issue 23). So a full run whose engine has
the ``LeanRun`` capability leaves beside its session ``run-entry.json``: the entry's argv
with placeholders, and the key of everything that run's decisions came from -- the
content of each configuration file, of the trust record, of Claude's settings that
``network`` may take its domains from, of the session record and of the running holder's
pid file; the environment variables that name or set any of them; the project, the
interpreter and this code. A later ``workspace run -- CMD`` (or ``run CMD``, or ``run -c
SCRIPT``: no option) reads the project's current-session pointer and that record, takes
the session's lock shared as the full path does and, when every part of the key holds,
runs the entry as the full path runs it (a child that dies with it, signals forwarded to
the call's tree, its status returned). It imports ``os``, ``fcntl``, ``_json``, ``_signal``
and sha256.
Anything else -- an option, no session or record, any input changed, a note to give, the
lock held by a commit, any error -- returns, and the full path runs.

The entry checks the holder itself, and a call it cannot enter goes to the full
``workspace run`` (``WORKSPACE_LEAN_RUN``): the command never runs outside the sandbox,
and a failure is reported as the full path reports it.
"""

from __future__ import annotations

import os
import sys

from manager import fastjson
from manager import versioning
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.engines.base import Engine
    from manager.session.store import Session

RECORD = "run-entry.json"
FORMAT = 1               # a cache: one in another format, or by other code, is rewritten
LEAN_RUN = "WORKSPACE_LEAN_RUN"   # read by overlay/enter.sh (tests/engines/test_entry_scripts.py)
COMMAND = "@@workspace:command@@"
CWD = "@@workspace:cwd@@"
CODE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# shlex.quote's safe characters (``[\w@%+=:,./-]``, ASCII): shlex imports re.
SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")


def attempt(argv: list[str]) -> int | None:
    """Run ``workspace run ARGV`` through the entry and return its status; None when the
    full path must run (nothing was started then)."""
    try:
        command = simple_command(argv)
        if command is None:
            return None
        cwd = os.getcwd()
        project = paths.project_of(cwd)
        session_dir = _current_session(project)
        if session_dir is None:
            return None
        record = _read_json(os.path.join(session_dir, RECORD))
        lock = _lock_shared(session_dir)
    except Exception:  # noqa: BLE001 - any doubt: the full path, which says what is wrong
        return None
    if lock is None:
        return None
    try:
        pid = _spawn(record["entry"], command, cwd) if _holds(record, project) else None
    except Exception:  # noqa: BLE001 - as above: nothing was started
        pid = None
    if pid is None:
        os.close(lock)
        return None
    return _wait(pid)      # the lock is held until the call ends, as the full path holds it


def simple_command(argv: list[str]) -> str | None:
    """The command of ``workspace run ARGV`` when ARGV has no option (as run.py reads it:
    the words joined as by ``shlex.join``), else None."""
    if len(argv) >= 2 and argv[0] == "--":
        return join(argv[1:])
    if len(argv) == 2 and argv[0] == "-c" and not argv[1].startswith("-"):
        return argv[1]
    if argv and not argv[0].startswith("-"):
        return join(argv)
    return None


def join(words: list[str]) -> str:
    """``shlex.join``, without importing ``shlex`` (and ``re``)."""
    return " ".join(w if w and all(c in SAFE for c in w)
                    else "'" + w.replace("'", "'\"'\"'") + "'" for w in words)


def _read_json(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data = fastjson.loads(f.read())
    if not isinstance(data, dict):
        raise ValueError(f"{path} is not an object")
    return data


def _current_session(project: str) -> str | None:
    """The directory of the project's current session, as the pointer names it."""
    pointer = _read_json(paths.pointer_file(project))
    current = versioning.KINDS["pointer"][0]
    if pointer.get(versioning.KEY, versioning.UNVERSIONED) != current:
        return None                      # the full path reads (or refuses) other formats
    session_id = pointer.get("session")
    if pointer.get("project") != project or not paths.valid_id(session_id):
        return None
    return paths.session_root(session_id)


def _lock_shared(session_dir: str) -> int | None:
    """The session's lock, taken shared as the full path takes it; None while a commit or
    discard holds it (the full path waits for it)."""
    import fcntl

    fd = os.open(os.path.join(session_dir, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _holds(record: dict[str, Any], project: str) -> bool:
    """The record was written by this code, and every part of its key is as it was."""
    if record.get("format") != FORMAT or record.get("code") != [CODE, versioning.RELEASE]:
        return False
    key = record["key"]
    env = [name for name, _ in key["env"]]
    files = [path for path, _ in key["files"]]
    return bool(key == start_key(project, env, files))


def _spawn(template: list[str], command: str, cwd: str) -> int:
    """Start the entry as the full path does (engines/procs.run_tree): a child that dies
    with this process (setpriv: no ctypes here), with the signal dispositions a program
    started by subprocess has. Raises, with nothing started, when it cannot be run."""
    import _signal  # type: ignore[import-not-found]  # signal without enum (its names: ints)

    argv = [{COMMAND: command, CWD: cwd}.get(arg, arg) for arg in template]
    argv = ["setpriv", "--pdeathsig", "KILL", *argv]
    env = dict(os.environ, **{LEAN_RUN: "isolated" if sys.flags.isolated else "plain"})
    # Before the child exists, so no signal falls between; its exec resets them.
    previous = {name: _signal.signal(getattr(_signal, name), _forward) for name in FORWARDED}
    try:
        ignored = [name for name, handler in previous.items() if handler == _signal.SIG_IGN]
        _child[0] = _fork_exec(argv, env, _signal, ignored)
    except BaseException:
        for name, handler in previous.items():     # the full path's own, as they were
            _signal.signal(getattr(_signal, name), handler)
        raise
    return int(_child[0])


def _fork_exec(argv: list[str], env: dict[str, str], signals: Any, ignored: list[str]) -> int:
    """fork and exec, as subprocess does: not posix_spawn, whose child leaves glibc's
    internal signals (32, 33) ignored for the command. A failed exec is told back through
    a close-on-exec pipe and raised here. ``ignored``: forwarded signals this process was
    started with ignored (a background job's INT and QUIT): ignored again in the child, as
    the full path's child inherits them (the forwarding handlers would reset them at exec)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: exec or exit, never return
        try:
            os.close(read_end)
            for name in ("SIGPIPE", "SIGXFSZ"):   # Python ignores them; a command must not
                signals.signal(getattr(signals, name), signals.SIG_DFL)
            for name in ignored:
                signals.signal(getattr(signals, name), signals.SIG_IGN)
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            os.write(write_end, f"{getattr(exc, 'errno', 0) or 0}".encode())
        finally:
            os._exit(127)
    os.close(write_end)
    with open(read_end, "rb") as pipe:
        failed = pipe.read()
    if failed:
        os.waitpid(pid, 0)
        raise OSError(int(failed), f"cannot run {argv[0]}")
    return pid


FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")   # engines/procs.FORWARDED's
_child = [0]


def _forward(signum: int, _frame: object) -> None:
    """INT, TERM, HUP and QUIT go to every process of the call, as the full path sends them."""
    if _child[0]:
        from manager.engines import procs  # only when signalled

        procs.signal_tree(_child[0], signum)


def _wait(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code     # engines/procs.exit_status


# -- the key: the same functions for the record and the check ------------------------------


def start_key(project: str, env: list[str], files: list[str]) -> dict[str, Any]:
    return {"project": project, "python": sys.executable,
            "env": [[name, os.environ.get(name)] for name in env], "files": digests(files)}


def digests(files: list[str]) -> list[list[str | None]]:
    return [[path, digest(path)] for path in files]


def digest(path: str) -> str | None:
    """The SHA-256 of a file's content; None when there is none; "special" for what is not
    a regular file (never opened for reading: a fifo would block)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "special"
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return paths.sha256_hex(b"".join(chunks))


# -- the record, written by the full path --------------------------------------------------


def before_load(project: str) -> dict[str, Any]:
    """The key's part that must be read before the configuration is loaded (a file changed
    in between then leaves a key that no longer holds, never one that holds wrongly)."""
    from manager import config
    from manager.egress import launch

    files, env = config.inputs(project)
    policy_files, policy_env = launch.inputs(project)
    return start_key(project, list(dict.fromkeys([*env, *policy_env])), [*files, *policy_files])


def remember(key: dict[str, Any], session: Session, engine: Engine) -> None:
    """Write the record, once the engine has prepared the sandbox under the session's lock;
    nothing when the engine's entry cannot be run from a record."""
    from pathlib import Path

    from manager.engines.base import RunRequest
    from manager.engines.base import has_lean_run
    from manager.session import store

    if not has_lean_run(engine):
        return
    template = [str(a) for a in engine.entry_argv(session, RunRequest(command=COMMAND, cwd=CWD))]
    if any(template.count(p) != 1 or any(p in a and a != p for a in template)
           for p in (COMMAND, CWD)):
        return
    files = [str(session.dir / store.RECORD), *(str(p) for p in engine.lean_run_files(session))]
    key = dict(key, files=[*key["files"], *digests(files)])
    record = {"format": FORMAT, "code": [CODE, versioning.RELEASE], "key": key, "entry": template}
    path = Path(session.dir / RECORD)
    tmp = path.with_name(f".{RECORD}.{os.getpid()}.tmp")
    try:
        tmp.write_text(fastjson.dumps(record), encoding="utf-8")
        os.replace(tmp, path)   # a cache: no fsync; a torn one is unreadable, and not used
    finally:
        tmp.unlink(missing_ok=True)

"""`workspace run`'s lean path (commands/run_lean): a run with nothing to decide execs the
sandbox's entry before argparse, the configuration or the engines are imported; any input
of the full path's decisions that changed, an option, or a holder gone sends it the full
way, and the command never runs outside the sandbox (issue 23)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from manager.commands import run as run_command
from manager.commands import run_lean
from manager.main import build_parser
from manager.session import paths

REPO = Path(__file__).resolve().parents[2]
# Imported by the full path, never by the lean one (the entry is exec'd before them).
FULL_PATH_ONLY = ("argparse", "manager.commands.run", "manager.config", "manager.engines")


def _run(project: Path, *argv: str, input: str | None = None, cwd: Path | None = None,
         preexec_fn: Callable[[], None] | None = None,
         ) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`python -m manager run ARGV` and whether it took the lean path (what it imported
    before it became the entry, as -X importtime tells: the entry's own fallback to the full
    path is another interpreter, started without the flag)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "manager", "run", *argv],
                          cwd=cwd or project, input=input, capture_output=True, text=True,
                          timeout=120, preexec_fn=preexec_fn)  # noqa: PLW1509 - signals only
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines()
                if line.startswith("import time:")}
    assert "manager.commands.run_lean" in imported, proc.stderr
    full = any(m == name or m.startswith(name + ".") for m in imported for name in FULL_PATH_ONLY)
    stderr = "".join(line + "\n" for line in proc.stderr.splitlines()
                     if not line.startswith("import time:"))
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, stderr), not full


def _session_dir(project: Path) -> Path:
    pointer = json.loads(Path(paths.pointer_file(str(project))).read_text())
    return Path(paths.session_root(pointer["session"]))


@pytest.fixture
def warm(ws, project: Path, overlay_engine: str) -> Path:
    """A git project (its subdirectories are in it) whose session has run once, the full
    way: the lean path's record is there."""
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    (project / "sub").mkdir()
    ws("run", "--", "true", check=True)
    assert (_session_dir(project) / run_lean.RECORD).is_file()
    return project


def test_a_warm_run_goes_straight_to_the_sandbox_with_everything_kept(warm: Path, ws):
    proc, lean = _run(warm, "--", "sh", "-c", "cat; echo out; echo err >&2; echo x > made.txt; "
                      "id -u; exit 7", input="from stdin\n")
    assert lean
    assert (proc.returncode, proc.stdout, proc.stderr) == (7, f"from stdin\nout\n{os.getuid()}\n",
                                                           "err\n")
    assert not (warm / "made.txt").exists()           # in the sandbox, held for review
    assert "made.txt" in ws("status", check=True).stdout
    proc, lean = _run(warm, "-c", "kill -TERM $$")
    assert lean and proc.returncode == 128 + signal.SIGTERM
    # Signals ignored, blocked, caught as under the full path (Python ignores SIGPIPE).
    # Read by the shell itself: grep sets up its own SIGSEGV handler (GNU c-stack), which a
    # /proc read could catch half-done (once in CI: SigBlk 0x400 in one run only).
    masks = "while IFS= read -r l; do case $l in SigIgn*|SigBlk*|SigCgt*) echo \"$l\";; esac; " \
            "done </proc/self/status"
    proc, lean = _run(warm, "-c", masks)
    full, by_option = _run(warm, "--cwd", ".", "-c", masks)
    assert lean and not by_option and proc.stdout == full.stdout and "SigIgn" in proc.stdout
    # The plugin's launcher (-I, no runpy) takes it as well.
    launched = subprocess.run([str(REPO / "bin/workspace"), "run", "--", "cat", "made.txt"],
                              cwd=warm, capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, WORKSPACE_PYTHON=sys.executable))
    assert (launched.returncode, launched.stdout) == (0, "x\n"), launched.stderr


def _as_a_background_job() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)


def test_signals_the_caller_ignores_stay_ignored_as_under_the_full_path(warm: Path):
    """A background job of a shell (CI's runs, `cmd &`) starts with INT and QUIT ignored."""
    masks = "while IFS= read -r l; do case $l in SigIgn*) echo \"$l\";; esac; done </proc/self/status"
    proc, lean = _run(warm, "-c", masks, preexec_fn=_as_a_background_job)
    full, by_option = _run(warm, "--cwd", ".", "-c", masks, preexec_fn=_as_a_background_job)
    assert lean and not by_option and proc.stdout == full.stdout
    assert int(proc.stdout.split()[1], 16) & (1 << (signal.SIGQUIT - 1)), proc.stdout


def test_each_input_of_the_full_path_that_changes_sends_the_next_run_there(
        warm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    home = Path(os.environ["HOME"])
    changes = {
        "user config file": lambda: _write(tmp_path / "config/workspace/config.yaml",
                                           "exclude: ['*.tmp']\n"),
        "project file": lambda: _write(warm / ".workspace.yaml", "exclude: ['*.log']\n"),
        "Claude's settings (network domains)": lambda: _write(
            home / ".claude/settings.json",
            '{"sandbox": {"network": {"allowedDomains": ["example.com"]}}}'),
        "a setting's variable": lambda: monkeypatch.setenv("WORKSPACE_EXCLUDE", "*.bak"),
        "the session record": lambda: _touch_record(_session_dir(warm) / "session.json"),
    }
    for what, change in changes.items():
        change()
        proc, lean = _run(warm, "--", "echo", what)
        assert (proc.returncode, proc.stdout, lean) == (0, what + "\n", False), (what, proc.stderr)
        proc, lean = _run(warm, "--", "echo", what)
        assert (proc.returncode, proc.stdout, lean) == (0, what + "\n", True), (what, proc.stderr)
    # The engine named elsewhere: the full path, which says so (issue 23), then says it no more.
    monkeypatch.setenv("WORKSPACE_ENGINE", "docker")
    for said in (True, False):
        proc, lean = _run(warm, "--", "true")
        assert proc.returncode == 0 and not lean
        assert ("the configuration says engine docker" in proc.stderr) is said, proc.stderr


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _touch_record(path: Path) -> None:
    record = json.loads(path.read_text())
    record["notes"] = [*record.get("notes", []), "changed by the test"]
    path.write_text(json.dumps(record))


def test_a_holder_gone_since_the_record_hands_the_call_to_the_full_path(warm: Path):
    sandbox = _session_dir(warm) / "sandbox"
    holder = int((sandbox / "holder.pid").read_text().split()[0])
    os.kill(holder, signal.SIGKILL)
    with contextlib.suppress(psutil.NoSuchProcess):
        psutil.Process(holder).wait(timeout=30)
    proc, lean = _run(warm, "--", "sh", "-c", "echo in; exit 3")
    assert lean and (proc.returncode, proc.stdout, proc.stderr) == (3, "in\n", "")
    assert int((sandbox / "holder.pid").read_text().split()[0]) != holder   # a new one
    # A directory removed inside: the full path's own error, exit 125, nothing run.
    assert _run(warm, "--", "rm", "-r", "sub")[0].returncode == 0
    proc, lean = _run(warm, "--", "touch", "ran", cwd=warm / "sub")
    assert lean and proc.returncode == 125
    assert "does not exist in the sandbox" in proc.stderr
    assert not (warm / "sub/ran").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_killing_a_lean_run_kills_the_command_tree(warm: Path, signum: int):
    marker = f"ws-{uuid.uuid4().hex}"
    sleeper = f"python3 -c 'import time; time.sleep(300)' {marker}"
    caller = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "manager", "run", "-c",
                               f"{sleeper} & setsid {sleeper} & echo ready; wait"],
                              cwd=warm, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert caller.stdout is not None and caller.stderr is not None
    assert caller.stdout.readline() == "ready\n"
    caller.send_signal(signum)
    caller.wait(timeout=30)
    assert "manager.commands.run_lean" in (imported := caller.stderr.read())
    assert "argparse" not in imported              # the lean path ran it
    deadline = time.monotonic() + 10
    while _marked(marker):
        assert time.monotonic() < deadline, f"left running: {_marked(marker)}"
        time.sleep(0.1)


def _marked(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"])
            if any(marker in part for part in p.info["cmdline"] or [])]


ARGVS = [["--", "echo", "a b", "it's"], ["echo", "--new"], ["echo", "--", "x"], ["-c", "x"],
         ["-c", ""], ["--", "--new"], ["a", "-c", "b"], ["--", "--"], ["--", ""],
         ["--new", "--", "true"], ["--engine", "overlay", "true"], ["-c", "-x"], ["--"], [],
         ["-c", "a", "--", "b"], ["--cwd", "/", "true"], ["-h"], ["--timeout", "1", "true"]]


@pytest.mark.parametrize("argv", ARGVS, ids=shlex.join)
def test_the_lean_path_reads_a_command_line_as_run_does_or_leaves_it(argv: list[str]):
    lean = run_lean.simple_command(argv)
    if lean is None:
        return                      # the full path reads it, whatever it is
    args = build_parser("run").parse_args(["run", *argv])
    assert not any((args.session, args.project, args.new, args.engine, args.cwd,
                    args.cwd_out, args.timeout))
    assert lean == run_command._command(args)


def test_the_lean_path_takes_some_command_lines():
    taken = [argv for argv in ARGVS if run_lean.simple_command(argv) is not None]
    assert ["--", "echo", "a b", "it's"] in taken and ["-c", "x"] in taken
    assert ["echo", "--new"] in taken


@pytest.mark.parametrize("words", [["a"], [""], ["it's", "a b"], ["é", "$x", "*"],
                                   ["a\nb", "-_@%+=:,./"], ["\t", "'"]])
def test_words_are_quoted_as_shlex_join_quotes_them(words: list[str]):
    assert run_lean.join(words) == shlex.join(words)


def test_a_commit_holding_the_session_lock_keeps_the_lean_path_out(tmp_path: Path):
    session_dir = tmp_path / "session"
    session_dir.mkdir()
    with open(session_dir / "lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert run_lean._lock_shared(str(session_dir)) is None
        fcntl.flock(held, fcntl.LOCK_SH)      # another run: shared with it
        fd = run_lean._lock_shared(str(session_dir))
        assert fd is not None
        os.close(fd)

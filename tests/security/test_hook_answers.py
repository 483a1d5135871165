"""Every non-empty command is sandboxed or denied, and a sandboxed command cannot
signal the client's own process group (yet still dies when the client kills it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.claude.conftest import Claude


@pytest.mark.parametrize("command", [
    "\x1c", "\x85\xa0\u2028", "\x1c\x1d\x1e\x1f", "\u3000", "\x0b\x0c", "\u2029touch x",
    "\x1ctouch x\x1c", " \t", "\n",
])
def test_no_empty_answer_for_a_non_empty_command(claude: Claude, command: str) -> None:
    claude.start()
    answer = claude.pre_bash(command)
    assert answer.returncode == 0, answer.stderr
    assert "updatedInput" in answer.spec or answer.decision == "deny", answer.json


def test_kill_0_in_the_sandbox_spares_the_clients_group(claude: Claude) -> None:
    """The client's shell leads its own session and group, as the real client's does."""
    claude.start()
    answer = claude.pre_bash("trap 'kill 0' EXIT; echo inside")
    run = subprocess.run(["/bin/bash", "-c", answer.command + "; echo client-survived"],
                         cwd=claude.cwd, env=claude.env, capture_output=True, text=True,
                         start_new_session=True, timeout=60)
    assert "inside" in run.stdout, run
    assert "client-survived" in run.stdout and run.returncode >= 0, run


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                found.append(child)
                todo.append(child)
    return found


def _alive(tag: str) -> list[int]:
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if tag.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                pids.append(int(entry))
        except OSError:
            continue
    return pids


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


@pytest.mark.parametrize("how", ["client", "group-kill"])
def test_the_clients_kill_still_ends_the_whole_tree(claude: Claude, how: str) -> None:
    """The client (docs/notes-claude-client.md) sends SIGTERM to its group and every
    descendant by pid, then SIGKILL ~1.5 s later; a bare SIGKILL of the group must do too."""
    claude.start()
    tag = f"4242.{os.getpid() % 1000}{len(how)}"
    answer = claude.pre_bash(f"sleep {tag} & (trap '' TERM; sleep {tag}) & sleep {tag}; wait")
    proc = subprocess.Popen(["/bin/bash", "-c", answer.command], cwd=claude.cwd, env=claude.env,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while len(_alive(tag)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_alive(tag)) >= 3, "the sandboxed command did not start"
        if how == "client":
            _signal([-proc.pid, *_descendants(proc.pid)], signal.SIGTERM)
            time.sleep(1.5)
            _signal([-proc.pid, *_descendants(proc.pid)], signal.SIGKILL)
        else:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _alive(tag) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(tag), "part of the sandboxed call survived the client's kill"
    finally:
        _signal(_alive(tag), signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

"""The resident hook service (manager/service, issue 25) through the real hook launcher.

The service answers a Bash call's hooks as the Python hook does; whenever it is gone,
stopped, or another process holds its port, the Python hook answers instead (never no one),
and nothing outside the user's own processes on the host gets an answer from it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.claude.conftest import Claude

pytestmark = pytest.mark.engine


def _svc(claude: Claude) -> Path:
    return Path(claude.env["XDG_STATE_HOME"]) / "workspace" / "service"


def _endpoint(claude: Claude) -> tuple[int, str, str] | None:
    try:
        port, client, service, _ = (_svc(claude) / "endpoint").read_text().split()
    except (OSError, ValueError):
        return None
    return int(port), client, service


def _pid(claude: Claude) -> int:
    return int((_svc(claude) / "pid").read_text())


def _wait_for_service(claude: Claude, other_than: int | None = None) -> tuple[int, str, str]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = _endpoint(claude)
        if found is not None and found[0] != other_than:
            return found
        time.sleep(0.05)
    raise AssertionError("the hook did not start the service")


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split(")")[-1].split()[0] == "Z":
                return
        time.sleep(0.02)


def _logged(claude: Claude, tmp_path: Path) -> None:
    """Hooks that use the service; every Python start of the hook (or the service) is logged
    (a wrapper as WORKSPACE_PYTHON), so a test tells who answered."""
    from tests.claude.conftest import REPO

    log = tmp_path / "python-starts"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\ncase "$*" in *manager.claude.entry*) echo hook >> {log};; '
                       f'*manager.service.server*) echo service >> {log};; '
                       f'*manager.main*) echo cli >> {log};; esac\n'
                       f'exec {REPO}/.venv/bin/python "$@"\n')
    wrapper.chmod(0o755)
    claude.env.update(WORKSPACE_SERVICE="1", WORKSPACE_PYTHON=str(wrapper))
    claude.log = log  # type: ignore[attr-defined]


@pytest.fixture
def served(claude: Claude, tmp_path: Path) -> Iterator[Claude]:
    """A started session whose hooks use the service (see :func:`_logged`)."""
    _logged(claude, tmp_path)
    assert claude.start().returncode == 0
    first = claude.pre_bash("true")      # the Python hook if the service is not up yet
    assert first.decision == "allow" and "enter.sh" in first.command, first.stdout
    _wait_for_service(claude)
    try:
        yield claude
    finally:
        pid = (_svc(claude) / "pid")
        if pid.exists():
            _kill(int(pid.read_text()))


def _hook_starts(claude: Claude) -> int:
    log: Path = claude.log  # type: ignore[attr-defined]
    return log.read_text().split().count("hook") if log.exists() else 0


def test_session_start_starts_the_service_for_the_first_call(claude: Claude,
                                                             tmp_path: Path) -> None:
    _logged(claude, tmp_path)
    try:
        assert claude.start().returncode == 0
        _wait_for_service(claude)
        assert _hook_starts(claude) == 1                  # SessionStart's own answer
        again = claude.start("resume")                    # one service, however many starts
        assert again.returncode == 0 and _hook_starts(claude) == 2
        assert claude.log.read_text().split().count("service") == 1   # type: ignore[attr-defined]
        first = claude.pre_bash("true")
        assert first.decision == "allow" and "enter.sh" in first.command, first.stdout
        assert _hook_starts(claude) == 2, "the first call was not answered by the service"
    finally:
        if (_svc(claude) / "pid").exists():
            _kill(_pid(claude))


def test_the_service_answers_as_the_hook_does(served: Claude) -> None:
    claude = served
    before = _hook_starts(claude)
    command = "printf '%s\\n' 'héllo ✓'"           # bytes, not characters, on the wire
    answer = claude.pre_bash(command)
    assert _hook_starts(claude) == before, "the Python hook answered, not the service"
    claude.calls -= 1                              # the same call again, without the service
    claude.env["WORKSPACE_SERVICE"] = "0"
    direct = claude.pre_bash(command)
    claude.env["WORKSPACE_SERVICE"] = "1"
    assert _hook_starts(claude) == before + 1
    assert answer.json == direct.json
    ran = claude.shell(answer.command)
    assert ran.stdout == "héllo ✓\n", ran
    post = claude.hook("PostToolUse", {"tool_name": "Bash", "tool_use_id": f"toolu_{claude.calls:04d}",
                                       "tool_input": {"command": answer.command},
                                       "tool_response": {"stdout": ran.stdout}})
    assert post.returncode == 0 and post.json == {}, post.stdout
    assert _hook_starts(claude) == before + 1
    warned = claude.hook("PostToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_never",
                                         "tool_input": {"command": "touch x"}})
    assert "ran outside the sandbox" in warned.json["systemMessage"]   # as the hook warns
    starts = _hook_starts(claude)
    target = claude.project / "new.txt"
    write = claude.hook("PreToolUse", {"tool_name": "Write", "tool_use_id": "toolu_w",
                                       "tool_input": {"file_path": str(target), "content": "x"}})
    assert write.returncode == 0 and _hook_starts(claude) == starts + 1   # file tools: Python
    broken = claude.hook("PreToolUse", '{"tool_name": "Bash", "tool_input": {"command": "ls"')
    assert broken.decision == "deny" and "not JSON" in broken.spec["permissionDecisionReason"]
    assert _hook_starts(claude) == starts + 2     # what the service cannot handle, Python answers


def _impostor(port: int, answer: bytes | None,
              hold: bool = False) -> tuple[socket.socket, list[bytes]]:
    """Another process on the service's port: it answers ``answer``, or (None) holds every
    connection open without a word; ``hold``: answers, then holds the connection open (a
    service stopped after its answer was sent, before it closed)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    for _ in range(200):
        try:
            sock.bind(("127.0.0.1", port))
            break
        except OSError:           # the killed service's socket not gone yet
            time.sleep(0.01)
    sock.listen(8)
    got: list[bytes] = []
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            got.append(conn.recv(65536))
            if answer is None or hold:
                if answer is not None:
                    conn.sendall(answer)
                held.append(conn)
                continue
            with conn:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return sock, got


@pytest.mark.parametrize("failure", ["killed", "stopped", "silent", "replaced", "unclosed",
                                     "cut"])
def test_a_failed_service_never_leaves_a_call_unsandboxed(served: Claude, failure: str) -> None:
    claude = served
    port, _, service = _endpoint(claude) or (0, "", "")
    pid = _pid(claude)
    impostor = None
    if failure == "stopped":
        os.kill(pid, signal.SIGSTOP)
    else:
        _kill(pid)
    if failure == "silent":   # a process on its port that takes the request, answers none
        impostor, got = _impostor(port, None)
        claude.env["WORKSPACE_SERVICE_TIMEOUT"] = "1"
    if failure == "replaced":   # another process on its port, answering as if it allowed
        impostor, got = _impostor(port, b"not-the-token\n" + json.dumps(
            {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}
        ).encode())
    if failure == "unclosed":   # the service's answer sent, and it stopped before its close
        # (CI: the call waited for the close until the client's hook timeout, then blocked)
        impostor, got = _impostor(port, service.encode() + b"\nFALLBACK\0", hold=True)
    if failure == "cut":   # the service killed mid-answer: what arrived looks whole, is not
        impostor, got = _impostor(port, service.encode() + b'\n{"hookSpecificOutput": '
                                  b'{"hookEventName": "PreToolUse"}')
    if impostor is not None:  # ... and the dead service's pid reused by a live process
        _reuse_pid(claude)
    try:
        before = _hook_starts(claude)
        answer = claude.pre_bash("touch escaped")
        assert answer.decision == "allow" and "enter.sh" in answer.command, answer.stdout
        assert _hook_starts(claude) == before + 1, "the Python hook did not answer"
        assert not (claude.project / "escaped").exists()
        if failure in ("replaced", "silent", "unclosed", "cut"):
            assert got and b"PreToolUse" in got[0]    # it was asked (and not believed)
    finally:
        if impostor is not None:
            impostor.close()
        if failure == "stopped":
            _kill(pid)
    if failure in ("killed", "replaced"):   # the hook started a new service for the next call
        _wait_for_service(claude, other_than=port if failure != "replaced" else None)


def _reuse_pid(claude: Claude) -> None:
    """The endpoint names a live process again (pid reuse): the client connects."""
    endpoint = _svc(claude) / "endpoint"
    words = endpoint.read_text().split()
    endpoint.write_text(" ".join([*words[:3], str(os.getpid())]) + "\n")


def _ask(port: int, head: bytes, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head + b"\n" + payload)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    return data


def test_the_service_answers_only_its_own_clients_on_the_host(served: Claude) -> None:
    claude = served
    port, client, service = _endpoint(claude) or (0, "", "")
    payload = json.dumps({"session_id": claude.session_id, "cwd": str(claude.project),
                          "hook_event_name": "PreToolUse", "tool_name": "Bash",
                          "permission_mode": "bypassPermissions",
                          "tool_input": {"command": "true"}, "tool_use_id": "toolu_x"}).encode()

    def head(token: str, event: str, pid: int) -> bytes:
        return f"WS1 {token} {event} {pid} {len(payload)}".encode()

    assert _ask(port, head("0" * len(client), "PreToolUse", os.getpid()), payload) == b""
    # Nothing but the per-call hook events: no request commits, trusts or configures.
    for event in ("SessionStart", "SessionEnd", "Commit", "Trust", "Config"):
        assert _ask(port, head(client, event, os.getpid()), payload) == \
            service.encode() + b"\nFALLBACK\0"
    # A request names the process that made it, not another one (whose environment the
    # answer would be made from): the waiting hook's, here a process that did not connect.
    other = subprocess.Popen(["sleep", "60"], env=claude.env, cwd=claude.project)
    try:
        assert _ask(port, head(client, "PreToolUse", other.pid), payload) == \
            service.encode() + b"\nFALLBACK\0"
    finally:
        other.kill()
        other.wait()
    # A sandboxed command can read neither the endpoint nor the state directory (hidden) ...
    endpoint = _svc(claude) / "endpoint"
    seen = claude.bash(f"cat {endpoint} || echo unreadable")
    assert "unreadable" in seen.stdout and client not in seen.stdout, seen
    # ... and with the token leaked to it, a request naming its own process is not answered
    # from its environment: it is not in the host's namespaces.
    probe = (f"exec 3<>/dev/tcp/127.0.0.1/{port} && "
             f"printf 'WS1 {client} PreToolUse %s {len(payload)}\\n' $$ >&3 && "
             f"printf '%s' {json.dumps(payload.decode())!r} >&3 && cat <&3; echo; echo end")
    got = claude.bash(probe)
    assert "hookSpecificOutput" not in got.stdout and "end" in got.stdout, got
    assert "FALLBACK" in got.stdout or "onnection refused" in got.stderr, got


def _cli(claude: Claude, *argv: str, service: str = "1", env: dict[str, str] | None = None,
         stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    """The plugin's launcher, output piped unless ``stdout`` says otherwise."""
    from tests.claude.conftest import REPO

    return subprocess.run([str(REPO / "bin" / "workspace"), *argv], cwd=claude.project,
                          env=dict(env or claude.env, WORKSPACE_SERVICE=service), text=True,
                          stdout=stdout, stderr=subprocess.PIPE, timeout=120)


def _cli_starts(claude: Claude) -> int:
    return claude.log.read_text().split().count("cli")  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("argv", [("status",), ("status", "--json"), ("diff",), ("diff", "--stat"),
                                  ("budget",), ("status", "no/such/path"), ("diff", "--bogus")])
def test_the_review_commands_are_run_by_the_service_as_by_the_cli(served: Claude,
                                                                  argv: tuple[str, ...]) -> None:
    """status, diff and budget from the plugin's launcher, output piped (a slash command, a
    script): a child of the service runs them, with the same output and exit status as the
    CLI's own process, and no Python starts."""
    claude = served
    assert claude.bash("echo changed > README.txt && mkdir -p d && echo new > d/n.txt").returncode == 0
    before = _cli_starts(claude)
    by_service = _cli(claude, *argv)
    assert _cli_starts(claude) == before, f"the CLI started: {by_service}"
    own = _cli(claude, *argv, service="0")
    assert _cli_starts(claude) == before + 1
    if "--json" in argv:   # the room left on the disk moves between two runs
        mine, its = json.loads(by_service.stdout), json.loads(own.stdout)
        assert mine.pop("disk").keys() == its.pop("disk").keys()
        assert mine == its
        own.stdout = by_service.stdout
    assert (by_service.returncode, by_service.stdout, by_service.stderr) == \
        (own.returncode, own.stdout, own.stderr)


def test_a_review_command_into_a_file_is_the_clis_own(served: Claude, tmp_path: Path) -> None:
    """A file has an offset the service's child would not share (a terminal: colour and a
    pager): the CLI runs itself, and writes after what the file held."""
    claude = served
    out = tmp_path / "out.txt"
    with out.open("w") as f:
        f.write("kept\n")
        f.flush()
        before = _cli_starts(claude)
        done = _cli(claude, "status", "--json", stdout=f)
    assert done.returncode == 0 and _cli_starts(claude) == before + 1, done
    head, _, rest = out.read_text().partition("\n")
    assert head == "kept" and json.loads(rest)["session"], rest


def test_a_review_command_of_another_state_root_is_not_served(served: Claude,
                                                              tmp_path: Path) -> None:
    claude = served
    before = _cli_starts(claude)
    done = _cli(claude, "status", env=dict(claude.env, XDG_STATE_HOME=str(tmp_path / "else")))
    assert _cli_starts(claude) == before + 1, done     # its own CLI (no session there)


def test_the_service_runs_only_review_commands_for_its_own_clients(served: Claude) -> None:
    """Nothing but status, diff and budget; only for the process that asked, on the host: a
    sandboxed command with the token leaked to it gets no command run."""
    from tests.claude.conftest import REPO

    claude = served
    port, client, service = _endpoint(claude) or (0, "", "")
    refused = service.encode() + b"\nFALLBACK\0"

    def cli(*argv: str, pid: int) -> bytes:
        body = b"".join(os.fsencode(w) + b"\0" for w in (str(REPO), "1", "2", *argv))
        return _ask(port, f"WS1 {client} CLI {pid} {len(body)}".encode(), body)

    for argv in (("commit",), ("discard", "--yes"), ("config", "set", "engine", "try"),
                 ("run", "--", "true"), ("hooks", "install")):
        assert cli(*argv, pid=os.getpid()) == refused, argv
    other = subprocess.Popen(["sleep", "60"], env=claude.env, cwd=claude.project)
    try:
        assert cli("status", pid=other.pid) == refused
    finally:
        other.kill()
        other.wait()
    body = f"{REPO}\\x003\\x003\\x00status\\x00"     # ROOT, its fd 3 twice, status
    probe = (f"exec 3<>/dev/tcp/127.0.0.1/{port} && "
             f"printf 'WS1 {client} CLI %s {len(str(REPO)) + 12}\\n' $$ >&3 && "
             f"printf '{body}' >&3 && cat <&3; echo; echo end")
    got = claude.bash(probe)
    assert "session" not in got.stdout and "end" in got.stdout, got
    assert "FALLBACK" in got.stdout or "onnection refused" in got.stderr, got

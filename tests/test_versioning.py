"""Format versions: every record kind written by a newer workspace is refused untouched;
doctor reports unreadable sessions and gc keeps them; migrations keep the old bytes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from manager import versioning
from manager.errors import StateError
from tests.claude.conftest import Claude
from tests.conftest import Runner

FUTURE = {"format": 99, "written_by": "9.1.0"}


def git_init(project: Path) -> None:
    for argv in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                  "commit", "-qm", "base"]):
        subprocess.run(["git", *argv], cwd=project, check=True, capture_output=True)


def every_file(root: Path) -> dict[str, bytes]:
    """Bytes of every regular file under ``root`` outside sandboxes and holder logs."""
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "sandbox" not in p.parts and p.suffix != ".lock"}


def bump(path: Path, key: str = "format") -> None:
    """Make ``path`` look written by a newer workspace."""
    raw = json.loads(path.read_text()) if path.exists() else {}
    raw.update(FUTURE)
    if key != "format":
        raw[key] = raw.pop("format")
    path.write_text(json.dumps(raw))


@pytest.fixture
def session(ws: Runner, project: Path, tmp_path: Path) -> Claude:
    """A Claude session (overlay) with pending changes, guard-rail state and a checkpoint."""
    git_init(project)
    client = Claude(project, tmp_path)
    client.env["WORKSPACE_PYTHON"] = sys.executable   # this interpreter, whoever runs the tests
    assert client.start().returncode == 0
    assert client.bash("echo pending > new.txt").returncode == 0
    (project / "README.txt").write_text("edited\n")
    client.hook("Stop", {"stop_hook_active": False})
    return client


def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state" / "workspace"


def shadow_format(project: Path) -> Path:
    return project / ".git" / "workspace-checkpoints.git" / "workspace-format.json"


def journal(tmp_path: Path) -> Path:
    path = state_dir(tmp_path) / "sessions" / "sess-1" / "commit-journal.json"
    path.write_text(json.dumps({"version": 1, "token": "t", "force": False, "layers": [],
                                "steps": []}))
    return path


def pointer(tmp_path: Path) -> Path:
    return next((state_dir(tmp_path) / "projects").glob("*.json"))


KINDS: dict[str, tuple[Callable[[Path, Path], Path], str, list[str]]] = {
    # kind: (the record, its key, the command that reads it)
    "session": (lambda t, p: state_dir(t) / "sessions/sess-1/session.json", "format",
                ["status", "--session", "sess-1"]),
    "pointer": (lambda t, p: pointer(t), "format", ["status"]),
    "claude": (lambda t, p: state_dir(t) / "sessions/sess-1/claude.json", "format", []),
    "guardrails": (lambda t, p: state_dir(t) / "guardrails/sess-1.json", "format",
                   ["budget", "--session", "sess-1"]),
    "journal": (lambda t, p: journal(t), "version", ["commit", "--session", "sess-1"]),
    "checkpoints": (lambda t, p: shadow_format(p), "format",
                    ["checkpoint", "--session", "sess-1"]),
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_record_from_a_newer_workspace_is_refused_and_left_byte_identical(
        kind: str, session: Claude, ws: Runner, project: Path, tmp_path: Path) -> None:
    locate, key, command = KINDS[kind]
    path = locate(tmp_path, project)
    bump(path, key)
    before = every_file(tmp_path / "state") | every_file(project / ".git")
    if command:
        proc = ws(*command)
        assert proc.returncode != 0, proc.stdout
        message = proc.stderr
    else:       # the hook: the Bash call is denied, never run unsandboxed
        answer = session.pre_bash("echo hello > hello.txt")
        assert answer.decision == "deny", answer.json
        message = answer.spec["permissionDecisionReason"]
    name = versioning.KINDS[kind][1]
    assert f"{name} {path} was written by workspace 9.1.0 (format 99)" in message, message
    assert "upgrade workspace to 9.1.0 or later" in message
    assert every_file(tmp_path / "state") | every_file(project / ".git") == before
    assert not (project / "hello.txt").exists()


def test_doctor_reports_unreadable_sessions_and_gc_keeps_them(
        session: Claude, ws: Runner, tmp_path: Path) -> None:
    sessions = state_dir(tmp_path) / "sessions"
    record = sessions / "sess-1" / "session.json"
    record.write_text(json.dumps(dict(json.loads(record.read_text()), updated=0)))  # stale
    bump(record)
    other = Claude(session.project, tmp_path, session_id="sess-2")
    other.env = session.env
    assert other.start().returncode == 0
    (sessions / "sess-2" / "session.json").write_text("{not json")
    before = every_file(tmp_path / "state")
    # One engine's probes (the built-in one): the engines' are not what this test is about.
    doctor = ws("doctor", "--engine", "overlay", "--json")
    assert doctor.returncode == 1
    found = {u["session"]: u for u in json.loads(doctor.stdout)["unreadable"]}
    assert set(found) == {"sess-1", "sess-2"}
    assert "format 99" in found["sess-1"]["problem"]
    assert found["sess-1"]["fix"].startswith("upgrade workspace to 9.1.0 or later")
    assert "unreadable" in found["sess-2"]["problem"] and "sandbox" in found["sess-2"]["fix"]
    text = ws("doctor", "--engine", "overlay").stdout
    assert "sessions whose state this workspace cannot read: 2" in text
    # sess-1 is idle for decades: gc would collect it if it could read it.
    gc = ws("gc", "--json")
    assert json.loads(gc.stdout)["removed"] == []
    assert (sessions / "sess-1" / "sandbox").is_dir() and (sessions / "sess-2").is_dir()
    assert every_file(tmp_path / "state") == before


def test_gc_keeps_a_readable_session_whose_journal_is_newer(
        ws: Runner, project: Path, tmp_path: Path) -> None:
    ws("run", "--engine", "overlay", "-c", "true", check=True)     # an empty session
    sid = next((state_dir(tmp_path) / "sessions").iterdir()).name
    path = state_dir(tmp_path) / "sessions" / sid / "commit-journal.json"
    path.write_text(json.dumps({"version": 5, "written_by": "9.1.0"}))
    record = state_dir(tmp_path) / "sessions" / sid / "session.json"
    raw = json.loads(record.read_text())
    record.write_text(json.dumps(dict(raw, updated=0)))   # idle for decades: stale
    report = json.loads(ws("gc", "--json").stdout)
    assert report["removed"] == [] and "commit journal" in " ".join(report["errors"])
    assert path.exists()


def test_records_without_a_format_are_format_1_and_current_ones_say_theirs(tmp_path: Path) -> None:
    assert versioning.check("session", {"id": "x"}, "p") == 1
    assert versioning.check("journal", {"version": 1}, "p") == 1
    stamped = versioning.stamp("session", {"id": "x"})
    assert stamped["format"] == 1 and stamped["written_by"] == versioning.RELEASE
    with pytest.raises(StateError, match="unknown format 'x'"):
        versioning.check("session", {"format": "x"}, "p")


def test_a_migration_replaces_the_record_atomically_and_drops_the_copy_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(versioning.KINDS, "demo", (3, "demo record"))
    seen: list[bool] = []
    path = tmp_path / "demo.json"
    old = b'{"format": 1, "n": 1}'
    path.write_bytes(old)

    def step(record: dict) -> dict:
        # While it runs, the old bytes are kept beside the record.
        seen.append((tmp_path / "demo.json.format-1").read_bytes() == old)
        return dict(record, n=record["n"] + 1)

    monkeypatch.setitem(versioning.MIGRATIONS, ("demo", 1), step)
    monkeypatch.setitem(versioning.MIGRATIONS, ("demo", 2), step)
    result = versioning.migrate_file("demo", str(path), json.loads(old))
    assert seen == [True, True] and result["n"] == 3 and result["format"] == 3
    assert json.loads(path.read_text()) == result
    assert not (tmp_path / "demo.json.format-1").exists()


def test_the_hook_path_imports_no_more_than_before() -> None:
    """On the hook's path (fastjson and os already loaded) versioning adds itself and errors."""
    root = str(Path(__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-I", "-S", "-c",
                          f"import sys; sys.path.insert(0, {root!r}); import os, manager, manager.fastjson;"
                          "before = set(sys.modules); import manager.versioning;"
                          "print(' '.join(sorted(set(sys.modules) - before)))"],
                         capture_output=True, text=True, check=True).stdout
    assert out.split() == ["manager.errors", "manager.versioning"]

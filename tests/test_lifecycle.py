"""Sessions listing, gc and doctor through the real CLI and the overlay engine."""

from __future__ import annotations

import json
import subprocess

from manager.session import store


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _orphan(session_id: str) -> None:
    session = store.load(session_id)
    session.client_pid = _dead_pid()
    store.save(session)


def _session_ids(ws) -> list[str]:
    return [s["id"] for s in json.loads(ws("sessions", "--json", check=True).stdout)["sessions"]]


def test_gc_removes_empty_orphans_and_keeps_those_with_changes(ws, project, monkeypatch):
    monkeypatch.setenv("WORKSPACE_ENGINE", "overlay")
    ws("run", "--new", "--", "true", check=True)
    empty = _session_ids(ws)[0]
    ws("run", "--new", "--", "sh", "-c", "echo keep > kept.txt", check=True)
    busy = [s for s in _session_ids(ws) if s != empty][0]
    _orphan(empty)
    _orphan(busy)

    dry = json.loads(ws("gc", "--dry-run", "--json", check=True).stdout)
    assert dry["removed"] == [empty] and dry["kept"] == [{"id": busy, "pending": 1}]
    assert set(_session_ids(ws)) == {empty, busy}

    out = ws("gc", check=True).stdout
    assert f"removed {empty}" in out and f"kept {busy}: 1 pending" in out
    assert _session_ids(ws) == [busy]
    assert store.load(busy).sandbox.exists()
    assert ws("gc", check=True).stdout.count("kept") == 1  # idempotent


def test_gc_leaves_live_sessions_alone(ws, project, monkeypatch):
    monkeypatch.setenv("WORKSPACE_ENGINE", "overlay")
    ws("run", "--", "true", check=True)
    assert "nothing to collect" in ws("gc", check=True).stdout


def test_sessions_marks_the_current_one(ws, project, monkeypatch):
    monkeypatch.setenv("WORKSPACE_ENGINE", "overlay")
    ws("run", "--", "true", check=True)
    rows = json.loads(ws("sessions", "--json", check=True).stdout)["sessions"]
    assert [(r["engine"], r["current"], r["state"]) for r in rows] == [("overlay", True, "cli")]


def test_doctor_reports_each_engine_with_fixes(ws):
    proc = ws("doctor", "--json")
    data = json.loads(proc.stdout)
    assert data["chosen"]["engine"] is not None
    overlay = {c["name"]: c for c in data["engines"]["overlay"]}
    assert overlay["overlayfs in a user namespace"]["ok"] is True
    for checks in data["engines"].values():
        assert all(c["ok"] or c["fix"] for c in checks), checks


def test_status_without_a_session_says_how_to_start(ws):
    proc = ws("status")
    assert proc.returncode == 1 and "workspace run" in proc.stderr

"""What the CLI's review commands import before doing anything (issue 12).

``workspace status`` at 100,000 files must stay within 2x of ``git status``; a
command's start-up is part of that. These modules cost milliseconds each and the
review path does not need them (or needs them only on some paths, imported there).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import manager
from manager.changes.model import Change
from manager.changes.model import Kind
from manager.engines.base import RunRequest
from manager.record import Record
from manager.session import store
from manager.session.store import Session

REPO = Path(manager.__file__).parent.parent

# Not imported by `status`/`diff` start-up: dataclasses (with inspect, ast, dis: ~10 ms, and
# ~0.5 ms per class), typing, json (fastjson reads records), ctypes (running calls only),
# hashlib (OpenSSL; the session pointer's name is hashed by CPython's built-in sha256).
STATUS_FORBIDDEN = ("dataclasses", "inspect", "ast", "dis", "typing", "json", "ctypes",
                    "hashlib", "_hashlib", "manager.commit", "manager.guardrails",
                    "manager.claude")


def _loaded(command: str, tmp_path: Path) -> list[str]:
    """The modules ``workspace COMMAND`` has imported once it parsed its arguments and
    imported its engine (the command's own work is skipped: no session is needed)."""
    code = (
        "import sys\n"
        "from manager import main\n"
        "from manager.engines import registry\n"
        f"parser = main.build_parser({command!r})\n"
        f"parser.parse_args([{command!r}])\n"
        "registry.get('overlay')\n"
        "print('\\n'.join(sorted(sys.modules)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env, cwd=tmp_path)
    return out.stdout.split()


@pytest.mark.as_user
@pytest.mark.parametrize("command", ["status", "diff"])
def test_review_commands_import_nothing_heavy_at_start_up(command: str, tmp_path: Path):
    loaded = _loaded(command, tmp_path)
    assert f"manager.commands.{command}" in loaded
    heavy = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in STATUS_FORBIDDEN)]
    assert not heavy, f"`workspace {command}` imports {heavy} at start-up"


@pytest.mark.as_user
def test_status_in_a_session_imports_nothing_heavy(ws, project: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    """The whole command, run for real in a git project over a session with changes."""
    monkeypatch.setenv("WORKSPACE_ENGINE", "overlay")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    assert ws("run", "--", "sh", "-c", "echo x > new && echo y >> README.txt").returncode == 0
    probe = ("import runpy, sys\n"
             "sys.argv = ['workspace', 'status', '--no-pager']\n"
             "try:\n    runpy.run_module('manager', run_name='__main__')\n"
             "except SystemExit as done:\n    assert not done.code, done.code\n"
             "print('MODULES', ' '.join(sorted(sys.modules)))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", probe], cwd=project, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    shown, modules = proc.stdout.split("MODULES", 1)
    assert "new" in shown and "README.txt" in shown
    heavy = [m for m in modules.split() if any(m == f or m.startswith(f + ".") for f in STATUS_FORBIDDEN)]
    assert not heavy, f"`workspace status` imports {heavy}"


def test_a_malformed_record_read_first_is_a_value_error(tmp_path: Path):
    """fastjson's first error in a process whose ``json.decoder`` was never imported: the C
    scanner looks the error class up in ``sys.modules`` only (CPython 3.11)."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from manager import fastjson\n"
            "try:\n    fastjson.loads('{oops')\n"
            "except ValueError as exc:\n    print(type(exc).__name__, exc)\n")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(REPO)],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("JSONDecodeError Expecting property name enclosed in double "
                                  "quotes: line 1 column 2 (char 1)")


def test_the_current_session_pointer_keeps_its_name():
    """Its name is the project path's sha256 (earlier releases' pointers are still found)."""
    import hashlib

    project = Path("/home/someone/project")
    key = hashlib.sha256(str(project).encode()).hexdigest()[:16]
    assert store._pointer_path(project).name == f"{key}.json"


def test_records_compare_hash_and_print_as_dataclasses_did():
    a = Change("/p/a", Kind.ADDED, "/u/a", None, None, True)
    same = Change("/p/a", Kind.ADDED, "/u/a", None, None, True)
    other = Change("/p/b", Kind.ADDED, "/u/b", None, None, True)
    assert a == same and hash(a) == hash(same) and a != other and len({a, same, other}) == 2
    assert a.path == Path("/p/a")       # cached_property still works beside __slots__
    assert repr(RunRequest("true", "/")) == ("RunRequest(command='true', cwd='/', timeout=None, "
                                             "cwd_out=None, stdin=None, stdout=None, stderr=None)")
    assert RunRequest("true", "/").replace(cwd="/tmp") == RunRequest("true", "/tmp")
    session = Session("ws-1", "/p", "overlay", created=1.0, updated=2.0)
    assert session == Session("ws-1", "/p", "overlay", created=1.0, updated=2.0)
    with pytest.raises(TypeError):
        hash(session)                   # mutable: unhashable, as a non-frozen dataclass
    assert session.as_dict() == {"id": "ws-1", "project": "/p", "engine": "overlay",
                                 "engine_source": "default", "origin": "cli", "created": 1.0,
                                 "updated": 2.0, "client_pid": None, "client_start": None,
                                 "notes": [], "extra": {}}
    assert Change("/p/a", Kind.ADDED, "/u/a", None, None, True) != RunRequest("a", "b")
    assert issubclass(Session, Record) and Session.FIELDS[0] == "id"

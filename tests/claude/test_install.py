from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from manager.claude import install

FOREIGN = {"model": "opus", "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-linter"}]}],
    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}


def settings(project: Path, data: Any) -> Path:
    path = project / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_install_twice_is_byte_identical_and_keeps_foreign_hooks(ws: Any, project: Path) -> None:
    path = settings(project, FOREIGN)
    assert ws("hooks", "install", check=True).stdout.startswith("installed")
    once = path.read_bytes()
    assert ws("hooks", "install", check=True).stdout.startswith("already installed")
    assert path.read_bytes() == once
    data = json.loads(once)
    assert data["model"] == "opus"
    assert data["hooks"]["PreToolUse"][0]["hooks"][0]["command"] == "my-linter"
    assert install.status(path) == "installed"
    assert "installed" in ws("hooks", "status", check=True).stdout
    ws("hooks", "uninstall", check=True)
    assert json.loads(path.read_text()) == FOREIGN
    assert install.status(path) == "absent"


def test_refuses_an_unparseable_file(ws: Any, project: Path) -> None:
    path = settings(project, "{ not json")
    done = ws("hooks", "install")
    assert done.returncode == 1 and "not valid JSON" in done.stderr
    assert path.read_text() == "{ not json"


def test_global_install_goes_to_the_user_settings(ws: Any, project: Path, tmp_path: Path,
                                                  monkeypatch: Any) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "cfg"))
    ws("hooks", "install", "--global", check=True)
    path = tmp_path / "cfg" / "settings.json"
    assert install.status(path) == "installed"
    assert not (project / ".claude").exists()
    assert oct(path.stat().st_mode & 0o777) == oct(0o644)
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_installed_hooks_match_the_plugin_hooks() -> None:
    plugin = json.loads((Path(__file__).resolve().parents[2] / "hooks" / "hooks.json").read_text())
    ours = {(e, g.get("matcher"), g["hooks"][0]["timeout"])
            for e, gs in plugin["hooks"].items() for g in gs}
    assert ours == set(install.HOOKS)
    assert all(os.sep in install.command("Stop").split()[0] for _ in [0])

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from manager.claude import install
from tests.claude.conftest import Claude

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


def _without_commands(hooks: dict[str, Any]) -> dict[str, Any]:
    return {e: [{**g, "hooks": [{k: v for k, v in h.items() if k != "command"} for h in g["hooks"]]}
                for g in gs] for e, gs in hooks.items()}


def test_the_plugin_hooks_are_the_one_definition() -> None:
    """hooks/hooks.json is install.HOOKS with the plugin's command: one source for both."""
    plugin = json.loads((Path(__file__).resolve().parents[2] / "hooks" / "hooks.json").read_text())
    assert plugin["hooks"] == install.plugin_hooks()


def test_installed_hooks_are_the_plugin_hooks(ws: Any, project: Path) -> None:
    """The same events, matchers, timeouts and onFailure, and the plugin's own launcher (so
    its resident service, deadline and deny on failure), told its root and interpreter."""
    ws("hooks", "install", check=True)
    data = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    plugin = install.plugin_hooks()
    assert _without_commands(data) == _without_commands(plugin)
    assert [h["onFailure"] for g in data["PreToolUse"] for h in g["hooks"]] == ["block", "block"]
    words = shlex.split(data["Stop"][0]["hooks"][0]["command"])
    assert words[0] == f"CLAUDE_PLUGIN_ROOT={install.root()}"
    assert Path(words[2]).resolve() == (install.root() / "bin" / "workspace-hook").resolve()
    assert words[3] == "Stop"


def test_installed_hooks_sandbox_a_session(ws: Any, project: Path, claude: Claude,
                                           tmp_path: Path) -> None:
    """Run through a shell as the client runs them, without the client's CLAUDE_PLUGIN_ROOT:
    the session starts, a Bash call is rewritten into the sandbox, and its write is held."""
    ws("hooks", "install", check=True)
    data = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    client = tmp_path / "client-hook"
    cases = "".join(f"{e}) {groups[0]['hooks'][0]['command']} ;;\n" for e, groups in data.items())
    client.write_text(f'#!/bin/sh\ncase $1 in\n{cases}esac\n')
    client.chmod(0o755)
    claude.launcher = client
    claude.env.pop("CLAUDE_PLUGIN_ROOT")
    assert claude.start().returncode == 0
    done = claude.bash("echo held > made && cat made")
    assert done.stdout == "held\n" and not (project / "made").exists(), done
    assert "made" in ws("status", check=True).stdout


def test_an_older_install_is_replaced_and_reported(ws: Any, project: Path) -> None:
    old = {"hooks": {e: [{**({"matcher": m} if m else {}), "hooks": [
        {"type": "command", "command": f"/usr/bin/python3 -I -m manager.claude {e}",
         "timeout": t}]}] for e, m, t, _ in install.HOOKS[:2]}}
    path = settings(project, {**FOREIGN, "hooks": {**FOREIGN["hooks"], **old["hooks"]}})
    assert install.status(path) == "partial"
    ws("hooks", "install", check=True)
    assert install.status(path) == "installed"
    assert not [h for gs in json.loads(path.read_text())["hooks"].values() for g in gs
                for h in g["hooks"] if install.LEGACY_MARKER in h["command"]]
    data = json.loads(path.read_text())
    data["hooks"]["Stop"][-1]["hooks"][0]["timeout"] = 5
    path.write_text(json.dumps(data))
    assert install.status(path) == "outdated"

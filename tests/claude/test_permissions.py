from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from manager.claude import permissions
from manager.claude import shell


def judge(command: str, rules: list[tuple[str, str]], mode: str = "default") -> str:
    parsed = [permissions.parse_rule(kind, text, "test") for kind, text in rules]
    return permissions.judge(command, shell.parse(command), mode,
                             [r for r in parsed if r is not None]).decision


@pytest.mark.parametrize(("pattern", "command", "matches"), [
    ("npm run test:*", "npm run test", True),
    ("npm run test:*", "npm run test -- -k x", True),
    ("npm run test:*", "npm run testx", False),
    ("touch orig.txt", "touch orig.txt", True),
    ("touch orig.txt", "touch orig.txt2", False),
    ("git * main", "git push origin main", True),
    ("ls *", "ls", True),
    ("ls *", "ls -la", True),
    ("ls *", "lsof", False),
    ("ls*", "lsof", True),
])
def test_patterns(pattern: str, command: str, matches: bool) -> None:
    rule = permissions.parse_rule("allow", f"Bash({pattern})", "t")
    assert rule is not None and rule.matches(command) is matches


def test_deny_beats_ask_beats_allow_and_compound_parts() -> None:
    rules = [("allow", "Bash(make:*)"), ("deny", "Bash(rm:*)"), ("ask", "Bash(curl:*)")]
    assert judge("make test", rules) == "allow"
    assert judge("make && rm -rf x", rules) == "deny"
    assert judge("make; curl x", rules, "bypassPermissions") == "ask"
    assert judge("echo $(rm -rf x)", rules, "bypassPermissions") == "deny"
    assert judge("if true; then rm x; fi", rules, "bypassPermissions") == "deny"
    assert judge("FOO=1 rm x", rules, "bypassPermissions") == "deny"
    # allow only when every part is allowed, never around a substitution
    assert judge("make && ./configure", rules) == "ask"
    assert judge("make $(./configure)", rules) == "ask"
    assert judge("anything", [("allow", "Bash")]) == "allow"


@pytest.mark.parametrize(("mode", "command", "expected"), [
    ("bypassPermissions", "make", "allow"),
    ("default", "make", "ask"),
    ("default", "ls -la | grep x", "allow"),
    ("default", "ls > f", "ask"),
    ("default", "find . -delete", "ask"),
    ("plan", "make", "ask"),
    ("acceptEdits", "mkdir d && touch d/f", "allow"),
    ("acceptEdits", "make", "ask"),
    ("dontAsk", "make", "deny"),
    ("auto", "make", "ask"),
])
def test_without_rules_the_mode_decides(mode: str, command: str, expected: str) -> None:
    assert judge(command, [], mode) == expected


def _settings(path: Path, **rules: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"permissions": rules}))


def test_sources_and_untrusted_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, project = tmp_path / "cfg", tmp_path / "proj"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(config))
    _settings(config / "settings.json", deny=["Bash(rm:*)"])
    _settings(project / ".claude" / "settings.json", allow=["Bash(make:*)"], deny=["Bash(dd:*)"])
    _settings(project / ".claude" / "settings.local.json", allow=["Bash(cargo:*)"])
    texts = {(r.kind, r.text) for r in permissions.load_rules(str(project))}
    assert texts == {("deny", "Bash(rm:*)"), ("deny", "Bash(dd:*)"), ("allow", "Bash(cargo:*)")}
    (config / ".claude.json").write_text(json.dumps(
        {"projects": {str(tmp_path): {"hasTrustDialogAccepted": True}}}))
    assert ("allow", "Bash(make:*)") in {(r.kind, r.text)
                                         for r in permissions.load_rules(str(project))}


def test_unreadable_settings_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path))
    (tmp_path / "settings.json").write_text("{not json")
    assert permissions.load_rules(str(tmp_path / "p")) == []


def test_rules_from_the_client_command_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "-p", "x",
                             "--allowedTools", "Bash(git add:*) Edit", "Bash(make)",
                             "--disallowed-tools=Bash(rm:*)", "--model", "m"])
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        while b"--model" not in cmdline.read_bytes():    # until the child has exec'd
            time.sleep(0.01)
        rules = list(permissions.flag_rules(str(proc.pid)))
    finally:
        proc.kill()
        proc.wait()
    assert [(r.kind, r.text) for r in rules] == [
        ("allow", "Bash(git add:*)"), ("allow", "Bash(make)"), ("deny", "Bash(rm:*)")]
    assert list(permissions.flag_rules(str(os.getpid() + 10**7))) == []


def test_rules_from_settings_flags(tmp_path: Path) -> None:
    import subprocess
    import sys

    (tmp_path / "s.json").write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"]}}))
    inline = json.dumps({"permissions": {"ask": ["Bash(curl:*)"], "deny": ["Read(.env)"]}})
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "-p", "x",
                             "--settings", "s.json", f"--settings={inline}", "--model", "m"],
                            cwd=tmp_path)
    try:
        cmdline = Path(f"/proc/{proc.pid}/cmdline")
        while b"--model" not in cmdline.read_bytes():    # until the child has exec'd
            time.sleep(0.01)
        bash = [(r.kind, r.text) for r in permissions.settings_flag_rules(str(proc.pid))]
        read = [(r.kind, r.text) for r in permissions.settings_flag_rules(str(proc.pid), "Read")]
    finally:
        proc.kill()
        proc.wait()
    assert bash == [("deny", "Bash(rm:*)"), ("ask", "Bash(curl:*)")]
    assert read == [("deny", "Read(.env)")]


@pytest.mark.parametrize("command", [
    "sudo rm -rf x", "sudo -u root rm x", "command rm x", "builtin exec rm x", "exec rm x",
    "env FOO=1 rm x", "env -u HOME rm x", "nohup rm x", "time rm x", "nice -n 5 rm x",
    "timeout -s KILL 5 rm x", "xargs rm < list", "setsid rm x", "sudo env X=1 nice rm x",
])
def test_deny_rules_see_through_wrappers(command: str) -> None:
    assert judge(command, [("deny", "Bash(rm:*)")], "bypassPermissions") == "deny"


def test_wrappers_do_not_widen_allow_rules() -> None:
    assert judge("command -v rm", [("deny", "Bash(rm:*)")], "bypassPermissions") == "allow"
    assert judge("sudo make", [("allow", "Bash(make:*)")]) == "ask"

"""The README's install for an ordinary account, followed literally by one.

The commands are README.md's fenced block after the ``install: ordinary user`` marker, so
the README and this test cannot drift. As root the test runs them as $WORKSPACE_TEST_USER
(default wstest, made by scripts/setup.d/60-testuser.sh) through runuser; as anyone else, as
that account itself. The user's HOME is a fresh directory, so the real account is never touched.
It ends with a working ``workspace run`` (what is committed is the user's) and a plugin session:
SessionStart, then a Bash call's PreToolUse through the installed plugin's hook entry, run the
way the client runs the rewritten command.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.holders import stop_holders

REPO = Path(__file__).resolve().parents[1]
MARKER = "<!-- install: ordinary user"
PASSED_ENV = ("LANG", "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY",
              "NO_PROXY", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST")

RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"   # in sbin, not on the user's PATH

pytestmark = [pytest.mark.slow]


def readme_block() -> str:
    text = (REPO / "README.md").read_text()
    after = text[text.index(MARKER):]
    found = re.search(r"^```sh\n(.*?)^```$", after, re.S | re.M)
    assert found, "README.md: no ```sh block after the install marker"
    return found.group(1)


@dataclass
class Account:
    """Runs commands as the ordinary user, with a login-like environment and a throwaway HOME."""

    name: str
    uid: int
    base: Path

    @property
    def home(self) -> Path:
        return self.base / "home"

    def env(self, **extra: str) -> dict[str, str]:
        env = {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "SHELL": "/bin/bash",
               "PATH": self.login_path(), "LANG": "C.UTF-8"}
        env.update({k: os.environ[k] for k in PASSED_ENV if k in os.environ})
        if Path(f"/run/user/{self.uid}").is_dir():
            env["XDG_RUNTIME_DIR"] = f"/run/user/{self.uid}"
        return {**env, **extra}

    def login_path(self) -> str:
        """PATH as a login shell sets it now: Debian's ~/.profile adds ~/.local/bin only when
        it exists at login, so the README's block runs without it (a fresh account)."""
        local_bin = self.home / ".local/bin"
        return (f"{local_bin}:" if local_bin.is_dir() else "") + "/usr/local/bin:/usr/bin:/bin"

    def run(self, argv: list[str], cwd: Path, input: str | bytes | None = None,
            timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
        env = self.env(**extra)
        if os.getuid() == self.uid:
            full = argv
        else:
            full = [RUNUSER, "-u", self.name, "--", "env", "-i",
                    *(f"{k}={v}" for k, v in env.items()), *argv]
        data = input.encode() if isinstance(input, str) else input
        proc = subprocess.run(full, cwd=cwd, env=env, input=data, capture_output=True,
                              timeout=timeout)
        return subprocess.CompletedProcess(full, proc.returncode, proc.stdout.decode(errors="replace"),
                                           proc.stderr.decode(errors="replace"))

    def check(self, argv: list[str], cwd: Path, **kw: Any) -> subprocess.CompletedProcess[str]:
        proc = self.run(argv, cwd, **kw)
        assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc


@pytest.fixture
def account(tmp_path: Path) -> Iterator[Account]:
    if os.getuid() != 0:
        yield Account(pwd.getpwuid(os.getuid()).pw_name, os.getuid(), tmp_path)
        return
    name = os.environ.get("WORKSPACE_TEST_USER") or "wstest"
    try:
        uid = pwd.getpwnam(name).pw_uid
    except KeyError:
        pytest.skip(f"no ordinary account {name} to install as (scripts/setup.d/60-testuser.sh)")
    # The root-only tmp_path is no place for the user: a directory of its own under /tmp.
    made = subprocess.run([RUNUSER, "-u", name, "--", "mktemp", "-d", "/tmp/ws-readme.XXXXXX"],
                          capture_output=True, text=True, check=True)
    base = Path(made.stdout.strip())
    try:
        yield Account(name, uid, base)
    finally:
        stop_holders(base)
        shutil.rmtree(base, ignore_errors=True)


def copy_checkout(account: Account) -> Path:
    """The user's own clone: this checkout's files (tracked and new), owned by the user."""
    src = account.base / "src"
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True).stdout
    files = [f for f in listed.decode().split("\0") if f and (REPO / f).exists()]
    tar = subprocess.run(["tar", "-C", str(REPO), "--null", "-T", "-", "-cf", "-"],
                         input="\0".join(files).encode(), capture_output=True, check=True).stdout
    account.check(["mkdir", "-p", str(src), str(account.home)], account.base)
    account.check(["tar", "-C", str(src), "-xf", "-"], account.base, input=tar)
    return src


def hook(account: Account, src: Path, project: Path, event: str,
         payload: dict[str, Any]) -> dict[str, Any]:
    data = {"session_id": "readme-1", "cwd": str(project), "hook_event_name": event, **payload}
    done = account.check([str(src / "bin" / "workspace-hook"), event], project,
                         input=json.dumps(data), **plugin_env(account, src, project))
    answer: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return answer


def plugin_env(account: Account, src: Path, project: Path) -> dict[str, str]:
    return {"CLAUDE_PLUGIN_ROOT": str(src), "CLAUDE_PROJECT_DIR": str(project),
            "CLAUDE_PLUGIN_DATA": str(account.home / ".claude/plugins/data/workspace-workspace")}


def test_readme_install_as_an_ordinary_user(account: Account):
    src = copy_checkout(account)
    installed = account.run(["bash", "-euo", "pipefail", "-c", readme_block()], src, timeout=900)
    assert installed.returncode == 0, f"README install failed:\n{installed.stdout}\n{installed.stderr}"
    engine = re.search(r"^engine in use: .*$", installed.stdout, re.M)
    assert engine, installed.stdout
    print(engine.group(0))   # shown with the failure: which engine auto chose for this account

    project = account.base / "project"
    account.check(["mkdir", str(project)], account.base)
    ran = account.run(["workspace", "run", "--", "sh", "-c", "echo hi > made.txt && cat made.txt"],
                      project)
    assert (ran.returncode, ran.stdout) == (0, "hi\n"), ran.stderr
    assert not (project / "made.txt").exists()
    # Again, the lean way: the installed code (not this checkout) recorded the entry.
    record, = (account.home / ".local/state/workspace/sessions").glob("*/run-entry.json")
    assert json.loads(record.read_text())["code"][0] != str(REPO / "manager")
    again = account.run(["workspace", "run", "--", "cat", "made.txt"], project)
    assert (again.returncode, again.stdout) == (0, "hi\n"), again.stderr
    status = json.loads(account.check(["workspace", "status", "--json"], project).stdout)
    assert [c["path"] for c in status["changes"]] == [str(project / "made.txt")]
    account.check(["workspace", "commit"], project)
    assert (project / "made.txt").read_text() == "hi\n"
    assert (project / "made.txt").stat().st_uid == account.uid

    started = hook(account, src, project, "SessionStart", {"source": "startup"})
    context = started["hookSpecificOutput"]["additionalContext"]
    assert "copy-on-write sandbox" in context, started
    answer = hook(account, src, project, "PreToolUse",
                  {"tool_name": "Bash", "permission_mode": "default", "tool_use_id": "toolu_1",
                   "tool_input": {"command": "echo plugin > plugin.txt && echo done"}})
    spec = answer["hookSpecificOutput"]
    assert spec.get("permissionDecision") != "deny", answer
    command = spec["updatedInput"]["command"]
    client = account.run(["bash", "-c", command], project, **plugin_env(account, src, project))
    assert (client.returncode, client.stdout) == (0, "done\n"), client.stderr
    assert not (project / "plugin.txt").exists()
    pending = json.loads(account.check(["workspace", "status", "--json", "--session", "readme-1"],
                                       project).stdout)
    assert [c["path"] for c in pending["changes"]] == [str(project / "plugin.txt")]

    # Without the plugin system: the installed package's own hooks (the launcher it ships).
    account.check(["workspace", "hooks", "install"], project)
    hooks = json.loads((project / ".claude" / "settings.json").read_text())["hooks"]
    line = hooks["SessionStart"][0]["hooks"][0]["command"]
    assert str(src) not in line, line          # the installed copy, not the clone's
    data = {"session_id": "readme-2", "cwd": str(project), "hook_event_name": "SessionStart",
            "source": "startup"}
    done = account.check(["sh", "-c", line], project, input=json.dumps(data),
                         CLAUDE_PROJECT_DIR=str(project))
    assert "copy-on-write sandbox" in json.loads(done.stdout)["hookSpecificOutput"][
        "additionalContext"], done.stdout

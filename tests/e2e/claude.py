"""Run the real Claude Code CLI, isolated and offline, against :mod:`fake_api`.

Every :class:`ClaudeEnv` owns a fresh HOME, CLAUDE_CONFIG_DIR, TMPDIR, CLAUDE_CODE_TMPDIR and XDG
directories; the real ``~/.claude`` is never read or written. The environment of the CLI is built
from scratch (only ``PATH`` and locale are inherited), so running these tests from inside a Claude
Code session does not leak that session's variables into the client under test.

The binary comes from ``$CLAUDE_BIN`` or ``.cache/claude/bin-path`` (written by
``scripts/setup.d/40-claude.sh``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterable
from collections.abc import Mapping
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path
from typing import Any

from .fake_api import FakeAnthropic
from .fake_api import Recorded
from .fake_api import Step
from .fake_api import ToolResult
from .fake_api import tool_results

REPO = Path(__file__).resolve().parents[2]
SETUP_SCRIPT = REPO / "scripts" / "setup.d" / "40-claude.sh"
BIN_PATH_FILE = REPO / ".cache" / "claude" / "bin-path"
PINNED_VERSION = "2.1.332"
# Every process started under a ClaudeEnv carries this variable, so leftovers can be killed.
MARKER_VAR = "WORKSPACE_E2E_ENV"


def find_claude_bin() -> Path | None:
    """The CLI under test, or None when it is not installed."""
    explicit = os.environ.get("CLAUDE_BIN")
    if explicit:
        path = Path(explicit)
    else:
        try:
            path = Path(BIN_PATH_FILE.read_text().strip())
        except OSError:
            return None
    return path if path.is_file() and os.access(path, os.X_OK) else None


@dataclass
class ClaudeRun:
    """One finished CLI invocation."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    result: Any  # parsed --output-format json result (a dict), or None
    requests: list[Recorded]  # every request the fake API received
    debug_log: str
    debug_path: Path
    duration: float

    @property
    def main_requests(self) -> list[Recorded]:
        return [r for r in self.requests if r.kind == "main"]

    @property
    def session_id(self) -> str | None:
        return self.result.get("session_id") if isinstance(self.result, dict) else None

    @property
    def permission_denials(self) -> list[dict[str, Any]]:
        if isinstance(self.result, dict):
            return list(self.result.get("permission_denials") or [])
        return []

    def tool_results(self) -> list[ToolResult]:
        """Every tool result of the session, in order (read from the last main request)."""
        main = self.main_requests
        return tool_results(main[-1].body) if main else []

    def outputs(self) -> list[str]:
        return [r.content for r in self.tool_results()]

    def describe(self) -> str:
        """A failure message: what ran and what came back."""
        tail = "\n".join(self.debug_log.splitlines()[-40:])
        return (
            f"claude exited {self.returncode} after {self.duration:.2f}s\n"
            f"args: {self.args}\nstdout: {self.stdout[-2000:]}\nstderr: {self.stderr[-2000:]}\n"
            f"tool results: {self.tool_results()}\n--- debug log tail ---\n{tail}"
        )


@dataclass
class ClaudeEnv:
    """An isolated home for the CLI. Build one per test with :meth:`create`."""

    root: Path
    claude_bin: Path
    home: Path
    config_dir: Path
    tmpdir: Path
    claude_tmpdir: Path
    xdg_state: Path
    xdg_config: Path
    xdg_cache: Path
    xdg_data: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    runs: list[ClaudeRun] = field(default_factory=list)

    @classmethod
    def create(cls, root: Path, claude_bin: Path) -> ClaudeEnv:
        env = cls(
            root=root,
            claude_bin=claude_bin,
            home=root / "home",
            config_dir=root / "home" / ".claude",
            tmpdir=root / "tmp",
            claude_tmpdir=root / "claude-tmp",
            xdg_state=root / "home" / ".local" / "state",
            xdg_config=root / "home" / ".config",
            xdg_cache=root / "home" / ".cache",
            xdg_data=root / "home" / ".local" / "share",
        )
        for d in (
            env.config_dir,
            env.tmpdir,
            env.claude_tmpdir,
            env.xdg_state,
            env.xdg_config,
            env.xdg_cache,
            env.xdg_data,
            root / "runs",
        ):
            d.mkdir(parents=True, exist_ok=True)
        return env

    # environment ------------------------------------------------------------------------------
    def environ(
        self, base_url: str | None = None, extra: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "SHELL": "/bin/bash",
            "USER": os.environ.get("USER", "root"),
            "LOGNAME": os.environ.get("LOGNAME", os.environ.get("USER", "root")),
            "TERM": "dumb",
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.config_dir),
            "TMPDIR": str(self.tmpdir),
            "CLAUDE_CODE_TMPDIR": str(self.claude_tmpdir),
            "XDG_STATE_HOME": str(self.xdg_state),
            "XDG_CONFIG_HOME": str(self.xdg_config),
            "XDG_CACHE_HOME": str(self.xdg_cache),
            "XDG_DATA_HOME": str(self.xdg_data),
            "ANTHROPIC_API_KEY": "sk-ant-e2e-dummy",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_AUTOUPDATER": "1",
            MARKER_VAR: str(self.root),
        }
        if "WORKSPACE_SERVICE" in os.environ:   # off in tests unless a test turns it on
            env["WORKSPACE_SERVICE"] = os.environ["WORKSPACE_SERVICE"]
        if os.geteuid() == 0:
            env["IS_SANDBOX"] = "1"  # else root may not use bypassPermissions
        if base_url is not None:
            env["ANTHROPIC_BASE_URL"] = base_url
        env.update(self.extra_env)
        env.update(extra or {})
        return env

    def write_user_settings(self, settings: Mapping[str, Any]) -> Path:
        """Write ``$CLAUDE_CONFIG_DIR/settings.json`` (the user's settings)."""
        path = self.config_dir / "settings.json"
        path.write_text(json.dumps(settings, indent=2))
        return path

    def trust(self, project_dir: Path) -> None:
        """Mark a project as trusted (the trust dialog accepted) in the CLI's global config."""
        path = self.config_dir / ".claude.json"
        data = json.loads(path.read_text()) if path.exists() else {}
        project = data.setdefault("projects", {}).setdefault(str(project_dir), {})
        project["hasTrustDialogAccepted"] = True
        path.write_text(json.dumps(data, indent=2))

    # running ------------------------------------------------------------------------------------
    def run(
        self,
        project_dir: Path | str,
        script: Iterable[Step] = (),
        plugin_dir: Path | str | Sequence[Path | str] | None = None,
        permission_mode: str | None = "bypassPermissions",
        extra_args: Sequence[str] = (),
        timeout: float = 60,
        prompt: str = "Run the scripted commands.",
        resume: str | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
    ) -> ClaudeRun:
        """``claude -p PROMPT --output-format json`` in ``project_dir`` against a fresh fake API
        serving ``script``. ``permission_mode=None`` passes no mode (the client's default).
        ``check`` asserts a parsable JSON result."""
        args = ["-p", prompt, "--output-format", "json"]
        if permission_mode is not None:
            args += ["--permission-mode", permission_mode]
        if resume is not None:
            args += ["--resume", resume]
        args += _plugin_args(plugin_dir)
        args += list(extra_args)
        with FakeAnthropic(script) as fake:
            run = self._invoke(args, Path(project_dir), fake, timeout, env)
        if check:
            assert isinstance(run.result, dict), run.describe()
        return run

    def resume(
        self, session_id: str, project_dir: Path | str, script: Iterable[Step] = (), **kwargs: Any
    ) -> ClaudeRun:
        """Continue a session (fires SessionStart with source "resume")."""
        return self.run(project_dir, script, resume=session_id, **kwargs)

    def init_only(
        self,
        project_dir: Path | str,
        plugin_dir: Path | str | Sequence[Path | str] | None = None,
        extra_args: Sequence[str] = (),
        timeout: float = 30,
        env: Mapping[str, str] | None = None,
    ) -> ClaudeRun:
        """``claude --init-only``: SessionStart and SessionEnd hooks, no API call."""
        args = ["--init-only", *_plugin_args(plugin_dir), *extra_args]
        with FakeAnthropic() as fake:
            return self._invoke(args, Path(project_dir), fake, timeout, env)

    def _invoke(
        self,
        args: list[str],
        cwd: Path,
        fake: FakeAnthropic,
        timeout: float,
        env: Mapping[str, str] | None,
    ) -> ClaudeRun:
        run_dir = Path(self.root / "runs" / f"{len(self.runs):03d}")
        run_dir.mkdir(parents=True, exist_ok=True)
        debug_path = run_dir / "debug.log"
        argv = [str(self.claude_bin), *args, "--debug-file", str(debug_path)]
        started = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=self.environ(fake.base_url, env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _killpg(proc.pid)
            stdout, stderr = proc.communicate()
            stderr += f"\n[e2e harness: killed after {timeout}s]"
        duration = time.monotonic() - started
        (run_dir / "stdout").write_text(stdout)
        (run_dir / "stderr").write_text(stderr)
        run = ClaudeRun(
            args=argv,
            returncode=proc.returncode,
            stdout=stdout,
            stderr=stderr,
            result=_parse_result(stdout),
            requests=fake.requests,
            debug_log=debug_path.read_text(errors="replace") if debug_path.exists() else "",
            debug_path=debug_path,
            duration=duration,
        )
        self.runs.append(run)
        return run

    def cleanup(self) -> list[int]:
        """Kill every process still carrying this env's marker (e.g. leaked background commands)."""
        return kill_marked(str(self.root))


def _plugin_args(plugin_dir: Path | str | Sequence[Path | str] | None) -> list[str]:
    if plugin_dir is None:
        return []
    dirs = [plugin_dir] if isinstance(plugin_dir, (str, Path)) else list(plugin_dir)
    args: list[str] = []
    for d in dirs:
        args += ["--plugin-dir", str(d)]
    return args


def _parse_result(stdout: str) -> Any:
    text = stdout.strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        # Be lenient with stray lines: take the last line that parses.
        for line in reversed(text.splitlines()):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def _killpg(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def kill_marked(marker: str) -> list[int]:
    """SIGKILL processes whose environment has ``MARKER_VAR=marker``. Returns the pids killed."""
    needle = f"{MARKER_VAR}={marker}".encode()
    killed = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except ProcessLookupError:
                pass
    return killed

"""What an engine needs before it starts a session's sandbox: the effective ``network``.

Claude Code's own ``sandbox.network.allowedDomains`` applies when ``network`` is not set
anywhere (moving from Claude's sandbox to this one must not open the network): its
domains become the list, joined over the user's, the project's and the local settings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from manager.egress import setting
from manager.fs.util import write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from manager.config import Config

POLICY = "network.json"   # read by the holder (egress_proxy.POLICY)


def effective(config: Config, project: str) -> str | list[str]:
    value: str | list[str] = config["network"]
    if config.sources.get("network") != "default":
        return value
    domains = claude_allowed_domains(project)
    return domains if domains is not None else value


def inputs(project: str) -> tuple[list[str], list[str]]:
    """The files and environment variables :func:`effective` reads besides the configuration."""
    return _claude_settings(project), ["CLAUDE_CONFIG_DIR", "HOME"]


def _claude_settings(project: str) -> list[str]:
    # Claude's own configuration directory (the rule of manager.claude.permissions.config_dir,
    # which this layer does not import).
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return [os.path.join(config_dir, "settings.json"),
            os.path.join(project, ".claude", "settings.json"),
            os.path.join(project, ".claude", "settings.local.json")]


def claude_allowed_domains(project: str) -> list[str] | None:
    found: list[str] | None = None
    for path in _claude_settings(project):
        domains = _domains_in(path)
        if domains is not None:
            found = [*(found or []), *domains]
    return found


def _domains_in(path: str) -> list[str] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        domains = data["sandbox"]["network"]["allowedDomains"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(domains, list):
        return None
    out = []
    for d in domains:
        try:
            out.append(setting.check_entry(str(d).strip().lower()))
        except ValueError:
            continue   # Claude's own syntax we do not take: left out, so narrower
    return out


def write_policy(sandbox: Path, config: Config, project: str) -> dict[str, object]:
    """The policy file the holder reads when it starts (a holder that runs keeps its own)."""
    policy = setting.policy(effective(config, project))
    write_atomic(sandbox / POLICY, (json.dumps(policy, sort_keys=True) + "\n").encode(), mode=0o644)
    return policy


def container_network(config: Config, project: str | None = None) -> bool:
    """Whether a container session gets the engine's network: ``container.network`` and
    ``network: open`` both (with ``project``: Claude's allowedDomains count, as for the other
    engines). A list has none either: it goes through the session's proxy
    (engines/container/egress.py)."""
    value = effective(config, project) if project is not None else config["network"]
    return bool(config["container.network"]) and value == setting.OPEN


def try_flag(config: Config, project: str, try_path: str, flag: str) -> str:
    """try's "work in DIR" flag, with -x (its own network namespace) for ``network: off``.
    A list, or off with a try that has no -x, is refused: try cannot hold either."""
    from manager.errors import EngineUnavailable

    value = effective(config, project)
    if value == setting.OPEN:
        return flag
    if isinstance(value, list):
        raise EngineUnavailable(
            "network is a list of hosts, which the try engine cannot enforce (no proxy)",
            hint="use engine overlay, or network: off")
    if not try_has_x(try_path):
        raise EngineUnavailable(f"network is off, and {try_path} has no -x to cut the network",
                                hint="install binpash/try main (it has -x), or use engine overlay")
    return "-x" + flag.removeprefix("-")   # getopts takes clustered flags: -xN DIR


def try_has_x(try_path: str) -> bool:
    """Whether the try script takes -x (its own network namespace: try main)."""
    try:
        with open(try_path, encoding="utf-8", errors="replace") as f:
            return '(x)' in f.read()
    except OSError:
        return False


def changed(sandbox: Path, config: Config, project: str) -> bool:
    """Whether the configuration now asks for another policy than the running sandbox's."""
    try:
        running = json.loads((sandbox / POLICY).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        running = setting.policy(setting.OPEN)
    return bool(running != setting.policy(effective(config, project)))


STALE = "network.stale"   # the entry script hands a call to `workspace run`, which replaces


def mark_if_changed(sandbox: Path, project: str) -> None:
    """The hook's part, when the configuration files changed: a sandbox started with another
    ``network`` is marked, so that its next call goes the slow way, which replaces it."""
    from manager import config

    if (sandbox / POLICY).exists() and changed(sandbox, config.load(Path(project)), project):
        (sandbox / STALE).touch()

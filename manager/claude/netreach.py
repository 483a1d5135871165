"""Passthrough forms that can connect out: sandboxed while ``network`` is not ``open``.

A passthrough command runs on the host, outside the network confinement of the sandbox,
and what it sends is in no egress record. So while the session's effective ``network``
setting (``off`` or a list of hosts, Claude Code's allowed domains included) is not
``open``, a form that can reach the network runs in the sandbox instead, where the setting
applies: every ``gh`` call but ``gh --version`` (each talks to GitHub's API), and the
docker/podman forms that talk to a registry (``pull``, ``push``, ``search``, ``run``/
``create``, which pull a missing image) or start, resume or run something in a container
with a network (``run``, ``start``, ``restart``, ``unpause``, ``exec``, ``network connect``,
pods'). ``run``/``create`` stay here only with ``--network none`` and ``--pull never``.
Everything else a container form does stays on this host, but only against a local daemon:
with ``DOCKER_HOST``, ``CONTAINER_HOST`` (not a unix socket), a docker context or a podman
connection or ``remote = true``, every form talks to a daemon over the network.
Commands the user adds to ``passthrough`` themselves are theirs: nothing tells what they
reach.
"""

from __future__ import annotations

import os

from manager.claude import ctrforms
from manager.claude import policies

OPEN = "open"        # manager.egress.setting.OPEN (the hook does not import egress)
GH_LOCAL = (["--version"], ["version"])
NETWORKED = frozenset(("pull", "push", "search", "run", "create", "start", "restart", "unpause",
                       "exec", "healthcheck run", "network connect", "pod start", "pod restart",
                       "pod unpause", "pod create"))


def connects_out(words: list[str]) -> bool:
    """A simple command (already judged a passthrough form) that can use the network."""
    i = 1 if words[:1] == ["sudo"] else 0
    while i and i < len(words) and words[i] in policies.SUDO_OK_OPTIONS:
        i += 1
    cli, args = (words[i], words[i + 1:]) if i < len(words) else ("", [])
    if cli == "gh":
        return args not in GH_LOCAL
    if cli in ctrforms.ENGINES:
        return _container(cli, args)
    return False


def _container(cli: str, args: list[str]) -> bool:
    found = ctrforms.form(args)
    if found is None or remote_daemon(cli):
        return True
    key, rest = found
    if key in ("run", "create"):
        return not (ctrforms.option_values(cli, key, rest, ("--network",)) == ["none"]
                    and ctrforms.option_values(cli, key, rest, ("--pull",)) == ["never"])
    return key in NETWORKED


def remote_daemon(cli: str) -> bool:
    """The client talks to a daemon elsewhere, or may (a context or connection named): docker
    may be podman's emulation, so it is read both ways."""
    env = os.environ
    if cli == "docker" and (_remote_url(env.get("DOCKER_HOST")) or env.get(
            "DOCKER_CONTEXT", "default") != "default" or _docker_context()):
        return True
    return _remote_url(env.get("CONTAINER_HOST")) or bool(env.get("CONTAINER_CONNECTION")) or \
        _podman_remote()


def _remote_url(url: str | None) -> bool:
    return bool(url) and not str(url).startswith("unix://")


def _docker_context() -> bool:
    """docker's config.json names a context (``docker context use``) other than default."""
    from manager import fastjson

    home = os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")
    try:
        with open(os.path.join(home, "config.json"), "rb") as f:
            data = fastjson.loads(f.read(1 << 20))
    except (OSError, ValueError):
        return False
    context = data.get("currentContext") if isinstance(data, dict) else None
    return bool(context) and context != "default"


def _podman_remote() -> bool:
    """A containers.conf that sets ``remote = true`` (podman then talks to a service)."""
    config = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    files = [os.environ.get("CONTAINERS_CONF") or "", os.path.join(config, "containers",
                                                                   "containers.conf"),
             "/etc/containers/containers.conf", "/usr/share/containers/containers.conf"]
    for path in filter(None, files):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 20)
        except OSError:
            continue
        lines = (line.split("#", 1)[0].replace(" ", "").replace("\t", "") for line in
                 text.splitlines())
        if any(line.lower() == "remote=true" for line in lines):
            return True
    return False

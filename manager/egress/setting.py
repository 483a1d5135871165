"""The ``network`` setting: ``open``, ``off``, or a list of allowed hosts.

Entries are ``host`` (any port), ``host:port``, ``*.domain`` (its subdomains) or a
preset's name (``pypi``, ``npm``, ``github``, ...), which stands for its registry hosts.
A project file the user has not trusted may only narrow what the user's own settings
allow (:func:`narrows`): it can turn the network off or name hosts the user's list
already allows, never open it.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OPEN = "open"
OFF = "off"
PRESETS: dict[str, tuple[str, ...]] = {
    "pypi": ("pypi.org:443", "files.pythonhosted.org:443"),
    "npm": ("registry.npmjs.org:443", "registry.yarnpkg.com:443"),
    "github": ("github.com", "*.github.com", "*.githubusercontent.com", "codeload.github.com:443"),
    "crates": ("crates.io:443", "index.crates.io:443", "static.crates.io:443"),
    "go": ("proxy.golang.org:443", "sum.golang.org:443", "storage.googleapis.com:443"),
    "rubygems": ("rubygems.org:443", "index.rubygems.org:443"),
    "debian": ("deb.debian.org", "security.debian.org"),
    "ubuntu": ("archive.ubuntu.com", "security.ubuntu.com", "ports.ubuntu.com"),
}
_HOST = re.compile(r"^(\*\.)?([a-z0-9_-]+)(\.[a-z0-9_-]+)*\.?$|^\[[0-9a-f:.]+\]$|^[0-9.]+$")


class Network:
    """The coercion of the setting (config's Option type): "open", "off" or a list."""

    def __new__(cls, value: object) -> Any:  # noqa: D102 - a converter, not a class to make
        return parse(value)


def parse(value: object) -> str | list[str]:
    if isinstance(value, str):
        word = value.strip().lower()
        if word in (OPEN, OFF):
            return word
        if word in ("none", "false", "no", "0"):
            return OFF
        if word in ("true", "yes", "1"):
            return OPEN
        if word.startswith("["):
            import json

            return parse(json.loads(word))
        return parse([w for w in word.split(",") if w.strip()])
    if value is False:
        return OFF
    if value is True:
        return OPEN
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [check_entry(v.strip().lower()) for v in value]
    raise ValueError(value)


def check_entry(entry: str) -> str:
    if entry in PRESETS:
        return entry
    host, port = split(entry)
    if not _HOST.match(host) or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise ValueError(f"not a host, host:port, *.domain or preset ({', '.join(PRESETS)}): {entry!r}")
    return entry


def split(entry: str) -> tuple[str, str]:
    head, sep, tail = entry.rpartition(":")
    if sep and (entry.count(":") == 1 or head.endswith("]")):
        return head, tail
    return entry, ""


def expand(entries: list[str]) -> list[str]:
    """Presets replaced by their hosts: what the proxy matches."""
    out: list[str] = []
    for entry in entries:
        out.extend(PRESETS.get(entry, (entry,)))
    return list(dict.fromkeys(out))


def narrows(current: str | list[str], proposed: str | list[str]) -> bool:
    """Whether ``proposed`` allows nothing that ``current`` does not."""
    if proposed == OFF or current == OPEN:
        return True
    if proposed == OPEN or current == OFF:
        return proposed == current
    assert isinstance(current, list) and isinstance(proposed, list)
    allowed = expand(current)
    return all(_covered(entry, allowed) for entry in expand(proposed))


def _covered(entry: str, allowed: list[str]) -> bool:
    host, port = split(entry)
    for have in allowed:
        have_host, have_port = split(have)
        if have_port and have_port != port:
            continue   # a port-less entry (any port) is covered only by a port-less one
        if have_host == host or (have_host.startswith("*.") and host.endswith(have_host[1:])):
            return True
    return False


def policy(value: str | list[str]) -> dict[str, object]:
    """What the holder reads (``network.json``)."""
    if isinstance(value, str):
        return {"mode": value, "allow": []}
    return {"mode": "list", "allow": expand(value)}


def describe(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "only " + (", ".join(value) or "(nothing)")

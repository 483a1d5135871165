"""The egress proxy's allow list: which host and port a connection may go to (stdlib only).

Entries are ``host`` (any port), ``host:port`` and ``*.domain`` (the subdomains, not the
domain). The host a client asks for is judged only when it is written as a DNS name or an IP
address, so what is compared here is what the resolver reads: a NUL ended the name there,
after ``.example.com`` had matched (attack pass 8).
"""

from __future__ import annotations


def allowed(patterns: list[str], host: str, port: int) -> bool:
    """``host`` (any port), ``host:port``, ``*.domain`` (the subdomains, not the domain).
    Only a host written as a name or an address is judged: what is compared here is then
    what the resolver reads (a NUL ended the name there, after ``.example.com`` matched)."""
    host = host.lower().rstrip(".")
    if not plain_host(host):
        return False
    for pattern in patterns:
        name, _, want = pattern.lower().rpartition(":") if _has_port(pattern) else (pattern.lower(), "", "")
        if want and want != str(port):
            continue
        name = name.strip("[]")
        if name.startswith("*.") and host.endswith(name[1:]) and len(host) > len(name) - 1:
            return True
        if name == host:
            return True
    return False


LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
HOST_NAME = rf"{LABEL}(?:\.{LABEL})*"


def plain_host(host: str) -> bool:
    """A DNS name of letters, digits, ``-`` and ``_`` (lowercase, no trailing dot), or an IP
    address as ``ipaddress`` reads it, without a zone; nothing else reaches a resolver."""
    import ipaddress
    import re

    if len(host) > 253 or "%" in host:
        return False
    if re.fullmatch(HOST_NAME, host):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _has_port(pattern: str) -> bool:
    head, sep, tail = pattern.rpartition(":")
    return bool(sep) and tail.isdigit() and (pattern.count(":") == 1 or head.endswith("]"))

"""DNS queries to a loopback nameserver (stdlib only), with ``network`` off or a list.

Where the host's resolver is a local one (``127.0.0.53``, systemd-resolved's, or another
loopback address in ``/etc/resolv.conf``), a sandboxed lookup goes to the sandbox's own
loopback, not to the watched way out (:mod:`.direct`), and would fail unseen. The holder
listens on those addresses' port 53 (UDP) in the sandbox's namespace and hands the sockets
to the proxy, which records each query (its name, the call) and answers REFUSED, so the
resolver gives up at once. In list mode nothing needs local lookups: HTTP and SOCKS5 (socks5h)
clients let the proxy resolve the hosts it allows.
"""

from __future__ import annotations

import ipaddress
import socket
import struct

LOCAL_RESOLVER = "127.0.0.53"
REFUSED = 5


def loopback_nameservers(path: str = "/etc/resolv.conf") -> list[str]:
    """The loopback nameservers the host's resolver names, and systemd-resolved's."""
    found = [LOCAL_RESOLVER]
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                words = line.split()
                if len(words) >= 2 and words[0] == "nameserver":
                    try:
                        if ipaddress.ip_address(words[1].split("%")[0]).is_loopback:
                            found.append(words[1])
                    except ValueError:
                        continue
    except OSError:
        pass
    return list(dict.fromkeys(found))


def listen(addresses: list[str]) -> list[socket.socket]:
    """UDP sockets on ADDRESS:53 in this (the sandbox's) namespace; those that cannot be made
    are left out (no IPv6 here)."""
    out = []
    for address in addresses:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        s = socket.socket(family, socket.SOCK_DGRAM)
        try:
            s.bind((address, 53))
        except OSError:
            s.close()
            continue
        out.append(s)
    return out


def question(message: bytes) -> tuple[str, int]:
    """The name a query asks for and where its question ends (("", 0) when it is none)."""
    labels, offset = [], 12
    try:
        if struct.unpack_from("!H", message, 4)[0] < 1:
            return "", 0
        while message[offset]:
            length = message[offset]
            if length > 63:
                return "", 0
            labels.append(message[offset + 1:offset + 1 + length].decode("ascii", "replace"))
            offset += 1 + length
    except (IndexError, struct.error):
        return "", 0
    end = offset + 5   # the root label, type and class
    return (".".join(labels), end) if end <= len(message) else ("", 0)


def refusal(query: bytes) -> bytes:
    """REFUSED, with the question echoed (resolvers drop an answer to another question)."""
    name, end = question(query)
    if not end:
        return b""
    ident, flags = struct.unpack_from("!HH", query, 0)
    flags = 0x8000 | (flags & 0x7900) | REFUSED   # a response; its opcode and RD; REFUSED
    return struct.pack("!HHHHHH", ident, flags, 1, 0, 0, 0) + query[12:end]

"""SOCKS5 for the egress proxy (stdlib only): CONNECT, no authentication (RFC 1928).

The proxy takes it on the same port as HTTP (its first byte, 5, tells them apart), so
``ALL_PROXY=socks5h://127.0.0.1:PORT`` reaches the same allow list and record. BIND and
UDP ASSOCIATE are refused (on the record, as a refused attempt to their host).
"""

from __future__ import annotations

import socket
import struct

VERSION = 5
OK, FAILURE, NOT_ALLOWED, NET_UNREACHABLE, HOST_UNREACHABLE, REFUSED = 0, 1, 2, 3, 4, 5
COMMAND_NOT_SUPPORTED, ADDRESS_NOT_SUPPORTED = 7, 8
CONNECT = 1
NO_AUTH, NO_METHOD = 0, 0xFF


def _exact(conn: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = conn.recv(count - len(data))
        if not chunk:
            raise OSError("socks: the client closed during the handshake")
        data += chunk
    return data


def request(conn: socket.socket) -> tuple[int, str, int] | None:
    """The greeting and the request: (command, host, port); None when the client offers
    no method we take or an address type there is none of (answered here)."""
    _, count = _exact(conn, 2)
    if NO_AUTH not in _exact(conn, count):
        conn.sendall(bytes([VERSION, NO_METHOD]))
        return None
    conn.sendall(bytes([VERSION, NO_AUTH]))
    _, command, _, kind = _exact(conn, 4)
    if kind == 1:
        host = socket.inet_ntop(socket.AF_INET, _exact(conn, 4))
    elif kind == 4:
        host = socket.inet_ntop(socket.AF_INET6, _exact(conn, 16))
    elif kind == 3:
        host = _exact(conn, _exact(conn, 1)[0]).decode("ascii", "replace").lower().rstrip(".")
    else:
        conn.sendall(reply(ADDRESS_NOT_SUPPORTED))
        return None
    port = struct.unpack("!H", _exact(conn, 2))[0]
    return command, host, port


def reply(code: int) -> bytes:
    """The answer to a request (bound address 0.0.0.0:0: nobody needs ours)."""
    return bytes([VERSION, code, 0, 1, 0, 0, 0, 0, 0, 0])


def failure(exc: OSError) -> int:
    import errno

    if isinstance(exc, socket.gaierror):
        return HOST_UNREACHABLE
    return {errno.ECONNREFUSED: REFUSED, errno.ENETUNREACH: NET_UNREACHABLE,
            errno.EHOSTUNREACH: HOST_UNREACHABLE}.get(exc.errno or 0, FAILURE)

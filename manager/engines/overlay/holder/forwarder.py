"""The container engines' network forwarder (issue 24): run inside a session's container as
its main command (``python3 -c`` this file's text), standard library only.

The container has no network (``--network none``: only ``lo``). The session's proxy runs on
the host (:mod:`.unix_proxy`) and listens on a unix socket in a directory bind-mounted
read-only at ``/run/ws-egress``. This forwarder listens on 127.0.0.1:3128 (and [::1]) inside
and relays each connection to that socket, first telling the proxy the client's port
(``WSFWD PORT``), by which the proxy finds the call that made it. It enforces nothing: a
replaced or killed forwarder still reaches only the proxy, which holds the allow list.
It says hello once listening (``WSFWD ready``): the engine waits for it.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading

SOCKET = "/run/ws-egress/proxy.sock"
PORT = 3128


def pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def relay(client: socket.socket) -> None:
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(SOCKET)
        up.sendall(f"WSFWD {client.getpeername()[1]}\n".encode())
    except OSError:
        client.close()
        up.close()
        return
    back = threading.Thread(target=pipe, args=(up, client), daemon=True)
    back.start()
    pipe(client, up)
    back.join()
    client.close()
    up.close()


def serve(listener: socket.socket) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            continue
        threading.Thread(target=relay, args=(conn,), daemon=True).start()


def main() -> None:
    listeners = []
    for family, address in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            s = socket.socket(family, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((address, PORT))
            s.listen(128)
            listeners.append(s)
        except OSError:
            continue   # no IPv6 inside: IPv4 only
    if not listeners:
        sys.exit(f"workspace forwarder: cannot listen on 127.0.0.1:{PORT}")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as hello:
        hello.connect(SOCKET)
        hello.sendall(b"WSFWD ready\n")
    for s in listeners[1:]:
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    serve(listeners[0])


if __name__ == "__main__":
    main()

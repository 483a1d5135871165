"""Where the service listens and the two secrets of its one connection rule.

``<state root>/service/endpoint`` (mode 0600, in a 0700 directory under the state root,
which every sandbox hides) holds one line: ``PORT CLIENT_TOKEN SERVICE_TOKEN PID``. A client
proves it may ask with the first token; the service proves it is the service (and not a
process that took its loopback port after it exited) with the second. Read by bash
(bin/lib.sh) with one builtin ``read``: keep it one line of words.
"""

from __future__ import annotations

import os

from manager.session import paths

NAME = "endpoint"
LOCK = "lock"
PID = "pid"


def directory() -> str:
    return os.path.join(paths.state_root(), "service")


def ensure_directory() -> str:
    path = directory()
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.lstat(path)
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.chmod(path, 0o700)   # raises if it is not ours: then there is no service
    return path


def new_token() -> str:
    return os.urandom(24).hex()


def write(port: int, client_token: str, service_token: str) -> str:
    """Publish the endpoint atomically (a reader sees the old line or the new, never half)."""
    path = os.path.join(ensure_directory(), NAME)
    tmp = f"{path}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(f"{port} {client_token} {service_token} {os.getpid()}\n")
    os.replace(tmp, path)
    return path


def write_pid() -> None:
    """``pid``: which process serves (for ``workspace serve --status`` and the tests)."""
    with open(os.path.join(ensure_directory(), PID), "w", encoding="ascii") as f:
        f.write(f"{os.getpid()}\n")


def read_pid() -> int | None:
    try:
        with open(os.path.join(directory(), PID), encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def read() -> tuple[int, str, str] | None:
    try:
        with open(os.path.join(directory(), NAME), encoding="ascii") as f:
            port, client, service, _ = f.read().split()
        return int(port), client, service
    except (OSError, ValueError):
        return None


def remove_if(client_token: str) -> None:
    """Withdraw the endpoint when it is still ours (a newer service may have replaced it)."""
    found = read()
    if found is not None and found[1] == client_token:
        try:  # noqa: SIM105 - contextlib is not worth its import here
            os.unlink(os.path.join(directory(), NAME))
        except FileNotFoundError:
            pass


def running() -> bool:
    """Whether a service holds the lock (it holds it for as long as it runs)."""
    from manager.fs.util import held

    return held(os.path.join(directory(), LOCK))

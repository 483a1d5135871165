"""Image references as the engines resolve them (stdlib only, no import of its own: the
passthrough judge reads it on the hook's path)."""

from __future__ import annotations

# Short names the engines resolve alike (podman names a local short name localhost/).
_PREFIXES = ("docker.io/library/", "docker.io/", "index.docker.io/library/",
             "index.docker.io/", "localhost/")


def key(name: str) -> str:
    """``name`` as the engines resolve it, short: ``ubuntu``, ``docker.io/library/ubuntu:latest``
    and ``localhost/ubuntu`` are one (conflating more is safe: it sandboxes more)."""
    ref, at, digest = name.strip().partition("@")
    if ":" not in ref.rsplit("/", 1)[-1] and not at:
        ref += ":latest"
    first, slash, _ = ref.partition("/")
    if not slash:
        ref = "docker.io/library/" + ref
    elif not ("." in first or ":" in first or first == "localhost"):
        ref = "docker.io/" + ref
    for prefix in _PREFIXES:
        if ref.startswith(prefix):
            ref = ref[len(prefix):]
            break
    return ref + at + digest


def same_or_below(name: str, wanted: str) -> bool:
    """Whether ``name`` is ``wanted`` as the engines resolve them, or names it under another
    registry or namespace: podman resolves a short name to *any* local image whose name ends
    in ``/NAME`` (``org/tool:1`` finds ``example.com/zz/org/tool:1``; attack pass 9)."""
    a, b = key(name), key(wanted)
    return a == b or a.endswith("/" + b)

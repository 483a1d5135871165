"""Whether file content is binary: git's rule, the one diff, numstat and ``commit -p`` use."""

from __future__ import annotations

SNIFF = 8000   # bytes checked for NUL, as git does


def looks_binary(data: bytes) -> bool:
    return b"\0" in data[:SNIFF]

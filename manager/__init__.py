"""workspace: hold an AI agent's shell side effects in a copy-on-write overlay."""

from __future__ import annotations

__version__ = "0.1.0"

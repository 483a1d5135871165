"""One error type for expected failures; the CLI maps it to exit code 1."""

from __future__ import annotations


class WorkspaceError(Exception):
    """An expected failure with a message for people and, where known, the fix."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\nhint: {self.hint}"
        return self.message


class ConfigError(WorkspaceError):
    """A configuration file or value is malformed."""


class StateError(WorkspaceError):
    """A session record or pointer on disk is unreadable or inconsistent."""


class EngineUnavailable(WorkspaceError):
    """The chosen engine cannot run on this host."""

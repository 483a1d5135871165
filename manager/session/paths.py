"""Where workspace keeps its state and reads its configuration: the one home of each rule.

The hooks use these rules on every call, so this module imports ``os`` alone
(no ``pathlib``, ``re`` or ``typing`` at import time): the string forms
(``*_root``) are what the hook path calls, the ``Path`` forms wrap them for the
rest of the package. The rules kept here, and nowhere else:

- the state and config directories (XDG, and the test guard below);
- which session ids are valid (also the names of files under them);
- which configuration files are read, lowest precedence first;
- the environment variable that sets a configuration key.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Callable
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any
    from typing import TypeGuard

# Tests set this so that code which forgets to choose a temporary state
# directory fails loudly instead of writing into the real home directory.
FORBID_DEFAULT = "WORKSPACE_FORBID_DEFAULT_STATE"
ID_LIMIT = 128
ID_PUNCTUATION = "._-"
CONFIG_NAMES = ("config.yaml", "config.yml", "config.json")
PROJECT_FILE = ".workspace.yaml"
ENV_PREFIX = "WORKSPACE_"


def _xdg(var: str, default: str) -> str:
    value = os.environ.get(var)
    if value:
        return value
    if os.environ.get(FORBID_DEFAULT):
        from manager.errors import StateError

        raise StateError(f"${var} is not set while {FORBID_DEFAULT} is on (a test forgot its tmp dir)")
    return os.path.join(os.path.expanduser("~"), default)


def trust_file() -> str:
    """The record of trusted project files, {file path: sha256}: it decides what a project's
    file may set (read by the config loader, and stamped by the hook's config cache)."""
    return os.path.join(state_root(), "trusted-projects.json")


def state_root() -> str:
    """``$XDG_STATE_HOME/workspace``: inherited identically by every subprocess."""
    return os.path.join(_xdg("XDG_STATE_HOME", ".local/state"), "workspace")


def spill_root() -> str:
    """``$XDG_STATE_HOME/workspace-calls``: where the hook leaves a command too long for an
    argument, for the sandbox to read. Beside the state directory, not in it: sandboxes
    never see that one (setting ``hide``)."""
    return state_root() + "-calls"


def config_base() -> str:
    """The user's configuration directory ($XDG_CONFIG_HOME, else ~/.config): git's and
    podman's files are found under it as well as ours."""
    return _xdg("XDG_CONFIG_HOME", ".config")


def config_root() -> str:
    """**The** configuration directory of workspace."""
    return os.path.join(config_base(), "workspace")


def session_root(session_id: str) -> str:
    """A session's directory; ``session_id`` must be :func:`valid_id`."""
    return os.path.join(state_root(), "sessions", session_id)


def project_of(start: str) -> str:
    """**The** project of a directory: the enclosing git work tree (a ``.git`` entry), else
    the directory itself; symlinks resolved."""
    start = os.path.realpath(start)
    candidate = start
    while True:
        if os.path.exists(os.path.join(candidate, ".git")):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return start
        candidate = parent


def pointer_file(project: str) -> str:
    """The project's current-session pointer: ``projects/<sha256(project)[:16]>.json``."""
    name = sha256_hex(project.encode())[:16]
    return os.path.join(state_root(), "projects", f"{name}.json")


def sha256_hex(data: bytes) -> str:
    """``hashlib.sha256(data).hexdigest()``, from CPython's built-in sha256 when it has one
    (3.11 ``_sha256``, 3.12 ``_sha2``): hashlib loads OpenSSL, ~3 ms of every command."""
    for name in ("_sha256", "_sha2"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        return str(module.sha256(data).hexdigest())
    import hashlib

    return hashlib.sha256(data).hexdigest()


def valid_id(value: Any, limit: int = ID_LIMIT) -> TypeGuard[str]:
    """A session (or tool call) id: ASCII letters, digits and ``._-``, a letter or digit first."""
    return (isinstance(value, str) and 0 < len(value) <= limit and value.isascii()
            and value[0].isalnum() and all(c.isalnum() or c in ID_PUNCTUATION for c in value))


def config_files(project: str | None) -> list[str]:
    """Every file the configuration is read from, lowest precedence first."""
    bases = [config_root()]
    plugin_data = os.environ.get("CLAUDE_PLUGIN_DATA")
    if plugin_data:
        bases.append(plugin_data)
    files = [os.path.join(base, name) for base in bases for name in CONFIG_NAMES]
    if project is not None:
        files.append(os.path.join(project, PROJECT_FILE))
    return files


def env_name(key: str) -> str:
    """The environment variable that sets configuration key ``key`` (``a.b`` -> ``WORKSPACE_A__B``)."""
    return ENV_PREFIX + key.upper().replace(".", "__")


def enable_site() -> None:
    """Add site-packages when running as a hook (``python -I -S``) and they are needed."""
    import sys

    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()


# -- the same, as Path objects, for the rest of the package ------------------------------


def state_home() -> Path:
    from pathlib import Path

    return Path(state_root())


def sessions_dir() -> Path:
    return state_home() / "sessions"


def projects_dir() -> Path:
    return state_home() / "projects"


def is_within(path: str | Path, root: str | Path) -> bool:
    """``path`` is ``root`` or below it: **the** rule (``/`` holds every absolute path, a
    trailing slash on ``root`` changes nothing). Strings, not ``Path.parents``: review runs
    it over every change, and the hook path has no pathlib."""
    text, top = str(path), str(root).rstrip("/") or "/"
    return text == top or text.startswith(top if top == "/" else top + "/")


def ancestors(path: str) -> Iterator[str]:
    """Each proper ancestor of ``path``, nearest first (strings, as :func:`is_within`)."""
    parent = os.path.dirname(path)
    while parent != path:
        yield parent
        path, parent = parent, os.path.dirname(parent)


def within_any(roots: list[str]) -> Callable[[str], bool]:
    """:func:`is_within` any of ``roots``, as one set lookup and one C-level prefix test per
    path: review asks it of every change, against every hidden path (a loop of is_within
    calls was a third of a status at 100,000 files)."""
    tops = {str(r).rstrip("/") or "/" for r in roots}
    prefixes = tuple(t if t == "/" else t + "/" for t in tops)
    return lambda path: path in tops or path.startswith(prefixes)

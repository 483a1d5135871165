"""The two forms of binpash/try the engine supports, as installed on this machine.

``scripts/setup.d/50-try.sh`` installs the main branch (``-N DIR``) as ``try`` on
PATH and the v0.2.0 release (``-D DIR``) under ``/usr/local/lib/workspace-try``.
``TRY_TEST_SCRIPTS`` (paths, ``:``-separated) adds other copies. Tests select a
form through ``WORKSPACE_TRY__PATH`` (the ``try.path`` setting). In CI (``CI``
set) a missing form fails the test; elsewhere it skips with the reason.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from manager.engines.try_ import probe as try_probe

FORMS = {"try-main": "-N", "try-0.2.0": "-D"}   # test id -> interface flag
INSTALLED = Path("/usr/local/lib/workspace-try")
PATH_SETTING = "WORKSPACE_TRY__PATH"


def _candidates() -> list[Path]:
    listed = [Path(p) for p in os.environ.get("TRY_TEST_SCRIPTS", "").split(":") if p]
    on_path = shutil.which("try")
    found = [*listed, *([Path(on_path)] if on_path else []), *sorted(INSTALLED.glob("*/try"))]
    return list(dict.fromkeys(found))


@functools.cache
def _flags() -> dict[str, Path]:
    """Interface flag -> the first script that has it (each script is run once per session)."""
    scripts: dict[str, Path] = {}
    for path in _candidates():
        try:
            scripts.setdefault(try_probe.inspect(path).flag, path)
        except (OSError, try_probe.TryError):
            continue
    return scripts


def script(form: str) -> Path | None:
    return _flags().get(FORMS[form])


def require(form: str) -> Path:
    """The script of ``form``; fails in CI and skips elsewhere when it is not installed."""
    path = script(form)
    if path is None:
        reason = (f"binpash/try {form} ({FORMS[form]} DIR) is not installed here: run "
                  "scripts/setup.d/50-try.sh or set TRY_TEST_SCRIPTS")
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def use(form: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point ``try.path`` (and so every CLI and hook subprocess) at ``form``."""
    path = require(form)
    monkeypatch.setenv(PATH_SETTING, str(path))
    return path

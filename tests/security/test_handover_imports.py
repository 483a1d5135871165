"""Found while merging (lean23's note): when an entry cannot enter the sandbox (the holder
gone after its idle time, try's sandbox not prepared, the container gone) it hands the call
to the full ``workspace run`` as ``python -m manager``, in the client's directory: the
project, which Python put first on its path. A ``manager`` package the agent wrote there
with the Write tool ran on the host, unsandboxed, at the next such call (reproduced on the
overlay engine with its holder killed). The handover now starts Python with ``-P``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from manager.engines.container import engine as container
from manager.engines.overlay import engine as overlay
from manager.engines.try_ import layout as try_layout

PLANTED = 'open({marker!r}, "w").write("ran on the host")\n'


def _argv(engine: str, sandbox: Path, cwd: str) -> list[str]:
    """Each entry as its engine calls it, for a sandbox it cannot enter: it hands over."""
    py, cmd = sys.executable, "echo inside"
    if engine == "overlay":
        return ["/bin/bash", str(overlay.ENTER_SCRIPT), str(sandbox), "ws-none", py, cwd, "", cmd]
    if engine == "try":
        return ["/bin/bash", str(try_layout.ENTER_SCRIPT), str(sandbox), "ws-none", py, "try", "-N",
                cwd, "", cmd]
    return ["/bin/bash", str(container.ENTER_SCRIPT), "docker", "workspace-none", str(sandbox),
            "ws-none", py, cwd, "", "", "", cmd]


@pytest.mark.parametrize("engine", ["overlay", "try", "docker"])
def test_the_handover_never_imports_the_projects_manager(engine: str, project: Path,
                                                         tmp_path: Path):
    marker = tmp_path / "host-marker"
    (project / "manager").mkdir()
    for name in ("__init__.py", "__main__.py"):
        (project / "manager" / name).write_text(PLANTED.format(marker=str(marker)))
    sandbox = tmp_path / "sandbox"
    sandbox.mkdir()
    proc = subprocess.run(_argv(engine, sandbox, str(project)), cwd=project, capture_output=True,
                          text=True, timeout=120)
    assert not marker.exists(), "the project's manager package ran on the host"
    # The installed CLI took the call (in a sandbox of its own making, or with its error).
    assert "inside" in proc.stdout or "workspace" in proc.stderr, (proc.stdout, proc.stderr)

"""attack5: podman forms that pick the session's container (or image) without naming it.

ownctr.touches_own resolves the operands it sees and treats ``--latest``/``--all`` as naming
ours, but podman has more ways to choose targets with no operand at all:

- ``--filter``/``-f`` on rm, stop, start, restart, pause, unpause (``-f`` is --filter there,
  not --force): ``podman rm -f --filter label=org.workspace.session=sess-1`` removes the
  session's container from the host, unsandboxed (reproduced as wstest, rootless podman; the
  pause form stalls it where pausing works: rootful, cgroup v2);
- ``run``/``create --replace --name NAME``: removes the container called NAME (the session's)
  to make its own;
- ``rmi -a -f`` (``image rm --all --force``): removes every image and, with -f, every
  container using one: all sessions' containers (not run here: it would take the daemon's
  other users' containers too).

Each is an allowed option (policies.CTR_FLAGS/CTR_VALUES/CTR_SHORT_*), so the whole line
passes through to the host. Class: an option that selects targets other than by operand.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container.base import resource_name
from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.as_user]   # rootless podman too


def _sandboxed(answer) -> bool:
    return answer.decision == "deny" or (
        "updatedInput" in answer.spec and "finish.sh" in answer.command)


@pytest.fixture(params=["podman"])
def podman_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def _session(project: Path, tmp_path: Path) -> Claude:
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = "podman"
    assert claude.start().returncode == 0
    assert claude.bash("true").returncode == 0          # the session's container is up
    return claude


def test_forms_selecting_by_filter_replace_or_all_are_sandboxed(project: Path, tmp_path: Path,
                                                                 podman_engine: str):
    claude = _session(project, tmp_path)
    ours = resource_name("sess-1")
    image = "workspace-sandbox:latest"
    forms = ["podman rm -f --filter label=org.workspace.session=sess-1",
             f"podman stop -f name={ours}", "podman pause --filter=label=org.workspace.session",
             "podman restart --filter name=workspace-", "podman start -f name=workspace-",
             "podman unpause -f label=org.workspace.session",
             f"podman container stop --filter name={ours}",
             f"podman run --rm --replace --name {ours} {image} true",
             f"podman create --replace --name={ours} {image}",
             "podman rmi -a -f", "podman image rm --all --force"]
    passed = [form for form in forms if not _sandboxed(claude.pre_bash(form))]
    assert not passed, f"passed through to the host: {passed}"


def test_filter_form_does_not_remove_the_sessions_container(project: Path, tmp_path: Path,
                                                            podman_engine: str):
    """Run for real: the filter matches this test's state directory's containers only."""
    claude = _session(project, tmp_path)
    ours = resource_name("sess-1")
    state = Path(os.environ["XDG_STATE_HOME"]) / "workspace"
    claude.bash(f"podman rm -f --filter label=org.workspace.state={state}")
    alive = subprocess.run(["podman", "container", "exists", ours], check=False).returncode == 0
    assert alive, "an unsandboxed podman rm --filter removed the session's container"

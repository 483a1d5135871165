"""attack4: podman's ``--latest`` names the session's own container without naming it.

``--latest`` is an allowed passthrough flag (policies.CTR_FLAGS). With it podman takes no
container operand and acts on the container created last: the session's own, the sandbox.
ownctr.touches_own resolves only the operands it sees, so ``podman exec --latest -u 0 sh -c
...`` (the first operand, ``sh``, is no container) and ``podman rm -f --latest`` (no operand)
pass through: the exec runs on the host side of the boundary as the container's root, which
in volume mode still holds CAP_SYS_ADMIN (see test_passthrough_own_container.py): it unmounts
the hide mask over the real project's bind, reads the hidden file, remounts the bind
read-write and writes the real project, with no review and no commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import using_engine

pytestmark = [pytest.mark.engine, pytest.mark.as_user]   # rootless podman too

ESCAPE = ('podman exec --latest -u 0 sh -c "umount /run/ws-lower/secret.env; '
          'cat /run/ws-lower/secret.env; mount -o remount,rw,bind /run/ws-lower && '
          'echo escaped > /run/ws-lower/ESCAPED"')


def _sandboxed(answer) -> bool:
    """Denied, or rewritten to run through the engine's entry (a passthrough answer is the
    command itself, re-quoted)."""
    return answer.decision == "deny" or (
        "updatedInput" in answer.spec and "finish.sh" in answer.command)


@pytest.fixture(params=["podman-volume"])
def volume_engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                  ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


UNNAMED = [ESCAPE, "podman rm -f --latest", "podman stop --latest", "podman kill --latest",
           "podman container rm -f --latest", "podman stop --all", "podman rm -af", "podman kill -a",
           "podman pause --all", "podman volume rm --all --force", "docker exec -l c true",
           "podman restart -l", "docker container stop -a"]


def test_forms_acting_on_the_latest_or_all_containers_are_sandboxed(project: Path, tmp_path: Path,
                                                                    volume_engine: str):
    """A form that does not name its target is judged as if it named the session's own
    (never run here: the latest container may be another run's)."""
    claude = Claude(project, tmp_path)
    claude.env["WORKSPACE_ENGINE"] = "podman"
    assert claude.start().returncode == 0
    assert claude.bash("true").returncode == 0    # the session's container is up, the latest
    for command in UNNAMED:
        answer = claude.pre_bash(command)
        assert _sandboxed(answer), f"passed through to the host: {command}: {answer.stdout}"
    # (operands with a non-hex letter: "c" alone is an id prefix, maybe of a workspace container)
    for command in ("podman ps -a", "podman logs other-ctr", "docker exec other-ctr ls -a"):
        answer = claude.pre_bash(command)    # still passes: a listing; a command's own -a
        assert not _sandboxed(answer), command

"""Issue 20, attack pass 7: gc removes only containers it can prove are its own.

A label is anyone's to write (a newline included), so gc reads the containers of its state
directory in a form no value can forge (``ps -q`` ids, then ``inspect`` as JSON) and removes
one only when its state label is this state directory exactly, its session label is an id
and its name is the one this state directory gives that session's container. Both engines
(podman's template spells labels differently): a forged row naming another container, a
label pointing at a gone session on a container named otherwise (gc used to remove both's
targets), and the control: this state directory's container of a gone session goes.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from manager.engines.container.base import resource_name
from manager.session import paths
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

IMAGE = "workspace-sandbox:latest"


def create(cli: str, name: str, session: str) -> str:
    return subprocess.run([cli, "create", "--name", name, "--label",
                           f"org.workspace.state={paths.state_home()}", "--label",
                           f"org.workspace.session={session}", IMAGE, "true"],
                          check=True, capture_output=True, text=True, timeout=120).stdout.strip()


def names(cli: str, ids: list[str]) -> set[str]:
    out = subprocess.run([cli, "ps", "-a", "--format", "{{.ID}}"], capture_output=True,
                         text=True, check=True).stdout.split()
    return {i for i in ids if any(i.startswith(o) or o.startswith(i) for o in out)}


@pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)
def test_gc_removes_only_what_it_can_prove(engine_name: str, ws, project: Path):  # noqa: F811
    cli = engine_cli(engine_name)
    tag = uuid.uuid4().hex[:8]
    victim = subprocess.run([cli, "create", "--name", f"users-{tag}", IMAGE, "true"],
                            check=True, capture_output=True, text=True).stdout.strip()
    made = {
        "victim": victim,
        "forger": create(cli, f"forger-{tag}", f"zz\n{victim[:12]} users-{tag} ghost"),
        "misnamed": create(cli, f"misnamed-{tag}", f"gone-{tag}"),
        "ours": create(cli, resource_name(f"gone2-{tag}"), f"gone2-{tag}"),
    }
    try:
        assert ws("gc").returncode == 0
        left = names(cli, list(made.values()))
        kept = {what: ident in left for what, ident in made.items()}
        assert kept == {"victim": True, "forger": True, "misnamed": True, "ours": False}, kept
    finally:
        for ident in made.values():   # one by one: podman removes none when one is gone
            subprocess.run([cli, "rm", "-f", ident], capture_output=True)

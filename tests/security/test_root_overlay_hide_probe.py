"""Attack pass 8: run by root, the overlay engine's hide masks come off with one ``umount``,
and ``workspace doctor`` still says hiding holds.

The holder mounts the masks inside the sandbox's mount namespace, which the call's root owns
(every id mapped to itself, all capabilities in that user namespace): nothing locks them, unlike
/proc and /sys, which the holder makes read-only in a namespace of the host's user namespace
first so the kernel locks them in the copy. ``umount /the/hidden/path; cat /the/hidden/path``
reads the secret (also the state directory, always hidden: the service's tokens). docs/security.md
lists this under "not defended", but doctor's confinement probe tries cat, python, links and
/proc roots, never ``umount``, and reports ``held``: the user is told their secrets are hidden
from a command that reads them with one line. Rule broken: doctor does not report "held" when a
sandboxed command can read the hidden path (and hidden paths' content is never readable inside).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import Runner

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET-A8\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(f"hide: [{secret}]\n")
    return secret


@pytest.mark.usefixtures("overlay_engine")
def test_doctor_does_not_say_held_where_root_takes_a_mask_off(ws: Runner, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    read = ws("run", "--", "sh", "-c", f"umount {secret}; cat {secret}").stdout
    doctor = json.loads(ws("doctor", "--engine", "overlay", "--json").stdout)["hide"]
    assert "TOPSECRET-A8" in read, read   # the gap this test holds doctor to (below)
    assert doctor["held"] is False and "unmounted the mask" in doctor["detail"], doctor


@pytest.mark.usefixtures("overlay_engine")
@pytest.mark.xfail(strict=True, reason="not defended yet (docs/security.md): the masks are made "
                   "in the namespace a root call is root of; locking them needs them made in a "
                   "mount namespace of the host's user namespace before the sandbox's is copied")
def test_root_cannot_unmount_a_mask(ws: Runner, tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    read = ws("run", "--", "sh", "-c", f"umount {secret}; cat {secret}").stdout
    assert "TOPSECRET-A8" not in read, read

"""Attack pass 8: run by root, the overlay engine's hide masks came off with one ``umount``,
and ``workspace doctor`` still said hiding holds.

The holder mounts the masks inside the sandbox's mount namespace, which the call's root owns
(every id mapped to itself, all capabilities in that user namespace): nothing locks them, unlike
/proc and /sys, which the holder makes read-only in a namespace of the host's user namespace
first so the kernel locks them in the copy. ``umount /the/hidden/path; cat /the/hidden/path``
reads the secret (also the state directory, always hidden: the service's tokens). docs/security.md
lists this under "not defended", but doctor's confinement probe tries cat, python, links and
/proc roots, never ``umount``, and reports ``held``: the user is told their secrets are hidden
from a command that reads them with one line. Rule broken: doctor does not report "held" when a
sandboxed command can read the hidden path (and hidden paths' content is never readable inside).

The doctor's probe was fixed first (it tries umount); then the rule itself: no mount of the
sandbox's tree shows a hidden path's content to begin with (holder/masklayer.py), so taking
the masks off, or any mount above them, uncovered an empty placeholder. Since attack pass 11
calls run in a view nested in the holder's user namespace (holder/views.py): nothing comes
off at all, the kernel locks every mount a call inherits.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from manager.engines.overlay import ids as overlay_ids
from tests.conftest import Runner
from tests.engines import accounts
from tests.engines.test_overlay_user import _path_without

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]


def _secret(tmp_path: Path) -> Path:
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET-A8\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(f"hide: [{secret}]\n")
    return secret


# Take off every mount at a hidden path or above it, deepest first, again and again while
# one comes off, and read the paths after each round: a root call may unmount what it likes.
UNMOUNT_ALL = r"""
cat "$1" "$2/key" 2>/dev/null
for round in 1 2 3 4 5 6; do
    gone=
    for point in $(awk '{print $2}' /proc/self/mounts | sort -r); do
        case "$1/ $2/" in *"$point"/*)
            umount "$point" 2>/dev/null && gone=1 && cat "$1" "$2/key" 2>/dev/null ;;
        esac
    done
    [ -n "$gone" ] || break
done
echo rounds $round
"""


def _secrets(tmp_path: Path) -> tuple[Path, Path]:
    secret = tmp_path / "secret"
    secret.write_text("TOPSECRET-A8\n")
    secret_dir = tmp_path / "secret.d"
    secret_dir.mkdir()
    (secret_dir / "key").write_text("TOPSECRET-DIR\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(f"hide: [{secret}, {secret_dir}]\n")
    return secret, secret_dir


@pytest.mark.usefixtures("overlay_engine")
def test_root_cannot_unmount_its_way_to_a_hidden_path(ws: Runner, tmp_path: Path) -> None:
    """Neither the masks nor any mount above them come off (locked): the secrets unread."""
    secret, secret_dir = _secrets(tmp_path)
    read = ws("run", "--", "sh", "-c", UNMOUNT_ALL, "sh", str(secret), str(secret_dir)).stdout
    assert "TOPSECRET" not in read and "rounds" in read, read
    assert "rounds 1" in read, f"a mount came off: the view's mounts are not locked: {read}"
    doctor = json.loads(ws("doctor", "--engine", "overlay", "--json").stdout)["hide"]
    assert doctor["held"] is True, doctor


def test_nor_without_subordinate_ids(tmp_path: Path) -> None:
    """An ordinary user without subordinate ids (a single mapping): calls are the
    namespace's root there too."""
    account = accounts.make("ordinary", tmp_path)
    try:
        secret, secret_dir = account.base / "secret", account.base / "secret.d"
        secret.write_text("TOPSECRET-A8\n")
        secret_dir.mkdir()
        (secret_dir / "key").write_text("TOPSECRET-DIR\n")
        account.chown(secret, secret_dir, secret_dir / "key")
        config = account.base / "config" / "workspace"
        config.mkdir()
        (config / "config.yaml").write_text(f"hide: [{secret}, {secret_dir}]\n")
        account.chown(config, config / "config.yaml")
        env = {"PATH": _path_without(account, "newuidmap", "newgidmap")}
        proc = account.ws("run", "--", "sh", "-c", UNMOUNT_ALL, "sh", str(secret),
                          str(secret_dir), env=env)
        assert overlay_ids.recorded(account.sandbox()).mode == "single"
        assert "TOPSECRET" not in proc.stdout and "rounds" in proc.stdout, proc
        assert "rounds 1" in proc.stdout, f"a mount came off: {proc.stdout}"
    finally:
        accounts.clean(account)

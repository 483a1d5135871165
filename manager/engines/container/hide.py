"""``hide`` (:mod:`manager.hide`) on the container engines: a mask over each hidden path
that a mounted level (the project, $HOME, /tmp) would show.

A hidden directory gets an empty read-only directory bound over it, anything else an
empty read-only file: the command sees it empty and cannot write there. The engines
order mounts by destination, so a mask lands on the level below it. What no level
mounts is the image's and holds nothing of the host's. A mount of the level's own
entry at the same place (rootless podman shows $HOME entry by entry) is dropped: the
mask replaces it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from manager import hide
from manager.config import Config
from manager.session.store import Session

MASKS = "hidden"   # in the sandbox: the empty directory and file bound over hidden paths


def masked(config: Config, session: Session, options: dict[str, Any],
           shown: list[str]) -> dict[str, Any]:
    """``run`` options with a read-only mask over every hidden path within ``shown``."""
    found = [t for t in hide.targets(config, str(session.project))
             if any(hide.within(t.path, os.path.realpath(s)) for s in shown if s)]
    if not found:
        return options
    empty_dir, empty_file = _placeholders(session.sandbox / MASKS)
    dsts = [t.path for t in found]
    merged = dict(options)
    merged["volumes"] = [v for v in options.get("volumes") or [] if not _covered(v[1], dsts)]
    merged["mounts"] = [m for m in options.get("mounts") or [] if not _covered(_dst(m), dsts)]
    merged["volumes"] += [(str(empty_dir if t.is_dir else empty_file), t.path, "ro")
                          for t in found]
    return merged


def _placeholders(directory: Path) -> tuple[Path, Path]:
    empty_dir, empty_file = directory / "dir", directory / "file"
    empty_dir.mkdir(parents=True, exist_ok=True)
    if not empty_file.exists():
        empty_file.touch()
    empty_dir.chmod(0o555)
    empty_file.chmod(0o444)
    return empty_dir, empty_file


def _covered(dst: str, hidden: list[str]) -> bool:
    return any(hide.within(dst, h) for h in hidden)


def _dst(mount: list[str]) -> str:
    return next((f.removeprefix("dst=") for f in mount if f.startswith("dst=")), "")


# Volume mode: the project's overlay is mounted inside the container once it runs (over any
# mask made at its start), its lower layer is the project at LOWER_MOUNT: both are masked
# there, by the container's root, after the overlay.
MASK_SCRIPT = r'''set -e
e=/run/ws-hidden.empty; : > "$e"; chmod 444 "$e"
for a; do
    t=${a#?}
    [ -e "$t" ] || [ -L "$t" ] || continue
    if [ "${a%"${a#?}"}" = d ] && [ -d "$t" ]; then
        mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=0555 tmpfs "$t"
    else
        mount --bind "$e" "$t" && mount -o remount,bind,ro,nosuid,nodev,noexec "$t"
    fi
done'''


def mask_volume(client: Any, container: str, config: Config, session: Session) -> None:
    """Mask the hidden paths inside the project of a volume-mode container, at its own path
    and at the lower layer's; EngineUnavailable when one cannot be masked."""
    from manager.engines.container.cli import ContainerCommandError
    from manager.engines.container.upper import LOWER_MOUNT
    from manager.errors import EngineUnavailable

    project = os.path.realpath(session.project)
    words = []
    for target in hide.targets(config, str(session.project)):
        if hide.within(target.path, project) and target.path != project:
            rel = os.path.relpath(target.path, project)
            kind = "d" if target.is_dir else "f"
            words += [kind + os.path.join(session.project, rel), kind + os.path.join(LOWER_MOUNT, rel)]
    if not words:
        return
    try:
        client.exec_root(container, ["sh", "-c", MASK_SCRIPT, "sh", *words])
    except ContainerCommandError as exc:
        raise EngineUnavailable(f"the container of session {session.id} cannot hide "
                                f"{words[0][1:]}: {exc.stderr.strip()}",
                                hint="see `workspace doctor`") from exc

"""What a container session sees of the host besides the project: $HOME, /tmp, the CA bundle.

``$HOME`` and ``/tmp`` are overlaid like the project, each at its own path, with
persistent upper directories laid out as the overlay and try engines lay theirs
out: ``sandbox/upperdir/<absolute path>`` (work dirs ``sandbox/workdir/<n>``). Each
is one more :class:`Layer`, so review and commit read them as they read any
engine's upper dir (their changes are "elsewhere"). Only in host mode: volume mode
overlays the project alone.

Rootless podman (its overlays are made in a user namespace, where the kernel refuses a
lower dir with mounts below it): ``$HOME``, which holds podman's storage by default, is
overlaid entry by entry around it (:mod:`manager.engines.container.levels`: still one
layer, the entries' uppers inside ``$HOME``'s); podman's data directory is not shown.
``/tmp`` is overlaid whole or not at all (its entries are other users' and come and go):
not when something is mounted below it or podman's run root is in it (no
``XDG_RUNTIME_DIR`` nor /run/user/UID), with a note that names the fix.

The host's CA bundle (found as OpenSSL and Python find it) and any file a CA variable
of the caller names (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``, ...) are bind-mounted
read-only at their own paths, so TLS inside trusts what the host trusts and those
variables stay true inside.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager import ui
from manager.changes.meta import IdMap
from manager.changes.model import Layer
from manager.engines.container import levels as container_levels
from manager.engines.container.cli import ContainerCommandError
from manager.engines.container.levels import Plan
from manager.engines.container.levels import skeleton_dir
from manager.engines.container.upper import UNSAFE_PATH_CHARS
from manager.engines.overlay.holder import mountinfo
from manager.errors import EngineUnavailable
from manager.fs.util import write_json_atomic
from manager.session.paths import is_within as _within
from manager.session.store import Session

UPPERS = "upperdir"          # upperdir/<absolute path>: the uppers of $HOME and /tmp
WORKS = "workdir"            # workdir/<n>: their overlay work dirs
RECORD = "overlaid.json"     # every path ever overlaid in this session (its layers)
VISIBLE = "visible"          # host paths the container shows as they are (the entry script)
# Where OpenSSL-based tools look for the system bundle, most common first (Go's list).
CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt",              # Debian, Ubuntu, Arch, Alpine
              "/etc/pki/tls/certs/ca-bundle.crt",                # Fedora, RHEL
              "/etc/ssl/ca-bundle.pem",                          # openSUSE
              "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
              "/etc/ssl/cert.pem")                               # Alpine, macOS
# The image's own OpenSSL (Debian: every image is built FROM workspace-sandbox) reads this.
IMAGE_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
# Caller variables naming a CA file: passed through as they are, their file mounted.
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                "PIP_CERT", "GIT_SSL_CAINFO")


@dataclass(frozen=True)
class Overlaid:
    """One host directory overlaid at its own path (over itself, or a skeleton of it)."""

    target: str
    upper: Path
    work: Path
    lower: str     # the target itself, or (a level) its skeleton


def safe(path: str) -> bool:
    return not UNSAFE_PATH_CHARS & set(path)


def wanted(project: str, in_userns: bool = False, storage: tuple[str, ...] = (),
           points: set[str] | None = None) -> list[str]:
    """$HOME and /tmp, when they are real directories the mounts can name, not in the
    project, and not in each other ($HOME in /tmp: /tmp's overlay holds it; nested
    upper dirs would overlap).

    ``in_userns`` (rootless podman mounts the overlays in a user namespace): the kernel
    refuses a lower directory with mounts below it there (EINVAL: they would be revealed).
    $HOME is then shown entry by entry (:mod:`manager.engines.container.levels`); /tmp,
    whose entries are other users' and come and go, is left to the image, with a note
    that says why and the fix. That includes a /tmp holding the engine's ``storage``
    (podman's run root falls back to /tmp without a /run/user/UID): each container's
    files are mounted there as it starts.
    """
    found: list[str] = []
    for raw in (os.environ.get("HOME", ""), "/tmp"):
        path = os.path.realpath(raw) if raw else ""
        if (path and path != "/" and os.path.isdir(path) and safe(path)
                and not _within(path, project)):
            found.append(path)
    found = list(dict.fromkeys(found))
    if in_userns:
        found = _rootless_view(found, storage, points)
    return [p for p in found if not any(p != other and _within(p, other) for other in found)]


def _rootless_view(found: list[str], storage: tuple[str, ...],
                   points: set[str] | None) -> list[str]:
    """``found`` without what rootless podman cannot overlay at all, each with a note."""
    points = mount_points(_mountinfo_texts()) if points is None else points
    kept = []
    for path in found:
        reason = refusal(path, storage, points)
        if reason is None:
            kept.append(path)
        else:
            ui.err(f"workspace: {path} is not overlaid in this container: {reason}; "
                   "it is the image's")
    return kept


def refusal(path: str, storage: tuple[str, ...], points: set[str]) -> str | None:
    """Why rootless podman cannot overlay ``path`` ($HOME or /tmp) at all, if it cannot."""
    if path == "/tmp":
        return tmp_refused(path, storage, points)
    return next((f"it is in podman's storage ({h})"
                 for h in container_levels.hidden_roots(storage) if _within(path, h)), None)


def rootless_limits(storage: tuple[str, ...], points: set[str]) -> list[str]:
    """What rootless podman leaves out of $HOME and /tmp here, each with why (doctor)."""
    home = os.path.realpath(os.environ.get("HOME", "") or "/")
    found = []
    refused = {p: refusal(p, storage, points) for p in dict.fromkeys([home, "/tmp"])}
    for path, reason in refused.items():
        if reason is not None:
            found.append(f"{path} is not overlaid (the image's): {reason}")
    if refused[home] is None and not (_within(home, "/tmp") and refused["/tmp"] is None):
        shown = container_levels.plan(home, points, container_levels.hidden_roots(storage))
        if shown.levels:
            why = "podman's storage is in it" if _holding(home, storage) else \
                "something is mounted below it"
            found.append(f"{home} is overlaid entry by entry ({why})")
        found += [f"{p} is not shown: {why}" for p, why in shown.hidden]
        found += [f"{p} is read-only (a file larger than {container_levels.COPY_LIMIT >> 20} "
                  "MiB)" for p in shown.readonly]
    return found


def tmp_refused(path: str, storage: tuple[str, ...], points: set[str]) -> str | None:
    """Why rootless podman cannot overlay /tmp (with the fix), or None when it can.

    ``storage``: (graph root, run root), as :func:`engine_storage` gives them."""
    run_root = storage[1:2]
    held = _holding(path, run_root) or _holding(path, storage)
    if held is not None and held in run_root:
        return (f"podman's run root {held} is below it, where each container's run-time "
                "files are mounted (podman puts it in /tmp when XDG_RUNTIME_DIR is unset and "
                "/run/user/UID is missing: su, runuser, cron). Fix: set "
                "XDG_RUNTIME_DIR=/run/user/$(id -u) (`loginctl enable-linger USER` keeps that "
                "directory), or runroot in ~/.config/containers/storage.conf outside /tmp")
    if held is not None:
        return (f"podman's storage {held} is below it, where each container's files are "
                "mounted. Fix: graphroot in ~/.config/containers/storage.conf outside /tmp")
    below = sorted(p for p in points if p.startswith(path.rstrip("/") + "/"))
    if below:
        return (f"something is mounted below it ({below[0]}"
                f"{f' and {len(below) - 1} more' if len(below) > 1 else ''}), which rootless "
                "podman cannot overlay")
    return None


def _refuse_a_project_holding(project: str, storage: tuple[str, ...]) -> None:
    """A project holding podman's storage (a session started in $HOME) cannot be overlaid
    under rootless podman: said plainly, not as podman's `invalid argument`."""
    held = _holding(project, storage)
    if held is not None:
        raise EngineUnavailable(
            f"{project} holds podman's own storage ({held}), where rootless podman mounts each "
            "container's files: it cannot overlay it as the project",
            "start the session in a project directory below it, choose another engine "
            "(`engine: overlay`), or move podman's storage out of it (rootless_storage_path in "
            "containers-storage.conf)")


def _holding(path: str, storage: tuple[str, ...]) -> str | None:
    """The first of the engine's ``storage`` roots at or below ``path``."""
    return next((s for s in storage if _within(s, path)), None)


def engine_storage(engine: Any) -> tuple[str, ...]:
    """Where podman keeps its containers' files (graph root, run root); none when it cannot
    say (the overlays are then tried as they are, and a failure shows podman's error)."""
    try:
        out = engine.client.run([engine.client.path(), "info", "--format",
                                 "{{.Store.GraphRoot}}\n{{.Store.RunRoot}}"])
    except (OSError, subprocess.SubprocessError, ContainerCommandError):
        return ()
    return tuple(os.path.realpath(line) for line in out.splitlines() if line.startswith("/"))


def _mountinfo_texts() -> list[str]:
    """The mount table every container's namespace starts from: that of rootless podman's
    pause process (a copy made when it started), else ours (podman copies it now).

    Its pid file is in podman's tmp dir: under $XDG_RUNTIME_DIR, else /run/user/UID when
    that exists (podman's choice without the variable), else /tmp/podman-run-UID.
    """
    uid = os.getuid()
    runtimes = [os.environ.get("XDG_RUNTIME_DIR", ""), f"/run/user/{uid}", f"/tmp/podman-run-{uid}"]
    for runtime in dict.fromkeys(r for r in runtimes if r):
        try:
            pid = int(Path(runtime, "libpod/tmp/pause.pid").read_text().split()[0])
            return [mountinfo.read(pid)]
        except (OSError, ValueError, IndexError):
            continue
    return [mountinfo.read()]


def rootless_points() -> set[str]:
    """Mount points below which rootless podman's overlays cannot have a lower dir."""
    return mount_points(_mountinfo_texts())


def mount_points(texts: list[str]) -> set[str]:
    """Mount points in mountinfo texts (field 5, octal escapes decoded)."""
    return {point for text in texts for point in mountinfo.points(text)}


def mounts_below(path: str, points: set[str]) -> bool:
    prefix = path.rstrip("/") + "/"
    return any(p.startswith(prefix) for p in points)


def overlaid(session: Session, targets: list[str],
             plans: dict[str, Plan] | None = None) -> list[Overlaid]:
    """The overlays of ``targets`` (each of a planned one's mounts: levels first), their
    uppers and work dirs made, and the targets recorded as the session's layers.

    An upper root takes its real directory's mode (and owner, as root): the overlay's
    root shows the upper root's, and ``/tmp`` must stay sticky and world-writable.
    """
    recorded = recorded_targets(session)
    for target in targets:
        if target not in recorded:
            recorded.append(target)
    write_json_atomic(session.sandbox / RECORD, recorded, indent=None, sort_keys=False)
    result = []
    for target in targets:
        index = recorded.index(target)
        shown = (plans or {}).get(target)
        skipped: list[str] = []
        for k, (path, level) in enumerate(shown.mounts() if shown else [(target, False)]):
            upper = _upper(session, path)
            if k and (any(_within(path, s) for s in skipped) or not _plain_dir(upper)):
                skipped.append(path)   # the sandbox replaced it: its level shows its upper
                continue
            work = session.sandbox / WORKS / (f"{index}.{k}" if k else str(index))
            work.mkdir(parents=True, exist_ok=True)
            _make_upper(upper, path)
            lower = str(skeleton_dir(session.sandbox, path)) if level else path
            result.append(Overlaid(path, upper, work, lower))
    return result


def _upper(session: Session, path: str) -> Path:
    return session.sandbox / UPPERS / path.lstrip("/")


def _plain_dir(upper: Path) -> bool:
    """Absent, or a directory that is not opaque: an entry's overlay can stand on it."""
    if not os.path.lexists(upper):
        return True
    if upper.is_symlink() or not upper.is_dir():
        return False
    from manager.changes.model import OPAQUE_XATTRS

    for name in OPAQUE_XATTRS:
        with contextlib.suppress(OSError):
            if os.getxattr(upper, name) == b"y":
                return False
    return True


def _make_upper(upper: Path, real: str) -> None:
    if upper.is_dir():
        return
    upper.mkdir(parents=True)
    st = os.stat(real)
    if os.geteuid() == 0:
        os.chown(upper, st.st_uid, st.st_gid)
    os.chmod(upper, st.st_mode & 0o7777)


def recorded_targets(session: Session) -> list[str]:
    try:
        data = json.loads((session.sandbox / RECORD).read_text())
    except (OSError, ValueError):
        return []
    return [t for t in data if isinstance(t, str)] if isinstance(data, list) else []


def layers(session: Session, ids: IdMap | None = None) -> list[Layer]:
    """The extra layers: every directory this session ever overlaid (its changes stay
    pending whatever $HOME the next call has). An entry overlaid on its own within a
    level is no layer: its upper is inside the level's, where its changes are read.
    ``ids``: the container's id maps (its owners read as the project's do)."""
    container_levels.remember_births(session.sandbox, UPPERS)
    return [Layer(upper=session.sandbox / UPPERS / t.lstrip("/"), target=Path(t), ids=ids)
            for t in recorded_targets(session)]


def work_dirs(session: Session) -> list[Path]:
    works = session.sandbox / WORKS
    return sorted(works.iterdir()) if works.is_dir() else []


def ca_files() -> list[str]:
    """Host CA files to mount read-only at their own paths: the system bundle, and every
    existing file a CA variable names."""
    found = []
    bundle = system_bundle()
    if bundle:
        found.append(bundle)
    for name in CA_VARIABLES:
        value = os.environ.get(name, "")
        if value.startswith("/") and os.path.isfile(value) and safe(value) and value not in found:
            found.append(value)
    return found


def system_bundle() -> str | None:
    """The bundle OpenSSL uses here: $SSL_CERT_FILE, OpenSSL's default file, the usual paths."""
    import ssl

    env = os.environ.get("SSL_CERT_FILE", "")
    candidates = [env] if env else []
    candidates += [ssl.get_default_verify_paths().openssl_cafile, *CA_BUNDLES]
    for path in candidates:
        if path and os.path.isfile(path) and safe(path):
            return path
    return None


def ca_env(files: list[str]) -> dict[str, str]:
    """``SSL_CERT_FILE`` inside only when the image would not read the host's bundle anyway."""
    if not files or os.environ.get("SSL_CERT_FILE") or files[0] == IMAGE_BUNDLE:
        return {}
    return {"SSL_CERT_FILE": files[0]}


def add_view(engine: Any, session: Session, options: dict[str, Any],
             calls: str) -> tuple[dict[str, Any], list[str]]:
    """``run`` options with $HOME, /tmp and the CA files added (host mode), and which of
    $HOME and /tmp are overlaid."""
    merged: dict[str, Any] = {key: list(value) if isinstance(value, list) else value
                              for key, value in options.items()}
    in_userns = _in_userns(engine)
    storage = engine_storage(engine) if in_userns else ()
    _refuse_a_project_holding(session.project, storage)
    points = mount_points(_mountinfo_texts()) if in_userns else set()
    targets = wanted(session.project, in_userns, storage, points)
    plans = _plans(session, targets, points, storage) if in_userns else {}
    items = overlaid(session, targets, plans)
    for item in items:
        extra = engine.mount_options(item.lower, str(item.upper), str(item.work), calls,
                                     item.target)
        for key, value in extra.items():
            have = merged.setdefault(key, [])
            have.extend(v for v in value if v not in have)
    files = ca_files()
    levels = {item.target for item in items if item.lower != item.target}
    readonly = [f for shown in plans.values() for f in shown.readonly
                if os.path.dirname(f) in levels and not os.path.lexists(_upper(session, f))]
    merged.setdefault("volumes", []).extend((f, f, "ro") for f in [*readonly, *files])
    env = ca_env(files)
    if env:
        merged["envs"] = {**dict(merged.get("envs") or {}), **env}
    write_visible(session, [*targets, *files])
    return merged, targets


def _plans(session: Session, targets: list[str], points: set[str],
           storage: tuple[str, ...]) -> dict[str, Plan]:
    """$HOME shown entry by entry where something is mounted below it (podman's storage,
    by default): its skeletons made, and a note for each entry not shown."""
    home = os.path.realpath(os.environ.get("HOME", "") or "/")
    if home not in targets:
        return {}
    shown = container_levels.plan(home, points, container_levels.hidden_roots(storage),
                                  session.project)
    container_levels.build(session.sandbox, shown)
    for path, why in shown.hidden:
        ui.err(container_levels.hidden_note(path, why))
    return {home: shown}


def _in_userns(engine: Any) -> bool:
    from manager.engines.container.engine import rootless_podman

    return str(engine.name) == "podman" and rootless_podman()


def write_visible(session: Session, paths: list[str]) -> None:
    """For the entry script: host paths shown as they are inside (a variable naming a path
    elsewhere on the host is not passed: it would name nothing, or the image's file)."""
    shown = [session.project, *paths]
    (session.sandbox / VISIBLE).write_text("".join(p + "\n" for p in shown))

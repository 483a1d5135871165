"""What a container session sees of the host besides the project: $HOME, /tmp, the CA bundle.

``$HOME`` and ``/tmp`` are overlaid like the project, each at its own path, with
persistent upper directories laid out as the overlay and try engines lay theirs
out: ``sandbox/upperdir/<absolute path>`` (work dirs ``sandbox/workdir/<n>``). Each
is one more :class:`Layer`, so review and commit read them as they read any
engine's upper dir (their changes are "elsewhere"). Only in host mode: volume mode
overlays the project alone.

The host's CA bundle (found as OpenSSL and Python find it) and any file a CA variable
of the caller names (``SSL_CERT_FILE``, ``REQUESTS_CA_BUNDLE``, ...) are bind-mounted
read-only at their own paths, so TLS inside trusts what the host trusts and those
variables stay true inside.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manager.changes.model import Layer
from manager.engines.container_cli import ContainerCommandError
from manager.engines.container_upper import UNSAFE_PATH_CHARS
from manager.errors import EngineUnavailable
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
    """One host directory overlaid at its own path."""

    target: str
    upper: Path
    work: Path


def safe(path: str) -> bool:
    return not UNSAFE_PATH_CHARS & set(path)


def wanted(project: str, in_userns: bool = False, storage: tuple[str, ...] = ()) -> list[str]:
    """$HOME and /tmp, when they are real directories the mounts can name, not in the
    project, and not in each other ($HOME in /tmp: /tmp's overlay holds it; nested
    upper dirs would overlap).

    ``in_userns`` (rootless podman mounts the overlays in a user namespace): the kernel
    refuses a lower directory with mounts below it there (EINVAL: they would be revealed),
    so such a directory stays the image's, with a note. That includes one holding the
    engine's ``storage`` (podman's default, ~/.local/share/containers/storage, is in
    $HOME): the container's own files are mounted there as it starts.
    """
    found: list[str] = []
    for raw in (os.environ.get("HOME", ""), "/tmp"):
        path = os.path.realpath(raw) if raw else ""
        if (path and path != "/" and os.path.isdir(path) and safe(path)
                and not _within(path, project)):
            found.append(path)
    found = [p for p in dict.fromkeys(found)
             if not any(p != other and _within(p, other) for other in found)]
    if in_userns:
        points = mount_points(_mountinfo_texts())
        for path in [p for p in found if mounts_below(p, points)]:
            print(f"workspace: {path} is not overlaid in this container: something is mounted "
                  "below it, which rootless podman cannot overlay; it is the image's",
                  file=sys.stderr)
            found.remove(path)
        for path, store in [(p, _holding(p, storage)) for p in found]:
            if store is None:
                continue
            print(f"workspace: {path} is not overlaid in this container: podman keeps its "
                  f"containers' files below it ({store}), which rootless podman cannot overlay; "
                  "it is the image's (to have it overlaid, move podman's storage out of it: "
                  "rootless_storage_path in containers-storage.conf)", file=sys.stderr)
            found.remove(path)
    return found


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
    """Where podman keeps its containers' files (graph and run roots); none when it cannot
    say (the overlays are then tried as they are, and a failure shows podman's error)."""
    try:
        out = engine.client.run([engine.client.path(), "info", "--format",
                                 "{{.Store.GraphRoot}}\n{{.Store.RunRoot}}"])
    except (OSError, subprocess.SubprocessError, ContainerCommandError):
        return ()
    return tuple(os.path.realpath(line) for line in out.splitlines() if line.startswith("/"))


def _mountinfo_texts() -> list[str]:
    """The mount table every container's namespace starts from: that of rootless podman's
    pause process (a copy made when it started), else ours (podman copies it now)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/tmp/podman-run-{os.getuid()}"
    try:
        pid = int(Path(runtime, "libpod/tmp/pause.pid").read_text().split()[0])
        return [Path(f"/proc/{pid}/mountinfo").read_text()]
    except (OSError, ValueError, IndexError):
        return [Path("/proc/self/mountinfo").read_text()]


def mount_points(texts: list[str]) -> set[str]:
    """Mount points in mountinfo texts (field 5, octal escapes decoded)."""
    points = set()
    for text in texts:
        for line in text.splitlines():
            fields = line.split()
            if len(fields) > 4:
                points.add(re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4]))
    return points


def mounts_below(path: str, points: set[str]) -> bool:
    prefix = path.rstrip("/") + "/"
    return any(p.startswith(prefix) for p in points)


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def overlaid(session: Session, targets: list[str]) -> list[Overlaid]:
    """The uppers and work dirs of ``targets``, made, and recorded as the session's layers.

    An upper root takes its real directory's mode (and owner, as root): the overlay's
    root shows the upper root's, and ``/tmp`` must stay sticky and world-writable.
    """
    recorded = recorded_targets(session)
    for target in targets:
        if target not in recorded:
            recorded.append(target)
    (session.sandbox / RECORD).write_text(json.dumps(recorded) + "\n")
    result = []
    for target in targets:
        upper = session.sandbox / UPPERS / target.lstrip("/")
        work = session.sandbox / WORKS / str(recorded.index(target))
        work.mkdir(parents=True, exist_ok=True)
        if not upper.is_dir():
            upper.mkdir(parents=True)
            st = os.stat(target)
            if os.geteuid() == 0:
                os.chown(upper, st.st_uid, st.st_gid)
            os.chmod(upper, st.st_mode & 0o7777)
        result.append(Overlaid(target, upper, work))
    return result


def recorded_targets(session: Session) -> list[str]:
    try:
        data = json.loads((session.sandbox / RECORD).read_text())
    except (OSError, ValueError):
        return []
    return [t for t in data if isinstance(t, str)] if isinstance(data, list) else []


def layers(session: Session) -> list[Layer]:
    """The extra layers: every directory this session ever overlaid (its changes stay
    pending whatever $HOME the next call has)."""
    return [Layer(upper=session.sandbox / UPPERS / t.lstrip("/"), target=Path(t))
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
    targets = wanted(session.project, in_userns, storage)
    for item in overlaid(session, targets):
        extra = engine.mount_options(item.target, str(item.upper), str(item.work), calls)
        for key, value in extra.items():
            have = merged.setdefault(key, [])
            have.extend(v for v in value if v not in have)
    files = ca_files()
    merged.setdefault("volumes", []).extend((f, f, "ro") for f in files)
    env = ca_env(files)
    if env:
        merged["envs"] = {**dict(merged.get("envs") or {}), **env}
    write_visible(session, [*targets, *files])
    return merged, targets


def _in_userns(engine: Any) -> bool:
    from manager.engines.container import rootless_podman

    return str(engine.name) == "podman" and rootless_podman()


def write_visible(session: Session, paths: list[str]) -> None:
    """For the entry script: host paths shown as they are inside (a variable naming a path
    elsewhere on the host is not passed: it would name nothing, or the image's file)."""
    shown = [session.project, *paths]
    (session.sandbox / VISIBLE).write_text("".join(p + "\n" for p in shown))

"""Which image a container session runs: ``container.image``, else the project's devcontainer.

An image set anywhere (user config, a trusted ``.workspace.yaml``, ``WORKSPACE_CONTAINER__IMAGE``,
a flag) wins. Otherwise the project's ``.devcontainer/devcontainer.json`` (or
``.devcontainer.json``) names it: ``image``, or ``build`` (``dockerfile``, ``context``,
``args``, ``target``), built once into ``workspace-devcontainer:<hash of the build
inputs>`` and reused while they are unchanged.

The file is in the project, which the agent can write (its Write tool acts on the real
project), and it decides what every call runs in. So it is read from the real project
on the host, never from the sandbox, and used only once the user trusted that exact
content (with its Dockerfile) through ``workspace config trust``, like the settings of
``.workspace.yaml`` that weaken the sandbox; a changed file is ignored until trusted
again (the session then runs the default image, with a warning).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from manager import config as config_mod
from manager import ui
from manager.config import Config
from manager.engines.container.cli import ContainerClient
from manager.errors import EngineUnavailable

CANDIDATES = (".devcontainer/devcontainer.json", ".devcontainer.json")
TAG = "workspace-devcontainer"
BUILD_TIMEOUT = 3600


@dataclass(frozen=True)
class Devcontainer:
    """What a devcontainer.json asks for: an image, or a build."""

    path: Path
    image: str = ""
    dockerfile: Path | None = None
    context: Path | None = None
    args: tuple[tuple[str, str], ...] = ()
    target: str = ""

    def digest(self) -> str:
        """What the user trusts: the file as written, and the Dockerfile it builds."""
        h = hashlib.sha256(self.path.read_bytes())
        if self.dockerfile is not None:
            h.update(b"\0dockerfile\0" + _read(self.dockerfile))
        return h.hexdigest()

    def tag(self) -> str:
        """The image: named, or the build's, named by the hash of the build's inputs."""
        if self.dockerfile is None:
            return self.image
        inputs = {"dockerfile": hashlib.sha256(_read(self.dockerfile)).hexdigest(),
                  "context": str(self.context), "args": list(self.args), "target": self.target}
        return f"{TAG}:{hashlib.sha256(json.dumps(inputs).encode()).hexdigest()[:16]}"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def find(project: Path) -> Path | None:
    for name in CANDIDATES:
        path = project / name
        if path.is_file():
            return path
    return None


def load(path: Path) -> Devcontainer:
    """Parse ``path`` (JSONC: comments, trailing commas) into what it asks for."""
    try:
        data = json.loads(strip_jsonc(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise EngineUnavailable(f"{path}: not valid JSON with comments: {exc}",
                                hint="fix it, or set container.image") from exc
    if not isinstance(data, dict):
        raise EngineUnavailable(f"{path}: expected an object")
    build = data.get("build")
    if not isinstance(build, dict):
        build = {"dockerfile": data["dockerFile"], "context": data.get("context", ".")} \
            if isinstance(data.get("dockerFile"), str) else None
    if build is not None and isinstance(build.get("dockerfile"), str):
        base = path.parent
        args = build.get("args") or {}
        if not isinstance(args, dict):
            raise EngineUnavailable(f"{path}: build.args must be an object")
        return Devcontainer(path, dockerfile=(base / build["dockerfile"]).resolve(),
                            context=(base / str(build.get("context") or ".")).resolve(),
                            args=tuple(sorted((str(k), str(v)) for k, v in args.items())),
                            target=str(build.get("target") or ""))
    if isinstance(data.get("image"), str) and data["image"]:
        return Devcontainer(path, image=data["image"])
    raise EngineUnavailable(f"{path} names no image: neither `image` nor `build.dockerfile`",
                            hint="add one, or set container.image")


def strip_jsonc(text: str) -> str:
    """JSON from JSONC: ``//`` and ``/* */`` comments and trailing commas removed,
    strings left as they are."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            out.append(" ")
        elif c in "}]":
            _drop_trailing_comma(out)
            out.append(c)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _drop_trailing_comma(out: list[str]) -> None:
    k = len(out) - 1
    while k >= 0 and out[k].isspace():
        k -= 1
    if k >= 0 and out[k] == ",":
        del out[k]


def explicit(config: Config) -> bool:
    """``container.image`` was set somewhere, not left at its default."""
    return config.sources.get("container.image", "default") != "default"


def runnable(configured: str, project: Path) -> list[str]:
    """Every image a session of ``project`` may run, as :func:`choose` names them:
    ``container.image`` and the project's devcontainer's (image or build tag), trusted or
    not (trusting it later must not trust an image replaced before). The passthrough judge
    keeps them workspace's own. Raises :class:`EngineUnavailable` when the devcontainer
    cannot be read (the caller then protects every image)."""
    path = find(project)
    return [configured] + ([load(path).tag()] if path is not None else [])


def choose(config: Config, project: Path) -> tuple[str, Devcontainer | None]:
    """(image, the trusted devcontainer that named it or None)."""
    path = None if explicit(config) else find(project)
    if path is None:
        return str(config["container.image"]), None
    spec = load(path)
    if not config_mod.is_trusted_digest(path, spec.digest()):
        ui.err(f"workspace: {path} is not trusted (it decides what commands run in): using "
               f"{config['container.image']}; read it, then `workspace config trust`")
        return str(config["container.image"]), None
    return spec.tag(), spec


def trust(project: Path, trusted: bool) -> tuple[Path, str | None] | None:
    """``workspace config trust``'s part: (the devcontainer, its recorded digest) or None."""
    path = find(project)
    if path is None:
        return None
    digest = load(path).digest() if trusted else None
    return path, config_mod.record_trust(path, digest)


def refuse_build_in_volume_mode(spec: Devcontainer | None) -> None:
    """Volume mode runs the image's own programs as root with CAP_SYS_ADMIN (the container's
    init, and the start that mounts its overlay) before any call drops it: the image must be
    one the agent cannot have shaped. A build trusts the devcontainer.json and Dockerfile,
    but reads its context, the project, which the agent's Write tool writes (a ``COPY`` then
    ``RUN`` of a script, ``pip install .``, ``make install`` run the agent's code into the
    image). So a devcontainer build never runs in volume mode, whenever it was built."""
    if spec is None or spec.dockerfile is None:
        return
    raise EngineUnavailable(
        f"the project's devcontainer ({spec.path}) is built from the project, which the agent "
        f"can write, and volume mode runs its image's programs as root with CAP_SYS_ADMIN "
        f"while it mounts the sandbox: a devcontainer build does not run in volume mode",
        hint="build the image yourself from files you checked and set container.image in your "
             "own config, or name a ready image in devcontainer.json (\"image\"), or use "
             "container.upper: host where `workspace doctor` says it works")


def qualified(cli: str, image: str) -> str:
    """The name to ask the engine for: podman resolves a short name to *any* local image whose
    name ends in ``/NAME``, so workspace's own build tags go by their full local name."""
    if cli == "podman" and image.startswith(f"{TAG}:"):
        return f"localhost/{image}"
    return image


def require_resolved(client: ContainerClient, image: str) -> None:
    """The image podman resolves ``image`` to must carry that name as written (Docker Hub's
    or a local one), not another registry's that ends the same way: a passthrough tag made
    before a devcontainer named it would be run otherwise (attack pass 9)."""
    from manager.engines.container.refs import key

    names = client.image_names(image)
    if names is None or any(key(n) == key(image) for n in names):
        return
    raise EngineUnavailable(
        f"podman resolves {image} to {', '.join(names) or 'an unnamed image'}: another "
        f"registry's image, not the one named",
        hint="name the image fully (REGISTRY/NAME:TAG) in container.image or devcontainer.json")


def ensure(cli: str, image: str, spec: Devcontainer | None, network: bool) -> None:
    """Build a devcontainer's image unless it exists (same inputs, same tag: built once).

    The build's RUN steps get the network only with ``container.network``, as calls do.
    """
    if spec is None or spec.dockerfile is None or _exists(cli, image):
        return
    argv = ["-t", image, "-f", str(spec.dockerfile)]
    argv += [] if network else ["--network", "none"]
    for key, value in spec.args:
        argv += ["--build-arg", f"{key}={value}"]
    if spec.target:
        argv += ["--target", spec.target]
    ui.err(f"workspace: building {image} from {spec.path} (once)")
    env = dict(os.environ, DOCKER_BUILDKIT=os.environ.get("DOCKER_BUILDKIT", "0"))
    proc = ContainerClient(cli).build([*argv, str(spec.context)], env, BUILD_TIMEOUT)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise EngineUnavailable(f"{cli} could not build {spec.path}:\n{tail}",
                                hint="fix the Dockerfile (its image must be built FROM "
                                     "workspace-sandbox; RUN steps have no network unless "
                                     "container.network), or set container.image")


def _exists(cli: str, image: str) -> bool:
    return ContainerClient(cli).has_image(image)


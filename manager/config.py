"""Layered configuration: defaults < user < project < environment < flags.

Every value remembers where it came from, so ``workspace config`` can say why a
setting has the value it has. Files are read, never written (but the record of
trusted project files, below).

The project's ``.workspace.yaml`` is a file the agent can write (the client's
Write tool acts on the real project). The settings that would weaken the
sandbox (:data:`TRUST_REQUIRED`: what runs outside it, which engine, network)
are therefore taken from it only once the user trusted that exact content with
``workspace config trust``, which records its SHA-256 in the user's state; a
changed file is untrusted again until the user says so. Until then those
settings come from the user's config, the environment and flags, and
``workspace config`` shows them as ignored.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from manager.egress.setting import Network
from manager.egress.setting import narrows
from manager.errors import ConfigError
from manager.record import Record
from manager.record import Value
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    import builtins
    from typing import Any
    from typing import Final

PROJECT_FILE = paths.PROJECT_FILE
MAX_FILE_BYTES = 1 << 20   # a settings file is a few lines; the project's is the agent's to write
env_name = paths.env_name      # the rule lives in session/paths.py (the hooks use it too)
# Settings a project file sets only when trusted: each one can switch the sandbox off
# (passthrough, model bypass), pick a weaker or a different boundary (engine,
# try.path runs a program, image, upper dir), or open the network.
TRUST_REQUIRED = frozenset(("passthrough", "plugin.allow_model_bypass", "engine", "try.path",
                            "container.image", "container.network", "container.upper",
                            "container.host", "network"))
# ... but for these an untrusted file may still narrow what the rest allows.
NARROWING = {"network": narrows}
# Lists an untrusted project file may add to but not shorten (what the sandbox hides, what
# commit never writes: attack pass 25, the project file emptied the user's `exclude`).
ADD_ONLY = frozenset(("hide", "exclude"))
# What sandboxed commands cannot read unless the user's config says otherwise (manager.hide).
HIDE_DEFAULTS = ["~/.ssh", "~/.gnupg", "~/.aws", "~/.azure", "~/.config/gcloud", "~/.kube",
                 "~/.docker/config.json", "~/.netrc", "~/.git-credentials", "~/.config/gh",
                 "~/.pypirc", "~/.npmrc", "~/.mozilla", "~/.config/google-chrome",
                 "~/.config/chromium"]


class Option(Value):
    __slots__ = ("type", "default", "help", "choices")
    type: Final[builtins.type]
    default: Final[Any]
    help: Final[str]
    choices: Final[tuple[str, ...]]

    def __init__(self, type: builtins.type, default: Any, help: str, choices: tuple[str, ...] = ()) -> None:
        self.type = type
        self.default = default
        self.help = help
        self.choices = choices


# The engine setting's choices: auto, then auto's order (overlay before try: try runs the
# command as root in a chroot by its own design). engines/registry.py maps each to its class
# (config sits below engines: it names them, it does not load them).
ENGINES = ("auto", "overlay", "try", "podman", "docker")

# One table for every setting. Dotted names map to nested YAML mappings.
SCHEMA: dict[str, Option] = {
    "engine": Option(str, "auto", "sandbox engine", ENGINES),
    "exclude": Option(list, [], "glob patterns (absolute, or relative to the project) never committed"),
    "gc.max_age_days": Option(int, 14, "gc removes empty sessions idle this long even if alive"),
    "commit.wait_seconds": Option(float, 10.0, "commit and discard wait this long for a running "
                                  "command to end, then refuse (the session is busy)"),
    "overlay.idle_timeout_hours": Option(float, 12.0, "a namespace holder exits after this long idle"),
    "try.path": Option(str, "", "path to binpash/try (default: found on PATH)"),
    "network": Option(Network, "open", "what sandboxed commands reach: open, off, or a list of "
                      "hosts (host, host:port, *.domain, a preset: pypi, npm, github, crates, "
                      "go, rubygems, debian, ubuntu) through the session's proxy"),
    "container.image": Option(str, "workspace-sandbox:latest", "image for podman/docker sessions"),
    "container.network": Option(bool, False, "give container sessions network access (default: off)"),
    "container.memory": Option(str, "", "memory limit, e.g. 2g (empty: none)"),
    "container.pids": Option(int, 0, "process limit (0: none)"),
    "container.cpus": Option(float, 0.0, "CPU limit (0: none)"),
    "container.upper": Option(str, "auto", "where a container session's overlay lives: host (an "
                              "upper dir on the host), volume (a volume inside the engine, for "
                              "engines in a VM), auto (host where it works)",
                              ("auto", "host", "volume")),
    "container.host": Option(str, "", "the engine to run container sessions on: a host URL "
                             "(unix://, tcp://, ssh://; DOCKER_HOST/CONTAINER_HOST) or a docker "
                             "context / podman connection name (empty: the client's own choice)"),
    # Guard rails (docs/guardrails.md): the diff budget checked at Stop ...
    "budget.enabled": Option(bool, True, "check the diff budget at Stop/SubagentStop"),
    "budget.limit": Option(int, 300, "changes allowed since the baseline before Stop blocks"),
    "budget.metric": Option(str, "lines", "what counts: lines (weighted added+deleted) or files",
                            ("lines", "files")),
    "budget.weights.added": Option(float, 1.0, "weight of an added line"),
    "budget.weights.deleted": Option(float, 1.0, "weight of a deleted line"),
    "budget.weights.binary": Option(float, 10.0, "lines one changed binary file counts as"),
    "budget.subagents": Option(bool, True, "also check at SubagentStop"),
    "budget.max_blocks": Option(int, 1, "blocks per stop sequence (stop_hook_active)"),
    "budget.top_files": Option(int, 5, "biggest files named in the block reason"),
    # ... and checkpoints: shadow commits in a store of our own beside .git.
    "checkpoints.enabled": Option(bool, True, "record checkpoints (automatic at Stop, on demand)"),
    "checkpoints.auto": Option(bool, True, "take a checkpoint at each Stop when something changed"),
    "checkpoints.max_size_mb": Option(int, 512, "size cap of the checkpoint store (MB)"),
    "checkpoints.max_age_days": Option(float, 30.0, "`checkpoints prune` drops older streams"),
    "checkpoints.warn_other_sessions": Option(
        bool, False, "warn at prompt start when another session holds uncommitted checkpoints "
                     "on the same base commit"),
    "hide": Option(list, HIDE_DEFAULTS, "paths and globs sandboxed commands cannot read (~ and "
                   "$VAR expanded, relative: from the project); a project file adds to it"),
    "passthrough": Option(list, ["gh", "sudo", "docker", "podman"],
                          "commands the Claude plugin runs outside the sandbox (first word)"),
    "plugin.allow_model_bypass": Option(bool, False, "let the model run a Bash call unsandboxed "
                                        "(dangerouslyDisableSandbox, `workspace passthrough`)"),
}


class Config(Record):
    __slots__ = ("values", "sources", "ignored", "skipped")

    def __init__(self, values: dict[str, Any] | None = None, sources: dict[str, str] | None = None,
                 ignored: dict[str, str] | None = None, skipped: list[str] | None = None) -> None:
        self.values = values if values is not None else {}
        self.sources = sources if sources is not None else {}
        self.ignored = ignored if ignored is not None else {}   # key -> why (untrusted file)
        self.skipped = skipped if skipped is not None else []   # project-file errors passed over

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def user_config_files() -> list[Path]:
    """User-authored files, lowest precedence first (the rule: :func:`paths.config_files`)."""
    return [Path(f) for f in paths.config_files(None)]


# What else decides which files are read and what they say: where they are found.
INPUT_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "CLAUDE_PLUGIN_DATA")


def inputs(project: str) -> tuple[list[str], list[str]]:
    """Every file and environment variable :func:`load` reads for ``project`` (flags aside):
    a key of what a configuration was loaded from (``commands/run_lean``)."""
    files = [*paths.config_files(project), paths.trust_file()]
    return files, [*INPUT_ENV, *(env_name(key) for key in SCHEMA)]


def load(project: Path | None, flags: dict[str, Any] | None = None, *,
         lenient: bool = False) -> Config:
    """Settings, lowest precedence first. ``lenient`` (review, commit, discard): an error in
    the project's file, which the agent may write, skips that setting (or the whole file
    when it cannot be read as settings) and is noted in ``skipped``, never raised: nothing
    the agent writes may make review or commit impossible. The hook loads strictly (a
    setting it cannot read denies the call)."""
    config = Config()
    for key, option in SCHEMA.items():
        _set(config, key, option.default, "default")
    for path in user_config_files():
        _merge_file(config, path)
    if project is not None:
        _merge_project(config, project / PROJECT_FILE, config.skipped if lenient else None)
    _merge_env(config)
    for key, value in (flags or {}).items():
        if value is not None:
            _set(config, key, _coerce(key, value, "command line"), "command line")
    return config


def _set(config: Config, key: str, value: Any, source: str) -> None:
    config.values[key] = value
    config.sources[key] = source


def _merge_project(config: Config, path: Path, skipped: list[str] | None) -> None:
    try:
        text = _read_settings_file(path)   # once: the content judged trusted is the one merged
        if text is None:
            return
        digest = _digest(text.encode("utf-8"))
        _merge_text(config, path, text, None if is_trusted_digest(path, digest) else TRUST_REQUIRED,
                    skipped)
    except ConfigError as exc:   # unreadable as settings: nothing of it was merged
        if skipped is None:
            raise
        skipped.append(f"{exc}; the whole file is ignored")


def _merge_file(config: Config, path: Path, trusted: frozenset[str] | None = None) -> None:
    """Merge one file; keys in ``trusted`` (when given) are recorded as ignored instead."""
    text = _read_settings_file(path)
    if text is not None:
        _merge_text(config, path, text, trusted)


def _merge_text(config: Config, path: Path, text: str, trusted: frozenset[str] | None,
                skipped: list[str] | None = None) -> None:
    """Merge the file's settings; with ``skipped`` given, a setting in error is noted
    there and passed over instead of raised."""
    data = _parse(path, text)
    for key, value in _flatten(data, path, skipped).items():
        try:
            coerced = _checked(key, value, path)
        except ConfigError as exc:
            if skipped is None:
                raise
            skipped.append(f"{exc}; ignored")
            continue
        if trusted is not None and key in ADD_ONLY:
            coerced = list(dict.fromkeys([*config.values[key], *coerced]))   # union: adds only
        elif trusted is not None and key in trusted:
            if key in NARROWING and NARROWING[key](config.values[key], coerced):
                _set(config, key, coerced, str(path))
                continue
            config.ignored[key] = (f"{path} is not trusted (`workspace config trust` after "
                                   "reading it)")
            continue
        _set(config, key, coerced, str(path))


def _checked(key: str, value: Any, path: Path) -> Any:
    if SCHEMA[key].type is list and isinstance(value, str):
        raise ConfigError(f"{path}: setting {key!r} expects list, got {value!r}",
                          hint=f"write it as a YAML list: {key.split('.')[-1]}: [{value!r}]")
    return _coerce(key, value, str(path))


def trust_path() -> Path:
    return Path(paths.trust_file())


def _trust_record(strict: bool = False) -> dict[str, str]:
    """{project file: sha256}. Unreadable, or written by a newer release: nothing is
    trusted (``strict``: a newer record is an error, so that it is not overwritten)."""
    from manager import versioning

    try:
        data = versioning.load("trust", trust_path())
    except (FileNotFoundError, ValueError):
        return {}
    except versioning.NewerFormat:
        if strict:
            raise
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    return files if isinstance(files, dict) else {}


def file_hash(path: Path) -> str | None:
    text = _read_settings_file(path)
    return None if text is None else _digest(text.encode("utf-8"))


def _digest(data: bytes) -> str:
    import hashlib  # only once there is a file: without one, no command needs OpenSSL

    return hashlib.sha256(data).hexdigest()


def is_trusted(path: Path) -> bool:
    """The user trusted exactly this content of ``path``."""
    return is_trusted_digest(path, file_hash(path))


def is_trusted_digest(path: Path, digest: str | None) -> bool:
    """The user trusted ``path`` when its content (and what it names) hashed to ``digest``
    (the project's devcontainer: its file and its Dockerfile)."""
    return digest is not None and _trust_record().get(str(path.absolute())) == digest


def set_trust(path: Path, trusted: bool) -> str | None:
    """Record (or drop) the user's trust in the current content of ``path``; its hash."""
    return record_trust(path, file_hash(path) if trusted else None)


def record_trust(path: Path, digest: str | None) -> str | None:
    """Record ``digest`` as the trusted content of ``path`` (None: drop it); the digest."""

    from manager import versioning
    from manager.fs.util import write_json_atomic

    record = _trust_record(strict=True)
    key = str(path.absolute())
    if digest is not None:
        record[key] = digest
    else:
        record.pop(key, None)
    trust_path().parent.mkdir(parents=True, exist_ok=True)
    data = versioning.stamp("trust", {"files": record})
    write_json_atomic(trust_path(), data, indent=1, mode=0o600)
    return digest


def _read_settings_file(path: Path) -> str | None:
    """The file's text; None when there is none. The project's file is the agent's to write:
    a fifo would block the hook reading it (and a hook that never answers lets the client
    run the call), so only a regular file of bounded size is read, without waiting."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):   # fdopen refuses a directory with an OSError
        os.close(fd)
        raise ConfigError(f"config file {path} is not a regular file",
                          hint=f"remove {path} or replace it with a file")
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_size > MAX_FILE_BYTES:
            raise ConfigError(f"config file {path} is larger than {MAX_FILE_BYTES >> 10} KiB")
        data = f.read(MAX_FILE_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8: {exc}") from exc


def _no_aliases(yaml: Any) -> Any:
    """A safe loader that refuses YAML aliases: settings never need them, and an alias
    bomb (ten aliases a level) is a few hundred bytes that expand to billions of items."""
    class Loader(yaml.SafeLoader):  # type: ignore[misc]   # C's parser composes itself
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases (*name) are not allowed in settings")
            return super().compose_node(parent, index)

    return Loader


def _parse(path: Path, text: str) -> dict[str, Any]:
    if not text.strip():
        return {}
    try:
        if path.suffix == ".json":
            import json

            data = json.loads(text)
        else:
            yaml = _yaml()
            data = yaml.load(text, Loader=_no_aliases(yaml))
    except Exception as exc:  # noqa: BLE001 - any parser error is a config error
        raise ConfigError(f"{path}: not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings, found {type(data).__name__}")
    return data


def _yaml() -> Any:
    """PyYAML, imported only when a YAML file exists.

    Hooks run with ``python -S``: site-packages are added here when needed, so
    a hook that reads a project's ``.workspace.yaml`` (the Stop hook) still can.
    """
    try:
        import yaml
    except ImportError:
        if not sys.flags.no_site or "site" in sys.modules:
            raise
        paths.enable_site()
        import yaml
    return yaml


def _flatten(data: dict[str, Any], path: Path, skipped: list[str] | None = None,
             prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = f"{prefix}{raw_key}"
        if isinstance(value, dict) and any(k.startswith(key + ".") for k in SCHEMA):
            flat.update(_flatten(value, path, skipped, key + "."))
        elif key in SCHEMA:
            flat[key] = value
        elif skipped is not None:
            skipped.append(f"{path}: unknown setting {key!r}; ignored")
        else:
            raise ConfigError(f"{path}: unknown setting {key!r}", hint=_suggest(key))
    return flat


def _suggest(key: str) -> str:
    import difflib

    close = difflib.get_close_matches(key, list(SCHEMA), n=1)
    if close:
        return f"did you mean {close[0]!r}? (`workspace config` lists every setting)"
    return "`workspace config` lists every setting"


def _merge_env(config: Config) -> None:
    for key in SCHEMA:
        name = env_name(key)
        if name in os.environ:
            _set(config, key, _coerce(key, os.environ[name], f"${name}"), f"${name}")


def _coerce(key: str, value: Any, source: str) -> Any:
    option = SCHEMA[key]
    try:
        result = _convert(option.type, value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"{source}: setting {key!r} expects {option.type.__name__}, got {value!r}"
        ) from exc
    if option.choices and result not in option.choices:
        raise ConfigError(
            f"{source}: setting {key!r} must be one of {', '.join(option.choices)}; got {result!r}"
        )
    return result


def _convert(kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(value)
    if kind is list:
        if isinstance(value, str):
            import json

            value = json.loads(value) if value.startswith("[") else [v for v in value.split(",") if v]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError(value)
        return list(value)
    if kind in (int, float) and isinstance(value, bool):
        raise TypeError(value)
    if kind is str and not isinstance(value, str):
        raise TypeError(value)
    if kind is int and isinstance(value, float):
        raise TypeError(value)
    return kind(value)

"""``workspace doctor``'s proof that confinement holds on this host, on the engine in use:
one call in a scratch session reads a hidden secret in every way a command would try, and
tries the network: a test server on this host's 127.0.0.2, listed, must answer through the
session's proxy, a host not listed must be refused and both must be on the record, and no
connection may go around the proxy; a direct attempt refused at once (the watched pair:
holder/direct.py, container/direct.py) must be on the record too, one that fails as
unreachable (no pair: no veth, no helper) is said. An engine that cannot take a list (try,
a remote container engine) is probed with ``network: off``: nothing may answer at all.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from manager import hide
from manager.config import Config
from manager.engines.base import RunRequest
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from manager.session.store import Session

# What a command would try: cat, python's open, a symlink to it, a hard link, the roots of
# /proc, and last, taking the mask off (a command that is root in the overlay engine's
# namespace can: attack pass 8); whatever it prints must not hold the secret.
UNMOUNTED = "__ws_probe_umount__"
READS = ('cat "$S"; python3 -c "import sys; print(open(sys.argv[1]).read())" "$S"; '
         'ln -s "$S" l && cat l; ln "$S" h && cat h; cat "/proc/self/root$S" "/proc/1/root$S"; '
         f'echo {UNMOUNTED}; umount "$S" 2>/dev/null && cat "$S"')
# The network's part: one line each, "net ..." (the proxy settings are the sandbox's own).
CONNECTS = r'''
import socket, sys, urllib.error, urllib.request
port = int(sys.argv[1])
def say(*words): print("net", *words, flush=True)
try:
    say("listed", urllib.request.urlopen(f"http://127.0.0.2:{port}/", timeout=10).read().decode())
except Exception as exc:
    say("listed failed", type(exc).__name__)
try:
    urllib.request.urlopen(f"http://refused.invalid:{port}/", timeout=10)
    say("unlisted reached")
except urllib.error.HTTPError as exc:
    say("unlisted", exc.code)
except Exception as exc:
    say("unlisted failed", type(exc).__name__)
for host in ("127.0.0.2", "192.0.2.1"):
    try:
        socket.create_connection((host, port), timeout=3).close()
        say("direct reached", host)
    except OSError as exc:
        say("direct failed", host, exc.errno)   # 111: the watched pair refused it (recorded)
'''
TIMEOUT = 120.0


@dataclass
class Verdict:
    held: bool | None      # None: not probed
    detail: str
    limit: bool = False    # not held for a reason docs/security.md states (doctor warns)


@dataclass
class Probed:
    hide: Verdict
    network: Verdict
    network_mode: str      # "list" or "off": what the probe's session was given


def probe(config: Config, engine_name: str) -> Probed:
    """One call in a scratch sandbox of ``engine_name`` reads a hidden secret and connects."""
    from manager.engines.overlay import netprobe

    try:
        server = netprobe.test_server()
    except OSError as exc:
        raise WorkspaceError(f"no loopback test server on 127.0.0.2: {exc}") from None
    try:
        port = server.server_address[1]
        try:
            return _probe(config, engine_name, port, [f"127.0.0.2:{port}"])
        except EngineUnavailable as exc:
            if "network is a list" not in str(exc):
                raise
            return _probe(config, engine_name, port, "off")   # try, a remote engine
    finally:
        server.shutdown()
        server.server_close()


def _probe(config: Config, engine_name: str, port: int, network: list[str] | str) -> Probed:
    top = Path(tempfile.mkdtemp(prefix="workspace-confine-probe-"))
    try:
        return _probe_in(top, config, engine_name, port, network)
    finally:
        _remove(top)   # the secret and an empty project, whatever failed (the sandbox is the session's)


def _probe_in(top: Path, config: Config, engine_name: str, port: int,
              network: list[str] | str) -> Probed:
    from manager.session import store
    from manager.session.context import Context
    from manager.session.sandbox import run

    token = "hide-probe-" + secrets.token_hex(8)
    secret = top / "secret"
    secret.write_text(token + "\n")
    project = top / "project"
    project.mkdir()
    probed = Config(dict(config.values), dict(config.sources))
    probed.values["hide"] = [*config["hide"], str(secret)]
    probed.values["engine"] = engine_name
    probed.values["network"], probed.sources["network"] = network, "doctor's probe"
    session = store.create(project, engine_name, origin="doctor")
    out = top / "out"
    script = (f"S={shlex.quote(str(secret))}; {READS}; "
              f"python3 -c {shlex.quote(CONNECTS)} {port}")
    ctx = Context(project, probed)
    try:
        with open(out, "wb") as sink:
            rc = run(ctx, session, RunRequest(script, str(project), TIMEOUT,
                                              stdin=subprocess.DEVNULL, stdout=sink, stderr=sink))
        seen = out.read_text(errors="replace")
        mode = "list" if isinstance(network, list) else "off"
        verdict = _network(seen, mode, session)
    finally:
        # Whatever the call did (an image that cannot serve calls fails it): the session's
        # container and sandbox go with its record, or gc would meet an orphan.
        try:
            with contextlib.suppress(WorkspaceError):
                ctx.engine(session).destroy(session)
        finally:
            store.remove(session)
    return Probed(_hidden(seen, token, rc), verdict, mode)


def _hidden(seen: str, token: str, rc: int) -> Verdict:
    before, _, after = seen.partition(UNMOUNTED)
    if token in before:
        return Verdict(False, "a sandboxed command read the hidden secret")
    if token in after:
        return Verdict(False, "a sandboxed command that is root in the sandbox's namespace "
                              "unmounted the mask and read the hidden secret: run workspace as "
                              "an ordinary user with subordinate ids (or use podman or docker) "
                              "for hide to hold", limit=True)
    return Verdict(True, f"hidden from a sandboxed command (exit {rc})")


def _network(seen: str, mode: str, session: Session) -> Verdict:
    said = [line.removeprefix("net ") for line in seen.splitlines() if line.startswith("net ")]
    if len(said) != 4:
        return Verdict(False, f"the probe's connections did not run: {seen.strip()[-300:]!r}")
    reached = [line for line in said if "reached" in line]
    if mode == "off":
        if said[0].startswith("listed failed") and not reached:
            return Verdict(True, "network off: no connection left the sandbox (this host's "
                                 "loopback included)")
        return Verdict(False, f"network off, yet a connection answered: {said!r}")
    from manager.engines.overlay import netprobe

    if said[:2] != [f"listed {netprobe.GREETING.decode()}", "unlisted 403"] or reached:
        return Verdict(False, "with network a list of hosts, expected the listed host to answer "
                              f"and others to be refused: the sandbox said {said!r}")
    watched = said[3].endswith(" 111")   # refused at once: the watched pair answered
    missing = _unrecorded(session, watched)
    if missing:
        return Verdict(False, f"the egress record does not hold {missing}")
    return Verdict(True, "a list of hosts: the listed host answered through the session's proxy, "
                         "one not listed was refused, both on the record; no connection went "
                         "around the proxy; " + ("a direct attempt was refused and recorded"
                                                 if watched else _unwatched(session)))


def _unwatched(session: Session) -> str:
    """What the session's log says of direct attempts it could not record (container/direct.py)."""
    try:
        lines = (session.sandbox / "egress.log").read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    said = [line.removeprefix("network: ") for line in lines if line.startswith("network: direct")]
    return said[-1] if said else "direct attempts fail (unreachable) but are not recorded"


def _unrecorded(session: Session, direct: bool) -> str:
    """Which of the attempts (through the proxy; ``direct``, the one around it) the record
    lacks ("" when all are on it)."""
    from manager.egress import record

    want = {("127.0.0.2", True, "proxy"): "the allowed attempt",
            ("refused.invalid", False, "proxy"): "the refused one"}
    if direct:
        want[("192.0.2.1", False, "direct")] = "the direct attempt"

    def lacking(found: list[dict[str, object]]) -> list[str]:
        got = {(e.get("host"), e.get("allowed"), e.get("via", "proxy")) for e in found}
        return [what for key, what in want.items() if key not in got]

    _, found = record.awaited(session.sandbox, lambda found: not lacking(found))
    return " and ".join(lacking(found))


def listed(config: Config, project: str) -> list[str]:
    return [t.path for t in hide.targets(config, project)]


def _remove(top: Path) -> None:
    import shutil

    shutil.rmtree(top, ignore_errors=True)

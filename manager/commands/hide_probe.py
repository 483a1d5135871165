"""``workspace doctor``'s proof that ``hide`` holds on this host: a secret written to a
temporary file, hidden, and read from a sandbox of the engine in use in every way a
command would try. It reports the list in force and whether the secret stayed out.
"""

from __future__ import annotations

import contextlib
import secrets
import shlex
import subprocess
import tempfile
from pathlib import Path

from manager import hide
from manager.config import Config
from manager.engines.base import RunRequest
from manager.errors import WorkspaceError

# What a command would try: cat, python's open, a symlink to it, a hard link, the roots of
# /proc; whatever it prints must not hold the secret.
READS = ('cat "$S"; python3 -c "import sys; print(open(sys.argv[1]).read())" "$S"; '
         'ln -s "$S" l && cat l; ln "$S" h && cat h; cat "/proc/self/root$S" "/proc/1/root$S"')
TIMEOUT = 120.0


def probe(config: Config, engine_name: str) -> tuple[bool, str]:
    """(held, what was seen): a sandbox of ``engine_name`` reads a hidden secret."""
    from manager.session import store
    from manager.session.context import Context
    from manager.session.sandbox import run

    top = Path(tempfile.mkdtemp(prefix="workspace-hide-probe-"))
    token = "hide-probe-" + secrets.token_hex(8)
    secret = top / "secret"
    secret.write_text(token + "\n")
    project = top / "project"
    project.mkdir()
    probed = Config(dict(config.values), dict(config.sources))
    probed.values["hide"] = [*config["hide"], str(secret)]
    probed.values["engine"] = engine_name
    session = store.create(project, engine_name, origin="doctor")
    out = top / "out"
    ctx = Context(project, probed)
    try:
        with open(out, "wb") as sink:
            rc = run(ctx, session, RunRequest(f"S={shlex.quote(str(secret))}; {READS}",
                                              str(project), TIMEOUT, stdin=subprocess.DEVNULL,
                                              stdout=sink, stderr=sink))
        seen = out.read_text(errors="replace")
    finally:
        # Whatever the call did (an image that cannot serve calls fails it): the session's
        # container and sandbox go with its record, or gc would meet an orphan.
        with contextlib.suppress(WorkspaceError):
            ctx.engine(session).destroy(session)
        store.remove(session)
        _remove(top)
    if token in seen:
        return False, "a sandboxed command read the hidden secret"
    return True, f"hidden from a sandboxed command (exit {rc})"


def listed(config: Config, project: str) -> list[str]:
    return [t.path for t in hide.targets(config, project)]


def _remove(top: Path) -> None:
    import shutil

    shutil.rmtree(top, ignore_errors=True)   # the secret and an empty project (the sandbox is the session's)

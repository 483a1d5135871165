"""Issue 20, the root gap: a command run as the host's root cannot reach the host's cgroups
nor mount another pseudo file system that exposes host state.

Run by real root the overlay engine maps every id to itself: a command could make a cgroup
namespace, mount cgroup2 or any cgroup v1 hierarchy (a fresh mount: the read-only locks on
/sys do not cover it), and write the host's cgroup files as their owner, uid 0. The holder
now puts the session in a cgroup of its own in every hierarchy and roots the session's
cgroup namespace there (manager/engines/overlay/holder/cgroups.py). The probe mounts each
hierarchy (in a cgroup namespace of its own, and in the session's) and makes a directory
at each mount's root: a write that shows where the mount is rooted. It must land below the
session's cgroup, never in the cgroup the engine was started from. bpf, debugfs, tracefs,
securityfs, configfs, pstore and efivarfs must not mount at all.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest

from manager.engines.overlay.holder import cgroups

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

OTHER_FS = ["bpf", "debugfs", "tracefs", "securityfs", "configfs", "pstore", "efivarfs"]

PROBE = r'''
import json, os, subprocess, sys
token, specs, others = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3].split(",")
out = {}
def mount(fstype, options, where):
    os.makedirs(where, exist_ok=True)
    argv = ["mount", "-t", fstype] + (["-o", options] if options else []) + [fstype, where]
    return subprocess.run(argv, capture_output=True, text=True)
for key, (fstype, options) in specs.items():
    for how in ("own", "unshare"):
        where = f"/tmp/cg-{how}-{key}"
        os.makedirs(where, exist_ok=True)
        argv = ["mount", "-t", fstype] + (["-o", options] if options else []) + ["none", where]
        if how == "unshare":
            argv = ["unshare", "-C"] + argv
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            out[f"{how}:{key}"] = "refused: " + done.stderr.strip()
            continue
        try:
            os.mkdir(os.path.join(where, f"probe-{token}-{how}"))
            out[f"{how}:{key}"] = "made"
        except OSError as exc:
            out[f"{how}:{key}"] = f"mkdir: {exc}"
for fstype in others:
    done = mount(fstype, "", f"/tmp/fs-{fstype}")
    out[fstype] = "refused" if done.returncode != 0 else "mounted"
print(json.dumps(out))
'''


def _hierarchies() -> dict[str, tuple[str, str]]:
    """Each hierarchy this process is in: a key, and how to mount it (type, options)."""
    found = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _hid, controllers, _path = line.split(":", 2)
        if controllers == "":
            found["v2"] = ("cgroup2", "")
        else:
            name = controllers.replace("name=", "")
            options = controllers if "name=" not in controllers else f"none,{controllers}"
            found[name] = ("cgroup", options)
    return found


def test_a_root_command_reaches_only_the_sessions_cgroups(ws, project: Path,
                                                          overlay_engine: str):
    if os.geteuid() != 0:
        pytest.skip("the gap is root's: an ordinary user's kernel refuses (test_kernel_reach)")
    token = os.urandom(4).hex()
    specs = _hierarchies()
    ours = cgroups._own_cgroups()   # where an unconfined mount would be rooted: the engine's
    proc = ws("run", "--", "python3", "-c", PROBE, token, json.dumps(specs), ",".join(OTHER_FS))
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    leaked = [str(Path(d) / n) for d in ours for n in os.listdir(d) if n.startswith(f"probe-{token}")]
    for path in leaked:          # clean the host before failing
        os.rmdir(path)
    assert leaked == [], f"the command wrote the host's cgroups: {leaked}"
    assert all(results[fs] == "refused" for fs in OTHER_FS), results
    made = [k for k, v in results.items() if v == "made"]
    assert made, f"no cgroup mount worked inside, the probe proves nothing: {results}"
    found = []
    for here in ours:            # below the session's own cgroup: workspace-PID/probe-...
        for child in os.listdir(here):
            sub = Path(here) / child
            if child.startswith("workspace-") and sub.is_dir():
                found += [sub / n for n in os.listdir(sub) if n.startswith(f"probe-{token}")]
    for path in found:
        os.rmdir(path)
    assert len(found) == len(made), (results, found)
    print(shlex.join(sorted(made)))

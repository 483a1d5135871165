"""Issue 20, the root gap: a command the overlay engine runs reaches no host kernel
interface that checks only the owner. Run as root the namespace maps every id to itself,
so a command is the host's uid 0: without the locked read-only /proc and /sys and the
minimal /dev (manager/engines/overlay/holder/kernel.py) it writes sysctls (core_pattern runs a
program as the host's root), sysfs and cgroup files, and opens /dev/kmsg; without an IPC
namespace of the sandbox's own it reaches the host's SysV IPC objects (root's, as root).

One probe run (kernel_probe.py) per account and id layout, shared by the tests: as root;
as the ordinary user with its subordinate ids (a command is the user, no capabilities);
and with a single mapping (the command is the namespace's root, with every capability in
it, but on the host the user: the kernel itself refuses).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from manager.engines.overlay import ids as overlay_ids
from tests.engines import accounts
from tests.engines.accounts import Account
from tests.engines.test_overlay_user import _path_without

pytestmark = pytest.mark.engine

PROBE = (Path(__file__).parent / "kernel_probe.py").read_text()
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"
CHAR_DEVICES = ("/dev/kmsg", "/dev/mem", "/dev/kvm", "/dev/tty0", "/dev/loop-control",
                "/dev/fuse", "/dev/hwrng")
REACH = ["sysctl_rewrite", "sysctl_core_pattern", "sysctl_drop_caches", "sysrq_trigger",
         "sysfs_attribute", "cgroup_procs", "dev_kmsg", "host_devices", "mknod_device",
         "undo_proc", "fresh_proc", "undo_sys", "undo_dev", "sysv_ipc"]
MASKS = ["remount_proc_writable", "remount_sys_writable"]
HOST_VALUES = ("/proc/sys/kernel/hostname", "/sys/kernel/mm/transparent_hugepage/enabled")


def _cases() -> list[tuple[str, str]]:
    """(account kind, layout). Root's layout is every id whatever the tools: one case."""
    cases = []
    for kind in accounts.KINDS:
        root = kind == "self" and os.geteuid() == 0
        cases += [(kind, "own")] if root else [(kind, "own"), (kind, "single")]
    return cases


@dataclass
class Reach:
    account: Account
    layout: str
    results: dict[str, str]
    host_before: dict[str, str]
    maps: overlay_ids.IdMaps | None


def _host_devices() -> list[str]:
    blocks = sorted(f"/dev/{e.name}" for e in os.scandir("/dev")
                    if stat.S_ISBLK(e.stat(follow_symlinks=False).st_mode))[:4]
    return blocks + [p for p in CHAR_DEVICES if os.path.exists(p)]


def _host_values() -> dict[str, str]:
    return {p: Path(p).read_text() for p in HOST_VALUES if os.path.exists(p)}


@pytest.fixture(scope="module", params=_cases(), ids=lambda c: "-".join(c))
def reach(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reach]:
    kind, layout = request.param
    account = accounts.make(kind, tmp_path_factory.mktemp("kernel"))
    try:
        env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} if layout == "single" else {}
        before = _host_values()
        proc = account.run([account.python, "-m", "manager", "run", "--", PYTHON, "-I", "-S",
                            "-c", PROBE, os.readlink("/proc/self/ns/ipc"), *_host_devices()], env=env)
        assert proc.returncode == 0, proc.stderr
        maps = overlay_ids.recorded(account.sandbox())
        yield Reach(account, layout, json.loads(proc.stdout.splitlines()[-1]), before, maps)
    finally:
        accounts.clean(account)


@pytest.mark.parametrize("probe", REACH)
def test_no_host_kernel_interface_is_reached(reach: Reach, probe: str):
    assert reach.results[probe].startswith("refused"), \
        f"[{reach.account.name}, {reach.layout}] {probe} reached the host: {reach.results}"


@pytest.mark.parametrize("mask", MASKS)
def test_a_mask_cannot_be_made_writable(reach: Reach, mask: str):
    """Where the command is the host's root (root) or has no capability (subordinate ids),
    remounting /proc or /sys read-write fails. With a single mapping the namespace's root
    may remount them (nothing locks them), but it is the user on the host, whom the
    kernel refuses (the reach probes above): the map shows it."""
    assert reach.maps is not None
    if reach.maps.mode == overlay_ids.SINGLE:
        assert all(outside != 0 for _, outside, _ in reach.maps.uid), reach.maps.uid
        return
    assert reach.results[mask].startswith("refused"), reach.results


def test_the_host_values_are_unchanged(reach: Reach):
    assert _host_values() == reach.host_before


def test_doctors_measure_sees_what_the_host_reaches():
    """The doctor's measurement is one: run on the host itself (no sandbox) it finds the
    device nodes there, and as root the sysctls too (opened for writing, nothing written)."""
    from manager.engines.overlay import reach as overlay_reach

    found = overlay_reach.measure(["/bin/bash", "-c"], dict(os.environ))
    assert isinstance(found, list), found
    assert any(p.startswith("/dev/") for p in found), found
    assert ("/proc/sys/kernel/core_pattern" in found) == (os.geteuid() == 0), found

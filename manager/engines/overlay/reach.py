"""Measure, from inside a sandbox, which host kernel interfaces a command reaches (doctor).

Opens for writing without writing (a sysctl or a sysfs attribute acts only on a write),
and lists device nodes without opening any (opening some, a watchdog, has effects).
"""

from __future__ import annotations

import subprocess

# A write-open of each: the command could change the host's kernel state through it.
WRITABLE = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/hostname", "/proc/sysrq-trigger",
            "/sys/kernel/mm/transparent_hugepage/enabled", "/sys/power/state",
            "/sys/fs/cgroup/cgroup.procs", "/sys/fs/cgroup/pids/cgroup.procs")
HARMLESS_NODES = ("null", "zero", "full", "random", "urandom", "tty", "ptmx")
# A command that is root of its namespace unmounts its own /proc (in a mount namespace of its
# own here): is the host's below it? There, /proc/self is not the pid the command has.
HOST_PROC_REACHED = "/proc (the host's, below a call's own: host processes' descriptors)"
HOST_PROC = ("umount -l /proc && read -r pid _ </proc/self/stat && [[ $pid != \"$BASHPID\" ]] "
             f"&& echo \"{HOST_PROC_REACHED}\"").replace("'", "'\\''")
SCRIPT = f"""
for f in {' '.join(WRITABLE)}; do
    [[ -e $f ]] && (: >>"$f") 2>/dev/null && echo "$f"
done
for f in /dev/* /dev/*/*; do
    [[ -b $f || ( -c $f && ! -L $f ) ]] || continue
    case ${{f#/dev/}} in {'|'.join(HARMLESS_NODES)}|pts/*) ;; *) echo "$f";; esac
done
unshare --mount --propagation private /bin/bash -c '{HOST_PROC}' 2>/dev/null
true
"""


def measure(enter: list[str], env: dict[str, str]) -> list[str] | str:
    """What a command run by ``enter`` (the entry script's argv without the command)
    reaches; or why it could not be measured."""
    try:
        proc = subprocess.run([*enter, SCRIPT], env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode != 0:
        return proc.stderr.strip() or f"exit {proc.returncode}"
    return [line for line in proc.stdout.splitlines() if line.startswith("/")]


def summary(reached: list[str]) -> str:
    devices = [p for p in reached if p.startswith("/dev/")]
    other = [p for p in reached if not p.startswith("/dev/")]
    parts = [*other, *([f"{len(devices)} device nodes ({', '.join(devices[:3])}...)"]
                       if len(devices) > 3 else devices)]
    return ", ".join(parts)

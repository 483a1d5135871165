"""The differences between native and each engine that are known, documented and tested.

Each entry: an observation key (a glob) -> (reason, section of docs/fidelity.md). Keyed
by engine and by who runs it ("root" or "user": an ordinary account), since some
differences depend on that. Rows a helper of issue 14 is fixing say so; they go when
that work lands.
"""

from __future__ import annotations

import fnmatch

Row = tuple[str, str]   # reason, docs section (an anchor of docs/fidelity.md)
FRESH, IDENTITY, CONTAINERS = (f"being fixed by issue 14 ({area})"
                               for area in ("fresh", "identity", "containers"))

CALL_PID_NAMESPACE: dict[str, Row] = {
    "process.host_process": ("each call has a pid namespace of its own", "processes"),
    "process.from_earlier_call": ("a call's processes end with it; another call cannot see them",
                                  "processes"),
    "process.ps_sees_more_than_20": ("ps shows the call's own processes only", "processes"),
}
OVERLAY: dict[str, Row] = {  # one pid namespace per session: calls see each other's processes
    "process.host_process": ("the session has a pid namespace of its own", "processes"),
    "process.ps_sees_more_than_20": ("ps shows the session's processes only", "processes"),
    "process.from_earlier_call": ("what a call leaves running is ended when the call ends; a "
                                  "server in a call still running (run_in_background) is seen",
                                  "processes"),
    "dev_shm.file_from_outside": ("/dev/shm is a private tmpfs per session", "dev-shm"),
}
TRY: dict[str, Row] = {
    **CALL_PID_NAMESPACE,
    "dev_shm.*": ("try mounts no /dev/shm", "dev-shm"),
    "socket.outside_server": ("try's overlay cannot pass connect() to a socket below it", "sockets"),
    "socket.docker*": ("try's overlay cannot pass connect() to a socket below it", "sockets"),
}
CONTAINER: dict[str, Row] = {  # background processes stay in the session's container
    "process.host_process": ("the container has a pid namespace of its own", "processes"),
    "process.ps_sees_more_than_20": ("ps shows the container's processes only", "processes"),
    "dev_shm.file_from_outside": ("the container has a /dev/shm of its own", "dev-shm"),
    "file.var_tmp.*": ("only the project, $HOME and /tmp are overlaid in a container", "containers"),
    "socket.outside_server": ("host sockets are not bound into a container: overlayfs refuses "
                              "connect() through a lower layer", "sockets"),
    "socket.docker*": ("the Docker socket is not brought into the container", "sockets"),
    "hostname": ("a container has a host name of its own", "containers"),
    "env.PATH": ("the image's PATH: host directories do not exist in it", "containers"),
}

EXPECTED: dict[tuple[str, str], dict[str, Row]] = {
    ("overlay", "root"): {**OVERLAY},
    ("try-main", "root"): {**TRY},
    ("try-0.2.0", "root"): {**TRY, "dev_fd": ("try 0.2.0 mounts no /dev/fd", "try"),
                            "mode./tmp": ("try 0.2.0 shows /tmp with mode 755", "try")},
    ("podman", "root"): {**CONTAINER, "ulimit.14": ("podman's default pids limit", "containers")},
    ("docker", "root"): {**CONTAINER},
}

AS_ROOT_INSIDE: dict[str, Row] = {   # the user namespace maps the user to root
    "id.*": ("commands run as the namespace's root", "owners"),
    "owner_of_new_file.*": ("commands run as the namespace's root", "owners"),
    "socket.docker.group": ("the docker group has no id in the user namespace", "owners"),
}
CONTAINER_USER: dict[str, Row] = {
    **CONTAINER,
    "id.G": ("supplementary groups are not carried into the container", "containers"),
    "ulimit.8": ("the container engine's default open-files limit", "containers"),
}
EXPECTED.update({
    ("overlay", "user"): {**OVERLAY,
                          "id.G": ("a supplementary group outside the user's subordinate ids "
                                   "(docker's) reads as nogroup, still granting access", "owners"),
                          "socket.docker.group": (
                              "the docker group is outside the user's subordinate ids", "owners")},
    ("try-main", "user"): {**TRY, **AS_ROOT_INSIDE},
    ("try-0.2.0", "user"): {**EXPECTED[("try-0.2.0", "root")], **AS_ROOT_INSIDE},
    ("podman", "user"): {**CONTAINER_USER, "ulimit.14": EXPECTED[("podman", "root")]["ulimit.14"],
                         "env.TERM": ("rootless podman sets TERM=xterm", "containers")},
    ("docker", "user"): {**CONTAINER_USER,
                         "id.un": ("the image has no name for the user's uid", "containers")},
})


def for_engine(engine: str, root: bool) -> dict[str, Row]:
    return EXPECTED.get((engine, "root" if root else "user"), {})


def matches(pattern: str, key: str) -> bool:
    return fnmatch.fnmatchcase(key, pattern)


def reason(table: dict[str, Row], key: str) -> Row | None:
    return next((row for pattern, row in table.items() if matches(pattern, key)), None)

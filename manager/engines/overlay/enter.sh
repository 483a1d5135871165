#!/bin/bash
# The per-call entry of the built-in overlay engine: the lean path that every
# sandboxed Bash call takes. Builtins only until the final exec, so it costs a
# few milliseconds over `bash -c`.
#
# Usage: overlay_enter.sh SANDBOX SESSION PYTHON CWD CWD_OUT COMMAND
#   SANDBOX  the session's sandbox directory (holder.pid, upperdir/, temproot/)
#   SESSION  the session id, for the fallback below
#   PYTHON   the interpreter that has workspace installed, for the fallback
#   CWD      working directory inside the sandbox ("" = this process's)
#   CWD_OUT  file that receives the final working directory ("" = none)
#   COMMAND  a bash script, run as by `bash -c`
#
# When the holder is not running (first call, idle exit, after commit) or does
# not show CWD (a directory made after it started), it hands over to
# `workspace run`, which starts or replaces it. It never runs COMMAND outside
# the sandbox, nor in another directory. Exit 125: the sandbox could not be
# entered; the command did not run.
#
# Environment, set by the CLI (which handles what the fallback would):
#   WORKSPACE_NO_FALLBACK      exit 125 instead of handing over
#   WORKSPACE_NOT_ENTERED_FD   write the reason there, not to stderr
S=$1 SESSION=$2 PY=$3 CWD=${4:-$PWD} OUT=$5 CMD=$6
[[ $CWD == /* ]] || CWD=$PWD/$CWD
# Set by `workspace run`'s lean path (commands/run_lean.py), which runs this script from a
# record: a call that does not enter goes to the full `workspace run` (it starts or
# replaces the holder, retries, and says why), started as the CLI was ("isolated": -I).
lean=$WORKSPACE_LEAN_RUN
unset WORKSPACE_LEAN_RUN

not_entered() {
    [[ -n $lean ]] && run_cli
    if [[ -n $WORKSPACE_NOT_ENTERED_FD ]]; then
        printf '%s\n' "$1" >&"$WORKSPACE_NOT_ENTERED_FD"
    else
        printf 'workspace: %s\n' "$1" >&2
    fi
    exit 125
}

cwd_else() {
    printf 'workspace: the directory the last command reported ending in does not exist in the sandbox; starting in %s\n' "$1" >&2
}

fallback() {
    [[ -n $WORKSPACE_NO_FALLBACK ]] && not_entered "$1"
    run_cli
}

run_cli() {
    local py_flags=()
    [[ $lean == isolated ]] && py_flags=(-I)
    exec "$PY" -P "${py_flags[@]}" -m manager run --session "$SESSION" --cwd "$CWD" ${OUT:+--cwd-out "$OUT"} -c "$CMD"
}

gone="the sandbox of session $SESSION is not running"
# AS_UID (when set): the holder maps this user's own uid to itself, and the call drops to it.
read -r pid start as_uid 2>/dev/null <"$S/holder.pid" || fallback "$gone"
read -r -a st 2>/dev/null <"/proc/$pid/stat" || fallback "$gone"
[[ ${st[21]} == "$start" && ${st[2]} != Z ]] || fallback "$gone"
# The hook saw setting `network` change: `workspace run` replaces the holder (egress/launch.py).
[[ -e $S/network.stale ]] && fallback "setting network changed since the sandbox of session $SESSION started"

# Ask the holder to bring the directories it shows from a snapshot (those with mounts
# below them: /, often /tmp, /var, /run) up to date with every change made outside
# before now, and wait for its answer (a round trip, no restart): sync.done names the
# nonces it served last, and why it failed if it did. sync.sleep is never written: a
# read with a timeout on it is a sleep without a fork (a read of a fifo that other calls
# read too could block for good).
sync() {
    local nonce="$$.$RANDOM$RANDOM" served why i=0 nap=0.0002 resend=$((SECONDS + 1))
    local deadline=$((SECONDS + 60))
    { exec 93<>"$S/sync.req" 92<>"$S/sync.sleep"; } 2>/dev/null || fallback "$gone"
    printf '%s\n' "$nonce" >&93
    while ((SECONDS < deadline)); do
        read -r -t "$nap" -N 1 _ <&92
        { read -r served; read -r why; } <"$S/sync.done" 2>/dev/null
        if [[ " $served " == *" $nonce "* ]]; then
            exec 92>&- 93>&-
            [[ $why == retired ]] && fallback "$gone"
            [[ -z $why ]] || not_entered "$why"
            return
        fi
        ((++i < 20)) && continue   # the first 4 ms: the common case
        nap=0.005
        read -r -a st 2>/dev/null <"/proc/$pid/stat" || fallback "$gone"
        [[ ${st[21]} == "$start" && ${st[2]} != Z ]] || fallback "$gone"
        if ((SECONDS >= resend)); then   # a busy holder may have answered others since
            printf '%s\n' "$nonce" >&93
            resend=$((SECONDS + 1))
        fi
    done
    not_entered "the sandbox of session $SESSION did not bring its view up to date within 60 s"
}
# No round trip when the holder sleeps in select() with nothing left to show: an outside
# change wakes it (state running, no wchan) during the writer's own system call, and it
# creates sync.dirty before it sleeps again. wchan first, then the file.
if [[ -p $S/sync.req ]]; then   # a holder from before this protocol: no sync
    read -r wchan 2>/dev/null <"/proc/$pid/wchan"
    [[ $wchan == poll_schedule_timeout* && ! -e $S/sync.dirty ]] || sync
fi
# The sandbox's root and namespaces: those of the session's init (VIEW) when the holder
# pivoted into the sandbox's root (it steps into the host's mount namespace for a moment
# when it refreshes, so never its own); a holder from before that: its own.
view=$pid
read -r ns_holder init views 2>/dev/null <"$S/holder.pidns"
[[ $ns_holder == "$pid" && -n $init ]] && view=$init
# A holder that makes views (holder/views.py): the calls' root, user and mount namespaces
# are a view nested in its own, named in holder.view as of its last answer: descriptors
# the holder holds (fixed slots, each only ever a view's of its kind), or, where calls are
# not root there, the view itself (still the init's, started when named). The other
# namespaces are the holder's (the init's and the view's are the same).
nested= root=/proc/$view/root user=/proc/$view/ns/user mnt=/proc/$view/ns/mnt vpid= vstart=
if [[ $view == "$init" && $views == views ]]; then
    read -r _ root user mnt vpid vstart 2>/dev/null <"$S/holder.view" || fallback "$gone"
    if [[ -n $vpid ]]; then
        [[ $vpid$vstart == +([0-9]) && $root == "/proc/$vpid/root" && $user == "/proc/$vpid/ns/user" &&
            $mnt == "/proc/$vpid/ns/mnt" ]] || fallback "$gone"
    else
        [[ $root == /proc/$pid/fd/+([0-9]) && $user == /proc/$pid/fd/+([0-9]) &&
            $mnt == /proc/$pid/fd/+([0-9]) ]] || fallback "$gone"
    fi
    nested=1 view=$pid
fi
# Hold the namespaces and the root open, so a holder dying from here on cannot
# make the call fail half-way.
{ exec 94<"$root" 95<"$user" 96<"$mnt" 91<"/proc/$view/ns/ipc"; } 2>/dev/null ||
    fallback "$gone"
# Run as root: the session's own cgroups, and its cgroup namespace rooted there
# (holder/cgroups.py): the call joins both, so a cgroup file system it mounts, even from a
# cgroup namespace of its own, shows only the session's subtree, never the host's.
cgroupns=()
if ((EUID == 0)) && [[ -s $S/cgroups ]]; then
    { exec 90<"/proc/$view/ns/cgroup"; } 2>/dev/null || fallback "$gone"
    while IFS= read -r cg; do
        [[ $cg == /*/workspace-+([0-9]) ]] && { echo $$ >"$cg/cgroup.procs"; } 2>/dev/null ||
            not_entered "cannot join the session's cgroup $cg; the command did not run"
    done <"$S/cgroups"
    cgroupns=(--cgroup=/proc/self/fd/90)
fi
# Setting `network` (off, or a list): the sandbox's own network namespace, whose only way
# out is the session's proxy (holder/egress_proxy.py). Entered whenever it is not ours, so that a
# missing or rewritten state file can never leave a call on the host's network.
netns=()
if [[ ! /proc/$view/ns/net -ef /proc/self/ns/net ]]; then
    { exec 99<"/proc/$view/ns/net"; } 2>/dev/null || fallback "$gone"
    netns=(--net=/proc/self/fd/99)
    read -r net_mode net_port 2>/dev/null <"$S/network"
    if [[ $net_mode == proxy ]]; then
        p=http://127.0.0.1:$net_port
        s=socks5h://127.0.0.1:$net_port   # the same port takes SOCKS5 (holder/socks.py)
        export HTTP_PROXY=$p HTTPS_PROXY=$p ALL_PROXY=$s http_proxy=$p https_proxy=$p \
            all_proxy=$s NO_PROXY=localhost,127.0.0.1,::1 no_proxy=localhost,127.0.0.1,::1
    fi
fi
# Still the holder's child (so the init, not a process that got its pid), and a view that
# stays the init's: those are theirs.
if [[ $init != "" && ( $view == "$init" || -n $nested ) ]]; then
    read -r -a kids 2>/dev/null <"/proc/$pid/task/$pid/children"
    [[ " ${kids[*]} " == *" $init "* ]] || fallback "$gone"
fi
if [[ -n $vpid ]]; then
    read -r -a st 2>/dev/null <"/proc/$vpid/stat" || fallback "$gone"
    [[ ${st[21]} == "$vstart" && ${st[3]} == "$init" ]] || fallback "$gone"
fi
# The holder's view of a directory made after it started can be stale (overlayfs
# remembers a failed lookup; a directory with mounts below is a snapshot).
if [[ ! -d /proc/self/fd/94$CWD && -n $__WS_CWD_ELSE && -d /proc/self/fd/94$__WS_CWD_ELSE ]]; then
    cwd_else "$__WS_CWD_ELSE"   # where the last command said it ended is not there: the client's
    CWD=$__WS_CWD_ELSE
fi
[[ -d /proc/self/fd/94$CWD ]] || fallback "$CWD does not exist in the sandbox"
unset __WS_CWD_ELSE
: >"$S/last-used"

# The report file stays out here: only a pipe goes in (see the end).
if [[ -n $OUT ]]; then { exec 97>"$OUT"; } 2>/dev/null || not_entered "cannot write $OUT"; fi
if [[ -n $WORKSPACE_NOT_ENTERED_FD ]]; then  # not for the command, which may outlive us
    exec {WORKSPACE_NOT_ENTERED_FD}>&-
    unset WORKSPACE_NOT_ENTERED_FD
fi

# The session's pid namespace (its init is the holder's first child): a later call sees
# and signals what an earlier one left running, a server in the background, as outside;
# /proc shows the session's processes. A holder from before it has none: a pid
# namespace per call then, whose --kill-child ends the call's tree with this process.
# nsenter forks the call into it and waits: the call's shell gets SIGKILL when nsenter
# dies (setpriv, after --setuid, which would clear it), and what it leaves is orphaned to
# the session's init, which ends it (an orphan of nsenter itself would go to the host's
# reaper: the init ends those too, holder/strays.py).
# The programs run after --root are the sandbox's files: named by absolute path in a system
# directory, never looked up on the caller's PATH there (a call may write ~/.local/bin, and
# unshare runs as the namespace's root before it drops to the user's uid).
inside_unshare= inside_setpriv=
for d in /usr/bin /bin /usr/sbin /sbin; do
    [[ -z $inside_unshare && -x $d/unshare ]] && inside_unshare=$d/unshare
    [[ -z $inside_setpriv && -x $d/setpriv ]] && inside_setpriv=$d/setpriv
done
[[ -n $inside_unshare && -n $inside_setpriv ]] ||
    not_entered "cannot find unshare and setpriv (util-linux) in /usr/bin or /bin; the sandbox cannot be entered"
pidns=() per_call=(--pid --fork --kill-child) with_parent=() proc=(--mount-proc) ro_proc=
if [[ $ns_holder == "$pid" ]]; then
    { exec 98<"/proc/$pid/ns/pid_for_children"; } 2>/dev/null || fallback "$gone"
    pidns=(--pid=/proc/self/fd/98) per_call=() with_parent=("$inside_setpriv" --pdeathsig KILL --)
    # Run as root, the holder's /proc is locked read-only (holder/kernel.py): the kernel
    # lets no proc be mounted inside but a read-only one.
    ((EUID == 0)) && proc=() ro_proc=1
fi
# In a view, the holder's user namespace first (its root, which owns the session's pid,
# network and IPC namespaces and may enter the view's mount namespace), then the view's:
# nsenter enters every other namespace before the user one, then forks the call, born
# nested. Its /proc is the view's: the session's pid namespace's, locked there. setpriv:
# -S 0 changed this process's uid, which clears its parent-death signal (see the end).
outer=()
if [[ -n $nested ]]; then
    { exec 89<"/proc/$pid/ns/user"; } 2>/dev/null || fallback "$gone"
    outer=(nsenter --preserve-credentials ${as_uid:+-S 0} --user=/proc/self/fd/89 --
        setpriv --pdeathsig KILL --)
    proc=() ro_proc=
fi

# In the sandbox's user, mount and pid namespaces (VIEW's; root and cwd are the overlay's:
# the holder pivoted into it, the host's root is not in that mount namespace), a mount
# namespace of the call's own for its /proc. The caller's gid and
# supplementary groups are kept (setgroups() would drop those the namespace does not
# map, e.g. docker's). With AS_UID the user's own uid is not the namespace's root:
# the namespace's root (-S 0) mounts /proc, then --setuid drops to the
# user's uid and with it every capability -- no exec more than without.
#
# Inside, before the command: every descriptor but 0-2 closed (ours above, the caller's,
# whatever the tools left open): a directory is a way out (fchdir, then `..`), a host file
# a handle to write. The final directory (the EXIT trap's `pwd -P`) goes to fd 97, which
# is then a pipe to this script (no host file), closed for the command itself (bash keeps
# a close-on-exec copy for the trap).
enter=("${outer[@]}" nsenter --preserve-credentials ${as_uid:+-S 0} --user=/proc/self/fd/95
    --mount=/proc/self/fd/96 --ipc=/proc/self/fd/91 "${netns[@]}" "${cgroupns[@]}" "${pidns[@]}"
    --root=/proc/self/fd/94
    --wd=/proc/self/fd/94 -- "$inside_unshare" "${per_call[@]}" --mount "${proc[@]}" --propagation unchanged
    ${as_uid:+--setuid "$as_uid"} -- "${with_parent[@]}"
    /bin/bash -c '
if [[ -n $3 ]] && ! mount -t proc -o ro,nosuid,nodev,noexec proc /proc; then
    printf "workspace: cannot mount /proc in the sandbox\n" >&2
    exit 125
fi
for __ws_fd in /proc/self/fd/*; do
    __ws_fd=${__ws_fd##*/}
    [[ $__ws_fd == +([0-9]) ]] && ((__ws_fd > 2 && __ws_fd != 97)) && { exec {__ws_fd}>&-; } 2>/dev/null
done
if ! cd -- "$1" 2>/dev/null; then
    printf "workspace: %s does not exist in the sandbox\n" "$1" >&2
    exit 125
fi
unset WORKSPACE_NO_FALLBACK __ws_fd
__ws_cmd=$2
shift 3
# Not in this shell: as a per-call pid namespace'"'"'s init it would ignore the signals
# (TERM, INT, HUP) that a caller sends to stop the command.
# Job control: the command runs in a process group of its own, so `kill 0` in it
# cannot signal the caller'"'"'s group (the client'"'"'s shell); callers that stop a
# command signal its processes one by one (Claude Code) or the pid namespace dies.
set -m
(
    { : >&97; } 2>/dev/null && trap "pwd -P >&97" EXIT
    eval "unset __ws_cmd; $__ws_cmd" 97>&-
)
exit $?' /bin/bash "$CWD" "$CMD" "$ro_proc")
shopt -s execfail
if [[ -z $OUT ]]; then
    exec "${enter[@]}"
    not_entered "cannot run nsenter (util-linux) from PATH; the sandbox cannot be entered"
fi
# With a report: this script waits (one fork, no exec more) and reads the final
# directory from the pipe. setpriv: the call dies with this script, as when nsenter is
# it. lastpipe: the read runs here, not in a subshell.
hash nsenter setpriv 2>/dev/null ||
    not_entered "cannot run nsenter and setpriv (util-linux) from PATH; the sandbox cannot be entered"
shopt -s lastpipe
exec 93>&1
dir=
setpriv --pdeathsig KILL "${enter[@]}" 97>&1 >&93 93>&- | { IFS= read -r dir; } 93>&-
rc=${PIPESTATUS[0]}
[[ -n $dir ]] && printf '%s\n' "$dir" >&97
exit "$rc"

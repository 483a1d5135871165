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
# When the holder is not running (first call, idle exit, after commit), it
# hands over to `workspace run`, which starts one. It never runs COMMAND
# outside the sandbox. Exit 125: the sandbox could not be entered.
S=$1 SESSION=$2 PY=$3 CWD=${4:-$PWD} OUT=$5 CMD=$6

fallback() {
    if [[ -n $WORKSPACE_NO_FALLBACK ]]; then
        echo "workspace: the sandbox of session $SESSION is not running" >&2
        exit 125
    fi
    exec "$PY" -m manager run --session "$SESSION" --cwd "$CWD" ${OUT:+--cwd-out "$OUT"} -c "$CMD"
}

read -r pid start 2>/dev/null <"$S/holder.pid" || fallback
read -r -a st 2>/dev/null <"/proc/$pid/stat" || fallback
[[ ${st[21]} == "$start" && ${st[2]} != Z ]] || fallback
# Hold the namespaces and the root open, so a holder dying from here on cannot
# make the call fail half-way.
{ exec 94<"/proc/$pid/root" 95<"/proc/$pid/ns/user" 96<"/proc/$pid/ns/mnt"; } 2>/dev/null || fallback
: >"$S/last-used"

if [[ -n $OUT ]]; then exec 97>"$OUT" || exit 125; fi

# In the holder's user and mount namespaces (root and cwd are the overlay's),
# a fresh pid namespace per call: when this process dies, however it dies,
# --kill-child takes the call's whole process tree with it.
exec nsenter --user=/proc/self/fd/95 --mount=/proc/self/fd/96 \
    --root=/proc/self/fd/94 --wd=/proc/self/fd/94 -- \
    unshare --pid --fork --kill-child --mount-proc --propagation unchanged -- \
    /bin/bash -c '
if ! cd -- "$1" 2>/dev/null; then
    printf "workspace: %s does not exist in the sandbox; running in /\n" "$1" >&2
    cd /
fi
unset WORKSPACE_NO_FALLBACK
__ws_cmd=$2
shift 2
# Not in this shell: as the pid namespace'"'"'s init it would ignore the signals
# (TERM, INT, HUP) that a caller sends to stop the command.
# Job control: the command runs in a process group of its own, so `kill 0` in it
# cannot signal the caller'"'"'s group (the client'"'"'s shell); callers that stop a
# command signal its processes one by one (Claude Code) or the pid namespace dies.
set -m
(
    { : >&97; } 2>/dev/null && trap "pwd -P >&97" EXIT
    eval "unset __ws_cmd; $__ws_cmd"
)
exit $?' /bin/bash "$CWD" "$CMD"

#!/bin/bash
# The per-call entry of the try engine: the lean path every sandboxed Bash call
# takes. No Python: bash builtins plus flock, find and unshare, then try.
#
# Usage: try_enter.sh SANDBOX SESSION PYTHON TRY FLAG CWD CWD_OUT COMMAND
#   SANDBOX  the session's sandbox, try's DIR (upperdir/, workdir/, temproot/, ws/)
#   SESSION  the session id, for the fallback below
#   PYTHON   the interpreter that has workspace installed, for the fallback
#   TRY      the try script
#   FLAG     -N (try main) or -D (try v0.2.0): "work in DIR"
#   CWD      working directory inside the sandbox ("" = this process's)
#   CWD_OUT  file that receives the final working directory ("" = none)
#   COMMAND  a bash script, run as by `bash -c`
#
# Why the detours:
# - try writes its scripts and mount plumbing into DIR (main) and creates and
#   removes entries in DIR/temproot on every call, and two overlay mounts of one
#   upper directory corrupt each other's copy-ups ("Directory not empty"). So
#   calls on one sandbox run one at a time, under an flock, and the temproot
#   debris of an earlier call that died is removed first (try calls a sandbox
#   with files in temproot "invalid").
# - try joins its arguments with `echo "$@"` (dash's echo eats backslashes) and
#   never re-quotes them, so the argument we give it is a fixed string; the real
#   command travels in the environment.
# - try prints warnings (failed mounts) on stderr on every call: its stderr goes
#   to ws/try.log, the command gets the caller's stderr back through fd 98, and
#   the log is shown only when try failed before the command started.
# - try's own process tree does not die with its caller: a pid namespace with
#   --kill-child around it does, and unshare dies with this script (pdeathsig:
#   SIGKILL of the caller included). Unprivileged, that takes a user namespace,
#   and try nests its own inside it. unshare is not exec'd so that its own
#   failure (namespaces refused) becomes 125 with a reason, not its exit 1.
# Exit 125: the sandbox could not be entered (with a reason on stderr);
# otherwise the command's status.
S=$1 SESSION=$2 PY=$3 TRY=$4 FLAG=$5 CWD=${6:-$PWD} OUT=$7 CMD=$8
WS=$S/ws

fail() {
    echo "workspace: the try sandbox of session $SESSION cannot be entered: $*" >&2
    exit 125
}

fallback() {
    if [[ -n $WORKSPACE_NO_FALLBACK ]]; then
        echo "workspace: the try sandbox of session $SESSION is not prepared" >&2
        exit 125
    fi
    exec "$PY" -P -m manager run --session "$SESSION" --cwd "$CWD" ${OUT:+--cwd-out "$OUT"} -c "$CMD"
}

[[ -d $WS/tmp && -f $WS/hide.list ]] || fallback   # hide.list: prepare ran (manager/hide.py)
{ exec 9>"$WS/lock"; } 2>/dev/null || fail "cannot open its lock $WS/lock"
if ! flock -w 2 9; then
    echo "workspace: waiting for another command in this try sandbox (try runs one at a time)" >&2
    flock 9 || fail "cannot lock $WS/lock"
fi
# Debris of a call that died: try refuses a temproot holding anything but
# directories. Looked for in-process (globstar does not follow symlinks), so
# the usual clean case costs no extra process.
shopt -s globstar dotglob nullglob
for f in "$S"/temproot/**; do
    if [[ -L $f || ! -d $f ]]; then
        find "$S/temproot" -xdev -mindepth 1 -depth ! -type d -delete 2>/dev/null
        break
    fi
done
leftovers=("$WS"/tmp/*)
(( ${#leftovers[@]} )) && rm -rf -- "${leftovers[@]}"
shopt -u globstar dotglob nullglob
: >"$WS/last-used"
if [[ -n $OUT ]]; then { exec 97>"$OUT"; } 2>/dev/null || fail "cannot write $OUT"; fi
{ exec 96>"$WS/started"; } 2>/dev/null || fail "cannot write $WS/started"
exec 98>&2

# Restored inside: the caller's TMPDIR (try v0.2.0 leaks its mktemp files, so
# they go to ws/tmp) and TRY_SHELL.
export __WS_TMPDIR=${TMPDIR-} __WS_TMPDIR_SET=${TMPDIR+1} __WS_TRY_SHELL=${TRY_SHELL-}
export __WS_TRY_SHELL_SET=${TRY_SHELL+1} __WS_CWD=$CWD __WS_CMD=$CMD
export TMPDIR=$WS/tmp TRY_SHELL=/bin/bash
unset WORKSPACE_NO_FALLBACK

# What try runs (as root of its namespaces, after its own `cd`): back to the
# caller's stderr and environment, into CWD, the command in a subshell so that
# signals reach it; its final directory goes to fd 97.
export __WS_INNER='
printf 1 >&96
exec 96>&- 9>&- 2>&98 98>&-
# No descriptor but 0-2 for the command (ours, try'"'"'s, the caller'"'"'s); 97, the report,
# only for the exit trap (bash keeps a close-on-exec copy). try is no boundary anyway.
for __ws_fd in /proc/self/fd/*; do
    __ws_fd=${__ws_fd##*/}
    [[ $__ws_fd == +([0-9]) ]] && ((__ws_fd > 2 && __ws_fd != 97)) && { exec {__ws_fd}>&-; } 2>/dev/null
done
unset __ws_fd
unset EXECID try_remove_log try_mount_log TMPDIR TRY_SHELL
[[ -n $__WS_TMPDIR_SET ]] && export TMPDIR=$__WS_TMPDIR
[[ -n $__WS_TRY_SHELL_SET ]] && export TRY_SHELL=$__WS_TRY_SHELL
if ! cd -- "$__WS_CWD" 2>/dev/null; then
    if [[ -n $__WS_CWD_ELSE ]] && cd -- "$__WS_CWD_ELSE" 2>/dev/null; then   # the client'"'"'s: see manager.claude.rewrite.CWD_ELSE
        printf "workspace: the directory the last command reported ending in does not exist in the sandbox; starting in %s\n" "$__WS_CWD_ELSE" >&2
    else
        printf "workspace: %s does not exist in the sandbox; the command did not run\n" "$__WS_CWD" >&2
        exit 125
    fi
fi
__ws_cmd=$__WS_CMD
unset __WS_INNER __WS_CMD __WS_CWD __WS_CWD_ELSE __WS_TMPDIR __WS_TMPDIR_SET __WS_TRY_SHELL __WS_TRY_SHELL_SET
# Job control: the command runs in a process group of its own, so `kill 0` in it
# cannot signal the process group of the caller (the client shell).
set -m
(
    { : >&97; } 2>/dev/null && trap "pwd -P >&97" EXIT
    eval "unset __ws_cmd; $__ws_cmd" 97>&-
)
exit $?'

# The one line try runs: in place when try's shell is bash (main, with
# TRY_SHELL), else (v0.2.0 sources it with /bin/sh) in a bash of its own.
LINE='if [ -n "$BASH_VERSION" ]; then eval "$__WS_INNER"; else exec /bin/bash -c "$__WS_INNER"; fi'

# pid 1 of the new namespace (sh: starts fastest): runs try, reports try's own failures.
# A pid namespace needs CAP_SYS_ADMIN: real root has it, others get it in a user namespace.
cd / || fail "cannot enter /"
USERNS=(--user --map-root-user)
(( EUID == 0 )) && USERNS=()
# try v0.2.0 now and then fails to mount /tmp right after the previous call's
# overlay went away (its scripts live there): it never started the command,
# so running it again is safe.
# What the session hides (manager/hide.py, written by prepare): try's own -i PATH each.
HIDE=()
if [[ -s $WS/hide.list ]]; then
    while IFS= read -r -d "" __ws_line; do HIDE+=(-i "${__ws_line:2}"); done <"$WS/hide.list"   # NUL-ended
fi
setpriv --pdeathsig KILL unshare "${USERNS[@]}" --pid --fork --kill-child -- /bin/sh -c '
try=$1 flag=$2 dir=$3 ws=$4 line=$5; shift 5
for attempt in 1 2 3; do
    "$try" "$@" "$flag" "$dir" "$line" 2>"$ws/try.log"
    rc=$?
    [ -s "$ws/started" ] && exit $rc
    find "$dir/temproot" -xdev -mindepth 1 -depth ! -type d -delete 2>/dev/null
    sleep 0.1
done
echo "workspace: try failed before running the command (exit $rc):" >&2
tail -n 5 "$ws/try.log" >&2
exit 125' sh "$TRY" "$FLAG" "$S" "$WS" "$LINE" "${HIDE[@]}"
rc=$?
# Nothing started and not try's own report (125): unshare itself failed, its message is above.
[[ -s $WS/started ]] || (( rc == 125 )) || fail "unshare ${USERNS[*]} --pid failed (exit $rc)" \
    "(are user namespaces allowed? see \`workspace doctor --engine try\`)"
exit $rc

#!/bin/bash
# The per-call entry of the podman and docker engines: the lean path every
# sandboxed Bash call takes. Bash builtins plus one `docker exec` (or `podman
# exec`) into the session's long-lived container; no Python.
#
# Usage: container_enter.sh CLI CTR SANDBOX SESSION PYTHON CWD CWD_OUT TIMEOUT USER COMMAND
#   CLI      the engine's client (docker or podman, full path)
#   CTR      the session's container name
#   SANDBOX  the session's sandbox directory (container.pid, calls/, running/)
#   SESSION  the session id, for the fallback below
#   PYTHON   the interpreter that has workspace installed, for the fallback
#   CWD      working directory inside the container ("" = this process's)
#   CWD_OUT  file that receives the final working directory ("" = none)
#   TIMEOUT  seconds ("" = none); then the call's whole tree is killed, exit 124
#   USER     uid:gid the command runs as (the host user's, so the upper dir stays theirs)
#   COMMAND  a bash script, run as by `bash -c`
#
# Exit status: the command's (128+N when killed by signal N), 124 on timeout,
# 125 when the container could not run the command (the engine's error is on
# stderr). It never runs COMMAND on the host: when the container is not running
# it hands over to `workspace run`, which starts one.
#
# Exec clients neither forward signals nor kill the exec'd process when they
# die, so killing goes through the image's ws-exec: the call runs as its own
# session marked WS_CALL_ID, and `ws-exec --kill ID` from a second exec kills
# the tree. On SIGTERM/SIGINT/SIGHUP this script does that itself; when it is
# SIGKILLed, a detached watcher (reading a pipe that closes when this script
# dies) does it.
CLI=$1 CTR=$2 S=$3 SESSION=$4 PY=$5 CWD=${6:-$PWD} OUT=$7 T=$8 U=$9 CMD=${10}
GRACE=1   # seconds between TERM and KILL; callers such as Claude Code KILL after ~1.5 s

fallback() {
    if [[ -n $WORKSPACE_NO_FALLBACK ]]; then
        echo "workspace: the container of session $SESSION is not running" >&2
        exit 125
    fi
    exec "$PY" -P -m manager run --session "$SESSION" --cwd "$CWD" ${OUT:+--cwd-out "$OUT"} \
        ${T:+--timeout "$T"} -c "$CMD"
}

# A remote engine (issue 26): where it is, as prepare found it (the caller's shell, e.g. the
# agent's, need not name it). One VAR=value a line: DOCKER_HOST, CONTAINER_HOST, ..._CONTEXT.
if [[ -r $S/engine.env ]]; then
    unset DOCKER_HOST DOCKER_CONTEXT CONTAINER_HOST CONTAINER_CONNECTION
    while IFS= read -r kv; do [[ $kv == *=* ]] && export "${kv?}"; done <"$S/engine.env"
fi

# The container's init by host pid and start time, as prepare recorded them
# (pid 0: the engine runs in a VM, nothing to check on this host).
read -r pid start _ made 2>/dev/null <"$S/container.pid" || fallback
if [[ $pid != 0 ]]; then
    read -r -a st 2>/dev/null <"/proc/$pid/stat" || fallback
    [[ ${st[21]} == "$start" ]] || fallback
fi
# Setting `network` changed since the container started: `workspace run` replaces it
# (egress/launch.py). A list of hosts: the session's proxy runs on the host (container/egress.py),
# checked as the container is (a dead one is restarted there); calls reach it through the
# forwarder on 127.0.0.1:3128 inside (the same port takes SOCKS5). Off: it runs too, as the
# recorder of direct attempts only (container/direct.py).
[[ -e $S/network.stale ]] && fallback
if [[ -e $S/egress.pid ]]; then
    read -r epid estart emode _ 2>/dev/null <"$S/egress.pid" || fallback
    read -r -a st 2>/dev/null <"/proc/$epid/stat" || fallback
    [[ ${st[21]} == "$estart" && ${st[2]} != Z ]] || fallback   # a zombie: pid 1 may reap nothing
    hp=http://127.0.0.1:3128 sp=socks5h://127.0.0.1:3128
    [[ $emode == off ]] ||   # off: the proxy only records direct attempts; nothing to point at
    export HTTP_PROXY=$hp HTTPS_PROXY=$hp ALL_PROXY=$sp http_proxy=$hp https_proxy=$hp \
        all_proxy=$sp NO_PROXY=localhost,127.0.0.1,::1 no_proxy=localhost,127.0.0.1,::1
fi

# Environment: the caller's, minus what describes the host (paths that do not
# exist in the container, agent sockets, engine control) and credentials. `-e
# NAME` makes the client copy the value, so no value shows on a command line.
# A value made of absolute paths passes only when each is shown inside as on the
# host: the image's system directories, or a path listed in $S/visible (the
# project, $HOME, /tmp, CA files); PIP_FIND_LINKS=/opt/wheels would name nothing.
visible=()
[[ -r $S/visible ]] && mapfile -t visible <"$S/visible"
shown() {
    local - p v IFS=:
    set -f
    [[ ${#visible[@]} == 0 ]] && return 0   # no list (volume mode): not filtered
    for p in $1; do
        case $p in /usr|/usr/*|/bin|/bin/*|/sbin|/sbin/*|/lib|/lib/*|/lib64/*|/etc|/etc/*|/dev/*|/proc/*) continue ;; esac
        for v in "${visible[@]}"; do [[ $p == "$v" || $p == "$v"/* ]] && continue 2; done
        return 1
    done
}
# Volume mode: the container holds CAP_SYS_ADMIN for its own overlay mount, and every exec
# starts with it. A call running as root drops it first (then it can neither unmount the
# overlay nor remount the read-only project), and through nothing the call before it could
# have replaced: setpriv, its libraries and loader from the read-only copy made as the
# container started (container/upper.py, PROLOGUE_DIR), in the C locale (no locale file of
# the container's is read); the container's own programs run only after the drop, and `env`
# there gives the call its LC_ALL back.
# Every call of a container made for volume mode (as recorded when it was made: the `volume`
# mark goes before the container does, while commit releases it), whatever its uid: another
# uid's call keeps the capability in its bounding set (a setuid-root program of the image,
# sudo in a devcontainer, would get it back), and rootless podman hands it to other uids as
# an ambient one. So every call starts as root, drops it from the bounding set, and only
# then becomes the caller (uid, gid, the groups the image gave the caller as the container
# started: container/upper.py GROUPS), with no inheritable or ambient capability left.
# Two steps: setpriv reads a uid or group as a name first (getpwnam: glibc's NSS reads the
# container's nsswitch.conf and loads its libnss modules, which a root call may have
# replaced), so the drop comes first, by a setpriv that looks nothing up; the lookups of
# the second run without the capability (attack pass 8).
drop=() drop_env=() as=$U
if [[ $made == volume || -e $S/volume ]]; then
    t=/.ws-prologue restore=(-u LC_ALL) as=0:0
    setpriv=("$t/ld.so" --inhibit-cache --library-path "$t" "$t/setpriv")
    drop=("${setpriv[@]}" --bounding-set -sys_admin --)
    if [[ ${U%%:*} != 0 ]]; then
        groups=
        read -r groups 2>/dev/null <"$S/call.groups"
        [[ $groups =~ ^[0-9]+(,[0-9]+)*$ ]] || groups=${U#*:}
        drop+=("${setpriv[@]}" --reuid "${U%%:*}" --regid "${U#*:}" --groups "$groups"
               --inh-caps=-all --ambient-caps=-all --)
    fi
    case ${LC_ALL-unset} in C|C.*|POSIX|"") restore=("LC_ALL=$LC_ALL") ;; esac   # as below
    drop+=(env "${restore[@]}")
    drop_env=(-e LC_ALL=C)
fi
envs=()
for name in $(compgen -e); do
    case $name in
        PATH|HOSTNAME|SHLVL|PWD|OLDPWD|_|TMPDIR|TMP|TEMP|LD_*|PYTHONHOME|VIRTUAL_ENV) continue ;;
        XDG_RUNTIME_DIR|DBUS_*|DISPLAY|WAYLAND_*|SSH_*|GPG_*|KUBECONFIG|BASH_*) continue ;;
        DOCKER_*|CONTAINER_*|PODMAN_*|WORKSPACE_*|__WS_*) continue ;;
        *TOKEN*|*SECRET*|*PASSWORD*|*PASSWD*|*API_KEY*|*APIKEY*|*CREDENTIAL*) continue ;;
        ANTHROPIC_*|AWS_*|AZURE_*) continue ;;
        # Only locales every image has: others make bash warn on every call.
        LANG|LANGUAGE|LC_*) case ${!name} in C|C.*|POSIX|"") ;; *) continue ;; esac
                            [[ $name == LC_ALL && -n ${drop[*]} ]] && continue ;;   # restored
    esac
    # HOME always: made inside where it is not overlaid.
    [[ $name != HOME && ${!name} == /* ]] && ! shown "${!name}" && continue
    envs+=(-e "$name")
done

id=$SESSION-$$-${EPOCHREALTIME/[.,]/}
mark=$S/calls/$id.m   # written by the call when it starts, and its final cwd when it ends
kept=$S/marks/$id.m   # where the host reads it (final_cwd)
# The record commit and discard wait for: this script's pid and start time, kept where the
# container cannot write (calls/ is the container's: what it holds proves nothing).
running=$S/running/$id
read -r -a me </proc/$$/stat
{ printf '%s %s\n' $$ "${me[21]}" >"$running"; } 2>/dev/null ||
    { mkdir -p "$S/running" && printf '%s %s\n' $$ "${me[21]}" >"$running"; } || {
    echo "workspace: cannot record the call in $S/running; the command did not run" >&2
    exit 125
}
# As the call's own uid: root in the container (no CAP_SYS_PTRACE) cannot read the environ of
# another uid's processes, so it would miss the call's setsid escapees.
kill_call() {
    "$CLI" exec -u "$as" "${drop_env[@]}" "$CTR" "${drop[@]}" ws-exec --kill "$id" "$1" "$GRACE" \
        >/dev/null 2>&1 8>&- 3<&-
}

# The watcher: detached (reparented at once, so tree and group kills miss it),
# it reads until this script says "done" or dies; on death it kills the call.
exec 8> >( (trap '' INT TERM HUP QUIT
            read -r msg
            [[ $msg == done ]] || kill_call TERM
            rm -f "$mark" "$kept" "$S/calls/$id" "$running") <&0 >/dev/null 2>&1 3<&- & )

# The call. Inside: mark the start, cd (a directory may exist only in the
# upper layer), record the final cwd on exit, run the script with no
# positional arguments left over. The client ignores the signals meant for
# the command: it must stay to report the command's real status.
inner='m=/run/ws-calls/$WS_CALL_ID.m
: >"$m"
if ! cd -- "$1" 2>/dev/null; then
    if [[ -n $4 ]] && cd -- "$4" 2>/dev/null; then   # the client'"'"'s: see manager.claude.rewrite.CWD_ELSE
        printf "workspace: the directory the last command reported ending in does not exist in the sandbox; starting in %s\n" "$4" >&2
    else
        printf "workspace: %s does not exist in the sandbox; the command did not run\n" "$1" >&2
        exit 125
    fi
fi
[[ -n $3 ]] && trap "pwd -P >$m" EXIT
__ws_cmd=$2
set --
unset m
eval "unset __ws_cmd; $__ws_cmd"'
exec 3<&0
(trap '' INT TERM HUP QUIT
 exec "$CLI" exec -i -u "$as" "${envs[@]}" "${drop_env[@]}" "$CTR" "${drop[@]}" \
     ws-exec --id "$id" --host-pid $$ -- /bin/bash -c "$inner" bash "$CWD" "$CMD" "$OUT" "$__WS_CWD_ELSE") <&3 3<&- 8>&- &
client=$!
exec 3<&-
sleeper=
if [[ -n $T ]]; then sleep "$T" >/dev/null 2>&1 8>&- & sleeper=$!; fi

killed=
on_signal() { [[ -n $killed ]] || { killed=$1; kill_call "$2"; }; }
trap 'on_signal 15 TERM' TERM
trap 'on_signal 2 INT' INT
trap 'on_signal 1 HUP' HUP

timed_out=
while :; do
    who=
    wait -n -p who "$client" ${sleeper:+"$sleeper"}; rc=$?
    [[ $who == "$client" || $rc == 127 ]] && break
    if [[ -n $sleeper && $who == "$sleeper" ]]; then
        timed_out=1 sleeper=
        on_signal 15 TERM
    fi
    # else: a trapped signal interrupted wait; keep waiting for the client
done
[[ -n $sleeper ]] && kill "$sleeper" 2>/dev/null
# A signalled client (callers such as Claude Code signal every descendant) exits 0
# whatever the command did; the command itself died of the signal we passed on.
[[ -n $killed && $rc == 0 ]] && rc=$((128 + killed))

# -- the call's mark, read on the host (issue 20) ----------------------------------------
# calls/ is the container's to write: the host follows no name there, and opens nothing
# the container could swap (a device's open acts on the host: attack pass 7). The mark is
# first renamed into marks/, which only the host writes (a rename moves the entry itself,
# whatever it is, and opens nothing; same file system: no copy), and opened there only
# when it is a regular file, which nothing can now replace. A line of at most 4,096 bytes
# naming an absolute path counts. Else: no final cwd.
final_cwd() {
    local fd
    line=
    mv -fT -- "$mark" "$kept" 2>/dev/null 8>&- ||
        { mkdir -p "$S/marks" && mv -fT -- "$mark" "$kept"; } 2>/dev/null 8>&- || return 1
    if [[ ! -f $kept || -L $kept ]]; then
        [[ -d $kept && ! -L $kept ]] && rm -rf -- "$kept" 8>&-
        return 1                                  # refused before opening: a FIFO would block
    fi
    { exec {fd}<"$kept"; } 2>/dev/null || return 1
    IFS= read -r -n 4097 line <&"$fd"
    exec {fd}<&-
    [[ $line == /* && ${#line} -le 4096 ]] || { line=; return 1; }
}
# --------------------------------------------------------------------------------------

# A remote engine (issue 26): the mark is in the container's memory, fetched only when it
# is needed (the final cwd, or whether the command ran at all), to keep one exec per call.
remote_ran=
if [[ -e $S/remote ]]; then
    if [[ -n $OUT || $rc -ge 125 ]]; then
        "$CLI" exec -u "$as" "${drop_env[@]}" "$CTR" "${drop[@]}" sh -c 'cat "$1" && rm -f "$1"' sh "/run/ws-calls/$id.m" \
            >"$mark" 2>/dev/null 8>&- </dev/null || rm -f "$mark"
    else
        remote_ran=1   # the exec client reports its own failures as 125 and up
    fi
fi
if [[ -z $remote_ran && ! -e $mark && ! -L $mark ]]; then
    [[ -n $timed_out || -n $killed ]] || {
        echo "workspace: $(basename "$CLI") could not run the command in container $CTR (exit $rc)" >&2
        rc=125
    }
elif [[ -n $OUT ]] && final_cwd; then
    printf '%s\n' "$line" >"$OUT"
fi
echo done >&8
[[ -n $timed_out ]] && exit 124
exit "$rc"

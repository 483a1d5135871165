# The conformance probe: what a command sees, one "key=value" line per observation.
# Run as `bash -c "$(cat probe.sh)" probe PHASE TAG`, natively and in each engine, in the
# project; every path it names carries TAG, which the test replaces before comparing.
#   start    the session's first call: starts a background "server", writes files
#   change   a sandboxed change to a tracked file (for git status/diff)
#   observe  everything below
phase=$1 T=$2
say() { printf '%s=%s\n' "$1" "${2//$'\n'/|}"; }
lines() {  # KEY COMMAND...: each output line as KEY.N (a pipe: /dev/fd may be missing)
    local key=$1
    shift
    "$@" 2>&1 | { n=0; while IFS= read -r line; do say "$key.$n" "$line"; n=$((n + 1)); done; }
}
content() { if [[ -e $1 ]]; then say "$2" "$(paste -sd '|' "$1" 2>&1)"; else say "$2" missing; fi; }
case $phase in
start)
    (exec -a "$T-server" sleep 120) </dev/null >/dev/null 2>&1 &
    for dir in "$PWD" "$HOME" /tmp /var/tmp; do echo made-inside >"$dir/$T-made.txt"; done
    exit 0 ;;
change)
    echo changed-inside >>tracked.txt
    exit 0 ;;
esac
say cwd "$PWD"
for where in project:"$PWD" home:"$HOME" tmp:/tmp var_tmp:/var/tmp; do
    name=${where%%:*} dir=${where#*:}
    for f in old new changed replaced made; do content "$dir/$T-$f.txt" "file.$name.$f"; done
    touch "$dir/$T-own.txt" && say "owner_of_new_file.$name" "$(stat -c %u:%g "$dir/$T-own.txt")"
done
say dev_fd "$(ls /dev/fd/ >/dev/null 2>&1 && echo yes || echo no)"
say mode./tmp "$(stat -c %a /tmp)"
say mode./var/tmp "$(stat -c %a /var/tmp)"
lines git_status git status --porcelain
lines git_diff git diff
say id.u "$(id -u)"
say id.g "$(id -g)"
say id.G "$(id -G)"
say id.un "$(id -un 2>&1)"
say umask "$(umask)"
lines ulimit ulimit -a
say locale.LANG "${LANG-unset}"
say locale.LC_ALL "${LC_ALL-unset}"
say locale.charmap "$(locale charmap 2>&1)"
say hostname "$(hostname 2>&1)"
for var in HOME USER LOGNAME SHELL PATH TMPDIR TERM; do say "env.$var" "${!var-unset}"; done
say dev_shm.mode "$(stat -c %a /dev/shm 2>&1)"
content "/dev/shm/$T-old.txt" dev_shm.file_from_outside
say dev_shm.writable "$( (echo x >"/dev/shm/$T-w" && rm "/dev/shm/$T-w" && echo yes) 2>/dev/null || echo no)"
pgrep -f "^$T-host" >/dev/null && say process.host_process visible || say process.host_process invisible
pgrep -f "^$T-server" >/dev/null && say process.from_earlier_call visible || say process.from_earlier_call invisible
say process.ps_sees_more_than_20 "$( (($(ps -e --no-headers | wc -l) > 20)) && echo yes || echo no)"
connect() {  # unix socket PATH: what a client gets
    python3 - "$1" <<'PY' 2>&1
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1]); print("connected")
except OSError as e:
    print(type(e).__name__)
PY
}
say socket.outside_server "$(connect "/tmp/$T-sock")"
say socket.stale_removed "$(rm "/tmp/$T-stale" 2>&1 && echo yes)"
if [[ -S /var/run/docker.sock ]]; then
    say socket.docker "$(connect /var/run/docker.sock)"
    say socket.docker.group "$(stat -c %G /var/run/docker.sock)"
    say socket.docker.client "$(docker version --format ok 2>&1 | tail -n 1)"
else
    say socket.docker "no socket"
fi

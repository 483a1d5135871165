# Shared by the plugin's launchers (sourced): find the Python that has workspace.
# Builtins only (no subshells): this runs before every hook.
#
# Order: $WORKSPACE_PYTHON; this checkout's .venv (a development clone);
# the plugin's own environment under $CLAUDE_PLUGIN_DATA once it is ready; an
# installed `workspace` command (pip, pipx): the interpreter on its #! line.
# Sets WS_ROOT (the plugin root) and WS_PY (empty when none is found).

WS_ROOT=${CLAUDE_PLUGIN_ROOT:-${BASH_SOURCE[0]%/bin/*}}
WS_DATA=${CLAUDE_PLUGIN_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/workspace-plugin}
WS_VENV=$WS_DATA/venv
WS_PY=

ws_find_python() {
    local candidate dir line
    for candidate in "$WORKSPACE_PYTHON" "$WS_ROOT/.venv/bin/python"; do
        if [[ -n $candidate && -x $candidate ]]; then WS_PY=$candidate; return 0; fi
    done
    if [[ -f $WS_VENV/.ready && -x $WS_VENV/bin/python ]]; then
        WS_PY=$WS_VENV/bin/python; return 0
    fi
    local IFS=:
    for dir in $PATH; do
        [[ -n $dir && -x $dir/workspace && -f $dir/workspace ]] || continue
        IFS= read -r line <"$dir/workspace" || continue
        line=${line#\#!}
        line=${line%% *}
        if [[ ${line##*/} == python* && -x $line ]]; then WS_PY=$line; return 0; fi
    done
    return 1
}

ws_json_string() {   # a bash string as a JSON string literal, in WS_JSON
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/\\t}
    WS_JSON="\"$s\""
}

ws_bootstrap_state() {   # installing | failed | none
    if [[ -d $WS_DATA/install.lock ]]; then echo installing
    elif [[ -f $WS_DATA/install.failed ]]; then echo failed
    else echo none
    fi
}

ws_start_bootstrap() {
    mkdir -p "$WS_DATA" 2>/dev/null || return 1
    mkdir "$WS_DATA/install.lock" 2>/dev/null || return 0     # already running
    rm -f "$WS_DATA/install.failed"
    setsid bash "$WS_ROOT/bin/bootstrap" "$WS_ROOT" "$WS_DATA" </dev/null \
        >"$WS_DATA/install.log" 2>&1 &
}

# The resident service (manager/service/server.py): the hook's answer without a Python start.
# ws_service_answer EVENT reads the payload into WS_PAYLOAD and prints the service's answer
# (status 0), or returns 1 for the Python hook to answer: no service (one is started for
# the next call), WORKSPACE_SERVICE=0, no answer within WORKSPACE_SERVICE_TIMEOUT seconds,
# an answer without the service's token (another process on its port), or FALLBACK.
ws_service_answer() {
    local LC_ALL=C port ctok stok pid state line answer fd wait=${WORKSPACE_SERVICE_TIMEOUT:-3}
    WS_PAYLOAD=
    # -N: in blocks (-d '' reads a pipe a byte per system call); bytes: LC_ALL=C above.
    IFS= read -r -N 1073741824 WS_PAYLOAD
    ws_service_wanted || return 1
    # It serves Bash calls only (the file tools' hooks may start work in the sandbox): do
    # not pay its round trip for an answer of FALLBACK. (Only a shortcut: it checks again.)
    [[ $WS_PAYLOAD =~ \"tool_name\"[[:space:]]*:[[:space:]]*\"Bash\" ]] || return 1
    ws_service_endpoint || { ws_service_start; return 1; }
    # A stopped service (^Z, SIGSTOP) would take each call's connection into its queue and
    # answer none: skip it.
    [[ $state == [Tt] ]] && return 1
    { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || { ws_service_start; return 1; }
    printf 'WS1 %s %s %s %s\n%s' "$ctok" "$1" "$$" "${#WS_PAYLOAD}" "$WS_PAYLOAD" >&"$fd" 2>/dev/null
    IFS= read -r -t "$wait" -u "$fd" line
    if [[ $line != "$stok" ]]; then exec {fd}>&-; return 1; fi
    # The service sends its answer at once, after its token, ending in a NUL: no -t (with
    # it, bash reads each byte behind a pselect), and no wait for the close (a service
    # stopped before it closes). One killed mid-answer closes the socket: no NUL, refused.
    IFS= read -r -d '' -u "$fd" answer || { exec {fd}>&-; return 1; }
    exec {fd}>&-
    [[ $answer == '{'*'}' || -z $answer || $answer == FALLBACK ]] || return 1
    [[ $answer == FALLBACK ]] && return 1
    [[ -z $answer ]] || printf '%s\n' "$answer"
    return 0
}

# The read-only review commands (status, diff, budget) through the service
# (manager/service/commands.py): a child of it runs the CLI's own code, already imported,
# writing straight into this process's stdout and stderr, so only when both are pipes or
# /dev/null (a terminal gets colour and a pager, a file an offset: the CLI's own). Status 0
# with WS_RC set: it ran; 1: nothing of it ran, the CLI is to run it.
ws_service_command() {
    local LC_ALL=C port ctok stok pid state line fd out err arg len wait=${WORKSPACE_SERVICE_TIMEOUT:-3}
    ws_service_wanted && ws_plain_output 1 && ws_plain_output 2 || return 1
    ws_service_endpoint && [[ $state != [Tt] ]] || return 1
    { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
    # The outputs as copies the request names: a redirection (the printf below) moves fd 1
    # for as long as it runs, and the service may open it meanwhile.
    exec {out}>&1 {err}>&2
    len=$((${#WS_ROOT} + ${#out} + ${#err} + 3))
    for arg; do len=$((len + ${#arg} + 1)); done
    { printf 'WS1 %s CLI %s %s\n' "$ctok" "$$" "$len"
      printf '%s\0' "$WS_ROOT" "$out" "$err" "$@"; } >&"$fd" 2>/dev/null
    IFS= read -r -t "$wait" -u "$fd" line
    if [[ $line != "$stok" ]]; then exec {fd}>&-; return 1; fi
    # Run from here on: no timeout (a diff of 100,000 files takes its time).
    IFS= read -r -d '' -u "$fd" line
    exec {fd}>&-
    [[ $line == FALLBACK ]] && return 1
    if [[ $line != +([0-9]) ]]; then
        printf 'workspace: the service ended before the command did; run it again\n' >&2
        line=1
    fi
    WS_RC=$line
}

ws_plain_output() { [[ -p /dev/fd/$1 ]] || [[ -c /dev/fd/$1 && ! -t $1 ]]; }

# SessionStart starts the service when none runs, so that the session's first Bash call
# finds it up (it starts in the background; SessionStart itself is answered by Python).
ws_service_warm() {
    local port ctok stok pid state
    ws_service_wanted || return 0
    ws_service_endpoint || ws_service_start
}

# Whether the service is to be asked at all: WORKSPACE_SERVICE=0 turns it off, and the
# tests' guard keeps it from the default state root.
ws_service_wanted() {
    [[ ${WORKSPACE_SERVICE:-1} != 0 && ( -n $XDG_STATE_HOME || -z $WORKSPACE_FORBID_DEFAULT_STATE ) ]]
}

# The running service's endpoint into the caller's port, ctok, stok and pid, and its
# process's state into state (the word after "(comm)" in /proc/PID/stat); 1 when none runs.
ws_service_endpoint() {
    { read -r port ctok stok pid <"${XDG_STATE_HOME:-$HOME/.local/state}/workspace/service/endpoint" &&
        read -r _ _ state _ <"/proc/$pid/stat"; } 2>/dev/null && [[ $port =~ ^[0-9]+$ ]]
}

ws_service_start() {   # detached: it outlives this hook and the client
    [[ -n $WS_PY && ${WORKSPACE_SERVICE:-1} != 0 ]] || return 0
    setsid "$WS_PY" -I -S -c 'import sys
sys.path.insert(0, sys.argv[1])
from manager.service.server import main
sys.exit(main(sys.argv[1:]))' "$WS_ROOT" </dev/null >/dev/null 2>&1 &
}

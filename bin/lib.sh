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

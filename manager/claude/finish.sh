# Sourced by a rewritten Bash command in Claude Code's own shell, right after the
# sandboxed call returned:   . finish.sh STATUS SESSION_DIR CWD_FILE STATE_DIR [SCRIPT_FILE]
#
# Claude Code tracks its working directory by running `pwd -P` in this shell after
# the command, and only when the command exited 0. So, only when STATUS is 0:
# move this shell to the sandbox's final directory, and record both directories
# for the next PreToolUse hook. Then return STATUS: `return`, never `exit`, so the
# client's trailing `pwd -P` still runs.
# The sandbox must not steer the client: its directory is followed only when it is
# the same physical path on the real filesystem (a directory that exists only in
# the overlay, or one reached here through a symlink the sandbox replaced, is
# not) and lies outside STATE_DIR (the physical state directory, which holds the
# sessions' upper directories: files the sandbox wrote). Otherwise the client
# stays where it was; the next call still starts in the sandbox's directory.
# Builtins only, each behind `\builtin`: the user's shell snapshot may define
# aliases or functions called cd, printf or read.
__ws_rc=$1 __ws_cwd= __ws_prev=$PWD
{ IFS= \builtin read -r -d '' __ws_cwd <"$3"; } 2>/dev/null
__ws_cwd=${__ws_cwd%$'\n'}
if [[ $__ws_rc == 0 && $__ws_cwd == /* ]]; then
    if \builtin cd -P -- "$__ws_cwd" 2>/dev/null; then
        if [[ $PWD != "$__ws_cwd" || $PWD == "$4" || $PWD == "$4"/* ]]; then
            \builtin cd -- "$__ws_prev" 2>/dev/null || \builtin cd /
        fi
    fi
    \builtin printf '%s\0%s\0' "$__ws_cwd" "$PWD" 2>/dev/null >|"$2/claude-cwd"
fi
# The report file stays: PostToolUse removes it with the call's record (an rm here is a fork
# and an exec on every call); a spilled script goes now (it holds the command).
[[ -z $5 ]] || \command rm -f -- "$5" 2>/dev/null
\builtin unset __ws_cwd __ws_prev
\builtin return "$__ws_rc"

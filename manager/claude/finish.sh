# Sourced by a rewritten Bash command in Claude Code's own shell, right after the
# sandboxed call returned:   . finish.sh STATUS SESSION_DIR CWD_FILE [SCRIPT_FILE]
#
# Claude Code tracks its working directory by running `pwd -P` in this shell after
# the command, and only when the command exited 0. So, only when STATUS is 0:
# move this shell to the sandbox's final directory (when it exists on the real
# filesystem; a directory that exists only in the overlay cannot be entered here)
# and record both directories for the next PreToolUse hook. Then return STATUS:
# `return`, never `exit`, so the client's trailing `pwd -P` still runs.
# Builtins only, each behind `\builtin`: the user's shell snapshot may define
# aliases or functions called cd, printf or read.
__ws_rc=$1 __ws_cwd=
{ IFS= \builtin read -r -d '' __ws_cwd <"$3"; } 2>/dev/null
__ws_cwd=${__ws_cwd%$'\n'}
if [[ $__ws_rc == 0 && $__ws_cwd == /* ]]; then
    \builtin cd -P -- "$__ws_cwd" 2>/dev/null
    \builtin printf '%s\0%s\0' "$__ws_cwd" "$PWD" 2>/dev/null >|"$2/claude-cwd"
fi
\command rm -f -- "$3" ${4:+"$4"} 2>/dev/null
\builtin unset __ws_cwd
\builtin return "$__ws_rc"

#!/bin/bash
# A short tour: sandbox a command, see what it changed, throw it away.
set -euo pipefail
WS="$(cd "$(dirname "$0")/.." && pwd)/.venv/bin/workspace"
demo=$(mktemp -d /tmp/workspace-demo.XXXXXX)
export XDG_STATE_HOME="$demo/state"
cd "$demo" && mkdir project && cd project && echo "hello" > README
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
cmd='echo changed >> README; mkdir build; touch build/out; touch /tmp/demo-side-effect'
say workspace run -- sh -c "'$cmd'"
"$WS" run -- sh -c "$cmd"
say "cat README   # the real file is untouched"; cat README
say workspace status; "$WS" status
say workspace diff; "$WS" diff
say workspace discard --yes; "$WS" discard --yes
say workspace status; "$WS" status
rm -rf "$demo"

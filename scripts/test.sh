#!/bin/bash
# Run the whole test suite (after scripts/setup.sh). As root, the tests marked `as_user` (the engine
# behaviour suite, the CLI flows, the real-client plugin e2e: see tests/conftest.py) also run as an
# ordinary account, $WORKSPACE_TEST_USER (default wstest, made by scripts/setup.d/60-testuser.sh; set
# it empty for the root run alone). The two passes run side by side, each as $WORKSPACE_TEST_PARTS
# pytest processes (conftest's --part: the test files dealt in turn; by default one per two
# cores from four cores on, else one: the two passes alone keep two cores busy, and more parts
# there only slowed them); the tests marked `alone` (they stop dockerd, which both passes use)
# run by themselves afterwards. Extra arguments go to every pytest run. Exit status: 0 only
# when every run passed; a pass that collects nothing fails (one of its parts may select nothing, and the
# `alone` run may, when the arguments name other tests).
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
user=${WORKSPACE_TEST_USER-wstest}
parts=${WORKSPACE_TEST_PARTS:-$(( $(nproc) > 3 ? $(nproc) / 2 : 1 ))}
[[ $parts =~ ^[1-9][0-9]*$ ]] || { echo "test.sh: WORKSPACE_TEST_PARTS is a count, not '$parts'" >&2; exit 2; }
logs=$(mktemp -d "${TMPDIR:-/tmp}/workspace-test.XXXXXX")
names=() codes=() summaries=()

# The last line of a pytest log that is its summary ("3 passed, 1 failed in 2.0s").
summary_of() {
    grep -E '(passed|failed|error|skipped|deselected|no tests ran).* in [0-9.]+s' "$1" | tail -n 1 |
        sed -E 's/^=+ //; s/ =+$//'
}

record() {   # NAME EXIT LOG
    names+=("$1") codes+=("$2")
    local line
    line=$(summary_of "$3")
    ((${2} == 5)) && line="${line:-no tests ran}: pytest collected no tests (exit 5), which is a failure here"
    summaries+=("${line:-no pytest summary (exit $2): see the output above}")
}

# A pass's exit status from its parts' (LOG-PREFIX): the first failure's, 5 only when no part
# collected anything.
parts_status() {
    local k rc status=5
    for ((k = 1; k <= parts; k++)); do
        rc=$(<"$1-$k.rc")
        ((rc == 5)) && continue
        ((status == 5 || status == 0)) && status=$rc
    done
    echo "$status"
}

# Every part's summary line summed ("12 passed, 1 failed"), for the pass's record.
parts_summary() {
    local k
    for ((k = 1; k <= parts; k++)); do summary_of "$1-$k.log"; done |
        grep -oE '[0-9]+ (passed|failed|errors?|skipped|xfailed|xpassed)' |
        awk '{n[$2] += $1} END {for (w in n) printf "%s%d %s", (s++ ? ", " : ""), n[w], w; print ""}'
}

# The root (or own) pass: part 1 in the foreground, shown as it runs; the others' logs after.
run_as_root_or_self() {   # WHAT [PYTEST ARGS...]
    local what=$1 started=$SECONDS k pids=()
    shift
    for ((k = 2; k <= parts; k++)); do
        ( .venv/bin/python -m pytest --part "$k/$parts" "$@" >"$logs/first-$k.log" 2>&1
          echo $? >"$logs/first-$k.rc" ) &
        pids+=($!)
    done
    .venv/bin/python -m pytest --part "1/$parts" "$@" 2>&1 | tee "$logs/first-1.log"
    echo "${PIPESTATUS[0]}" >"$logs/first-1.rc"
    ((${#pids[@]} == 0)) || wait "${pids[@]}"
    for ((k = 2; k <= parts; k++)); do
        echo "==> $(id -un), part $k of $parts"
        cat "$logs/first-$k.log"
    done
    record_parts "$(id -un) ($what, $parts parts, $((SECONDS - started)) s)" "$logs/first"
}

record_parts() {   # NAME LOG-PREFIX
    local rc line
    rc=$(parts_status "$2")
    names+=("$1") codes+=("$rc")
    line=$(parts_summary "$2")
    ((rc == 5)) && line="no tests ran: pytest collected no tests (exit 5), which is a failure here"
    summaries+=("${line:-no pytest summary (exit $rc): see the output above}")
}

# The outermost directory above the checkout that $user cannot enter (e.g. /root), or nothing.
closed_parent() {
    local dir=$repo closed=
    while [[ $dir != / ]]; do
        dir=$(dirname "$dir")
        runuser -u "$user" -- test -x "$dir" 2>/dev/null || closed=$dir
    done
    echo "$closed"
}

# Run "$@" (as root) where $user can reach the checkout at its own path: when a directory above
# it is closed to the user (a clone under /root), in a private mount namespace in which that
# directory is an empty tmpfs holding only the checkout, bound at the same path (every absolute
# path in .venv and .cache stays valid; nothing outside this run sees the change).
with_reachable_checkout() {
    local closed
    closed=$(closed_parent)
    if [[ -z $closed ]]; then "$@"; return; fi
    echo "==> $closed is closed to $user: its tests see only $repo there (private mount namespace)"
    unshare --mount --propagation private -- bash -euc '
        repo=$1 closed=$2; shift 2
        hold=$(mktemp -d /tmp/workspace-checkout.XXXXXX)
        mount --bind "$repo" "$hold"
        mount -t tmpfs -o mode=0755,size=1m workspace-path "$closed"
        mkdir -p "$repo"
        mount --bind "$hold" "$repo"
        umount "$hold" && rmdir "$hold"
        exec "$@"' with-reachable-checkout "$repo" "$closed" "$@"
}

# Why $user cannot run the tests from this checkout, or nothing.
user_blocked() {
    local uid home
    uid=$(id -u "$user" 2>/dev/null) || { echo "there is no user $user"; return; }
    home=$(getent passwd "$user" | cut -d: -f6)
    [[ -n $home && -d $home ]] || { echo "$user has no home directory"; return; }
    [[ -d /run/user/$uid && $(stat -c %U "/run/user/$uid") == "$user" ]] ||
        { echo "$user has no runtime directory /run/user/$uid"; return; }
    with_reachable_checkout runuser -u "$user" -- "$repo/.venv/bin/python" -c 'import manager, pytest' \
        >/dev/null 2>&1 ||
        echo "$user cannot run $repo/.venv/bin/python with workspace and pytest (an interpreter" \
             "under a private directory, e.g. pyenv in /root? scripts/setup.d/20-python.sh uses /usr/bin/python3)"
}

# Start the ordinary user's pass in the background as parts, setting user_pids (their output goes
# to their logs, shown when they end: see finish_as_user), or record why it cannot run.
start_as_user() {
    local uid home why var
    why=$(user_blocked)
    if [[ -n $why ]]; then
        printf 'test.sh: cannot run the tests as %s: %s.\n' "$user" "$why" >&2
        printf 'test.sh: run scripts/setup.sh (its step 60-testuser makes the account), or set\n' >&2
        printf '         WORKSPACE_TEST_USER= for the root run alone.\n' >&2
        names+=("$user") codes+=(1) summaries+=("not run: $why")
        return
    fi
    uid=$(id -u "$user")
    home=$(getent passwd "$user" | cut -d: -f6)
    user_basetemp=$(runuser -u "$user" -- mktemp -d "/tmp/workspace-test-$user.XXXXXX")
    # A login's environment, plus what selects how the tests run (CI, e2e, the checkout to import).
    local env=(HOME="$home" USER="$user" LOGNAME="$user" SHELL=/bin/bash LANG="${LANG:-C.UTF-8}"
               PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid")
    for var in $(compgen -e); do
        case $var in
            CI | PYTHONPATH | CLAUDE_BIN | TRY_TEST_SCRIPTS | WORKSPACE_* | WS_TEST_*) env+=("$var=${!var}") ;;
        esac
    done
    echo "==> as $user, alongside: the engine, CLI and plugin tests (basetemp $user_basetemp; logs $logs/user-*.log)"
    user_started=$SECONDS
    local k
    for ((k = 1; k <= parts; k++)); do
        (
            with_reachable_checkout runuser -u "$user" -- env -i "${env[@]}" "$repo/.venv/bin/python" \
                -m pytest -p no:cacheprovider --basetemp "$user_basetemp/$k" --part "$k/$parts" \
                -m as_user --alone=without "$@" >"$logs/user-$k.log" 2>&1
            echo $? >"$logs/user-$k.rc"
        ) &
        user_pids+=($!)
    done
}

finish_as_user() {
    local k
    wait "${user_pids[@]}"
    for ((k = 1; k <= parts; k++)); do
        echo "==> as $user: the engine, CLI and plugin tests, part $k of $parts"
        cat "$logs/user-$k.log"
    done
    record_parts "$user (tests marked as_user, $parts parts, $((SECONDS - user_started)) s)" "$logs/user"
    [[ ${codes[-1]} != 0 ]] || rm -rf "$user_basetemp"
}

# The tests marked alone, as root, by themselves (none selected is not a failure here).
run_alone() {
    local started=$SECONDS rc
    echo "==> alone: the tests that change the host for every other test"
    .venv/bin/python -m pytest --alone=only "$@" 2>&1 | tee "$logs/alone.log"
    rc=${PIPESTATUS[0]}
    ((rc != 5)) || return 0
    record "$(id -un) (tests marked alone, $((SECONDS - started)) s)" "$rc" "$logs/alone.log"
}

# The remote-engine tests' second dockerd (tests/engines/remote_dockerd.sh): only root can start
# one, so root starts it for both passes and hands its socket (usable by $user) to the tests.
remote_dir=
remote_dockerd() {
    [[ -z ${WS_TEST_REMOTE_DOCKER:-} ]] || return 0
    remote_dir=$(mktemp -d /tmp/wsrd.XXXXXX)
    if bash tests/engines/remote_dockerd.sh start "$remote_dir" "$user"; then
        export WS_TEST_REMOTE_DOCKER=unix://$remote_dir/docker.sock
        trap stop_remote_dockerd EXIT
    else
        echo "test.sh: the second dockerd did not start; the remote tests will say why" >&2
    fi
}

# Before the tests marked alone: they stop the host's dockerd and start it again with
# setup, which takes any dockerd process for the host's.
stop_remote_dockerd() {
    [[ -n $remote_dir ]] || return 0
    bash tests/engines/remote_dockerd.sh stop "$remote_dir" >/dev/null 2>&1
    rm -rf "$remote_dir"
    remote_dir=
}

if [[ $(id -u) == 0 && -n $user ]]; then
    remote_dockerd
    user_pids=()
    start_as_user "$@"
    run_as_root_or_self "all tests but those marked alone" --alone=without "$@"
    ((${#user_pids[@]} == 0)) || finish_as_user
    stop_remote_dockerd
    run_alone "$@"
else
    run_as_root_or_self "all tests" "$@"
fi

status=0
echo "==================================== test.sh summary ===================================="
for i in "${!names[@]}"; do
    printf '%s: %s (exit %s)\n' "${names[$i]}" "${summaries[$i]}" "${codes[$i]}"
    ((codes[i] == 0)) || status=1
done
rm -rf "$logs"
exit "$status"

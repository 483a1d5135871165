#!/bin/bash
# The ordinary account scripts/test.sh runs the engine, CLI and plugin tests as a second time:
# made by `useradd -m` as any user's account is (home, subordinate uid/gid ranges for rootless
# podman), in the `docker` group, with a runtime directory (XDG_RUNTIME_DIR, which rootless podman
# needs) that a login would create. Idempotent; run as root, after 30-containers (the docker group).
#   WORKSPACE_TEST_USER=NAME   the account (default wstest)
set -euo pipefail
user=${WORKSPACE_TEST_USER:-wstest}
say() { printf '[60-testuser] %s\n' "$*"; }
die() { printf '[60-testuser] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "must run as root"
[[ $user =~ ^[a-z_][a-z0-9_-]*$ ]] || die "not a user name: $user"

if id -u "$user" >/dev/null 2>&1; then
    say "$user: exists"
else
    useradd -m -s /bin/bash "$user"
    say "$user: created"
fi
uid=$(id -u "$user")
gid=$(id -g "$user")
home=$(getent passwd "$user" | cut -d: -f6)
[[ -d $home ]] || die "$user's home $home does not exist"

# useradd gives new accounts 65536 subordinate ids (login.defs SUB_UID_COUNT); an account made
# before that (or by another tool) may have none: give it the next free range.
next_free() {   # FILE -> first id after every range in it (at least 100000)
    awk -F: 'BEGIN { n = 100000 } { end = $2 + $3; if (end > n) n = end } END { print n }' "$1"
}
for kind in uid gid; do
    file=/etc/sub$kind
    touch "$file"
    if ! grep -q "^$user:" "$file"; then
        first=$(next_free "$file")
        usermod "--add-sub${kind}s" "$first-$((first + 65535))" "$user"
        say "$user: sub${kind}s $first-$((first + 65535))"
    fi
done

getent group docker >/dev/null || die "no docker group: run scripts/setup.d/30-containers.sh first"
if id -nG "$user" | tr ' ' '\n' | grep -qx docker; then
    say "$user: in group docker"
else
    usermod -aG docker "$user"
    say "$user: added to group docker"
fi

# What pam_systemd makes at login; /run is a tmpfs, so after a reboot it is made again here.
run=/run/user/$uid
mkdir -p /run/user
chmod 0755 /run/user
[[ -d $run ]] || mkdir "$run"
chown "$uid:$gid" "$run"
chmod 0700 "$run"
say "$user: runtime directory $run"

# Rootless podman must answer for the account (subordinate ids, runtime directory, storage).
err=$(mktemp)
trap 'rm -f "$err"' EXIT
as_user() {
    runuser -u "$user" -- env -i HOME="$home" USER="$user" LOGNAME="$user" XDG_RUNTIME_DIR="$run" \
        PATH=/usr/local/bin:/usr/bin:/bin sh -c 'cd && exec "$@"' as-user "$@"
}
podman_answers() { out=$(as_user podman info --format '{{.Host.Security.Rootless}}' 2>"$err"); }
# A pause process killed without podman knowing (its runtime directory says one is alive, none
# is) leaves every later podman call failing with "invalid internal status": reset it once.
if ! podman_answers; then
    grep -q 'podman system migrate' "$err" || die "rootless podman does not run for $user: $(cat "$err")"
    say "$user: rootless podman's pause process is gone; resetting it (podman system migrate)"
    as_user podman system migrate >/dev/null 2>&1 || true
    podman_answers || die "rootless podman does not run for $user: $(cat "$err")"
fi
[[ $out == true ]] || die "podman as $user is not rootless: $out $(cat "$err")"
say "$user: rootless podman answers"

# The account's own (rootless) podman storage needs the sandbox image. One it has (built by
# `workspace image build` as the account) is kept; otherwise it gets a copy of root's (30-containers).
image=workspace-sandbox:latest
if as_user podman image exists "$image" 2>/dev/null; then
    say "$user: podman has $image"
else
    podman image exists "$image" || die "root's podman has no $image (scripts/setup.d/30-containers.sh builds it)"
    podman save "$image" | as_user podman load -q >/dev/null 2>"$err" ||
        die "could not give $user's podman $image: $(cat "$err")"
    say "$user: podman has $image (copied from root's)"
fi

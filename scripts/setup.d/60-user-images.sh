#!/usr/bin/env bash
# The sandbox image for an ordinary account's rootless podman (its images are its own; docker's
# are shared through the daemon). Builds exactly as `workspace image build --engine podman` does
# as that user, from the rootfs tarball 30-containers.sh made, so no second bootstrap is needed;
# then runs the image once with --userns=keep-id (the engine's way), which also prepares podman's
# id-mapped copy of it (~10 s, once). Idempotent; run as root, after 30-containers and the step
# that creates the account (50-testuser).
#   WORKSPACE_TEST_USER=NAME   the account (default wstest); absent: nothing to do
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
user=${WORKSPACE_TEST_USER:-wstest}
say() { printf '[60-user-images] %s\n' "$*"; }
die() { printf '[60-user-images] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"
if [ "${WORKSPACE_SKIP_IMAGES:-0}" = 1 ]; then say "skipped (WORKSPACE_SKIP_IMAGES=1)"; exit 0; fi
id -u "$user" >/dev/null 2>&1 || { say "no account $user: nothing to do"; exit 0; }
uid=$(id -u "$user")
home=$(getent passwd "$user" | cut -d: -f6)

export WORKSPACE_IMAGE_CACHE=${WORKSPACE_IMAGE_CACHE:-$REPO/.cache/images}
tarball=$(bash "$REPO/manager/images/build.sh" --print-rootfs)
if [ ! -s "$tarball" ]; then
    # No bootstrap ran for this checkout because root's engines already had the current base
    # image (a second clone on the same machine): take the rootfs from root's podman instead.
    base=$(podman image inspect --format '{{.Id}}' workspace-base:bookworm 2>/dev/null) ||
        die "no rootfs tarball $tarball and no base image in root's podman: run scripts/setup.d/30-containers.sh first"
    mkdir -p "$(dirname "$tarball")"
    cid=$(podman create --pull never "$base" true)
    podman export -o "$tarball.tmp" "$cid" && podman rm -f "$cid" >/dev/null && mv "$tarball.tmp" "$tarball"
    say "rootfs: exported from root's podman base image"
fi

# The image definition where the account can read it (the checkout may be in root's home).
defs=$(mktemp -d)
trap 'rm -rf "$defs"' EXIT
cp -r "$REPO/manager/images/." "$defs/"
chmod -R a+rX "$defs"

as_user() {
    local run=/run/user/$uid env=(HOME="$home" USER="$user" LOGNAME="$user" PATH=/usr/local/bin:/usr/bin:/bin)
    [ -d "$run" ] && [ "$(stat -c %u "$run")" = "$uid" ] && env+=(XDG_RUNTIME_DIR="$run")
    runuser -u "$user" -- env -i "${env[@]}" "$@"
}
# The tarball goes through stdin: the account need not read root's cache. build.sh reads it
# only when the base image is missing or stale; a closed pipe is fine otherwise.
as_user bash -c 'cd && exec bash "$1" --engine podman --rootfs -' sh "$defs/build.sh" <"$tarball"
out=$(as_user bash -c 'cd && podman run --rm --pull never --network none --userns=keep-id \
        workspace-sandbox:latest id -u' 2>&1) || die "rootless podman as $user cannot run the image: $out"
[ "$(printf '%s\n' "$out" | tail -n1)" = "$uid" ] || die "the image runs as uid $out for $user, not $uid"
say "$user: rootless podman runs workspace-sandbox:latest as uid $uid"

#!/usr/bin/env bash
# Container engines for workspace: docker (Debian docker.io) and podman (rootful and rootless,
# runc), plus the locally built sandbox image (no registry needed). Idempotent; run as root.
# An ordinary account's rootless podman gets its own image from 60-user-images.sh.
#   bash scripts/setup.d/30-containers.sh            # install + start dockerd + build images
#   WORKSPACE_SKIP_IMAGES=1 bash ...                  # skip the image build
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LOG_DIR=${WORKSPACE_LOG_DIR:-/var/log}
DOCKERD_LOG="$LOG_DIR/workspace-dockerd.log"

say() { printf '[30-containers] %s\n' "$*"; }
die() { printf '[30-containers] ERROR: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

# --- 1. packages -------------------------------------------------------------------------
# --no-install-recommends keeps needrestart/apparmor out; what podman and docker really need at
# runtime here is listed explicitly (CNI plugins for podman 4.3 networking, slirp4netns, tini/catatonit).
PKGS=(docker.io containerd runc tini podman conmon catatonit slirp4netns containernetworking-plugins
      fuse-overlayfs uidmap iptables mmdebstrap attr xz-utils ca-certificates
      docker-compose)  # v1 (1.29.2, `docker-compose`): the v2 `docker compose` plugin is not in Debian 12

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # apt-get update only when the lists are absent or older than a day, or when install fails.
    if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mtime -1 -print -quit 2>/dev/null)" ]; then
        say "apt-get update"
        apt-get update -qq
    fi
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
        say "install failed; apt-get update and retry"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
else
    say "packages: already installed"
fi

# --- 2. podman configuration ------------------------------------------------------------
# crun (podman's default) refuses this machine's hybrid cgroup v1/v2 layout; runc works. No systemd
# as PID 1, so cgroupfs and file-based events; no journald, so k8s-file logs.
# Root here lacks CAP_SYS_RESOURCE, so a container cannot get rlimits above the caller's hard limits,
# and podman's defaults (nofile=1048576) fail with "error setting rlimit type 7": default to the
# host's hard limits instead. Note: a --ulimit flag replaces ALL defaults (an unnamed limit falls back
# to podman's built-in 1048576), so callers passing --ulimit must pass both nofile and nproc.
CONF=/etc/containers/containers.conf
hard_nofile=$(ulimit -Hn); hard_nproc=$(ulimit -Hu)
[ "$hard_nofile" = unlimited ] && hard_nofile=1048576
[ "$hard_nproc" = unlimited ] && hard_nproc=1048576
[ "$hard_nofile" -gt 1048576 ] && hard_nofile=1048576
# podman's conmon runs with nproc capped at 32768 here, so the container cannot get more.
[ "$hard_nproc" -gt 32768 ] && hard_nproc=32768
WANT_CONF="# written by workspace scripts/setup.d/30-containers.sh
[containers]
log_driver = \"k8s-file\"
default_ulimits = [\"nofile=$hard_nofile:$hard_nofile\", \"nproc=$hard_nproc:$hard_nproc\"]

[engine]
runtime = \"runc\"
cgroup_manager = \"cgroupfs\"
events_logger = \"file\"
"
mkdir -p /etc/containers
if [ ! -f "$CONF" ] || ! grep -q 'written by workspace' "$CONF"; then
    [ -f "$CONF" ] && cp -n "$CONF" "$CONF.orig-workspace"
    printf '%s' "$WANT_CONF" > "$CONF"
    say "podman: wrote $CONF (runtime=runc, cgroupfs, file events)"
elif ! cmp -s <(printf '%s' "$WANT_CONF") "$CONF"; then
    printf '%s' "$WANT_CONF" > "$CONF"
    say "podman: updated $CONF"
else
    say "podman: $CONF already configured"
fi

# Storage: overlay for every user. Without this file Debian's podman gives ordinary users vfs,
# which copies the whole image for each container (~30 s per session start, ~0.5 GB each).
# root's store is overlay already; an account whose store is vfs keeps it until
# `podman system reset` (podman refuses to switch a store's driver).
STORAGE=/etc/containers/storage.conf
WANT_STORAGE='# written by workspace scripts/setup.d/30-containers.sh
[storage]
driver = "overlay"
runroot = "/run/containers/storage"
graphroot = "/var/lib/containers/storage"
'
if [ -f "$STORAGE" ] && ! grep -q 'written by workspace' "$STORAGE"; then
    say "podman: $STORAGE exists (not ours): left alone"
elif ! cmp -s <(printf '%s' "$WANT_STORAGE") "$STORAGE" 2>/dev/null; then
    printf '%s' "$WANT_STORAGE" > "$STORAGE"
    say "podman: wrote $STORAGE (overlay storage, rootless too)"
else
    say "podman: $STORAGE already configured"
fi

# --- 3. dockerd ----------------------------------------------------------------------------
docker_ok() { timeout 10 docker info >/dev/null 2>&1; }
if docker_ok; then
    say "dockerd: already answering"
else
    if ! pgrep -x dockerd >/dev/null; then
        mkdir -p "$LOG_DIR"
        say "dockerd: starting (log: $DOCKERD_LOG)"
        # setsid + nohup: survive the shell that ran this script.
        setsid nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
    else
        say "dockerd: process present, waiting for it to answer"
    fi
    for _ in $(seq 1 60); do
        docker_ok && break
        sleep 1
    done
    docker_ok || { tail -n 30 "$DOCKERD_LOG" >&2 || true; die "dockerd did not answer within 60 s"; }
    say "dockerd: up ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
fi

# --- 4. sandbox images ------------------------------------------------------------------
if [ "${WORKSPACE_SKIP_IMAGES:-0}" = 1 ]; then
    say "images: skipped (WORKSPACE_SKIP_IMAGES=1)"
else
    WORKSPACE_IMAGE_CACHE=${WORKSPACE_IMAGE_CACHE:-$REPO/.cache/images} \
        bash "$REPO/manager/images/build.sh" --engine all
    # What the podman/docker engines need, checked here so a broken engine fails setup, not tests.
    for engine in docker podman; do
        out=$("$engine" run --rm --pull never --network none workspace-sandbox:latest true 2>&1) \
            || die "$engine cannot run the sandbox image: $out"
    done
    say "images: both engines run workspace-sandbox:latest"
fi
say "done"

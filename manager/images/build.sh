#!/usr/bin/env bash
# Build workspace's sandbox images without any container registry, as root or as an ordinary user.
#
#   build.sh [--engine docker|podman|all] [--force] [--mirror URL] [--rootfs FILE|-] [--print-rootfs]
#
# 1. A Debian bookworm rootfs (minbase + the packages below) as a tarball, from the machine's
#    configured Debian mirror: `mmdebstrap` (as an ordinary user in a user namespace,
#    --mode=unshare: needs uidmap and subordinate ids), or `debootstrap` as root where mmdebstrap
#    is missing. Kept in the cache dir and reused by every engine and later runs. --rootfs uses
#    the given tarball (- reads it from stdin) instead; --print-rootfs prints the cached path.
# 2. `<engine> import` that tarball as workspace-base:bookworm;
# 3. `<engine> build` the Containerfile next to this script as workspace-sandbox:latest.
# Each step is skipped when its output exists and carries the expected content hash (label
# org.workspace.hash); --force redoes all of them. Rootless podman builds into the user's own
# storage; docker needs the daemon (root, or the `docker` group).
# Cache: $WORKSPACE_IMAGE_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/workspace/images.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${WORKSPACE_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/workspace/images}
SUITE=bookworm
BASE_IMAGE=workspace-base:$SUITE
SANDBOX_IMAGE=${WORKSPACE_IMAGE_NAME:-workspace-sandbox:latest}
# Everything the sandbox needs comes from the bootstrap, so the Containerfile build needs no network.
INCLUDE=${WORKSPACE_IMAGE_PACKAGES:-ca-certificates,git,python3,python3-venv,make,gcc,libc6-dev,procps,less,tini,xz-utils,patch,file,attr}
# Not kept in the image (the bootstrap drops them, or they are removed after).
SLIM=(/usr/share/doc /usr/share/man /usr/share/info)

ENGINES=all FORCE=0 MIRROR=${WORKSPACE_DEBIAN_MIRROR:-} ROOTFS= PRINT=0
while [ $# -gt 0 ]; do
    case "$1" in
        --engine) ENGINES=$2; shift 2 ;;
        --engine=*) ENGINES=${1#*=}; shift ;;
        --force) FORCE=1; shift ;;
        --mirror) MIRROR=$2; shift 2 ;;
        --rootfs) ROOTFS=$2; shift 2 ;;
        --print-rootfs) PRINT=1; shift ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
[ "$ROOTFS" != - ] || [ "$ENGINES" != all ] || die "--rootfs - (stdin) builds for one --engine only"
case "$ENGINES" in
    all) ENGINES="docker podman" ;;
    docker|podman) ;;
    *) echo "--engine must be docker, podman or all" >&2; exit 2 ;;
esac

say() { printf '[images] %s\n' "$*"; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

# The first Debian mirror apt is configured with for $SUITE (deb822 .sources or one-line .list).
detect_mirror() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk -v suite="$SUITE" '
            /^[[:space:]]*$/ { if (uri != "" && ok && deb) { print uri; exit } uri=""; ok=0; deb=0; next }
            tolower($1) == "types:"  { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
            tolower($1) == "uris:"   { uri = $2 }
            tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) ok = 1 }
            END { if (uri != "" && ok && deb) print uri }' "$f" | head -n1
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        # deb [options] URI SUITE COMPONENTS...
        sed -E 's/\[[^]]*\]//' "$f" | awk -v suite="$SUITE" '$1 == "deb" && $3 == suite { print $2; exit }'
    done
}

# A tool by name, also where an ordinary user's PATH does not look (debootstrap is in /usr/sbin).
find_tool() { PATH=$PATH:/usr/sbin:/sbin command -v "$1" 2>/dev/null; }

# mmdebstrap: as root directly; otherwise in a user namespace (newuidmap and subordinate ids).
bootstrap_mmdebstrap() {  # tool mirror tarball
    local mode=root
    [ "$(id -u)" = 0 ] || mode=unshare
    if [ "$mode" = unshare ]; then
        command -v newuidmap >/dev/null || PATH=$PATH:/usr/sbin:/sbin command -v newuidmap >/dev/null \
            || die "mmdebstrap as $(id -un) needs newuidmap (Debian: apt-get install uidmap)"
        grep -q "^$(id -un):" /etc/subuid 2>/dev/null \
            || die "mmdebstrap as $(id -un) needs subordinate ids in /etc/subuid (usermod --add-subuids)"
    fi
    local opts=() d
    for d in "${SLIM[@]}"; do opts+=("--dpkgopt=path-exclude=$d/*"); done
    "$1" --mode="$mode" --format=tar --variant=minbase --include="$INCLUDE" "${opts[@]}" \
        --customize-hook="chmod 0755 \"\$1\" && echo $SUITE >\"\$1/etc/debian_chroot\"" \
        "$SUITE" "$3" "$2"
}

# debootstrap: root only. mktemp -d makes the root 0700, which rootless engines cannot enter.
bootstrap_debootstrap() {  # tool mirror tarball
    [ "$(id -u)" = 0 ] || die "debootstrap needs root; as $(id -un) install mmdebstrap (Debian: apt-get install mmdebstrap uidmap)"
    local root
    root=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    "$1" --variant=minbase --include="$INCLUDE" "$SUITE" "$root" "$2"
    # Slim down: package caches and lists are refetched by `apt-get update` when needed.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
    local d
    for d in "${SLIM[@]}"; do rm -rf "${root:?}$d"/*; done
    printf '%s\n' "$SUITE" > "$root/etc/debian_chroot"
    chmod 0755 "$root"
    tar --numeric-owner --xattrs -C "$root" -cf "$3" .
    rm -rf "$root"; trap - EXIT
}

hash_of() { sha256sum | cut -c1-16; }
label_of() {  # engine image -> org.workspace.hash label, empty if absent
    "$1" image inspect --format '{{ index .Config.Labels "org.workspace.hash" }}' "$2" 2>/dev/null || true
}

# --- rootfs tarball (shared by all engines) ------------------------------------------------
# v2: the rootfs / is 0755 (rootless podman could not enter a 0700 one).
ROOTFS_KEY=$(printf '%s\n' "$SUITE" minbase "$INCLUDE" v2 | hash_of)
TARBALL=$CACHE/$SUITE-minbase-$ROOTFS_KEY.tar
if [ "$PRINT" = 1 ]; then echo "$TARBALL"; exit 0; fi
need_rootfs=$FORCE
for engine in $ENGINES; do  # a fresh clone has no tarball, but the engines may have the base
    [ "$(label_of "$engine" "$BASE_IMAGE")" = "$ROOTFS_KEY" ] || need_rootfs=1
done
mkdir -p "$CACHE"   # the logs below go there even when the rootfs step is skipped
if [ -n "$ROOTFS" ]; then
    [ "$ROOTFS" = - ] || [ -s "$ROOTFS" ] || die "--rootfs $ROOTFS: no such tarball"
    TARBALL=$ROOTFS
    say "rootfs: $ROOTFS (given)"
elif [ "$need_rootfs" = 1 ] && [ ! -s "$TARBALL" ] || [ "$FORCE" = 1 ]; then
    [ -n "$MIRROR" ] || MIRROR=$(detect_mirror | head -n1)
    [ -n "$MIRROR" ] || die "no Debian mirror for $SUITE in /etc/apt/sources.list*; pass --mirror URL"
    if tool=$(find_tool mmdebstrap); then kind=mmdebstrap
    elif tool=$(find_tool debootstrap); then kind=debootstrap
    else die "neither mmdebstrap nor debootstrap is installed (Debian: apt-get install mmdebstrap uidmap)"
    fi
    say "$kind $SUITE (minbase + $INCLUDE) from $MIRROR as $(id -un)"
    t0=$(date +%s)
    log=$CACHE/bootstrap.log
    "bootstrap_$kind" "$tool" "$MIRROR" "$TARBALL.tmp" >"$log" 2>&1 \
        || { rm -rf "$TARBALL.tmp"; tail -n 20 "$log" >&2; die "$kind failed (log: $log)"; }
    mv "$TARBALL.tmp" "$TARBALL"
    find "$CACHE" -maxdepth 1 -name "$SUITE-minbase-*.tar" ! -name "${TARBALL##*/}" -delete
    say "rootfs: $TARBALL ($(du -h "$TARBALL" | cut -f1), $(( $(date +%s) - t0 )) s)"
elif [ -s "$TARBALL" ]; then
    say "rootfs: cached $TARBALL"
else
    say "rootfs: not needed (every engine has the base image)"
fi

# --- per engine: import base, build sandbox ------------------------------------------------
BASE_HASH=$ROOTFS_KEY
SANDBOX_HASH=$( { echo "$BASE_HASH"; cat "$HERE/Containerfile"; find "$HERE" -type f ! -name build.sh -print0 | sort -z | xargs -0 cat; } | hash_of)
for engine in $ENGINES; do
    command -v "$engine" >/dev/null || die "$engine not installed"
    old_ids=()
    if [ "$FORCE" = 1 ] || [ "$(label_of "$engine" "$BASE_IMAGE")" != "$BASE_HASH" ]; then
        t0=$(date +%s)
        old_ids+=("$("$engine" image inspect --format '{{.Id}}' "$BASE_IMAGE" 2>/dev/null || true)")
        log=$CACHE/import-$engine.log
        "$engine" import --change "LABEL org.workspace.hash=$BASE_HASH" --change 'CMD ["/bin/bash"]' \
            "$TARBALL" "$BASE_IMAGE" >"$log" 2>&1 || { cat "$log" >&2; die "$engine import failed"; }
        say "$engine: imported $BASE_IMAGE ($(( $(date +%s) - t0 )) s)"
    else
        say "$engine: $BASE_IMAGE up to date"
    fi
    if [ "$FORCE" = 1 ] || [ "$(label_of "$engine" "$SANDBOX_IMAGE")" != "$SANDBOX_HASH" ]; then
        t0=$(date +%s)
        old_ids+=("$("$engine" image inspect --format '{{.Id}}' "$SANDBOX_IMAGE" 2>/dev/null || true)")
        net=(--network=none)
        [ -n "${WORKSPACE_IMAGE_EXTRA_PACKAGES:-}" ] && net=()
        # podman keeps one intermediate image per step otherwise; this build is ~1 s without cache.
        [ "$engine" = podman ] && net+=(--layers=false)
        log=$CACHE/build-$engine.log
        # Legacy builder on purpose: Debian's docker.io has no buildx; no registry is needed anyway.
        DOCKER_BUILDKIT=0 "$engine" build "${net[@]}" -f "$HERE/Containerfile" \
            --build-arg "EXTRA_PACKAGES=${WORKSPACE_IMAGE_EXTRA_PACKAGES:-}" \
            --label "org.workspace.hash=$SANDBOX_HASH" -t "$SANDBOX_IMAGE" "$HERE" >"$log" 2>&1 \
            || { cat "$log" >&2; die "$engine build failed"; }
        say "$engine: built $SANDBOX_IMAGE ($(( $(date +%s) - t0 )) s)"
    else
        say "$engine: $SANDBOX_IMAGE up to date"
    fi
    # Drop the images we just replaced (only those: other users' dangling images are left alone).
    # `rmi` without --force refuses images still used by a container, which is what we want.
    for id in "${old_ids[@]}"; do
        [ -n "$id" ] && "$engine" rmi "$id" >/dev/null 2>&1 || true
    done
done

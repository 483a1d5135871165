#!/usr/bin/env bash
# Build workspace's sandbox images without any container registry.
#
#   images/build.sh [--engine docker|podman|all] [--force] [--mirror URL]
#
# 1. debootstrap --variant=minbase bookworm into a temp dir, from the machine's configured Debian
#    mirror, packed once into .cache/images/<name>.tar (reused by every engine and later runs);
# 2. `<engine> import` that tarball as workspace-base:bookworm;
# 3. `<engine> build` images/Containerfile (FROM workspace-base:bookworm) as workspace-sandbox:latest.
# Each step is skipped when its output exists and carries the expected content hash (label
# org.workspace.hash); --force redoes all of them. Needs root (debootstrap) and the engines running.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CACHE=${WORKSPACE_IMAGE_CACHE:-$REPO/.cache/images}
SUITE=bookworm
BASE_IMAGE=workspace-base:$SUITE
SANDBOX_IMAGE=workspace-sandbox:latest
# Everything the sandbox needs comes from debootstrap, so the Containerfile build needs no network.
INCLUDE=${WORKSPACE_IMAGE_PACKAGES:-ca-certificates,git,python3,python3-venv,make,gcc,libc6-dev,procps,less,tini,xz-utils,patch,file,attr}

ENGINES=all FORCE=0 MIRROR=${WORKSPACE_DEBIAN_MIRROR:-}
while [ $# -gt 0 ]; do
    case "$1" in
        --engine) ENGINES=$2; shift 2 ;;
        --engine=*) ENGINES=${1#*=}; shift ;;
        --force) FORCE=1; shift ;;
        --mirror) MIRROR=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
done
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

hash_of() { sha256sum | cut -c1-16; }
label_of() {  # engine image -> org.workspace.hash label, empty if absent
    "$1" image inspect --format '{{ index .Config.Labels "org.workspace.hash" }}' "$2" 2>/dev/null || true
}

# --- rootfs tarball (shared by all engines) ------------------------------------------------
ROOTFS_KEY=$(printf '%s\n' "$SUITE" minbase "$INCLUDE" | hash_of)
TARBALL=$CACHE/$SUITE-minbase-$ROOTFS_KEY.tar
need_rootfs=$FORCE
for engine in $ENGINES; do  # a fresh clone has no tarball, but the engines may have the base
    [ "$(label_of "$engine" "$BASE_IMAGE")" = "$ROOTFS_KEY" ] || need_rootfs=1
done
if [ "$need_rootfs" = 1 ] && [ ! -s "$TARBALL" ] || [ "$FORCE" = 1 ]; then
    command -v debootstrap >/dev/null || die "debootstrap missing (run scripts/setup.d/30-containers.sh)"
    [ "$(id -u)" = 0 ] || die "debootstrap needs root"
    [ -n "$MIRROR" ] || MIRROR=$(detect_mirror | head -n1)
    [ -n "$MIRROR" ] || die "no Debian mirror for $SUITE in /etc/apt/sources.list*; pass --mirror URL"
    mkdir -p "$CACHE"
    ROOT=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    trap 'rm -rf "$ROOT"' EXIT
    say "debootstrap $SUITE (minbase + $INCLUDE) from $MIRROR"
    t0=$(date +%s)
    debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$ROOT" "$MIRROR" \
        >"$CACHE/debootstrap.log" 2>&1 || { tail -n 20 "$CACHE/debootstrap.log" >&2; die "debootstrap failed (log: $CACHE/debootstrap.log)"; }
    # Slim down: package caches and lists are refetched by `apt-get update` when needed.
    rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*.log \
           "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/*
    printf '%s\n' "$SUITE" > "$ROOT/etc/debian_chroot"
    tar --numeric-owner --xattrs -C "$ROOT" -cf "$TARBALL.tmp" .
    mv "$TARBALL.tmp" "$TARBALL"
    find "$CACHE" -maxdepth 1 -name "$SUITE-minbase-*.tar" ! -name "${TARBALL##*/}" -delete
    rm -rf "$ROOT"; trap - EXIT
    say "rootfs: $TARBALL ($(du -h "$TARBALL" | cut -f1), $(( $(date +%s) - t0 )) s)"
elif [ -s "$TARBALL" ]; then
    say "rootfs: cached $TARBALL"
else
    say "rootfs: not needed (every engine has the base image)"
fi

# --- per engine: import base, build sandbox ------------------------------------------------
mkdir -p "$CACHE"   # the logs below go there even when the rootfs step was skipped
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

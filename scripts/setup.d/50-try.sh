#!/bin/bash
# binpash/try (MIT), both forms the try engine supports, from pinned sources:
#   main at 68a5fc7, `-N DIR`  -> /usr/local/lib/workspace-try/68a5fc7/try, linked as /usr/local/bin/try
#   v0.2.0 release, `-D DIR`   -> /usr/local/lib/workspace-try/0.2.0/try
# plus try's C helpers try-commit and try-summary (built from main's utils/ when gcc is there) in
# /usr/local/bin, and Debian's mergerfs, which try uses for directories with mounts below them
# (/var, /run, /mnt). Sources, first that works: binpash/try's repository at the pinned commits
# (short timeout: these machines reach package registries only), then the pinned tarballs in
# $TRY_SOURCE_DIR or shared/third_party/binpash-try/ beside the checkout. Every file used must match
# the checksums below, whatever its source. Idempotent: a second run only compares checksums.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LIB=/usr/local/lib/workspace-try
BIN=/usr/local/bin
GITHUB=https://github.com/binpash/try/archive
TIMEOUT=${TRY_FETCH_TIMEOUT:-5}
LOCAL_SOURCES=("${TRY_SOURCE_DIR:-}" "$REPO/../shared/third_party/binpash-try")
SUDO=; [[ $(id -u) == 0 ]] || SUDO=sudo

# ref -> commit; file in that tree -> sha256
declare -A COMMIT=([68a5fc7]=68a5fc7a63686d0eb6547abbc8ab035e164f5dd8
                   [0.2.0]=150b8203987f6bac0f7d75fcb416ad8c89584afb)
declare -A SHA=(
    [68a5fc7/try]=5b2d76666d282deb6262c8178101f81b8420e2d6050bf0aa8f72a7d59d2f868a
    [68a5fc7/utils/try-commit.c]=f6e8b7da502c04216a4de75b75239da06a5e0770969560737191d1e5afd8fe6d
    [68a5fc7/utils/try-summary.c]=fff9b84dd471982d474f6e332c3b9559d70dd1f6a06d03eba8f5e176933e7391
    [68a5fc7/utils/excludes.c]=172df999a6f8946e49955fc93969e238e9d9e844809c2b27a86027009f23f11b
    [68a5fc7/utils/excludes.h]=af76d14cc74c4a4687865bccd237321755cc4978d650c7d203e281b644f29426
    [68a5fc7/utils/version.h]=9c1f7b5907eb3dfda723bd2b69c8a55571e9713b8bcc210811ffd44ab6ce8aef
    [0.2.0/try]=5c8657bebe7e13cddf8288d12c6d99e18624d5e8307df5d4cef7acb438277f1f
)
HELPERS_STAMP=$LIB/68a5fc7/helpers.sha256
HELPERS_WANT=$(printf '%s\n' "${SHA[68a5fc7/utils/try-commit.c]}" "${SHA[68a5fc7/utils/try-summary.c]}" \
    "${SHA[68a5fc7/utils/excludes.c]}" | sha256sum | cut -c1-64)

say() { printf '[50-try] %s\n' "$*"; }
die() { printf '[50-try] ERROR: %s\n' "$*" >&2; exit 1; }
sha() { sha256sum "$1" 2>/dev/null | cut -c1-64; }

# --- packages ------------------------------------------------------------------------------
need=()
for pkg in mergerfs util-linux findutils attr curl; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if ((${#need[@]})); then
    export DEBIAN_FRONTEND=noninteractive
    if ! $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1; then
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
    say "installed: ${need[*]}"
fi

# mergerfs runs inside try's user namespace as the user, and opens /dev/fuse itself. Debian's udev
# rules make /dev/fuse 0666; without udev (containers, these VMs) it stays 0600 and an ordinary
# user's try leaves /var, /run, /mnt empty. Restore the distribution's mode.
if [[ -c /dev/fuse && $(stat -c %a /dev/fuse) != 666 && ! -e /run/udev/control ]]; then
    $SUDO chmod 0666 /dev/fuse
    say "/dev/fuse: mode 0666 (Debian's udev default; no udev here)"
fi

# --- what is already in place --------------------------------------------------------------
helpers_ok() {
    [[ -x $BIN/try-commit && -x $BIN/try-summary && $(cat "$HELPERS_STAMP" 2>/dev/null) == "$HELPERS_WANT" ]]
}
todo=()
for ref in "${!COMMIT[@]}"; do
    [[ $(sha "$LIB/$ref/try") == "${SHA[$ref/try]}" ]] || todo+=("$ref")
done
if command -v gcc >/dev/null && ! helpers_ok; then
    [[ " ${todo[*]} " == *" 68a5fc7 "* ]] || todo+=(68a5fc7)
fi

# --- sources -------------------------------------------------------------------------------
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Unpack REF into $WORK/REF (top directory stripped); prints where it came from.
unpack() {
    local ref=$1 dir
    mkdir -p "$WORK/$ref"
    if curl -fsSL --connect-timeout "$TIMEOUT" --max-time 60 -o "$WORK/$ref.tar.gz" \
            "$GITHUB/${COMMIT[$ref]}.tar.gz" 2>/dev/null \
        && tar -xzf "$WORK/$ref.tar.gz" -C "$WORK/$ref" --strip-components=1; then
        echo "$GITHUB/${COMMIT[$ref]}.tar.gz"
        return
    fi
    for dir in "${LOCAL_SOURCES[@]}"; do
        if [[ -n $dir && -f $dir/try-$ref.tar.gz ]] \
            && tar -xzf "$dir/try-$ref.tar.gz" -C "$WORK/$ref" --strip-components=1; then
            echo "$dir/try-$ref.tar.gz"
            return
        fi
    done
    return 1
}

verified() {  # REF FILE...: every file of the unpacked tree matches its pinned checksum
    local ref=$1 file got
    shift
    for file in "$@"; do
        got=$(sha "$WORK/$ref/$file")
        [[ $got == "${SHA[$ref/$file]}" ]] || { say "$ref/$file: sha256 ${got:-missing}, expected ${SHA[$ref/$file]}"; return 1; }
    done
}

# --- install -------------------------------------------------------------------------------
build_helpers() {  # from the unpacked, verified main tree
    local src=$WORK/68a5fc7/utils tool
    # try's configure checks overlayfs with lsmod (kmod): build the two helpers directly instead.
    for tool in try-commit try-summary; do
        gcc -O2 -o "$WORK/$tool" "$src/$tool.c" "$src/excludes.c"
        $SUDO install -m 0755 "$WORK/$tool" "$BIN/$tool"
    done
    echo "$HELPERS_WANT" | $SUDO tee "$HELPERS_STAMP" >/dev/null
    say "built try-commit, try-summary -> $BIN"
}

for ref in "${todo[@]}"; do
    from=$(unpack "$ref") || die "try $ref: no source: binpash/try unreachable and no try-$ref.tar.gz" \
        "in \$TRY_SOURCE_DIR or $REPO/../shared/third_party/binpash-try/"
    verified "$ref" try || die "try $ref from $from does not match the pinned checksum"
    if [[ $(sha "$LIB/$ref/try") != "${SHA[$ref/try]}" ]]; then
        $SUDO install -D -m 0755 "$WORK/$ref/try" "$LIB/$ref/try"
        $SUDO install -D -m 0644 "$WORK/$ref/LICENSE" "$LIB/$ref/LICENSE"
        say "try $ref installed from $from"
    fi
    if [[ $ref == 68a5fc7 ]] && command -v gcc >/dev/null && ! helpers_ok; then
        verified 68a5fc7 utils/try-commit.c utils/try-summary.c utils/excludes.c utils/excludes.h \
            utils/version.h || die "try's C helper sources from $from do not match"
        build_helpers
    fi
done
command -v gcc >/dev/null || helpers_ok \
    || say "no C compiler: try uses its shell fallbacks for summary and commit (slower)"
[[ $(readlink "$BIN/try" 2>/dev/null) == "$LIB/68a5fc7/try" ]] || $SUDO ln -sfn "$LIB/68a5fc7/try" "$BIN/try"
say "try (main, -N DIR): $BIN/try; try v0.2.0 (-D DIR): $LIB/0.2.0/try"

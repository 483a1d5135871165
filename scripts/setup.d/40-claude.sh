#!/usr/bin/env bash
# Install the pinned Claude Code CLI into the repo's .cache/claude/ (local npm prefix, never global)
# for the end-to-end tests. Idempotent and fast when already installed.
#
# Contract: prints the path of a working `claude` binary on stdout (last line) and writes it to
# .cache/claude/bin-path. Exit 0 installed and verified, 1 install or verification failed.
#
# Environment: CLAUDE_CODE_VERSION overrides the pin (tests are written against 2.1.332).
set -euo pipefail

version="${CLAUDE_CODE_VERSION:-2.1.332}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
prefix="$repo/.cache/claude"
bin_path_file="$prefix/bin-path"
pkg_dir="$prefix/node_modules/@anthropic-ai/claude-code"

log() { printf '40-claude: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Candidate binaries, best first: the wrapper's bin/ copy made by postinstall, then the native binary
# straight from the platform package (used when install scripts did not run).
candidates() {
    local arch
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) arch="$(uname -m)" ;;
    esac
    printf '%s\n' \
        "$pkg_dir/bin/claude.exe" \
        "$pkg_dir/bin/claude" \
        "$prefix/node_modules/@anthropic-ai/claude-code-linux-$arch/claude" \
        "$prefix/node_modules/@anthropic-ai/claude-code-linux-$arch-musl/claude"
}

# Echo "<path>" of the first candidate whose `--version` reports $version.
find_working() {
    local c out
    while IFS= read -r c; do
        [[ -f "$c" ]] || continue
        [[ -x "$c" ]] || chmod +x "$c" 2>/dev/null || continue
        # Isolated HOME so --version never touches the real ~/.claude.
        out="$(HOME="$prefix/home" CLAUDE_CONFIG_DIR="$prefix/home/.claude" \
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
            timeout 60 "$c" --version 2>/dev/null)" || continue
        if [[ "$out" == "$version"* ]]; then
            printf '%s\n' "$c"
            return 0
        fi
        log "$c reports '$out', want $version"
    done < <(candidates)
    return 1
}

installed_version() {
    [[ -f "$pkg_dir/package.json" ]] || return 1
    node -e 'process.stdout.write(require(process.argv[1]).version)' "$pkg_dir/package.json"
}

command -v node >/dev/null || die "node is not installed (need node >= 18 and npm)"
command -v npm >/dev/null || die "npm is not installed"
mkdir -p "$prefix/home"

# Fast path: recorded binary still works.
if [[ -f "$bin_path_file" ]]; then
    recorded="$(cat "$bin_path_file")"
    if [[ "$(installed_version || true)" == "$version" ]] && [[ -x "$recorded" ]]; then
        printf '%s\n' "$recorded"
        exit 0
    fi
fi

if [[ "$(installed_version || true)" != "$version" ]] || ! find_working >/dev/null; then
    log "installing @anthropic-ai/claude-code@$version into $prefix"
    # A private package.json keeps npm from walking up into the repository.
    [[ -f "$prefix/package.json" ]] ||
        printf '{"name":"workspace-e2e-claude","private":true}\n' >"$prefix/package.json"
    # Node 20 is below the pinned release's declared engine: npm warns, the native binary still runs.
    npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error \
        --include=optional "@anthropic-ai/claude-code@$version" >&2 ||
        die "npm install @anthropic-ai/claude-code@$version failed"
fi

bin="$(find_working)" || die "no working claude binary after install (looked at: $(candidates | tr '\n' ' '))"
printf '%s\n' "$bin" >"$bin_path_file.tmp"
mv -f "$bin_path_file.tmp" "$bin_path_file"
log "claude $version at $bin"
printf '%s\n' "$bin"

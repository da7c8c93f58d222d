#!/usr/bin/env bash
# Install mmdc (@mermaid-js/mermaid-cli, pinned with its whole tree in tests/infra/mermaid-cli/
# package-lock.json) for the test that parses PLAN.md's Mermaid diagrams with a real Mermaid parser
# (tests/unit/test_plan_diagram_mmdc.py), saying what it installs:
#
#   tests/infra/mermaid.sh install   `npm ci` into the cache when missing (`make unit` runs this)
#   tests/infra/mermaid.sh path      install when missing, then print mmdc's path (the test runs this)
#
# The cache, $INFRA_DIR/mermaid-cli/<hash of the lock file>/ (/var/tmp/vllm-fleet-infra by default),
# is outside the checkout and shared by the checkouts of a machine: a second run, or a fresh clone,
# installs nothing (about 50 s and 200 MB from the npm registry the first time). Puppeteer's own
# browser download is skipped: mmdc drives Debian's chromium (tests/infra/bindep.txt), with a
# puppeteer config the test writes. Without node and npm this says so and installs nothing (the
# test then skips itself).
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=mermaid
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

PACKAGE_DIR=$INFRA_SRC/mermaid-cli
LOCK_HASH=$(sha256sum "$PACKAGE_DIR/package-lock.json" | cut -c1-12)
DEST=$INFRA_DIR/mermaid-cli/$LOCK_HASH
MMDC=$DEST/node_modules/.bin/mmdc
VERSION=$(sed -n 's/.*"@mermaid-js\/mermaid-cli": "\([^"]*\)".*/\1/p' "$PACKAGE_DIR/package.json")

install() {
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
        log "SKIPPED: node or npm is not installed, so the Mermaid diagram test will skip itself"
        return 0
    fi
    if [ -x "$MMDC" ]; then
        log "present: @mermaid-js/mermaid-cli $VERSION in $DEST"
        return 0
    fi
    log "npm: installing @mermaid-js/mermaid-cli $VERSION (tests/infra/mermaid-cli/package-lock.json) into $DEST"
    local tmp
    tmp=$(mktemp -d "$INFRA_DIR/mermaid-cli.XXXXXX")
    # shellcheck disable=SC2064  # expand now: the trap must remove this run's folder
    trap "rm -rf '$tmp'" EXIT
    cp "$PACKAGE_DIR/package.json" "$PACKAGE_DIR/package-lock.json" "$tmp/"
    # --ignore-scripts: the only install script is puppeteer's browser download, which is not wanted
    (cd "$tmp" && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) \
        || die "npm ci of tests/infra/mermaid-cli failed (is the npm registry reachable?)"
    mkdir -p "$(dirname "$DEST")"
    # another checkout may have finished first: its copy is the same
    mv -T "$tmp" "$DEST" 2>/dev/null || [ -x "$MMDC" ] || die "could not move $tmp to $DEST"
    log "installed: $MMDC"
}

case "${1:-}" in
    install) install ;;
    path) install >&2; [ -x "$MMDC" ] && echo "$MMDC" ;;
    *) echo "usage: $0 install|path" >&2; exit 2 ;;
esac

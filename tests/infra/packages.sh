#!/usr/bin/env bash
# Install the Debian packages the test stages need (tests/infra/bindep.txt), saying which:
#
#   tests/infra/packages.sh install [PROFILE...]   install what is missing (default: static integration)
#   tests/infra/packages.sh missing [PROFILE...]   list what is missing; exit 1 when something is
#
# bindep (requirements-dev.txt, in .venv) decides what is missing; apt-get installs it (root, or
# sudo). Nothing is installed when everything is present, so a second run costs about a second.
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=packages
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

BINDEP_FILE=$INFRA_SRC/bindep.txt
# bindep from PATH (make puts .venv/bin there), else from the checkout's venv
BINDEP=$(command -v bindep || echo "$(dirname "$INFRA_PYTHON")/bindep")

# missing PROFILE...: the packages of PROFILE... that are not installed, one a line.
missing() {
    local out rc=0
    [ -x "$BINDEP" ] || die "bindep not found: run \`make venv\` first (requirements-dev.txt)"
    out=$("$BINDEP" -b -f "$BINDEP_FILE" "$@") || rc=$?
    # bindep: 0 nothing missing, 1 something missing; anything else is an error of its own
    [ "$rc" -le 1 ] || die "bindep -f $BINDEP_FILE $* failed (exit $rc): $out"
    printf '%s' "$out"
}

install() {
    local want
    want=$(missing "$@")
    if [ -z "$want" ]; then
        log "all present: $(profile_packages "$@")"
        return 0
    fi
    log "apt: installing ${want//$'\n'/ } (tests/infra/bindep.txt, profiles: $*)"
    local apt=(apt-get -q -o DPkg::Lock::Timeout=300)
    [ "$(id -u)" -eq 0 ] || apt=(sudo "${apt[@]}")
    "${apt[@]}" update >/dev/null
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends $want >/dev/null
    want=$(missing "$@") || true
    [ -z "$want" ] || die "still missing after apt-get install: $want"
    log "installed; all present: $(profile_packages "$@")"
}

# profile_packages PROFILE...: every package the profiles name (installed or not), on one line.
profile_packages() {
    "$BINDEP" -l newline -f "$BINDEP_FILE" "$@" 2>/dev/null | sort -u | paste -sd ' ' -
}

cmd=${1:-}
[ $# -eq 0 ] || shift
[ $# -gt 0 ] || set -- static integration
case "$cmd" in
    install) install "$@" ;;
    missing) out=$(missing "$@"); [ -z "$out" ] || { echo "$out"; exit 1; } ;;
    *) echo "usage: $0 install|missing [PROFILE...]" >&2; exit 2 ;;
esac

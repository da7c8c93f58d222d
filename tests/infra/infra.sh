#!/usr/bin/env bash
# Bring the whole integration-test infrastructure up or down (`make infra` / `make infra-down`).
#
#   tests/infra/infra.sh up       dockerd, registry, images (cached by recipe hash), push, Hub stand-in
#   tests/infra/infra.sh down     stop what `up` started: Hub stand-in, registry, dockerd (by recorded pids)
#   tests/infra/infra.sh status   what is running, and each image's recipe hash
#
# Every step is idempotent: `up` on a machine where everything runs and the
# images are current takes a few seconds. `down` never stops a daemon somebody
# else started, and leaves images and the registry's storage in place (they are
# the per-machine cache). docs/testing.md has the full picture.
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=infra
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

up() {
    local start=$SECONDS step t
    local port
    for step in "dockerd.sh start" "registry.sh start" "images.sh build" "images.sh push"; do
        t=$SECONDS
        # shellcheck disable=SC2086  # "script action"
        "$INFRA_SRC"/$step
        log "step '$step' took $((SECONDS - t)) s"
    done
    # one Hub stand-in per port the scenarios name (HUB_PORTS, common.sh)
    for port in "${HUB_PORTS[@]}"; do
        VLLM_FLEET_HUB_PORT=$port "$INFRA_SRC/hub.sh" start
    done
    log "up in $((SECONDS - start)) s: registry $REGISTRY_FROM_HOSTS, Hub stand-in $HUB_FROM_HOSTS (as seen from test hosts)"
}

down() {
    local leftover
    leftover=$(docker ps -aq --filter label=owner=molecule 2>/dev/null | wc -l)
    if [ "$leftover" -gt 0 ]; then
        log "WARNING: $leftover molecule test host(s) still exist (make molecule SCENARIO=... MOLECULE_CMD=destroy)"
    fi
    local port
    for port in "${HUB_PORTS[@]}"; do
        VLLM_FLEET_HUB_PORT=$port "$INFRA_SRC/hub.sh" stop
    done
    "$INFRA_SRC/registry.sh" stop
    "$INFRA_SRC/dockerd.sh" stop
}

status() {
    local rc=0 port
    "$INFRA_SRC/dockerd.sh" status || rc=1
    "$INFRA_SRC/registry.sh" status || rc=1
    for port in "${HUB_PORTS[@]}"; do
        VLLM_FLEET_HUB_PORT=$port "$INFRA_SRC/hub.sh" status || rc=1
    done
    if [ "$rc" -eq 0 ]; then
        "$INFRA_SRC/images.sh" status
    fi
    return "$rc"
}

case "${1:-}" in
    up) up ;;
    down) down ;;
    status) status ;;
    *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac

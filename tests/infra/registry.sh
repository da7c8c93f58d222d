#!/usr/bin/env bash
# Start, stop or query the local OCI registry the test hosts pull images from.
#
#   tests/infra/registry.sh start    install docker-registry if missing; start it unless :5000 answers
#   tests/infra/registry.sh stop     stop the registry `start` started (by its recorded pid)
#   tests/infra/registry.sh status   exit 0 when http://127.0.0.1:5000/v2/ answers
#   tests/infra/registry.sh pid      print the pid `start` recorded (empty when it started none)
#
# Debian's docker-registry package, run with our own config (its default config
# turns on htpasswd auth): filesystem storage under $INFRA_DIR/registry, plain
# HTTP on 0.0.0.0:5000, no auth. This machine pushes to localhost:5000; test hosts
# pull from 172.30.99.1:5000 (the molecule network's gateway).
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=registry
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

CONFIG=$INFRA_DIR/registry.yml
STORAGE=$INFRA_DIR/registry

registry_answers() { http_ok "http://127.0.0.1:$REGISTRY_PORT/v2/"; }

start() {
    apt_ensure docker-registry docker-registry
    mkdir -p "$STORAGE"
    cat >"$CONFIG" <<EOC
# Written by tests/infra/registry.sh: test-only registry, no auth, plain HTTP.
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $STORAGE
  delete:
    enabled: true
http:
  addr: 0.0.0.0:$REGISTRY_PORT
EOC
    start_daemon "registry (0.0.0.0:$REGISTRY_PORT, storage $STORAGE)" "$INFRA_DIR/registry.pid" \
        "$INFRA_DIR/registry.log" 30 registry_answers docker-registry serve "$CONFIG"
}

daemon_main registry "$INFRA_DIR/registry.pid" registry_answers start "${1:-}"

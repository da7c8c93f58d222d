#!/usr/bin/env bash
# Start, stop or query this machine's Docker engine for the integration tests.
#
#   tests/infra/dockerd.sh start    install docker.io if missing; start dockerd unless one answers
#   tests/infra/dockerd.sh stop     stop the dockerd that `start` started (by its recorded pid)
#   tests/infra/dockerd.sh status   exit 0 when `docker info` answers
#   tests/infra/dockerd.sh pid      print the pid `start` recorded (empty when it started none)
#
# apt does not start services on these machines (policy-rc.d), so `start` runs
# `dockerd` itself in the background, records its pid in $INFRA_DIR/dockerd.pid and
# logs to $INFRA_DIR/dockerd.log. A dockerd somebody else started is used as is
# and never stopped by these scripts.
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=dockerd
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

docker_answers() { docker info >/dev/null 2>&1; }

start() {
    apt_ensure dockerd docker.io
    start_daemon dockerd "$INFRA_DIR/dockerd.pid" "$INFRA_DIR/dockerd.log" "${DOCKERD_START_TIMEOUT:-60}" \
        docker_answers dockerd
    log "server version $(docker version --format '{{.Server.Version}}')"
}

daemon_main dockerd "$INFRA_DIR/dockerd.pid" docker_answers start "${1:-}"

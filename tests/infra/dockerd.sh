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

PIDFILE=$INFRA_DIR/dockerd.pid
LOGFILE=$INFRA_DIR/dockerd.log
START_TIMEOUT=${DOCKERD_START_TIMEOUT:-60}

docker_answers() { docker info >/dev/null 2>&1; }

start() {
    if docker_answers; then
        log "already running ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
        return 0
    fi
    apt_ensure dockerd docker.io
    log "starting dockerd (log: $LOGFILE)"
    # setsid: not in make's process group, so ^C on a make target leaves it running.
    setsid nohup dockerd >"$LOGFILE" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    if ! wait_for "$START_TIMEOUT" "docker info to answer" docker_answers; then
        echo "--- last lines of $LOGFILE:" >&2
        tail -n 40 "$LOGFILE" >&2 || true
        stop_pidfile "$PIDFILE" dockerd || true
        exit 1
    fi
    log "started pid $(cat "$PIDFILE") ($(docker version --format '{{.Server.Version}}'))"
}

case "${1:-}" in
    start) start ;;
    stop) stop_pidfile "$PIDFILE" dockerd ;;
    status)
        if docker_answers; then
            log "running$(pid_alive "$PIDFILE" && echo " (pid $(cat "$PIDFILE"), started by these scripts)")"
        else
            log "not running"
            exit 1
        fi
        ;;
    pid) if pid_alive "$PIDFILE"; then cat "$PIDFILE"; fi ;;
    *) echo "usage: $0 start|stop|status|pid" >&2; exit 2 ;;
esac

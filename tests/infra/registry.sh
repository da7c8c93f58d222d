#!/usr/bin/env bash
# Start, stop or query the local OCI registry the test hosts pull images from.
#
#   tests/infra/registry.sh start    install docker-registry if missing; start it unless :5000 answers
#   tests/infra/registry.sh stop     stop the registry `start` started (by its recorded pid)
#   tests/infra/registry.sh status   exit 0 when http://localhost:5000/v2/ answers
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

PIDFILE=$INFRA_DIR/registry.pid
LOGFILE=$INFRA_DIR/registry.log
CONFIG=$INFRA_DIR/registry.yml
STORAGE=$INFRA_DIR/registry
URL=http://127.0.0.1:$REGISTRY_PORT/v2/

start() {
    if http_ok "$URL"; then
        log "already answering at $URL"
        return 0
    fi
    apt_ensure docker-registry docker-registry
    mkdir -p "$STORAGE"
    cat >"$CONFIG" <<EOF
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
EOF
    log "starting docker-registry on 0.0.0.0:$REGISTRY_PORT (storage: $STORAGE, log: $LOGFILE)"
    setsid nohup docker-registry serve "$CONFIG" >"$LOGFILE" 2>&1 </dev/null &
    echo $! >"$PIDFILE"
    if ! wait_for 30 "$URL to answer" http_ok "$URL"; then
        echo "--- last lines of $LOGFILE:" >&2
        tail -n 40 "$LOGFILE" >&2 || true
        stop_pidfile "$PIDFILE" registry || true
        exit 1
    fi
    log "started pid $(cat "$PIDFILE")"
}

case "${1:-}" in
    start) start ;;
    stop) stop_pidfile "$PIDFILE" registry ;;
    status)
        if http_ok "$URL"; then
            log "answering at $URL$(pid_alive "$PIDFILE" && echo " (pid $(cat "$PIDFILE"), started by these scripts)")"
        else
            log "not answering at $URL"
            exit 1
        fi
        ;;
    pid) if pid_alive "$PIDFILE"; then cat "$PIDFILE"; fi ;;
    *) echo "usage: $0 start|stop|status|pid" >&2; exit 2 ;;
esac

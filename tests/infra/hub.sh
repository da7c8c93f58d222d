#!/usr/bin/env bash
# Start, stop or query the Hugging Face Hub stand-in the test hosts download weights from.
#
#   tests/infra/hub.sh start    start tests/infra/hub_standin.py on 0.0.0.0:5080 unless it answers
#   tests/infra/hub.sh stop     stop the one `start` started (by its recorded pid)
#   tests/infra/hub.sh status   exit 0 when http://127.0.0.1:5080/_standin/stats answers
#   tests/infra/hub.sh pid      print the pid `start` recorded (empty when it started none)
#   tests/infra/hub.sh ports    print the ports of every instance the test scenarios use
#   VLLM_FLEET_HUB_PORT=5081 tests/infra/hub.sh start    the instance on port 5081
#
# Test hosts reach it as http://172.30.99.1:5080 (HF_ENDPOINT). It serves any repo
# id at revisions `main` and `v2` (a generated fake model; $TINY_MODEL_REPO is the tiny real
# model in $TINY_MODEL_DIR that tests/infra/images.sh writes); tests read and zero its byte counter with
# GET /_standin/stats and POST /_standin/reset (docs/testing.md).
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=hub
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

hub_answers() { http_ok "http://127.0.0.1:$HUB_PORT/_standin/stats"; }

start() {
    start_daemon "hub stand-in (0.0.0.0:$HUB_PORT)" "$INFRA_DIR/$HUB_STATE.pid" "$INFRA_DIR/$HUB_STATE.log" 15 hub_answers \
        python3 "$INFRA_SRC/hub_standin.py" --host 0.0.0.0 --port "$HUB_PORT" --revision main --revision v2 \
        --local-repo "$TINY_MODEL_REPO=$TINY_MODEL_DIR"
}

if [ "${1:-}" = ports ]; then
    echo "${HUB_PORTS[*]}"
    exit 0
fi
daemon_main "$HUB_STATE" "$INFRA_DIR/$HUB_STATE.pid" hub_answers start "${1:-}"

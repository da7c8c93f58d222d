#!/usr/bin/env bash
# Run one molecule scenario of tests/molecule/ with the shared base config.
#
#   tests/infra/molecule.sh SCENARIO [COMMAND [ARGS...]]     (`make molecule SCENARIO=... MOLECULE_CMD=...`)
#
# COMMAND is a molecule subcommand (default: test). The scenario runs with
# tests/molecule/shared/base.yml as base config and holds a machine-wide lock,
# so scenarios of several checkouts on one machine never share the fixed test
# network at the same time. When `test` fails, the test hosts' failed units,
# journals and containers are printed before they are destroyed. Each run's
# duration is appended to tests/output/molecule/timings.tsv.
#
# Needs the infrastructure (`make infra`) and .venv/bin on PATH (make does both).
# shellcheck source-path=SCRIPTDIR
set -Eeuo pipefail
LOG_TAG=molecule
# shellcheck source=common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

REPO_ROOT=$(cd "$INFRA_SRC/../.." && pwd)
SCENARIO=${1:?usage: $0 SCENARIO [COMMAND [ARGS...]]}
shift
COMMAND=${1:-test}
[ $# -gt 0 ] && shift
TIMINGS=$REPO_ROOT/tests/output/molecule/timings.tsv

cd "$REPO_ROOT"
[ -f "tests/molecule/$SCENARIO/molecule.yml" ] || die "no scenario tests/molecule/$SCENARIO/molecule.yml"
command -v molecule >/dev/null || die "molecule is not on PATH (make venv; run through make)"
export MOLECULE_GLOB="tests/molecule/*/molecule.yml"
MOLECULE=(molecule --base-config tests/molecule/shared/base.yml)
# molecule runs with fd 8 (the lock) closed: nothing it leaves behind can hold the lock.
molecule() { command molecule "$@" 8>&-; }

# diagnose: what every test host of the scenario looks like (after a failure).
diagnose() {
    local host
    for host in $(docker ps -a --filter "label=org.vllm-fleet.checkout=$REPO_ROOT" \
            --filter "label=org.vllm-fleet.scenario=$SCENARIO" --format '{{.Names}}'); do
        echo "================ test host $host ($(docker inspect -f '{{.State.Status}}' "$host"))"
        docker exec "$host" bash -c '
            echo "== systemctl is-system-running: $(systemctl is-system-running)"
            echo "== failed units"; systemctl --failed --no-pager
            echo "== journal (last 60 lines)"; journalctl --no-pager -n 60
            echo "== containers"; docker ps -a
            for c in $(docker ps -aq); do echo "== docker logs $c"; docker logs --tail 30 "$c" 2>&1; done
        ' 2>&1 || true
    done
}

run() {
    local start=$SECONDS rc=0
    log "scenario $SCENARIO: molecule $COMMAND $*"
    if [ "$COMMAND" = test ]; then
        # --destroy=never keeps the hosts of a failure for diagnosis; it also skips the
        # sequence's first destroy, so stale hosts of an interrupted run go first.
        "${MOLECULE[@]}" destroy -s "$SCENARIO" || rc=$?
        [ "$rc" -ne 0 ] || "${MOLECULE[@]}" test -s "$SCENARIO" --destroy=never "$@" || rc=$?
        if [ "$rc" -ne 0 ]; then
            log "scenario $SCENARIO FAILED (exit $rc): diagnostics of its test hosts follow"
            diagnose
        fi
        "${MOLECULE[@]}" destroy -s "$SCENARIO" || rc=$((rc ? rc : 1))
    else
        "${MOLECULE[@]}" "$COMMAND" -s "$SCENARIO" "$@" || rc=$?
    fi
    mkdir -p "$(dirname "$TIMINGS")"
    printf '%s\t%s\t%s\trc=%s\t%ss\n' "$(date -u +%FT%TZ)" "$SCENARIO" "$COMMAND" "$rc" "$((SECONDS - start))" >>"$TIMINGS"
    log "scenario $SCENARIO: molecule $COMMAND finished in $((SECONDS - start)) s (exit $rc)"
    return "$rc"
}

# One lock per Hub stand-in (MOLECULE_LOCK overrides): scenarios that share one (smoke and
# replicas on 5080) never overlap, and neither do two runs of one scenario (same host names);
# scenarios on different Hub stand-ins (Makefile MOLECULE_LANES) run at once.
HUB_PORT_OF_SCENARIO=$(sed -n 's/^ *vllm_test_hub_port: *\([0-9][0-9]*\).*/\1/p' "tests/molecule/$SCENARIO/molecule.yml" | head -n 1)
take_lock "${MOLECULE_LOCK:-molecule-hub-${HUB_PORT_OF_SCENARIO:-5080}}"
run "$@"

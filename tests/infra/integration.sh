#!/usr/bin/env bash
# `make integration`: `molecule test` of the scenarios of each lane, every lane at once.
#
#   tests/infra/integration.sh [--serial] [--log-dir DIR] LANE...
#
# A LANE is a scenario of tests/molecule/, or several joined by `+` (`a+b` runs b after a
# in one lane). All lanes start together, 20 s apart in the order given; lane N logs to
# DIR/integration-lane-N.log (default tests/output/test/), and every log is printed
# when the last lane ends, then each lane's scenario durations. The network of the test
# hosts stays up while lanes run (VLLM_FLEET_KEEP_NETWORK=1). --serial: every scenario
# of every lane in turn, in the foreground. A scenario without tests/molecule/<name>/
# is skipped with a warning; one named twice runs once. docs/testing.md has the whole.
set -Euo pipefail

INFRA_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LOG_DIR=tests/output/test
SERIAL=0

usage() {
    echo "usage: $0 [--serial] [--log-dir DIR] LANE..." >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
        --serial) SERIAL=1; shift ;;
        --log-dir) LOG_DIR=${2:?}; shift 2 ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
done
[ $# -gt 0 ] || usage

# run_scenarios LABEL SCENARIO...: `molecule test` of each existing scenario in turn
# (tests/infra/in_turn.sh: all run, durations, the failed ones named).
run_scenarios() {
    local label=$1 scenario found=()
    shift
    for scenario in "$@"; do
        if [ ! -f "tests/molecule/$scenario/molecule.yml" ]; then
            echo "$label: WARNING: tests/molecule/$scenario/ does not exist; skipped"
            continue
        fi
        case " ${found[*]} " in *" $scenario "*) continue ;; esac
        found+=("$scenario")
    done
    [ ${#found[@]} -gt 0 ] || echo "$label: WARNING: none of $* exists; no scenario ran"
    "$INFRA_SRC/in_turn.sh" "$label" scenario "$INFRA_SRC/molecule.sh {} test" "${found[@]}"
}

if [ "$SERIAL" = 1 ]; then
    # shellcheck disable=SC2068  # one scenario per word: a+b is a, then b
    run_scenarios integration ${@//+/ }
    exit
fi

mkdir -p "$LOG_DIR"
export VLLM_FLEET_KEEP_NETWORK=1
# NIXL's progress thread in every PD worker polls without a pause: it gets only the CPU nothing
# else wants while the lanes run (tests/infra/busy_poll_idler.py says why).
python3 "$INFRA_SRC/busy_poll_idler.py" --until-pid $$ >"$LOG_DIR/busy-poll-idler.log" 2>&1 &
n=0 pids=() logs=()
for lane in "$@"; do
    log=$LOG_DIR/integration-lane-$((n + 1)).log
    echo "integration: lane $((n + 1)): ${lane//+/, then } (log $log)"
    # shellcheck disable=SC2086  # one scenario per word
    (sleep $((n * 20)); run_scenarios "integration lane $((n + 1))" ${lane//+/ }) >"$log" 2>&1 &
    pids+=($!) logs+=("$log") n=$((n + 1))
done
failed=""
for i in "${!pids[@]}"; do wait "${pids[$i]}" || failed="$failed $((i + 1))"; done
for log in "${logs[@]}"; do echo "================ $log"; cat "$log"; done
cat "$LOG_DIR/busy-poll-idler.log"
grep -ah "scenario durations" "${logs[@]}" || true
if [ -n "$failed" ]; then echo "integration: FAILED lane(s):$failed" >&2; exit 1; fi
echo "integration: passed, all $n lanes"

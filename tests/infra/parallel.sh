#!/usr/bin/env bash
# Run test stages at the same time, each into its own log, and report each one
# as it ends. `make test` runs its two stages with it (docs/development.md, "make test"):
#
#   tests/infra/parallel.sh [--log-dir DIR] [--tail N] [--heartbeat S] NAME 'COMMAND' [NAME 'COMMAND']...
#
# Every COMMAND runs through `bash -c`, all of them at once, with stdin from
# /dev/null and stdout+stderr into DIR/NAME.log (default tests/output/test/).
# When a stage ends, its result, its duration and its log are printed: the
# whole log when it failed, otherwise its last N lines (--tail, default 40;
# 0 prints every log whole) and the log's path. While stages run, a line every
# S seconds (--heartbeat, default 120; 0: none) says which are still busy.
# The exit status is 0 when every stage passed; otherwise 1, and the last line
# names the stages that failed. Each stage runs in its own process group;
# SIGINT/SIGTERM are passed on to those groups.
set -Euo pipefail

if ((BASH_VERSINFO[0] * 100 + BASH_VERSINFO[1] < 501)); then
    echo "parallel: needs bash >= 5.1 (wait -n -p); this is $BASH_VERSION" >&2
    exit 2
fi

LOG_DIR=tests/output/test
TAIL=40
HEARTBEAT=120

usage() {
    echo "usage: $0 [--log-dir DIR] [--tail N] [--heartbeat S] NAME 'COMMAND' [NAME 'COMMAND']..." >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
        --log-dir) LOG_DIR=${2:?}; shift 2 ;;
        --tail) TAIL=${2:?}; shift 2 ;;
        --heartbeat) HEARTBEAT=${2:?}; shift 2 ;;
        --) shift; break ;;
        -*) usage ;;
        *) break ;;
    esac
done
if [ $# -lt 2 ] || [ $(($# % 2)) -ne 0 ]; then usage; fi
[[ $TAIL =~ ^[0-9]+$ && $HEARTBEAT =~ ^[0-9]+$ ]] || usage

say() { printf '==> [%s] %s\n' "$(date +%H:%M:%S)" "$*"; }

mkdir -p "$LOG_DIR"
declare -A NAME_OF=() START_OF=() LOG_OF=()
NAMES=()
RUNNING=()
FAILED=()
SUMMARY=()
TIMER=

start_stage() {
    local name=$1 cmd=$2 log=$LOG_DIR/$1.log pid
    [[ $name =~ ^[A-Za-z0-9_.-]+$ ]] || { echo "parallel: bad stage name '$name'" >&2; exit 2; }
    [ -z "${LOG_OF[$name]:-}" ] || { echo "parallel: stage '$name' given twice" >&2; exit 2; }
    # Its own session and process group (pgid = pid), so a signal reaches the whole stage.
    setsid bash -c "$cmd" </dev/null >"$log" 2>&1 &
    pid=$!
    NAME_OF[$pid]=$name
    START_OF[$pid]=$SECONDS
    LOG_OF[$name]=$log
    NAMES+=("$name")
    RUNNING+=("$pid")
    say "$name: started: $cmd (log: $log)"
}

# report PID RC: print the result and the log of the stage that just ended.
report() {
    local pid=$1 rc=$2 name=${NAME_OF[$1]} took=$((SECONDS - START_OF[$1])) log=${LOG_OF[${NAME_OF[$1]}]} result
    if [ "$rc" -eq 0 ]; then result=passed; else result="FAILED (exit $rc)"; FAILED+=("$name"); fi
    SUMMARY+=("$(printf '%-12s %-18s %5d s  %s' "$name" "$result" "$took" "$log")")
    if [ "$rc" -ne 0 ] || [ "$TAIL" -eq 0 ]; then
        say "$name: $result in $took s; its log ($log) follows"
        cat "$log"
    else
        say "$name: $result in $took s; last $TAIL lines of $log:"
        tail -n "$TAIL" "$log"
    fi
    say "$name: $result in $took s (log: $log)"
}

# last_step LOG: the newest step a log shows (a molecule action, an Ansible play or task, a
# pytest progress mark, a make stage), one line, for the heartbeat.
last_step() {
    grep -E '^(TASK|PLAY|RUNNING HANDLER) \[|^INFO +\[[A-Za-z0-9_]+ > [a-z_]+\]|\[ *[0-9]+%\]$|^==> \[' "$1" 2>/dev/null \
        | tail -n 1 | sed -E 's/ \*+$//; s/^INFO +//; s/^.*(\[ *[0-9]+%\])$/pytest \1/' | cut -c 1-150 || true
}

# progress NAME: the stage's newest step, then each of its lanes' (NAME-lane-*.log) with the
# scenario the lane is in.
progress() {
    local name=$1 log=${LOG_OF[$1]} lane scenario step
    step=$(last_step "$log")
    [ -z "$step" ] || printf '    %s: %s\n' "$name" "$step"
    for lane in "${log%.log}"-lane-*.log; do
        [ -f "$lane" ] || continue
        scenario=$(grep -oE '^INFO +\[[A-Za-z0-9_]+ > [a-z_]+\]' "$lane" 2>/dev/null | tail -n 1 | sed -E 's/^INFO +//' || true)
        printf '      %s %s: %s\n' "$(basename "$lane" .log)" "$scenario" "$(last_step "$lane")"
    done
}

forget() {
    local pid=$1 kept=() p
    for p in "${RUNNING[@]}"; do
        [ "$p" = "$pid" ] || kept+=("$p")
    done
    RUNNING=("${kept[@]}")
}

on_signal() {
    local sig=$1 pid
    trap - INT TERM
    say "parallel: got SIG$sig; stopping: ${RUNNING[*]/#/pid }"
    for pid in "${RUNNING[@]}"; do
        kill -"$sig" -- -"$pid" 2>/dev/null || kill -"$sig" "$pid" 2>/dev/null || true
    done
    [ -z "$TIMER" ] || kill "$TIMER" 2>/dev/null || true
    wait
    for pid in "${RUNNING[@]}"; do
        say "${NAME_OF[$pid]}: interrupted after $((SECONDS - START_OF[$pid])) s; last 40 lines of ${LOG_OF[${NAME_OF[$pid]}]}:"
        tail -n 40 "${LOG_OF[${NAME_OF[$pid]}]}"
    done
    [ "$sig" = INT ] && exit 130
    exit 143
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

while [ $# -gt 0 ]; do
    start_stage "$1" "$2"
    shift 2
done

START=$SECONDS
while [ "${#RUNNING[@]}" -gt 0 ]; do
    TIMER=
    if [ "$HEARTBEAT" -gt 0 ]; then
        sleep "$HEARTBEAT" &
        TIMER=$!
    fi
    ended=
    rc=0
    wait -n -p ended "${RUNNING[@]}" ${TIMER:+"$TIMER"} || rc=$?
    if [ -z "$ended" ]; then
        continue  # a trapped signal interrupted wait; on_signal exits
    elif [ "$ended" = "$TIMER" ]; then
        busy=()
        for pid in "${RUNNING[@]}"; do
            busy+=("${NAME_OF[$pid]} ($((SECONDS - START_OF[$pid])) s, $(wc -l <"${LOG_OF[${NAME_OF[$pid]}]}") log lines)")
        done
        say "still running: ${busy[*]}"
        for pid in "${RUNNING[@]}"; do
            progress "${NAME_OF[$pid]}"
        done
        continue
    fi
    [ -z "$TIMER" ] || { kill "$TIMER" 2>/dev/null; wait "$TIMER" 2>/dev/null; } || true
    forget "$ended"
    report "$ended" "$rc"
done

say "parallel: all stages ended in $((SECONDS - START)) s"
printf '  %s\n' "${SUMMARY[@]}"
if [ "${#FAILED[@]}" -gt 0 ]; then
    echo "parallel: FAILED stages: ${FAILED[*]}" >&2
    exit 1
fi
echo "parallel: passed: ${NAMES[*]}"

#!/usr/bin/env bash
# Run one command per item, one after another, every one even when one before it failed.
# `make static` runs its steps with it, `make integration` (tests/infra/integration.sh) its scenarios:
#
#   tests/infra/in_turn.sh LABEL NOUN 'COMMAND' ITEM...
#
# For each ITEM, COMMAND runs with every word `{}` replaced by ITEM (COMMAND is split into
# words; no other shell syntax). At the end, one line gives each item's duration,
# `LABEL: NOUN durations: ITEM=Ns ...`; then `LABEL: passed: ITEM...`, or (on stderr)
# `LABEL: FAILED NOUNs: ITEM...` and exit status 1.
set -Euo pipefail

if [ $# -lt 3 ]; then
    echo "usage: $0 LABEL NOUN 'COMMAND' ITEM..." >&2
    exit 2
fi
LABEL=$1 NOUN=$2
read -ra COMMAND <<<"$3"
shift 3

# command_for ITEM: COMMAND's words, each `{}` replaced by ITEM, into WORDS.
command_for() {
    local word
    WORDS=()
    for word in "${COMMAND[@]}"; do
        if [ "$word" = "{}" ]; then WORDS+=("$1"); else WORDS+=("$word"); fi
    done
}

rc=0 failed="" ran="" times=""
for item in "$@"; do
    command_for "$item"
    start=$SECONDS
    "${WORDS[@]}" || { rc=1; failed="$failed $item"; }
    ran="$ran $item" times="$times $item=$((SECONDS - start))s"
done
echo "$LABEL: $NOUN durations:$times"
if [ $rc -ne 0 ]; then
    echo "$LABEL: FAILED ${NOUN}s:$failed" >&2
else
    echo "$LABEL: passed:$ran"
fi
exit $rc

#!/usr/bin/env bash
# Run shellcheck on FILE... (with no FILE: only check that shellcheck is installed). `make lint`
# checks .ci/run with it; `make sanity` needs the binary for ansible-test's shellcheck test:
#
#   tests/infra/shellcheck.sh STEP 'WHAT' [FILE...]
#
# When shellcheck is not installed, CI (CI set and not `false`) fails, naming WHAT could not
# run; a local run prints `STEP: WARNING: SKIPPED WHAT` and passes (`make static` repeats it last).
set -Euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 STEP 'WHAT' [FILE...]" >&2
    exit 2
fi
STEP=$1 WHAT=$2
shift 2

if command -v shellcheck >/dev/null; then
    if [ $# -gt 0 ]; then
        echo "shellcheck $*"
        exec shellcheck "$@"
    fi
    exit 0
fi
if [ -n "${CI:-}" ] && [ "$CI" != false ]; then
    echo "$STEP: FAILED: shellcheck is not installed, so $WHAT cannot run (CI runs every check)" >&2
    exit 1
fi
echo "$STEP: WARNING: SKIPPED $WHAT: shellcheck is not installed (apt-get install shellcheck; CI runs it)" >&2

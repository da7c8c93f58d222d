#!/usr/bin/env bash
# Look for a secret where it must never be: systemd unit files, process argv, `docker inspect`
# of every container, container logs and the journal. Prints where it was found; exit 1 if anywhere.
set -u
# The secret comes in $SECRET, never on a command line.
token=${SECRET:?usage: SECRET=... find_secret.sh}
found=0
for f in /etc/systemd/system/*.service; do
    [ -f "$f" ] || continue
    if grep -qF -- "$token" "$f"; then echo "unit file: $f"; found=1; fi
done
# (the harness that runs this script carries SECRET in its own command line: skip it)
if pgrep -af -- "$token" | grep -vF -e find_secret -e "SECRET=" >/dev/null; then echo "process argv"; found=1; fi
for c in $(docker ps -aq); do
    if docker inspect "$c" | grep -qF -- "$token"; then echo "docker inspect $c"; found=1; fi
    if docker logs "$c" 2>&1 | grep -qF -- "$token"; then echo "docker logs $c"; found=1; fi
done
if journalctl --no-pager | grep -F -- "$token" | grep -vqF -- "find_secret"; then echo "journal"; found=1; fi
exit "$found"

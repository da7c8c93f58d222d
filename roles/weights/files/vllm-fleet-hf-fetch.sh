#!/usr/bin/env bash
# Installed by vllm_fleet.recipes' weights role as /usr/local/libexec/vllm-fleet/hf-fetch.
# Fetch one Hugging Face repository at one revision into an HF cache, resumably, and write a
# marker when it is complete. Progress goes to STATUS (JSON, rewritten every few seconds).
#
#   hf-fetch ENV_FILE HF_BIN REPO REVISION CACHE_DIR MARKER STATUS [MAX_WORKERS [FILE...]]
#
# The marker records the Hub's tree listing (sizes, sha256 of LFS files, git blob ids; from
# vllm-fleet-hf-manifest.py beside this script) for vllm_weights_verify. With FILEs (a repair after a failed
# verification) only those files are fetched again, over whatever is there; the marker is kept.
#
# ENV_FILE (mode 0600) holds HF_TOKEN / HF_ENDPOINT / HF_HUB_* settings: the token never
# appears on a command line. Finished files are skipped by `hf download`; partial ones resume.
set -Eeuo pipefail

if [ "$#" -lt 7 ]; then
    echo "usage: $0 ENV_FILE HF_BIN REPO REVISION CACHE_DIR MARKER STATUS [MAX_WORKERS [FILE...]]" >&2
    exit 2
fi
env_file=$1 hf=$2 repo=$3 revision=$4 cache=$5 marker=$6 status=$7 workers=${8:-8}
only=("${@:9}")

# Read KEY=value lines without evaluating them (the docker --env-file rules): the file is
# never sourced, so nothing in a value ($(...), backticks, quotes) runs.
while IFS= read -r line || [ -n "$line" ]; do
    case $line in '' | '#'*) continue ;; esac
    key=${line%%=*}
    if [[ ! $key =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || [ "$key" = "$line" ]; then
        echo "$env_file: not a KEY=value line (the value is not shown)" >&2
        exit 2
    fi
    export "$key=${line#*=}"
done <"$env_file"
export HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_OFFLINE=0

repo_dir=$cache/hub/models--${repo//\//--}
log=$status.log
start=$(date +%s)
state=running

write_status() {
    local bytes
    bytes=$(du -sb "$repo_dir" 2>/dev/null | cut -f1 || true)
    printf '{"state": "%s", "repo": "%s", "revision": "%s", "bytes": %s, "elapsed_s": %s}\n' \
        "$state" "$repo" "$revision" "${bytes:-0}" "$(($(date +%s) - start))" >"$status.tmp"
    mv -f "$status.tmp" "$status"
}
on_exit() {
    local rc=$?
    if [ "$state" != "done" ]; then
        state=failed
        write_status
    fi
    exit "$rc"
}
trap on_exit EXIT

# A failed `hf download`: why, in its words. When the cache's filesystem filled up, only its last
# line and what to do. No marker is written, so no later run trusts what is there; the next
# `hf download` skips the files that finished (hf removes a file cut by a full disk).
download_failed() {
    local where=$cache/hub
    [ -d "$repo_dir" ] && where=$repo_dir
    echo "hf download $repo${*:+ $*} --revision $revision into $where on $(hostname) failed:" >&2
    local full
    full=$(grep -E 'No space left on device|Errno 28|Disk quota exceeded' "$log" | tail -n 1 || true)
    if [ -n "$full" ]; then
        echo "$full" >&2
        echo "the filesystem of $where on $(hostname) is full" \
            "($(df -Pk "$where" | awk 'NR == 2 { printf "%d KiB free of %d KiB", $4, $2 }')):" \
            "free space there, or give the deployment a weights cache on a larger filesystem, and run again;" \
            "the files that finished are kept (the revision is not marked finished) and the next run fetches the rest" >&2
    else
        echo "last lines of $log:" >&2
        tail -n 20 "$log" >&2
    fi
    exit 1
}

mkdir -p "$cache/hub" "$(dirname "$marker")"
write_status
if [ "${#only[@]}" -gt 0 ]; then
    if ! "$hf" download "$repo" "${only[@]}" --revision "$revision" --cache-dir "$cache/hub" \
        --force-download --quiet >"$log" 2>&1; then
        download_failed "${only[@]}"
    fi
    state="done"
    write_status
    exit 0
fi
"$hf" download "$repo" --revision "$revision" --cache-dir "$cache/hub" --max-workers "$workers" --quiet >"$log" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
    sleep 3
    write_status
done
if ! wait "$pid"; then
    download_failed
fi
snapshot=$(grep -E '^/' "$log" | tail -n 1)
if [ -z "$snapshot" ] || [ ! -d "$snapshot" ]; then
    echo "hf download $repo --revision $revision did not report a snapshot directory; see $log" >&2
    exit 1
fi
bytes=$(find -L "$snapshot" -type f -printf '%s\n' | awk '{ total += $1 } END { print total + 0 }')
files=$(find -L "$snapshot" -type f | wc -l)
commit=$(basename "$snapshot")
# The Hub's manifest of the revision, for vllm_weights_verify; null (verification then uses the
# cache's blob names, which are the Hub's ids too) when the listing cannot be had.
if ! tree=$("$(dirname "$hf")/python" "$(dirname "$0")/vllm-fleet-hf-manifest.py" "$repo" "$commit" 2>"$log.manifest"); then
    echo "the Hub's file listing of $repo@$commit is not available (see $log.manifest); verifying by blob names" >&2
    tree=null
fi
printf '{"repo": "%s", "revision": "%s", "commit": "%s", "snapshot": "%s", "files": %s, "bytes": %s, "finished_at": %s, "tree": %s}\n' \
    "$repo" "$revision" "$commit" "$snapshot" "$files" "$bytes" "$(date +%s)" "${tree:-null}" >"$marker.tmp"
mv -f "$marker.tmp" "$marker"
state="done"
write_status

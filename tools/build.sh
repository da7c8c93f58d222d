#!/usr/bin/env bash
# Build the collection tarball from git's tracked files only (`make build`):
#
#   tools/build.sh OUTPUT_DIR [ANSIBLE_GALAXY]
#
# The working tree's tracked files, uncommitted changes included (`git stash create`, which
# touches nothing), are exported with `git archive` into a temporary directory, and
# `ansible-galaxy collection build` runs there. Untracked files (an inventory.yml saved at the
# root, Vault files, scratch notes) never reach the tarball, whatever build_ignore says;
# build_ignore in galaxy.yml then drops the tracked development files (tools/, Makefile, tests
# tooling). tests/unit/test_install.py builds with this script and checks both.
set -Eeuo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTPUT_DIR [ANSIBLE_GALAXY]" >&2
    exit 2
fi
out=$(realpath -m "$1")
galaxy=${2:-ansible-galaxy}
root=$(git rev-parse --show-toplevel 2>/dev/null) || {
    echo "build: not a git checkout: the tarball is built from git's tracked files" >&2
    exit 2
}
export_dir=$(mktemp -d)
trap 'rm -rf "$export_dir"' EXIT

rev=$(git -C "$root" stash create)
git -C "$root" archive --format=tar "${rev:-HEAD}" | tar -x -C "$export_dir"
mkdir -p "$out"
"$galaxy" collection build --force --output-path "$out" "$export_dir"

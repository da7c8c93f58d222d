# Installed by vllm_fleet.recipes' weights role beside hf-fetch (/usr/local/libexec/vllm-fleet/) and
# run by it with the Python of the huggingface_hub venv, after a download:
#
#   python vllm-fleet-hf-manifest.py REPO COMMIT
#
# Prints the Hub's tree listing of REPO at COMMIT as JSON: one entry per file with its size, git
# blob id and, for LFS files, the sha256. The marker keeps it; vllm_weights_verify checks every
# host's files against it. HF_ENDPOINT / HF_TOKEN come from the environment (hf-fetch's env file).
import json
import sys

from huggingface_hub import HfApi


def main(repo: str, commit: str) -> int:
    entries = []
    for item in HfApi().list_repo_tree(repo, revision=commit, recursive=True):
        if not hasattr(item, "blob_id"):  # a folder
            continue
        lfs = getattr(item, "lfs", None)
        entries.append({"type": "file", "path": item.path, "size": item.size, "oid": item.blob_id,
                        "lfs": {"sha256": lfs.sha256, "size": lfs.size} if lfs else None})
    json.dump(entries, sys.stdout, sort_keys=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: vllm-fleet-hf-manifest.py REPO COMMIT")
    sys.exit(main(sys.argv[1], sys.argv[2]))

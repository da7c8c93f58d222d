# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Model weights in a Hugging Face cache: manifests, verification, import of pre-staged files.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

A *manifest* maps each file of a repository revision to what the Hub says it is::

    {"model.safetensors": {"size": 1234, "sha256": "<64 hex>"},    # an LFS file
     "config.json":       {"size": 567,  "git_sha1": "<40 hex>"}}  # a git blob

The Hub's tree listing gives both (``lfs.oid`` is the sha256 of an LFS file, ``oid`` the git
blob id of any file). An HF cache stores each file once as ``blobs/<etag>`` (the sha256 for
LFS files, the git blob id otherwise) and links ``snapshots/<commit>/<path>`` to it, so a
cache written by ``hf download`` carries the same ids in its blob names: that is the
fallback manifest when the Hub's listing is not at hand.

Standard library only: it runs on the hosts (Python 3.8+) inside Ansible modules.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import stat
import tarfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHA1 = re.compile(r"^[0-9a-f]{40}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CHUNK = 4 * 1024 * 1024
#: Files stored in Git LFS by the Hub's default .gitattributes (and anything big): an imported
#: file of these kinds is named by its sha256 in the cache, like a downloaded one.
_LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".onnx", ".gguf",
                 ".model", ".tflite", ".npz", ".npy", ".pkl", ".tar", ".zip", ".gz", ".zst")
_LFS_MIN_BYTES = 10 * 1024 * 1024


class WeightsError(ValueError):
    """Bad input (a path that leaves the repository, a malformed manifest, an unreadable source)."""


def safe_relpath(name: str) -> str:
    """``name`` as a relative path inside a repository, or WeightsError.

    Manifests come from the Hub (or a pre-staged archive): untrusted. A name must not be
    absolute, contain ``..``, control characters or empty parts.
    """
    if not isinstance(name, str) or not name or len(name) > 4096:
        raise WeightsError("file name %r: expected a relative path of 1-4096 characters" % (name,))
    if _CONTROL.search(name) or "\\" in name:
        raise WeightsError("file name %r: control characters and backslashes are not allowed" % (name,))
    parts = name.split("/")
    if name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise WeightsError("file name %r: expected a relative path without '.', '..' or empty parts" % (name,))
    return name


def expected_entry(entry: dict) -> dict:
    """One manifest entry, checked: size (int >= 0) and sha256 and/or git_sha1 (lower-case hex)."""
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise WeightsError("manifest size %r: expected a non-negative integer" % (size,))
    out: Dict[str, Any] = {"size": size}
    for key, pattern in (("sha256", _SHA256), ("git_sha1", _SHA1)):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not pattern.match(value):
            raise WeightsError("manifest %s %r: expected %d lower-case hex digits"
                               % (key, value, 64 if key == "sha256" else 40))
        out[key] = value
    if len(out) == 1:
        raise WeightsError("manifest entry %r: has neither sha256 nor git_sha1" % (entry,))
    return out


def check_manifest(manifest: dict) -> dict:
    """A manifest with every name and entry checked (WeightsError on the first bad one)."""
    if not isinstance(manifest, dict) or not manifest:
        raise WeightsError("manifest: expected a non-empty mapping of file name -> {size, sha256|git_sha1}")
    return {safe_relpath(name): expected_entry(entry) for name, entry in manifest.items()}


def manifest_from_tree(entries: list) -> dict:
    """A manifest from the Hub's tree listing (``/api/models/REPO/tree/REV?recursive=true``).

    Each entry: ``{"type": "file", "path", "size", "oid", "lfs": {"oid"|"sha256", "size"}}``
    (the REST form), or the same keys huggingface_hub's ``RepoFile`` has (``blob_id``).
    """
    manifest = {}
    for entry in entries:
        if entry.get("type", "file") != "file":
            continue
        item = {"size": entry.get("size")}
        oid = entry.get("oid") or entry.get("blob_id")
        if oid:
            item["git_sha1"] = oid
        lfs = entry.get("lfs") or {}
        sha256 = lfs.get("sha256") or lfs.get("oid")
        if sha256:
            item["sha256"] = sha256
            item["size"] = lfs.get("size", item["size"])
        manifest[entry.get("path")] = item
    return check_manifest(manifest)


def digests(path: str) -> dict:
    """Size, sha256 and git blob sha1 of one file, read once."""
    size = os.stat(path).st_size
    sha256 = hashlib.sha256()
    git = hashlib.sha1(b"blob %d\0" % size)  # nosec B324 - git's object id, not a security hash
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            sha256.update(chunk)
            git.update(chunk)
    return {"size": size, "sha256": sha256.hexdigest(), "git_sha1": git.hexdigest()}


def _inside(root: str, path: str) -> bool:
    root = os.path.realpath(root)
    return os.path.commonpath([root, os.path.realpath(path)]) == root


def blob_name_manifest(snapshot: str) -> dict:
    """The fallback manifest: the ids an HF cache's blob names carry (``blobs/<etag>``)."""
    manifest = {}
    for dirpath, _dirs, files in os.walk(snapshot):
        for name in files:
            link = os.path.join(dirpath, name)
            rel = os.path.relpath(link, snapshot).replace(os.sep, "/")
            blob = os.path.basename(os.path.realpath(link))
            if _SHA256.match(blob):
                manifest[rel] = {"sha256": blob}
            elif _SHA1.match(blob):
                manifest[rel] = {"git_sha1": blob}
    return manifest


def _check_one(snapshot: str, repo_dir: str, name: str, expected: dict) -> dict | None:
    """None when the file matches; otherwise what is wrong with it."""
    path = os.path.join(snapshot, *name.split("/"))
    problem = {"file": name, "path": path, "blob": None}
    if not os.path.lexists(path):
        return dict(problem, problem="missing", expected=expected, actual=None)
    if not _inside(repo_dir, path):
        return dict(problem, problem="outside", expected=expected, actual=os.path.realpath(path))
    problem["blob"] = os.path.realpath(path)
    if not os.path.isfile(path):
        return dict(problem, problem="missing", expected=expected, actual=None)
    if "size" in expected and os.stat(path).st_size != expected["size"]:
        return dict(problem, problem="size", expected=expected, actual={"size": os.stat(path).st_size})
    actual = digests(path)
    for key in ("sha256", "git_sha1"):
        if key in expected and actual[key] != expected[key]:
            return dict(problem, problem=key, expected=expected, actual=actual)
    return None


def verify_snapshot(snapshot: str, manifest: dict, repo_dir: str | None = None, workers: int = 4) -> dict:
    """Hash every file ``manifest`` names under ``snapshot``; report the ones that differ.

    Returns ``{"checked": N, "bytes": B, "mismatches": [{file, problem, expected, actual, path,
    blob}]}``; ``problem`` is missing, size, sha256, git_sha1 or outside (a link that leaves
    ``repo_dir``). Files the manifest does not name are not read.
    """
    repo_dir = repo_dir or os.path.dirname(os.path.dirname(snapshot))
    names = sorted(manifest)
    with ThreadPoolExecutor(max_workers=max(1, min(workers, 32))) as pool:  # hashlib releases the GIL
        results = list(pool.map(lambda name: _check_one(snapshot, repo_dir, name, manifest[name]), names))
    mismatches = [result for result in results if result]
    checked_bytes = sum(manifest[name].get("size", 0) for name, result in zip(names, results) if not result)
    return {"checked": len(names), "bytes": checked_bytes, "mismatches": mismatches}


def remove_bad(repo_dir: str, mismatches: list) -> list:
    """Delete the blobs (and links) of mismatched files so a re-fetch replaces only those.

    Only paths inside ``repo_dir`` are touched. Returns the paths removed.
    """
    removed = []
    for item in mismatches:
        for path in (item.get("blob"), item.get("path")):
            if path and os.path.lexists(path) and _inside(repo_dir, os.path.dirname(path)):
                if os.path.isdir(path) and not os.path.islink(path):
                    continue
                os.unlink(path)
                removed.append(path)
    return removed


# --- import of pre-staged files ------------------------------------------------------------------

def _is_lfs(name: str, size: int) -> bool:
    return name.lower().endswith(_LFS_SUFFIXES) or size >= _LFS_MIN_BYTES


def _store(handle, size: int, name: str, blobs: str) -> tuple:
    """Copy a stream into ``blobs/<etag>`` (via a temporary file); return (etag, manifest entry)."""
    sha256 = hashlib.sha256()
    git = hashlib.sha1(b"blob %d\0" % size)  # nosec B324 - git's object id
    tmp = os.path.join(blobs, ".import-%d.incomplete" % os.getpid())
    written = 0
    with open(tmp, "wb") as out:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            sha256.update(chunk)
            git.update(chunk)
            out.write(chunk)
            written += len(chunk)
    if written != size:
        os.unlink(tmp)
        raise WeightsError("%s: read %d bytes, expected %d (truncated source?)" % (name, written, size))
    entry: Dict[str, Any] = {"size": size, "sha256": sha256.hexdigest(), "git_sha1": git.hexdigest()}
    etag = entry["sha256"] if _is_lfs(name, size) else entry["git_sha1"]
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(blobs, etag))
    return etag, entry


def _link(snapshot: str, name: str, etag: str) -> None:
    link = os.path.join(snapshot, *name.split("/"))
    os.makedirs(os.path.dirname(link), exist_ok=True)
    depth = name.count("/")
    target = "/".join([".."] * (depth + 2) + ["blobs", etag])
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(target, link)


def _source_files(source: str):
    """(name, size, opener) for every regular file of a directory or tar archive; WeightsError otherwise."""
    if os.path.isdir(source):
        for dirpath, dirs, files in os.walk(source):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                if name.startswith("."):
                    continue
                path = os.path.join(dirpath, name)
                info = os.lstat(path)
                rel = safe_relpath(os.path.relpath(path, source).replace(os.sep, "/"))
                if not stat.S_ISREG(info.st_mode):
                    raise WeightsError("%s: %s is not a regular file (links are not imported)" % (source, rel))
                yield rel, info.st_size, (lambda p=path: open(p, "rb"))  # noqa: SIM115 - the caller closes it
        return
    if not os.path.isfile(source):
        raise WeightsError("%s: expected a directory or a tar archive (.tar, .tar.gz, .tgz, .tar.xz)" % source)
    try:
        archive = tarfile.open(source, "r:*")  # noqa: SIM115 - closed below
    except (tarfile.TarError, OSError) as exc:
        raise WeightsError("%s: not a readable tar archive (%s)" % (source, exc)) from exc
    with archive:
        for member in archive:
            name = member.name[2:] if member.name.startswith("./") else member.name
            if member.isdir() or not name or name == ".":
                continue
            rel = safe_relpath(name)
            if not member.isreg():
                raise WeightsError("%s: member %s is not a regular file (links and devices are refused)" % (source, rel))
            if any(part.startswith(".") for part in rel.split("/")):
                continue
            yield rel, member.size, (lambda m=member: archive.extractfile(m) or io.BytesIO())


def import_files(source: str, repo_dir: str, commit: str | None = None, only: list | None = None) -> tuple:
    """Lay out the files of ``source`` (a directory or a tar archive) as an HF cache snapshot.

    ``repo_dir`` is ``<cache>/hub/models--ORG--NAME``; the files land in ``blobs/<etag>`` and
    ``snapshots/<commit>/<path>`` links to them, as ``hf download`` writes them. Without a
    ``commit`` (the revision is a branch name) the snapshot is named by ``import_commit``.
    ``only`` re-imports just those names into an existing snapshot (a repair).
    Returns ``(commit, manifest of what was imported)``.
    """
    if commit is not None and not _SHA1.match(commit):
        raise WeightsError("commit %r: expected 40 lower-case hex digits" % (commit,))
    if only and commit is None:
        raise WeightsError("a repair (only=...) needs the snapshot's commit")
    blobs = os.path.join(repo_dir, "blobs")
    staging = os.path.join(repo_dir, "snapshots", commit if only and commit is not None else ".import-%d" % os.getpid())
    os.makedirs(blobs, exist_ok=True)
    os.makedirs(staging, exist_ok=True)
    wanted = set(only) if only else None
    manifest = {}
    for name, size, opener in _source_files(source):
        if wanted is not None and name not in wanted:
            continue
        with opener() as handle:
            etag, entry = _store(handle, size, name, blobs)
        _link(staging, name, etag)
        manifest[name] = entry
    if not manifest:
        raise WeightsError("%s: no files to import%s" % (source, " among %s" % sorted(wanted) if wanted else ""))
    if wanted is not None:
        if wanted - set(manifest):
            raise WeightsError("%s: lacks %s" % (source, ", ".join(sorted(wanted - set(manifest)))))
        return commit, manifest
    commit = commit or import_commit(manifest)
    snapshot = os.path.join(repo_dir, "snapshots", commit)
    if os.path.isdir(snapshot):
        shutil.rmtree(snapshot)
    os.replace(staging, snapshot)
    return commit, manifest


def import_commit(manifest: dict) -> str:
    """A stable 40-hex id for an imported revision that has no Hub commit: sha1 of its manifest."""
    text = "\n".join("%s %s %d" % (name, entry.get("sha256") or entry.get("git_sha1"), entry["size"])
                     for name, entry in sorted(manifest.items()))
    return hashlib.sha1(text.encode("utf-8")).hexdigest()  # nosec B324 - an id, not a security hash

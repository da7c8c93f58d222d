"""Weights verification and import: the Hub's manifest, a flipped byte, a repair, pre-staged files.

The download side runs the weights role's real fetch script with the real ``hf`` CLI against the
Hub stand-in (tests/infra/hub_standin.py), so the manifest checked here is the one a deploy records.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.module_utils import _weights_files as W
from ansible_collections.vllm_fleet.recipes.plugins.modules import vllm_weights_import as IMPORT
from ansible_collections.vllm_fleet.recipes.plugins.modules import vllm_weights_verify as VERIFY

REPO = Path(__file__).resolve().parents[4]
FETCH = REPO / "roles" / "weights" / "files" / "vllm-fleet-hf-fetch.sh"
BIN = Path(sys.executable).parent
SHARD = "model-00001-of-00002.safetensors"


def _flip_byte(path: Path, offset: int = 100) -> None:
    """Change one byte in place (the blob behind a snapshot link), as a bad disk or copy would."""
    real = Path(os.path.realpath(path))
    data = bytearray(real.read_bytes())
    data[offset] ^= 0x01
    real.write_bytes(bytes(data))


def _fetch(tmp_path: Path, hub: str, *files: str, revision: str = "main") -> tuple:
    env = tmp_path / "hf-download.env"
    env.write_text(f"HF_ENDPOINT={hub}\nHF_TOKEN=hf_FAKEtokenForTheVerifyTest\n")
    env.chmod(0o600)
    cache = tmp_path / "cache"
    marker = cache / ".vllm-fleet" / "org--model@main.json"
    status = cache / ".vllm-fleet" / "org--model@main.status"
    result = subprocess.run(["bash", str(FETCH), str(env), str(BIN / "hf"), "org/model", revision, str(cache),
                             str(marker), str(status), "4", *files],
                            capture_output=True, text=True, check=False, timeout=120)
    return result, marker


needs_hf = pytest.mark.skipif(not (BIN / "hf").exists(), reason="needs the hf CLI in the venv")


@needs_hf
def test_a_download_records_the_hubs_manifest_and_verifies(tmp_path, hub):
    result, marker = _fetch(tmp_path, hub)
    assert result.returncode == 0, result.stderr
    record = json.loads(marker.read_text())
    manifest = W.manifest_from_tree(record["tree"])
    assert len(manifest) == record["files"] == 7
    assert "sha256" in manifest[SHARD] and "sha256" not in manifest["config.json"]
    report = VERIFY.verify(str(marker), remove_bad=False, workers=2)
    assert report["ok"] and report["manifest_source"] == "hub"
    assert report["checked"] == 7 and report["bytes"] == record["bytes"]


@needs_hf
def test_a_flipped_byte_is_named_removed_and_fetched_again_alone(tmp_path, hub):
    result, marker = _fetch(tmp_path, hub)
    assert result.returncode == 0, result.stderr
    snapshot = Path(json.loads(marker.read_text())["snapshot"])
    _flip_byte(snapshot / SHARD)

    found = VERIFY.verify(str(marker), remove_bad=True, workers=2)
    assert not found["ok"]
    assert [(m["file"], m["problem"]) for m in found["mismatches"]] == [(SHARD, "sha256")]
    bad = found["mismatches"][0]
    assert bad["actual"]["sha256"] != bad["expected"]["sha256"]
    assert VERIFY.describe(bad).startswith(f"{SHARD}: sha256 is {bad['actual']['sha256']}, expected ")
    assert len(found["removed"]) == 2 and not (snapshot / SHARD).exists()

    before = json.loads(subprocess.check_output(["curl", "-s", hub + "/_standin/stats"]))["gets"]
    commit = snapshot.name
    repaired, _marker = _fetch(tmp_path, hub, SHARD, revision=commit)
    assert repaired.returncode == 0, repaired.stderr
    after = json.loads(subprocess.check_output(["curl", "-s", hub + "/_standin/stats"]))["gets"]
    refetched = sorted(k.rsplit("/", 1)[-1] for k in after if after[k] != before.get(k, 0))
    assert refetched == [SHARD]
    assert VERIFY.verify(str(marker), remove_bad=False, workers=2)["ok"]


@needs_hf
def test_without_the_hubs_listing_the_blob_names_are_the_manifest(tmp_path, hub):
    result, marker = _fetch(tmp_path, hub)
    assert result.returncode == 0, result.stderr
    record = json.loads(marker.read_text())
    record["tree"] = None
    marker.write_text(json.dumps(record))
    assert VERIFY.verify(str(marker), remove_bad=False, workers=1)["manifest_source"] == "blob names"
    _flip_byte(Path(record["snapshot"]) / "config.json", offset=3)
    report = VERIFY.verify(str(marker), remove_bad=False, workers=1)
    assert [(m["file"], m["problem"]) for m in report["mismatches"]] == [("config.json", "git_sha1")]


def _prestaged(tmp_path: Path) -> Path:
    source = tmp_path / "staged"
    (source / "sub").mkdir(parents=True)
    (source / "config.json").write_text('{"model_type": "qwen3"}\n')
    (source / "model.safetensors").write_bytes(bytes(range(256)) * 64)
    (source / "sub" / "extra.txt").write_text("nested\n")
    (source / ".cache").mkdir()
    (source / ".cache" / "ignored").write_text("not part of the model")
    return source


def test_import_lays_out_an_hf_cache_that_verifies(tmp_path):
    source = _prestaged(tmp_path)
    repo_dir = tmp_path / "cache" / "hub" / "models--org--model"
    commit, manifest = W.import_files(str(source), str(repo_dir))
    assert sorted(manifest) == ["config.json", "model.safetensors", "sub/extra.txt"]
    snapshot = repo_dir / "snapshots" / commit
    # the shard is named by its sha256, the small files by their git blob id, as the Hub names them
    assert os.readlink(snapshot / "model.safetensors") == "../../blobs/" + manifest["model.safetensors"]["sha256"]
    assert os.readlink(snapshot / "sub" / "extra.txt") == "../../../blobs/" + manifest["sub/extra.txt"]["git_sha1"]
    assert (snapshot / "sub" / "extra.txt").read_text() == "nested\n"
    assert commit == W.import_commit(manifest)
    report = W.verify_snapshot(str(snapshot), manifest)
    assert report == {"checked": 3, "bytes": sum(e["size"] for e in manifest.values()), "mismatches": []}
    assert W.blob_name_manifest(str(snapshot)).keys() == manifest.keys()


def _import_params(tmp_path: Path) -> dict:
    """vllm_weights_import's parameters for the pre-staged model of _prestaged, at main."""
    return {"source": str(_prestaged(tmp_path)), "cache_dir": str(tmp_path / "cache"), "repo": "org/model",
            "revision": "main", "marker": str(tmp_path / "cache" / ".vllm-fleet" / "m.json"), "only": []}


def test_the_import_module_pins_a_commit_or_writes_the_branch_ref(tmp_path):
    params = _import_params(tmp_path)
    marker = Path(params["marker"])
    result = IMPORT.run_import(params)
    refs = tmp_path / "cache" / "hub" / "models--org--model" / "refs" / "main"
    assert refs.read_text() == result["commit"]
    assert VERIFY.verify(str(marker), remove_bad=False, workers=1)["manifest_source"] == "import"

    pinned = "0123456789abcdef0123456789abcdef01234567"
    result = IMPORT.run_import(dict(params, revision=pinned))
    assert result["commit"] == pinned and Path(result["snapshot"]).is_dir()
    assert json.loads(marker.read_text())["commit"] == pinned


def test_a_repair_reimports_only_the_bad_file(tmp_path):
    params = _import_params(tmp_path)
    marker = Path(params["marker"])
    first = IMPORT.run_import(params)
    snapshot = Path(first["snapshot"])
    config_blob = os.path.realpath(snapshot / "config.json")
    config_mtime = os.stat(config_blob).st_mtime_ns
    _flip_byte(snapshot / "model.safetensors")
    found = VERIFY.verify(str(marker), remove_bad=True, workers=1)
    assert [m["file"] for m in found["mismatches"]] == ["model.safetensors"]
    repaired = IMPORT.run_import(dict(params, only=["model.safetensors"]))
    assert repaired["files"] == 1
    assert VERIFY.verify(str(marker), remove_bad=False, workers=1)["ok"]
    assert os.stat(config_blob).st_mtime_ns == config_mtime


def test_import_from_a_tar_archive(tmp_path):
    source = _prestaged(tmp_path)
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(source, arcname=".")
    repo_dir = tmp_path / "cache" / "hub" / "models--org--model"
    commit, manifest = W.import_files(str(archive), str(repo_dir))
    assert sorted(manifest) == ["config.json", "model.safetensors", "sub/extra.txt"]
    assert W.verify_snapshot(str(repo_dir / "snapshots" / commit), manifest)["mismatches"] == []


@pytest.mark.parametrize("member", ["../evil", "/etc/evil", "a/../../evil", "link"])
def test_an_archive_that_leaves_the_repository_is_refused_before_anything_is_written(tmp_path, member):
    archive = tmp_path / "bad.tar"
    with tarfile.open(archive, "w") as tar:
        info = tarfile.TarInfo(member)
        if member == "link":
            info.type, info.linkname = tarfile.SYMTYPE, "/etc/shadow"
            tar.addfile(info)
        else:
            data = b"x"
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    repo_dir = tmp_path / "cache" / "hub" / "models--org--model"
    with pytest.raises(W.WeightsError) as err:
        W.import_files(str(archive), str(repo_dir))
    assert str(archive) in str(err.value) or member in str(err.value)
    assert not list((repo_dir / "blobs").iterdir())
    assert not (tmp_path / "evil").exists()


def test_a_manifest_name_that_leaves_the_snapshot_is_refused():
    for name in ("../x", "/abs", "a//b", "a/./b", "ok\x00no", "tab\tname", ""):
        with pytest.raises(W.WeightsError):
            W.check_manifest({name: {"size": 1, "sha256": "0" * 64}})
    with pytest.raises(W.WeightsError, match="sha256"):
        W.check_manifest({"a": {"size": 1, "sha256": "$(reboot)"}})
    with pytest.raises(W.WeightsError, match="neither"):
        W.check_manifest({"a": {"size": 1}})


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=300))
def test_safe_relpath_accepts_only_plain_relative_paths(name):
    try:
        W.safe_relpath(name)
    except W.WeightsError as exc:
        assert repr(name)[:50] in str(exc) or len(name) > 4096 or name == ""
        return
    parts = name.split("/")
    assert not name.startswith("/") and ".." not in parts and "" not in parts
    assert not any(ord(ch) < 32 or ord(ch) == 127 for ch in name)


def test_a_snapshot_link_that_points_outside_the_repository_is_reported(tmp_path):
    repo_dir = tmp_path / "hub" / "models--org--model"
    snapshot = repo_dir / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.write_text("host file")
    (snapshot / "config.json").symlink_to(outside)
    manifest = {"config.json": {"size": 9, "git_sha1": "0" * 40}}
    report = W.verify_snapshot(str(snapshot), manifest, repo_dir=str(repo_dir))
    assert [m["problem"] for m in report["mismatches"]] == ["outside"]
    W.remove_bad(str(repo_dir), report["mismatches"])
    assert outside.exists()  # never removed: it is not inside the repository

"""The vendor table (plugins/plugin_utils/_vendors.py): complete, self-consistent, classifies every profile."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

_COLLECTIONS = str(Path(__file__).resolve().parents[4] / ".collections")
if _COLLECTIONS not in sys.path:  # harmless when conftest.py already did it
    sys.path.insert(0, _COLLECTIONS)

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._container import vendor_flags  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._docker import docker_meta  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._vendors import (  # noqa: E402
    HARDENED_VENDORS,
    VENDORS,
    Vendor,
    site_vendor_key,
    vendor_key,
    visible_devices_var,
)

REPO = Path(__file__).resolve().parents[4]
SHARED = Path(os.environ.get("VLLM_FLEET_SHARED_DIR") or REPO.parent / "shared")
UPSTREAM_TAXONOMY = SHARED / "upstream" / "recipes" / "taxonomy.yaml"

#: Our vendor, and the recipes site's, of each catalog generation.
BY_GENERATION = {
    "hopper": ("nvidia", "nvidia"), "blackwell": ("nvidia", "nvidia"), "ada": ("nvidia", "nvidia"),
    "amd": ("amd", "amd"), "tpu": ("tpu", "tpu"), "cpu": ("cpu", "cpu"), "xpu": ("intel", "intel"),
    "npu": ("ascend", "nvidia"),  # the site knows no Ascend: NVIDIA image and flags
}
OPTIONAL_FIELDS = {"upstream_nightly_image", "hardened_flags", "visible_devices_var", "count_command", "count_tool"}


def _profiles(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))["hardware_profiles"]


CATALOG = _profiles(REPO / "recipes" / "catalog" / "hardware.yaml")


def _normalized(tokens: list[str]) -> list[str]:
    """``--opt=value`` as two tokens: the site's text and argv sometimes differ only there."""
    out: list[str] = []
    for token in tokens:
        out += token.split("=", 1) if re.match(r"^--[a-z-]+=", token) else [token]
    return out


def test_registry_keys_match_entries():
    assert list(VENDORS) == ["nvidia", "amd", "ascend", "cpu", "tpu", "intel"]
    for key, vendor in VENDORS.items():
        assert isinstance(vendor, Vendor) and vendor.key == key


@pytest.mark.parametrize("key", list(VENDORS))
def test_every_vendor_has_every_field(key):
    vendor = VENDORS[key]
    for field in dataclasses.fields(Vendor):
        value = getattr(vendor, field.name)
        if field.name not in OPTIONAL_FIELDS:
            assert value is not None and value != "", field.name
    assert vendor.upstream_image and ":" in vendor.upstream_image
    assert vendor.upstream_nightly_image is None or ":" in vendor.upstream_nightly_image
    assert vendor.site_brand in ("nvidia", "amd", "tpu", "intel")
    assert all(source in ("address", "interface") for _name, source in vendor.fabric_env)
    assert (vendor.count_command is None) == (vendor.count_tool is None)
    assert (vendor.hardened_flags is None) == (key not in HARDENED_VENDORS)
    assert vendor.multi_node_mounts == () or vendor.driver_mounts != ()
    assert visible_devices_var(key) == vendor.visible_devices_var


@pytest.mark.parametrize("key", list(VENDORS))
def test_upstream_flags_text_and_argv_agree(key):
    vendor = VENDORS[key]
    from_text = shlex.split(vendor.upstream_flags_text.replace("\\\n", " "))
    assert _normalized(from_text) == _normalized(list(vendor.upstream_flags_argv))


def test_hardened_vendors():
    assert HARDENED_VENDORS == ("nvidia", "amd", "ascend", "cpu")
    for key in ("tpu", "intel", "unknown"):
        with pytest.raises(ValueError):
            vendor_flags(key)
    assert vendor_flags("tpu", gpu_runtime="none") == ["--ipc=host"]
    for key in HARDENED_VENDORS:
        assert "--privileged" not in vendor_flags(key, host_gpus=[0, 1], multi_node=True)


def test_ascend_mounts_follow_the_vllm_ascend_guides():
    single = vendor_flags("ascend", host_gpus=[0, 1])
    multi = vendor_flags("ascend", host_gpus=[0, 1], multi_node=True)
    for path in VENDORS["ascend"].driver_mounts:
        assert f"{path}:{path}:ro" in single
    hccn = "/usr/local/Ascend/driver/tools/hccn_tool"
    assert f"{hccn}:{hccn}:ro" in multi and f"{hccn}:{hccn}:ro" not in single
    assert "/etc/hccn.conf:/etc/hccn.conf:ro" in multi
    assert multi[:4] == ["--device", "/dev/davinci0", "--device", "/dev/davinci1"]


@pytest.mark.parametrize("hardware_id", list(CATALOG))
def test_catalog_profiles_classify(hardware_id):
    profile = CATALOG[hardware_id]
    ours, site = BY_GENERATION[profile["generation"]]
    assert vendor_key(profile, hardware_id) == ours
    meta = docker_meta({}, {}, profile, hardware_id)
    assert vendor_key(profile, hardware_id, meta) == ours
    assert site_vendor_key(meta["isTpu"], meta["isAmd"], meta["isXpu"], meta["isIntel"]) == site
    assert meta["brandKey"] == VENDORS[site].site_brand
    assert meta["gpuFlags"] == VENDORS[site].upstream_flags_text
    assert meta["image"] == VENDORS[site].upstream_image


@pytest.mark.skipif(not UPSTREAM_TAXONOMY.is_file(), reason="../shared/upstream not found")
def test_upstream_profiles_classify():
    for hardware_id, profile in _profiles(UPSTREAM_TAXONOMY).items():
        ours, site = BY_GENERATION[profile["generation"]]
        assert vendor_key(profile, hardware_id) == ours, hardware_id
        meta = docker_meta({}, {}, profile, hardware_id)
        assert site_vendor_key(meta["isTpu"], meta["isAmd"], meta["isXpu"], meta["isIntel"]) == site, hardware_id


def test_vendor_key_without_a_profile_reads_the_id_and_docker_meta():
    assert vendor_key(None, None) == "nvidia"
    assert vendor_key(None, "Ascend_910b") == "ascend"
    assert vendor_key({}, None, {"isAmd": True}) == "amd"
    assert vendor_key({}, None, {"isTpu": True}) == "tpu"
    assert vendor_key({}, None, {"isXpu": True}) == "intel"
    assert vendor_key({"brand": "huawei"}, None, {"isAmd": True}) == "ascend"


def test_nightly_images():
    nightly = {"model": {"nightly_required": True}}
    for hardware_id in ("h200", "mi355x", "trillium", "xeon6", "arc_pro_b60", "ascend_950pr"):
        profile = CATALOG[hardware_id]
        site = BY_GENERATION[profile["generation"]][1]
        assert docker_meta(nightly, {}, profile, hardware_id)["image"] == VENDORS[site].upstream_nightly_image

"""Image pulls (plugins/plugin_utils/_image_refs.py and the image_pulls filter): mirrors, pins, archives."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_COLLECTIONS = str(Path(__file__).resolve().parents[4] / ".collections")
if _COLLECTIONS not in sys.path:  # harmless when conftest.py already did it
    sys.path.insert(0, _COLLECTIONS)

from ansible.errors import AnsibleFilterError  # noqa: E402

from ansible_collections.vllm_fleet.recipes.plugins.filter.images import image_pulls_filter  # noqa: E402
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._image_refs import image_pull, parse_reference  # noqa: E402

MIRROR = "mirror.example:5000"
PIN = "sha256:" + "ab" * 32


@pytest.mark.parametrize("reference, registry, name, suffix, path", [
    ("vllm/vllm-openai:v0.11.0", "docker.io", "vllm/vllm-openai", ":v0.11.0", "vllm/vllm-openai"),
    ("ubuntu", "docker.io", "ubuntu", "", "library/ubuntu"),
    ("ubuntu:24.04", "docker.io", "ubuntu", ":24.04", "library/ubuntu"),
    ("localhost:5000/tiny:v1", "localhost:5000", "tiny", ":v1", "tiny"),
    ("localhost/tiny", "localhost", "tiny", "", "tiny"),
    ("quay.io/ascend/vllm-ascend:v0.11.0rc0", "quay.io", "ascend/vllm-ascend", ":v0.11.0rc0", "ascend/vllm-ascend"),
    ("rocm/vllm@" + PIN, "docker.io", "rocm/vllm", "@" + PIN, "rocm/vllm"),
    ("rocm/vllm:latest@" + PIN, "docker.io", "rocm/vllm", ":latest@" + PIN, "rocm/vllm"),
    # A first component without '.', ':' or "localhost" is a Hub namespace, not a registry.
    ("intel/vllm:0.10", "docker.io", "intel/vllm", ":0.10", "intel/vllm"),
])
def test_references_split_as_docker_reads_them(reference, registry, name, suffix, path):
    ref = parse_reference(reference)
    assert (ref.registry, ref.name, ref.suffix, ref.path) == (registry, name, suffix, path)


@pytest.mark.parametrize("reference, mirrors, digests, source, pull", [
    # As named: nothing to tag.
    ("vllm/vllm-openai:v0.11.0", {}, {}, "vllm/vllm-openai:v0.11.0", "always"),
    ("quay.io/ascend/vllm-ascend:v1", {}, {}, "quay.io/ascend/vllm-ascend:v1", "always"),
    # No tag: docker pulls :latest, and the untagged reference is then tagged.
    ("ubuntu", {}, {}, "ubuntu:latest", "always"),
    # Mirrors are keyed by the registry the reference names (docker.io when none).
    ("vllm/vllm-openai:v0.11.0", {"docker.io": MIRROR}, {}, f"{MIRROR}/vllm/vllm-openai:v0.11.0", "always"),
    ("ubuntu:24.04", {"docker.io": MIRROR}, {}, f"{MIRROR}/library/ubuntu:24.04", "always"),
    ("quay.io/ascend/vllm-ascend:v1", {"docker.io": MIRROR}, {}, "quay.io/ascend/vllm-ascend:v1", "always"),
    ("quay.io/ascend/vllm-ascend:v1", {"quay.io": MIRROR}, {}, f"{MIRROR}/ascend/vllm-ascend:v1", "always"),
    # A pin replaces the tag and is pulled only when absent.
    ("vllm/vllm-openai:v0.11.0", {}, {"vllm/vllm-openai:v0.11.0": PIN}, f"vllm/vllm-openai@{PIN}", "not_present"),
    ("vllm/vllm-openai:v0.11.0", {"docker.io": MIRROR}, {"vllm/vllm-openai:v0.11.0": PIN},
     f"{MIRROR}/vllm/vllm-openai@{PIN}", "not_present"),
    # A pin of another reference does not apply.
    ("vllm/vllm-openai:v0.11.0", {}, {"vllm/vllm-openai:v0.12.0": PIN}, "vllm/vllm-openai:v0.11.0", "always"),
])
def test_mirrors_and_pins_choose_the_source_and_the_policy(reference, mirrors, digests, source, pull):
    got = image_pull(reference, mirrors, digests, "always")
    assert (got.source, got.pull, got.tag) == (source, pull, source != reference)
    assert got.reference == reference


def test_the_filter_leaves_archives_out_and_lists_each_reference_once_in_order():
    refs = ["b/engine:v1", "a/router:v1", "b/engine:v1", "c/archived:v1"]
    got = image_pulls_filter(refs, {"docker.io": MIRROR}, {}, {"c/archived:v1": "/srv/a.tar"}, "not_present")
    assert got == [
        {"reference": "a/router:v1", "source": f"{MIRROR}/a/router:v1", "pull": "not_present", "tag": True},
        {"reference": "b/engine:v1", "source": f"{MIRROR}/b/engine:v1", "pull": "not_present", "tag": True},
    ]
    assert image_pulls_filter([], None, None, None) == []


@pytest.mark.parametrize("args, named", [
    (("vllm/vllm-openai:v1",), "expected a list of image references"),
    (([1],), "expected a list of image references"),
    ((["a:v1"], ["docker.io"]), "vllm_image_registry_mirrors is a list"),
    ((["a:v1"], {}, "sha256:x"), "vllm_image_digests is a str"),
])
def test_the_filter_names_the_input_it_cannot_read(args, named):
    with pytest.raises(AnsibleFilterError, match=named):
        image_pulls_filter(*args)


def test_a_pull_that_would_change_nothing_on_the_host_is_left_out():
    """The preflight's read of the host (vllm_fleet_images_present): a not_present pull of a reference the
    host has is a no-op, so it is left out; a mirrored or pinned one (pulled under another name), an
    `always` pull and a reference the host lacks are kept."""
    refs = ["reg.example/plain:v1", "vllm/vllm-openai:v1", "pinned/engine:v1", "absent/engine:v1"]
    present = {ref: True for ref in refs[:3]} | {"absent/engine:v1": False}
    got = image_pulls_filter(refs, {}, {"pinned/engine:v1": PIN}, {}, "not_present", present)
    assert [(p["reference"], p["tag"]) for p in got] == [("absent/engine:v1", False), ("pinned/engine:v1", True)]
    always = image_pulls_filter(refs, {}, {}, {}, "always", present)
    assert [p["reference"] for p in always] == sorted(refs)
    mirrored = image_pulls_filter(refs, {"docker.io": MIRROR}, {}, {}, "not_present", present)
    assert [p["reference"] for p in mirrored] == ["absent/engine:v1", "pinned/engine:v1", "vllm/vllm-openai:v1"]
    with pytest.raises(AnsibleFilterError, match="vllm_fleet_images_present is a list"):
        image_pulls_filter(refs, {}, {}, {}, "not_present", ["vllm/vllm-openai:v1"])

"""Secrets and numbers in untrusted input (issue 33, classes 1-5), as properties over generated input.

* Any Vault value, under any key of ``vllm_deployment`` or a host, reaches only the 0600
  ``*.secret.env`` files, or is refused by its key and never shown (a fingerprint at most).
* An empty secret (an empty Vault value, an empty ``api_key`` or token) is refused.
* A boolean is refused for every integer field (YAML ``true``/``yes`` is not 1).
* No refusal shows a value that sits under an unknown (mistyped) key.

The last test runs ``playbooks/render.yml`` on a vaulted inventory: the inventory reader of the
real action marks Vault values (ansible-core's own representation, whatever the version).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _render as R
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._deployment_spec import DeploymentSpec
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError, key_path
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._secret import VaultValue

SETTINGS = settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
ENGINE = P.engine_factory()
REPO = Path(__file__).resolve().parents[2]


def render(deployment: dict[str, Any], hostvars: dict[str, Any] | None = None) -> dict[str, str]:
    decl = {"recipe": "zai-org/GLM-5.3-Flash", "hardware": "h200", "strategy": "single_node_tp", **deployment}
    vars_ = {"ansible_host": "10.40.0.1", "vllm_fabric_interface": "ens5", "vllm_deployment": decl,
             **(hostvars or {})}
    return R.render(P.build_plan({"a": vars_}, {"all": ["a"], "g": ["a"]}, ENGINE))


def put(tree: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """``tree`` with ``value`` at ``path`` (mappings created on the way; an int part: a list index)."""
    node: Any = tree
    for part, following in itertools.pairwise(path):
        node = node.setdefault(part, [] if isinstance(following, int) else {})
    if isinstance(path[-1], int):
        node.extend([f"--x{i}" for i in range(path[-1] + 1 - len(node))])
        node[path[-1]] = value
    else:
        node[path[-1]] = value
    return tree


# --------------------------------------------------------------------------------------
# 1. a Vault value is a secret whatever its key
# --------------------------------------------------------------------------------------

#: Text that renders anywhere a plain value renders (so that a leak, not a refusal, is what shows).
SECRET_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=6,
                      max_size=24).map(lambda s: "Vlt" + s)
ENV_NAMES = st.sampled_from(["DATABASE_URL", "NCCL_DEBUG", "WANDB_API_KEY", "HF_TOKEN", "MY_SETTING", "VLLM_PORT",
                             "VLLM_ENGINE_READY_TIMEOUT_S", "HF_HUB_OFFLINE"]) \
    | st.from_regex(r"\A[A-Z][A-Z0-9_]{0,12}\Z")
DEPLOYMENT_PATHS = st.one_of(
    ENV_NAMES.map(lambda name: ("extra_env", name)),
    st.sampled_from([("api_key",), ("weights", "token"), ("advanced_args", 1), ("advanced_args", 0),
                     ("container_args", 0), ("placeholders", "IB_IF"), ("name",), ("image",), ("variant",),
                     ("weights", "endpoint"), ("weights", "revision"), ("config_dir",), ("recipe",),
                     ("feature_modes", "x"), ("router", "venv"), ("cpu", "omp_threads_bind")]))
HOST_PATHS = st.sampled_from([("vllm_placeholders", "IB_IF"), ("vllm_ib_hca",), ("vllm_rdma_devices",),
                              ("vllm_fabric_address",), ("ansible_host",), ("vllm_mooncake_device",),
                              ("vllm_fabric_interface",)])


def only_in_secret_files(files: dict[str, str], plaintext: str) -> None:
    for path, text in files.items():
        if plaintext in text:
            assert path.endswith(".secret.env") and R.file_mode(path) == 0o600, path


@SETTINGS
@given(st.one_of(DEPLOYMENT_PATHS.map(lambda p: ("deployment", p)), HOST_PATHS.map(lambda p: ("host", p))),
       SECRET_TEXT)
@example(("deployment", ("extra_env", "DATABASE_URL")), "VltPostgresPassw0rd")
@example(("deployment", ("advanced_args", 1)), "VltServedName")
@example(("host", ("vllm_placeholders", "IB_IF")), "Vltmlx5_0")
def test_any_vault_value_reaches_only_the_secret_files(where, plaintext):
    kind, path = where
    deployment: dict[str, Any] = {"advanced_args": ["--served-model-name", "glm"]} if path[0] == "advanced_args" else {}
    hostvars: dict[str, Any] = {}
    put(deployment if kind == "deployment" else hostvars, path, VaultValue(plaintext))
    try:
        files = render(deployment, hostvars)
    except (RecipeError, ValueError) as exc:
        message = str(exc)
        assert plaintext not in message, message
        assert key_path(path) in message, message  # refused by the key the user wrote
        return
    only_in_secret_files(files, plaintext)
    if path[0] == "extra_env":  # routed, not dropped: the container gets it from the secret file
        assert any(f"{path[1]}={plaintext}" in text for p, text in files.items() if p.endswith(".secret.env"))


# --------------------------------------------------------------------------------------
# 2. empty secrets
# --------------------------------------------------------------------------------------

BLANKS = st.sampled_from(["", " ", "  ", "\t"])


@SETTINGS
@given(st.sampled_from([("api_key",), ("weights", "token"), ("extra_env", "DB_PASSWORD"),
                        ("extra_env", "HF_TOKEN")]), BLANKS, st.booleans())
def test_empty_secrets_are_refused_by_key(path, blank, vaulted):
    deployment = put({"weights": {"mode": "container"}}, path, VaultValue(blank) if vaulted else blank)
    with pytest.raises((RecipeError, ValueError)) as caught:
        render(deployment)
    assert ".".join(path) in str(caught.value)


@SETTINGS
@given(ENV_NAMES, BLANKS)
def test_an_empty_vault_value_is_refused_under_any_env_name(name, blank):
    with pytest.raises((RecipeError, ValueError)) as caught:
        render({"extra_env": {name: VaultValue(blank)}})
    assert f"extra_env.{name}" in str(caught.value)


# --------------------------------------------------------------------------------------
# 3. booleans are not numbers
# --------------------------------------------------------------------------------------

def integer_fields(model: Any = DeploymentSpec, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every integer field of vllm_deployment, nested models included (found, not listed)."""
    out: list[tuple[str, ...]] = []
    for name, info in model.model_fields.items():
        kinds = tuple(typing.get_args(k)[0] if typing.get_origin(k) is typing.Annotated else k
                      for k in (typing.get_args(info.annotation) or (info.annotation,)))
        if int in kinds and bool not in kinds:
            out.append(prefix + (name,))
        for kind in kinds:
            if isinstance(kind, type) and hasattr(kind, "model_fields"):
                out.extend(integer_fields(kind, prefix + (name,)))
    return out


INTEGER_FIELDS = integer_fields()
HOST_INTEGERS = [("vllm_node_rank",), ("vllm_gpu_count",), ("vllm_gpus", 0), ("vllm_deployment_gpus", "g", 0)]


def test_every_integer_field_is_found():
    assert len(INTEGER_FIELDS) >= 18 and ("node_count",) in INTEGER_FIELDS and ("pd", "prefill", "nodes") in INTEGER_FIELDS


@SETTINGS
@given(st.sampled_from(INTEGER_FIELDS), st.booleans())
def test_a_boolean_is_refused_for_every_integer_field(path, flag):
    with pytest.raises((RecipeError, ValueError)) as caught:
        render(put({}, path, flag))
    message = str(caught.value)
    assert "vllm_deployment." + ".".join(path) in message and "not a boolean" in message, message


@settings(max_examples=30, deadline=None, database=None)
@given(st.sampled_from(HOST_INTEGERS), st.booleans())
def test_a_boolean_is_refused_for_every_integer_host_variable(path, flag):
    hostvars: dict[str, Any] = {}
    if path[0] == "vllm_gpus" or path[0] == "vllm_deployment_gpus":
        put(hostvars, path[:-1], [flag])
    else:
        put(hostvars, path, flag)
    with pytest.raises((RecipeError, ValueError)) as caught:
        render({}, hostvars)
    assert f"hostvars['a'].{path[0]}" in str(caught.value)


# --------------------------------------------------------------------------------------
# 5. a value under an unknown key is never shown
# --------------------------------------------------------------------------------------

MODELS = [(), ("weights",), ("router",), ("pd",), ("pd", "prefill"), ("ports",), ("unit",), ("cpu",), ("mooncake",)]


def _fields(prefix: tuple[str, ...]) -> list[str]:
    model: Any = DeploymentSpec
    for part in prefix:
        model = model.model_fields[part].annotation
    return list(model.model_fields)


UNKNOWN = st.from_regex(r"\A[a-z][a-z_]{0,10}\Z").filter(
    lambda k: k not in {n for prefix in MODELS for n in _fields(prefix)})


@SETTINGS
@given(st.sampled_from(MODELS), UNKNOWN, SECRET_TEXT, st.sampled_from(["text", "list", "mapping"]),
       st.dictionaries(st.sampled_from(["node_count", "replicas", "image", "advanced_args", "extra_env"]),
                       st.none() | st.booleans() | st.integers(-3, 3) | st.text(max_size=5), max_size=2))
@example(("weights",), "tokn", "hf_LEAKME_0613", "text", {})
@example((), "stratgy", "single_node_tp", "text", {})
def test_no_refusal_shows_a_value_under_an_unknown_key(model, key, secret, shape, others):
    value: Any = {"text": secret, "list": ["a", secret], "mapping": {"inner": secret}}[shape]
    deployment = put(dict(others), model + (key,), value)
    with pytest.raises((RecipeError, ValueError)) as caught:
        render(deployment)
    assert secret not in str(caught.value), str(caught.value)


# --------------------------------------------------------------------------------------
# the real action: render.yml on a vaulted inventory
# --------------------------------------------------------------------------------------

def _vault(password: Path, plaintext: str) -> str:
    from ansible.parsing.vault import VaultLib, VaultSecret
    secret = VaultSecret(password.read_bytes().strip())
    return VaultLib([("default", secret)]).encrypt(plaintext.encode()).decode()


def test_render_playbook_writes_a_vaulted_value_to_the_secret_file_only(tmp_path):
    password = REPO / "tests" / "bad_inputs" / "vault-password.txt"
    plaintext = "postgres://fleet:VaultedPassw0rd@db.example/fleet"
    cipher = "\n".join("              " + line for line in _vault(password, plaintext).splitlines())
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(f"""---
all:
  children:
    g:
      hosts:
        a:
          ansible_host: 10.40.0.1
          vllm_fabric_interface: ens5
      vars:
        vllm_deployment:
          recipe: zai-org/GLM-5.3-Flash
          hardware: h200
          strategy: single_node_tp
          extra_env:
            DATABASE_URL: !vault |
{cipher}
""")
    out = tmp_path / "render"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    playbook = Path(sys.executable).parent / "ansible-playbook"
    result = subprocess.run([str(playbook) if playbook.exists() else "ansible-playbook", "-i", str(inventory),
                             "--vault-password-file", str(password), str(REPO / "playbooks" / "render.yml"),
                             "-e", f"vllm_render_dir={out}"],
                            capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert plaintext not in result.stdout + result.stderr
    holders = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and plaintext in p.read_text())
    assert holders == ["g/a/vllm-g.secret.env"]
    assert (out / holders[0]).stat().st_mode & 0o777 == 0o600
    (proc,) = [p for p in json.loads((out / "plan.json").read_text())["deployments"]["g"]["processes"]
               if p["kind"] == "engine"]
    assert "DATABASE_URL" in proc["secret_env_keys"] and "DATABASE_URL" not in proc["env"]

"""The bad-input corpus: every broken inventory or recipe fails with its own message, writes nothing.

Each folder under ``tests/bad_inputs/`` holds an ``inventory.yml`` (or ``inventory.ini``
where the INI form differs; plus any file it refers to) and an ``expect.yml`` listing
substrings the error must
contain (``messages``: the offending key, the value and the fix) and, optionally,
substrings it must never contain (``absent``: a secret, a file's content). Each
case is checked twice:

* in Python (``build_plan`` on the hostvars Ansible computes for the inventory);
* through ``playbooks/render.yml``: its one compile-and-write task fails and the
  output directory is never created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _placement as P
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError

REPO = Path(__file__).resolve().parents[2]
CASES_DIR = REPO / "tests" / "bad_inputs"
CASES = sorted(p.name for p in CASES_DIR.iterdir() if (p / "expect.yml").is_file())


def inventory_of(name: str) -> Path:
    """The case's inventory: ``inventory.yml``, or ``inventory.ini`` for the INI form."""
    yml = CASES_DIR / name / "inventory.yml"
    return yml if yml.is_file() else CASES_DIR / name / "inventory.ini"


def expectations(name: str) -> list[str]:
    return yaml.safe_load((CASES_DIR / name / "expect.yml").read_text())["messages"]


def never_shown(name: str) -> list[str]:
    return yaml.safe_load((CASES_DIR / name / "expect.yml").read_text()).get("absent") or []


def templated_inventory(path: Path) -> tuple[dict, dict, list | None]:
    """hostvars (vllm_* and ansible_host, templated) and groups, as Ansible sees them."""
    hostvars, groups, deployments, _declared = templated_inventory_and_groups(path)
    return hostvars, groups, deployments


def templated_inventory_and_groups(path: Path) -> tuple[dict, dict, list | None, dict]:
    """:func:`templated_inventory` plus each group's own ``vllm_deployment`` (as vllm_plan sees it)."""
    from ansible.inventory.manager import InventoryManager
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar
    from ansible.vars.manager import VariableManager

    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(path)])
    manager = VariableManager(loader=loader, inventory=inventory)
    hostvars: dict = {}
    deployments = None
    for host in inventory.get_hosts():
        values = manager.get_vars(host=host, include_hostvars=False)
        templar = Templar(loader=loader, variables=values)
        picked = {k: templar.template(v) for k, v in values.items()
                  if k.startswith("vllm_") or k == "ansible_host"}
        picked = json.loads(json.dumps(picked))
        deployments = picked.pop("vllm_deployments", deployments)
        hostvars[host.name] = picked
    declared = {}
    for name, group in inventory.groups.items():
        raw = group.get_vars().get("vllm_deployment")
        members = group.get_hosts()
        if raw is not None and members:  # templated as its first host sees it ({{ inventory_dir }})
            values = manager.get_vars(host=members[0], include_hostvars=False)
            declared[name] = json.loads(json.dumps(Templar(loader=loader, variables=values).template(raw)))
    return hostvars, inventory.get_groups_dict(), deployments, declared


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


@pytest.mark.parametrize("name", CASES)
def test_bad_input_fails_in_python_with_its_message(name):
    hostvars, groups, deployments, declared = templated_inventory_and_groups(inventory_of(name))
    with pytest.raises((RecipeError, ValueError)) as caught:
        P.build_plan(hostvars, groups, P.engine_factory(), deployments_list=deployments,
                     group_declarations=declared)
    message = str(caught.value)
    for expected in expectations(name):
        assert expected in message, f"{name}: {expected!r} not in {message!r}"
    for secret in never_shown(name):
        assert secret not in message, f"{name}: the message shows {secret!r}: {message!r}"


def _ansible_playbook() -> str:
    candidate = Path(sys.executable).parent / "ansible-playbook"
    return str(candidate) if candidate.exists() else "ansible-playbook"


@pytest.mark.parametrize("name", CASES)
def test_bad_input_fails_the_render_playbook_and_writes_nothing(name, tmp_path):
    out = tmp_path / "render"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_RETRY_FILES_ENABLED="0")
    env.pop("ANSIBLE_CONFIG", None)
    result = subprocess.run(
        [_ansible_playbook(), "-i", str(inventory_of(name)),
         str(REPO / "playbooks" / "render.yml"), "-e", f"vllm_render_dir={out}"],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    output = (result.stdout + result.stderr).replace('\\"', '"')
    assert result.returncode != 0, output
    assert "Validate and render the fleet plan on the controller" in output
    assert "Summarise the plan" not in output  # the compile-and-write task stopped the run
    for expected in expectations(name):
        assert expected in output, f"{name}: {expected!r} not in output"
    for secret in never_shown(name):
        assert secret not in output, f"{name}: the output shows {secret!r}"
    assert "Traceback" not in output and "Unexpected Exception" not in output, output
    assert not out.exists()

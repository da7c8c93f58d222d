#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""List the systemd units vllm_fleet.recipes installed on a host, with their state."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_units_info
short_description: List the systemd units that vllm_fleet.recipes manages on a host
description:
  - Finds every C(*.service) file in O(unit_dirs) whose first line carries the header
    C(# Managed by vllm_fleet.recipes) (written by the fleet plan's renderer), and reports what its
    JSON manifest in O(manifest_dir) says (deployment, recipe, process, host, env file, container
    name). Units rendered before manifests existed have none; for them the same fields are read
    from the unit's header comments and directives.
  - Asks systemd for each unit's active state, sub state and enablement in one C(systemctl show) call.
  - Reports the mode of each unit's C(EnvironmentFile=), which must be C(0600).
  - Read-only. Used by the deploy roles to find stale units, by C(playbooks/status.yml) and by
    C(playbooks/teardown.yml).
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  unit_dirs:
    description:
      - Directories to scan for unit files.
    type: list
    elements: path
    default: [/etc/systemd/system]
  manifest_dir:
    description:
      - Directory of the unit manifests (C(<unit>.service.json)) that the deploy roles install
        beside each unit.
    type: path
    default: /var/lib/vllm-fleet/units
  deployments:
    description:
      - Only report units of these deployments. All managed units when omitted or empty.
    type: list
    elements: str
  systemd_state:
    description:
      - Query systemd for the state of each unit. Without it, only the files are read.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  idempotent:
    support: full
    description: Changes nothing.
  platform:
    support: full
    platforms: posix
    description: Any host with systemd.
notes:
  - Units written by hand, or by other tools, are ignored even when they run vLLM.
seealso:
  - name: Deploying a fleet
    description: The deploy, status and teardown playbooks.
    link: https://github.com/vllm-fleet/recipes/blob/main/docs/deploy.md
"""

EXAMPLES = r"""
- name: Find the units of deployment glm-pd on this host
  vllm_fleet.recipes.vllm_units_info:
    deployments: [glm-pd]
  register: vllm_units

- name: Show which are running
  ansible.builtin.debug:
    msg: "{{ vllm_units.units | map(attribute='unit') | zip(vllm_units.units | map(attribute='active_state')) }}"
"""

RETURN = r"""
units:
  description: One entry per managed unit file, sorted by unit name.
  returned: always
  type: list
  elements: dict
  contains:
    unit:
      description: Unit name.
      type: str
      sample: vllm-glm-pd-decode-0.service
    path:
      description: Path of the unit file.
      type: str
      sample: /etc/systemd/system/vllm-glm-pd-decode-0.service
    deployment:
      description: Deployment named in the header.
      type: str
      sample: glm-pd
    recipe:
      description: Recipe named in the header.
      type: str
      sample: zai-org/GLM-5.3-Flash
    deploy_type:
      description: Deploy type named in the header.
      type: str
      sample: pd_cluster
    process:
      description: The process line of the header (role, rank, instance).
      type: str
      sample: decode rank 0
    kind:
      description: C(router), C(mooncake), C(watchdog) or C(engine), from the process line.
      type: str
      sample: engine
    host:
      description: Inventory host the unit was rendered for.
      type: str
      sample: h200-d1
    env_file:
      description: Path of the unit's C(EnvironmentFile=), or null.
      type: str
      sample: /etc/vllm-fleet/glm-pd/vllm-glm-pd-decode-0.env
    manifest:
      description: Path of the unit's manifest, or null when the unit has none (rendered by an older release).
      type: str
      sample: /var/lib/vllm-fleet/units/vllm-glm-pd-decode-0.service.json
    env_file_mode:
      description: Octal mode of the env file, or null when it is missing.
      type: str
      sample: "0600"
    container:
      description: Container name given to C(docker run --name), or null for venv services.
      type: str
      sample: vllm-glm-pd-decode-0
    active_state:
      description: systemd C(ActiveState) (C(active), C(inactive), C(failed), C(activating) ...), or null.
      type: str
      sample: active
    sub_state:
      description: systemd C(SubState), or null.
      type: str
      sample: running
    unit_file_state:
      description: systemd C(UnitFileState) (C(enabled), C(disabled) ...), or null.
      type: str
      sample: enabled
    n_restarts:
      description: systemd C(NRestarts), or null.
      type: int
      sample: 0
"""

import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._systemd_show import parse_show

MANAGED_HEADER = "# Managed by vllm_fleet.recipes"
MANIFEST_SCHEMA = "vllm_fleet.unit/v1"
_MANIFEST_FIELDS = ("deployment", "recipe", "deploy_type", "process", "host", "env_file", "container")
_HEADER_FIELDS = re.compile(r"(\w+)=(\S*)")
_SHOW_PROPERTIES = ("Id", "ActiveState", "SubState", "UnitFileState", "NRestarts")


def parse_unit(path, text):
    """The header fields and the few directives status and teardown need, or None if unmanaged."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith(MANAGED_HEADER):
        return None
    info = {"unit": os.path.basename(path), "path": path, "deployment": None, "recipe": None,
            "deploy_type": None, "process": None, "host": None, "env_file": None, "container": None}
    for line in lines[1:]:
        if not line.startswith("#"):
            break
        body = line[1:].strip()
        if body.startswith("process="):
            # "process=decode rank 0 host=h200-d1 gpus=0-7": the process part has blanks.
            head, _sep, rest = body.partition(" host=")
            info["process"] = head[len("process="):]
            fields = dict(_HEADER_FIELDS.findall("host=" + rest)) if _sep else {}
            info["host"] = fields.get("host")
        else:
            for key, value in _HEADER_FIELDS.findall(body):
                if key in ("deployment", "recipe", "deploy_type"):
                    info[key] = value
    for line in lines:
        if line.startswith("EnvironmentFile=") and info["env_file"] is None:
            info["env_file"] = line.split("=", 1)[1].lstrip("-")
        elif line.startswith("ExecStartPre=") and " rm -f " in line and info["container"] is None:
            info["container"] = line.rsplit(" ", 1)[1]
    process = info["process"] or ""
    if process.startswith("watchdog") or " watchdog" in process:
        info["kind"] = "watchdog"
    elif process.startswith("router"):
        info["kind"] = "router"
    elif process.startswith("mooncake") or " mooncake" in process:
        info["kind"] = "mooncake"
    else:
        info["kind"] = "engine"
    info["manifest"] = None
    return info


def read_manifest(path, unit):
    """The manifest of ``unit`` at ``path`` as a dict, or None when missing, unreadable or not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("schema") != MANIFEST_SCHEMA or data.get("unit") != unit:
        return None
    return data


def from_manifest(path, manifest_path, data):
    """What the units list reports for a unit at ``path`` described by its manifest."""
    info = {"unit": os.path.basename(path), "path": path, "manifest": manifest_path}
    for key in _MANIFEST_FIELDS:
        value = data.get(key)
        info[key] = value if isinstance(value, str) else None
    kind = data.get("kind") if isinstance(data.get("kind"), str) else "engine"
    # the plan's mooncake_master / mooncake_store are one kind here, as the roles select them
    info["kind"] = "mooncake" if kind.startswith("mooncake") else kind
    return info


def describe_unit(path, text, manifest_dir):
    """A managed unit's fields, from its manifest when it has one, or None if the unit is not ours."""
    if not text.startswith(MANAGED_HEADER):
        return None
    unit = os.path.basename(path)
    manifest_path = os.path.join(manifest_dir, unit + ".json")
    data = read_manifest(manifest_path, unit)
    return parse_unit(path, text) if data is None else from_manifest(path, manifest_path, data)


def file_mode(path):
    try:
        return "%04o" % (os.stat(path).st_mode & 0o7777)
    except OSError:
        return None


def collect(unit_dirs, deployments, manifest_dir):
    units = []
    for directory in unit_dirs:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            path = os.path.join(directory, name)
            if not name.endswith(".service") or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    info = describe_unit(path, handle.read(), manifest_dir)
            except OSError:
                continue
            if info is None or (deployments and info["deployment"] not in deployments):
                continue
            info["env_file_mode"] = file_mode(info["env_file"]) if info["env_file"] else None
            units.append(info)
    return sorted(units, key=lambda u: u["unit"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit_dirs=dict(type="list", elements="path", default=["/etc/systemd/system"]),
            manifest_dir=dict(type="path", default="/var/lib/vllm-fleet/units"),
            deployments=dict(type="list", elements="str"),
            systemd_state=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    units = collect(module.params["unit_dirs"], set(module.params["deployments"] or ()),
                    module.params["manifest_dir"])
    states = {}
    if units and module.params["systemd_state"]:
        systemctl = module.get_bin_path("systemctl", required=True)
        cmd = [systemctl, "show", "--property=" + ",".join(_SHOW_PROPERTIES)] + [u["unit"] for u in units]
        rc, out, err = module.run_command(cmd)
        if rc != 0:
            module.fail_json(msg="systemctl show failed (rc %d): %s" % (rc, err.strip()), cmd=cmd)
        states = parse_show(out)
    for info in units:
        props = states.get(info["unit"], {})
        info["active_state"] = props.get("ActiveState")
        info["sub_state"] = props.get("SubState")
        info["unit_file_state"] = props.get("UnitFileState")
        restarts = props.get("NRestarts")
        info["n_restarts"] = int(restarts) if restarts and restarts.isdigit() else None
    module.exit_json(changed=False, units=units)


if __name__ == "__main__":
    main()

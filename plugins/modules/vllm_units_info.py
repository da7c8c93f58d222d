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
extends_documentation_fragment:
  - vllm_fleet.recipes.read_only
attributes:
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
# not run by tests/unit/test_install.py: reads a deploy host's systemd units
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._units_scan import collect, with_systemd_state


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
    module.exit_json(changed=False, units=with_systemd_state(module, units, module.params["systemd_state"]))


if __name__ == "__main__":
    main()

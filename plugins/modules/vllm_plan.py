#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation stub: vllm_plan is an action plugin (plugins/action/vllm_plan.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_plan
short_description: Compile vLLM deployments declared in the inventory into a per-host plan
description:
  - Runs on the controller only and never connects to the hosts.
  - Reads every C(vllm_deployment) mapping set on an inventory group (and the optional
    C(vllm_deployments) list), resolves each recipe with the collection's recipe engine,
    binds every process (single, head, worker ranks, prefill/decode nodes, router, Mooncake
    master/store) to a host, fills every recipe placeholder from inventory variables and
    assigns accelerators and ports.
  - Fails, before anything is written, with a message naming the variable, the value and the fix
    when the inventory does not fit the recipe (host counts, PD pools, router host, port or
    accelerator collisions, unknown recipe, feature or mode, unresolved placeholders).
  - With O(dest), writes systemd units, 0600 env files, docker argv JSON, router and Mooncake
    configs, C(plan.json) and C(PLAN.md). Rendering is deterministic; unchanged files are not
    rewritten.
  - Also writes C(monitoring/targets/<deployment>.json) (Prometheus file_sd targets of every engine API
    server and router) and C(monitoring/vllm-fleet.rules.yml) (alert rules, thresholds from the
    C(vllm_monitoring_alerts) variable); see docs/observability.md.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  dest:
    description:
      - Directory to write the rendered files to (created when missing).
      - When omitted, the plan is only validated and returned.
    type: path
  prune:
    description:
      - Remove files written by a previous render into O(dest) that the new plan no longer has.
      - Only files listed in the previous render's C(.vllm-render-manifest) are removed.
    type: bool
    default: true
  deployments:
    description:
      - Deployment mappings, each with C(group); defaults to the C(vllm_deployments) variable.
    type: list
    elements: dict
  recipe_dirs:
    description:
      - Extra recipe trees (laid out like upstream C(models/<org>/<name>.yaml)) searched for
        recipe ids before the recipes shipped with the collection.
      - Relative paths are relative to the playbook directory.
    type: list
    elements: path
    default: []
  catalog_dir:
    description:
      - Catalog directory (hardware, strategies, kv stores); default the collection's own.
    type: path
  cache_dir:
    description:
      - Cache directory for recipes loaded from URLs.
    type: path
  return_content:
    description:
      - Also return the text of every rendered file in RV(contents), for deploy roles that
        install the files on the hosts without writing a render directory, and the API key
        headers of the upgrade's completion probes in RV(probe_headers).
      - The env files in RV(contents) and RV(probe_headers) hold secret values (API key, Hub token).
        Register the result only on a task with C(no_log=true).
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; C(changed) says whether files would change.
  diff_mode:
    support: none
    description: No diff is shown; review C(PLAN.md) or compare the render directory.
  action:
    support: full
    description: Runs as an action plugin on the controller.
  async:
    support: none
    description: Runs synchronously on the controller.
  become:
    support: none
    description: Writes with the controller user's permissions.
  connection:
    support: none
    description: Never connects to the inventory hosts.
  delegation:
    support: none
    description: Always runs on the controller.
  platform:
    support: full
    platforms: posix
    description: Any POSIX controller.
seealso:
  - name: Fleet plan reference
    description: Every C(vllm_deployment) key and host variable.
    link: https://github.com/vllm-fleet/recipes/blob/main/docs/plan.md
notes:
  - Host addresses come from C(vllm_fabric_address), else C(ansible_host) when it is an IP,
    else the cached C(ansible_default_ipv4) fact. Interfaces come from C(vllm_fabric_interface),
    else the cached fact. No facts are gathered.
"""

EXAMPLES = r"""
# With an inventory that declares deployments, e.g. playbooks/examples/pd_cluster/inventory.yml (glm-pd)
- name: Validate the fleet plan (nothing is written)
  vllm_fleet.recipes.vllm_plan:
  run_once: true

- name: Render every artifact into out/render
  vllm_fleet.recipes.vllm_plan:
    dest: "{{ vllm_render_dir | default('out/render') }}"
  register: vllm_render

- name: Plan with file contents for the deploy roles (env files hold secrets)
  vllm_fleet.recipes.vllm_plan:
    return_content: true
  run_once: true
  no_log: true
  register: vllm_fleet_plan

- name: Show where the router listens
  ansible.builtin.debug:
    msg: "{{ vllm_render.plan.deployments['glm-pd'].endpoint }}"
"""

RETURN = r"""
plan:
  description: The machine-readable plan, as written to C(plan.json) (no secret values).
  returned: success
  type: dict
  contains:
    schema:
      description: Plan format identifier.
      type: str
      sample: vllm_fleet.plan/v1
    deployments:
      description: Per deployment the selection, processes (host, argv, env, ports, GPUs, ExecStart), start order and pinned resolutions.
      type: dict
    hosts:
      description:
        - Per host the address, interface, accelerator assignment, units and C(files) to install
          (C(src) relative path of the rendered file, C(dest) on the host, C(mode)), as in C(plan.json).
      type: dict
files:
  description: Relative paths of every rendered file.
  returned: success
  type: list
  elements: str
  sample: [PLAN.md, plan.json, glm/node1/vllm-glm.service]
written:
  description: Files whose content changed (or would change in check mode).
  returned: when dest is set
  type: list
  elements: str
removed:
  description: Stale files from a previous render that were removed (or would be).
  returned: when dest is set
  type: list
  elements: str
dest:
  description: Absolute output directory.
  returned: when dest is set
  type: str
contents:
  description:
    - Every rendered file, relative path to text. Env files hold secret values.
  returned: when O(return_content=true)
  type: dict
  sample: {"glm/node1/vllm-glm.service": "# Managed by vllm_fleet.recipes ..."}
probe_headers:
  description:
    - Unit (as RV(plan) names it) to the C(Authorization) header of its deployment's API key, for
      every process whose secret file holds one (C(VLLM_API_KEY)). Secret values.
  returned: when O(return_content=true)
  type: dict
  sample: {"vllm-glm-replica-0.service": {"Authorization": "Bearer <the api_key>"}}
summary:
  description: One line per deployment (deploy type, hosts, endpoint).
  returned: success
  type: list
  elements: str
"""


from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path"),
            prune=dict(type="bool", default=True),
            deployments=dict(type="list", elements="dict"),
            recipe_dirs=dict(type="list", elements="path", default=[]),
            catalog_dir=dict(type="path"),
            cache_dir=dict(type="path"),
            return_content=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    module.fail_json(msg="vllm_fleet.recipes.vllm_plan runs on the controller as an action plugin; "
                         "it cannot run as a module on a host")


if __name__ == "__main__":
    main()

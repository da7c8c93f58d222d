#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation stub: vllm_host_files is an action plugin (plugins/action/vllm_host_files.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_host_files
short_description: Install one deploy step's plan files on a host (directories, env files, configs, units)
description:
  - Installs the files of the fleet plan that belong to one deploy step (the process kinds O(kinds),
    optionally only the restart groups O(only_groups)) on this host, in one task instead of one
    C(copy) loop per kind of file.
  - Creates the directories of the env and config files (C(0755)) and each selected process's compile
    cache (its plan C(compile_cache), C(0700)); writes env files C(0600), config
    files with the plan's mode, and systemd units C(0644). A unit is checked with O(validate) (for
    example C(systemd-analyze verify %s:%n)) before it replaces anything.
  - Owner and group are C(root). A file is rewritten only when its content, mode or owner differ.
  - Works out which units and restart groups this changes. A changed unit, env or secret file
    restarts its unit; a changed config file restarts every unit of the step. A unit of the step
    that systemd reports as not running, a changed image (O(changed_images)) and O(force_groups)
    restart their groups too.
  - Reports the stale units (RV(stale)) - managed units of the step's kinds on this host, of the
    plan's deployments, that the plan no longer places here - for the caller to stop and remove.
  - An action plugin, which selects the files from O(plan) and computes the restarts on the controller,
    and M(vllm_fleet.recipes.vllm_files_write) writes them on the host and reads the managed units
    back (as M(vllm_fleet.recipes.vllm_units_info) does) in one module call.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  plan:
    description:
      - The registered result of M(vllm_fleet.recipes.vllm_plan) with C(return_content=true)
        (C(plan) and C(contents)). Its env files hold secrets; they never appear in the result.
    type: dict
    required: true
  host:
    description:
      - The plan host whose files are installed. Defaults to the inventory host.
    type: str
  kinds:
    description:
      - Process kinds of the plan this step installs (engine, mooncake, watchdog, router ...).
    type: list
    elements: str
    required: true
  configs:
    description:
      - Names of the plan's config files this step installs (when it has processes here).
    type: list
    elements: str
    default: []
  only_groups:
    description:
      - Only the processes of these restart groups (one rollout batch). All when empty.
    type: list
    elements: str
    default: []
  validate:
    description:
      - Command that checks a unit file before it is installed; C(%s) is the candidate file,
        C(%n) the unit's name. Empty for none.
    type: str
    default: ''
  changed_images:
    description:
      - Images that changed in this run; the groups that run them restart.
    type: list
    elements: str
    default: []
  force_groups:
    description:
      - Restart groups to restart even when no file changed (new weights).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Reports what it would write; writes nothing.
  diff_mode:
    support: full
    description: Shows the diff of every file except secret env files.
  idempotent:
    support: full
    description: A second run with the same plan changes nothing.
  platform:
    support: full
    platforms: posix
    description: Any host with systemd.
notes:
  - Secret files (a process's C(secret_file)) are never diffed; no file content is returned.
seealso:
  - module: vllm_fleet.recipes.vllm_plan
  - module: vllm_fleet.recipes.vllm_units_info
  - module: vllm_fleet.recipes.vllm_files_write
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs the fleet plan and root on a deploy host
- name: Install this host's engine units, env files and configs
  vllm_fleet.recipes.vllm_host_files:
    plan: "{{ vllm_fleet_plan }}"
    kinds: [engine, watchdog, mooncake]
    configs: [mooncake.json]
    validate: systemd-analyze verify %s:%n
  register: engine_files

- name: Restart what changed
  ansible.builtin.debug:
    msg: "{{ engine_files.groups }}"
"""

RETURN = r"""
files:
  description: Destinations of the files that changed (or would change in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/vllm-fleet/tiny-pd/prefill-0.env]
units:
  description: Units of this step whose files changed.
  returned: always
  type: list
  elements: str
  sample: [vllm-tiny-pd-prefill-0.service]
groups:
  description: Restart groups of this host to restart (changed files, a unit not running, a changed image, forced).
  returned: always
  type: list
  elements: str
  sample: [tiny-pd]
processes:
  description: The plan's processes of this step on this host (no secret values).
  returned: always
  type: list
  elements: dict
to_enable:
  description:
    - Units of this step not enabled at boot (a new one included; in check mode, where nothing was
      written, only those already on the host).
  returned: always
  type: list
  elements: str
  sample: [vllm-tiny-pd-decode-0.service]
stale:
  description: Managed units of this step's kinds on this host that the plan no longer places here.
  returned: always
  type: list
  elements: dict
  contains:
    unit: {description: Unit name., type: str}
    path: {description: Unit file., type: str}
    env_file: {description: "Its env file, or null.", type: str}
    manifest: {description: "Its manifest, or null.", type: str}
    deployment: {description: Its deployment., type: str}
  sample: [{unit: vllm-tiny-pd-decode-1.service, path: /etc/systemd/system/vllm-tiny-pd-decode-1.service,
            env_file: /etc/vllm-fleet/tiny-pd/decode-1.env, manifest: null, deployment: tiny-pd}]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec={
            "plan": {"type": "dict", "required": True, "no_log": True},
            "host": {"type": "str"},
            "kinds": {"type": "list", "elements": "str", "required": True},
            "configs": {"type": "list", "elements": "str", "default": []},
            "only_groups": {"type": "list", "elements": "str", "default": []},
            "validate": {"type": "str", "default": ""},
            "changed_images": {"type": "list", "elements": "str", "default": []},
            "force_groups": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    module.fail_json(msg="vllm_fleet.recipes.vllm_host_files runs as an action plugin (it reads the plan on the "
                         "controller); it cannot run as a module on a host")


if __name__ == "__main__":
    main()

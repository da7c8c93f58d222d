#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Compare what runs on a host (files, containers, host processes) with the fleet plan."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_drift_info
short_description: Report where a host differs from the fleet plan (files, argv, env, image)
description:
  - Compares the files the fleet plan installs on this host with the files on disk (by sha256, and
    mode when given), and every planned process with what actually runs.
  - For each container process, reads C(docker container inspect) and checks the running command
    (C([Path] + Args) against the plan's C(exec_start) after the image, including an
    C(--entrypoint)), the environment (every planned C(KEY=VALUE) in C(Config.Env), and no key the
    plan does not set beyond the image's own), and the image (C(Config.Image) is the planned
    reference, and the container runs the image that reference names on the host now).
  - For each host process (no container, e.g. the group watchdog or a venv router), asks systemd for
    the unit's state and main PID and checks C(/proc/PID/cmdline) and C(/proc/PID/environ).
  - Values of environment keys that look secret (C(TOKEN), C(SECRET), C(PASSWORD), C(API_KEY), or a
    name ending in C(KEY)) never appear in a detail or a diff. Secret files are compared by hash only.
  - Read-only. Used by C(playbooks/drift.yml).
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  files:
    description:
      - The files the plan installs on this host.
    type: list
    elements: dict
    default: []
    suboptions:
      dest:
        description: Path of the file on the host.
        type: path
        required: true
      sha256:
        description: sha256 (hex) of the planned content.
        type: str
        required: true
      content:
        description:
          - The planned content. When given and the file differs, the module returns a unified diff.
          - Leave it out for files that hold secrets (C(*.secret.env)); they are compared by hash only.
        type: str
      mode:
        description: Planned octal mode (C(0600)); the file's mode is compared when given.
        type: str
      unit:
        description: Unit the file belongs to, for the report. Derived from the file name when omitted.
        type: str
  processes:
    description:
      - The plan's process entries for this host (C(plan.json) C(deployments.*.processes)), as they are.
      - Keys read are C(unit), C(container) (null for host processes), C(image), C(exec_start), C(env)
        and C(secret_env_keys); other keys are ignored.
    type: list
    elements: dict
    default: []
  docker_binary:
    description: The docker CLI.
    type: path
    default: /usr/bin/docker
extends_documentation_fragment:
  - vllm_fleet.recipes.read_only
attributes:
  diff_mode:
    support: full
    description: Returns the unified diff of every differing file whose planned content was given, and of a differing command or env.
  platform:
    support: full
    platforms: posix
    description: Hosts running the fleet's units (systemd, docker).
notes:
  - Docker flags before the image (mounts, devices, network) are not read back from the container. They
    live in the unit file, which is compared; a unit file that is current while its container was
    started from an older one shows as an C(argv), C(env) or C(image) drift only when those differ.
  - A secret the container gets through its mounted C(*.secret.env) file is not in C(Config.Env) and is
    not compared there; the secret file itself is compared by hash.
seealso:
  - name: Operations
    description: C(playbooks/drift.yml) and the other day-2 playbooks.
    link: https://github.com/vllm-fleet/recipes/blob/main/docs/operations.md
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs a deployed host and its plan (the drift playbook runs it)
- name: Compare this host with the plan
  vllm_fleet.recipes.vllm_drift_info:
    files:
      - dest: /etc/systemd/system/vllm-glm-single.service
        sha256: "{{ unit_text | hash('sha256') }}"
        content: "{{ unit_text }}"
        mode: "0644"
      - dest: /etc/vllm-fleet/glm-single/vllm-glm-single.secret.env
        sha256: "{{ secret_text | hash('sha256') }}"
        mode: "0600"
    processes: "{{ plan.deployments['glm-single'].processes | selectattr('host', 'equalto', inventory_hostname) | list }}"
  register: drift

- name: Fail when anything drifted
  ansible.builtin.assert:
    that: drift.in_sync
    fail_msg: "{{ drift.drift | map(attribute='detail') | list }}"
"""

RETURN = r"""
drift:
  description: One entry per difference, sorted by unit, then kind.
  returned: always
  type: list
  elements: dict
  contains:
    unit:
      description: The unit the difference belongs to, or C(-) for a file of no single unit (a config shared by several).
      type: str
      sample: vllm-glm-single.service
    kind:
      description: C(file), C(argv), C(env), C(image) or C(not_running).
      type: str
      sample: image
    detail:
      description: What differs. Never holds the value of a secret-looking key or the content of a secret file.
      type: str
      sample: "vllm/vllm-openai:v0.11.0 is sha256:6c1f0e2b95aa on the host now; the container still runs sha256:0b3d77e8c41f (pulled, not restarted)"
in_sync:
  description: True when RV(drift) is empty.
  returned: always
  type: bool
  sample: false
unchecked:
  description: Processes that could not be compared (no systemd to ask for a host process's PID), with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{"unit": "vllm-glm-tp-rank0-watchdog.service", "reason": "systemctl not found"}]
diff:
  description:
    - Unified-diff material for C(--diff) (Ansible's C(before_header)/C(after_header)/C(before)/C(after) list)
      for each differing file with planned content, each differing command and each differing env.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._drift import first_invalid_process
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._drift_host import drift_report


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", default=[], options=dict(
                dest=dict(type="path", required=True),
                sha256=dict(type="str", required=True),
                content=dict(type="str"),
                mode=dict(type="str"),
                unit=dict(type="str"),
            )),
            processes=dict(type="list", elements="dict", default=[]),
            docker_binary=dict(type="path", default="/usr/bin/docker"),
        ),
        supports_check_mode=True,
    )
    processes = module.params["processes"]
    problem = first_invalid_process(processes)
    if problem:
        module.fail_json(msg=problem)
    module.exit_json(**drift_report(module, module.params["files"], processes, module.params["docker_binary"]))


if __name__ == "__main__":
    main()

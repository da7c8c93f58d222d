#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation stub: vllm_preflight is an action plugin (plugins/action/vllm_preflight.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_preflight
short_description: Check a host against its share of the fleet plan before anything changes
description:
  - Computes this host's weights view (C(vllm_fleet_weights)) on the controller, reads the host once with
    M(vllm_fleet.recipes.vllm_host_probe) (only when a check needs something from it) and runs the
    deploy roles' preflight checks over the answer.
  - Fails with every failed check's message, one per line; each names the variable or the host resource,
    the value found and what would be accepted. Warnings (weights of unknown size, unpinned revisions)
    are returned as task warnings.
  - Changes nothing (C(changed) is always false).
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  checks:
    description:
      - The groups of checks to run, as the roles split them. C(host) (role preflight - docker and its
        runtimes, the units' devices and mount sources, CDI specs, accelerator count, CPU flags and memory,
        free disk for weights and images, the fabric interface), C(image), C(weights), C(fabric),
        C(engine), C(router), C(monitoring).
      - An empty list computes only this host's weights view.
    type: list
    elements: str
    choices: [host, image, weights, fabric, engine, router, monitoring]
    default: []
  inputs:
    description:
      - The role variables the checks read, under their own names. C(vllm_fleet_host) (this host's share of
        the plan) and C(vllm_fleet_deployments) (the plan's deployments) are required; the others default
        to the roles' defaults.
      - C(vllm_fleet_weights), when set (not null), is used as this host's weights view instead of computing it.
      - Other keys are refused.
    type: dict
    required: true
  defer:
    description:
      - Queue the checks instead of running them. The task reads nothing on the host and adds C({checks, inputs})
        to the fact C(vllm_fleet_preflight_queue), leaving out the inputs every role passes alike
        (C(vllm_fleet_host), C(vllm_fleet_deployments), C(vllm_fleet_weights)). An earlier entry of the same
        checks is replaced, so each group of checks is queued once.
      - A later task runs the whole queue with O(queued), reading the host once for the checks of every role.
        C(playbooks/_preflight.yml) does so (each role's preflight task defers when C(vllm_fleet_preflight_defer)
        is true).
    type: bool
    default: false
  queued:
    description:
      - The queue that deferred tasks left (C(vllm_fleet_preflight_queue)). Its checks join O(checks) and its
        inputs join O(inputs) in one run with one read of the host; two entries passing the same variable with
        different values are refused. The task then empties the queue.
      - Not together with O(defer).
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
    description: The host is only read; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  action:
    support: full
    description: Runs on the controller; it reads the host through M(vllm_fleet.recipes.vllm_host_probe).
notes:
  - The weights view is returned as a fact; it is visible as C(vllm_fleet_weights) with Ansible's default
    C(inject_facts_as_vars=true).
seealso:
  - module: vllm_fleet.recipes.vllm_host_probe
  - module: vllm_fleet.recipes.vllm_plan
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs the fleet plan and a deploy host
- name: Check the router inputs
  vllm_fleet.recipes.vllm_preflight:
    checks: [router]
    inputs:
      vllm_fleet_host: "{{ vllm_fleet_host }}"
      vllm_fleet_deployments: "{{ vllm_fleet_plan.plan.deployments }}"
      vllm_router_package: "{{ vllm_router_package }}"

- name: Work out each deployment's weights on this host
  vllm_fleet.recipes.vllm_preflight:
    checks: []
    inputs:
      vllm_fleet_host: "{{ vllm_fleet_host }}"
      vllm_fleet_deployments: "{{ vllm_fleet_plan.plan.deployments }}"

- name: Queue the fabric checks (the preflight play runs every role's checks at its end)
  vllm_fleet.recipes.vllm_preflight:
    checks: [fabric]
    defer: true
    inputs:
      vllm_fleet_host: "{{ vllm_fleet_host }}"
      vllm_fleet_deployments: "{{ vllm_fleet_plan.plan.deployments }}"
      vllm_fabric_check: "{{ vllm_fabric_check }}"

- name: Run the queued checks with one read of the host
  vllm_fleet.recipes.vllm_preflight:
    queued: "{{ vllm_fleet_preflight_queue | default([]) }}"
    inputs:
      vllm_fleet_host: "{{ vllm_fleet_host }}"
      vllm_fleet_deployments: "{{ vllm_fleet_plan.plan.deployments }}"
"""

RETURN = r"""
ansible_facts:
  description:
    - C(vllm_fleet_weights), when this task computed the weights view (C(checks) empty or with C(host) or
      C(weights), and no C(inputs.vllm_fleet_weights)).
    - C(vllm_fleet_preflight_queue), with O(defer) (the queue with this task's entry) or O(queued) (empty).
    - C(vllm_fleet_images_present) and C(vllm_fleet_router_versions), when the host was read for them.
  returned: when computed, queued, run from the queue or read
  type: dict
  contains:
    vllm_fleet_images_present:
      description: The C(host) check's read of the images the units run - reference -> whether the host has it.
        Role image leaves out the pulls that would change nothing there.
      type: dict
    vllm_fleet_router_versions:
      description: The C(router) check's read of each venv router's venv - directory -> the installed
        vllm-router version (null when none). Role router installs only where it is not the pinned one.
      type: dict
    vllm_fleet_preflight_queue:
      description: The deferred checks, C({checks, inputs}) each, in the order they were queued.
      type: list
      elements: dict
    vllm_fleet_weights:
      description:
        - One entry per deployment this host serves whose weights are fetched before start
          (weights.mode download, import or shared_fs), sorted by name.
        - Keys C(name), C(repo), C(revision), C(pinned), C(mode), C(source), C(endpoint), C(hosts), C(origin),
          C(cache), C(repo_dir), C(marker), C(status), C(env_file), C(argv_has_revision), C(present).
      type: list
      elements: dict
msg:
  description: The failed checks' messages, one per line.
  returned: failure
  type: str
  sample: "vllm_router_package: got 'vllm-router'; expected a pinned pip requirement such as 'vllm-router==0.1.17' ..."
"""

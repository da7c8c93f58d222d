#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation for the vllm_resolve action plugin (it runs on the controller only)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: vllm_resolve
author:
  - vllm_fleet maintainers (@vllm-fleet)
version_added: "0.1.0"
short_description: Resolve a vLLM recipe into the exact processes to run
description:
  - Loads a vLLM recipe and resolves it with a selection, exactly as the vLLM recipes site synthesises commands.
  - Unset selection fields take the recipe's recommended values.
  - Runs entirely on the controller; no connection to the target is made.
  - A bad selection fails before anything changes, with a message that names the key, the value and what is accepted.
options:
  recipe:
    description:
      - An C(org/name) recipe id (shipped with the collection), a path to a C(models/<org>/<repo>.yaml) or
        published JSON recipe, or an C(http(s)) URL of the published API.
    type: str
    required: true
  selection:
    description:
      - Keys C(variant), C(hardware), C(strategy), C(features), C(feature_modes), C(node_count), C(pd_nodes),
        C(kv_offload), C(kv_instances), C(advanced_args), C(frontend). All optional.
    type: dict
    default: {}
  catalog_dir:
    description: Catalog directory laid out like C(recipes/catalog); defaults to the collection's own.
    type: path
  cache_dir:
    description: Where recipes fetched over HTTP are cached (and served from when the URL is unreachable).
    type: path
  strict:
    description: Validate the selection strictly. V(false) replays the recipes site's silent fallbacks.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Nothing changes; the action only computes.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    description: Runs on the controller only.
    platforms: all
notes:
  - This is an action plugin; this file only carries its documentation.
"""

EXAMPLES = r"""
- name: Resolve GLM-5.3-Flash on two H200 nodes (TP inside a node, PP across)
  vllm_fleet.recipes.vllm_resolve:
    recipe: zai-org/GLM-5.3-Flash   # shipped with the collection; or a path, or an https URL
    selection:
      hardware: h200
      strategy: multi_node_tp_pp
      node_count: 2
  register: glm

- name: Show the head node's argv
  ansible.builtin.debug:
    msg: "{{ (glm.processes | selectattr('name', 'equalto', 'head') | first).argv }}"
"""

RETURN = r"""
hf_id:
  description: The recipe's Hugging Face id.
  returned: success
  type: str
  sample: zai-org/GLM-5.3-Flash
selection:
  description: The completed selection that was resolved.
  returned: success
  type: dict
deploy_type:
  description: C(single_node), C(multi_node), C(pd_cluster) or C(kv_store_lb).
  returned: success
  type: str
image:
  description: The container image the recipes site pins for this hardware.
  returned: success
  type: str
  sample: vllm/vllm-openai:nightly
processes:
  description: Every process with C(name), C(role), C(group), C(rank), C(argv), C(command), C(env), C(port),
    C(docker_argv) and C(docker_command). Placeholders such as C($HEAD_IP) are left for placement.
  returned: success
  type: list
  elements: dict
output:
  description: The recipes site's own output for this selection (camelCase keys).
  returned: success
  type: dict
"""

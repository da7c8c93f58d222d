#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Check every engine or router argv with the parser of the program that will run it."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_argv_check
short_description: Check vLLM engine and vllm-router argvs with the image's own parser before anything runs
description:
  - C(kind=engine) runs the image's own C(vllm serve) argument parsing on each argv, in a throwaway
    container of the exact image (by image ID), C(docker run --rm --network none), no devices, every
    capability dropped, nothing mounted but the checker script (read-only), entrypoint the image's
    Python. Besides what C(vllm serve) refuses at parse and validate time, it checks what vLLM would
    look up only after loading the model, without a model (tool-call parser, reasoning parser and
    tokenizer mode names against the image's registries; the C(--attention-backend) name by the
    validator vLLM runs when it builds the engine config, against the image's attention backend
    registry; C(--speculative-config) keys, and its C(method) and C(attention_backend) values as
    C(SpeculativeConfig) validates them). A name the image's vLLM offers no way to check is not
    refused; the result's C(notes) say it was not checked.
  - C(kind=router) parses each C(vllm-router) argv with the argparse front end of the installed
    C(vllm_router) (C(router_python), or a container of O(image) when given).
  - Each distinct (image ID, argv) is checked once; the result is cached under O(cache_dir) by
    sha256 of the image ID, the checker version and the argv JSON, so a re-run starts no container
    (RV(cached)).
  - Enforces O(min_vllm_version) (and a process's own C(min_vllm_version)) against the image's vLLM.
  - Fails with the parser's own words, naming the deployment, the unit and, when the process gives
    C(origins), where the refused flag came from (recipe, strategy, feature, advanced_args).
  - Changes nothing the fleet runs; writing the cache does not count as a change.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  kind:
    description: What the argvs start.
    type: str
    choices: [engine, router]
    default: engine
  image:
    description:
      - The image the units run (the plan's C(image)). Required for C(kind=engine). The check runs in
        the image ID this reference names on the host now.
      - For C(kind=router), the router image when the router runs in a container; leave it out for
        a router installed in a venv (O(router_python)).
    type: str
  processes:
    description:
      - The processes to check. Keys read are C(argv) (required), C(deployment), C(unit), C(host),
        C(min_vllm_version), C(origins) (a mapping flag -> where it came from) and C(env) (its
        C(VLLM_*) keys are set while the argv is checked, and are part of the cache key); other keys
        are ignored, so plan.json process entries can be passed as they are.
    type: list
    elements: dict
    required: true
  min_vllm_version:
    description:
      - Lowest vLLM version the argvs need (the recipe's C(min_vllm_version)). An image with an older
        vLLM fails the check. A process's own C(min_vllm_version) is enforced too.
    type: str
  min_vllm_versions:
    description:
      - Lowest vLLM version per deployment (deployment name -> version), for a play that checks the
        processes of several deployments at once (the plan's C(deployments.*.min_vllm_version)).
    type: dict
    default: {}
  plan_deployments:
    description:
      - The plan's C(deployments) mapping (plan.json), to tell where a refused flag came from when a
        process gives no C(origins) - V(advanced_args) when the deployment's selection lists it, else
        the recipe with its variant, strategy and features - and to read each deployment's
        C(min_vllm_version).
    type: dict
    default: {}
  missing_ok:
    description:
      - C(kind=router) only. When the router Python has no C(vllm_router), skip the check and say so in
        RV(skipped_reason) instead of failing.
    type: bool
    default: false
  python:
    description:
      - Interpreters tried inside the image, in order, as the container's entrypoint (the first that
        starts is used).
    type: list
    elements: str
    default: [python3, /opt/vllm/bin/python, /usr/bin/python3]
  router_python:
    description:
      - Python of the vllm-router installation (C(kind=router) without O(image)). Defaults to the
        Python running this module.
    type: path
  env:
    description:
      - Environment of the checker container. Parsing touches no device, so C(VLLM_TARGET_DEVICE=cpu)
        lets CUDA, ROCm, Ascend and CPU images build their parser on a host without the accelerator.
    type: dict
    default: {VLLM_TARGET_DEVICE: cpu}
  cache_dir:
    description: Where results are cached on the host.
    type: path
    default: /var/cache/vllm-fleet/argv-check
  skip:
    description:
      - Do not check (images without Python or with a custom entrypoint). O(skip_reason) is required
        and returned, so the summary can state it.
    type: bool
    default: false
  skip_reason:
    description: Why the check is skipped (required with O(skip=true)).
    type: str
  fail_on_error:
    description:
      - Fail when an argv is refused. With C(false) the module returns the refusals in RV(failures)
        and RV(message) so a play can gather every host's before failing once.
    type: bool
    default: true
  docker_binary:
    description: The docker CLI.
    type: path
    default: docker
  timeout:
    description: Seconds one checker run may take (importing vLLM takes 10-300 s on a loaded host).
    type: int
    default: 900
extends_documentation_fragment:
  - vllm_fleet.recipes.read_only
attributes:
  check_mode:
    support: full
    description:
      - Runs the same in check mode; it only reads the image and writes its own cache.
      - In check mode an image that is not on the host yet (the pull only said it would pull it) is
        not checked; RV(skipped_reason) says so.
  idempotent:
    support: full
    description: Changes nothing the fleet runs; RV(ignore:changed) is always false.
  platform:
    support: full
    platforms: posix
    description: Hosts with docker (engine) or the vllm-router installation (router).
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs docker and the engine image on a deploy host
- name: Check the engine argvs with the image's vLLM
  vllm_fleet.recipes.vllm_argv_check:
    image: vllm/vllm-openai:v0.32.0
    min_vllm_version: "0.32.0"
    processes:
      - deployment: qwen
        unit: vllm-qwen
        argv: [vllm, serve, Qwen/Qwen3-0.6B, --max-model-len, "4096"]
        origins: {--max-model-len: advanced_args}

- name: Check the router argvs with the installed vllm-router
  vllm_fleet.recipes.vllm_argv_check:
    kind: router
    router_python: /opt/vllm-fleet/router-venv/bin/python
    processes:
      - deployment: qwen
        unit: vllm-qwen-router
        argv: [vllm-router, --worker-urls, "http://10.0.0.1:8000", --port, "8100"]

- name: Opt out for an image without Python
  vllm_fleet.recipes.vllm_argv_check:
    image: registry.example/custom-engine:1
    processes: []
    skip: true
    skip_reason: custom entrypoint, no Python in the image
"""

RETURN = r"""
results:
  description: One entry per process, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    deployment: {description: The process's deployment., type: str}
    unit: {description: The process's unit., type: str}
    ok: {description: Whether the parser accepted the argv., type: bool}
    cached: {description: Whether the result came from the cache., type: bool}
    stage:
      description: >-
        Where it was refused: program, parse, validate, tool-call-parser, reasoning-parser,
        tokenizer-mode, attention-backend, engine-args, speculative-config, min-version.
      type: str
    error: {description: The parser's own message., type: str}
    flag: {description: The flag the message names., type: str}
    origin: {description: Where that flag came from (from the process's C(origins))., type: str}
    notes: {description: What was not checked and why., type: list, elements: str}
image_id:
  description: The image ID the check ran in.
  returned: when an image was given and not skipped
  type: str
program_version:
  description: vLLM (engine) or vllm-router (router) version of the checked installation.
  returned: when not skipped
  type: str
  sample: 0.32.0
cached:
  description: True when every result came from the cache (no container was started).
  returned: always
  type: bool
checked:
  description: Distinct argvs checked by running the parser this time (0 when all were cached).
  returned: always
  type: int
setup_s:
  description: Seconds the checker took to build the parser (import) this time; 0 when cached.
  returned: always
  type: float
elapsed_s:
  description: Seconds the whole module took.
  returned: always
  type: float
failures:
  description: The refused entries of RV(results).
  returned: always
  type: list
  elements: dict
message:
  description: One line per refusal (deployment, unit, origin, the parser's words), or the skip reason.
  returned: always
  type: str
skipped_reason:
  description: O(skip_reason) when the check was skipped.
  returned: when skipped
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._argv_check import run_module


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            kind=dict(type="str", choices=["engine", "router"], default="engine"),
            image=dict(type="str"),
            processes=dict(type="list", elements="dict", required=True),
            min_vllm_version=dict(type="str"),
            min_vllm_versions=dict(type="dict", default={}),
            plan_deployments=dict(type="dict", default={}),
            missing_ok=dict(type="bool", default=False),
            python=dict(type="list", elements="str", default=["python3", "/opt/vllm/bin/python", "/usr/bin/python3"]),
            router_python=dict(type="path"),
            env=dict(type="dict", default={"VLLM_TARGET_DEVICE": "cpu"}),
            cache_dir=dict(type="path", default="/var/cache/vllm-fleet/argv-check"),
            skip=dict(type="bool", default=False),
            skip_reason=dict(type="str"),
            fail_on_error=dict(type="bool", default=True),
            docker_binary=dict(type="path", default="docker"),
            timeout=dict(type="int", default=900),
        ),
        supports_check_mode=True,
    )
    run_module(module)


if __name__ == "__main__":
    main()

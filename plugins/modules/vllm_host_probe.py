#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Read what the preflight checks need from a host in one round trip."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_host_probe
short_description: Read the docker, accelerator, CPU, path, network, disk and weights facts preflight checks need
description:
  - Reads, in one round trip, what the request asks for and nothing else; changes nothing
    (C(changed) is always false).
  - Called by the M(vllm_fleet.recipes.vllm_preflight) action, which builds the request from the fleet
    plan and checks the answer on the controller.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  request:
    description:
      - What to probe. Keys (all optional)
      - C(docker) (path of the docker CLI) runs C(docker info --format '{{json .}}'); when it answers,
        C(images) (references) are looked up with C(docker image inspect), and with C(docker_root_free)
        the free space of C(DockerRootDir) is read when one of them is missing.
      - C(docker_version) (path of the docker CLI) runs C(docker version --format '{{.Server.Version}}').
      - C(accelerator_count) (a shell command) runs under C(/bin/bash) with C(pipefail).
      - C(cpu) reads the CPU flags and the memory from C(/proc).
      - C(paths) (list) are looked up without following a final symlink.
      - C(cdi_dirs) (list) are searched for CDI specs (C(*.yaml), C(*.json)).
      - C(network) lists the interfaces (C(/sys/class/net)) and addresses (C(ip -o addr)).
      - C(weights) (list of C(name), C(marker) or C(present), and optional C(free_space_path),
        C(tree_url), C(source)) tells whether each revision is finished; for one that is not, it
        reads the free space of C(free_space_path), the total file size of the Hub tree at
        C(tree_url) and whether C(source) exists.
      - C(packages) (mapping of a venv directory to a package name) reads the version of the package
        installed in each venv from its C(site-packages) metadata, without starting the venv's Python.
    type: dict
    required: true
extends_documentation_fragment:
  - vllm_fleet.recipes.read_only
attributes:
  platform:
    support: full
    platforms: posix
    description: Linux hosts (C(/proc), C(/sys/class/net)).
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: reads a deploy host's docker and devices
- name: Read docker's runtimes and whether two paths exist
  vllm_fleet.recipes.vllm_host_probe:
    request:
      docker: /usr/bin/docker
      paths: [/dev/infiniband, /srv/models]
  register: probe
"""

RETURN = r"""
facts:
  description: One key per probe the request asked for.
  returned: always
  type: dict
  contains:
    docker:
      description: C(rc), C(stdout), C(stderr) of C(docker info), and C(info) (its parsed JSON, or null).
      type: dict
      returned: when requested
    images:
      description: Reference -> whether C(docker image inspect) found it.
      type: dict
      returned: when docker answered
    docker_root_free:
      description: C(path), C(mount), C(avail) (bytes) of docker's root directory.
      type: dict
      returned: when requested and an image is missing
    docker_version:
      description: C(rc), C(stdout), C(stderr) of C(docker version).
      type: dict
      returned: when requested
    accelerator_count:
      description: C(rc), C(stdout), C(stderr) of the count command.
      type: dict
      returned: when requested
    cpu:
      description: C(flags) (avx2, avx512f, avx512_bf16, amx_bf16 found) and C(mem_total) (bytes).
      type: dict
      returned: when requested
    paths:
      description: Path -> C(exists), C(isdir), C(isreg).
      type: dict
      returned: when requested
    cdi_specs:
      description: Number of CDI spec files found.
      type: int
      returned: when requested
    network:
      description: C(interfaces), C(ipv4) and C(ipv6) (addresses without loopback).
      type: dict
      returned: when requested
    weights:
      description: Name -> C(present) and, when not, C(free_space), C(tree_bytes), C(source) as requested.
      type: dict
      returned: when requested
    packages:
      description: Venv directory -> the installed version of the requested package (null when absent).
      type: dict
      returned: when requested
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._host_probe import probe

HUB_TIMEOUT_S = 20


def main() -> None:
    module = AnsibleModule(argument_spec={"request": {"type": "dict", "required": True}}, supports_check_mode=True)

    def run(argv):
        try:
            return module.run_command(list(argv), handle_exceptions=False)
        except OSError as exc:  # a missing program, as the command module reports it
            return exc.errno or 1, "", ""

    def fetch_json(url):
        with open_url(url, timeout=HUB_TIMEOUT_S) as response:
            return json.loads(response.read())

    module.exit_json(changed=False, facts=probe(module.params["request"], run, fetch_json))


if __name__ == "__main__":
    main()

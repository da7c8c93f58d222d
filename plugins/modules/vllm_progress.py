#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation stub: vllm_progress is an action plugin (plugins/action/vllm_progress.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_progress
short_description: Wait for a long job's JSON status file, printing its progress
description:
  - Reads a JSON status file on the host (with C(slurp)) every O(interval) seconds until its
    C(state) is C(done) or C(failed), and prints a line on the controller whenever it changed, with
    the state, the bytes so far (of O(total_bytes) when given), the rate and the elapsed time.
  - The status file is written by the job itself (for example the weights role's fetch script), a
    JSON object with C(state), C(bytes) and C(elapsed_s).
  - Pair it with an C(async) task that starts the job, then C(async_status) for its exit code.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  path:
    description: Status file on the host.
    type: str
    required: true
  label:
    description: What the progress lines call the job (default the path).
    type: str
    default: ""
  timeout:
    description: Fail when the state is not final after this many seconds.
    type: int
    default: 3600
  interval:
    description: Seconds between two reads.
    type: int
    default: 10
  total_bytes:
    description: Expected size, for a percentage (0 when unknown).
    type: int
    default: 0
attributes:
  check_mode:
    support: full
    description: In check mode nothing runs, so it returns at once (skipped).
  diff_mode:
    support: none
    description: Changes nothing.
  action:
    support: full
    description: Runs on the controller and reads the file through the connection.
  async:
    support: none
    description: Polls synchronously; the job it watches runs async.
  become:
    support: full
    description: Reads the file with the task's privileges.
  connection:
    support: full
    description: Uses the host's connection.
  delegation:
    support: full
    description: Can read the file on a delegated host.
  platform:
    support: full
    platforms: posix
    description: Any POSIX host.
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs a running download job on a deploy host
- name: Start the download
  ansible.builtin.command: /usr/local/libexec/vllm-fleet/hf-fetch ENV HF REPO REV CACHE MARKER STATUS
  async: 14400
  poll: 0
  register: job

- name: Show its progress until it finishes
  vllm_fleet.recipes.vllm_progress:
    path: /root/.cache/huggingface/.vllm-fleet/org--model@main.status
    label: org/model@main
    timeout: 14400
    interval: 10
"""

RETURN = r"""
status:
  description: The final status record.
  returned: success or failure of the job
  type: dict
  sample: {"state": "done", "bytes": 14681853, "elapsed_s": 3, "repo": "org/model", "revision": "main"}
polls:
  description: How many times the file was read.
  returned: when the job finished
  type: int
  sample: 4
msg:
  description: The last progress line.
  returned: always
  type: str
  sample: "[node-1] org/model@main: done 14.0 MiB after 3 s"
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="str", required=True),
            label=dict(type="str", default=""),
            timeout=dict(type="int", default=3600),
            interval=dict(type="int", default=10),
            total_bytes=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    module.fail_json(msg="vllm_fleet.recipes.vllm_progress is an action plugin; it cannot run as a module on a host")


if __name__ == "__main__":
    main()

#!/usr/bin/python
# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Documentation stub: vllm_benchmark_report is an action plugin (plugins/action/vllm_benchmark_report.py)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_benchmark_report
short_description: Store a vllm bench serve run on the controller, compare it with the last run of its fingerprint, plot it
description:
  - Runs on the controller. From the result JSON files of one C(vllm bench serve) run (one per concurrency
    level, parsed) and the run's item of the P(vllm_fleet.recipes.benchmark_runs#filter) filter, it computes the
    fingerprint of what ran (the image ID, a hash of the engines' argv, the hardware, node and engine counts,
    the dataset and lengths) and writes C(<dir>/<deployment>/<started>-<fingerprint>.json), C(.md) and C(.png).
  - The JSON holds, per concurrency level, TTFT, TPOT, ITL and end-to-end latency (mean, median, p50, p90,
    p99, in ms), request and token throughput, completed and failed requests.
  - The run is compared with the newest earlier run of the same fingerprint in the same directory; a
    throughput that fell, or a TTFT/TPOT p50/p99 that rose, by more than O(threshold_pct) percent is a
    regression (RV(regressions)). Failing on it is the caller's choice.
  - The PNG (matplotlib, Agg backend) shows latency and throughput against concurrency, and per level
    over the runs of this fingerprint. matplotlib is optional; without it the JSON and Markdown are
    still written and RV(png_skipped) says how to install it.
version_added: 0.1.0
author:
  - vllm_fleet maintainers (@vllm-fleet)
options:
  run:
    description: One item of the P(vllm_fleet.recipes.benchmark_runs#filter) filter's result (the deployment,
      its front door, workload and fingerprint parts).
    type: dict
    required: true
  image_id:
    description: The engine image's ID (C(docker image inspect --format {{.Id}})) on the host that ran the benchmark.
    type: str
    required: true
  results:
    description: The parsed result JSON of each concurrency level (C(vllm bench serve --save-result)).
    type: list
    elements: dict
    required: true
  started:
    description: When the run started, UTC, as it begins the file names (for example C(20261207T035530Z)).
    type: str
    required: true
  dir:
    description: Controller directory of the runs; each deployment gets a subdirectory.
    type: path
    required: true
  threshold_pct:
    description: A change for the worse larger than this, in percent, is a regression.
    type: float
    default: 10
  plot:
    description: Write the PNG (needs matplotlib on the controller).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written; it returns skipped.
  diff_mode:
    support: none
    description: Writes report files, like a log; reports no diff.
  action:
    support: full
    description: Runs on the controller.
  async:
    support: none
    description: Runs synchronously.
  become:
    support: none
    description: Writes on the controller as the user running ansible-playbook.
  connection:
    support: none
    description: Never uses the host's connection.
  delegation:
    support: none
    description: Always acts on the controller, whatever the task delegates to.
  platform:
    support: full
    platforms: posix
    description: A POSIX controller.
"""

EXAMPLES = r"""
# not run by tests/unit/test_install.py: needs the result files of a real vllm bench serve run
- name: Store the run, compare it, plot it
  vllm_fleet.recipes.vllm_benchmark_report:
    run: "{{ (fleet_plan | vllm_fleet.recipes.benchmark_runs)[0] }}"
    image_id: "{{ image_inspect.stdout }}"
    results: "{{ bench_files.results | map(attribute='content') | map('b64decode') | map('from_json') | list }}"
    started: "{{ now(utc=true).strftime('%Y%m%dT%H%M%SZ') }}"
    dir: out/benchmark
  register: bench_report

- name: Fail on a regression
  ansible.builtin.assert:
    that: bench_report.regressions | length == 0
"""

RETURN = r"""
json:
  description: Path of the run's JSON record on the controller.
  returned: success
  type: str
  sample: out/benchmark/tiny-rep/20261207T035530Z-3f2a9c81d0e4.json
markdown_path:
  description: Path of the Markdown summary.
  returned: success
  type: str
  sample: out/benchmark/tiny-rep/20261207T035530Z-3f2a9c81d0e4.md
png:
  description: Path of the PNG plot, null when none was written (RV(png_skipped) says why).
  returned: success
  type: str
  sample: out/benchmark/tiny-rep/20261207T035530Z-3f2a9c81d0e4.png
png_skipped:
  description: Why no PNG was written (matplotlib missing, with the install command), else null.
  returned: success
  type: str
  sample: null
fingerprint:
  description: The fingerprint (C(id), 12 hex digits) and what it hashes.
  returned: success
  type: dict
  sample: {"id": "3f2a9c81d0e4", "image_id": "sha256:ec79...", "argv_sha256": "9b1c...", "hardware": "xeon_numa1",
           "nodes": 2, "engines": 2, "workload": {"dataset": "random", "input_len": 32, "output_len": 8}}
history:
  description: How many earlier runs of this fingerprint the directory held.
  returned: success
  type: int
  sample: 1
comparison:
  description: C(previous) (the start of the run compared with, null for the first), C(rows) (per level and
    metric, before, after, change in percent, regression) and C(regressions).
  returned: success
  type: dict
regressions:
  description: One line per regression over O(threshold_pct); empty when none.
  returned: success
  type: list
  elements: str
  sample: ["c=2 output_throughput 4.78 -> 3.9 (-18.4%, threshold 10%)"]
failed_requests:
  description: Failed requests over every level.
  returned: success
  type: int
  sample: 0
markdown:
  description: The Markdown summary, as written.
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            run=dict(type="dict", required=True),
            image_id=dict(type="str", required=True),
            results=dict(type="list", elements="dict", required=True),
            started=dict(type="str", required=True),
            dir=dict(type="path", required=True),
            threshold_pct=dict(type="float", default=10),
            plot=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    module.fail_json(msg="vllm_fleet.recipes.vllm_benchmark_report is an action plugin; it cannot run as a module on a host")


if __name__ == "__main__":
    main()

"""benchmarks/deploy_tasks.py: the PLAY RECAP it reads tasks per host from (captured from ansible-core 2.19)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("deploy_tasks_benchmark", REPO / "benchmarks" / "deploy_tasks.py")
B = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(B)

# The end of a deploy: an earlier play's recap-like debug text must not be read, only the last recap.
OUTPUT = """\
TASK [Show what the plan deploys] **********************************************
ok: [localhost] => {
    "msg": "PLAY RECAP of nothing"
}

PLAY RECAP *********************************************************************
localhost                  : ok=3    changed=0    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0
vllm-pd-decode             : ok=41   changed=0    unreachable=0    failed=0    skipped=37   rescued=0    ignored=0
vllm-pd-router             : ok=30   changed=2    unreachable=0    failed=1    skipped=29   rescued=0    ignored=1

Saturday 05 December 2026  06:01:12 +0000 (0:00:00.412)       0:00:57.311 ******
===============================================================================
vllm_fleet.recipes._common : Read the managed units present on this host --- 1.23s
"""


def test_the_last_recap_gives_each_hosts_counters():
    # ansible-playbook pads every recap line with blanks
    stats = B.parse_recap(OUTPUT.replace("ignored=0\n", "ignored=0   \n"))
    assert sorted(stats) == ["localhost", "vllm-pd-decode", "vllm-pd-router"]
    assert stats["vllm-pd-decode"] == {"ok": 41, "changed": 0, "unreachable": 0, "failed": 0, "skipped": 37,
                                       "rescued": 0, "ignored": 0}


def test_executed_tasks_count_the_changed_ones_once():
    counts = B.task_counts(B.parse_recap(OUTPUT))
    assert counts["vllm-pd-decode"] == {"executed": 41, "changed": 0, "skipped": 37, "failed": 0}
    assert counts["vllm-pd-router"] == {"executed": 31, "changed": 2, "skipped": 29, "failed": 1}
    line = B.format_run("run 1", 57.31, counts)
    assert line.startswith("run 1: 57.3 s; tasks per host: localhost 3 (+1 skipped, 0 changed)")
    assert "vllm-pd-router 31 (+29 skipped, 2 changed, 1 FAILED)" in line


def test_output_without_a_recap_is_refused():
    with pytest.raises(ValueError, match="no PLAY RECAP"):
        B.parse_recap("ERROR! the playbook: playbooks/deploy.yml could not be found\n")

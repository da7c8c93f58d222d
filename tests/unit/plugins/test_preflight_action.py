"""vllm_preflight's options: what the action accepts and how it refuses the rest."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.vllm_fleet.recipes.plugins.action.vllm_preflight import parse_args, parse_queue

PLAN = {"vllm_fleet_host": {"processes": []}, "vllm_fleet_deployments": {}}


def test_accepted():
    checks, inputs = parse_args({"checks": ["host", "router"], "inputs": dict(PLAN, vllm_router_package="r==1")})
    assert checks == ["host", "router"]
    assert inputs == {"vllm_fleet_host": {"processes": []}, "vllm_fleet_deployments": {}, "vllm_router_package": "r==1"}
    assert parse_args({"inputs": PLAN})[0] == []


@pytest.mark.parametrize("args, message", [
    ({"inputs": PLAN, "check": ["host"]}, "vllm_preflight: unsupported option(s) check; supported: checks, defer, inputs, queued"),
    ({"checks": "host", "inputs": PLAN}, "vllm_preflight: checks: got 'host'; expected a list of host, image, weights"),
    ({"checks": ["host", "disk"], "inputs": PLAN}, "vllm_preflight: checks: got disk; expected any of host, image"),
    ({"checks": []}, "vllm_preflight: inputs: got NoneType; expected a mapping of role variables"),
    ({"inputs": dict(PLAN, vllm_router_pkg="x")}, "vllm_preflight: inputs: unsupported key(s) vllm_router_pkg; supported: "),
    ({"inputs": {"vllm_fleet_host": {}}}, "vllm_preflight: inputs.vllm_fleet_deployments: got NoneType; expected a mapping"),
])
def test_refused(args, message):
    with pytest.raises(AnsibleActionFail) as refused:
        parse_args(args)
    assert str(refused.value).startswith(message)


def test_defer_and_queued():
    assert parse_queue({}) == (False, [])
    assert parse_queue({"defer": "yes"}) == (True, [])
    queued = [{"checks": ["fabric"], "inputs": {"vllm_fabric_check": True}}]
    assert parse_queue({"queued": queued}) == (False, queued)


@pytest.mark.parametrize("args, message", [
    ({"defer": "maybe"}, "vllm_preflight: defer: got 'maybe'; expected a boolean"),
    ({"queued": {"checks": []}}, "vllm_preflight: queued: got dict; expected the list vllm_fleet_preflight_queue"),
    ({"defer": True, "queued": [{"checks": [], "inputs": {}}]}, "vllm_preflight: defer and queued do not go together"),
])
def test_defer_and_queued_refused(args, message):
    with pytest.raises(AnsibleActionFail) as refused:
        parse_queue(args)
    assert str(refused.value).startswith(message)

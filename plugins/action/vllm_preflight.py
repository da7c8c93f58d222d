# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Controller-side action: this host's weights view and the deploy roles' preflight checks.

The checks live in plugin_utils (_preflight, _preflight_checks, _host_view); the host is read
once, by the vllm_host_probe module. Documentation: ``plugins/modules/vllm_preflight.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.vllm_fleet.recipes.plugins.action.vllm_plan import _plain
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement

try:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._host_view import weights_view, with_presence
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._preflight import (
        CHECK_GROUPS,
        QUEUE_FACT,
        Inputs,
        evaluate,
        merge_queued,
        needs_view,
        probe_request,
        queued_with,
    )
except ImportError as exc:  # raised at use, with the package to install
    IMPORT_ERROR: Optional[ImportError] = exc
else:
    IMPORT_ERROR = None

PROBE_MODULE = "vllm_fleet.recipes.vllm_host_probe"
VALID_ARGS = frozenset(("checks", "inputs", "defer", "queued"))
#: The router check's read of each venv router's installed vllm-router (roles/router installs where it differs).
ROUTER_VERSIONS_FACT = "vllm_fleet_router_versions"
#: The host check's read of which image references the host has (roles/image skips pulls that would change nothing).
IMAGES_FACT = "vllm_fleet_images_present"


def parse_args(args: Mapping) -> tuple[list[str], dict]:
    """``checks`` and ``inputs`` of the task, refused with the accepted values when they do not fit."""
    unknown = sorted(set(args) - VALID_ARGS)
    if unknown:
        raise AnsibleActionFail(f"vllm_preflight: unsupported option(s) {', '.join(unknown)}; "
                                f"supported: {', '.join(sorted(VALID_ARGS))}")
    checks = args.get("checks", [])
    if not isinstance(checks, (list, tuple)) or not all(isinstance(c, str) for c in checks):
        raise AnsibleActionFail(f"vllm_preflight: checks: got {checks!r}; expected a list of {', '.join(CHECK_GROUPS)}")
    wrong = [c for c in checks if c not in CHECK_GROUPS]
    if wrong:
        raise AnsibleActionFail(f"vllm_preflight: checks: got {', '.join(wrong)}; expected any of "
                                f"{', '.join(CHECK_GROUPS)} ([] computes only vllm_fleet_weights)")
    inputs = args.get("inputs")
    if not isinstance(inputs, Mapping):
        raise AnsibleActionFail(f"vllm_preflight: inputs: got {type(inputs).__name__}; expected a mapping of role "
                                "variables (vllm_fleet_host, vllm_fleet_deployments ...)")
    unknown = sorted(set(inputs) - set(Inputs.names()))
    if unknown:
        raise AnsibleActionFail(f"vllm_preflight: inputs: unsupported key(s) {', '.join(unknown)}; "
                                f"supported: {', '.join(Inputs.names())}")
    for required in ("vllm_fleet_host", "vllm_fleet_deployments"):
        if not isinstance(inputs.get(required), Mapping):
            raise AnsibleActionFail(f"vllm_preflight: inputs.{required}: got {type(inputs.get(required)).__name__}; "
                                    "expected a mapping (the fleet plan's)")
    return [to_text(c) for c in checks], _plain(dict(inputs))


def parse_queue(args: Mapping) -> tuple[bool, list]:
    """(``defer``, ``queued``) of the task; they do not go together."""
    defer, queued = args.get("defer", False), args.get("queued") or []
    try:
        defer = boolean(defer, strict=True)
    except TypeError as exc:
        raise AnsibleActionFail(f"vllm_preflight: defer: got {defer!r}; expected a boolean") from exc
    if not isinstance(queued, (list, tuple)):
        raise AnsibleActionFail(f"vllm_preflight: queued: got {type(queued).__name__}; expected the list "
                                f"{QUEUE_FACT} that deferred vllm_preflight tasks leave")
    if defer and queued:
        raise AnsibleActionFail("vllm_preflight: defer and queued do not go together: a task either queues "
                                "its checks or runs the queue")
    return defer, _plain(list(queued))


class ActionModule(ActionBase):
    """Compute this host's weights view, probe the host once, run the checks."""

    TRANSFERS_FILES = False
    _VALID_ARGS = VALID_ARGS

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        if IMPORT_ERROR is not None:
            raise AnsibleActionFail(missing_requirement("vllm_fleet.recipes.vllm_preflight", IMPORT_ERROR))
        # Options and presence here; parse_args checks the values and names what it accepts.
        self.validate_argument_spec(argument_spec={
            "checks": {"type": "raw", "default": []},
            "inputs": {"type": "raw", "required": True},
            "defer": {"type": "raw", "default": False},
            "queued": {"type": "raw", "default": []},
        })
        checks, raw = parse_args(self._task.args)
        defer, queued = parse_queue(self._task.args)
        if defer:
            queue = queued_with(task_vars.get(QUEUE_FACT), checks, raw)
            result.update(changed=False, ansible_facts={QUEUE_FACT: queue})
            return result
        try:
            checks, raw = merge_queued(checks, raw, queued)
        except RecipeError as exc:
            raise AnsibleActionFail(f"vllm_preflight: {exc}") from exc
        inputs = Inputs(**raw)
        host = to_text(task_vars.get("inventory_hostname", ""))
        computed = needs_view(checks) and inputs.vllm_fleet_weights is None
        if inputs.vllm_fleet_weights is not None:
            view = [dict(entry) for entry in inputs.vllm_fleet_weights]
        elif needs_view(checks):
            view = weights_view(inputs.processes, inputs.vllm_fleet_deployments,
                                inputs.vllm_weights_repos, inputs.vllm_weights_origin)
        else:
            view = []
        request = probe_request(inputs, checks, view, host)
        facts: dict[str, Any] = {}
        if request:
            probed = self._execute_module(module_name=PROBE_MODULE, module_args={"request": request},
                                          task_vars=task_vars)
            if probed.get("failed"):
                result.update(failed=True, msg=f"vllm_preflight: {PROBE_MODULE} failed: {probed.get('msg', '')}")
                return result
            facts = probed.get("facts") or {}
        if computed:
            present = {name: entry["present"] for name, entry in (facts.get("weights") or {}).items()}
            view = with_presence(view, present)
            result["ansible_facts"] = {"vllm_fleet_weights": view}
        if "packages" in facts:
            result.setdefault("ansible_facts", {})[ROUTER_VERSIONS_FACT] = facts["packages"]
        if "images" in facts:
            result.setdefault("ansible_facts", {})[IMAGES_FACT] = facts["images"]
        if queued:
            result.setdefault("ansible_facts", {})[QUEUE_FACT] = []
        found = evaluate(inputs, checks, view, facts, host)
        result["changed"] = False
        if found.warnings:
            result["warnings"] = found.warnings
        if found.errors:
            result.update(failed=True, msg="\n".join(found.errors))
        return result

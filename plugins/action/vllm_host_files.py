# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Install one deploy step's plan files on a host and say what restarts.

Docs: plugins/modules/vllm_host_files.py. On the controller it selects the host's files for the
step's process kinds from the plan (plugin_utils/_host_files), hands them to the host in one
vllm_files_write call (directories, env files 0600, configs, units validated before they replace
anything; the managed units are read back in the same call), and works out the changed units,
the restart groups and the stale units from what changed and what the host runs.
No file content is returned; secret files get no diff.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._file_diffs import with_after, without_journal_entry
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement

try:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils import _host_files as H
except ImportError as exc:  # raised at use, with the package to install
    IMPORT_ERROR: Optional[ImportError] = exc
else:
    IMPORT_ERROR = None

WRITER = "vllm_fleet.recipes.vllm_files_write"


def host_processes(plan: Mapping[str, Any], host: str) -> list[dict]:
    """Every process of the plan that runs on this host."""
    return [dict(p) for d in plan["deployments"].values() for p in d["processes"] if p["host"] == host]


def _strings(value: Any) -> list[str]:
    return [to_text(v) for v in (value or [])]


def _crash_summary(written: Mapping[str, Any]) -> str:
    """The writer's failure in words when it returned no message (it crashed on the host)."""
    parts = [f"{key}: {to_text(written[key]).strip()[-1500:]}"
             for key in ("exception", "module_stderr", "module_stdout") if to_text(written.get(key) or "").strip()]
    return f"{WRITER} failed on the host" + (" (" + "; ".join(parts) + ")" if parts else " without a message")


class ActionModule(ActionBase):
    """Select, write (one module call) and report the restarts of one step's files."""

    TRANSFERS_FILES = False

    def _update_module_args(self, module_name, module_args, task_vars, *args, **kwargs):
        super()._update_module_args(module_name, module_args, task_vars, *args, **kwargs)
        if module_name == WRITER:
            without_journal_entry(module_args)

    def _step(self, args: Mapping[str, Any], task_vars: Mapping[str, Any]) -> dict:
        """The step's processes and file specs (pure selection; raises ValueError on a bad plan)."""
        result = args.get("plan") or {}
        if "plan" not in result or "contents" not in result:
            raise ValueError("plan: expected the registered result of vllm_plan with return_content: true")
        plan = result["plan"]
        host = to_text(args.get("host") or task_vars.get("inventory_hostname"))
        procs = H.select_processes(host_processes(plan, host), _strings(args.get("kinds")),
                                   _strings(args.get("only_groups")))
        plan_host = plan["hosts"].get(host) or {}
        host_files = plan_host.get("files") or []
        files = H.select_files(host_files, procs, _strings(args.get("configs")))
        specs = H.file_specs(files, result["contents"], procs, to_text(args.get("validate") or ""))
        scan = {"unit_dirs": H.unit_dirs(host_files), "deployments": sorted(plan["deployments"])}
        return {"procs": procs, "specs": specs, "dirs": H.directories(files, procs), "scan": scan,
                "planned_units": plan_host.get("units") or []}

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        if IMPORT_ERROR is not None:
            raise AnsibleActionFail(missing_requirement("vllm_fleet.recipes.vllm_host_files", IMPORT_ERROR))
        # The same spec as the module's documentation stub (plugins/modules/vllm_host_files.py).
        _spec, args = self.validate_argument_spec(argument_spec={
            "plan": {"type": "dict", "required": True, "no_log": True},
            "host": {"type": "str"},
            "kinds": {"type": "list", "elements": "str", "required": True},
            "configs": {"type": "list", "elements": "str", "default": []},
            "only_groups": {"type": "list", "elements": "str", "default": []},
            "validate": {"type": "str", "default": ""},
            "changed_images": {"type": "list", "elements": "str", "default": []},
            "force_groups": {"type": "list", "elements": "str", "default": []},
        })
        if not args.get("kinds"):
            raise AnsibleActionFail("vllm_host_files: kinds is required (the process kinds this step installs)")
        try:
            step = self._step(args, task_vars)
        except (KeyError, ValueError) as exc:
            raise AnsibleActionFail(f"vllm_host_files: {exc}") from exc

        procs = step["procs"]
        # One remote call writes the step's files and reads the managed units back (with their state).
        written = self._execute_module(module_name=WRITER, task_vars=task_vars,
                                       module_args={"specs": step["specs"], "dirs": step["dirs"],
                                                    "units": step["scan"]})
        if written.get("failed"):
            result.update(failed=True, msg=written.get("msg") or _crash_summary(written),
                          files=written.get("files", []))
            return result
        scanned = written.get("units") or []
        units = H.changed_units(procs, written.get("files", []))
        groups = H.changed_groups(procs, units, H.inactive_units(procs, scanned),
                                  _strings(args.get("changed_images")), _strings(args.get("force_groups")))
        result.update(changed=bool(written.get("changed")), files=written.get("files", []),
                      dirs=written.get("dirs", []), units=units, groups=groups, processes=procs,
                      stale=H.stale_units(scanned, _strings(args.get("kinds")), step["planned_units"]),
                      to_enable=H.units_to_enable(procs, scanned, bool(self._task.check_mode)))
        if "diff" in written:
            result["diff"] = with_after(written["diff"], step["specs"])
        return result

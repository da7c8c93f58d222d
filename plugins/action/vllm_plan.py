# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Controller-side action: compile the inventory's deployments into a fleet plan.

All logic lives in plugin_utils (_inventory, _placement, _container, _render);
this file only gathers hostvars/groups, calls them and writes files. Its
documentation lives in ``plugins/modules/vllm_plan.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_native, to_text
from ansible.plugins.action import ActionBase

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._atomic_write import atomic_write
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement
from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._secret import VaultValue

try:  # ansible-core >= 2.19: Vault values are EncryptedString objects or VaultedValue-tagged strings
    from ansible.parsing.vault import VaultHelper
except ImportError:  # 2.18: AnsibleVaultEncryptedUnicode, recognised by its __ENCRYPTED__ attribute
    VaultHelper = None

try:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_catalog
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._placement import build_plan, engine_factory
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._plan_view import plan_to_dict, probe_headers
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._render import (
        file_mode,
        install_manifest,
        render,
    )
except ImportError as exc:  # raised at use, with the package to install
    IMPORT_ERROR: Optional[ImportError] = exc
else:
    IMPORT_ERROR = None

MANIFEST = ".vllm-render-manifest"

#: Host variables placement reads (everything else in hostvars is ignored).
HOST_VARS = (
    "vllm_deployment", "vllm_fabric_address", "vllm_fabric_interface", "vllm_pd_role",
    "vllm_node_rank", "vllm_gpu_count", "vllm_gpus", "vllm_deployment_gpus", "vllm_rdma_devices",
    "vllm_ib_hca", "vllm_mooncake_role", "vllm_mooncake_device", "vllm_placeholders",
    "ansible_host", "ansible_default_ipv4",
)


def _vaulted(value):
    """Whether ``value`` is an Ansible Vault value, whatever ansible-core represents it as.

    2.19: an ``EncryptedString`` (not templated yet, e.g. ``vllm_deployments`` in task vars) or a
    ``str`` tagged ``VaultedValue`` (templated, e.g. through ``hostvars``; the tag follows a value
    templated as a whole, ``"{{ vault_x }}"``). 2.18: an ``AnsibleVaultEncryptedUnicode``
    (``__ENCRYPTED__``), which templating leaves as it is.
    """
    if VaultHelper is not None:
        try:
            if VaultHelper.get_ciphertext(value, with_tags=False):
                return True
        except Exception:  # pylint: disable=broad-except  # an undecryptable marker: decrypting says why
            return False
    return bool(getattr(value, "__ENCRYPTED__", False))


def _plain(value, vault=False):
    """Deep-copy templated Ansible values into exact dict/list/str/int/float.

    ansible-core 2.19 hands templated values over as tagged subclasses of str, int and
    float; YAML's safe dumper (the alert rules) and pydantic's strict types refuse them.
    With ``vault``, a Vault value becomes a :class:`VaultValue` (the inventory reader: a secret
    whatever its key, see docs/security.md).
    """
    if vault and _vaulted(value):
        return VaultValue(str(to_text(value)))
    if isinstance(value, Mapping):
        return {str(to_text(k)): _plain(v, vault) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, vault) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    return str(to_text(value))


class ActionModule(ActionBase):
    """Compile and render the fleet plan (controller-side only)."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def _host_vars(self, task_vars):
        hostvars = task_vars.get("hostvars") or {}
        groups = task_vars.get("groups") or {}
        out = {}
        for host in groups.get("all", []):
            source = hostvars[host]
            data = {}
            for key in HOST_VARS:
                if key in source:
                    data[key] = _plain(source[key], vault=True)
            facts = source.get("ansible_facts") if hasattr(source, "get") else None
            if isinstance(facts, Mapping) and "default_ipv4" in facts:
                data["ansible_facts"] = {"default_ipv4": _plain(facts["default_ipv4"])}
            out[to_text(host)] = data
        return out

    def _group_declarations(self, task_vars):
        """group -> the vllm_deployment set in that group's own vars (templated), where visible.

        ``hostvars`` only shows the one mapping each host ends up with; a declaration every host
        of which is shadowed by another group's would otherwise vanish without a word.
        """
        hostvars = task_vars.get("hostvars")
        inventory = getattr(hostvars, "_inventory", None)
        out = {}
        for name, group in (getattr(inventory, "groups", None) or {}).items():
            raw = group.get_vars().get("vllm_deployment")
            members = group.get_hosts()
            if raw is None or not members:
                continue
            try:  # templated as its first host sees it (host-dependent templates stay comparable)
                templar = self._templar.copy_with_new_env(available_variables=hostvars[members[0].name])
                out[to_text(name)] = _plain(templar.template(raw), vault=True)
            except Exception:  # pylint: disable=broad-except  # cannot be templated here: not checked
                continue
        return out

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        if IMPORT_ERROR is not None:
            raise AnsibleActionFail(missing_requirement("vllm_fleet.recipes.vllm_plan", IMPORT_ERROR))

        # The module's documentation stub's spec (plugins/modules/vllm_plan.py), but deployments is
        # raw here: the plan's own checks name the key and value a user wrote (docs/inputs.md).
        self.validate_argument_spec(argument_spec={
            "dest": {"type": "path"},
            "prune": {"type": "bool", "default": True},
            "deployments": {"type": "raw"},
            "recipe_dirs": {"type": "list", "elements": "path", "default": []},
            "catalog_dir": {"type": "path"},
            "cache_dir": {"type": "path"},
            "return_content": {"type": "bool", "default": False},
        })
        args = self._task.args
        base_dir = to_text(task_vars.get("playbook_dir") or os.getcwd())
        deployments = None if args.get("deployments") is None else _plain(args["deployments"], vault=True)
        if deployments is None and "vllm_deployments" in task_vars:
            deployments = _plain(task_vars["vllm_deployments"], vault=True)
        recipe_dirs = [to_text(p) for p in (args.get("recipe_dirs") or [])]
        catalog = None
        try:
            if args.get("catalog_dir"):
                catalog = load_catalog(os.path.join(base_dir, to_text(args["catalog_dir"])))
            factory = engine_factory(catalog=catalog, recipe_dirs=recipe_dirs, base_dir=base_dir,
                                     cache_dir=to_text(args["cache_dir"]) if args.get("cache_dir") else None)
            groups = {to_text(g): [to_text(h) for h in hs] for g, hs in (task_vars.get("groups") or {}).items()}
            fleet = build_plan(self._host_vars(task_vars), groups, factory, deployments_list=deployments,
                               group_declarations=self._group_declarations(task_vars))
            files = render(fleet, alerts=_plain(task_vars.get("vllm_monitoring_alerts") or {}))
        except (RecipeError, ValueError) as exc:
            result.update(failed=True, msg=f"vllm_plan: {to_native(exc)}")
            return result

        plan = plan_to_dict(fleet)
        manifest = install_manifest(fleet)
        for host, entry in plan["hosts"].items():
            entry["files"] = manifest.get(host, [])
        summary = [f"{name}: {d['deploy_type']} on {', '.join(d['hosts'])} -> {d['endpoint'] or '-'}"
                   for name, d in plan["deployments"].items()]
        result.update(changed=False, plan=plan, files=sorted(files), summary=summary)
        if args.get("return_content"):
            # Env files may hold secrets: callers register this with no_log (deploy roles do).
            result["contents"] = dict(sorted(files.items()))
            result["probe_headers"] = probe_headers(fleet)
        dest = args.get("dest")
        if not dest:
            return result

        dest = os.path.abspath(os.path.join(os.getcwd(), to_text(dest)))
        written, removed = self._write(dest, files, bool(args.get("prune", True)))
        result.update(dest=dest, written=written, removed=removed, changed=bool(written or removed))
        return result

    def _write(self, dest, files, prune):
        check = self._task.check_mode
        written = []
        for rel in sorted(files):
            path = self._inside(dest, rel)
            data = files[rel].encode("utf-8")
            mode = file_mode(rel)
            try:
                with open(path, "rb") as handle:
                    same = handle.read() == data
                same = same and (os.stat(path).st_mode & 0o777) == mode
            except OSError:
                same = False
            if same:
                continue
            written.append(rel)
            if not check:
                self._atomic_write(path, data, mode)
        old = []
        manifest = os.path.join(dest, MANIFEST)
        try:
            with open(manifest, encoding="utf-8") as handle:
                old = [line.strip() for line in handle if line.strip()]
        except OSError:
            pass
        # a manifest line is a path we wrote: anything that leaves dest is not ours to remove
        old = [rel for rel in old if self._contained(dest, rel)]
        removed = sorted(rel for rel in old if rel not in files and prune
                         and os.path.exists(os.path.join(dest, rel)))
        if not check:
            for rel in removed:
                os.unlink(os.path.join(dest, rel))
                parent = os.path.dirname(os.path.join(dest, rel))
                while parent != dest and os.path.isdir(parent) and not os.listdir(parent):
                    os.rmdir(parent)
                    parent = os.path.dirname(parent)
            listing = ("\n".join(sorted(files)) + "\n").encode("utf-8")
            try:
                with open(manifest, "rb") as handle:
                    unchanged = handle.read() == listing
            except OSError:
                unchanged = False
            if not unchanged:
                self._atomic_write(manifest, listing, 0o644)
        return written, removed

    @staticmethod
    def _contained(dest, rel):
        parts = rel.split("/")
        return bool(rel) and not os.path.isabs(rel) and all(p not in ("", ".", "..") for p in parts)

    def _inside(self, dest, rel):
        """``dest/rel``, refusing a path that would leave the render directory."""
        if not self._contained(dest, rel):
            raise AnsibleActionFail(f"vllm_plan: refusing to write {rel!r} outside {dest}")
        return os.path.join(dest, rel)

    @staticmethod
    def _atomic_write(path, data, mode):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, data, mode)

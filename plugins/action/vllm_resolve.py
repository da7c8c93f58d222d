# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Controller-side action: resolve a recipe and selection. Docs: plugins/modules/vllm_resolve.py."""

from __future__ import annotations

from typing import Any, Optional

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement

try:
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._catalog import load_catalog
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine import resolve
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._errors import RecipeError
    from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._loader import load_recipe_ref
except ImportError as exc:  # raised at use, with the package to install
    IMPORT_ERROR: Optional[ImportError] = exc
else:
    IMPORT_ERROR = None


class ActionModule(ActionBase):
    """Resolve on the controller; nothing runs on the target host."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("recipe", "selection", "catalog_dir", "cache_dir", "strict"))
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: Optional[dict] = None) -> dict:
        result = super().run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec={
            "recipe": {"type": "str", "required": True},
            "selection": {"type": "dict", "default": {}},
            "catalog_dir": {"type": "path"},
            "cache_dir": {"type": "path"},
            "strict": {"type": "bool", "default": True},
        })
        if IMPORT_ERROR is not None:
            raise AnsibleActionFail(missing_requirement("vllm_fleet.recipes.vllm_resolve", IMPORT_ERROR))
        try:
            catalog = load_catalog(args["catalog_dir"]) if args["catalog_dir"] else load_catalog()
            recipe = load_recipe_ref(args["recipe"], catalog=catalog, cache_dir=args["cache_dir"])
            resolution = resolve(recipe, args["selection"], catalog, strict=args["strict"])
        except RecipeError as exc:
            raise AnsibleActionFail(str(exc)) from exc
        data = resolution.to_dict()
        result.update(changed=False, hf_id=data["hf_id"], selection=data["selection"],
                      deploy_type=data["deploy_type"], image=data["image"], processes=data["processes"],
                      output=data["output"])
        if recipe.warnings:
            result["warnings"] = list(recipe.warnings)
        return result

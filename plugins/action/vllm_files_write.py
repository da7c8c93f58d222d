# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Run the vllm_files_write module and show the new contents in its diffs.

Docs: plugins/modules/vllm_files_write.py. The module masks the file contents it was given
(no_log), its diffs included; this action puts the new text of the files whose ``diff`` is
true back into them (module_utils/_file_diffs.py).
"""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.vllm_fleet.recipes.plugins.module_utils._file_diffs import with_after, without_journal_entry
from ansible_collections.vllm_fleet.recipes.plugins.module_utils._files_write_args import FILES_WRITE_ARGUMENT_SPEC


class ActionModule(ActionBase):
    """vllm_files_write with readable diffs."""

    TRANSFERS_FILES = False

    def _update_module_args(self, module_name, module_args, task_vars, *args, **kwargs):
        super()._update_module_args(module_name, module_args, task_vars, *args, **kwargs)
        without_journal_entry(module_args)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        # The module's own spec, checked here first: a bad argument fails before anything is sent.
        self.validate_argument_spec(argument_spec=FILES_WRITE_ARGUMENT_SPEC)
        result.update(self._execute_module(module_name=self._task.action, module_args=self._task.args,
                                           task_vars=task_vars))
        if "diff" in result:
            result["diff"] = with_after(result["diff"], self._task.args.get("specs") or [])
        return result

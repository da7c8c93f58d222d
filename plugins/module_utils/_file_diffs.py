# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The controller's side of a vllm_files_write call: its journal entry off, its diffs completed.

The module masks every file content it was given (no_log: env files hold secrets), so the
``after`` of each diff it returns is masked too. The callers (the vllm_files_write and
vllm_host_files action plugins) hold the contents and put them back, for the files whose
``diff`` is true: the module returns no diff at all for the others.

The module must not log its invocation to the host's journal either. Ansible masks a no_log
suboption there only where its value appears verbatim, and the logged text of the ``specs``
list escapes each content's line breaks, so a secret env file's text would reach the journal
whole (CI run of 2026-12-05: the API key was found there on both multi-node ranks).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations


def with_after(diffs, specs):
    """``diffs`` (the module's) with each ``after`` taken from the spec of the same ``dest``."""
    contents = {spec["dest"]: spec["content"] for spec in specs if spec.get("diff", True)}
    return [dict(diff, after=contents[diff["after_header"]]) for diff in diffs
            if diff.get("after_header") in contents]


def without_journal_entry(module_args):
    """``module_args`` (as ActionBase._update_module_args left them) with the module's invocation
    log off: ``_ansible_no_log`` only stops the host-side journal entry; the task's own no_log
    still decides what the controller shows."""
    module_args["_ansible_no_log"] = True
    return module_args

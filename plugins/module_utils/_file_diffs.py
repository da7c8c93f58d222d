# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The diffs of vllm_files_write, completed on the controller.

The module masks every file content it was given (no_log: env files hold secrets), so the
``after`` of each diff it returns is masked too. The callers (the vllm_files_write and
vllm_host_files action plugins) hold the contents and put them back, for the files whose
``diff`` is true: the module returns no diff at all for the others.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations


def with_after(diffs, specs):
    """``diffs`` (the module's) with each ``after`` taken from the spec of the same ``dest``."""
    contents = {spec["dest"]: spec["content"] for spec in specs if spec.get("diff", True)}
    return [dict(diff, after=contents[diff["after_header"]]) for diff in diffs
            if diff.get("after_header") in contents]

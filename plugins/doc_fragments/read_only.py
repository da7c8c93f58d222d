# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Attributes shared by the collection's read-only host modules."""

from __future__ import annotations


class ModuleDocFragment:
    """``extends_documentation_fragment: [vllm_fleet.recipes.read_only]``.

    A module's own ``attributes`` entry overrides a field here (Ansible merges
    the module's entry over the fragment's), so a module keeps its own
    platform description or a fuller diff mode.
    """

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
  idempotent:
    support: full
    description: Changes nothing; RV(ignore:changed) is always false.
  platform:
    support: full
    platforms: posix
    description: Linux hosts.
notes:
  - It changes nothing the fleet runs, so it is safe in C(--check) runs and in monitoring jobs.
"""

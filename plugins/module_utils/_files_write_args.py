# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The arguments of vllm_files_write, in one place for both sides of a call.

The module checks them on the host; its action plugin checks the same spec on the controller,
so a bad argument fails before anything is sent to a host.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

FILES_WRITE_ARGUMENT_SPEC = {
    # Only the contents are secret: the destinations and modes come back in files and diffs.
    "specs": {"type": "list", "elements": "dict", "default": [], "options": {
        "dest": {"type": "str", "required": True},
        "content": {"type": "str", "required": True, "no_log": True},
        "mode": {"type": "str", "required": True},
        "diff": {"type": "bool", "default": True},
        "validate": {"type": "str", "default": ""},
    }},
    "dirs": {"type": "list", "elements": "raw", "default": []},
    "dir_mode": {"type": "str", "default": "0755"},
    "units": {"type": "dict", "options": {
        "unit_dirs": {"type": "list", "elements": "path", "default": ["/etc/systemd/system"]},
        "deployments": {"type": "list", "elements": "str", "default": []},
        "manifest_dir": {"type": "path", "default": "/var/lib/vllm-fleet/units"},
    }},
}

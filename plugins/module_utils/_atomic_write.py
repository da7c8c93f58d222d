# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""Atomic file writes, shared by the render (controller) and vllm_files_write (host).

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.
"""

from __future__ import annotations

import os
import tempfile


def atomic_write(path, data, mode, owner=None):
    """Write ``data`` to ``path`` with ``mode`` (and ``owner`` = (uid, gid) if given): a temporary
    file in the same directory, renamed over ``path``; nothing is left behind on failure."""
    fd, tmp_path = tempfile.mkstemp(prefix=".vllm-", dir=os.path.dirname(path))
    try:
        os.fchmod(fd, mode)
        if owner is not None:
            os.fchown(fd, *owner)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp_path, path)
    except BaseException:
        if os.path.exists(tmp_path):
            os.unlink(tmp_path)
        raise

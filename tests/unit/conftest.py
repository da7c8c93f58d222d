"""Fixtures shared by the unit tests (helpers live in support modules, never in test modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from systemd_root import build_target_root


@pytest.fixture(scope="module")
def target_root(tmp_path_factory) -> Path:
    """A root modelling a deploy target, for ``systemd_root.verify_units``."""
    return build_target_root(tmp_path_factory.mktemp("target-root"))

"""Shared pytest setup for vllm_fleet.recipes.

* Makes this checkout importable as ``ansible_collections.vllm_fleet.recipes``
  (through ``.collections/ansible_collections/vllm_fleet/recipes -> ../../..``,
  the same link ``make collection-link`` creates), so tests write::

      from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._schema import Recipe

* Points ``ANSIBLE_COLLECTIONS_PATH`` at ``.collections`` so ansible-core's own
  loader (ansible-doc, ansible-playbook run from a test) finds the collection
  and the bundled dependencies unpacked by ``make collections``.

* Provides ``shared_dir`` (fixture) / ``find_shared_dir()`` for the read-only
  upstream corpus that lives beside the checkout in ``../shared``, and ``hub`` (fixture):
  the URL of a Hub stand-in (tests/infra/hub_standin.py) on a free local port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

try:  # not in the older ansible-core venvs of tests/unit/test_install.py, which run no property
    from hypothesis import HealthCheck, settings
except ImportError:
    pass
else:
    # Properties check what is accepted or refused, never how fast: no per-example deadline and no
    # too-slow health check, which a machine loaded by the scenarios beside `make test` can trip.
    settings.register_profile("vllm_fleet", deadline=None, suppress_health_check=[HealthCheck.too_slow])
    settings.load_profile("vllm_fleet")

REPO_ROOT = Path(__file__).resolve().parent.parent
COLLECTIONS_ROOT = REPO_ROOT / ".collections"
COLLECTION_LINK = COLLECTIONS_ROOT / "ansible_collections" / "vllm_fleet" / "recipes"

SHARED_ENV_VAR = "VLLM_FLEET_SHARED_DIR"
SHARED_MISSING_REASON = "../shared not found: upstream corpus tests need it beside the checkout"


def _ensure_collection_link() -> None:
    """Create the ansible_collections symlink if it is missing (same as `make collection-link`)."""
    if COLLECTION_LINK.is_symlink() and COLLECTION_LINK.resolve() == REPO_ROOT:
        return
    COLLECTION_LINK.parent.mkdir(parents=True, exist_ok=True)
    if COLLECTION_LINK.is_symlink() or COLLECTION_LINK.exists():
        raise RuntimeError(
            f"{COLLECTION_LINK} exists but does not point at {REPO_ROOT}; run `make clean collection-link`"
        )
    COLLECTION_LINK.symlink_to(Path("..", "..", ".."), target_is_directory=True)


_ensure_collection_link()

if str(COLLECTIONS_ROOT) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS_ROOT))

_paths = [p for p in os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep) if p]
if str(COLLECTIONS_ROOT) not in _paths:
    os.environ["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join([str(COLLECTIONS_ROOT), *_paths])


def find_shared_dir() -> Path | None:
    """Return the shared corpus directory, or None when it is absent.

    ``$VLLM_FLEET_SHARED_DIR`` wins when set; otherwise ``../shared`` relative to
    the repository root (where CI and the developer machines put it).
    """
    override = os.environ.get(SHARED_ENV_VAR)
    candidate = Path(override) if override else REPO_ROOT.parent / "shared"
    return candidate.resolve() if candidate.is_dir() else None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root, which is also the collection root."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """Path to ``../shared``; skips the test with a clear reason when it is missing."""
    found = find_shared_dir()
    if found is None:
        pytest.skip(SHARED_MISSING_REASON)
    return found


@pytest.fixture(name="hub")
def _hub():
    """A Hub stand-in on 127.0.0.1 (a free port) for the fetch script and hf; its base URL."""
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "tests" / "infra" / "hub_standin.py"),  # pylint: disable=consider-using-with
                             "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = proc.stdout.readline().split("listening on ", 1)[1].split()[0]
    yield url
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)

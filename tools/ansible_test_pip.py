#!/usr/bin/env python
"""`make ansible-test-pip`: put an offline pip bootstrap where ansible-test looks for get-pip.py.

    .venv/bin/python tools/ansible_test_pip.py --python 3.11

ansible-test bootstraps pip in each sanity virtualenv with a get-pip.py it downloads from a
host we cannot reach. It first looks in ~/.ansible/test/cache/get_pip_<pip version>.py, so
this copies tools/get_pip_offline.py there, for the pip version ansible-test pins for that
Python. An existing, non-empty file is never overwritten. Runs in the venv (ansible-core).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import types
from pathlib import Path

from ansible_test._internal.python_requirements import get_venv_packages

SHIM = Path(__file__).resolve().parent / "get_pip_offline.py"
CACHE = Path.home() / ".ansible" / "test" / "cache"


def shim_path(python_version: str) -> Path:
    """Where ansible-test looks for get-pip.py when bootstrapping pip for PYTHON_VERSION."""
    pip_version = get_venv_packages(types.SimpleNamespace(version=python_version))["pip"]
    return CACHE / ("get_pip_%s.py" % pip_version.replace(".", "_"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", required=True, help="the Python version ansible-test sanity runs (--python)")
    args = parser.parse_args(argv)
    target = shim_path(args.python)
    if not (target.is_file() and target.stat().st_size):
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHIM, target)
        print("ansible-test-pip: wrote offline pip bootstrap %s" % target)
    return 0


if __name__ == "__main__":
    sys.exit(main())

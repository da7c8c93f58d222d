"""Test support (not a test module): ``systemd-analyze verify`` against a root that models a
deploy target (the fixture ``target_root`` in conftest.py builds one per test module)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
#: Executables a deploy target has once the image/router/Mooncake roles ran.
TARGET_EXECUTABLES = ("/usr/bin/docker", "/usr/bin/dockerd", "/opt/vllm-router/bin/vllm-router",
                      "/opt/mooncake/bin/mooncake_master", "/opt/mooncake/bin/python3",
                      "/usr/bin/python3")


def build_target_root(root: Path) -> Path:
    """Fill ``root`` with the OS's unit targets, a docker.service and the target's binaries."""
    system = root / "usr" / "lib" / "systemd" / "system"
    system.mkdir(parents=True)
    for source in Path("/usr/lib/systemd/system").glob("*.target"):
        if source.is_file():
            shutil.copy(source, system / source.name)
    (root / "etc" / "systemd" / "system").mkdir(parents=True)
    (system / "docker.service").write_text(
        "[Unit]\nDescription=Docker Application Container Engine (model)\n\n"
        "[Service]\nExecStart=/usr/bin/dockerd\n")
    for exe in TARGET_EXECUTABLES:
        path = root / exe.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    return root


def verify_units(root: Path, units: dict[str, str]) -> subprocess.CompletedProcess:
    """``systemd-analyze verify`` of ``units`` (name -> text) installed under ``root``."""
    unit_dir = root / "etc" / "systemd" / "system"
    paths = []
    for name, text in units.items():
        path = unit_dir / name
        path.write_text(text)
        paths.append(str(path))
    return subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", f"--root={root}", *paths],
                          capture_output=True, text=True, timeout=120, check=False)

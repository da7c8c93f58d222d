#!/usr/bin/env python
"""The development environment behind `make venv` and `make collections`.

    python3 tools/devenv.py venv --venv .venv --sanity-python 3.11 requirements.txt ...
    .venv/bin/python tools/devenv.py bundle --version 12.3.0 --cache .cache/ansible-bundle \\
        --dest .collections community/docker ansible/posix ...

`venv` creates the virtualenv (with the Python running this script) when it has no
python, and pip-installs the requirement files into it, unless the sha256 of those files
matches the stamp it wrote last time (<venv>/.vllm-fleet-requirements.sha256).

`bundle` downloads PyPI's `ansible` wheel (Galaxy is unreachable) and unpacks only the
named collections from it into <dest>/ansible_collections/.

Standard library only: `venv` runs before the virtualenv exists.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

STAMP_NAME = ".vllm-fleet-requirements.sha256"
# pip on our machines warns about configured file:// indexes that do not exist.
PIP_NOISE = re.compile(r"WARNING: Location '.*' is ignored: it is neither a file nor a directory")


def run_quietly(cmd: list[str]) -> None:
    """Run CMD with stderr on stdout, printing every line but pip's noise; raise on failure."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout or ():
            if not PIP_NOISE.search(line):
                sys.stdout.write(line)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)


def included_files(path: Path) -> list[Path]:
    """PATH and the files its `-r FILE` / `-c FILE` lines name (relative to PATH, as pip reads them), depth first."""
    found = [path]
    for line in path.read_text(encoding="utf-8").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and words[0] in ("-r", "-c", "--requirement", "--constraint"):
            found += included_files(path.parent / words[1])
    return found


def requirements_hash(requirements: list[Path]) -> str:
    """sha256 of the requirement files' bytes (and of those they include with -r/-c), concatenated in order."""
    digest = hashlib.sha256()
    for path in requirements:
        for part in included_files(path):
            digest.update(part.read_bytes())
    return digest.hexdigest()


def python_minor(python: Path) -> str:
    """'3.11' for the interpreter at PYTHON."""
    version = subprocess.run([str(python), "--version"], capture_output=True, text=True, check=True).stdout
    return ".".join(version.split()[1].split(".")[:2])


def host_pip_can_target() -> bool:
    """Whether the pip of the Python running this script can install into another venv (`pip --python`, 22.3+)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return False
    version = tuple(int(part) for part in re.findall(r"\d+", proc.stdout.split()[1])[:2])
    return version >= (22, 3)


def ensure_venv(venv: Path, requirements: list[Path], sanity_python: str | None, lean: bool = False,
                stamp_name: str = STAMP_NAME) -> None:
    """Create VENV if it has no python, install REQUIREMENTS unless the stamp says they are in.

    LEAN (`make demo`): when this Python's pip can install into the venv, the venv gets no pip of
    its own (no ensurepip) and nothing is byte-compiled at install; both cost more than the
    install itself on a busy 2-core machine.
    """
    python = venv / "bin" / "python"
    stamp = venv / stamp_name
    names = " ".join(str(path) for path in requirements)
    want = requirements_hash(requirements)
    if python.exists() and stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == want:
        print("venv: %s is up to date with %s" % (venv, names))
        return
    outside_pip = lean and host_pip_can_target()
    if not python.exists():
        print("venv: creating %s with %s" % (venv, sys.executable), flush=True)
        subprocess.run([sys.executable, "-m", "venv", *(["--without-pip"] if outside_pip else []), str(venv)],
                       check=True)
    print("venv: installing %s" % names, flush=True)
    pip_args = [arg for path in requirements for arg in ("-r", str(path))]
    pip = [sys.executable, "-m", "pip", "--python", str(python)] if outside_pip else [str(python), "-m", "pip"]
    run_quietly(pip + ["install", "--quiet"] + (["--no-compile"] if lean else []) + pip_args)
    minor = python_minor(python)
    if sanity_python and minor != sanity_python:
        print("venv: WARNING: %s runs Python %s; ansible-test sanity expects %s" % (venv, minor, sanity_python))
    stamp.write_text(want + "\n", encoding="utf-8")
    installed = list(venv.glob("lib/python*/site-packages/*.dist-info"))
    print("venv: ready (%d packages)" % len(installed))


def unpack_collections(wheel: Path, dest: Path, collections: list[str]) -> None:
    """Extract ansible_collections/<namespace>/<name>/ of each of COLLECTIONS from WHEEL into DEST."""
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        for collection in collections:
            prefix = "ansible_collections/%s/" % collection
            shutil.rmtree(dest / prefix, ignore_errors=True)
            members = [name for name in names if name.startswith(prefix)]
            if not members:
                sys.exit("collections: %s not found in %s" % (collection, wheel))
            archive.extractall(dest, members)
            print("collections: unpacked %s (%d files)" % (collection.replace("/", "."), len(members)))


def fetch_bundle(version: str, cache: Path, dest: Path, collections: list[str]) -> None:
    """Download ansible==VERSION's wheel into CACHE, then unpack COLLECTIONS into DEST."""
    cache.mkdir(parents=True, exist_ok=True)
    (dest / "ansible_collections").mkdir(parents=True, exist_ok=True)
    run_quietly([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(cache),
                 "ansible==%s" % version])
    unpack_collections(cache / ("ansible-%s-py3-none-any.whl" % version), dest, collections)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    venv = commands.add_parser("venv", help="create/refresh the virtualenv (no-op when the requirements are unchanged)")
    venv.add_argument("--venv", type=Path, required=True, help="the virtualenv's directory")
    venv.add_argument("--sanity-python", help="the Python minor ansible-test sanity expects (warns otherwise)")
    venv.add_argument("--lean", action="store_true",
                      help="no pip inside the venv when this Python's pip can install into it; no byte-compiling")
    venv.add_argument("--stamp", default=STAMP_NAME, help="the stamp file's name in the venv (one per set of requirements)")
    venv.add_argument("requirements", type=Path, nargs="+", help="requirement files, installed with pip -r")
    bundle = commands.add_parser("bundle", help="unpack collections from PyPI's ansible wheel")
    bundle.add_argument("--version", required=True, help="the ansible package's version")
    bundle.add_argument("--cache", type=Path, required=True, help="where the wheel is downloaded")
    bundle.add_argument("--dest", type=Path, required=True, help="the collections root (holds ansible_collections/)")
    bundle.add_argument("collections", nargs="+", help="namespace/name of each collection to unpack")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.command == "venv":
            ensure_venv(args.venv, args.requirements, args.sanity_python, lean=args.lean, stamp_name=args.stamp)
        else:
            fetch_bundle(args.version, args.cache, args.dest, args.collections)
    except subprocess.CalledProcessError as exc:
        print("%s: FAILED: %s exited %d" % (args.command, " ".join(exc.cmd), exc.returncode), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

# Copyright: (c) 2026, vllm_fleet maintainers
# Apache License 2.0 (see LICENSE)
"""The message a plugin gives when the recipe engine it imports cannot be imported.

PRIVATE to the vllm_fleet.recipes collection: not a public API, may change
without notice. Other collections must not import it.

Filters and actions import the engine inside ``try``/``except ImportError`` so
that ansible-doc and ansible-test's import check work without the controller
requirements; at use they raise :func:`missing_requirement`'s message. This
module imports nothing outside the standard library, so it always loads.
"""

from __future__ import annotations

import sys

#: Top-level import name -> the distribution requirements.txt names for it.
DISTRIBUTIONS = {"yaml": "PyYAML", "pydantic": "pydantic", "pydantic_core": "pydantic",
                 "annotated_types": "pydantic", "typing_extensions": "pydantic"}
COLLECTION_PREFIX = "ansible_collections.vllm_fleet.recipes."


def missing_requirement(plugin: str, error: ImportError) -> str:
    """What ``plugin`` lacks, and the one command that installs it into the Python running Ansible."""
    name = error.name or ""
    if name.startswith(COLLECTION_PREFIX):
        return (f"{plugin}: the collection's own module {name} did not import ({error}); "
                "the installed vllm_fleet.recipes is incomplete: reinstall it with ansible-galaxy collection install")
    distribution = DISTRIBUTIONS.get(name.split(".")[0])
    what = f"the Python package {distribution}" if distribution else "the collection's Python requirements"
    return (f"{plugin} needs {what} on the controller ({error}). Install the collection's requirements.txt "
            f"into the Python that runs Ansible: {sys.executable} -m pip install -r "
            "<collection>/requirements.txt (docs/install.md)")

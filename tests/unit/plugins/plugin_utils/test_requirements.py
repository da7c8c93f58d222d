"""The import guard's message: the package to install, or the collection's own broken module."""

from __future__ import annotations

import sys

import pytest

from ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._requirements import missing_requirement


@pytest.mark.parametrize("module, package", [
    ("yaml", "PyYAML"), ("pydantic", "pydantic"), ("pydantic_core._pydantic_core", "pydantic"),
])
def test_a_missing_requirement_names_its_distribution_and_the_pip_of_this_python(module, package):
    message = missing_requirement("vllm_fleet.recipes.vllm_plan", ModuleNotFoundError(f"no {module}", name=module))
    assert message.startswith(f"vllm_fleet.recipes.vllm_plan needs the Python package {package} on the controller")
    assert f"{sys.executable} -m pip install -r <collection>/requirements.txt" in message


def test_an_unknown_module_points_at_the_requirements_file():
    message = missing_requirement("vllm_fleet.recipes.resolve", ImportError("cannot import name 'x' from 'zz'"))
    assert "needs the collection's Python requirements" in message
    assert "cannot import name 'x' from 'zz'" in message


def test_the_collections_own_module_is_reported_as_a_broken_install():
    name = "ansible_collections.vllm_fleet.recipes.plugins.plugin_utils._engine"
    error = ModuleNotFoundError(f"No module named '{name}'", name=name)
    message = missing_requirement("vllm_fleet.recipes.resolve", error)
    assert f"the collection's own module {name} did not import" in message
    assert "pip install" not in message

"""The type stubs (.pyi, py.typed) say what the modules have: every public name of a module is
in its stub, and every class member a stub declares exists at run time."""

import ast
import importlib
import pathlib

import pytest

import crmm

PACKAGE = pathlib.Path(crmm.__file__).parent
MODULES = [
    "crmm",
    "crmm.mr",
    "crmm.statistics",
    "crmm.pylibrmm",
    "crmm.pylibrmm.stream",
    "crmm.pylibrmm.cuda_stream_pool",
    "crmm.pylibrmm.device_buffer",
    "crmm.pylibrmm.logger",
    "crmm.pylibrmm.memory_resource",
    "crmm.pylibrmm.memory_resource.experimental",
    "crmm.mr.experimental",
]


def stub_of(name):
    module = importlib.import_module(name)
    path = pathlib.Path(module.__file__).with_suffix(".pyi")
    return module, ast.parse(path.read_text(), filename=str(path))


def top_level_names(tree):
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    star = importlib.import_module(("crmm." if node.level else "") + node.module.lstrip("."))
                    names.update(star.__all__)
                else:
                    names.add(alias.asname or alias.name)
    return names


def test_the_package_says_it_is_typed():
    assert (PACKAGE / "py.typed").is_file()


@pytest.mark.parametrize("name", MODULES)
def test_every_public_name_is_in_the_stub(name):
    module, tree = stub_of(name)
    missing = set(getattr(module, "__all__", [])) - top_level_names(tree)
    assert not missing, f"{name}.pyi lacks {sorted(missing)}"


@pytest.mark.parametrize("name", MODULES)
def test_every_member_a_stub_declares_exists(name):
    module, tree = stub_of(name)
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, node.name)
        for member in node.body:
            if isinstance(member, (ast.FunctionDef, ast.ClassDef)):
                assert hasattr(cls, member.name), f"{name}.{node.name}.{member.name}"
            elif isinstance(member, ast.AnnAssign) and not hasattr(cls, "__dataclass_fields__"):
                assert hasattr(cls, member.target.id) or member.target.id in getattr(cls, "__annotations__", {}), (
                    f"{name}.{node.name}.{member.target.id}"
                )


@pytest.mark.parametrize("name", MODULES)
def test_every_function_a_stub_declares_exists(name):
    module, tree = stub_of(name)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert callable(getattr(module, node.name, None)), f"{name}.{node.name}"

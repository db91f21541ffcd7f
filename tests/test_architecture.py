"""The package's shape is a contract: imports follow the flow, no cycles, every module in its
package's map, pytest hooks in plugin/ only, a root that shows the architecture.

Data flows files -> parsed benchmark (suite) -> model call (providers) -> evaluation -> execution
(outcome) -> storage -> reporting; the pytest glue (plugin/) and the command (cli/) sit on top. A
module may import its own stage or an earlier one, never a later one — imports made only for type
checking included. Size is a soft signal (a warning), not a cap: a feature users name stays in one
module per layer rather than being split to fit a line count.
"""

from __future__ import annotations

import ast
import functools
import re
import warnings
from pathlib import Path

import pytest

import pytest_helmbench

PACKAGE = Path(pytest_helmbench.__file__).parent

# Rank of each stage: a module may import a stage of equal or lower rank only.
STAGES = {
    "errors": 0,
    "codes": 0,
    "status": 0,
    "jsontext": 0,
    "redaction": 0,
    "trust": 0,
    "__init__": 0,
    "suite": 1,
    "config": 2,
    "models_file": 2,
    "providers": 3,
    "evaluation": 4,
    "execution": 5,
    "storage": 6,
    "benchmark_root": 2,
    "reporting": 7,
    "results": 7,
    "workbench": 8,  # the review web app: reads runs and scores, writes only its review tables
    "plugin": 9,
    "cli": 10,  # the command reads the plugin's option table (one set of defaults)
}
SUBPACKAGES = (
    "suite",
    "providers",
    "evaluation",
    "execution",
    "storage",
    "reporting",
    "workbench",
    "plugin",
    "cli",
)
ROOT_MODULES_AT_MOST = 12
SOFT_LINES = 500  # beyond this a module gets a warning: worth a look, not a failure


@functools.cache
def modules() -> dict[str, Path]:
    """Dotted name inside the package -> file, migrations excluded (they are Alembic's); walked once."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] != "migrations":
            found[".".join(parts)] = path
    return found


@functools.cache
def tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every test that reads it."""
    return ast.parse(path.read_text(encoding="utf-8"))


def stage(module: str) -> int:
    return STAGES[module.split(".")[0]]


def imports(module: str, path: Path) -> set[str]:
    """Every package-internal module this one imports, at any depth in the file."""
    package = module.split(".")[:-1] if not module.endswith("__init__") else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[: len(package) - (node.level - 1)]
            elif node.module and node.module.startswith("pytest_helmbench"):
                anchor = []
                node_module = node.module.removeprefix("pytest_helmbench").lstrip(".")
                found.add(node_module or "__init__")
                continue
            else:
                continue
            base = anchor + (node.module.split(".") if node.module else [])
            for alias in node.names:
                candidate = ".".join([*base, alias.name])
                found.add(candidate if candidate in modules() else ".".join(base) or "__init__")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("pytest_helmbench."):
                    found.add(alias.name.removeprefix("pytest_helmbench."))
    return {name for name in found if name.split(".")[0] != "migrations"}


@functools.cache
def graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports; built on first use, not at collection."""
    return {name: imports(name, path) for name, path in modules().items()}


def test_no_module_imports_a_later_stage_of_the_flow():
    backwards = [
        f"{module} (stage {stage(module)}) imports {target} (stage {stage(target)})"
        for module, targets in graph().items()
        for target in sorted(targets)
        if stage(target) > stage(module)
    ]
    assert backwards == []


def test_the_import_graph_has_no_cycles():
    """Module-level imports only: a function-level import that closes a loop is still a design smell,
    so every import counts."""
    visiting: set[str] = set()
    done: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        if node in done:
            return
        if node in visiting:
            cycles.append([*trail[trail.index(node) :], node])
            return
        visiting.add(node)
        for target in sorted(graph().get(node, ())):
            if target in graph() and target != node:
                visit(target, [*trail, target])
        visiting.discard(node)
        done.add(node)

    for name in sorted(graph()):
        visit(name, [name])
    assert cycles == []


def test_every_module_has_a_stage():
    """A new top-level module or package must be placed in the flow, not default to the top."""
    assert sorted({name.split(".")[0] for name in modules()} - set(STAGES)) == []


def test_the_root_holds_at_most_a_dozen_modules():
    root = sorted(p.stem for p in PACKAGE.glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, root


def test_large_modules_are_flagged_not_failed():
    large = {name: path.read_text(encoding="utf-8").count("\n") for name, path in modules().items()}
    large = {name: lines for name, lines in large.items() if lines > SOFT_LINES}
    if large:
        warnings.warn(
            f"modules over {SOFT_LINES} lines (split by responsibility if they mix): {large}", stacklevel=1
        )


@functools.cache
def hook_definitions() -> dict[str, list[str]]:
    """Every `def pytest_*` (functions and methods) in the package: hook name -> the modules defining it."""
    found: dict[str, list[str]] = {}
    for name, path in modules().items():
        for node in ast.walk(tree(path)):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("pytest_"):
                found.setdefault(node.name, []).append(name)
    return found


def test_every_pytest_hook_lives_in_plugin():
    """Hook implementations only in plugin/ (hookspecs.py declares HELMBench's own hooks there too)."""
    outside = {
        hook: [m for m in where if not m.startswith("plugin")] for hook, where in hook_definitions().items()
    }
    assert {hook: where for hook, where in outside.items() if where} == {}


@pytest.mark.parametrize("hook", ["pytest_collection_modifyitems", "pytest_collection_finish"])
def test_the_selection_hooks_are_implemented_in_at_most_two_places(hook):
    assert 1 <= len(hook_definitions()[hook]) <= 2


def package_map(package: str) -> str:
    init = PACKAGE / package / "__init__.py" if package else PACKAGE / "__init__.py"
    return ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""


def members(package: str) -> list[str]:
    """The modules (and subpackages) directly in `package` ("" is the root), __init__ excluded."""
    folder = PACKAGE / package if package else PACKAGE
    names = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    subpackages = [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()]
    return sorted(names + [s for s in subpackages if s != "migrations"])


@pytest.mark.parametrize("package", ["", *SUBPACKAGES])
def test_every_module_is_named_in_its_package_map(package):
    """Each package's `__init__` docstring names every module it holds, so the map cannot drift."""
    text = package_map(package)
    missing = [name for name in members(package) if not re.search(rf"(?<![\w.]){name}(\.py|/)?(?!\w)", text)]
    assert missing == [], f"{package or 'pytest_helmbench'}/__init__.py's docstring does not name {missing}"


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_each_subpackage_says_what_lives_there_and_what_it_may_import(subpackage):
    doc = package_map(subpackage)
    assert doc and len(doc.splitlines()) >= 3
    assert "import" in doc.lower()


def test_the_checker_sees_a_backward_import(tmp_path):
    """The rule can fail: an evaluation module importing storage would be reported."""
    fake = tmp_path / "bad.py"
    fake.write_text("from ..storage.tables import Result\n")
    found = imports("evaluation.bad", fake)
    assert "storage.tables" in found and stage("storage.tables") > stage("evaluation.bad")


def layout_section() -> str:
    page = (PACKAGE.parent / "docs" / "explanation" / "architecture.md").read_text(encoding="utf-8")
    start = page.index("## How the code is laid out")
    return page[start : page.index("\n#", start + 1)]


def test_the_documented_layout_fits_one_screen_and_names_every_package():
    section = layout_section()
    assert len(section.splitlines()) <= 50
    block = section.split("```")[1]
    listed = set(re.findall(r"^\s+(\w+)/", block, re.MULTILINE)) | set(re.findall(r"(\w+)\.py", block))
    assert sorted(set(members("")) - listed) == []


def test_the_documented_path_of_a_case_names_real_modules_and_objects():
    """Every `layer.module[.Object…]` the case's path names exists, so the walk-through cannot drift."""
    import importlib

    named = re.findall(r"`((?:{})(?:\.\w+)+)`".format("|".join(SUBPACKAGES)), layout_section())
    assert len(named) >= 20
    missing = []
    for dotted in named:
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in modules() or (PACKAGE / Path(*parts[:cut])).is_dir():
                break
        target = importlib.import_module("pytest_helmbench." + ".".join(parts[:cut]))
        for attribute in parts[cut:]:
            target = getattr(target, attribute, None)
        if target is None:
            missing.append(dotted)
    assert missing == []

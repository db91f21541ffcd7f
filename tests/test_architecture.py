"""The package's shape is a contract: imports follow the flow, no cycles, small modules, documented homes.

Data flows files -> parsed benchmark (suite) -> model call (providers) -> evaluation -> execution
(outcome) -> storage -> reporting; the pytest glue (plugin, state, items, controller, cli, …) sits on
top. A module may import its own stage or an earlier one, never a later one — imports made only for
type checking included.
"""

from __future__ import annotations

import ast
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
    "reporting": 7,
}
GLUE = 8  # plugin, state, items, options, controller, xdist_hooks, gc_tuning, hookspecs, cli, cli_results
SUBPACKAGES = ("suite", "providers", "evaluation", "execution", "storage", "reporting")
MAX_LINES = 400


def modules() -> dict[str, Path]:
    """Dotted name inside the package -> file, migrations excluded (they are Alembic's)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[0] != "migrations":
            found[".".join(parts)] = path
    return found


def stage(module: str) -> int:
    return STAGES.get(module.split(".")[0], GLUE)


def imports(module: str, path: Path) -> set[str]:
    """Every package-internal module this one imports, at any depth in the file."""
    package = module.split(".")[:-1] if not module.endswith("__init__") else module.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
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


GRAPH = {name: imports(name, path) for name, path in modules().items()}


def test_no_module_imports_a_later_stage_of_the_flow():
    backwards = [
        f"{module} (stage {stage(module)}) imports {target} (stage {stage(target)})"
        for module, targets in GRAPH.items()
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
        for target in sorted(GRAPH.get(node, ())):
            if target in GRAPH and target != node:
                visit(target, [*trail, target])
        visiting.discard(node)
        done.add(node)

    for name in sorted(GRAPH):
        visit(name, [name])
    assert cycles == []


@pytest.mark.parametrize("name", sorted(modules()))
def test_modules_stay_small(name):
    lines = modules()[name].read_text(encoding="utf-8").count("\n")
    limit = 250 if name == "plugin" else MAX_LINES
    assert lines <= limit, f"{name}.py has {lines} lines (at most {limit}): split it by responsibility"


@pytest.mark.parametrize("subpackage", SUBPACKAGES)
def test_each_subpackage_says_what_lives_there_and_what_it_may_import(subpackage):
    doc = ast.get_docstring(ast.parse((PACKAGE / subpackage / "__init__.py").read_text(encoding="utf-8")))
    assert doc and len(doc.splitlines()) >= 3
    assert "import" in doc.lower()


def test_the_checker_sees_a_backward_import(tmp_path):
    """The rule can fail: an evaluation module importing storage would be reported."""
    fake = tmp_path / "bad.py"
    fake.write_text("from ..storage.tables import Result\n")
    found = imports("evaluation.bad", fake)
    assert "storage.tables" in found and stage("storage.tables") > stage("evaluation.bad")

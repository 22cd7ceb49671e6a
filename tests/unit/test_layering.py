"""The layering, read from the source: the trainer and the launcher meet only in the launch contract.

    laptop (gantry) -> Terraform (infra/) -> VM agent (gantry_agent/ + launch_contract.py) -> container -> trainer

selfplay and toytrain run in the container and gantry on the laptop (its agent on the VM); a name both sides need
lives in launch_contract.py, which imports nothing of Gantry's, so that it can ship to the VM beside the agent.
"""

import ast
import sys
from pathlib import Path

import pytest
from checkout import REPO

PACKAGES = REPO / "packages"
CONTRACT = PACKAGES / "launch_contract.py"


def imported_modules(path: Path) -> set[str]:
    """Every absolute module an import statement in ``path`` names, at any depth (function-level imports too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def top_level(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize(("package", "forbidden"), [("selfplay", "gantry"), ("gantry", "selfplay"),
                                                     ("toytrain", "gantry"), ("toytrain", "selfplay"),
                                                     ("selfplay", "gantry_agent"), ("gantry", "gantry_agent"),
                                                     ("gantry", "local_cloud"), ("selfplay", "local_cloud")])
def test_the_trainers_and_the_launcher_do_not_import_each_other(package, forbidden):
    files = sorted((PACKAGES / package).rglob("*.py"))
    assert files, f"no modules under packages/{package}"
    crossing = [f"{path.relative_to(PACKAGES)}" for path in files if forbidden in top_level(imported_modules(path))]
    assert crossing == [], f"{package} imports {forbidden}; share the name through launch_contract.py instead"


def test_the_contract_is_a_stdlib_leaf():
    """It ships to the VM as one file beside the agent and runs on the system Python: nothing else is there."""
    imported = top_level(imported_modules(CONTRACT))
    assert {name for name in imported if name not in sys.stdlib_module_names} == set()


def test_the_agent_imports_only_the_stdlib_and_the_contract():
    """The agent's package and the contract are all the VM gets (infra/locals.tf): no other module of Gantry's, and
    every module under ~400 lines (a small package around a pure decision, #35)."""
    files = sorted((PACKAGES / "gantry_agent").glob("*.py"))
    imported = set().union(*(top_level(imported_modules(path)) for path in files))
    assert {name for name in imported if name not in sys.stdlib_module_names} == {"launch_contract"}
    assert [path.name for path in files if len(path.read_text().splitlines()) > 400] == []


def module_level(tree: ast.Module):
    """The nodes that run on import: the module's statements, into if/try/with blocks, not into defs or classes."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def module_graph(on_import_only: bool = False) -> dict[str, set[str]]:
    """{module: the modules of packages/ it imports}, function-level imports included (unless ``on_import_only``,
    then only what importing the module runs; third-party modules kept too); `from package import sub` names the
    submodule, not the package (a package importing its own submodules is no cycle)."""
    modules = {}
    for path in PACKAGES.rglob("*.py"):
        parts = list(path.relative_to(PACKAGES).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in module_level(tree) if on_import_only else ast.walk(tree):
            if isinstance(node, ast.Import):
                edges.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                subs = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
                edges.update(subs or {base})
        graph[name] = {e for e in edges if (e in modules or on_import_only) and e != name}
    return graph


def test_no_import_cycle_inside_a_package():
    """A cycle forces function-level imports and an import order that works by luck: shared names go down a layer
    (launch_contract, selfplay.errors, gantry.preflight.checks, gantry.nodes)."""
    graph, cycles = module_graph(), []

    def walk(start, node, path):
        for nxt in sorted(graph[node]):
            if nxt == start:
                cycles.append(" -> ".join([*path, start]))
            elif nxt not in path and nxt > start:  # each cycle once, from its smallest module
                walk(start, nxt, [*path, nxt])

    for module in sorted(graph):
        walk(module, module, [module])
    assert cycles == []


# gantry's wings (docs/ARCHITECTURE.md): the verbs on top, the flows they share below them, the library under both
GANTRY_WINGS = ("gantry.gcp", "gantry.preflight", "gantry.projects", "gantry.launches")


def test_gantrys_verbs_import_no_other_verb_and_the_library_no_verb_or_flow():
    """A verb (gantry/cli/VERB.py) is thin: what two verbs share is a flow (gantry/flows/) or the library, never
    another verb; the library (the wings and the modules beside them) imports neither, so it can be read alone."""
    graph = module_graph()
    verbs = {m for m in graph if m.startswith("gantry.cli.")}
    helpers = {"gantry.cli.follow"}  # run's and logs' follow loop, no verb of its own
    crossing = sorted(f"{m} -> {e}" for m in verbs for e in graph[m] if e in verbs - helpers)
    assert crossing == [], "move what they share into gantry/flows/"
    library = {m for m in graph if m.startswith("gantry.") and not m.startswith(("gantry.cli", "gantry.flows"))
               and m != "gantry.__main__"}
    upward = sorted(f"{m} -> {e}" for m in library for e in graph[m] if e.startswith(("gantry.cli", "gantry.flows")))
    assert upward == []
    assert all(wing in graph for wing in GANTRY_WINGS)


def test_the_selfplay_command_line_imports_torch_only_in_the_verb_that_runs():
    """`selfplay --help` and `selfplay check` (what `gantry run` asks on the laptop, in a subprocess) stay quick:
    nothing the dispatcher imports, its verb modules included, imports torch when imported; a verb's ``run`` does."""
    # the dispatcher imports its verbs (selfplay.cli) in build_parser, so that Ctrl-C in their imports is its one line
    graph, seen, todo = module_graph(on_import_only=True), set(), ["selfplay.__main__", "selfplay.cli"]
    while todo:
        module = todo.pop()
        if module in seen or module not in graph:
            continue
        seen.add(module)
        todo.extend(graph[module] | {module.rpartition(".")[0]} - {""})  # importing a.b runs a/__init__.py too
    heavy = sorted(m for m in seen if {"torch", "torch_xla", "onnxruntime"} & top_level(graph[m]))
    assert "selfplay.cli.train" in seen and heavy == [], f"imported by `selfplay --help`, and importing torch: {heavy}"


def test_no_module_over_400_lines():
    """A file past ~400 lines is several things (#35); the escape a docstring phrase once gave is gone (#98)."""
    modules = [*PACKAGES.rglob("*.py"), *(PACKAGES.parent / "bench").glob("*.py"), *(PACKAGES.parent / "scripts").glob("*.py")]
    long = [str(path.relative_to(PACKAGES.parent)) for path in modules if len(path.read_text().splitlines()) > 400]
    assert long == [], "split these: each is several things"


# The one function allowed past 80 lines: the search's hot loop, kept whole because a call per simulation costs
# self-play pace (the actors spend most of their time in it).
LONG_FUNCTION_ALLOWED = {("packages/selfplay/mcts.py", "search")}


def test_no_function_over_80_lines_but_the_searchs_hot_loop():
    """A function past 80 lines is several steps a reader has to hold at once (#98): name them."""
    modules = [*PACKAGES.rglob("*.py"), *(PACKAGES.parent / "bench").glob("*.py"), *(PACKAGES.parent / "scripts").glob("*.py")]
    long = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append((str(path.relative_to(PACKAGES.parent)), node.name))
    assert set(long) == LONG_FUNCTION_ALLOWED, "split these into named steps"

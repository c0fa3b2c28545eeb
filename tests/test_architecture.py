"""The package's shape, checked on its source (docs/architecture.md): a target's name is compared in targets.py
only, no class over 400 lines, no function outside numba kernels over 120 lines, no numba kernel over 12
arguments, no import cycle among the package's modules, and the engine imports nothing from spaCy or from the
layers above it."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "spacy_treecrf"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
TARGET_NAMES = {"ner", "spans", "tag", "pos", "token_attr"}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf8"), str(path))


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_kernel(node: ast.FunctionDef) -> bool:
    return any("jit" in ast.unparse(d) for d in node.decorator_list)


def _compares_a_target(node: ast.Compare) -> bool:
    """A comparison with a target's name (a string, or one in a literal collection), or of a ``target`` attribute
    or variable with anything but None or a table it is looked up in."""
    sides = [node.left, *node.comparators]
    for side in sides:
        if isinstance(side, ast.Constant) and side.value in TARGET_NAMES:
            return True
        if isinstance(side, (ast.Tuple, ast.List, ast.Set)) and any(
                isinstance(e, ast.Constant) and e.value in TARGET_NAMES for e in side.elts):
            return True
    is_target = [(isinstance(s, ast.Attribute) and s.attr == "target") or (isinstance(s, ast.Name) and s.id == "target")
                 for s in sides]
    if any(is_target):
        others = [s for s, t in zip(sides, is_target) if not t]
        return not all((isinstance(s, ast.Constant) and s.value is None) or isinstance(op, (ast.In, ast.NotIn))
                       for s, op in zip(others, node.ops))
    return False


def test_a_targets_name_is_compared_in_targets_py_only():
    found = [f"{path.name}:{node.lineno}: {ast.unparse(node)}" for path in MODULES if path.name != "targets.py"
             for node in ast.walk(_tree(path)) if isinstance(node, ast.Compare) and _compares_a_target(node)]
    assert found == []


def test_sizes_of_classes_functions_and_kernels():
    found = []
    for path in MODULES:
        for node in ast.walk(_tree(path)):
            length = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.ClassDef) and length > 400:
                found.append(f"{path.name}: class {node.name} has {length} lines")
            if isinstance(node, ast.FunctionDef):
                if _is_kernel(node):
                    n_args = len(node.args.args) + len(node.args.kwonlyargs)
                    if n_args > 12:
                        found.append(f"{path.name}: kernel {node.name} takes {n_args} arguments")
                elif length > 120:
                    found.append(f"{path.name}: function {node.name} has {length} lines")
    assert found == []


def _imports(path: Path) -> set:
    """The package's modules a module imports when it is imported (its top-level imports)."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in _tree(path).body:
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("spacy_treecrf")}
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(max(node.level - 1, 0)):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            if not module.startswith("spacy_treecrf"):
                continue
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names}  # (from . import x: the module x)
    known = {_name(p) for p in MODULES}
    return {m for m in found if m in known and m != name}


def test_no_import_cycle():
    graph = {_name(p): _imports(p) for p in MODULES}
    state, cycles = {}, []

    def visit(module, stack):
        state[module] = "open"
        for other in sorted(graph.get(module, ())):
            if state.get(other) == "open":
                cycles.append(" -> ".join(stack[stack.index(other):] + [other]))
            elif other not in state:
                visit(other, stack + [other])
        state[module] = "done"
    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize("path", [p for p in MODULES if "engine" in p.parts], ids=lambda p: p.name)
def test_the_engine_imports_nothing_from_spacy_or_the_layers_above(path):
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] in ("spacy", "thinc") for a in node.names), path.name
        if isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] not in ("spacy", "thinc"), path.name
            assert node.level <= 2 and not (node.level == 2 and node.module not in ("errors",)), (
                f"{path.name} imports {'.' * node.level}{node.module}")


def test_the_boosting_settings_are_written_once():
    """TreeCRF's and the component's boosting parameters are BoostParams' fields, with its defaults (their
    signatures name them, plainly, with BOOST_DEFAULTS' values)."""
    import dataclasses
    import inspect

    from spacy_treecrf import TreeCRF
    from spacy_treecrf.engine.settings import BoostParams
    from spacy_treecrf.pipe import make_booster
    fields = {f.name: f.default for f in dataclasses.fields(BoostParams)}
    for call in (TreeCRF.__init__, make_booster):
        params = inspect.signature(call).parameters
        assert {name: params[name].default for name in fields} == fields, call
    assert set(inspect.signature(make_booster).parameters) == set(fields) | {"scheduler"}

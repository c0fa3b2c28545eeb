"""The Errors catalogue: every message a user sees comes from it, with its code, and it holds no dead message."""
import ast
import re
from pathlib import Path

from spacy_treecrf.errors import Errors, Warnings

PACKAGE = Path(__file__).resolve().parent.parent / "spacy_treecrf"


def sources():
    return {p: p.read_text(encoding="utf8") for p in PACKAGE.rglob("*.py") if p.name != "errors.py"}


def message_arg(call: ast.Call) -> str:
    return ast.unparse(call.args[0]) if call.args else ""


def test_every_raise_and_warning_takes_its_message_from_the_catalogue():
    constants = {}  # module-level names bound to a catalogue entry (numba kernels raise those)
    for path, src in sources().items():
        for node in ast.parse(src).body:
            if isinstance(node, ast.Assign) and re.match(r"Errors\.E\d{3}$", ast.unparse(node.value)):
                constants[(path, node.targets[0].id)] = True
    bad = []
    for path, src in sources().items():
        for node in ast.walk(ast.parse(src)):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args
                    and ast.unparse(node.exc.func) != "typer.Exit"):  # an exit status, not a message
                arg = message_arg(node.exc)
                if not (re.match(r"Errors\.E\d{3}\b", arg) or (path, arg) in constants):
                    bad.append(f"{path.name}:{node.lineno}: {arg[:60]}")
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn":
                if not re.match(r"Warnings\.W\d{3}\b", message_arg(node)):
                    bad.append(f"{path.name}:{node.lineno}: warning {message_arg(node)[:60]}")
    assert not bad, "messages outside the catalogue:\n" + "\n".join(bad)


def test_every_catalogue_entry_is_used_and_reads_with_its_code():
    text = "\n".join(sources().values())
    for catalogue in (Errors, Warnings):
        codes = [k for k in vars(catalogue) if re.match(r"[EW]\d{3}$", k)]
        assert codes
        for code in codes:
            assert getattr(catalogue, code).startswith(f"[{code}] ")
            assert re.search(rf"\b{catalogue.__name__}\.{code}\b", text), f"{code} is never used"

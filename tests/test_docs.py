"""docs/architecture.md and benchmarks/README.md stay true: every module of the package is in the module map and
every module the map names exists; every benchmark script is listed under a purpose and every listed script
exists; every file of benchmarks/results is listed with the command that makes it, and every result table
(.md) names its command itself."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
BENCHMARKS = ROOT / "benchmarks"


def _map_entries(text: str, section: str):
    """The module names in the first column of the map's table under ``section``."""
    part = text.split(section, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    names = []
    for row in re.findall(r"^\| (.+?) \|", part, flags=re.M):
        names += re.findall(r"`([\w.]+\.py)`", row)
    return names


def test_the_module_map_names_every_module_and_only_modules_that_exist():
    text = ARCHITECTURE.read_text(encoding="utf8")
    for folder, section in ((ROOT / "spacy_treecrf", "### The front ends"),
                            (ROOT / "spacy_treecrf" / "engine", "### The engine")):
        listed = set(_map_entries(text, section))
        present = {p.name for p in folder.glob("*.py")}
        assert listed - present == set(), f"the map names modules {folder} lacks"
        assert present - listed == set(), f"modules of {folder} missing from the map"


def test_benchmarks_readme_lists_every_script_and_every_result_with_its_command():
    text = (BENCHMARKS / "README.md").read_text(encoding="utf8")
    scripts = {p.name for p in BENCHMARKS.glob("*.py")}
    listed = set(re.findall(r"^\| `(\w+\.py)` \|", text, flags=re.M))
    assert listed == scripts, (sorted(listed - scripts), sorted(scripts - listed))
    results = {p.name for p in (BENCHMARKS / "results").iterdir()}
    rows = dict(re.findall(r"^\| \[`([^`]+)`\]\(results/[^)]+\) \| `([^`]+)`", text, flags=re.M))
    assert set(rows) == results, (sorted(set(rows) - results), sorted(results - set(rows)))
    for name, command in rows.items():
        assert re.match(r"(python (-m )?\S+|spacy project run \S+|\(.+\))", command), (name, command)
        script = re.match(r"python (benchmarks/\w+\.py)", command)
        assert script is None or (ROOT / script.group(1)).exists(), (name, command)
    for table in (BENCHMARKS / "results").glob("*.md"):
        body = table.read_text(encoding="utf8")
        assert re.search(r"python (-m )?\S+|spacy project run", body), f"{table.name} names no command"


def test_the_readme_settings_table_is_made_from_the_settings_definition():
    from spacy_treecrf.engine.settings import settings_table
    text = (ROOT / "README.md").read_text(encoding="utf8")
    block = text.split("<!-- settings table -->\n", 1)[1].split("\n<!-- end of settings table -->", 1)[0]
    assert block == settings_table()

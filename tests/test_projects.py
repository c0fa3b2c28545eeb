"""The spaCy project workflows under projects/: every project.yml loads with weasel's own loader (schema,
workflows naming existing commands, variables interpolated), every script or config a command names exists (or
is an output of an earlier command), the configs parse and the projects' Python scripts compile. Fast: nothing
is trained or read."""
import py_compile
import shlex
import shutil
from pathlib import Path

import pytest
from spacy import util
from weasel.util import load_project_config

ROOT = Path(__file__).resolve().parents[1]
PROJECTS = sorted(p.parent for p in (ROOT / "projects").glob("*/project.yml"))
FILE_SUFFIXES = (".py", ".cfg", ".yml")


def load(project: Path, tmp_path: Path):
    """Load a copy of the project.yml (weasel creates the listed directories next to the file it loads)."""
    copy = tmp_path / project.name
    copy.mkdir()
    shutil.copy(project / "project.yml", copy / "project.yml")
    return load_project_config(copy, overrides={"vars.data_dir": "DATA"})


def test_the_five_projects_exist():
    assert {p.name for p in PROJECTS} == {"ner_conll2003", "chunking_conll2000", "pos_ud_ewt", "stress_nettalk",
                                          "protein_ss"}


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_project_yml_loads_and_names_existing_files(project, tmp_path):
    config = load(project, tmp_path)
    commands = {c["name"]: c for c in config["commands"]}
    assert "all" in config["workflows"]
    assert set(config["workflows"]["all"]) <= set(commands)
    for step in ("benchmark", "plot"):  # a project may benchmark in several steps (benchmark_<part>)
        assert any(name == step or name.startswith(step + "_") for name in config["workflows"]["all"]), \
            f"{project.name}: no {step} step"
    assert "${" not in str(config["commands"]), "uninterpolated variable"
    outputs = {o for c in config["commands"] for o in c.get("outputs", [])}
    for command in config["commands"]:
        for line in command["script"]:
            for token in shlex.split(line):
                if token.endswith(FILE_SUFFIXES) and not token.startswith("-"):
                    assert (project / token).exists() or token in outputs, \
                        f"{project.name}: command {command['name']!r} names missing file {token}"
    for asset in config.get("assets", []):
        assert asset["dest"].startswith("assets/")
        assert asset.get("checksum") or asset.get("url")


@pytest.mark.parametrize("project", PROJECTS, ids=lambda p: p.name)
def test_project_configs_parse(project):
    for cfg in sorted((project / "configs").glob("*.cfg")):
        config = util.load_config(cfg, interpolate=False)
        assert config["nlp"]["pipeline"], cfg
        for name, component in config["components"].items():
            for lexicon, path in component.get("features", {}).get("lexicons", {}).items():
                assert (project / path).is_file(), f"{cfg.name}: {name} lexicon {lexicon!r} names missing {path}"


def test_project_scripts_compile(tmp_path):
    scripts = sorted((ROOT / "projects").glob("*/scripts/*.py"))
    assert scripts
    for i, script in enumerate(scripts):
        py_compile.compile(str(script), cfile=str(tmp_path / f"{i}.pyc"), doraise=True)


def test_training_stats_take_the_last_of_tied_best_evaluations(tmp_path):
    """spaCy saves model-best again at an evaluation that ties the best score, so the benchmark's training
    seconds and round must be those of the last tie (the model it scores), not the first."""
    import importlib.util
    import json
    spec = importlib.util.spec_from_file_location("side_by_side", ROOT / "projects/shared/scripts/side_by_side.py")
    side_by_side = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(side_by_side)
    log = [(0, 0.5, 10.0), (10, 0.8, 50.0), (20, 0.8, 90.0), (30, 0.7, 130.0)]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(dict(step=s, epoch=s, score=v, wall_seconds=w,
                                                                  scores={"speed": 100.0})) + "\n"
                                                for s, v, w in log))
    stats = side_by_side.training_stats(tmp_path, dev_tokens=100)
    assert stats["best_step"] == 21 and stats["rounds"] == 21
    assert stats["train_seconds"] == pytest.approx(90.0 - 3.0)  # three dev evaluations of 1 s each

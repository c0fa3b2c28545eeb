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


def _script(name: str):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / f"projects/shared/scripts/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _features(rng, n_sequences: int, labels):
    """CSR rows of generated sequences whose label each position's feature column gives away (with noise)."""
    import numpy as np
    lengths = rng.integers(3, 9, size=n_sequences)
    y = rng.integers(0, len(labels), size=int(lengths.sum()))
    columns = [[int(k), int(rng.integers(len(labels), 40))] if rng.random() < 0.8 else [int(rng.integers(0, 40))]
               for k in y]
    indptr = np.concatenate([[0], np.cumsum([len(c) for c in columns])])
    return indptr, np.array([c for cs in columns for c in sorted(cs)]), np.concatenate([[0], np.cumsum(lengths)]), y


@pytest.mark.parametrize("metric,labels", [("f1", ["O", "B-X", "I-X"]), ("acc", ["A", "B", "C"])])
def test_the_dev_curve_is_the_tasks_own_score_against_seconds_for_both_learners(tmp_path, metric, labels):
    """CRFsuite's curve holds the task's own dev score (span F1 by refits at checkpoint iterations, token accuracy
    per iteration) with training seconds, and plot_curves draws it beside TreeCRF's on one axis."""
    pytest.importorskip("sklearn_crfsuite", reason="the benchmark extra (pip install -e '.[bench]')")
    pytest.importorskip("matplotlib", reason="the benchmark extra (pip install -e '.[bench]')")
    import json

    import numpy as np
    worker, plot = _script("crfsuite_worker"), _script("plot_curves")
    rng = np.random.default_rng(0)
    arrays = {"labels": np.array(labels)}
    for split, n in (("train", 60), ("dev", 20), ("test", 5)):
        indptr, indices, starts, y = _features(rng, n, labels)
        arrays.update({f"{split}_indptr": indptr, f"{split}_indices": indices, f"{split}_starts": starts,
                       f"{split}_y": y})
    np.savez(tmp_path / "features.npz", **arrays)
    chosen, _, _ = worker.fit_point(str(tmp_path / "features.npz"), 0.05, 0.01, None, metric, str(tmp_path))
    data = np.load(tmp_path / "features.npz")
    curve = worker.dev_curve(data, labels, 0.05, 0.01, None, metric, chosen)
    assert len(curve) >= 2 and all(0.0 <= point["score"] <= 1.0 for point in curve)
    assert [p["iterations"] for p in curve] == sorted(p["iterations"] for p in curve)
    if metric == "f1":
        assert curve[-1] == dict(iterations=chosen["iterations"], train_seconds=chosen["seconds"],
                                 score=chosen["dev"])
    else:  # the holdout log of the same setting: as many iterations, the accuracy the grid point scored
        assert len(curve) == chosen["iterations"] and curve[-1]["score"] == pytest.approx(chosen["dev"])
    rows = [dict(kind="treecrf", system="TreeCRF", metric="score", curve=[
                dict(step=1, score=0.5, train_seconds=1.0), dict(step=2, score=0.7, train_seconds=2.0)]),
            dict(kind="crfsuite", system="CRFsuite", metric="score", curve_metric="score", c1=0.05, c2=0.01,
                 curve=[dict(step=p["iterations"], score=p["score"], train_seconds=p["train_seconds"])
                        for p in curve])]
    (tmp_path / "results.json").write_text(json.dumps(dict(task="toy", rows=rows)))
    plot.main(tmp_path / "results.json", tmp_path / "plots")
    assert (tmp_path / "plots" / "toy_dev_curve.png").stat().st_size > 1000

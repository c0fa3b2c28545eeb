"""The README's commands as written: the "Train on your own data" block, run line by line on small generated
column files (a token and its BIO tag a line), exits 0 at every line and leaves a model that `spacy evaluate`
scores; the quick start's `pip install .` leaves the checkout as it was."""
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_block(heading: str) -> str:
    """The first ```bash block after ``heading`` in the README."""
    text = README.read_text(encoding="utf8")
    after = text[text.index(heading):]
    return re.search(r"```bash\n(.*?)```", after, re.S).group(1)


def write_iob(path: Path, n_sentences: int, rng: random.Random) -> None:
    people, places, companies = ["Anna", "Smith", "Jones", "Maria"], ["Paris", "London", "Rome"], ["Acme", "Globex"]
    sentences = []
    for _ in range(n_sentences):
        person, place, company = rng.choice(people), rng.choice(places), rng.choice(companies)
        sentences.append(rng.choice([
            [(person, "B-PER"), (rng.choice(["visited", "left", "called"]), "O"), (place, "B-LOC"), (".", "O")],
            [("The", "O"), (company, "B-ORG"), ("office", "O"), ("in", "O"), (place, "B-LOC"), ("opened", "O")],
            [(person, "B-PER"), ("Jr", "I-PER"), ("works", "O"), ("for", "O"), (company, "B-ORG"), ("Inc", "I-ORG")]]))
    path.write_text("\n\n".join("\n".join(f"{w} {t}" for w, t in s) for s in sentences) + "\n", encoding="utf8")


def test_train_on_your_own_data_block_runs_as_written(tmp_path):
    block = readme_block("### Train on your own data")
    lines = [line for line in block.splitlines() if line.strip()]
    assert lines[-1].startswith("python -m spacy evaluate")
    rng = random.Random(0)
    for name, n in (("train", 150), ("dev", 40), ("test", 40)):
        write_iob(tmp_path / f"{name}.iob", n, rng)
    bin_dir = str(Path(sys.executable).parent)  # `python` as the README says: this interpreter
    for line in lines:
        out = subprocess.run(["bash", "-c", f'PATH="{bin_dir}:$PATH"; {line}'], cwd=tmp_path, capture_output=True,
                             text=True, timeout=600)
        assert out.returncode == 0, f"{line}\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}"
    assert re.search(r"NER F\s+\d+\.\d+", out.stdout), out.stdout[-2000:]
    assert (tmp_path / "training" / "model-best" / "treecrf" / "model.msgpack").is_file()


def test_pip_install_leaves_the_checkout_as_it_was(tmp_path):
    """`pip install .` (the quick start's first command) builds in a temporary folder: no build/ or *.egg-info
    is left in the checkout (here a copy of its tracked files; the kernels' compile step skipped)."""
    import os

    root = README.parent
    listed = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout: {listed.stderr.strip()}")
    checkout = tmp_path / "checkout"
    for name in listed.stdout.splitlines():
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_bytes((root / name).read_bytes())
    before = sorted(p.name for p in checkout.iterdir())
    env = {**os.environ, "SPACY_TREECRF_PRECOMPILE": "0"}
    out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                          str(tmp_path / "site"), "."], cwd=checkout, capture_output=True, text=True, env=env,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in checkout.iterdir()) == before
    assert (tmp_path / "site" / "spacy_treecrf" / "engine" / "kernel_cache.py").is_file()

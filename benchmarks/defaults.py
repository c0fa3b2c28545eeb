"""TreeCRF with its DEFAULT settings next to sklearn-crfsuite on the same inputs, task by task: the out-of-the-box
benchmark behind the README's results table.

    TREECRF_DATA_DIR=../shared/data python benchmarks/defaults.py [--rows ROW ...] [--work DIR] [--stock]
        [--stock-from RESULTS.json] [--crf-jobs N] [--crf-grid C1,C2 ...] [--out benchmarks/results/defaults]
    TREECRF_DATA_DIR=../shared/data python benchmarks/defaults.py --dev-only [--rows ROW ...] [--set NAME=VALUE ...]
        [--max-steps N] [--documents]

--dev-only trains TreeCRF alone on each spaCy row, as below, with the generated config's settings overridden by
--set (a boosting, feature or component setting, by name), and prints its best dev score and round and the
training's peak RSS: how candidate defaults are compared across tasks (on dev data only; the estimator rows'
candidates: estimator_defaults.py). --max-steps N stops spaCy's loop after N steps (training.max_steps): a short
run that shows the memory of the first rounds. --documents: the ner row's Docs are CoNLL-2003's documents, their
sentences marked (conll2003_documents), not its sentences as spaCy's converter makes them from the files as
distributed; --set applies to the full rows too (TreeCRF's config; CRFsuite reads the columns it makes).

Rows (data under TREECRF_DATA_DIR; nothing is tuned on a test set):
- spaCy rows, trained as a user would: `spacy init config --pipeline treecrf`, then only the target, its score
  weight and the input columns named, then `spacy train` with spaCy's default training block (rounds chosen by
  early stopping on the dev split):
  - ner: CoNLL-2003 English, text only (`spacy convert --converter ner`: a Doc per sentence, and one of the word
    -DOCSTART- per delimiter line, as the files are distributed; --documents: a Doc per document); dev = valid.txt.
  - chunking: CoNLL-2000, the POS column as input (the column reader keeps it as token.tag_); dev = every 10th
    training sentence (carve_dev.py).
  - upos / xpos: UD English EWT (`spacy convert --converter conllu -n 1`), its own dev and test.
  - upos_genre: EWT cross-genre UPOS: train on the answers / email / reviews sentences of the train file (dev: those
    genres in the dev file), test on every newsgroup and weblog sentence of train, dev and test (genres never
    seen in training), split by the sent_id prefix.
  Measured by projects/shared/scripts/side_by_side.py: test score (on the test file's gold tokens, every system
  alike; spaCy's tokenizer is not scored), training seconds (evaluations excluded),
  tagging tokens/s of `nlp.pipe`, peak RSS; sklearn-crfsuite on exactly the component's feature columns, c1/c2
  chosen on dev from --crf-grid, at most --crf-max-iterations L-BFGS iterations (500, as the projects: on
  chunking two uncapped fits ran for over 45 minutes each without converging); with --stock, spaCy's stock
  component (`init config --pipeline ner | tagger | morphologizer`, spaCy's defaults) beside them; or with
  --stock-from, each row's stock figures from an earlier results file (carried_stock).
- Estimator rows: `TreeCRF(window=HALF, decode=D).fit(X, y)`, no other argument and no dev data (it holds out 10%
  itself to stop), D the decoding (Viterbi or marginal) that scored better on the dev split (DECODINGS), on the
  letter / residue windows of benchmarks/paper_tasks.py: X gives each position its own symbol and the symbol's
  classes (token_features) and the window names the input columns, the same features as the dicts
  CRFsuite reads (featurize: the symbols and classes of the HALF positions either side, padding past the ends):
  - nettalk, nettalk_phoneme_stress: NETtalk stress / phoneme+stress, the project's 1000/1000 words, 13 letters.
  - protein: protein secondary structure, 11 residues plus the residue classes.
  - hyphenation: Moby Hyphenator II single words (no space or hyphen), label per letter: a hyphenation point
    follows; 9-letter window; words assigned by a hash of the lower-cased word: 5% test, 5% dev, 15% train.
  sklearn-crfsuite: c1/c2 from paper_tasks' grid on the dev split (NETtalk, protein: paper_tasks' dev fold of the
  training data; hyphenation: its dev words), refitted on all training data. Tagging: positions/s from the symbol
  sequences, each learner's featurization (CRFsuite's window and class feature dicts, TreeCRF's per-position
  dicts, windowed by the estimator) + predict, both fitted models timed in alternating turns in a fresh process
  (paired_tagging: medians of 9 turns), one process per hash seed (TAGGING_SEEDS), each learner's median over
  them; training: fit seconds, each learner in a fresh process with its own RSS.
  TreeCRF's model is kept in WORK/models/ROW.treecrf.

Each row is written to WORK/rows/ROW.json when it finishes (with the commit it ran at), so rows can run in
separate invocations; every invocation rewrites OUT.md and OUT.json from all rows present, with the checks of
the out-of-the-box issue: score >= CRFsuite's, tokens/s >= 2x CRFsuite's (featurize + tag), training seconds <=
CRFsuite's where CRFsuite takes over 10 s (else <= 10 s), peak RSS <= 1.5 GB.
"""
import argparse
import functools
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPTS = REPO / "projects" / "shared" / "scripts"
EWT = "ud_english_ewt/en_ewt-ud-{}.conllu"
SPACY_ROWS = {  # target, score key, stock pipeline (None: no stock component applies)
    "ner": ("ner", "ents_f", "ner"),
    "chunking": ("spans", "spans_chunks_f", None),
    "upos": ("pos", "pos_acc", "morphologizer"),
    "xpos": ("tag", "tag_acc", "tagger"),
    "upos_genre": ("pos", "pos_acc", "morphologizer"),
}
ESTIMATOR_ROWS = ("nettalk", "nettalk_phoneme_stress", "protein", "hyphenation")
ROWS = tuple(SPACY_ROWS) + ESTIMATOR_ROWS
TRAIN_GENRES = ("answers", "email", "reviews")
TEST_GENRES = ("newsgroup", "weblog")
MAX_RSS_MB = 1536.0
# The estimator rows' tagging is timed in a fresh process per hash seed (PYTHONHASHSEED), and each learner's speed
# is its median over them: CRFsuite's NETtalk speed (its featurization builds a dict of string keys per position)
# is a property of the process, by up to 1.7x. In a probe, seed 1 gave 57,000 positions/s and seed 3 94,000, each
# twice; in the table's run at 6cd75ef the five seeds gave 64,000 to 96,000, seed 3 the slowest. So the seed is one
# source of it, not the only one. TreeCRF's speed moved by 18% across the same processes.
TAGGING_SEEDS = (1, 2, 3, 4, 5)
# The estimator rows decode each learner's test predictions as it scored better on dev (ties: Viterbi, TreeCRF's
# default): TreeCRF fitted on the dev split's training part with each decoding (which also picks its small_trees
# fits), CRFsuite's one fit scored both ways (crfsuite_score)
DECODINGS = ("viterbi", "marginal")
README_START, README_END = "<!-- defaults-results:start -->", "<!-- defaults-results:end -->"
LEGEND = ("Test scores (no choice was made on a test set; spaCy rows: on the test file's gold tokens, for every "
          "system alike), each learner's with the decoding it scored better "
          "with on dev (estimator rows: Viterbi or marginal, `TreeCRF(decode=...)`; spaCy rows: Viterbi, TreeCRF's "
          "default); training seconds without dev evaluations (estimator "
          "rows: TreeCRF's `fit` with the validation it holds out to stop, CRFsuite's refit); tokens/s: "
          "TreeCRF's tagging (spaCy rows: `nlp.pipe`), CRFsuite's featurization + tagging (estimator rows: both "
          "from the symbol sequences: CRFsuite's window feature dicts, TreeCRF's dicts of each position's own "
          "features read through `TreeCRF(window=...)`, + predict, the two timed in alternating turns, each "
          f"learner's median over fresh processes with {len(TAGGING_SEEDS)} hash seeds). Checks: score >= "
          "CRFsuite's, tokens/s >= 2x CRFsuite's, training <= CRFsuite's (<= 10 s where CRFsuite takes less), "
          "peak RSS <= 1.5 GB. spaCy stock: spaCy's own component for the target (`spacy init config --pipeline "
          "ner | tagger | morphologizer`, spaCy's defaults; `--stock`), its test score.")


def run(command, **kwargs):
    print("$", " ".join(map(str, command)), flush=True)
    return subprocess.run(list(map(str, command)), check=True, **kwargs)


def commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


# ---- spaCy rows ----------------------------------------------------------------------------------------------
def conllu_sentences(path: Path):
    """(sent_id, the sentence's lines incl. comments) of a CoNLL-U file."""
    block, sent_id = [], ""
    for line in path.read_text(encoding="utf8").splitlines():
        if line.strip():
            block.append(line)
            if line.startswith("# sent_id = "):
                sent_id = line.split("=", 1)[1].strip()
        elif block:
            yield sent_id, block
            block, sent_id = [], ""
    if block:
        yield sent_id, block


def genre_split(data: Path, out: Path) -> list:
    """EWT's cross-genre split as three CoNLL-U files (train, dev, test); see the module docstring."""
    out.mkdir(parents=True, exist_ok=True)
    parts = {"train": [], "dev": [], "test": []}
    for split in ("train", "dev", "test"):
        for sent_id, block in conllu_sentences(data / EWT.format(split)):
            genre = sent_id.split("-", 1)[0]
            if genre in TEST_GENRES:
                parts["test"].append(block)
            elif genre in TRAIN_GENRES and split != "test":
                parts[split].append(block)
            elif genre not in TRAIN_GENRES:
                raise SystemExit(f"{split}: sentence {sent_id!r} has no known genre prefix")
    paths = []
    for name, blocks in parts.items():
        paths.append(out / f"genre-{name}.conllu")
        paths[-1].write_text("".join("\n".join(b) + "\n\n" for b in blocks), encoding="utf8")
        print(f"  {name}: {len(blocks)} sentences -> {paths[-1]}", flush=True)
    return paths


def conll2003_documents(source: Path, out: Path) -> Path:
    """A copy of a CoNLL-2003 file whose ``-DOCSTART- -X- -X- O`` lines read ``-DOCSTART- -X- O O``, the document
    delimiter spaCy's ``ner`` converter looks for: with it the converter makes a Doc per document, its sentences
    marked; without it, a Doc per sentence, and a Doc of the word ``-DOCSTART-`` for each delimiter line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = source.read_text(encoding="utf8").splitlines(keepends=True)
    out.write_text("".join("-DOCSTART- -X- O O\n" if line.startswith("-DOCSTART-") else line for line in lines),
                   encoding="utf8")
    return out


def spacy_corpus(row: str, data: Path, work: Path, documents: bool = False) -> list:
    """The (train, dev, test) files of a spaCy row, converted once into WORK/corpus; ``documents`` (ner): a Doc
    per CoNLL-2003 document (conll2003_documents); other rows have no documents to keep."""
    documents = documents and row == "ner"
    corpus = work / "corpus" / (row + ("_documents" if documents else ""))
    corpus.mkdir(parents=True, exist_ok=True)
    if row == "chunking":
        import carve_dev
        if not (corpus / "dev-split.txt").exists():
            carve_dev.main(data / "conll2000" / "train.txt", corpus, 10)
        return [corpus / "train-split.txt", corpus / "dev-split.txt", data / "conll2000" / "test.txt"]
    if row == "ner":
        sources, converter = [data / f"conll2003/{s}.txt" for s in ("train", "valid", "test")], ["--converter", "ner"]
        if documents:
            sources = [conll2003_documents(source, corpus / "conll" / source.name) for source in sources]
    elif row == "upos_genre":
        sources, converter = genre_split(data, corpus / "conllu"), ["--converter", "conllu", "-n", "1"]
    else:
        sources, converter = [data / EWT.format(s) for s in ("train", "dev", "test")], ["--converter", "conllu",
                                                                                         "-n", "1"]
    out = []
    for source in sources:
        out.append(corpus / (source.stem + ".spacy"))
        if not out[-1].exists():
            run([sys.executable, "-m", "spacy", "convert", source, corpus, *converter], stdout=subprocess.DEVNULL)
    return out


def user_config(pipeline: str, row: str, run_dir: Path) -> Path:
    """`spacy init config` for the pipeline, with what a user names: the target, its score weight and the input
    columns (a treecrf); spaCy's stock configs stay as generated. The projects' JSONL logger records each
    evaluation's wall time for side_by_side.py."""
    from spacy import util
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.cfg"
    run([sys.executable, "-m", "spacy", "init", "config", path, "--pipeline", pipeline, "--force"],
        stdout=subprocess.DEVNULL)
    config = util.load_config(path, interpolate=False)
    if pipeline == "treecrf":
        target, key, _ = SPACY_ROWS[row]
        config["components"]["treecrf"]["target"] = target
        # the generated weights (NER's) nulled, else spaCy adds them back and halves the target's weight
        config["training"]["score_weights"] = {**{k: None for k in config["training"]["score_weights"]}, key: 1.0}
        if row == "chunking":
            config["components"]["treecrf"]["spans_key"] = "chunks"
            config["components"]["treecrf"]["features"]["attrs"] = ["tag_"]
            for split in ("train", "dev"):
                config["corpora"][split] = {"@readers": "spacy_treecrf.ColumnCorpus.v1",
                                            "path": "${paths.%s}" % split, "format": "conll2000",
                                            "keep_columns": {"pos": "tag_"}, "spans_key": "chunks"}
    config["training"]["logger"] = {"@loggers": "treecrf_projects.JSONLLogger.v1",
                                    "path": str(run_dir / "log.jsonl")}
    config.to_disk(path)
    return path


def train_pipeline(pipeline: str, row: str, files: list, run_dir: Path, overrides: tuple = ()):
    """`spacy train` of the row's user_config into run_dir (timed), plus ``overrides`` (spacy train's
    --section.setting VALUE arguments); a run_dir trained before is kept."""
    if (run_dir / "model-best").exists() and (run_dir / "run.json").exists():
        print(f"  {run_dir}: trained before, kept", flush=True)
        return
    config = user_config(pipeline, row, run_dir)
    run([sys.executable, SCRIPTS / "timed.py", run_dir / "run.json", "--log", run_dir / "train.log", "--",
         sys.executable, "-m", "spacy", "train", config, "--paths.train", files[0], "--paths.dev", files[1],
         "--output", run_dir, "--code", SCRIPTS / "training_log.py", *overrides])
    if json.loads((run_dir / "run.json").read_text())["exit_code"]:
        raise SystemExit(f"spacy train failed for {row} ({pipeline}): see {run_dir / 'train.log'}")


def dev_run(row: str, data: Path, work: Path, settings: list, max_steps: int = 0, documents: bool = False) -> dict:
    """TreeCRF alone on a spaCy row, the generated config with ``settings`` (NAME=VALUE, see init_config_train),
    stopped after ``max_steps`` steps (0: the config's): its best dev score, the round it came from (spaCy's
    epoch: a round per pass), the rounds run and the training's peak RSS."""
    from init_config_train import override
    files = spacy_corpus(row, data, work, documents)
    name = ",".join(settings + ([f"max_steps={max_steps}"] if max_steps else [])
                    + (["documents"] if row == "ner" and documents else [])) or "defaults"
    run_dir = work / "dev" / row / name
    overrides = [part for item in settings for part in override(item)]
    train_pipeline("treecrf", row, files, run_dir,
                   overrides + (["--training.max_steps", str(max_steps)] if max_steps else []))
    evals = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    best = max(evals, key=lambda e: (e["score"], -e["step"]))
    peak = json.loads((run_dir / "run.json").read_text())["peak_rss_mb"]
    result = dict(row=row, settings=settings, max_steps=max_steps or None, best_dev=best["score"],
                  best_round=best["epoch"], rounds=evals[-1]["epoch"], peak_rss_mb=peak, commit=commit(),
                  documents=documents and row == "ner",
                  date=time.strftime("%Y-%m-%d"))
    (run_dir / "result.json").write_text(json.dumps(result, indent=1))
    print(f"{row} {name}: best dev {SPACY_ROWS[row][1]} {100 * best['score']:.2f} at round {best['epoch']} of "
          f"{evals[-1]['epoch']}, training peak RSS {peak:,.0f} MB", flush=True)
    return result


def spacy_row(row: str, data: Path, work: Path, args) -> dict:
    target, key, stock = SPACY_ROWS[row]
    files = spacy_corpus(row, data, work, args.documents)
    from init_config_train import override
    settings = [part for item in args.set for part in override(item)]
    train_pipeline("treecrf", row, files, work / row / "treecrf", settings)
    command = [sys.executable, SCRIPTS / "side_by_side.py", "--task", row, "--out", work / row / "bench",
               "--train", files[0], "--dev", files[1], "--test", files[2],
               "--treecrf", f"defaults={work / row / 'treecrf'}",
               "--no-crf-curve", "--crf-jobs", args.crf_jobs, "--crf-max-iterations", args.crf_max_iterations,
               "--crf-grid", *args.crf_grid]
    if args.stock and stock:
        train_pipeline(stock, row, files, work / row / "stock")
        command += ["--stock", f"{stock}={work / row / 'stock'}", "--stock-test", files[2], "--stock-keys", key]
    run(command)
    bench = json.loads((work / row / "bench" / "results.json").read_text())
    carried = carried_stock(row, args.stock_from) if stock and not args.stock and args.stock_from else []
    systems = []
    for r in bench["rows"]:
        systems.append(dict(system={"treecrf": "TreeCRF", "crfsuite": "CRFsuite", "stock": "spaCy " + str(stock)}
                            [r["kind"]], score=r["score"], train_seconds=r.get("train_seconds"),
                            wall_seconds=r.get("wall_seconds"), tokens_per_second=r.get("tokens_per_second"),
                            peak_rss_mb=max(filter(None, (r.get("train_peak_rss_mb"), r.get("tag_peak_rss_mb")))),
                            rounds=r.get("rounds"), detail={k: r[k] for k in ("c1", "c2", "dev", "trees") if k in r}))
    return dict(metric=key, systems=systems + carried, documents=row == "ner" and args.documents, settings=args.set)


def carried_stock(row: str, path: Path) -> list:
    """The stock system of ``row`` in an earlier results file (--stock-from), marked with that run's commit and
    date: spaCy's own component does not depend on this package, and it was scored on the gold tokens then as the
    other systems are now, so a run that changes only TreeCRF's side need not train it again."""
    earlier = json.loads(path.read_text()).get(row)
    stock = [dict(s, detail={**s.get("detail", {}), "carried_from": f"{earlier['commit']} ({earlier['date']})"})
             for s in (earlier or {}).get("systems", []) if s["system"].startswith("spaCy")]
    if not stock:
        raise SystemExit(f"{path} holds no stock system for the row {row}")
    return stock


# ---- estimator rows ------------------------------------------------------------------------------------------
def hyphenation_data(data: Path):
    """(train, dev, test) of Moby single words: per letter (lower-cased), "1" when a hyphenation point follows."""
    split = {"train": [], "dev": [], "test": []}
    seen = set()
    path = data / "moby_hyphenator" / "mhyph.txt"
    for number, line in enumerate(path.read_text(encoding="mac_roman").splitlines(), 1):
        entry = line.strip()
        if not entry or " " in entry or "-" in entry:
            continue
        word = entry.replace("\u2022", "").lower()
        if word in seen:  # a word's first entry wins (case variants)
            continue
        seen.add(word)
        letters, labels = [], []
        for char in entry.lower():
            if char == "\u2022":
                if not labels:
                    raise SystemExit(f"{path}:{number}: hyphenation point before the first letter in {entry!r}")
                labels[-1] = "1"
            else:
                letters.append(char)
                labels.append("0")
        bucket = int(hashlib.md5(word.encode("utf8")).hexdigest()[:8], 16) % 100
        part = "test" if bucket < 5 else "dev" if bucket < 10 else "train" if bucket < 25 else None
        if part:
            split[part].append((letters, labels))
    return split["train"], split["dev"], split["test"]


def estimator_sequences(row: str, data: Path):
    """(train, fit, dev, test) as lists of (symbols, labels) and the featurizer both learners read them through
    (featurize(symbol sequences) -> feature dicts); dev is part of train except for hyphenation, whose train
    excludes it (CRFsuite's refit uses train + dev there)."""
    import paper_tasks
    if row == "hyphenation":
        train, dev, test = hyphenation_data(data)
        half, classes, fit = 4, {}, train
        train = train + dev
    else:
        spec = paper_tasks.TASKS[row]
        half = spec["half"]
        if row.startswith("nettalk"):
            train, test = paper_tasks.load_nettalk(data, spec["label"])
            groups, classes = list(range(len(train))), {}
        else:
            train, test, proteins = paper_tasks.load_protein(data)
            groups = paper_tasks.homology_groups(train, proteins, 2 * half + 1)
            classes = paper_tasks.read_classes(paper_tasks.RESIDUE_CLASSES)
        held = set(paper_tasks.dev_folds(train, groups, 0.2, 0)[0])
        fit = [s for i, s in enumerate(train) if i not in held]
        dev = [s for i, s in enumerate(train) if i in held]
    return train, fit, dev, test, functools.partial(featurize, half=half, classes=classes)


def featurize(sequences, half: int, classes: dict) -> list:
    """Per sequence, one feature dict per position: the symbols of the window of ``half`` either side and their
    classes (paper_tasks.window_features, add_class_features)."""
    import paper_tasks
    return [paper_tasks.add_class_features(paper_tasks.window_features(x, half), x, half, classes)
            for x in sequences]


def token_features(sequences, classes: dict) -> list:
    """Per sequence, each position's own features only, for TreeCRF(window=half), which reads the same window as
    featurize's dicts (the symbols and classes of the positions either side, padding past the ends) from these in
    compiled code: the symbol sequences themselves where there are no classes (a string position is its one
    feature), else a dict per position of its symbol and the symbol's classes."""
    if not classes:
        return list(sequences)
    return [[{"w": symbol, **{name: True for name, members in classes.items() if symbol in members}}
             for symbol in x] for x in sequences]


def as_xy(seqs, featurizer):
    """(X, y): the feature dicts and labels of (symbols, labels) sequences."""
    return featurizer([x for x, _ in seqs]), [list(y) for _, y in seqs]


def estimator_data(row: str, data: Path):
    """estimator_sequences' parts as (X, y) pairs (as_xy)."""
    *parts, featurizer = estimator_sequences(row, data)
    return tuple(as_xy(seqs, featurizer) for seqs in parts)


def fit_treecrf(train, test, settings=None, tagging=None, model_path=None):
    """In a fresh process: TreeCRF(**settings) (the defaults without settings) fitted on train, scored on test;
    (fit seconds, accuracy, positions/s, peak RSS MB, rounds kept, trees). ``tagging``: (featurize, symbol
    sequences) to time the tagging from (paper_tasks.tagging_speed), None: test's dicts, False: not timed
    (positions/s None; estimator_row times both learners in one process, paired_tagging); ``model_path``: the
    model is written there (TreeCRF.to_bytes)."""
    import paper_tasks
    from measure import peak_rss_mb
    from spacy_treecrf import TreeCRF
    model = TreeCRF(**(settings or {}))
    t0 = time.perf_counter()
    model.fit(*train)
    seconds = time.perf_counter() - t0
    accuracy = paper_tasks.accuracy(model.predict(test[0]), test[1])
    speed = None if tagging is False else paper_tasks.tagging_speed(model.predict, test[0], tagging)
    rss = peak_rss_mb()  # (before the model's bytes are made: the check is of fitting and tagging)
    if model_path is not None:
        Path(model_path).write_bytes(model.to_bytes())
    return seconds, accuracy, speed, rss, model.best_round_, model.ensemble.n_trees


def paired_tagging(tree_path, crf, tree_input, crf_input, symbols, passes: int = 9) -> dict:
    """In a fresh process: positions/s of each learner's featurization + tagging from the symbol sequences,
    TreeCRF's (the model at ``tree_path``: tree_input, then predict) and CRFsuite's (``crf``: crf_input, then
    predict), timed in alternating turns (measure.median_turns). The speed check reads their ratio: two processes
    timed minutes apart put this machine's state into it (CRFsuite's NETtalk tagging measured 52,871 to 93,810
    positions/s in four such runs, TreeCRF's within 10%)."""
    from measure import median_turns
    from spacy_treecrf import TreeCRF
    model = TreeCRF().from_bytes(Path(tree_path).read_bytes())
    seconds = median_turns({"TreeCRF": lambda: model.predict(tree_input(symbols)),
                            "CRFsuite": lambda: crf.predict(crf_input(symbols))}, passes)
    return {name: sum(map(len, symbols)) / value for name, value in seconds.items()}


def estimator_row(row: str, data: Path, args) -> dict:
    import paper_tasks
    *parts, featurizer = estimator_sequences(row, data)
    train, fit, dev, test = (as_xy(seqs, featurizer) for seqs in parts)
    symbols = [x for x, _ in parts[3]]  # both learners are timed from the symbols: featurize + predict
    own = functools.partial(token_features, classes=featurizer.keywords["classes"])
    settings = dict(window=featurizer.keywords["half"])  # TreeCRF windows each position's own features itself
    positions = {name: sum(map(len, part[1])) for name, part in (("train", train), ("test", test))}
    print(f"  {row}: {len(train[0])} training sequences ({positions['train']} positions), {len(test[0])} test "
          f"({positions['test']})", flush=True)
    model_path = args.work / "models" / f"{row}.treecrf"
    model_path.parent.mkdir(parents=True, exist_ok=True)
    dev_scores = {decode: paper_tasks.in_fresh_process(fit_treecrf, as_xy(parts[1], own), as_xy(parts[2], own),
                                                       dict(settings, decode=decode), False)[1]
                  for decode in DECODINGS}
    settings["decode"] = max(DECODINGS, key=lambda decode: (dev_scores[decode], decode == "viterbi"))
    print(f"  TreeCRF on dev: " + ", ".join(f"{d} {v * 100:.2f}" for d, v in dev_scores.items())
          + f": decoding by {settings['decode']}", flush=True)
    seconds, accuracy, _, rss, rounds, trees = paper_tasks.in_fresh_process(
        fit_treecrf, as_xy(parts[0], own), as_xy(parts[3], own), settings, False, model_path)
    print(f"  TreeCRF defaults: {accuracy * 100:.2f}, {rounds} rounds, {seconds:.1f} s", flush=True)
    crf = paper_tasks.run_crfsuite([(*fit, *dev)], train, test,
                                   argparse.Namespace(crf_max_iterations=None, repeats=1), False, keep_model=True)
    print(f"  CRFsuite c1={crf['c1']:g} c2={crf['c2']:g}: {crf['test']['viterbi'] * 100:.2f}, "
          f"{crf['seconds']:.1f} s", flush=True)
    per_seed = seeded_tagging(model_path, crf.pop("model"), own, featurizer, symbols)
    speed = {name: statistics.median(seed[name] for seed in per_seed.values()) for name in ("TreeCRF", "CRFsuite")}
    print(f"  tagging in alternating turns, median of {len(per_seed)} hash seeds: TreeCRF {speed['TreeCRF']:,.0f}, "
          f"CRFsuite {speed['CRFsuite']:,.0f} positions/s", flush=True)
    return dict(metric="accuracy", positions=positions, systems=[
        dict(system="TreeCRF", score=accuracy, train_seconds=seconds, tokens_per_second=speed["TreeCRF"],
             peak_rss_mb=rss, rounds=rounds, detail=dict(trees=trees, settings=settings, dev=dev_scores,
                                                         tagging_per_seed=seed_speeds(per_seed, "TreeCRF"))),
        dict(system="CRFsuite", score=crf["test"]["viterbi"], train_seconds=crf["seconds"],
             tokens_per_second=speed["CRFsuite"], peak_rss_mb=crf["peak_rss_mb"],
             rounds=crf["iterations"], detail=dict(c1=crf["c1"], c2=crf["c2"], dev=crf["dev"],
                                                   test_marginal=crf["test"]["marginal"],
                                                   tagging_per_seed=seed_speeds(per_seed, "CRFsuite")))])


def seeded_tagging(tree_path, crf, tree_input, crf_input, symbols) -> dict:
    """paired_tagging in a fresh process per TAGGING_SEEDS hash seed: {seed: {learner: positions/s}}."""
    import paper_tasks
    before = os.environ.get("PYTHONHASHSEED")
    per_seed = {}
    try:
        for seed in TAGGING_SEEDS:
            os.environ["PYTHONHASHSEED"] = str(seed)  # read by the spawned interpreter at its start
            per_seed[seed] = paper_tasks.in_fresh_process(paired_tagging, tree_path, crf, tree_input, crf_input,
                                                          symbols)
    finally:
        if before is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = before
    return per_seed


def seed_speeds(per_seed: dict, name: str) -> dict:
    """A learner's positions/s per hash seed, as the row's JSON keeps them."""
    return {str(seed): round(speeds[name]) for seed, speeds in per_seed.items()}


# ---- table ---------------------------------------------------------------------------------------------------
def crfsuite_score(crf: dict) -> float:
    """CRFsuite's test score with the decoding it scored better with on dev: the estimator rows score both Viterbi
    (TreeCRF's default decoding) and marginal decoding (protein: 51.3 against 62.6 on dev); the spaCy rows decode
    by Viterbi, as TreeCRF does."""
    detail = crf.get("detail", {})
    dev = detail.get("dev")
    if isinstance(dev, dict) and "test_marginal" in detail and dev.get("marginal", 0.0) > dev.get("viterbi", 0.0):
        return detail["test_marginal"]
    return crf["score"]


def checks(res: dict) -> dict:
    by = {s["system"]: s for s in res["systems"]}
    tree, crf = by.get("TreeCRF"), by.get("CRFsuite")
    if not tree or not crf:
        return {}
    bound = crf["train_seconds"] if crf["train_seconds"] > 10 else 10.0
    return dict(score=tree["score"] >= crfsuite_score(crf),
                speed=tree["tokens_per_second"] >= 2 * crf["tokens_per_second"],
                train=tree["train_seconds"] is not None and tree["train_seconds"] <= bound,
                memory=tree["peak_rss_mb"] <= MAX_RSS_MB)


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def stock_cell(row: str, stock: dict) -> str:
    """The stock column's cell: its score, "n/a" where no stock component applies (chunking, the estimator rows),
    "not run" where one applies but the row ran without --stock."""
    if stock:
        return fmt(stock["score"] * 100, ".2f")
    return "not run" if SPACY_ROWS.get(row, (None, None, None))[2] else "n/a"


def table(results: dict) -> str:
    """The rows in ROWS order; the spaCy stock column only where some row has it."""
    stock_column = any(s["system"].startswith("spaCy") for r in results.values() for s in r["systems"])
    lines = ["| task | metric | TreeCRF | CRFsuite |" + (" spaCy stock |" if stock_column else "")
             + " TreeCRF train s | CRFsuite train s | TreeCRF tokens/s | CRFsuite tokens/s | speed ratio | "
             "TreeCRF peak RSS MB | checks failed |",
             "|---|---|---:|---:|" + ("---:|" if stock_column else "") + "---:|---:|---:|---:|---:|---:|---|"]
    for row in ROWS:
        res = results.get(row)
        if res is None:
            continue
        by = {s["system"].split()[0]: s for s in res["systems"]}
        tree, crf, stock = by.get("TreeCRF", {}), by.get("CRFsuite", {}), by.get("spaCy", {})
        failed = [name for name, ok in checks(res).items() if not ok]
        ratio = (tree["tokens_per_second"] / crf["tokens_per_second"]) if tree and crf else None
        lines.append(
            f"| {row} | {res['metric']} | {fmt(tree.get('score', 0) * 100, '.2f')} | "
            f"{fmt(crfsuite_score(crf) * 100 if crf else 0, '.2f')} |"
            + (f" {stock_cell(row, stock)} |" if stock_column else "") +
            f" {fmt(tree.get('train_seconds'), '.1f')} | {fmt(crf.get('train_seconds'), '.1f')} | "
            f"{fmt(tree.get('tokens_per_second'), ',.0f')} | {fmt(crf.get('tokens_per_second'), ',.0f')} | "
            f"{fmt(ratio, '.2f')} | {fmt(tree.get('peak_rss_mb'), ',.0f')} | {', '.join(failed) or 'none'} |")
    return "\n".join(lines)


def describe_machine(results: dict) -> str:
    machines = {(r["machine"]["cpu"], r["machine"]["cpus"]) for r in results.values() if "machine" in r}
    return "; ".join(f"{cpu}, {cpus} CPUs" for cpu, cpus in sorted(machines)) or platform.machine()


def write_tables(work: Path, out: Path, readme: Path = None):
    """OUT.md / OUT.json from every row in WORK/rows; with readme, the table also goes into that file between
    README_START and README_END (no commit hashes there: they stay in OUT.md)."""
    results = {}
    for path in sorted((work / "rows").glob("*.json")):
        results[path.stem] = json.loads(path.read_text())
        results[path.stem]["checks"] = checks(results[path.stem])
    commits = sorted({r["commit"] for r in results.values()})
    rows = ", ".join(r for r in ROWS if r in results)
    text = ["# TreeCRF defaults next to CRFsuite", "",
            f"`python benchmarks/defaults.py` (rows: {rows}); code at {', '.join(commits)}; "
            f"{describe_machine(results)}. {LEGEND}", "", table(results), ""]
    for row, res in results.items():
        shape = ("a Doc per document; " if res.get("documents") else "") + "".join(
            f"set {item}; " for item in res.get("settings") or [])
        text.append(f"- {row}: run {res['date']} at {res['commit']}, {res['seconds']:.0f} s; {shape}" + "; ".join(
            f"{s['system']} rounds/iterations {s.get('rounds')}, {json.dumps(s['detail'])}" for s in res["systems"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join(text) + "\n")
    out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print("\n".join(text))
    if readme is not None:
        dates = sorted({r["date"] for r in results.values()})
        section = "\n".join([README_START, "", f"Measured {' to '.join(dict.fromkeys([dates[0], dates[-1]]))} "
                              f"({describe_machine(results)}) by `python benchmarks/defaults.py`; every figure and "
                              f"the settings CRFsuite chose: [benchmarks/results/defaults.md]"
                              f"(benchmarks/results/defaults.md). {LEGEND}", "", table(results), "", README_END])
        current = readme.read_text(encoding="utf8")
        if README_START not in current or README_END not in current:
            raise SystemExit(f"{readme} has no {README_START} ... {README_END} section to fill")
        head, rest = current.split(README_START, 1)
        readme.write_text(head + section + rest.split(README_END, 1)[1], encoding="utf8")
        print(f"table written into {readme}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--work", type=Path, default=Path("defaults_bench"), help="corpora, models and row results")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "defaults")
    parser.add_argument("--stock", action="store_true", help="also train spaCy's stock component (slow)")
    parser.add_argument("--stock-from", type=Path, default=None,
                        help="without --stock: each row's stock figures from this earlier results JSON")
    parser.add_argument("--crf-jobs", type=int, default=1, help="CRFsuite grid points fitted at once")
    parser.add_argument("--crf-grid", nargs="+", default=["0.05,0.1", "0.2,0.1"], help="c1,c2 pairs (spaCy rows)")
    parser.add_argument("--crf-max-iterations", type=int, default=500,
                        help="L-BFGS iterations of CRFsuite's fits on the spaCy rows (0: until CRFsuite converges)")
    parser.add_argument("--table-only", action="store_true", help="rewrite OUT from the rows present")
    parser.add_argument("--dev-only", action="store_true", help="TreeCRF's best dev score per spaCy row (see above)")
    parser.add_argument("--set", nargs="*", default=[], help="TreeCRF's settings NAME=VALUE (default: none)")
    parser.add_argument("--max-steps", type=int, default=0, help="with --dev-only: spaCy's max_steps (0: its own)")
    parser.add_argument("--readme", type=Path, default=None, help="also put the table into this README")
    parser.add_argument("--documents", action="store_true",
                        help="ner trains and tags a Doc per CoNLL-2003 document, not per sentence")
    args = parser.parse_args()
    data = Path(os.environ.get("TREECRF_DATA_DIR") or REPO.parent / "shared" / "data")
    if not data.is_dir():
        raise SystemExit(f"data directory {data} not found: set TREECRF_DATA_DIR")
    sys.path.insert(0, str(SCRIPTS))
    if not args.table_only:  # as an installed package is (its build compiles the kernels): else the first row's
        # processes compile them, in the measured time and memory (xpos: a 2,214 MB training peak, 1,505 MB warm)
        run([sys.executable, "-m", "spacy_treecrf.precompile"], stdout=subprocess.DEVNULL)
    if args.dev_only:
        for row in args.rows:
            if row in SPACY_ROWS:
                dev_run(row, data, args.work, args.set, args.max_steps, args.documents)
        return
    (args.work / "rows").mkdir(parents=True, exist_ok=True)
    for row in [] if args.table_only else args.rows:
        print(f"== {row}", flush=True)
        t0 = time.perf_counter()
        res = spacy_row(row, data, args.work, args) if row in SPACY_ROWS else estimator_row(row, data, args)
        from side_by_side import machine
        res.update(row=row, commit=commit(), date=time.strftime("%Y-%m-%d"), seconds=time.perf_counter() - t0,
                   checks=checks(res), machine=machine())
        (args.work / "rows" / f"{row}.json").write_text(json.dumps(res, indent=1))
    write_tables(args.work, args.out, args.readme)


if __name__ == "__main__":
    main()

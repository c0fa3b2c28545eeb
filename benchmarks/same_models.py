"""Same models before and after a change of the engine: train a fixed set of models, record every tree array and
the test-set predictions and marginals, and check a later commit against the record.

    python benchmarks/same_models.py record /tmp/before.npz      # at the commit before the change
    python benchmarks/same_models.py check /tmp/before.npz       # after it: exit 1 on any difference

The models cover the estimator (every loss; every missing-value strategy with values missing; leaf_values and
label_splits variants; subsample, colsample and trim; transition constraints; partial labels; dev data with early
stopping) and the spaCy component (UPOS, full-batch and stochastic rounds; with TREECRF_DATA_DIR also CoNLL-2003
NER with BIO constraints and span scores). Data: the bundled UD English EWT sample (CC BY-SA 4.0), so it runs
anywhere. Trees must be identical to the last bit; predictions identical; marginals and span scores are compared
exactly too, and the largest difference is printed where they differ.
"""
import argparse
import os
import sys
from pathlib import Path

import numpy as np
import spacy
from spacy.training import Example

import spacy_treecrf.pipe  # noqa: F401  (registers the factory)
from spacy_treecrf import TreeCRF

ROOT = Path(__file__).resolve().parent.parent
EWT = ROOT / "examples" / "data"
TREE_FIELDS = ("kind", "feature", "yes", "no", "value", "count", "states", "roots", "labels", "surr_feature",
               "surr_same")


def read_conllu(path: Path, limit: int):
    """(words, UPOS tags) per sentence."""
    sents, words, tags = [], [], []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip():
            if words:
                sents.append((words, tags))
                words, tags = [], []
                if len(sents) == limit:
                    break
            continue
        cols = line.split("\t")
        if line.startswith("#") or "-" in cols[0] or "." in cols[0]:
            continue
        words.append(cols[1])
        tags.append(cols[3])
    return sents


def position_features(words, t):
    w = words[t]
    return {"w": w, "lw": w.lower(), "suf3": w[-3:], "pre2": w[:2], "title": w.istitle(), "digit": w.isdigit(),
            "w-1": words[t - 1].lower() if t else "<s>", "w+1": words[t + 1].lower() if t + 1 < len(words) else "</s>"}


def sequences(sents):
    return [[position_features(w, t) for t in range(len(w))] for w, _ in sents], [list(y) for _, y in sents]


def with_missing(X, rate: float, seed: int):
    """A copy of X where each of 'w', 'suf3' and 'w-1' is None (missing) at a share ``rate`` of the positions."""
    rng = np.random.default_rng(seed)
    out = []
    for seq in X:
        new = []
        for pos in seq:
            pos = dict(pos)
            for key in ("w", "suf3", "w-1"):
                if rng.random() < rate:
                    pos[key] = None
            new.append(pos)
        out.append(new)
    return out


def estimator_models(train, test, dev):
    """name -> (fitted TreeCRF, test X)."""
    X, y = sequences(train)
    Xt, _ = sequences(test)
    Xd, yd = sequences(dev)
    base = dict(n_rounds=4, max_leaves=16, shrinkage=5.0, n_threads=1)
    if "early_stopping" in TreeCRF().get_params():  # every round on all the data, at commits before it too
        base["early_stopping"] = False
    Xm, Xtm = with_missing(X, 0.15, 1), with_missing(Xt, 0.15, 2)
    seen = sorted({(a, b) for ys in y for a, b in zip([None] + ys[:-1], ys)}, key=str)
    y_partial = [[None if (q + t) % 7 == 0 else label for t, label in enumerate(ys)] for q, ys in enumerate(y)]
    specs = {
        "crf": ({}, X, y, Xt),
        "crf_two_threads": ({"n_threads": 2}, X, y, Xt),
        "pseudo_likelihood": ({"loss": "pseudo_likelihood"}, X, y, Xt),
        "hamming": ({"loss": "hamming"}, X, y, Xt),
        "rank": ({"loss": "rank"}, X, y, Xt),
        "newton": ({"leaf_values": "newton"}, X, y, Xt),
        "position_mean": ({"leaf_values": "position_mean"}, X, y, Xt),
        "fallback": ({"label_splits": "fallback"}, X, y, Xt),
        "sampled": ({"subsample": 0.7, "colsample": 0.5, "trim": 0.05, "random_state": 3}, X, y, Xt),
        "constrained": ({"allowed_transitions": seen, "decode": "marginal"}, X, y, Xt),
        "partial": ({}, X, y_partial, Xt),
        "instance_weighting": ({"missing": "instance_weighting"}, Xm, y, Xtm),
        "surrogate": ({"missing": "surrogate"}, Xm, y, Xtm),
        "imputation": ({"missing": "imputation"}, Xm, y, Xtm),
        "indicator": ({"missing": "indicator"}, Xm, y, Xtm),
        "iw_sampled": ({"missing": "instance_weighting", "subsample": 0.7, "colsample": 0.5}, Xm, y, Xtm),
        "surrogate_fallback": ({"missing": "surrogate", "label_splits": "fallback"}, Xm, y, Xtm),
    }
    for name, (settings, Xs, ys, Xtest) in specs.items():
        model = TreeCRF(**{**base, **settings}).fit(Xs, ys)
        yield name, model, Xtest
    model = TreeCRF(**{**base, "n_rounds": 6, "patience": 2}).fit(X, y, Xd, yd)
    yield "dev_patience", model, Xt


def estimator_record(model, Xtest) -> dict:
    out = {f"tree.{k}": v for k, v in tree_arrays(model.ensemble).items()}
    ids = {label: k for k, label in enumerate(model.classes_)}
    out["predict"] = np.array([ids[label] for seq in model.predict(Xtest) for label in seq], dtype=np.int32)
    out["marginals"] = np.array([[p[c] for c in model.classes_] for seq in model.predict_marginals(Xtest)
                                 for p in seq])
    return out


def tree_arrays(ensemble) -> dict:
    arrays = ensemble.arrays()
    return {k: np.asarray(arrays[k]) for k in TREE_FIELDS if k in arrays}


def component_settings(nlp_factory_config: dict, settings: dict) -> dict:
    """The component's config for tree settings ``settings``: in a [booster] block where the factory has one."""
    if "booster" in nlp_factory_config:
        from spacy_treecrf.engine.booster import BoostParams

        engine = {k: v for k, v in settings.items() if k in BoostParams.__dataclass_fields__}
        rest = {k: v for k, v in settings.items() if k not in engine}
        return {**rest, "booster": engine}
    return settings


def component_models(train, test):
    """name -> (nlp, test docs): UPOS with full-batch rounds and with a round per half batch."""
    factory = spacy.Language.get_factory_meta("treecrf").default_config
    for name, halves in (("pos_full_batch", False), ("pos_half_batches", True)):
        nlp = spacy.blank("en")
        nlp.add_pipe("treecrf", config=component_settings(
            factory, {"target": "pos", "max_leaves": 16, "shrinkage": 5.0, "n_threads": 1,
                      **({"round_every": "batch"} if "round_every" in factory else {})}))
        examples = [Example.from_dict(spacy.tokens.Doc(nlp.vocab, words=w), {"pos": t}) for w, t in train]
        nlp.initialize(lambda: examples)
        for _ in range(3):
            batches = [examples[: len(examples) // 2], examples[len(examples) // 2:]] if halves else [examples]
            for batch in batches:
                nlp.update(batch)
        yield name, nlp, [spacy.tokens.Doc(nlp.vocab, words=w) for w, _ in test]
    data_dir = os.environ.get("TREECRF_DATA_DIR")
    if data_dir:
        from spacy_treecrf.readers import ColumnCorpus
        nlp = spacy.blank("en")
        nlp.add_pipe("treecrf", config=component_settings(
            factory, {"target": "ner", "max_leaves": 16, "n_threads": 1, "label_splits": "fallback"}))
        path = Path(data_dir) / "conll2003"
        train_eg = list(ColumnCorpus(path / "train.txt", format="conll2003", limit=600)(nlp))
        test_eg = list(ColumnCorpus(path / "test.txt", format="conll2003", limit=300)(nlp))
        nlp.initialize(lambda: train_eg)
        for _ in range(3):
            nlp.update(train_eg)
        yield "ner_conll2003", nlp, [eg.predicted for eg in test_eg]


def component_record(nlp, docs) -> dict:
    pipe = nlp.get_pipe("treecrf")
    out = {f"tree.{k}": v for k, v in tree_arrays(pipe.ensemble).items()}
    pipe.cfg["store_scores"] = True  # (whatever a version's default: the record holds the confidences)
    docs = list(nlp.pipe([d.copy() for d in docs]))
    labels = pipe.labels
    out["marginals"] = np.array([[tok._.treecrf_marginals["treecrf"][label] for label in labels]
                                 for doc in docs for tok in doc], dtype=np.float32).reshape(-1, len(labels))
    if pipe.target == "ner":
        out["ents"] = np.array([(q, e.start, e.end, labels.index("B-" + e.label_)) for q, doc in enumerate(docs)
                                for e in doc.ents], dtype=np.int64).reshape(-1, 4)
        out["span_scores"] = np.array([p for doc in docs for p in doc.spans["treecrf"].attrs["scores"]])
    else:
        out["predict"] = np.array([labels.index(t.pos_) for doc in docs for t in doc], dtype=np.int32)
    return out


def all_records() -> dict:
    train = read_conllu(EWT / "ewt-sample-train.conllu", 300)
    dev = read_conllu(EWT / "ewt-sample-dev.conllu", 200)
    test, dev = dev[:100], dev[100:]
    records = {}
    for name, model, Xtest in estimator_models(train, test, dev):
        records[name] = estimator_record(model, Xtest)
        print(f"  {name}: {model.ensemble.n_trees} trees", flush=True)
    for name, nlp, docs in component_models(train, test):
        records[name] = component_record(nlp, docs)
        print(f"  {name}: {nlp.get_pipe('treecrf').ensemble.n_trees} trees", flush=True)
    return records


def compare(before: dict, after: dict) -> list:
    """The differences, one line each (empty: the same models)."""
    problems = []
    for name in sorted(set(before) | set(after)):
        if name not in after or name not in before:
            problems.append(f"{name}: only {'before' if name in before else 'after'}")
            continue
        for key in sorted(set(before[name]) | set(after[name])):
            a, b = before[name].get(key), after[name].get(key)
            if a is None or b is None:
                problems.append(f"{name}/{key}: only {'before' if b is None else 'after'}")
            elif a.shape != b.shape:
                problems.append(f"{name}/{key}: shape {a.shape} -> {b.shape}")
            elif not np.array_equal(a, b):
                diff = np.abs(a.astype(np.float64) - b.astype(np.float64)).max() if a.size else 0.0
                problems.append(f"{name}/{key}: {int((a != b).sum())} of {a.size} entries differ (max {diff:.3g})")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("record", "check"))
    parser.add_argument("path", type=Path)
    args = parser.parse_args()
    records = all_records()
    if args.mode == "record":
        np.savez_compressed(args.path, **{f"{name}/{key}": v for name, rec in records.items()
                                          for key, v in rec.items()})
        print(f"recorded {len(records)} models in {args.path}")
        return
    before: dict = {}
    with np.load(args.path) as saved:
        for flat in saved.files:
            name, key = flat.split("/", 1)
            before.setdefault(name, {})[key] = saved[flat]
    problems = compare(before, records)
    for line in problems:
        print("DIFFERENT", line)
    print(f"{len(records)} models: {'identical' if not problems else f'{len(problems)} differences'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()

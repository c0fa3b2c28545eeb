"""TreeCRF against sklearn-crfsuite on the same data and the same features, in one run: training time to reach
CRFsuite's test score, tagging throughput (the component in `nlp.pipe` and the engine alone), peak RSS.

    python benchmarks/speed.py --task chunking [--rounds 150] [--crf-iterations 100] [--threads 0]
    python benchmarks/speed.py --task ner --pipeline training/model-best     # tagging of a trained model

The task's config (configs/chunking.cfg, configs/ner.cfg) defines the features and tree settings; the
component is built from it, initialized on the training set, and boosted round by round through the engine
while its test-set potentials are kept up to date tree by tree (so each round's test F1 costs no tagging).
CRFsuite (L-BFGS, c1/c2 as given) is trained on exactly the component's feature columns, as attribute names.
Training times exclude featurization, which both share. Tagging throughput is measured on one thread over
already-tokenized test Docs: the median of --repeats passes after one warm-up pass.
Data: CoNLL-2000 (train/test) or CoNLL-2003 (train/test) under TREECRF_DATA_DIR or --data-dir.
"""
import argparse
import dataclasses
import gc
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import spacy
from spacy.util import load_config

from measure import peak_rss_mb
from spacy_treecrf.engine import booster
from spacy_treecrf.engine.booster import BoostParams
from spacy_treecrf.pipe import bio_spans
from spacy_treecrf.readers import ColumnCorpus

ROOT = Path(__file__).resolve().parent.parent
TASKS = {"chunking": ("conll2000", "conll2000", "chunking.cfg"),
         "ner": ("conll2003", "conll2003", "ner.cfg")}


def span_f1(pred, gold) -> float:
    """Micro F1 of exact (start, end, label) spans over sentences of BIO tags."""
    tp = n_pred = n_gold = 0
    for p, g in zip(pred, gold):
        ps, gs = set(bio_spans(p)), set(bio_spans(g))
        tp += len(ps & gs)
        n_pred += len(ps)
        n_gold += len(gs)
    return 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0


def split(flat, seq_starts):
    return [list(flat[a:b]) for a, b in zip(seq_starts[:-1], seq_starts[1:])]


def parse_setting(item: str):
    """"name=value" -> ("components.treecrf.name", value), or "components.treecrf.booster.name" for a boosting
    setting, the value read as JSON where it is JSON (numbers, true / false) and as a string otherwise."""
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise SystemExit(f"--set wants NAME=VALUE, got {item!r}")
    key = f"components.treecrf.{'booster.' if name in BoostParams.__dataclass_fields__ else ''}{name}"
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def load_pipeline(task: str, data_dir: Path, limit: int, pipeline=None, settings=()):
    """The task's pipeline (a trained one from ``pipeline``, else a new one from its config, with ``settings``
    as "name=value" overrides of [components.treecrf]) and its corpus."""
    folder, fmt, cfg_name = TASKS[task]
    config = load_config(ROOT / "configs" / cfg_name, overrides=dict(map(parse_setting, settings)))
    nlp = spacy.load(pipeline) if pipeline else spacy.util.load_model_from_config(config, auto_fill=True,
                                                                                     validate=True)
    keep = dict(config["corpora"]["train"].get("keep_columns", {}))
    corpus = {name: list(ColumnCorpus(data_dir / folder / f"{name}.txt", format=fmt, keep_columns=keep, limit=limit,
                                      spans_key=nlp.get_pipe("treecrf").cfg["spans_key"])(nlp))
              for name in ("train", "test")}
    return nlp, corpus


def gold_tags(pipe, examples):
    return [pipe._gold(eg) for eg in examples]


def train_treecrf(pipe, train, test_docs, test_gold, rounds: int, threads: int):
    """Rounds through the engine; returns per-round (cumulative training seconds, test F1) and peak RSS."""
    labels = list(pipe.labels)
    index = {label: k for k, label in enumerate(labels)}
    indptr, indices, seq_starts = pipe.featurizer([eg.predicted for eg in train], **pipe._own_labels(train))
    y = np.array([-1 if t is None else index[t] for tags in gold_tags(pipe, train) for t in tags], dtype=np.int32)
    params = dataclasses.replace(pipe.params, n_threads=threads)
    t0 = time.perf_counter()
    trainer = booster.Trainer(indptr, indices, pipe.featurizer.n_features, y, seq_starts, pipe.allowed, params)
    setup = time.perf_counter() - t0
    t_indptr, t_indices, t_starts = pipe.featurizer(test_docs)
    test = booster.DevCache(t_indptr, t_indices, t_starts, pipe.allowed)
    curve, spent = [], setup
    for r in range(1, rounds + 1):
        t0 = time.perf_counter()
        trainer.fit_round(pipe.ensemble, on_tree=test.add_tree)  # test updates are inside the timing: an
        spent += time.perf_counter() - t0                        # upper bound on pure training time
        ids = test.predict("viterbi", threads)
        f1 = span_f1(split([labels[k] for k in ids], t_starts), test_gold)
        curve.append((r, spent, f1))
        print(f"  treecrf round {r:3d}: {spent:8.1f} s  test F1 {f1 * 100:.2f}", flush=True)
    pipe.cfg["rounds"] = rounds
    return curve, peak_rss_mb()


def crfsuite_rows(pipe, docs, own=None):
    """Feature names per token; ``own``: the training docs' own labels (left out of a label dictionary)."""
    names = pipe.featurizer.feature_names()
    indptr, indices, seq_starts = pipe.featurizer(docs, **(own or {}))
    return [[[names[f] for f in indices[indptr[t]:indptr[t + 1]]] for t in range(a, b)]
            for a, b in zip(seq_starts[:-1], seq_starts[1:])]


def train_crfsuite(pipe, train, test_docs, test_gold, c1: float, c2: float, iterations: int):
    import sklearn_crfsuite
    X = crfsuite_rows(pipe, [eg.predicted for eg in train], pipe._own_labels(train))
    y = [["O" if t is None else t for t in tags] for tags in gold_tags(pipe, train)]
    model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=iterations)
    t0 = time.perf_counter()
    model.fit(X, y)
    seconds = time.perf_counter() - t0
    f1 = span_f1(model.predict(crfsuite_rows(pipe, test_docs)), test_gold)
    print(f"  crfsuite: {seconds:.1f} s, test F1 {f1 * 100:.2f}", flush=True)
    return model, seconds, f1


def throughput(call, docs, repeats: int, prepare=list) -> float:
    """Tokens/s of call(prepare(docs)): the median of ``repeats`` timed calls after a warm-up, each on inputs
    prepared outside the timing and started after a full garbage collection: this process holds both corpora
    and the copies, and a collection of them landing in a pass (0.3 s on CoNLL-2003) would time this script's
    heap rather than tagging. Collections the call's own allocations trigger stay in the timing."""
    n = sum(len(d) for d in docs)
    call(prepare(docs))
    times = []
    for _ in range(repeats):
        inputs = prepare(docs)
        gc.collect()
        t0 = time.perf_counter()
        call(inputs)
        times.append(time.perf_counter() - t0)
    return n / statistics.median(times)


def main(args):
    nlp, corpus = load_pipeline(args.task, args.data_dir, args.limit, args.pipeline, args.set)
    pipe = nlp.get_pipe("treecrf")
    if not args.pipeline:
        pipe.initialize(lambda: corpus["train"], nlp=nlp)
    test_docs = [eg.predicted for eg in corpus["test"]]
    test_gold = gold_tags(pipe, corpus["test"])
    n_test = sum(len(d) for d in test_docs)
    print(f"{args.task}: {sum(len(eg) for eg in corpus['train'])} training tokens, {n_test} test tokens, "
          f"{len(pipe.labels)} labels, {pipe.featurizer.n_features} feature columns", flush=True)
    if args.pipeline:  # tagging only: the test F1 of the given model, no training curve
        indptr, indices, seq_starts = pipe.featurizer(test_docs)
        threads = args.threads or os.cpu_count()
        P = pipe.ensemble.scaled_potentials(indptr, indices, pipe.allowed, seq_starts, threads)
        ids, _ = booster.decode(P, seq_starts, "viterbi", threads)
        curve = [(pipe.cfg["rounds"], float("nan"), span_f1(split([pipe.labels[k] for k in ids], seq_starts),
                                                            test_gold))]
        tree_rss = float("nan")
    else:
        curve, tree_rss = train_treecrf(pipe, corpus["train"], test_docs, test_gold, args.rounds, args.threads)
    model, crf_seconds, crf_f1 = train_crfsuite(pipe, corpus["train"], test_docs, test_gold, args.c1, args.c2,
                                                args.crf_iterations)
    reached = None if args.pipeline else next(((r, s) for r, s, f1 in curve if f1 >= crf_f1), None)

    pipe.params = dataclasses.replace(pipe.params, n_threads=1)
    component = {}
    for store in (True, False):  # each pass annotates new copies of the Docs, made outside the timing
        pipe.cfg["store_scores"] = store
        component[store] = throughput(lambda docs: list(pipe.pipe(docs, batch_size=1000)), test_docs, args.repeats,
                                      prepare=lambda docs: [d.copy() for d in docs])

    stage_seconds = {"featurize": [], "potentials": [], "decode": []}

    def engine(docs):
        t0 = time.perf_counter()
        indptr, indices, seq_starts = pipe.featurizer(docs)
        t1 = time.perf_counter()
        P = pipe.ensemble.scaled_potentials(indptr, indices, pipe.allowed, seq_starts, 1)
        t2 = time.perf_counter()
        out = booster.decode(P, seq_starts, "viterbi", 1)
        for stage, seconds in zip(stage_seconds, (t1 - t0, t2 - t1, time.perf_counter() - t2)):
            stage_seconds[stage].append(seconds)
        return out

    def crfsuite(docs):
        return model.predict(crfsuite_rows(pipe, docs))

    engine_tps = throughput(engine, test_docs, args.repeats)
    crf_tps = throughput(crfsuite, test_docs, args.repeats)
    best = max(curve, key=lambda c: c[2])
    result = {
        "task": args.task, "rounds": args.rounds, "threads": args.threads, "trees": pipe.ensemble.n_trees,
        "settings": args.set,
        "treecrf_best_test_f1": best[2], "treecrf_best_round": best[0], "treecrf_seconds_total": curve[-1][1],
        "treecrf_peak_rss_mb": tree_rss,
        "crfsuite": {"c1": args.c1, "c2": args.c2, "iterations": args.crf_iterations, "seconds": crf_seconds,
                     "test_f1": crf_f1},
        "seconds_to_crfsuite_f1": reached[1] if reached else None,
        "round_reaching_crfsuite_f1": reached[0] if reached else None,
        "tokens_per_s": {"component_store_scores": component[True], "component_no_scores": component[False],
                         "engine": engine_tps, "crfsuite_featurize_tag": crf_tps},
        "engine_stage_seconds": {stage: statistics.median(times[1:])  # after the warm-up pass
                                 for stage, times in stage_seconds.items()},
        "curve": curve,
    }
    print()
    print("| measure | TreeCRF | CRFsuite | ratio |")
    print("|---|---|---|---|")
    print(f"| best test F1 ({args.task}) | {best[2] * 100:.2f} (round {best[0]}) | {crf_f1 * 100:.2f} | |")
    if args.pipeline:
        pass
    elif reached:
        print(f"| training seconds to CRFsuite's test F1 | {reached[1]:.1f} (round {reached[0]}) | "
              f"{crf_seconds:.1f} | {reached[1] / crf_seconds:.2f} |")
    else:
        print(f"| training seconds to CRFsuite's test F1 | not reached in {args.rounds} rounds "
              f"({curve[-1][1]:.1f} s) | {crf_seconds:.1f} | |")
    if not args.pipeline:
        print(f"| peak RSS after training, MB | {tree_rss:.0f} | | |")
    for label, value in (("component, store_scores=true", component[True]),
                         ("component, store_scores=false", component[False]), ("engine alone", engine_tps)):
        print(f"| tagging tokens/s, {label} | {value:,.0f} | {crf_tps:,.0f} | {value / crf_tps:.2f} |")
    stages = result["engine_stage_seconds"]
    print("\nengine alone, median seconds per pass over the test set: " + ", ".join(
        f"{stage} {seconds:.3f} ({seconds / sum(stages.values()):.0%})" for stage, seconds in stages.items()))
    if args.output:
        args.output.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="chunking")
    parser.add_argument("--data-dir", type=Path,
                        default=Path(os.environ.get("TREECRF_DATA_DIR", ROOT.parent / "shared" / "data")))
    parser.add_argument("--rounds", type=int, default=150)
    parser.add_argument("--threads", type=int, default=0, help="training threads (0 = all cores)")
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.1)
    parser.add_argument("--crf-iterations", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pipeline", help="a trained pipeline: measure its tagging instead of training one")
    parser.add_argument("--limit", type=int, default=0, help="sentences per split (0 = all; for a quick look)")
    parser.add_argument("--output", type=Path, help="write the figures and the per-round curve as JSON")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a [components.treecrf] setting of the task's config, e.g. "
                             "--set leaf_values=newton --set learning_rate=0.3 (repeatable)")
    main(parser.parse_args())

"""The estimator as a user meets it: `TreeCRF(**candidate).fit(X, y)` with no dev data and no other argument, on
the estimator's tasks, scored on DEV data (never test) so that defaults can be chosen across tasks.

    TREECRF_DATA_DIR=../shared/data python benchmarks/estimator_defaults.py \\
        --candidate defaults= --candidate big=max_leaves=300,leaf_values=position_mean [--task ...] [--test]

Each --candidate is NAME=SETTINGS, SETTINGS a comma-separated list of TreeCRF arguments (JSON values, else
strings; empty: the defaults as they are). Tasks:
- hmm: the paper's synthetic HMM (benchmarks/synthetic_hmm.py): 100 training sequences of length 100, window 3;
  dev: 50 fresh sequences from the same HMM (Bayes-optimal posterior decoding printed beside it).
- nettalk, nettalk_phoneme_stress, protein, hyphenation: the estimator rows of benchmarks/defaults.py (its data,
  features and dev splits: paper_tasks.py's dev fold of 20% of the training words / homology groups of proteins;
  hyphenation's dev words), the candidate fitted on the rest.
Per task and candidate: dev accuracy (the estimator's own decode), rounds kept, trees, fit seconds, dev
positions/s of predict. --test instead fits each candidate on the whole training set and scores the test set
(for reporting a choice made on dev, never for making it).
"""
import argparse
import json
import time

import numpy as np

import defaults
import paper_tasks
import synthetic_hmm
from spacy_treecrf import TreeCRF

TASKS = ("hmm",) + defaults.ESTIMATOR_ROWS


def parse_candidate(item: str):
    name, sep, settings = item.partition("=")
    if not sep or not name:
        raise SystemExit(f"--candidate wants NAME=SETTINGS, got {item!r}")
    out = {}
    for pair in filter(None, settings.split(",")):
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--candidate {name}: {pair!r} is not key=value")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return name, out


def hmm_data(test: bool):
    """(train, evaluation, Bayes-optimal accuracy on evaluation) of the synthetic HMM; the evaluation set is the
    dev sample, or the test sample with test=True (synthetic_hmm.py's seed-0 draws, in its order)."""
    rng = np.random.default_rng(0)
    start, trans, emit = synthetic_hmm.hmm()
    train = synthetic_hmm.sample(rng, 100, 100, start, trans, emit)
    dev = synthetic_hmm.sample(rng, 50, 100, start, trans, emit)
    held = synthetic_hmm.sample(rng, 300, 100, start, trans, emit) if test else dev
    gold = np.concatenate([y for _, y in held])
    bayes = np.concatenate([synthetic_hmm.posterior_decode(x, start, trans, emit) for x, _ in held])
    fx = lambda data: [synthetic_hmm.window_features(x) for x, _ in data]
    fy = lambda data: [[str(v) for v in y] for _, y in data]
    return (fx(train), fy(train)), (fx(held), fy(held)), float((bayes == gold).mean())


def task_data(name: str, test: bool):
    """(train, evaluation) of one of defaults.py's estimator rows: the fit part and the dev split, or train and
    test."""
    train, fit, dev, held = defaults.estimator_data(name, paper_tasks.data_dir(None))
    return (train, held, None) if test else (fit, dev, None)


def evaluate(settings: dict, train, held) -> dict:
    t0 = time.perf_counter()
    model = TreeCRF(**settings).fit(*train)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    score = model.score(*held)
    speed = sum(map(len, held[1])) / (time.perf_counter() - t0)
    return dict(accuracy=score, rounds=model.best_round_, run=len(model.history_), trees=model.ensemble.n_trees,
                fit_seconds=seconds, positions_per_second=speed)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", action="append", default=[], help="NAME=SETTINGS (see above)")
    parser.add_argument("--task", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--test", action="store_true", help="fit on all training data and score test")
    args = parser.parse_args()
    candidates = [parse_candidate(c) for c in args.candidate] or [("defaults", {})]
    where = "test" if args.test else "dev"
    print(f"| task | candidate | {where} accuracy | rounds kept / run | trees | fit s | {where} positions/s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for task in args.task:
        train, held, bayes = hmm_data(args.test) if task == "hmm" else task_data(task, args.test)
        for name, settings in candidates:
            r = evaluate(settings, train, held)
            print(f"| {task} | {name} | {100 * r['accuracy']:.2f} | {r['rounds']} / {r['run']} | {r['trees']} | "
                  f"{r['fit_seconds']:.1f} | {r['positions_per_second']:,.0f} |", flush=True)
        if bayes is not None:
            print(f"| {task} | Bayes-optimal (true HMM, posterior decoding) | {100 * bayes:.2f} | | | | |", flush=True)


if __name__ == "__main__":
    main()

"""Which trees small noisy data wants, and whether the estimator's own hold-out can tell: the evidence behind
TreeCRF's ``small_trees`` (scored on dev draws, never on test).

For each seed of the synthetic HMM (synthetic_hmm.py: discrete observations, window 3) and of the real-valued HMM
(numeric_hmm.py: two real values a position, offsets -1..1), 100 training sequences and a 50-sequence dev draw;
each candidate is fitted as a user fits it, `TreeCRF(decode=DECODE, small_trees=False, **candidate).fit(X, y)`
(its own 10% hold-out stops it), and scored on dev next to Bayes-optimal posterior decoding. Candidates:
- default: the default trees (up to 1000 leaves here);
- paper, small: SMALL_TREES' profiles (the paper's 100 leaves of at least 5 positions, learning rate 0.3; 16 leaves
  of at least 5, learning rate 0.3, Newton leaf values, previous-label splits wherever they gain most), up to 300
  rounds.
Printed per seed: each candidate's dev accuracy and hold-out accuracy, and the one the hold-out picks as
small_trees does (the best hold-out accuracy, ties to the earlier), with its points below Bayes-optimal (and the
pick of default and small alone); then the medians.

    python benchmarks/small_trees.py [--seeds 1 2 3] [--hmm discrete numeric] [--decode marginal|viterbi]
"""
import argparse

import numpy as np

import numeric_hmm
import synthetic_hmm
from spacy_treecrf import TreeCRF
from spacy_treecrf.estimator import SMALL_TREES, SMALL_TREES_ROUNDS, best_validation

CANDIDATES = {"default": {}, **{name: {**settings, "n_rounds": SMALL_TREES_ROUNDS * 100}
                               for name, settings in SMALL_TREES.items()}}


def draws(hmm: str, seed: int):
    """(X, y) of the training and dev draws of one seed, and the Bayes-optimal dev accuracy."""
    rng = np.random.default_rng(seed)
    if hmm == "discrete":
        start, trans, emit = synthetic_hmm.hmm()
        train, dev = (synthetic_hmm.sample(rng, n, 100, start, trans, emit) for n in (100, 50))
        features = synthetic_hmm.window_features
        bayes = [synthetic_hmm.posterior_decode(x, start, trans, emit) for x, _ in dev]
    else:
        train, dev = numeric_hmm.sample(rng, 100, 100), numeric_hmm.sample(rng, 50, 100)
        features = numeric_hmm.numbers
        bayes = [numeric_hmm.posterior_decode(x) for x, _ in dev]
    gold = np.concatenate([y for _, y in dev])
    xy = lambda data: ([features(x) for x, _ in data], [[str(k) for k in y] for _, y in data])
    return xy(train), xy(dev), float((np.concatenate(bayes) == gold).mean())


def main(seeds, hmms, decode: str):
    for hmm in hmms:
        gaps = {name: [] for name in list(CANDIDATES) + ["picked", "default or small"]}
        for seed in seeds:
            (X, y), (X_dev, y_dev), bayes = draws(hmm, seed)
            scores = {}
            for name, settings in CANDIDATES.items():
                model = TreeCRF(decode=decode, small_trees=False, **settings).fit(X, y)
                scores[name] = (model.score(X_dev, y_dev), best_validation(model.history_), model.best_round_)
                gaps[name].append(bayes - scores[name][0])
            picked = max(CANDIDATES, key=lambda name: (scores[name][1], -list(CANDIDATES).index(name)))
            gaps["picked"].append(bayes - scores[picked][0])  # (as small_trees keeps: ties to the earlier)
            of_two = "small" if scores["small"][1] > scores["default"][1] else "default"
            gaps["default or small"].append(bayes - scores[of_two][0])
            print(f"{hmm} seed {seed}: Bayes-optimal {bayes * 100:.2f} | " + " | ".join(
                f"{name} dev {s[0] * 100:.2f} (hold-out {s[1] * 100:.1f}, round {s[2]})" for name, s in scores.items())
                + f" | hold-out picks {picked}: {(bayes - scores[picked][0]) * 100:.2f} below (of default and small "
                f"only: {of_two}, {(bayes - scores[of_two][0]) * 100:.2f})", flush=True)
        print(f"{hmm}, {decode}: median points below Bayes-optimal on dev: " + ", ".join(
            f"{name} {np.median(g) * 100:.2f}" for name, g in gaps.items()), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 13)))
    parser.add_argument("--hmm", nargs="+", choices=("discrete", "numeric"), default=["discrete", "numeric"])
    parser.add_argument("--decode", choices=("marginal", "viterbi"), default="marginal")
    args = parser.parse_args()
    main(args.seeds, args.hmm, args.decode)

"""Which trees small noisy data wants, and whether the estimator's own hold-out can tell: the evidence behind
TreeCRF's ``small_trees`` (scored on dev draws, never on test).

For each seed of the synthetic HMM (synthetic_hmm.py: discrete observations, window 3) and of the real-valued HMM
(numeric_hmm.py: two real values a position, offsets -1..1), 100 training sequences and a 50-sequence dev draw;
each candidate is fitted as a user fits it, `TreeCRF(decode=DECODE, small_trees=False, **candidate).fit(X, y)`
(its own 10% hold-out stops it), and scored on dev next to Bayes-optimal posterior decoding. Candidates:
- default: the default trees (up to 1000 leaves here);
- per_label, paper, small: SMALL_TREES' profiles (the paper's per-label trees of up to 100 leaves, lambda 200,
  up to 34 rounds, 100 trees; the paper's 100 leaves of at least 5 positions in shared trees, learning rate 0.3;
  16 leaves of at least 5, learning rate 0.3, Newton leaf values, previous-label splits wherever they gain most;
  the two last up to 300 rounds).
Printed per seed: each candidate's dev accuracy and hold-out accuracy, and the one the hold-out picks among the
decoding's fits as small_trees makes them (SMALL_TREE_FITS; the best hold-out accuracy, ties to the earlier), with
its points below Bayes-optimal (and the pick among each other set of candidates); then the medians.

    python benchmarks/small_trees.py [--seeds 1 2 3] [--hmm discrete numeric] [--decode marginal|viterbi]
"""
import argparse
import itertools

import numpy as np

import numeric_hmm
import synthetic_hmm
from spacy_treecrf import TreeCRF
from spacy_treecrf.estimator import SMALL_TREE_FITS, SMALL_TREES, best_validation, round_budget

LABELS = 3  # both HMMs'
CANDIDATES = {"default": {}, **{name: {**profile.settings, "n_rounds": round_budget(profile, 100, LABELS)}
                               for name, profile in SMALL_TREES.items()}}


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


def pick(scores: dict, names) -> str:
    """The candidate small_trees keeps of ``names`` (in order): the best hold-out accuracy, ties to the earlier."""
    return max(names, key=lambda name: (scores[name][1], -list(names).index(name)))


def main(seeds, hmms, decode: str):
    rule = tuple(name or "default" for name in SMALL_TREE_FITS[decode])
    sets = [combo for k in range(2, len(CANDIDATES) + 1) for combo in itertools.combinations(CANDIDATES, k)]
    for hmm in hmms:
        gaps = {name: [] for name in list(CANDIDATES) + [" or ".join(combo) for combo in sets]}
        for seed in seeds:
            (X, y), (X_dev, y_dev), bayes = draws(hmm, seed)
            scores = {}
            for name, settings in CANDIDATES.items():
                model = TreeCRF(decode=decode, small_trees=False, **settings).fit(X, y)
                scores[name] = (model.score(X_dev, y_dev), best_validation(model.history_), model.best_round_)
                gaps[name].append(bayes - scores[name][0])
            for combo in sets:
                gaps[" or ".join(combo)].append(bayes - scores[pick(scores, combo)][0])
            picked = pick(scores, rule)
            print(f"{hmm} seed {seed}: Bayes-optimal {bayes * 100:.2f} | " + " | ".join(
                f"{name} dev {s[0] * 100:.2f} (hold-out {s[1] * 100:.1f}, round {s[2]})" for name, s in scores.items())
                + f" | small_trees keeps {picked}: {(bayes - scores[picked][0]) * 100:.2f} below", flush=True)
        print(f"{hmm}, {decode}: median points below Bayes-optimal on dev (largest), each candidate alone and the "
              f"hold-out's pick of each set; small_trees' fits: {' or '.join(rule)}", flush=True)
        for name, g in gaps.items():
            print(f"  {name}: {np.median(g) * 100:.2f} ({max(g) * 100:.2f})", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 13)))
    parser.add_argument("--hmm", nargs="+", choices=("discrete", "numeric"), default=["discrete", "numeric"])
    parser.add_argument("--decode", choices=("marginal", "viterbi"), default="marginal")
    args = parser.parse_args()
    main(args.seeds, args.hmm, args.decode)

"""The paper's synthetic HMM (Sec. 7.3): TreeCRF accuracy next to the Bayes-optimal accuracy.

3 labels, 24 observations; label k emits uniformly from its own block of 8 observations with total probability
0.6 and from the other 16 with 0.4; it stays with probability 0.6 and switches to each other label with 0.2.
100 training sequences of length 100, window 3 (the observations at t-1, t, t+1). The Bayes-optimal decoder is
posterior (marginal) decoding with the true HMM on the same test set.

    python benchmarks/synthetic_hmm.py [--seed 0] [--n-test 300]     (settings chosen on dev)
    python benchmarks/synthetic_hmm.py --defaults 1 2 3 4 5           (the defaults, per seed)
"""
import argparse
import time

import numpy as np

from spacy_treecrf import TreeCRF
from spacy_treecrf.engine.booster import PAPER_SETTINGS

K, V, BLOCK = 3, 24, 8


def hmm():
    trans = np.full((K, K), 0.2) + np.eye(K) * 0.4
    emit = np.zeros((K, V))
    for k in range(K):
        own = np.zeros(V, dtype=bool)
        own[k * BLOCK:(k + 1) * BLOCK] = True
        emit[k, own] = 0.6 / own.sum()
        emit[k, ~own] = 0.4 / (~own).sum()
    return np.full(K, 1.0 / K), trans, emit


def sample(rng, n, length, start, trans, emit):
    seqs = []
    for _ in range(n):
        y = np.empty(length, dtype=int)
        x = np.empty(length, dtype=int)
        y[0] = rng.choice(K, p=start)
        for t in range(length):
            if t:
                y[t] = rng.choice(K, p=trans[y[t - 1]])
            x[t] = rng.choice(V, p=emit[y[t]])
        seqs.append((x, y))
    return seqs


def posterior_decode(x, start, trans, emit):
    T = len(x)
    alpha = np.zeros((T, K))
    beta = np.ones((T, K))
    alpha[0] = start * emit[:, x[0]]
    alpha[0] /= alpha[0].sum()
    for t in range(1, T):
        alpha[t] = alpha[t - 1] @ trans * emit[:, x[t]]
        alpha[t] /= alpha[t].sum()
    for t in range(T - 2, -1, -1):
        beta[t] = trans @ (emit[:, x[t + 1]] * beta[t + 1])
        beta[t] /= beta[t].sum()
    return (alpha * beta).argmax(axis=1)


def window_features(x, half=1):
    return [[f"x[{d}]={x[t + d]}" if 0 <= t + d < len(x) else f"x[{d}]=pad" for d in range(-half, half + 1)]
            for t in range(len(x))]


GRID = [(lam, leaves, lr) for lam in (40.0, 200.0) for leaves in (4, 100) for lr in (0.3, 1.0)]


def main(seed: int = 0, n_test: int = 100, n_rounds: int = 150):
    """Settings (shrinkage, max_leaves, learning_rate) and rounds are chosen on a dev set drawn from the same
    HMM, never on test."""
    rng = np.random.default_rng(seed)
    start, trans, emit = hmm()
    train = sample(rng, 100, 100, start, trans, emit)
    dev = sample(rng, 50, 100, start, trans, emit)
    test = sample(rng, n_test, 100, start, trans, emit)
    fx = lambda data: [window_features(x) for x, _ in data]
    fy = lambda data: [[str(v) for v in y] for _, y in data]
    t0 = time.perf_counter()
    best = None
    for lam, leaves, lr in GRID:
        model = TreeCRF(n_rounds=n_rounds, max_leaves=leaves, shrinkage=lam, learning_rate=lr, decode="marginal",
                        patience=15, small_trees=False, **PAPER_SETTINGS)
        model.fit(fx(train), fy(train), fx(dev), fy(dev))
        dev_acc = max(h["dev_accuracy"] for h in model.history_)
        print(f"  shrinkage {lam:5.0f} max_leaves {leaves:3d} lr {lr:.1f}: dev {dev_acc * 100:.2f}% "
              f"at round {model.best_round_}")
        if best is None or dev_acc > best[0]:
            best = (dev_acc, lam, leaves, lr, model)
    seconds = time.perf_counter() - t0
    _, lam, leaves, lr, model = best
    acc = model.score(fx(test), fy(test))
    gold = np.concatenate([y for _, y in test])
    bayes = np.concatenate([posterior_decode(x, start, trans, emit) for x, _ in test])
    bayes_acc = float((bayes == gold).mean())
    print(f"chosen on dev         shrinkage {lam:g}, max_leaves {leaves}, learning_rate {lr}, "
          f"{model.best_round_} rounds ({seconds:.1f} s for the whole grid)")
    print(f"TreeCRF accuracy      {acc * 100:.2f}%  ({len(gold)} test positions, marginal decoding)")
    print(f"Bayes-optimal (HMM)   {bayes_acc * 100:.2f}%")
    print(f"gap                   {(bayes_acc - acc) * 100:.2f} points")
    return acc, bayes_acc


def defaults_gap(seeds, n_test: int):
    """The defaults as a user gets them, `TreeCRF(decode="marginal").fit(X, y)` (no dev data: the fit holds out
    what it holds out), per seed: test accuracy against the Bayes-optimal one, and the gap."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        start, trans, emit = hmm()
        train = sample(rng, 100, 100, start, trans, emit)
        sample(rng, 50, 100, start, trans, emit)  # (the dev draw main() makes: the same test set as main's)
        test = sample(rng, n_test, 100, start, trans, emit)
        model = TreeCRF(decode="marginal").fit([window_features(x) for x, _ in train],
                                               [[str(v) for v in y] for _, y in train])
        acc = model.score([window_features(x) for x, _ in test], [[str(v) for v in y] for _, y in test])
        gold = np.concatenate([y for _, y in test])
        bayes = float((np.concatenate([posterior_decode(x, start, trans, emit) for x, _ in test]) == gold).mean())
        print(f"seed {seed}: defaults {acc * 100:.2f}% (round {model.best_round_}), Bayes-optimal {bayes * 100:.2f}%, "
              f"gap {(bayes - acc) * 100:.2f} points", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-test", type=int, default=300)
    parser.add_argument("--n-rounds", type=int, default=150)
    parser.add_argument("--defaults", type=int, nargs="*", default=None, metavar="SEED",
                        help="instead: the defaults' gap to Bayes-optimal decoding on these seeds")
    args = parser.parse_args()
    if args.defaults is not None:
        defaults_gap(args.defaults or [args.seed], args.n_test)
    else:
        main(args.seed, args.n_test, args.n_rounds)

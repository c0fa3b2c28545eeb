"""The four boosting losses side by side on NETtalk stress, protein secondary structure and CoNLL-2000 chunking.

Same features, trees and rounds for every loss; only ``loss`` changes. Test scores after a fixed number of rounds
(no tuning, no early stopping), under Viterbi and marginal (per-token argmax) decoding, token accuracy and whole
sequence accuracy (whole words correct on NETtalk, as on the Dietterich & Ashenfelter slides; whole sentences on
CoNLL-2000, whose chunk F1 is conlleval's: exact span and type). Each round is timed in two parts: the gradient pass
(forward-backward and the loss's own pass; none for the pseudo-likelihood) and the rest (trees and the update).

    python benchmarks/losses.py [--tasks nettalk protein conll2000] [--rounds 100 100 30] [--threads 1]
        [--out benchmarks/results/losses.md]

Data: ``--data-dir``, else $TREECRF_DATA_DIR. Features: NETtalk 13-letter and protein 11-residue one-hot windows as
in paper_tasks.py; CoNLL-2000 the words / lowercase / shape / suffixes 1-3 / POS column over a +-2 window of
conll2000_round.py. Trees: max_leaves 100, shrinkage 10, learning_rate 1; BIO transitions constrained on CoNLL-2000.
"""
import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import spacy

from spacy_treecrf.engine import booster
from spacy_treecrf.engine.transitions import bio_allowed
from spacy_treecrf.estimator import FeatureIndex
from spacy_treecrf.features import WindowFeaturizer
from spacy_treecrf.pipe import bio_spans
from spacy_treecrf.readers import columns_to_docs, read_columns

sys.path.insert(0, str(Path(__file__).resolve().parent))
from paper_tasks import TASKS, load_nettalk, load_protein, window_features  # noqa: E402

LOSSES = booster.LOSSES
TREES = dict(booster.PAPER_SETTINGS, max_leaves=100, shrinkage=10.0, learning_rate=1.0)


class Task:
    """Training and test rows (CSR), label ids, sequence offsets and the transition mask of one data set."""

    def __init__(self, name, labels, train, test, y_train, y_test, allowed, n_features, bio=False):
        self.name, self.labels, self.allowed, self.n_features, self.bio = name, labels, allowed, n_features, bio
        self.train, self.test = train, test
        self.y_train, self.y_test = y_train, y_test


def label_ids(labels, seqs):
    index = {lab: k for k, lab in enumerate(labels)}
    return np.array([index.get(lab, -2) for seq in seqs for lab in seq], dtype=np.int32)  # unseen: always wrong


def window_task(name, train, test):
    half = TASKS[name]["half"]
    labels = sorted({lab for _, ys in train for lab in ys})
    index = FeatureIndex()
    # (indptr, indices, sequence offsets); these inputs have no missing values
    rows_train = index.rows([window_features(x, half) for x, _ in train], grow=True)[:3]
    rows_test = index.rows([window_features(x, half) for x, _ in test], grow=False)[:3]
    K = len(labels)
    return Task(name, labels, rows_train, rows_test, label_ids(labels, [ys for _, ys in train]),
                label_ids(labels, [ys for _, ys in test]), np.ones((K + 1, K), dtype=np.bool_), len(index.names))


def conll2000_task(root):
    nlp = spacy.blank("en")
    cols = ["word", "pos", "chunk"]
    docs, tags = {}, {}
    for split in ("train", "test"):
        path = root / "conll2000" / f"{split}.txt"
        docs[split] = columns_to_docs(nlp.vocab, path, "word", "chunk", "bio_spans", {"pos": "tag_"}, columns=cols)
        tags[split] = [[row[2] for row in sent] for sent in read_columns(path, cols)]
    labels = sorted({t for sent in tags["train"] for t in sent})
    featurizer = WindowFeaturizer(window=2, word=True, lower=True, regexes=False, prefix=0, suffix=3, shape=True,
                                  flags=False, attrs=["tag_"])
    featurizer.initialize(docs["train"])
    return Task("conll2000", labels, featurizer(docs["train"]), featurizer(docs["test"]),
                label_ids(labels, tags["train"]), label_ids(labels, tags["test"]), bio_allowed(labels),
                featurizer.n_features, bio=True)


def chunk_f1(pred, gold, starts, labels):
    """conlleval's F1: predicted chunks (start, end, type) that exactly match a gold chunk."""
    tp = n_pred = n_gold = 0
    for a, b in zip(starts[:-1], starts[1:]):
        p = set(bio_spans([labels[k] for k in pred[a:b]]))
        g = set(bio_spans([labels[k] if k >= 0 else "O" for k in gold[a:b]]))
        tp += len(p & g)
        n_pred += len(p)
        n_gold += len(g)
    return 2 * tp / (n_pred + n_gold) if n_pred + n_gold else 0.0


def scores(task, ensemble, threads):
    """Per decoder: token accuracy, whole-sequence accuracy, and for BIO tasks chunk F1."""
    indptr, indices, starts = task.test
    P = ensemble.scaled_potentials(indptr, indices, task.allowed, starts, threads)
    out = {}
    for method in ("viterbi", "marginal"):
        pred, _ = booster.decode(P, starts, method, threads)
        right = pred == task.y_test
        seq = np.add.reduceat(~right, starts[:-1]) == 0
        out[method] = dict(token=float(right.mean()), sequence=float(seq.mean()))
        if task.bio:
            out[method]["f1"] = chunk_f1(pred, task.y_test, starts, task.labels)
    return out


def head(task, n_seq):
    """The task cut to its first n_seq training sequences (to compile the kernels before timing)."""
    indptr, indices, starts = task.train
    T = int(starts[n_seq])
    return Task(task.name, task.labels, (indptr[:T + 1], indices[:indptr[T]], starts[:n_seq + 1]), task.test,
                task.y_train[:T], task.y_test, task.allowed, task.n_features, task.bio)


def run(task, loss, rounds, threads, verbose=True):
    indptr, indices, starts = task.train
    params = booster.BoostParams(n_threads=threads, loss=loss, **TREES)
    trainer = booster.Trainer(indptr, indices, task.n_features, task.y_train, starts, task.allowed, params)
    K = len(task.labels)
    ensemble = booster.Ensemble(K + 1, K)
    grad, total = [], []
    for r in range(1, rounds + 1):
        t0 = time.perf_counter()
        passes = trainer.gradient_pass()
        t1 = time.perf_counter()
        trainer.fit_round(ensemble, passes=passes)
        t2 = time.perf_counter()
        grad.append(t1 - t0)
        total.append(t2 - t0)
        if verbose and (r == 1 or r % 10 == 0 or r == rounds):
            print(f"  [{task.name} {loss}] round {r}: {total[-1]:.2f} s, loss before {-passes.objective:.6g}",
                  flush=True)
    return dict(loss=loss, rounds=rounds, seconds=sum(total), median_round=statistics.median(total),
                median_gradient=statistics.median(grad), test=scores(task, ensemble, threads))


def interleaved(task, losses, rounds, threads):
    """Round times of several losses trained side by side, a round of each in turn, so that load from other jobs
    falls on all of them alike; returns per loss the round times and the median ratio to the first loss's round
    of the same turn."""
    indptr, indices, starts = task.train
    K = len(task.labels)
    trainers = {loss: (booster.Trainer(indptr, indices, task.n_features, task.y_train, starts, task.allowed,
                                       booster.BoostParams(n_threads=threads, loss=loss, **TREES)),
                       booster.Ensemble(K + 1, K)) for loss in losses}
    times = {loss: [] for loss in losses}
    for r in range(rounds):
        for loss, (trainer, ensemble) in trainers.items():
            t0 = time.perf_counter()
            trainer.fit_round(ensemble)
            times[loss].append(time.perf_counter() - t0)
        print(f"  [{task.name} interleaved] round {r + 1}: " + ", ".join(
            f"{loss} {t[-1]:.2f} s" for loss, t in times.items()), flush=True)
    first = np.array(times[losses[0]])
    return {loss: (t, float(np.median(np.array(t) / first))) for loss, t in times.items()}


def table(task, results):
    f1 = task.bio
    seq = "whole words" if task.name == "nettalk" else "whole sentences" if f1 else "whole sequences"
    head = ["loss"] + (["chunk F1 V", "chunk F1 M"] if f1 else []) + [
        "token acc V", "token acc M", f"{seq} V", f"{seq} M", "rounds", "train s", "median s/round",
        "median gradient s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        v, m = r["test"]["viterbi"], r["test"]["marginal"]
        cells = [f"`{r['loss']}`"] + ([f"{v['f1'] * 100:.2f}", f"{m['f1'] * 100:.2f}"] if f1 else []) + [
            f"{v['token'] * 100:.2f}", f"{m['token'] * 100:.2f}", f"{v['sequence'] * 100:.2f}",
            f"{m['sequence'] * 100:.2f}", str(r["rounds"]), f"{r['seconds']:.1f}", f"{r['median_round']:.3f}",
            f"{r['median_gradient']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=os.environ.get("TREECRF_DATA_DIR"))
    parser.add_argument("--tasks", nargs="+", default=["nettalk", "protein", "conll2000"])
    parser.add_argument("--rounds", nargs="+", type=int, default=[100, 100, 30], help="one per task")
    parser.add_argument("--losses", nargs="+", default=list(LOSSES))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--interleave", type=int, default=0,
                        help="instead: this many rounds of --losses in turn on the first task, for round-cost ratios")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.data_dir is None or not Path(args.data_dir).is_dir():
        sys.exit("pass --data-dir or set TREECRF_DATA_DIR")
    root = Path(args.data_dir)
    report = [f"# Boosting losses compared (`python benchmarks/losses.py {' '.join(sys.argv[1:])}`)", "",
              f"{platform.processor() or platform.machine()}, {args.threads} thread(s), other jobs sharing the "
              f"machine. Trees: {TREES}; same features and rounds for every loss; test scores after the last round "
              f"(V = Viterbi, M = marginal decoding). Times exclude featurization, compilation and test scoring.",
              ""]
    for name, rounds in zip(args.tasks, args.rounds):
        if name == "nettalk":
            task = window_task(name, *load_nettalk(root))
        elif name == "protein":
            train, test, _ = load_protein(root)
            task = window_task(name, train, test)
        else:
            task = conll2000_task(root)
        n_train, n_test = len(task.y_train), len(task.y_test)
        if args.interleave:
            for loss in args.losses:
                run(head(task, 20), loss, 1, args.threads, verbose=False)
            res = interleaved(task, args.losses, args.interleave, args.threads)
            report += [f"## {name}: round cost, losses in turn", "", "| loss | rounds | median s/round | "
                       f"median ratio to `{args.losses[0]}` in the same turn |", "|---|---|---|---|"]
            report += [f"| `{loss}` | {len(t)} | {statistics.median(t):.3f} | {ratio:.3f} |"
                       for loss, (t, ratio) in res.items()] + [""]
            break
        print(f"{name}: {n_train} train / {n_test} test positions, {len(task.labels)} labels, "
              f"{task.n_features} features", flush=True)
        for loss in args.losses:
            run(head(task, 20), loss, 1, args.threads, verbose=False)
        results = [run(task, loss, rounds, args.threads) for loss in args.losses]
        report += [f"## {name}", "", f"{len(task.train[2]) - 1} training sequences ({n_train} positions), "
                   f"{len(task.test[2]) - 1} test sequences ({n_test} positions), {len(task.labels)} labels, "
                   f"{task.n_features} binary features.", ""] + table(task, results) + [""]
        by_loss = {r["loss"]: r for r in results}
        if "crf" in by_loss and "pseudo_likelihood" in by_loss:
            pl, crf = by_loss["pseudo_likelihood"], by_loss["crf"]
            report += [f"Median round, pseudo-likelihood / CRF: {pl['median_round']:.3f} / "
                       f"{crf['median_round']:.3f} s = {pl['median_round'] / crf['median_round']:.2f} "
                       f"(gradient pass {pl['median_gradient']:.3f} / {crf['median_gradient']:.3f} s).", ""]
        print("\n".join(report[-(len(results) + 6):]), flush=True)
    text = "\n".join(report)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()

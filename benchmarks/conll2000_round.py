"""Cost of one boosting round on CoNLL-2000 chunking features (22 labels, ~212k tokens) and training peak RSS.

Word / lowercase / shape / suffix (1-3) / POS-column tests over a +-2 window, built by the component's featurizer
as sparse arrays; then ROUNDS rounds of 22 trees (max_leaves 100) through the engine, timed one by one.

    python benchmarks/conll2000_round.py [--data-dir DATA] [--rounds 10] [--threads 0]
"""
import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import spacy

from measure import peak_rss_mb
from spacy_treecrf.engine import booster
from spacy_treecrf.engine.transitions import bio_allowed
from spacy_treecrf.features import WindowFeaturizer
from spacy_treecrf.readers import columns_to_docs, read_columns

ROOT = Path(__file__).resolve().parent.parent


def main(data_dir: Path, rounds: int, threads: int):
    path = data_dir / "conll2000" / "train.txt"
    nlp = spacy.blank("en")
    docs = columns_to_docs(nlp.vocab, path, "word", "chunk", "bio_spans", {"pos": "tag_"},
                           columns=["word", "pos", "chunk"])
    tags = [row[2] for sent in read_columns(path, ["word", "pos", "chunk"]) for row in sent]
    labels = sorted(set(tags))
    index = {label: k for k, label in enumerate(labels)}
    y = np.array([index[t] for t in tags], dtype=np.int32)
    featurizer = WindowFeaturizer(window=2, word=True, lower=True, regexes=False, prefix=0, suffix=3,
                                  shape=True, flags=False, attrs=["tag_"])
    featurizer.initialize(docs)
    t0 = time.perf_counter()
    indptr, indices, seq_starts = featurizer(docs)
    featurize = time.perf_counter() - t0
    print(f"{len(y)} positions, {len(labels)} labels, {featurizer.n_features} feature columns, "
          f"{len(indices) / len(y):.1f} nonzeros per row, featurized in {featurize:.2f} s")
    params = booster.BoostParams(max_leaves=100, shrinkage=10.0, n_threads=threads, **booster.PAPER_SETTINGS)
    trainer = booster.Trainer(indptr, indices, featurizer.n_features, y, seq_starts, bio_allowed(labels), params)
    ensemble = booster.Ensemble(len(labels) + 1, len(labels))
    times = []
    for r in range(1, rounds + 1):
        t = time.perf_counter()
        loglik = trainer.fit_round(ensemble)
        times.append(time.perf_counter() - t)
        print(f"round {r:3d}: {times[-1]:6.2f} s   log-likelihood before {loglik:14.1f}", flush=True)
    peak = peak_rss_mb()
    print(f"median round {statistics.median(times):.2f} s (rounds 2-{rounds}: "
          f"{statistics.median(times[1:]) if rounds > 1 else times[0]:.2f} s); peak RSS {peak:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path,
                        default=Path(os.environ.get("TREECRF_DATA_DIR", ROOT.parent / "shared" / "data")))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args()
    main(args.data_dir, args.rounds, args.threads)

"""Memory and progress of a large-label-set treecrf round by round: UD EWT XPOS (target tag, 50 tags) with shared
trees, through the component as `spacy train` drives it (full-batch rounds on the training docs).

    TREECRF_DATA_DIR=../shared/data python benchmarks/shared_trees_memory.py --rounds 60 [--every 10]

configs/pos.cfg with target tag and the shared-tree settings (max_leaves 1000, label_splits fallback, l1 0.1;
--set key=value overrides any [components.treecrf.booster] setting; --directions the shared trees' projection).
First it evaluates dev once before any round, as spaCy's loop does, and prints that evaluation's peak resident
memory. Every --every rounds it prints the groups of previous labels per position in the training cache, the process's
resident memory now and at its peak, the dev accuracy and the dev words/s (spaCy's evaluate), then the peak
resident memory seen inside each phase of a round (a thread samples it every 5 ms) and, for the last round, on
entry to and exit from each phase: where the memory of a round goes; last, the size of the model's arrays.
Data: UD English EWT under TREECRF_DATA_DIR (ud_english_ewt/en_ewt-ud-{train,dev}.conllu), converted in memory.
"""
import argparse
import os
import threading
import time
from pathlib import Path

from measure import peak_rss_mb

ROOT = Path(__file__).resolve().parent.parent
SHARED = {"shared_trees": True, "max_leaves": 1000, "label_splits": "fallback", "l1": 0.1}
PHASES = [("Language", "evaluate"), ("Trainer", "gradient_pass"), ("Trainer", "position_moments"),
          ("Trainer", "_low_rank"), ("module", "grow_tree"), ("Trainer", "_leaf_vectors"), ("Trainer", "_move")]


def current_rss_mb() -> float:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def examples(nlp, path: Path) -> list:
    """The CoNLL-U file's sentences as Examples (spaCy's converter, one sentence per doc, gold tokens)."""
    from spacy.tokens import Doc, DocBin
    from spacy.training import Example
    from spacy.training.converters import conllu_to_docs

    docs = list(conllu_to_docs(path.read_text(encoding="utf8"), n_sents=1, no_print=True))
    docs = list(DocBin(docs=docs).get_docs(nlp.vocab))
    return [Example(Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc]), doc)
            for doc in docs]


def watch_phases(booster, shared_fit) -> tuple:
    """Wrap the round's phases so that a sampling thread attributes the resident memory to the one running.
    Returns (peaks: the highest seen per phase over all rounds, ends: per phase its last (entry, exit))."""
    phase = ["other"]
    peaks = {}
    ends = {}

    def sample():
        while True:
            rss = current_rss_mb()
            peaks[phase[0]] = max(peaks.get(phase[0], 0.0), rss)
            time.sleep(0.005)
    threading.Thread(target=sample, daemon=True).start()
    from spacy.language import Language
    for owner, name in PHASES:
        obj = {"Trainer": booster.Trainer, "Language": Language}.get(owner, shared_fit)  # (shared trees grow there)
        real = getattr(obj, name)

        def inner(*args, _real=real, _name=name.strip("_"), **kwargs):
            old, phase[0] = phase[0], _name
            entry = current_rss_mb()
            try:
                return _real(*args, **kwargs)
            finally:
                phase[0] = old
                ends[_name] = (entry, current_rss_mb())
        setattr(obj, name, inner)
    return peaks, ends


def model_size(ensemble) -> str:
    """The trees' arrays: nodes, leaf-vector entries and what each part takes."""
    forest = ensemble.forest()
    parts = {**{f"nodes.{k}": v.nbytes for k, v in forest.nodes._asdict().items()},
             **{f"vectors.{k}": v.nbytes for k, v in forest.vectors._asdict().items()}}
    total = sum(parts.values())
    leaves = int((forest.nodes.kind == 0).sum())
    top = sorted(parts.items(), key=lambda kv: -kv[1])[:4]
    return (f"model: {ensemble.n_trees} trees, {len(forest.nodes.kind):,} nodes, {len(forest.vectors.value):,} "
            f"leaf-vector entries ({len(forest.vectors.value) / max(leaves, 1):.1f} per leaf), {total / 1e6:.1f} MB "
            f"({total / 1e6 / max(ensemble.n_trees, 1):.2f} MB a tree): "
            + ", ".join(f"{k} {v / total:.0%}" for k, v in top))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--set", nargs="*", default=[], help="booster settings, key=value (JSON values)")
    parser.add_argument("--directions", type=int, default=0,
                        help="the directions a shared tree's splits are chosen on (0: shared_fit.SHARED_DIRECTIONS)")
    args = parser.parse_args()
    import json

    from spacy.util import load_config, load_model_from_config

    import spacy_treecrf.pipe  # noqa: F401  (the factory of this checkout's package)

    from spacy_treecrf.engine import booster, shared_fit
    if args.directions:
        shared_fit.SHARED_DIRECTIONS = args.directions

    data = Path(os.environ["TREECRF_DATA_DIR"]) / "ud_english_ewt"
    settings = dict(SHARED, **{k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)})
    overrides = {"components.treecrf.target": "tag", "training.score_weights.pos_acc": None,
                 "training.score_weights.tag_acc": 1.0,
                 **{f"components.treecrf.booster.{k}": v for k, v in settings.items()}}
    config = load_config(ROOT / "configs" / "pos.cfg", overrides=overrides, interpolate=False)
    nlp = load_model_from_config(config, auto_fill=True, validate=True)
    train = examples(nlp, data / "en_ewt-ud-train.conllu")
    dev = examples(nlp, data / "en_ewt-ud-dev.conllu")
    nlp.initialize(lambda: train)
    pipe = nlp.get_pipe("treecrf")
    print(f"settings {settings}; {len(train)} training docs, {sum(len(e) for e in train)} words; "
          f"after initialize: {current_rss_mb():.0f} MB (peak {peak_rss_mb():.0f} MB)", flush=True)
    peaks, ends = watch_phases(booster, shared_fit)
    before = current_rss_mb()
    nlp.evaluate(dev)  # as spaCy's loop does before the first round
    print(f"dev evaluation before the first round: resident {before:.0f} MB before it, {peaks['evaluate']:.0f} MB "
          "at its peak", flush=True)
    t0 = time.perf_counter()
    for r in range(1, args.rounds + 1):
        nlp.update(train)
        if r % args.every == 0 or r == 1:
            seconds = time.perf_counter() - t0
            P = pipe.feeder.trainer.P
            scores = nlp.evaluate(dev)
            print(f"round {r}: {seconds:.1f} s, groups per position {P.values.shape[0] / len(P.c):.2f}, "
                  f"resident {current_rss_mb():.0f} MB (peak {peak_rss_mb():.0f} MB), dev tag_acc "
                  f"{scores['tag_acc'] * 100:.2f}, dev {scores['speed']:,.0f} words/s", flush=True)
            t0 = time.perf_counter() - seconds  # the evaluations are not the rounds' time
    print("peak resident MB by phase: " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(peaks.items(),
                                                                                        key=lambda kv: -kv[1])))
    print("last round, resident MB on entry -> exit: " + ", ".join(f"{k} {a:.0f} -> {b:.0f}"
                                                                   for k, (a, b) in ends.items()))
    print(model_size(pipe.ensemble))


if __name__ == "__main__":
    main()

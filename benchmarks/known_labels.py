"""Decoding around known labels, and confidence for active learning, on CoNLL-2003 dev.

The model is a trained pipeline with a treecrf NER component (e.g. `benchmarks/init_config_train.py --task ner`'s
model-best: `spacy init config` defaults, text only); the dev docs are a .spacy corpus of the same conversion.

Known entities: for each seed, a random SHARE of the dev set's gold entities (--by entity), or the gold entities of
a random SHARE of its docs (--by doc), is given (set on the doc as its entities, every other token left unset),
and three decodings are scored on the entities that were not given (a predicted span equal to a given entity is
not counted; one that overlaps it but differs is a false positive):
- free: the model decodes as if nothing were known (overwrite = true);
- dropped: the free decoding with its spans that overlap a given entity dropped (what overwrite = false did
  before decoding was clamped);
- clamped: overwrite = false, decoding restricted to the labellings that agree with the given entities.
Their tagging speeds (words/s over the whole dev set, median of PASSES passes, interleaved) are printed too.

Confidence: every dev doc (a sentence) decoded freely with store_scores; docs in deciles of the probability of
their predicted labelling (Doc._.treecrf_confidence), micro-averaged entity F1 per decile, and the same by the
least marginal; a plot goes to --plot.

    python benchmarks/known_labels.py MODEL DEV.spacy [--share 0.2] [--by entity|doc] [--seeds 0 1 2]
        [--passes 3] [--plot OUT.png] [--no-deciles]
"""
import argparse
import random
import statistics
import time
from pathlib import Path

import numpy as np
import spacy
from spacy.tokens import DocBin, Span


def spans(doc):
    return {(e.start, e.end, e.label_) for e in doc.ents}


def prf(tp: int, fp: int, fn: int):
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def given_entities(gold_docs, share: float, seed: int, by: str):
    """Per doc, the gold entities given as known: each entity of the dev set with probability ``share`` (``by``
    "entity"), or every entity of each doc with that probability ("doc")."""
    rng = random.Random(seed)
    if by == "doc":
        return [set(spans(doc)) if rng.random() < share else set() for doc in gold_docs]
    return [{e for e in sorted(spans(doc)) if rng.random() < share} for doc in gold_docs]


def plain(nlp, gold):
    """The gold doc's words, nothing else."""
    return spacy.tokens.Doc(nlp.vocab, words=[t.text for t in gold], spaces=[bool(t.whitespace_) for t in gold])


def with_given(nlp, gold, given):
    """The doc's text with only the given entities set (every other token unset)."""
    doc = plain(nlp, gold)
    doc.set_ents([Span(doc, s, e, label) for s, e, label in sorted(given)], default="unmodified")
    return doc


def dropped(free_doc_spans, given):
    """The free decoding's spans that overlap no given entity, and the given ones."""
    taken = {i for s, e, _ in given for i in range(s, e)}
    return {(s, e, lab) for s, e, lab in free_doc_spans if not taken.intersection(range(s, e))} | set(given)


def known_entities(nlp, gold_docs, share: float, seeds, passes: int, by: str):
    crf = nlp.get_pipe("treecrf")
    names = [name for name in nlp.pipe_names if name != "treecrf"]
    rows = []
    for seed in seeds:
        given = given_entities(gold_docs, share, seed, by)
        n_given = sum(len(g) for g in given)
        n_words = sum(len(d) for d in gold_docs)
        times = {"free": [], "clamped": []}
        for _ in range(passes):
            for mode in ("free", "clamped"):
                crf.cfg["overwrite"] = mode == "free"
                docs = [with_given(nlp, gold, g) if mode == "clamped" else plain(nlp, gold)
                        for gold, g in zip(gold_docs, given)]
                t0 = time.perf_counter()
                out = list(nlp.pipe(docs, disable=names, batch_size=1000))
                times[mode].append(n_words / (time.perf_counter() - t0))
                if mode == "free":
                    free = out
                else:
                    clamped = out
        crf.cfg["overwrite"] = True
        results = {}
        for name, predicted in (("free", [spans(d) for d in free]),
                                ("dropped", [dropped(spans(d), g) for d, g in zip(free, given)]),
                                ("clamped", [spans(d) for d in clamped])):
            tp = fp = fn = 0
            for pred, gold, g in zip(predicted, gold_docs, given):
                p, gg = pred - g, spans(gold) - g
                tp, fp, fn = tp + len(p & gg), fp + len(p - gg), fn + len(gg - p)
            results[name] = prf(tp, fp, fn)
        kept = all(g <= spans(d) for d, g in zip(clamped, given))
        rows.append((seed, n_given, results, {m: statistics.median(v) for m, v in times.items()}, kept))
        print(f"seed {seed}: {n_given} entities given; F1 on the rest: free {results['free'][2] * 100:.2f}, "
              f"dropped {results['dropped'][2] * 100:.2f}, clamped {results['clamped'][2] * 100:.2f}; every given "
              f"entity kept: {kept}; words/s free {statistics.median(times['free']):,.0f}, clamped "
              f"{statistics.median(times['clamped']):,.0f}", flush=True)
    return rows


def confidence_deciles(nlp, gold_docs, plot):
    crf = nlp.get_pipe("treecrf")
    crf.cfg["store_scores"] = True
    crf.cfg["overwrite"] = True
    docs = list(nlp.pipe((plain(nlp, g) for g in gold_docs), batch_size=1000))
    sure = [d._.treecrf_confidence["treecrf"] for d in docs]
    counts = np.array([(len(spans(d) & spans(g)), len(spans(d) - spans(g)), len(spans(g) - spans(d)))
                       for d, g in zip(docs, gold_docs)])
    lengths = np.array([len(d) for d in docs])
    out = {}
    for key in ("probability", "least_marginal"):
        values = np.array([s[key] for s in sure])
        order = np.argsort(values, kind="stable")
        deciles = np.array_split(order, 10)
        rows = []
        for i, part in enumerate(deciles):
            tp, fp, fn = counts[part].sum(axis=0)
            rows.append((i + 1, len(part), float(values[part].min()), float(values[part].max()),
                         int(lengths[part].sum()), int(tp + fn), prf(tp, fp, fn)[2]))
        out[key] = rows
        print(f"\nby {key} (decile 1: least confident)")
        print("| decile | docs | range | tokens | gold entities | F1 |")
        print("|---:|---:|---|---:|---:|---:|")
        for i, n, lo, hi, tokens, gold, f in rows:
            print(f"| {i} | {n} | {lo:.3g}-{hi:.3g} | {tokens:,} | {gold:,} | {f * 100:.2f} |")
    if plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for key, marker in (("probability", "o"), ("least_marginal", "s")):
            ax.plot([r[0] for r in out[key]], [r[6] * 100 for r in out[key]], marker=marker,
                    label=f"docs ranked by {key.replace('_', ' ')}")
        ax.set_xlabel("decile of CoNLL-2003 dev docs (1 = least confident)")
        ax.set_ylabel("entity F1 (micro, within the decile)")
        ax.set_xticks(range(1, 11))
        ax.grid(alpha=0.3)
        ax.legend()
        ax.set_title("Confidence of the predicted labelling against its F1")
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        print(f"\nplot: {plot}")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("dev", type=Path, help="a .spacy corpus with gold entities")
    parser.add_argument("--share", type=float, default=0.2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--by", choices=("entity", "doc"), default="entity",
                        help="give each entity with probability SHARE, or each doc's entities")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per decoding (median)")
    parser.add_argument("--no-deciles", action="store_true", help="only the known-entities runs")
    parser.add_argument("--plot", type=Path, default=None)
    args = parser.parse_args()
    nlp = spacy.load(args.model)
    gold_docs = list(DocBin().from_disk(args.dev).get_docs(nlp.vocab))
    print(f"{len(gold_docs)} dev docs, {sum(len(d) for d in gold_docs):,} tokens, "
          f"{sum(len(d.ents) for d in gold_docs):,} gold entities; given: " + (
              f"the entities of {args.share:.0%} of the docs" if args.by == "doc" else f"{args.share:.0%} of them"))
    known_entities(nlp, gold_docs, args.share, args.seeds, args.passes, args.by)
    if not args.no_deciles:
        confidence_deciles(nlp, gold_docs, args.plot)


if __name__ == "__main__":
    main()

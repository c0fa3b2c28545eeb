"""Explanations are exact on a whole test set: for every position of every doc, the leaves an explanation lists
add up to the potential of the predicted transition, and that potential is the one tagging computed.

    python benchmarks/explain_check.py PIPELINE TEST.spacy [--component treecrf] [--limit N]

PIPELINE: a trained pipeline with a treecrf component (e.g. the NER model `benchmarks/defaults.py --rows ner`
trains); TEST.spacy: its test set (`spacy convert`). Prints the positions checked, the largest |sum of parts -
potential| (the explanation against the float64 tree walk) and the largest |potential - tagging's potential|
(against the block kernel tagging uses, which sums in float32), and the seconds taken.
"""
import argparse
import time

import numpy as np
import spacy
from spacy.tokens import Doc, DocBin


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline")
    parser.add_argument("test")
    parser.add_argument("--component", default="treecrf")
    parser.add_argument("--limit", type=int, default=0, help="docs checked (0: all)")
    args = parser.parse_args()
    nlp = spacy.load(args.pipeline)
    crf = nlp.get_pipe(args.component)
    gold = list(DocBin().from_disk(args.test).get_docs(nlp.vocab))
    docs = [Doc(nlp.vocab, words=[t.text for t in doc], spaces=[bool(t.whitespace_) for t in doc])  # text only
            for doc in (gold[:args.limit] if args.limit else gold)]
    positions, worst_sum, worst_kernel = 0, 0.0, 0.0
    t0 = time.perf_counter()
    for doc in docs:
        if not len(doc):
            continue
        explained = crf.explain(doc)
        ids = crf.predict([doc])["ids"]
        indptr, indices = crf._rows([doc])[:2]
        kernel = crf.ensemble.potentials(indptr, indices)
        for t, e in enumerate(explained):
            s = 0 if t == 0 else int(ids[t - 1]) + 1
            worst_sum = max(worst_sum, abs(sum(part.value for part in e.parts) - e.potential))
            worst_kernel = max(worst_kernel, abs(e.potential - kernel[t, s, ids[t]]))
            positions += 1
    seconds = time.perf_counter() - t0
    print(f"{positions:,} positions of {len(docs):,} docs: max |sum of parts - potential| {worst_sum:.3g}, "
          f"max |potential - tagging's potential| {worst_kernel:.3g} ({seconds:.1f} s)")
    return 0 if worst_sum <= 1e-9 and np.isfinite(worst_kernel) else 1


if __name__ == "__main__":
    raise SystemExit(main())

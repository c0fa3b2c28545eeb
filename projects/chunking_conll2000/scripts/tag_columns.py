"""Replace the POS column of a CoNLL-2000 file by a trained treecrf tagger's predictions (the realistic set-up:
the chunker is trained and tested on predicted tags, never on the shared task's POS column).

    python scripts/tag_columns.py TAGGER_MODEL IN.txt OUT.txt

The tagger is applied to the words only; tokens and chunk labels are copied unchanged.
"""
import sys
import time
from pathlib import Path

import spacy
from spacy.tokens import Doc

import spacy_treecrf  # noqa: F401
from spacy_treecrf.readers import read_columns


def main(model, src, dst):
    nlp = spacy.load(model)
    for _, pipe in nlp.pipeline:  # only the tags are needed: skip the per-token marginal dicts
        if hasattr(pipe, "cfg") and "store_scores" in pipe.cfg:
            pipe.cfg["store_scores"] = False
    sentences = list(read_columns(src, ["word", "pos", "chunk"]))
    docs = [Doc(nlp.vocab, words=[r[0] for r in rows]) for rows in sentences]
    t0 = time.perf_counter()
    docs = list(nlp.pipe(docs))
    seconds = time.perf_counter() - t0
    agree = total = 0
    with Path(dst).open("w", encoding="utf8") as f:
        for rows, doc in zip(sentences, docs):
            for (word, pos, chunk), token in zip(rows, doc):
                f.write(f"{word} {token.tag_} {chunk}\n")
                agree += token.tag_ == pos
                total += 1
            f.write("\n")
    print(f"{dst}: {len(docs)} sentences, {total} tokens tagged in {seconds:.1f} s; agreement with the file's POS "
          f"column {agree / max(1, total) * 100:.2f}%")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])

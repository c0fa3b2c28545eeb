"""Replace the POS column of a CoNLL-2000 file by a treecrf tagger's predictions (the realistic set-up: the chunker
is trained and tested on predicted tags, never on the shared task's POS column).

    python scripts/tag_columns.py TAGGER_MODEL IN.txt OUT.txt
    python scripts/tag_columns.py --folds K --config TAGGER.cfg --dev DEV.txt --work DIR IN.txt OUT.txt [-- OVERRIDES]

The first form tags IN.txt with a trained tagger (dev and test files). The second tags a training file by
jackknifing: its sentences are dealt into K folds (sentence i to fold i mod K), a tagger is trained on the other
K - 1 folds of each (`spacy train TAGGER.cfg --paths.train ... --paths.dev DEV.txt` plus OVERRIDES, in DIR/foldN)
and tags the fold it did not see. A tagger tags its own training sentences almost without error, so a chunker
trained on them would learn to trust tags more than it can on new text; jackknifed tags have the errors it will
meet (the usual practice for pipelines trained on predicted tags). The tagger is applied to the words only;
tokens and chunk labels are copied unchanged.
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

import spacy
from spacy.tokens import Doc

import spacy_treecrf  # noqa: F401
from spacy_treecrf.readers import read_columns


def predicted_tags(model, sentences):
    """The tags the pipeline at ``model`` gives the words of ``sentences`` (lists of (word, pos, chunk) rows)."""
    nlp = spacy.load(model)
    for _, pipe in nlp.pipeline:  # only the tags are needed: skip the per-token marginal dicts
        if hasattr(pipe, "cfg") and "store_scores" in pipe.cfg:
            pipe.cfg["store_scores"] = False
    docs = [Doc(nlp.vocab, words=[r[0] for r in rows]) for rows in sentences]
    return [[token.tag_ for token in doc] for doc in nlp.pipe(docs)]


def write_tagged(dst, sentences, tags, how):
    agree = total = 0
    with Path(dst).open("w", encoding="utf8") as f:
        for rows, sentence_tags in zip(sentences, tags):
            for (word, pos, chunk), tag in zip(rows, sentence_tags):
                f.write(f"{word} {tag} {chunk}\n")
                agree += tag == pos
                total += 1
            f.write("\n")
    print(f"{dst}: {len(sentences)} sentences, {total} tokens tagged {how}; agreement with the file's "
          f"POS column {agree / max(1, total) * 100:.2f}%", flush=True)


def jackknife(sentences, folds, config, dev, work, overrides):
    """Each sentence's tags from a tagger trained on the folds it is not in."""
    tags = [None] * len(sentences)
    for fold in range(folds):
        out = Path(work) / f"fold{fold}"
        out.mkdir(parents=True, exist_ok=True)
        train = out / "train.txt"
        with train.open("w", encoding="utf8") as f:
            for i, rows in enumerate(sentences):
                if i % folds != fold:
                    f.write("".join(" ".join(row) + "\n" for row in rows) + "\n")
        print(f"fold {fold + 1}/{folds}: training on {train}", flush=True)
        subprocess.run([sys.executable, "-m", "spacy", "train", str(config), "--output", str(out),
                        "--paths.train", str(train), "--paths.dev", str(dev), *overrides], check=True)
        held_out = list(range(fold, len(sentences), folds))
        for i, sentence_tags in zip(held_out, predicted_tags(out / "model-best", [sentences[i] for i in held_out])):
            tags[i] = sentence_tags
    return tags


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="TAGGER_MODEL IN.txt OUT.txt, or with --folds: IN.txt OUT.txt")
    parser.add_argument("--folds", type=int, default=0, help="jackknife IN.txt over this many folds (at least 2)")
    parser.add_argument("--config", type=Path, help="with --folds: the tagger's training config")
    parser.add_argument("--dev", type=Path, help="with --folds: the dev file the fold taggers stop on")
    parser.add_argument("--work", type=Path, help="with --folds: where the fold taggers are trained")
    overrides = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.folds:
        if args.folds < 2 or len(args.files) != 2 or not (args.config and args.dev and args.work):
            parser.error("--folds K (K >= 2) takes IN.txt OUT.txt, --config, --dev and --work")
        src, dst = args.files
    elif len(args.files) != 3:
        parser.error("expected TAGGER_MODEL IN.txt OUT.txt")
    else:
        model, src, dst = args.files
    sentences = list(read_columns(src, ["word", "pos", "chunk"]))
    t0 = time.perf_counter()
    if args.folds:
        tags = jackknife(sentences, args.folds, args.config, args.dev, args.work, overrides)
    else:
        tags = predicted_tags(model, sentences)
    seconds = time.perf_counter() - t0
    write_tagged(dst, sentences, tags, f"by {args.folds} fold taggers in {seconds:.1f} s (their training included)"
                 if args.folds else f"in {seconds:.1f} s")


if __name__ == "__main__":
    main(sys.argv[1:])

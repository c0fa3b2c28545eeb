"""CoNLL-2003 converted by spaCy's `ner` converter and by this package's reader: docs, tokens and tokens whose text
is `-DOCSTART-` (a document marker, not text) in each result.

    TREECRF_DATA_DIR=../shared/data python benchmarks/conll_converters.py [--split valid]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import spacy
from spacy.tokens import DocBin


def counts(path: Path) -> str:
    docs = list(DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))
    tokens = sum(len(doc) for doc in docs)
    markers = sum(token.text == "-DOCSTART-" for doc in docs for token in doc)
    return f"{len(docs):,} docs, {tokens:,} tokens, {markers:,} `-DOCSTART-` tokens"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="valid", help="train | valid | test")
    args = parser.parse_args()
    source = Path(os.environ["TREECRF_DATA_DIR"]) / "conll2003" / f"{args.split}.txt"
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        subprocess.run([sys.executable, "-m", "spacy", "convert", str(source), str(work), "--converter", "ner"],
                       check=True, capture_output=True)
        subprocess.run([sys.executable, "-m", "spacy_treecrf", "convert", str(source), str(work / "reader.spacy"),
                        "--format", "conll2003"], check=True, capture_output=True)
        print(f"spaCy's ner converter: {counts(work / (source.stem + '.spacy'))}")
        print(f"spacy_treecrf convert --format conll2003: {counts(work / 'reader.spacy')}")


if __name__ == "__main__":
    main()

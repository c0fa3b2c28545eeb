"""Brown clusters from the text the data sets carry, for the features' `clusters` setting (issue: context beyond the
window): the tokens of the English training files (CoNLL-2000 train without the sentences carve_dev.py makes its
dev split of, CoNLL-2003 train, UD EWT train; no dev or test text), a sentence a line, clustered by
`spacy_treecrf.word_classes.brown_clusters`. Prints the text's size, the vocabulary, the seconds and the largest
clusters; writes WORK/text.txt and WORK/clusters.txt, the file the dev runs read:

    TREECRF_DATA_DIR=../shared/data python benchmarks/word_classes.py --work WORK [--n-clusters 256] [--min-count 2]
    TREECRF_DATA_DIR=../shared/data python benchmarks/defaults.py --dev-only --rows upos
        --set clusters=WORK/clusters.txt --work WORK/upos
"""
import argparse
import time
from collections import defaultdict
from pathlib import Path

from paper_tasks import data_dir

from spacy_treecrf.word_classes import brown_clusters, write_clusters

EVERY = 10  # carve_dev.py's default: CoNLL-2000's dev split is every 10th training sentence


def column_sentences(path: Path, column: int, conllu: bool = False):
    """The tokens of a column file's sentences (blank lines between them; -DOCSTART- and CoNLL-U comments and
    multi-word token lines skipped)."""
    sentence = []
    for line in path.read_text(encoding="utf8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if sentence:
                yield sentence
            sentence = []
            continue
        if conllu and line.startswith("#"):
            continue
        parts = line.split("\t") if conllu else line.split()
        if conllu and not parts[0].isdigit():  # 1-2 (a multi-word token's surface) or 3.1 (an empty node)
            continue
        sentence.append(parts[column])
    if sentence:
        yield sentence


def training_text(data: Path) -> list:
    """The sentences of the English training files, without CoNLL-2000's carved dev sentences."""
    chunking = [s for i, s in enumerate(column_sentences(data / "conll2000" / "train.txt", 0))
                if i % EVERY != EVERY - 1]
    return (chunking + list(column_sentences(data / "conll2003" / "train.txt", 0))
            + list(column_sentences(data / "ud_english_ewt" / "en_ewt-ud-train.conllu", 1, conllu=True)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--n-clusters", type=int, default=256)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    lines = training_text(data_dir(args.data_dir))
    (args.work / "text.txt").write_text("".join(" ".join(s) + "\n" for s in lines), encoding="utf8")
    t0 = time.perf_counter()
    clusters = brown_clusters(lines, args.n_clusters, args.min_count)
    seconds = time.perf_counter() - t0
    write_clusters(clusters, args.work / "clusters.txt")
    members = defaultdict(list)
    for word, bits in clusters.items():
        members[bits].append(word)
    print(f"{len(lines):,} sentences, {sum(map(len, lines)):,} tokens; {len(clusters):,} words seen at least "
          f"{args.min_count} times in {len(members)} clusters, {seconds:.1f} s -> {args.work / 'clusters.txt'}")
    for bits in sorted(members, key=lambda b: -len(members[b]))[:10]:
        print(f"  {bits:<12s} {len(members[bits]):>5,}  {' '.join(members[bits][:10])}")


if __name__ == "__main__":
    main()

"""Train a treecrf UPOS tagger on the bundled UD English EWT sample with `spacy train`, save it, print its dev score
and tag a sentence with the confidence of each tag. Run from the repository root:

    python examples/quickstart.py [--output DIR] [--max-steps N]

The pipeline is saved in DIR/model-best (default quickstart_model/model-best): `spacy.load` it, or score it with
`python -m spacy evaluate DIR/model-best CORPUS.spacy`."""
import argparse
import tempfile
from pathlib import Path

import spacy
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy.training import Corpus
from spacy.training.converters import conllu_to_docs

HERE = Path(__file__).parent
ROOT = HERE.parent
SENTENCE = "I called the office on Monday , but they did not answer my questions about the new schedule ."


def convert(conllu: Path, out: Path) -> Path:
    docs = conllu_to_docs(conllu.read_text(encoding="utf8"), n_sents=1, no_print=True)
    DocBin(docs=docs).to_disk(out)
    return out


def main(output: Path, max_steps: int):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train_path = convert(HERE / "data" / "ewt-sample-train.conllu", tmp / "train.spacy")
        dev_path = convert(HERE / "data" / "ewt-sample-dev.conllu", tmp / "dev.spacy")
        train(ROOT / "configs" / "pos.cfg", output,
              overrides={"paths.train": str(train_path), "paths.dev": str(dev_path),
                         "training.max_steps": max_steps, "training.eval_frequency": 10,
                         "components.treecrf.store_scores": True})  # keep confidences (off by default)
        nlp = spacy.load(output / "model-best")
        scores = nlp.evaluate(Corpus(str(dev_path), gold_preproc=True)(nlp))
    print(f"\nUPOS accuracy on the 300 dev sentences: {scores['pos_acc']:.4f} ({scores['speed']:.0f} words/s)")
    print(f"Saved: nlp = spacy.load(\"{output / 'model-best'}\")\n")
    doc = nlp(SENTENCE)
    for token in doc:  # the tag and its probability under the CRF (the per-token marginal)
        print(f"  {token.text:12s} {token.pos_:6s} P = {token._.treecrf_marginals['treecrf'][token.pos_]:.3f}")
    print("\nStrongest rules:")
    for label, rule, value, support in nlp.get_pipe("treecrf").rules(top=5):
        print(f"  {label:6s} {value:+.3f} (support {support:.0f})  {rule}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", type=Path, default=Path("quickstart_model"), help="where spacy train saves")
    parser.add_argument("--max-steps", type=int, default=40, help="boosting rounds (one per training step)")
    args = parser.parse_args()
    main(args.output, args.max_steps)

"""Train a treecrf UPOS tagger on the bundled UD English EWT sample with `spacy train`, print its scores and tag
a sentence. Run from the repository root: python examples/quickstart.py [--max-steps N]"""
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


def convert(conllu: Path, out: Path) -> Path:
    docs = conllu_to_docs(conllu.read_text(encoding="utf8"), n_sents=1, no_print=True)
    DocBin(docs=docs).to_disk(out)
    return out


def main(max_steps: int):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train_path = convert(HERE / "data" / "ewt-sample-train.conllu", tmp / "train.spacy")
        dev_path = convert(HERE / "data" / "ewt-sample-dev.conllu", tmp / "dev.spacy")
        train(ROOT / "configs" / "pos.cfg", tmp / "model",
              overrides={"paths.train": str(train_path), "paths.dev": str(dev_path),
                         "training.max_steps": max_steps, "training.eval_frequency": 10,
                         "components.treecrf.store_scores": True})  # keep confidences (off by default)
        nlp = spacy.load(tmp / "model" / "model-best")
        scores = nlp.evaluate(Corpus(str(dev_path), gold_preproc=True)(nlp))
        print(f"\nUPOS accuracy on the 300 dev sentences: {scores['pos_acc']:.4f} "
              f"({scores['speed']:.0f} words/s)")
        doc = nlp("The quick brown fox jumps over the lazy dog in New York .")
        print(" ".join(f"{t.text}/{t.pos_}" for t in doc))
        best = max(doc[4]._.treecrf_marginals["treecrf"].items(), key=lambda kv: kv[1])
        print(f"P({doc[4].text} = {best[0]}) = {best[1]:.3f}")
        print("\nStrongest rules:")
        for label, rule, value, support in nlp.get_pipe("treecrf").rules(top=5):
            print(f"  {label:6s} {value:+.3f} (support {support:.0f})  {rule}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=40, help="boosting rounds (one per training step)")
    main(parser.parse_args().max_steps)

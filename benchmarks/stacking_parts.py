"""What a stacked treecrf's second stage adds (booster.stack_window): the pipeline's dev score with its whole model
and with its first stage alone (the same model file, the second stage's trees left out), and the component's
tagging speed both ways.

    python benchmarks/stacking_parts.py PIPELINE DEV [--key ents_f] [--repeats 5]

PIPELINE: a trained pipeline whose `treecrf` component is stacked (e.g. a `defaults.py --dev-only --set
stack_window=2` run's model-best); DEV: the dev data as the pipeline's config reads it (its [corpora.dev] reader
with this path: a .spacy file, or a column file for the column reader). Speed: the component alone (`pipe` over
Docs the tokenizer made beforehand, batches of 1,000), the two models timed in alternating turns after a warm-up,
the median of ``--repeats`` turns each.
"""
import argparse
import statistics
import time

import spacy
from spacy import util


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline")
    parser.add_argument("dev")
    parser.add_argument("--key", default="ents_f", help="the score to report (ents_f, pos_acc, spans_chunks_f, ...)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    nlp = spacy.load(args.pipeline)
    config = util.load_config(f"{args.pipeline}/config.cfg", interpolate=True,
                              overrides={"paths.dev": args.dev, "paths.train": args.dev})
    examples = list(util.registry.resolve({"reader": config["corpora"]["dev"]})["reader"](nlp))
    component = nlp.get_pipe("treecrf")
    stacked = component.crf
    if stacked.stage1 is None:
        raise SystemExit(f"{args.pipeline}: its treecrf is not stacked (booster.stack_window = 0)")
    models = {"stacked": stacked, "first stage alone": stacked.stage1}
    texts = [eg.reference.text for eg in examples]
    n_tokens = sum(len(nlp.make_doc(text)) for text in texts)

    def tagging(model) -> float:
        component.crf = model
        docs = [nlp.make_doc(text) for text in texts]
        start = time.perf_counter()
        for _ in component.pipe(docs, batch_size=1000):
            pass
        return n_tokens / (time.perf_counter() - start)
    scores, speeds = {}, {name: [] for name in models}
    for name, model in models.items():
        component.crf = model
        scores[name] = nlp.evaluate(examples)[args.key]
        tagging(model)  # warm-up
    for _ in range(args.repeats):
        for name, model in models.items():
            speeds[name].append(tagging(model))
    component.crf = stacked
    print(f"{args.pipeline}: first stage {stacked.stage1.rounds} rounds, second stage {stacked.rounds}")
    for name in models:
        print(f"  {name}: dev {args.key} {100 * scores[name]:.2f}, component tokens/s "
              f"{statistics.median(speeds[name]):,.0f}")


if __name__ == "__main__":
    main()

"""What a stacked treecrf's second stage adds (booster.stack_window): the pipeline's dev score with its whole model
and with its first stage alone (the same model file, the second stage's trees left out), and the component's
tagging speed both ways.

    python benchmarks/stacking_parts.py PIPELINE DEV [--key ents_f] [--repeats 5]

PIPELINE: a trained pipeline whose `treecrf` component is stacked (e.g. a `defaults.py --dev-only --set
stack_window=2` run's model-best); DEV: the dev data as the pipeline's config reads it (its [corpora.dev] reader
with this path: a .spacy file, or a column file for the column reader; side_by_side.reader_for). --key: the score
reported (default: the component's target's, side_by_side.score_key). Speed: the component alone (`pipe` over
copies of the reader's predicted Docs, made beforehand, so with the input columns the reader keeps on them;
batches of 1,000), the two models timed in alternating turns after a warm-up,
the median of ``--repeats`` turns each.
"""
import argparse
import statistics
import sys
import time

import spacy

from defaults import SCRIPTS

sys.path.insert(0, str(SCRIPTS))
from side_by_side import reader_for, score_key  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline")
    parser.add_argument("dev")
    parser.add_argument("--key", default=None, help="the score to report (default: the target's)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    nlp = spacy.load(args.pipeline)
    examples = list(reader_for(nlp, args.dev)(nlp))
    component = nlp.get_pipe("treecrf")
    key = args.key or score_key(component)
    stacked = component.crf
    if stacked.stage1 is None:
        raise SystemExit(f"{args.pipeline}: its treecrf is not stacked (booster.stack_window = 0)")
    models = {"stacked": stacked, "first stage alone": stacked.stage1}
    n_tokens = sum(len(eg.predicted) for eg in examples)

    def tagging(model) -> float:
        component.crf = model
        docs = [eg.predicted.copy() for eg in examples]
        start = time.perf_counter()
        for _ in component.pipe(docs, batch_size=1000):
            pass
        return n_tokens / (time.perf_counter() - start)
    scores, speeds = {}, {name: [] for name in models}
    for name, model in models.items():
        component.crf = model
        scores[name] = nlp.evaluate(examples)[key]
        tagging(model)  # warm-up
    for _ in range(args.repeats):
        for name, model in models.items():
            speeds[name].append(tagging(model))
    component.crf = stacked
    print(f"{args.pipeline}: first stage {stacked.stage1.rounds} rounds, second stage {stacked.rounds}")
    for name in models:
        print(f"  {name}: dev {key} {100 * scores[name]:.2f}, component tokens/s "
              f"{statistics.median(speeds[name]):,.0f}")


if __name__ == "__main__":
    main()

"""`spacy evaluate`'s words/s, part by part: where the first pass over a test set goes, and what the same pass
reaches without the component (the ceiling spaCy's own tokenizer sets on this machine).

    python benchmarks/evaluate_parts.py PIPELINE_DIR TEST.spacy [--runs 5] [--component treecrf] [--out FILE]

Each run is a fresh `python` process (the first pass is what `spacy evaluate` measures: spaCy's tokenizer fills
its cache, the featurizer meets the unseen words) that loads the pipeline, reads the DocBin and calls
`nlp.evaluate` once, as `spacy evaluate` does. Runs alternate between the pipeline as it is and the same pipeline
with the component disabled, so that both see the same state of the machine; the medians are printed and, with
--out, written as JSON. spaCy's words/s times its tokenizer over every test text and then the pipeline
(Language.evaluate); inside that timed region the child times:

- tokenizer: the `nlp.make_doc` calls;
- features: the component's featurizer (its `_rows`);
- trees and decoding: the rest of the component's `predict`;
- annotations: the component's `set_annotations`;
- other: the rest of the region (spaCy's batching);
- gc: Python's garbage collections inside the region (they happen inside the parts above, so they are also
  counted there), with the number of full (generation-2) ones.
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import gc, json, sys, time
import spacy
import spacy.cli  # as `spacy evaluate` runs: the objects of its modules are part of what a full collection walks
from spacy.training import Corpus
model, data, name, disable = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
nlp = spacy.load(model, disable=[name] if disable else [])
examples = list(Corpus(data)(nlp))
parts = {"tokenizer": 0.0, "features": 0.0, "predict": 0.0, "annotations": 0.0}
region = []
make_doc = nlp.make_doc
def timed_make_doc(text):
    t0 = time.perf_counter()
    if not region:
        region.append(t0)
    doc = make_doc(text)
    parts["tokenizer"] += time.perf_counter() - t0
    return doc
nlp.make_doc = timed_make_doc
def timer(part, function):
    def call(*args, **kwargs):
        t0 = time.perf_counter()
        out = function(*args, **kwargs)
        parts[part] += time.perf_counter() - t0
        return out
    return call
if not disable:
    component = nlp.get_pipe(name)
    component._rows = timer("features", component._rows)
    component.predict = timer("predict", component.predict)
    component.set_annotations = timer("annotations", component.set_annotations)
collections = []
def on_gc(phase, info):
    if phase == "start":
        collections.append([time.perf_counter(), 0.0, info["generation"]])
    else:
        collections[-1][1] = time.perf_counter() - collections[-1][0]
gc.callbacks.append(on_gc)
scores = nlp.evaluate(examples)
gc.callbacks.remove(on_gc)
words = sum(len(eg.reference) for eg in examples)
seconds = words / scores["speed"]
start, end = region[0], region[0] + seconds
inside = [(d, g) for t, d, g in collections if start <= t < end]
print(json.dumps({"words": words, "words_per_second": scores["speed"], "seconds": seconds,
                  "tokenizer": parts["tokenizer"], "features": parts["features"],
                  "trees_and_decoding": parts["predict"] - parts["features"], "annotations": parts["annotations"],
                  "other": seconds - parts["tokenizer"] - parts["predict"] - parts["annotations"],
                  "gc": sum(d for d, g in inside), "full_collections": sum(g == 2 for d, g in inside)}))
"""

PARTS = ("tokenizer", "features", "trees_and_decoding", "annotations", "other", "gc", "full_collections")


def run(pipeline: str, data: str, component: str, disable: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, pipeline, data, component, "1" if disable else "0"],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir())
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", help="a trained pipeline's directory (e.g. a model-best)")
    parser.add_argument("data", help="a test set as a .spacy DocBin")
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind (alternating)")
    parser.add_argument("--component", default="treecrf", help="the component's name in the pipeline")
    parser.add_argument("--out", type=Path, help="write every run and the medians here as JSON")
    args = parser.parse_args()
    with_component, without = [], []
    for i in range(args.runs):
        without.append(run(args.pipeline, args.data, args.component, disable=True))
        with_component.append(run(args.pipeline, args.data, args.component, disable=False))
        print(f"run {i + 1}: {with_component[-1]['words_per_second']:,.0f} words/s, "
              f"{without[-1]['words_per_second']:,.0f} without the component", flush=True)
    medians = {part: statistics.median(r[part] for r in with_component) for part in PARTS}
    speed = statistics.median(r["words_per_second"] for r in with_component)
    ceiling = statistics.median(r["words_per_second"] for r in without)
    print(f"\nmedians of {args.runs} runs, {with_component[0]['words']:,} words")
    print(f"spacy evaluate words/s: {speed:,.0f}; without the component: {ceiling:,.0f} (ratio {speed / ceiling:.2f})")
    for part in PARTS[:-1]:
        print(f"  {part:<20} {medians[part]:.3f} s")
    print(f"  full collections     {medians['full_collections']:g}")
    if args.out:
        args.out.write_text(json.dumps({"pipeline": args.pipeline, "data": args.data, "runs": args.runs,
                                        "words_per_second": speed, "without_component": ceiling,
                                        "medians": medians, "with_component": with_component,
                                        "without": without}, indent=1) + "\n")


if __name__ == "__main__":
    main()

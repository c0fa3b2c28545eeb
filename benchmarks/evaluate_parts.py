"""`spacy evaluate`'s words/s, part by part: where the first pass over a test set goes, and what the same pass
reaches without the component (the ceiling spaCy's own tokenizer sets on this machine).

    python benchmarks/evaluate_parts.py PIPELINE_DIR TEST.spacy [--runs 5] [--component treecrf] [--out FILE]
        [--against SRC]

Each run is a fresh `python` process that runs spaCy's own `evaluate` command (the first pass is what it
measures: spaCy's tokenizer fills its cache, the featurizer meets the unseen words), its Language.evaluate
wrapped with the timers below. Not a copy of the command: whether Python's collector runs a full collection
inside the timed region depends on every container the process made before it, the command's own included.
Runs alternate between the pipeline as it is and the same pipeline with the component disabled, so that both see
the same state of the machine; the medians are printed and, with --out, written as JSON. ``--against SRC`` adds
a third kind of run to each turn: the same pipeline with the package imported from SRC (another checkout's root,
put first on PYTHONPATH), the baseline a change is measured against. spaCy's words/s times its tokenizer over
every test text and then the pipeline (Language.evaluate); inside that timed region the child times:

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
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import gc, json, sys, time
from spacy.language import Language
model, data, name, disable = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
parts = {"tokenizer": 0.0, "features": 0.0, "predict": 0.0, "annotations": 0.0}
region, collections, result = [], [], {}
def timer(part, function, first=False):
    def call(*args, **kwargs):
        t0 = time.perf_counter()
        if first and not region:
            region.append(t0)
        out = function(*args, **kwargs)
        parts[part] += time.perf_counter() - t0
        return out
    return call
def on_gc(phase, info):
    if phase == "start":
        collections.append([time.perf_counter(), 0.0, info["generation"]])
    else:
        collections[-1][1] = time.perf_counter() - collections[-1][0]
evaluate = Language.evaluate
def timed_evaluate(nlp, examples, **kwargs):
    nlp.make_doc = timer("tokenizer", nlp.make_doc, first=True)
    if not disable:
        component = nlp.get_pipe(name)
        component._rows = timer("features", component._rows)
        component.predict = timer("predict", component.predict)
        component.set_annotations = timer("annotations", component.set_annotations)
    examples = list(examples)
    gc.callbacks.append(on_gc)
    if disable:
        with nlp.select_pipes(disable=[name]):
            scores = evaluate(nlp, examples, **kwargs)
    else:
        scores = evaluate(nlp, examples, **kwargs)
    gc.callbacks.remove(on_gc)
    result.update(words=sum(len(eg.reference) for eg in examples), words_per_second=scores["speed"])
    return scores
Language.evaluate = timed_evaluate
sys.argv = ["spacy", "evaluate", model, data]
from spacy.cli import setup_cli
try:
    setup_cli()
except SystemExit:
    pass
seconds = result["words"] / result["words_per_second"]
start, end = region[0], region[0] + seconds
inside = [(d, g) for t, d, g in collections if start <= t < end]
print(json.dumps({**result, "seconds": seconds, "tokenizer": parts["tokenizer"], "features": parts["features"],
                  "trees_and_decoding": parts["predict"] - parts["features"], "annotations": parts["annotations"],
                  "other": seconds - parts["tokenizer"] - parts["predict"] - parts["annotations"],
                  "gc": sum(d for d, g in inside), "full_collections": sum(g == 2 for d, g in inside)}))
"""

PARTS = ("tokenizer", "features", "trees_and_decoding", "annotations", "other", "gc", "full_collections")


def run(pipeline: str, data: str, component: str, disable: bool, source: str = None) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", CHILD, pipeline, data, component, "1" if disable else "0"],
                         check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                         env=env if source else None)
    return json.loads(out.stdout.strip().splitlines()[-1])


def report(title: str, runs: list) -> dict:
    """Print and return the medians of a kind of run."""
    medians = {part: statistics.median(r[part] for r in runs) for part in PARTS}
    print(f"{title}: {statistics.median(r['words_per_second'] for r in runs):,.0f} words/s")
    for part in PARTS[:-1]:
        print(f"  {part:<20} {medians[part]:.3f} s")
    print(f"  full collections     {medians['full_collections']:g} (runs with one or more: "
          f"{sum(r['full_collections'] > 0 for r in runs)} of {len(runs)})")
    return medians


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline", help="a trained pipeline's directory (e.g. a model-best)")
    parser.add_argument("data", help="a test set as a .spacy DocBin")
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind (alternating)")
    parser.add_argument("--component", default="treecrf", help="the component's name in the pipeline")
    parser.add_argument("--out", type=Path, help="write every run and the medians here as JSON")
    parser.add_argument("--against", help="a baseline checkout's root: its package is timed in each turn too")
    args = parser.parse_args()
    with_component, without, baseline = [], [], []
    kinds = [(without, True, None), (with_component, False, None)] + ([(baseline, False, args.against)]
                                                                      if args.against else [])
    for i in range(args.runs):
        for runs, disable, source in (kinds if i % 2 == 0 else kinds[::-1]):  # each kind first in some turns
            runs.append(run(args.pipeline, args.data, args.component, disable, source))
        line = (f"run {i + 1}: {with_component[-1]['words_per_second']:,.0f} words/s, "
                f"{without[-1]['words_per_second']:,.0f} without the component")
        if args.against:
            line += f", {baseline[-1]['words_per_second']:,.0f} with the baseline's package"
        print(line, flush=True)
    speed = statistics.median(r["words_per_second"] for r in with_component)
    ceiling = statistics.median(r["words_per_second"] for r in without)
    print(f"\nmedians of {args.runs} runs, {with_component[0]['words']:,} words; without the component "
          f"{ceiling:,.0f} words/s (ratio {speed / ceiling:.2f})")
    medians = report("spacy evaluate", with_component)
    result = {"pipeline": args.pipeline, "data": args.data, "runs": args.runs, "words_per_second": speed,
              "without_component": ceiling, "medians": medians, "with_component": with_component,
              "without": without}
    if args.against:
        base_speed = statistics.median(r["words_per_second"] for r in baseline)
        result.update(against=args.against, baseline_words_per_second=base_speed,
                      baseline_medians=report(f"the baseline's package ({args.against})", baseline),
                      baseline=baseline)
        print(f"ratio to the baseline: {speed / base_speed:.2f}")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()

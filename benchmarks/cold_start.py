"""Cold start: a new process with an empty numba cache (as after a fresh install) loads a trained pipeline, tags
one sentence, then one batch of over 600 tokens (the partition kernel's size); then twice more with the cache the
earlier processes wrote.

    python benchmarks/cold_start.py PIPELINE_DIR [--text "..."]

Each run is a fresh `python` process with NUMBA_CACHE_DIR pointing at a new temporary directory (cold), then at
the one the cold run filled (second, third). Printed per run: seconds to import spaCy and load the pipeline,
seconds of the first `nlp(text)` and the functions numba compiled up to then; seconds of the large batch and the
functions compiled for it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
from numba.core import dispatcher
compiled = [0]
original = dispatcher.Dispatcher.compile
def counting(self, sig):
    compiled[0] += 1
    return original(self, sig)
dispatcher.Dispatcher.compile = counting
t0 = time.perf_counter()
import spacy
nlp = spacy.load(sys.argv[1])
t1 = time.perf_counter()
nlp(sys.argv[2])
t2 = time.perf_counter()
first = compiled[0]
list(nlp.pipe([sys.argv[2]] * (1 + 600 // len(nlp.make_doc(sys.argv[2])))))  # one batch of over 600 tokens
t3 = time.perf_counter()
print(json.dumps({"load_seconds": t1 - t0, "first_call_seconds": t2 - t1, "compiled": first,
                  "large_batch_seconds": t3 - t2, "compiled_large": compiled[0] - first}))
"""


def run(pipeline: str, text: str, cache: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, pipeline, text], check=True, capture_output=True, text=True,
                         env={**os.environ, "NUMBA_CACHE_DIR": cache})
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pipeline")
    parser.add_argument("--text", default="Alice Smith lives in Paris and works for the United Nations .")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cache:
        for name in ("cold", "second", "third"):
            r = run(args.pipeline, args.text, cache)
            print(f"{name}: load {r['load_seconds']:.2f} s, first nlp(text) {r['first_call_seconds']:.2f} s, "
                  f"{r['compiled']} functions compiled; then a first batch of over 600 tokens "
                  f"{r['large_batch_seconds']:.2f} s, {r['compiled_large']} compiled", flush=True)


if __name__ == "__main__":
    main()

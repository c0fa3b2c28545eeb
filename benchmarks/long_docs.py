"""Peak memory and time of tagging one very long Doc with a trained treecrf pipeline (linear growth check).

    python benchmarks/long_docs.py PIPELINE [--lengths 10000 100000]
Each length runs in a fresh process; words are drawn from a fixed English word list, so only length varies.
"""
import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys, time
import numpy as np, spacy
from spacy.tokens import Doc
nlp = spacy.load(sys.argv[1]); n = int(sys.argv[2])
words = ("The European Commission said on Thursday it disagreed with German advice to consumers to shun "
         "British lamb until scientists determine whether mad cow disease can be transmitted to sheep .").split()
doc = Doc(nlp.vocab, words=[words[i % len(words)] for i in range(n)])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
for name, proc in nlp.pipeline:
    doc = proc(doc)
seconds = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
finite = all(np.isfinite(list(p.values())).all() for tok in (doc[i] for i in range(0, n, max(1, n // 1000)))
             for p in (tok._.treecrf_marginals or {}).values())
print(json.dumps({"tokens": n, "seconds": seconds, "peak_mb": peak / 1024, "added_mb": (peak - base) / 1024,
                  "finite_marginals": bool(finite)}))
"""


def main(pipeline: str, lengths):
    for n in lengths:
        out = subprocess.run([sys.executable, "-c", CHILD, pipeline, str(n)], capture_output=True, text=True,
                             check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['tokens']:>8d} tokens: {r['seconds']:7.2f} s, peak RSS {r['peak_mb']:7.0f} MB "
              f"(+{r['added_mb']:.0f} MB while tagging), marginals finite: {r['finite_marginals']}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pipeline")
    parser.add_argument("--lengths", type=int, nargs="+", default=[10000, 100000])
    args = parser.parse_args()
    main(args.pipeline, args.lengths)

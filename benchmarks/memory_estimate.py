"""What spacy_treecrf.engine.memory.training_bytes estimates for a fit of K random labels over T positions (the
estimator's defaults, one round), against that fit's peak resident memory, each size in a fresh process.

    python benchmarks/memory_estimate.py [--labels 2000] [--positions 5000 20000]
"""
import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, resource, sys
import numpy as np
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine.memory import training_bytes
K, T = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
X = [[{"w": f"w{rng.integers(500)}"} for _ in range(50)] for _ in range(T // 50)]
y = [[f"L{rng.integers(K)}" for _ in range(50)] for _ in range(T // 50)]
n_labels, n_positions = len({label for seq in y for label in seq}), T // 50 * 50
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
TreeCRF(n_rounds=1, early_stopping=False, max_leaves=8).fit(X, y)
print(json.dumps({"labels": n_labels, "positions": n_positions,
                  "estimate_gib": training_bytes(n_positions, n_labels) / 2 ** 30,
                  "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
                  "rss_before_fit_gib": before}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=2000)
    parser.add_argument("--positions", type=int, nargs="+", default=[5000, 20000])
    args = parser.parse_args()
    print("| labels | positions | estimate GiB | peak RSS GiB | RSS before the fit GiB |")
    print("|---:|---:|---:|---:|---:|")
    for T in args.positions:
        out = subprocess.run([sys.executable, "-c", CHILD, str(args.labels), str(T)], check=True, text=True,
                             capture_output=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {r['labels']:,} | {r['positions']:,} | {r['estimate_gib']:.2f} | {r['peak_rss_gib']:.2f} | "
              f"{r['rss_before_fit_gib']:.2f} |", flush=True)


if __name__ == "__main__":
    main()

"""Where the estimator rows' tagging time goes, per test position, for both learners of benchmarks/defaults.py,
and how fast TreeCRF could tag against CRFsuite if its own featurization cost nothing.

    TREECRF_DATA_DIR=../shared/data python benchmarks/estimator_tagging_parts.py --work WORK \\
        [--rows nettalk nettalk_phoneme_stress protein hyphenation] [--out benchmarks/results/estimator_tagging_parts]

Per row: TreeCRF as defaults.py fits it (its defaults and the row's window, on each position's own symbol and
classes: defaults.token_features) and sklearn-crfsuite with the c1 / c2 that defaults.py's grid chose for the row
(read from WORK/rows/ROW.json) on the window and class dicts, both fitted on the row's training data; then on its
test symbols, microseconds a position (measure.median_seconds):
- dicts: the window and class feature dicts CRFsuite reads (defaults.featurize);
- TreeCRF: its input (token_features), that input to windowed rows, the trees (potentials, on the model's
  threads), decoding, and its whole predict from that input;
- CRFsuite: predict from the dicts; the same features built straight from the symbols as CRFsuite's attribute
  names (``names``: per offset and symbol a ready list of names, joined per position: the cheapest Python input
  of the same features, checked to give the same predictions); predict from those names.
Two ratios of CRFsuite's time to TreeCRF's: ``table``, each learner's featurization + tagging from the symbols
(defaults.py's measure), and ``bound``, CRFsuite from its cheapest input against TreeCRF's trees + decoding alone
(what TreeCRF would reach if its input cost nothing). The acceptance asks for 2.
"""
import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path

import defaults
import paper_tasks
from measure import median_seconds
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine import booster

REPO = Path(__file__).resolve().parents[1]


def name_tables(symbols, half: int, classes: dict) -> list:
    """Per offset d (index d + half), symbol -> its CRFsuite attribute names there: 'w[d]:symbol', the name
    python-crfsuite gives paper_tasks.window_features' item, and 'class[d]' for each class holding it
    (add_class_features' items)."""
    tables = []
    for d in range(-half, half + 1):
        table = {s: [f"w[{d:+d}]:{s}"] + [f"{name}[{d:+d}]" for name, members in classes.items() if s in members]
                 for s in symbols}
        table[None] = [f"w[{d:+d}]:{paper_tasks.PAD}"]  # outside the sequence: the padding symbol, no class
        tables.append(table)
    return tables


def names(sequences, tables, half: int) -> list:
    """Per sequence, per position, the attribute names of its window (name_tables)."""
    out = []
    for x in sequences:
        n = len(x)
        padded = [None] * half + list(x) + [None] * half
        out.append([[name for d in range(2 * half + 1) for name in tables[d][padded[t + d]]] for t in range(n)])
    return out


def median_us(call, positions: int) -> float:
    """Microseconds a position of call() (measure.median_seconds)."""
    return median_seconds(call) * 1e6 / positions


def row_parts(row: str, data: Path, work: Path) -> dict:
    import sklearn_crfsuite
    chosen = {s["system"]: s for s in json.loads((work / "rows" / f"{row}.json").read_text())["systems"]}
    c1, c2 = chosen["CRFsuite"]["detail"]["c1"], chosen["CRFsuite"]["detail"]["c2"]
    train, _, _, test, featurize = defaults.estimator_sequences(row, data)
    X, y = defaults.as_xy(train, featurize)
    symbols = [x for x, _ in test]
    positions = sum(map(len, symbols))
    half, classes = featurize.keywords["half"], featurize.keywords["classes"]
    tables = name_tables({s for x, _ in train + test for s in x}, half, classes)
    own = functools.partial(defaults.token_features, classes=classes)
    model = TreeCRF(window=half).fit(own([x for x, _ in train]), y)
    crf = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2).fit(X, y)
    dicts, lists, inputs = featurize(symbols), names(symbols, tables, half), own(symbols)
    if [list(tags) for tags in crf.predict(dicts)] != [list(tags) for tags in crf.predict(lists)]:
        raise SystemExit(f"{row}: CRFsuite tags the name lists differently from the dicts: not the same features")
    phases = paper_tasks.tagging_phases(model, inputs)
    parts = {"dicts": median_us(lambda: featurize(symbols), positions),
             "treecrf_input": median_us(lambda: own(symbols), positions),
             "treecrf_rows": phases["features"] * 1e6 / positions,
             "treecrf_trees": phases["potentials"] * 1e6 / positions,
             "treecrf_decoding": phases["decoding"] * 1e6 / positions,
             "treecrf_predict": median_us(lambda: model.predict(inputs), positions),
             "crfsuite_predict_dicts": median_us(lambda: crf.predict(dicts), positions),
             "names": median_us(lambda: names(symbols, tables, half), positions),
             "crfsuite_predict_names": median_us(lambda: crf.predict(lists), positions)}
    table = (parts["dicts"] + parts["crfsuite_predict_dicts"]) / (parts["treecrf_input"] + parts["treecrf_predict"])
    bound = (parts["names"] + parts["crfsuite_predict_names"]) / (parts["treecrf_trees"] + parts["treecrf_decoding"])
    return dict(row=row, positions=positions, c1=c1, c2=c2, trees=model.ensemble.n_trees,
                max_leaves=booster.resolved_max_leaves(model.max_leaves, sum(map(len, y))), parts=parts,
                table_ratio=table, bound_ratio=bound, commit=defaults.commit(), date=time.strftime("%Y-%m-%d"))


def markdown(results: list) -> str:
    head = ("| row | TreeCRF input | TreeCRF rows | TreeCRF trees | TreeCRF decoding | TreeCRF predict | dicts | "
            "CRFsuite predict (dicts) | names | CRFsuite predict (names) | table ratio | bound ratio |")
    lines = [head, "|---|" + "---:|" * 11]
    for r in results:
        p = r["parts"]
        lines.append(f"| {r['row']} ({r['trees']} trees of <= {r['max_leaves']} leaves) | {p['treecrf_input']:.2f} | "
                     f"{p['treecrf_rows']:.2f} | {p['treecrf_trees']:.2f} | {p['treecrf_decoding']:.2f} | "
                     f"{p['treecrf_predict']:.2f} | {p['dicts']:.2f} | "
                     f"{p['crfsuite_predict_dicts']:.2f} | {p['names']:.2f} | {p['crfsuite_predict_names']:.2f} | "
                     f"{r['table_ratio']:.2f} | {r['bound_ratio']:.2f} |")
    commits = ", ".join(sorted({r["commit"] for r in results}))
    return (f"# The estimator rows' tagging, part by part\n\n`python benchmarks/estimator_tagging_parts.py` (code at "
            f"{commits}, {results[0]['date']}): microseconds a test position, medians of 5 passes; ratios are "
            "CRFsuite's time over TreeCRF's (the acceptance asks for 2). See the script's docstring.\n\n"
            + "\n".join(lines) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="defaults.py's WORK (its rows/*.json: c1, c2)")
    parser.add_argument("--rows", nargs="+", choices=defaults.ESTIMATOR_ROWS, default=list(defaults.ESTIMATOR_ROWS))
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "estimator_tagging_parts")
    args = parser.parse_args()
    data = Path(os.environ.get("TREECRF_DATA_DIR", REPO.parent / "shared" / "data"))
    results = []
    for row in args.rows:
        results.append(row_parts(row, data, args.work))
        print(json.dumps(results[-1]), flush=True)
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    args.out.with_suffix(".md").write_text(markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    sys.exit(main())

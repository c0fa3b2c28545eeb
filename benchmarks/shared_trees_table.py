"""Per-label trees against one shared tree a round, everything else at the defaults: the table of the
shared-trees issue.

    TREECRF_DATA_DIR=../shared/data python benchmarks/shared_trees_table.py [--rows ROW ...] [--work DIR]
        [--out benchmarks/results/shared_trees]

Each row trains TreeCRF twice as benchmarks/defaults.py does (the same data, the same generated config or
`TreeCRF()`), once with the defaults (shared_trees true) and once with `shared_trees = false` alone changed:
- spaCy rows (ner, chunking, upos, xpos): `spacy init config` + `spacy train` with spaCy's default training
  block (rounds by early stopping on dev), measured by side_by_side.py without CRFsuite: test score, training
  seconds without dev evaluations, rounds of model-best, tagging tokens/s of `nlp.pipe`, peak RSS of training
  or tagging, whichever is larger. With --work pointing at defaults.py's work folder the shared run is that
  benchmark's model (trained before: kept).
- estimator rows (nettalk, nettalk_phoneme_stress, protein): `TreeCRF(shared_trees=...).fit(X, y)` (it holds
  out 10% of the training sequences to stop), in a fresh process: test accuracy, fit seconds, positions/s of
  predict from the feature dicts, peak RSS.
Trees: the trees of the model (per-label: one per label and round). Each row goes to WORK/shared_trees/ROW.json
when it is done; every invocation rewrites OUT.md / OUT.json from the rows present.
"""
import argparse
import json
import os
import sys
import time
from pathlib import Path

import defaults

ROWS = ("ner", "chunking", "upos", "xpos", "nettalk", "nettalk_phoneme_stress", "protein")
KINDS = {"shared": ("true", True), "per_label": ("false", False)}  # name: (config value, estimator argument)


def spacy_row(row: str, data: Path, work: Path) -> dict:
    files = defaults.spacy_corpus(row, data, work)
    command = [sys.executable, defaults.SCRIPTS / "side_by_side.py", "--task", row, "--out",
               work / row / "shared_trees_bench", "--train", files[0], "--dev", files[1], "--test", files[2],
               "--no-crf"]
    for kind, (value, _) in KINDS.items():
        run_dir = work / row / ("treecrf" if kind == "shared" else kind)
        defaults.train_pipeline("treecrf", row, files, run_dir, ("--components.treecrf.booster.shared_trees", value))
        command += ["--treecrf", f"{kind}={run_dir}"]
    defaults.run(command)
    bench = json.loads((work / row / "shared_trees_bench" / "results.json").read_text())
    out = {}
    for r in bench["rows"]:
        kind = r["system"].split(" ", 1)[1]  # "TreeCRF LABEL"
        out[kind] = dict(score=r["score"], train_seconds=r.get("train_seconds"), rounds=r.get("rounds"),
                         trees=r["trees"], tokens_per_second=r.get("tokens_per_second"),
                         peak_rss_mb=max(filter(None, (r.get("train_peak_rss_mb"), r.get("tag_peak_rss_mb")))))
    return dict(metric=defaults.SPACY_ROWS[row][1], systems=out)


def estimator_row(row: str, data: Path) -> dict:
    import paper_tasks
    train, _, _, test = defaults.estimator_data(row, data)
    out = {}
    for kind, (_, shared) in KINDS.items():
        seconds, accuracy, speed, rss, rounds, trees = paper_tasks.in_fresh_process(
            defaults.fit_treecrf, train, test, dict(shared_trees=shared))
        print(f"  {row} {kind}: {accuracy * 100:.2f}, {rounds} rounds, {trees} trees, {seconds:.1f} s, "
              f"{speed:,.0f} positions/s, {rss:,.0f} MB", flush=True)
        out[kind] = dict(score=accuracy, train_seconds=seconds, rounds=rounds, trees=trees, tokens_per_second=speed,
                         peak_rss_mb=rss)
    return dict(metric="accuracy", systems=out)


def table(results: dict) -> str:
    lines = ["| task | metric | trees | test score | training s | rounds | trees in the model | tokens/s | "
             "peak RSS MB |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for row in ROWS:
        for kind in KINDS:
            r = results.get(row, {}).get("systems", {}).get(kind)
            if r:
                lines.append(f"| {row} | {results[row]['metric']} | {kind.replace('_', '-')} | "
                             f"{r['score'] * 100:.2f} | {defaults.fmt(r['train_seconds'], '.1f')} | {r['rounds']} | "
                             f"{r['trees']:,} | {defaults.fmt(r['tokens_per_second'], ',.0f')} | "
                             f"{defaults.fmt(r['peak_rss_mb'], ',.0f')} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--work", type=Path, default=Path("defaults_bench"), help="as benchmarks/defaults.py's")
    parser.add_argument("--out", type=Path, default=defaults.REPO / "benchmarks" / "results" / "shared_trees")
    parser.add_argument("--table-only", action="store_true", help="rewrite OUT from the rows present")
    parser.add_argument("--note", nargs="*", default=[], metavar="ROW=TEXT",
                        help="a remark on how a row present ran (the machine, other jobs), kept in its file")
    args = parser.parse_args()
    data = Path(os.environ.get("TREECRF_DATA_DIR") or defaults.REPO.parent / "shared" / "data")
    if not data.is_dir():
        raise SystemExit(f"data directory {data} not found: set TREECRF_DATA_DIR")
    sys.path.insert(0, str(defaults.SCRIPTS))
    rows_dir = args.work / "shared_trees"
    rows_dir.mkdir(parents=True, exist_ok=True)
    if not args.table_only:
        defaults.run([sys.executable, "-m", "spacy_treecrf.precompile"], stdout=defaults.subprocess.DEVNULL)
    for row in [] if args.table_only else args.rows:
        print(f"== {row}", flush=True)
        t0 = time.perf_counter()
        res = spacy_row(row, data, args.work) if row in defaults.SPACY_ROWS else estimator_row(row, data)
        from side_by_side import machine
        res.update(row=row, commit=defaults.commit(), date=time.strftime("%Y-%m-%d"),
                   seconds=time.perf_counter() - t0, machine=machine())
        (rows_dir / f"{row}.json").write_text(json.dumps(res, indent=1))
    for item in args.note:
        row, sep, note = item.partition("=")
        path = rows_dir / f"{row}.json"
        if not sep or not path.exists():
            raise SystemExit(f"--note wants ROW=TEXT for a row present in {rows_dir}, got {item!r}")
        path.write_text(json.dumps({**json.loads(path.read_text()), "note": note}, indent=1))
    results = {p.stem: json.loads(p.read_text()) for p in sorted(rows_dir.glob("*.json"))}
    commits = sorted({r["commit"] for r in results.values()})
    text = ["# Per-label trees against shared trees, at the defaults", "",
            f"`python benchmarks/shared_trees_table.py` (rows: {', '.join(r for r in ROWS if r in results)}); code at "
            f"{', '.join(commits)}; {defaults.describe_machine(results)}. Everything at the defaults except "
            "`shared_trees`; test scores; training seconds without dev evaluations; tokens/s: tagging (spaCy rows: "
            "`nlp.pipe`; estimator rows: predict from the feature dicts); peak RSS of training or tagging.", "",
            table(results), ""]
    for row, r in results.items():
        note = f"; {r['note']}" if r.get("note") else ""
        text.append(f"- {row}: run {r['date']} at {r['commit']}, {r['seconds']:.0f} s{note}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text("\n".join(text) + "\n")
    args.out.with_suffix(".json").write_text(json.dumps(results, indent=1))
    print("\n".join(text))


if __name__ == "__main__":
    main()

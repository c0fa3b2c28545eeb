"""Collect the projects' benchmark outputs into one markdown section and put it into a README between the markers
`<!-- projects-results:start -->` and `<!-- projects-results:end -->`.

    python projects/shared/scripts/results_table.py [--readme README.md] [--projects ner_conll2003 ...]

Reads projects/<name>/benchmark/results.json and projects/<name>/benchmark/*/results.json (side_by_side.py, one
file per benchmark command) and, for the paper tasks,
projects/<name>/benchmark/paper_tasks.json (benchmarks/paper_tasks.py). Without --readme it prints the section.
"""
import argparse
import json
import os
import re
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
START, END = "<!-- projects-results:start -->", "<!-- projects-results:end -->"


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def side_by_side(res, rel, folder: Path):
    """The table of one side_by_side.py run (its results.json in ``folder``, linked as ``rel``), with links to the
    plots plot_curves.py made there, if it did."""
    name = res["task"]
    m = res["machine"]
    plots = "".join(f", [{title}]({rel}/{name}_{stem}.png)" for title, stem in (
        ("dev curves", "dev_curve"), ("training seconds", "train_seconds")) if (folder / f"{name}_{stem}.png").exists())
    out = [f"**`{name}`** ({res.get('settings') or 'default settings'}; {m['cpu']}, {m['cpus']} CPUs, load average "
           f"{m['load_average_at_start'][0]:.1f} at start; {time.strftime('%Y-%m-%d', time.localtime(res['finished']))}"
           f"; benchmark {res['seconds'] / 60:.0f} min). [table]({rel}/results.md){plots}", "",
           "| system | metric | test score | train s | rounds / iterations | tokens/s (no stored scores) "
           "| peak RSS MB (train / tag) | train s ÷ CRFsuite | tokens/s ÷ CRFsuite |",
           "|---|---|---:|---:|---:|---:|---|---:|---:|"]
    for r in res["rows"]:
        extra = f" (c1={r['c1']:g}, c2={r['c2']:g})" if r["kind"] == "crfsuite" else ""
        out.append(f"| {r['system']}{extra} | {r['metric']} | {r['score'] * 100:.2f} | {fmt(r.get('train_seconds'), '.0f')} "
                   f"| {r.get('rounds', '')} | {fmt(r.get('tokens_per_second'), ',.0f')}"
                   f"{' (' + format(r['tokens_per_second_no_scores'], ',.0f') + ')' if r.get('tokens_per_second_no_scores') else ''} | "
                   f"{fmt(r.get('train_peak_rss_mb'), '.0f')} / {fmt(r.get('tag_peak_rss_mb'), '.0f')} | "
                   f"{fmt(r.get('train_seconds_ratio'), '.2f')} | {fmt(r.get('tokens_per_second_ratio'), '.2f')} |")
    return out + [""]


def paper(name, res, rel):
    out = []
    for task in ("nettalk", "protein"):
        if task not in res:
            continue
        r = res[task]
        crf = r["crfsuite"]
        s = res["settings"]
        classes = r["info"].get("classes")
        features = f"residue identity and classes ({', '.join(classes)}); " if classes else ""
        out += [f"**`{name}`, paper's Table 4** (`benchmarks/paper_tasks.py --task {task}`, {features}"
                f"lambdas {s['lambdas']}, leaves {s['leaves']}, at most {s['max_rounds']} rounds; "
                f"total {res['total_seconds'] / 60:.0f} min). "
                f"[log]({rel}/paper_tasks.txt), [accuracy per round]({rel}/{task}_accuracy.png), "
                f"[training seconds]({rel}/{task}_seconds.png)", "",
                "| method | settings | marginal (paper) | Viterbi (paper) | fit s | rounds / iterations | fit s ÷ CRFsuite |",
                "|---|---|---:|---:|---:|---:|---:|"]
        for family in ("shrinkage", "original"):
            f = r[family]
            p = r["paper"][family]
            settings = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in f["params"].items())
            out.append(f"| TreeCRF {family} | {settings} | {f['test']['marginal'] * 100:.2f} ({p['marginal']:.2f}) | "
                       f"{f['test']['viterbi'] * 100:.2f} ({p['viterbi']:.2f}) | {f['seconds']:.1f} | {f['rounds']} | "
                       f"{f['seconds'] / crf['seconds']:.2f} |")
            v = f.get("viterbi_tuned")
            if v:
                out.append(f"| ... tuned for Viterbi | | {v['test']['marginal'] * 100:.2f} | "
                           f"{v['test']['viterbi'] * 100:.2f} | {v['seconds']:.1f} | {v['rounds']} | "
                           f"{v['seconds'] / crf['seconds']:.2f} |")
        out.append(f"| CRFsuite L-BFGS | c1={crf['c1']:g}, c2={crf['c2']:g} | {crf['test']['marginal'] * 100:.2f} | "
                   f"{crf['test']['viterbi'] * 100:.2f} | {crf['seconds']:.1f} | {crf['iterations']} | 1.00 |")
        out.append("")
    return out


def section(names, base: Path = ROOT):
    """The markdown section; its links are relative to ``base``, the directory of the file it goes into."""
    lines = [START, ""]
    link = lambda path: Path(os.path.relpath(path, base)).as_posix()
    for name in names:
        bench = ROOT / "projects" / name / "benchmark"
        for path in sorted(bench.glob("results.json")) + sorted(bench.glob("*/results.json")):
            lines += side_by_side(json.loads(path.read_text()), link(path.parent), path.parent)
        if (bench / "paper_tasks.json").exists():
            lines += paper(name, json.loads((bench / "paper_tasks.json").read_text()), link(bench))
    return "\n".join(lines + [END])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--readme", type=Path, default=None)
    p.add_argument("--projects", nargs="+", default=None)
    args = p.parse_args()
    names = args.projects or sorted(d.name for d in (ROOT / "projects").iterdir()
                                    if (d / "project.yml").exists())
    text = section(names, args.readme.resolve().parent if args.readme else ROOT)
    if args.readme is None:
        print(text)
        return
    readme = args.readme.read_text(encoding="utf8")
    if START in readme and END in readme:
        readme = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: text, readme, flags=re.S)
    else:
        readme = readme.rstrip("\n") + "\n\n" + text + "\n"
    args.readme.write_text(readme, encoding="utf8")
    print(f"{args.readme}: results of {', '.join(names)}")


if __name__ == "__main__":
    main()

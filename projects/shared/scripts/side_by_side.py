"""Side-by-side benchmark of one task: trained treecrf pipelines, sklearn-crfsuite (L-BFGS) on exactly the same
feature columns, and optionally spaCy's stock pipeline, all measured by one command.

    python side_by_side.py --task ner_conll2003 --out benchmark \\
        --train TRAIN --dev DEV --test TEST \\
        --treecrf ner=training/treecrf \\
        [--stock stock=training/stock --stock-test corpus/test.spacy --stock-keys ents_f]

`--treecrf LABEL=DIR[@COMPONENT]`: DIR is a `spacy train` output directory holding `model-best`, the JSONL log
of training_log.py (`log.jsonl`) and timed.py's `run.json` (`--log-dir LABEL=OTHER` reads those two from OTHER,
e.g. for a pipeline put together by `spacy assemble` from a trained component). COMPONENT (default: the last treecrf component) is
the one benchmarked; components before it (e.g. a treecrf tagger in annotating_components) run first.
TRAIN / DEV / TEST are read with the pipeline's own `[corpora.dev]` reader, path replaced, so the predicted docs
carry what training saw (e.g. the CoNLL POS column); TEST's predicted docs hold its gold tokens (a spaCy Corpus
reader's `gold_preproc`), for every system alike: a tagger is scored on the tokens the gold annotates, as the stock
pipelines always were here and as UD taggers are compared, not on what spaCy's tokenizer makes of the text (on UD
EWT dev, 1.7% of the gold tokens have no one-to-one predicted token, each scored wrong).

For every treecrf system, in separate child processes (so each peak RSS is that system's own):
- TreeCRF: `nlp.evaluate` on TEST, and tokens/s of `nlp.pipe` over TEST's predicted docs (after a warm-up on
  its first docs, at least 1,024 tokens and 20 docs).
- CRFsuite: the component's featurizer writes the columns of TRAIN / DEV / TEST (test first, cold cache);
  crfsuite_worker.py fits the c1/c2 grid on TRAIN, keeps the best on DEV, predicts TEST; the predictions are
  scored here with the component's own scorer. Its tokens/s = TEST tokens / (featurization incl. any preceding
  components + CRFsuite tagging).
- Stock spaCy (`--stock`): evaluated on `--stock-test` (a .spacy file, gold tokens) with the keys given.

Training figures come from the training runs: rounds = the model-best's boosting rounds; "train s" = the log's
wall seconds up to the best evaluation minus the dev evaluations (dev words / spaCy's evaluation speed), so it
excludes evaluation as CRFsuite's fit time (no holdout set) does; "wall s" = the whole `spacy train` command.
Writes OUT/results.json and OUT/results.md.
"""
import argparse
import copy
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET_KEYS = {"ner": "ents_f", "tag": "tag_acc", "pos": "pos_acc"}


# ---- helpers shared by parent and children ------------------------------------------------------------------
def load(path):
    import spacy
    import spacy_treecrf  # noqa: F401  (registers the factory and reader even without entry points)
    return spacy.load(path)


def treecrf_component(nlp, name=None):
    from spacy_treecrf.pipe import TreeCRFComponent
    names = [n for n, p in nlp.pipeline if isinstance(p, TreeCRFComponent)]
    if not names:
        sys.exit("no treecrf component in the pipeline")
    name = name or names[-1]
    return name, nlp.get_pipe(name)


def score_key(pipe):
    if pipe.target == "spans":
        return f"spans_{pipe.cfg['spans_key']}_f"
    if pipe.target == "token_attr":
        return f"{pipe.cfg['token_attr']}_acc"
    return TARGET_KEYS[pipe.target]


def reader_for(nlp, path, gold_tokens=False):
    """The pipeline's [corpora.dev] reader with another path; with ``gold_tokens``, the predicted docs of a spaCy
    Corpus reader are made of the gold tokens (words and spaces; the Docs as they are, where spaCy's
    ``gold_preproc`` would also cut them into sentences), as the stock pipelines are scored; column readers always
    keep the file's tokens."""
    from spacy.training import Example
    from spacy.tokens import Doc
    from spacy.util import registry
    cfg = copy.deepcopy(dict(nlp.config.interpolate()["corpora"]["dev"]))
    cfg["path"] = str(path)
    reader = registry.resolve({"reader": cfg})["reader"]
    if not gold_tokens or cfg.get("@readers") != "spacy.Corpus.v1":
        return reader

    def gold_token_examples(nlp):
        for eg in reader(nlp):
            ref = eg.reference
            yield Example(Doc(nlp.vocab, words=[t.text for t in ref], spaces=[bool(t.whitespace_) for t in ref]),
                          ref)
    return gold_token_examples


def stock_reader(path):
    from spacy.training import Corpus
    return Corpus(str(path), gold_preproc=True)


def warm_up_docs(docs, tokens=1024):
    """The first docs, at least ``tokens`` tokens in all (or all of them): a batch that large goes through the
    treecrf partition kernel, which a process loads (or compiles) on its first large batch."""
    n, total = 0, 0
    while n < len(docs) and total < tokens:
        total += len(docs[n])
        n += 1
    return docs[:max(n, 20)]


def peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def numeric(scores):
    return {k: v for k, v in scores.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


# ---- child: a spaCy pipeline's score and throughput ---------------------------------------------------------
def median_pipe_seconds(nlp, read_docs, passes: int = 3) -> float:
    """The median seconds of ``passes`` runs of nlp.pipe, each over freshly read docs: single passes of one model
    varied from 82k to 146k tokens/s on an idle machine (CoNLL-2000 test)."""
    times = []
    for _ in range(passes):
        docs = read_docs()
        t0 = time.perf_counter()
        for _ in nlp.pipe(docs):
            pass
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def child_spacy(args):
    nlp = load(args.pipeline)
    reader = stock_reader(args.test) if args.stock else reader_for(nlp, args.test, gold_tokens=True)
    docs = [eg.predicted for eg in reader(nlp)]
    n_tokens = sum(len(d) for d in docs)
    for _ in nlp.pipe([d.copy() for d in warm_up_docs(docs)]):
        pass
    pipe_seconds = median_pipe_seconds(nlp, lambda: [eg.predicted for eg in reader(nlp)])
    scores = nlp.evaluate(list(reader(nlp)))
    out = dict(scores=numeric(scores), tokens=n_tokens, pipe_seconds=pipe_seconds,
               tokens_per_second=n_tokens / pipe_seconds, peak_rss_mb=peak_rss_mb())
    if not args.stock:  # again without the stored confidences (Viterbi alone unless decode is "marginal")
        for _, proc in nlp.pipeline:
            if "store_scores" in getattr(proc, "cfg", {}):
                proc.cfg["store_scores"] = False
        out["tokens_per_second_no_scores"] = n_tokens / median_pipe_seconds(
            nlp, lambda: [eg.predicted for eg in reader(nlp)])
    Path(args.out).write_text(json.dumps(out))


# ---- child: feature columns for CRFsuite ---------------------------------------------------------------------
def child_features(args):
    import numpy as np
    nlp = load(args.pipeline)
    name, pipe = treecrf_component(nlp, args.component)
    before = nlp.pipeline[:nlp.pipe_names.index(name)]
    index = {label: i for i, label in enumerate(pipe.labels)}
    arrays, info = {"labels": np.array(list(pipe.labels))}, {}
    for split, path in (("test", args.test), ("train", args.train), ("dev", args.dev)):  # test first: cold cache
        examples = list(reader_for(nlp, path, gold_tokens=split == "test")(nlp))
        docs = [eg.predicted for eg in examples]
        if split == "test":  # JIT warm-up outside the timing, as for nlp.pipe
            warm = [d.copy() for d in warm_up_docs(docs)]
            for _, proc in before:
                warm = list(proc.pipe(warm))
            pipe.featurizer(warm)
        t0 = time.perf_counter()
        for _, proc in before:
            docs = list(proc.pipe(docs))
        # training rows leave each doc's own labels out of a label dictionary, as in training
        own = pipe._own_labels(examples) if split == "train" else {}
        indptr, indices, starts = pipe.featurizer(docs, **own)
        seconds = time.perf_counter() - t0
        gold = [label for eg in examples for label in pipe._gold(eg)]
        y = np.array([index.get(label, -1) if label is not None else -1 for label in gold], dtype=np.int32)
        arrays.update({f"{split}_indptr": indptr, f"{split}_indices": indices, f"{split}_starts": starts,
                       f"{split}_y": y})
        info[split] = dict(tokens=int(starts[-1]), docs=len(docs), featurize_seconds=seconds,
                           unknown_labels=int((y < 0).sum()))
    np.savez(args.out, **arrays)
    info["n_features"] = int(pipe.featurizer.n_features)
    info["peak_rss_mb"] = peak_rss_mb()
    Path(args.out + ".json").write_text(json.dumps(info))


# ---- parent -------------------------------------------------------------------------------------------------
def run_child(*argv):
    cmd = [sys.executable, str(Path(__file__).resolve()), *map(str, argv)]
    print("  $", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True)


def training_stats(run_dir: Path, dev_tokens: int, rounds=None):
    """Best evaluation of the JSONL log, training seconds up to it without the evaluations, and the curve.
    spaCy evaluates after the update of step 0, so the curve counts updates (= boosting rounds): step + 1. Among
    equal scores the last one is best: spaCy saves model-best again at every evaluation that ties the best."""
    log = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines() if line.strip()]
    run = json.loads((run_dir / "run.json").read_text()) if (run_dir / "run.json").exists() else {}
    curve, eval_total = [], 0.0
    for rec in log:
        speed = rec["scores"].get("speed")
        eval_total += dev_tokens / speed if speed else 0.0
        curve.append(dict(step=rec["step"] + 1, epoch=rec["epoch"], score=rec["score"],
                          train_seconds=max(0.0, rec["wall_seconds"] - eval_total)))
    best = max(curve, key=lambda r: (r["score"], r["step"])) if curve else None
    return dict(best_step=best["step"] if best else None, best_epoch=best["epoch"] if best else None,
                rounds=rounds if rounds is not None else (best["step"] if best else None),
                train_seconds=best["train_seconds"] if best else None, wall_seconds=run.get("wall_seconds"),
                train_peak_rss_mb=run.get("peak_rss_mb"), curve=curve)


def write_predictions(examples, predictions, pipe):
    from spacy.tokens import Span
    from spacy_treecrf.pipe import bio_spans
    for eg, tags in zip(examples, predictions):
        doc = eg.predicted
        if pipe.target in ("ner", "spans"):
            spans = [Span(doc, s, e, label=lab) for s, e, lab in bio_spans(tags)]
            if pipe.target == "ner":
                doc.ents = spans
            else:
                doc.spans[pipe.cfg["spans_key"]] = spans
        else:  # CRFsuite may predict the stand-in it was trained with for unknown gold labels ("O"): left unset
            known = set(pipe.labels)
            for token, tag in zip(doc, tags):
                if tag not in known:
                    continue
                if pipe.target == "token_attr":
                    token._.set(pipe.cfg["token_attr"], tag)
                else:
                    setattr(token, pipe.target + "_", tag)


def machine():
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return dict(cpu=model or platform.processor(), cpus=os.cpu_count(), system=platform.system(),
                python=platform.python_version(), load_average_at_start=list(os.getloadavg()))


def fmt(v, spec):
    return "" if v is None else format(v, spec)


def markdown(res):
    lines = [f"Task `{res['task']}`, test set. Machine: {res['machine']['cpu']}, {res['machine']['cpus']} CPUs "
             f"(load average at start {res['machine']['load_average_at_start'][0]:.1f}); "
             f"{time.strftime('%Y-%m-%d', time.localtime(res['finished']))}.", "",
             "| system | metric | score | train s | wall s | rounds / iterations | tokens/s | tokens/s, no stored "
             "scores | peak RSS train MB | peak RSS tag MB | train s / CRFsuite | tokens/s / CRFsuite |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["rows"]:
        lines.append(
            f"| {r['system']} | {r['metric']} | {r['score'] * 100:.2f} | {fmt(r.get('train_seconds'), '.1f')} | "
            f"{fmt(r.get('wall_seconds'), '.0f')} | {r.get('rounds', '')} | {fmt(r.get('tokens_per_second'), ',.0f')} | "
            f"{fmt(r.get('tokens_per_second_no_scores'), ',.0f')} | "
            f"{fmt(r.get('train_peak_rss_mb'), '.0f')} | {fmt(r.get('tag_peak_rss_mb'), '.0f')} | "
            f"{fmt(r.get('train_seconds_ratio'), '.2f')} | {fmt(r.get('tokens_per_second_ratio'), '.2f')} |")
    lines += ["", "train s: training only (TreeCRF / stock spaCy: the `spacy train` log up to the best evaluation, "
              "minus dev evaluations; CRFsuite: the fit of the dev-chosen c1/c2, no holdout set). wall s: the whole "
              "training command (TreeCRF / stock: `spacy train` incl. evaluations and the rounds after the best "
              "one until patience ran out; CRFsuite: every grid fit). CRFsuite tokens/s: featurization with the "
              "treecrf featurizer (and any components before it) plus CRFsuite tagging (Viterbi), not through nlp.pipe. "
              "TreeCRF tokens/s: as configured (store_scores on: forward-backward marginals and span confidences "
              "stored on every doc), and again with store_scores off. "
              "CRFsuite peak RSS: its own process (features precomputed) covers training and tagging.", ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--train", required=True)
    p.add_argument("--dev", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--treecrf", action="append", default=[], help="LABEL=TRAINING_DIR[@COMPONENT]")
    p.add_argument("--log-dir", action="append", default=[], help="LABEL=DIR: training log of a --treecrf system")
    p.add_argument("--stock", default=None, help="LABEL=TRAINING_DIR of a stock spaCy pipeline")
    p.add_argument("--stock-test", default=None)
    p.add_argument("--stock-keys", default="ents_f",
                   help="comma-separated score keys, one row each; KEY:OTHER compares with CRFsuite's OTHER row")
    p.add_argument("--crf-grid", nargs="+", default=["0.05,0.01", "0.05,0.1", "0.2,0.01", "0.2,0.1"],
                   help="c1,c2 pairs")
    p.add_argument("--crf-max-iterations", type=int, default=0)
    p.add_argument("--crf", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--crf-curve", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--crf-jobs", type=int, default=1, help="CRFsuite grid points fitted at once (one core each)")
    p.add_argument("--settings", default="", help="free text recorded with the results (e.g. the rounds used)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    res = dict(task=args.task, machine=machine(), settings=args.settings, started=time.time(), rows=[],
               command=sys.argv)
    t_start = time.perf_counter()
    dev_tokens = None
    log_dirs = dict(item.split("=", 1) for item in args.log_dir)
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.treecrf:
            label, _, rest = spec.partition("=")
            run_dir, _, component = rest.partition("@")
            run_dir = Path(run_dir)
            model = run_dir / "model-best"
            print(f"== {args.task}: {label} ({model})", flush=True)
            nlp = load(model)
            name, pipe = treecrf_component(nlp, component or None)
            key = score_key(pipe)
            metric = "acc" if key.endswith("_acc") else "f1"
            dev_tokens = sum(len(eg.predicted) for eg in reader_for(nlp, args.dev)(nlp))
            out = Path(tmp) / f"{label}_spacy.json"
            run_child("_spacy", "--pipeline", model, "--test", args.test, "--out", out)
            tree = json.loads(out.read_text())
            stats = training_stats(Path(log_dirs.get(label, run_dir)), dev_tokens, rounds=pipe.cfg["rounds"])
            row = dict(system=f"TreeCRF {label}", kind="treecrf", metric=key, score=tree["scores"][key],
                       scores=tree["scores"], tokens_per_second=tree["tokens_per_second"],
                       tokens_per_second_no_scores=tree.get("tokens_per_second_no_scores"),
                       tag_peak_rss_mb=tree["peak_rss_mb"], component=name, trees=pipe.ensemble.n_trees, **stats)
            res["rows"].append(row)
            print(f"  TreeCRF {label}: {key} {row['score'] * 100:.2f}, {row['rounds']} rounds, "
                  f"{row['tokens_per_second']:.0f} tokens/s", flush=True)
            if not args.crf:
                continue
            feats = Path(tmp) / f"{label}_features.npz"
            run_child("_features", "--pipeline", model, "--component", name, "--train", args.train,
                      "--dev", args.dev, "--test", args.test, "--out", feats)
            finfo = json.loads(Path(str(feats) + ".json").read_text())
            crf_out = Path(tmp) / f"{label}_crfsuite.json"
            cmd = [sys.executable, str(HERE / "crfsuite_worker.py"), str(feats), str(crf_out), "--metric", metric,
                   "--grid", *args.crf_grid, "--max-iterations", str(args.crf_max_iterations),
                   "--jobs", str(args.crf_jobs)]
            if not args.crf_curve:
                cmd.append("--no-curve")
            print("  $", " ".join(cmd[1:]), flush=True)
            subprocess.run(cmd, check=True)
            crf = json.loads(crf_out.read_text())
            from spacy_treecrf.pipe import treecrf_score
            examples = list(reader_for(nlp, args.test, gold_tokens=True)(nlp))
            write_predictions(examples, crf["test_predictions"], pipe)
            scores = numeric(treecrf_score(examples, target=pipe.target, spans_key=pipe.cfg["spans_key"],
                                           token_attr=pipe.cfg["token_attr"]))
            tag_seconds = finfo["test"]["featurize_seconds"] + crf["predict_seconds"]
            crow = dict(system=f"CRFsuite {label}", kind="crfsuite", metric=key, score=scores[key], scores=scores,
                        c1=crf["chosen"]["c1"], c2=crf["chosen"]["c2"], dev=crf["dev"], grid=crf["grid"],
                        train_seconds=crf["seconds"], wall_seconds=sum(g["seconds"] for g in crf["grid"]),
                        rounds=crf["iterations"], tokens_per_second=finfo["test"]["tokens"] / tag_seconds,
                        train_peak_rss_mb=crf["peak_rss_mb"], tag_peak_rss_mb=crf["peak_rss_mb"],
                        n_features=finfo["n_features"], featurize=finfo,
                        curve=[dict(step=point["iterations"], score=point["score"],
                                    train_seconds=point["train_seconds"]) for point in crf.get("dev_curve", [])],
                        curve_metric=key)
            row["train_seconds_ratio"] = (row["train_seconds"] / crow["train_seconds"]
                                          if row["train_seconds"] is not None else None)
            row["tokens_per_second_ratio"] = row["tokens_per_second"] / crow["tokens_per_second"]
            row["tokens_per_second_no_scores_ratio"] = row["tokens_per_second_no_scores"] / crow["tokens_per_second"]
            crow["train_seconds_ratio"] = crow["tokens_per_second_ratio"] = 1.0
            res["rows"].append(crow)
            print(f"  CRFsuite {label}: {key} {crow['score'] * 100:.2f} (c1={crow['c1']:g}, c2={crow['c2']:g}), "
                  f"{crow['rounds']} iterations, {crow['train_seconds']:.1f} s", flush=True)
        if args.stock:
            label, _, run_dir = args.stock.partition("=")
            run_dir = Path(run_dir)
            print(f"== {args.task}: stock spaCy {label}", flush=True)
            out = Path(tmp) / "stock.json"
            run_child("_spacy", "--pipeline", run_dir / "model-best", "--test", args.stock_test, "--stock",
                      "--out", out)
            st = json.loads(out.read_text())
            stats = training_stats(run_dir, dev_tokens or 0)
            crf_rows = [r for r in res["rows"] if r["kind"] == "crfsuite"]
            for item in args.stock_keys.split(","):
                key, _, compare = item.partition(":")
                srow = dict(system=f"spaCy stock {label}", kind="stock", metric=key, score=st["scores"][key],
                            scores=st["scores"], tokens_per_second=st["tokens_per_second"],
                            tag_peak_rss_mb=st["peak_rss_mb"], **stats)
                same = [r for r in crf_rows if r["metric"] == (compare or key)]
                if same:
                    srow["train_seconds_ratio"] = (srow["train_seconds"] / same[0]["train_seconds"]
                                                   if srow["train_seconds"] is not None else None)
                    srow["tokens_per_second_ratio"] = srow["tokens_per_second"] / same[0]["tokens_per_second"]
                res["rows"].append(srow)
                print(f"  stock {label}: {key} {srow['score'] * 100:.2f}", flush=True)
    sys.path.insert(0, str(HERE))
    from relpaths import relative
    res["command"] = [relative(a) for a in res["command"]]
    res["finished"] = time.time()
    res["seconds"] = time.perf_counter() - t_start
    (args.out / "results.json").write_text(json.dumps(res, indent=1))
    (args.out / "results.md").write_text(markdown(res))
    print(markdown(res))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("_spacy", "_features"):
        mode = sys.argv[1]
        cp = argparse.ArgumentParser()
        cp.add_argument("--pipeline", required=True)
        cp.add_argument("--test", required=True)
        cp.add_argument("--out", required=True)
        cp.add_argument("--stock", action="store_true")
        cp.add_argument("--component", default=None)
        cp.add_argument("--train")
        cp.add_argument("--dev")
        a = cp.parse_args(sys.argv[2:])
        (child_spacy if mode == "_spacy" else child_features)(a)
    else:
        main()

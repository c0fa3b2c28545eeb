"""The paper's NETtalk-stress and protein secondary-structure tasks: TreeCRF next to CRFsuite (Tables 4-5), and
NETtalk with the full phoneme+stress label, which the paper set aside (121 labels in the training split).

Dietterich, Hao & Ashenfelter 2008, Sec. 7: TreeCRF with shrinkage and with the "original" leaf-count-only trees
(Table 4), next to a linear CRF trained by L-BFGS (sklearn-crfsuite) on the same features (Table 5), plus the
per-round cost flatness check (Fig. 2).

    python benchmarks/paper_tasks.py --task all --out results.json [--plot plots/]
    python benchmarks/paper_tasks.py --task none --flatness      # only the per-round cost check
    python benchmarks/paper_tasks.py --task nettalk_phoneme_stress # the large label set (no paper figures)
    python benchmarks/paper_tasks.py --task nettalk_phoneme_stress --families shared   # shared trees only

Data: ``--data-dir``, else $TREECRF_DATA_DIR, else ../shared/data next to the repository root.

Features (both learners get the same dicts): the letter / residue at each offset of a window (NETtalk 13 letters,
offsets -6..+6; protein 11 residues, -5..+5), one-hot, with an explicit padding symbol outside the sequence:
13 x 27 = 351 and 11 x 21 = 231 indicators as in the paper's Table 6 (fewer occur: the centre never pads).
Protein also gets, by default, the residue's physico-chemical classes at each offset (hydrophobic, aromatic, ...;
the lexicons in projects/protein_ss/lexicons, also used by that project's spaCy pipeline): functions of the
residue, so no new information, but a tree can split on a group of residues at once (``--no-residue-classes``:
the paper's residue identity only). ``--residue-scales`` adds published numeric scales of the residue at each
offset (hydropathy, volume, charge, helix / sheet / turn propensities: projects/protein_ss/scales), numeric
features whose thresholds the trees learn (CRFsuite weighs each value linearly).

Settings are chosen on an internal dev split of the TRAINING data only (about 20% of it, deterministic), never
on test; the chosen setting is then retrained on the full training set for the dev-chosen number of rounds.
- NETtalk: a seeded random 20% of the 1000 training words.
- Protein: the 111 training sequences (split at ``<>``) come from 91 proteins (split at the end markers), and
  several proteins are homologous (they share identical 11-residue windows, i.e. identical inputs). Segments of
  one protein and proteins sharing an identical window form one group (80 groups) and stay on the same side of
  the split. A plain random split of segments leaks near-copies into dev: its dev accuracy (~69%) is far above
  test accuracy (~64%) and it keeps asking for more rounds while test accuracy already declines.
``--folds 5`` uses all five such parts in turn (the paper's "internal cross-validation"; about 5x the tuning time).
TreeCRF's rounds come from the dev curve with early stopping (``patience``, counted in rounds at learning rate 1).
Each family (shrinkage: max_leaves=100, lambda tuned; original: lambda=0, max_leaves tuned; shared: one tree a
round for all labels, ``--shared-leaves`` x ``--shared-lambdas`` x ``--shared-l1``) is tuned once for marginal
(forward-backward) decoding and once for Viterbi decoding, as in the paper's Table 4; the test accuracy of every retrained model is
reported under both decoders. CRFsuite's c1 / c2 are tuned on the same dev data. Every full-train fit of a
learner's chosen setting runs in a fresh process, which reports its peak RSS; tagging speed is test positions / s
of ``predict`` (features to labels, median of 3 passes).
"""
import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from measure import median_seconds, peak_rss_mb
from spacy_treecrf import TreeCRF
from spacy_treecrf.engine.booster import PAPER_SETTINGS
from spacy_treecrf.features import read_lexicon

REPO = Path(__file__).resolve().parents[1]
RESIDUE_CLASSES = REPO / "projects" / "protein_ss" / "lexicons"
RESIDUE_SCALES = REPO / "projects" / "protein_ss" / "scales" / "scales.tsv"
PAD = "#"
TASKS = {
    "nettalk": dict(half=6, label="stress", paper={"shrinkage": {"marginal": 85.18, "viterbi": 85.20},
                                                   "original": {"marginal": 84.08, "viterbi": 84.18}},
                    target=85.2, paper_rounds=169, paper_seconds=454.6),
    # each letter's label is its phoneme and stress together (e.g. "k>"): the paper's footnote found the label
    # space too large for TreeCRF and MALLET alike
    "nettalk_phoneme_stress": dict(half=6, label="phoneme_stress", paper=None, target=None),
    "protein": dict(half=5, paper={"shrinkage": {"marginal": 64.52, "viterbi": 62.05},
                                   "original": {"marginal": 62.70, "viterbi": 59.20}},
                    target=64.5, paper_rounds=142, paper_seconds=419.6),
}


# ---- data ---------------------------------------------------------------------------------------------------
def data_dir(arg) -> Path:
    path = Path(arg or os.environ.get("TREECRF_DATA_DIR") or REPO.parent / "shared" / "data")
    if not path.is_dir():
        sys.exit(f"data directory {path} not found: pass --data-dir or set TREECRF_DATA_DIR")
    return path


def load_nettalk(root: Path, label: str = "stress"):
    """(letters, labels) for the project's fixed 1000/1000 word split, a letter's label its stress or (label
    "phoneme_stress") its phoneme and stress together; a word's first entry wins."""
    entries = {}
    lines = (root / "nettalk" / "nettalk.data").read_text(encoding="ascii").splitlines()[10:]  # 10-line header
    for line in lines:
        fields = line.split("\t")
        if len(fields) < 3:
            continue
        word, phonemes, stress = fields[0].strip(), fields[1].strip(), fields[2].strip()
        if word and len(word) == len(phonemes) == len(stress):  # skips the malformed 'gunpowder' line
            entries.setdefault(word, stress if label == "stress" else [p + s for p, s in zip(phonemes, stress)])

    def split(name):
        words = [w.strip() for w in (root / "nettalk" / name).read_text(encoding="ascii").splitlines() if w.strip()]
        return [(list(w), list(entries[w])) for w in words]

    return split("split_train_1000.txt"), split("split_test_1000.txt")


def read_protein(path: Path):
    """Sequences split at ``<>`` (111 train / 17 test), each with its protein id (end markers close a protein)."""
    seqs, proteins = [], []
    cur, protein = None, 0
    for line in path.read_text(encoding="ascii").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line in ("<>", "end", "<end>"):
            if cur and cur[0]:
                seqs.append(cur)
                proteins.append(protein)
            cur = ([], []) if line == "<>" else None
            if line != "<>":
                protein += 1
            continue
        residue, label = line.split()
        if cur is None:
            cur = ([], [])
        cur[0].append(residue)
        cur[1].append(label)
    if cur and cur[0]:
        seqs.append(cur)
        proteins.append(protein)
    return seqs, proteins


def load_protein(root: Path):
    d = root / "protein_secondary_structure"
    train, proteins = read_protein(d / "protein-secondary-structure.train")
    test, _ = read_protein(d / "protein-secondary-structure.test")
    return train, test, proteins


def window_features(symbols, half):
    """One dict per position: offset -> symbol (sklearn-crfsuite turns it into the indicator 'offset=symbol')."""
    n = len(symbols)
    return [{f"w[{d:+d}]": symbols[t + d] if 0 <= t + d < n else PAD for d in range(-half, half + 1)}
            for t in range(n)]


def read_classes(directory: Path):
    """Class name -> its symbols, read as the treecrf featurizer reads the same lexicon files."""
    classes = {path.stem: set(read_lexicon(str(path), lowercase=False)) for path in sorted(directory.glob("*.txt"))}
    if not classes:
        sys.exit(f"no class lexicons (*.txt) in {directory}")
    return classes


def read_scales(path: Path):
    """Residue -> {scale name: value} from a tab-separated table (a header row of scale names)."""
    lines = [line.split("\t") for line in path.read_text().splitlines() if line.strip()]
    return {row[0]: dict(zip(lines[0][1:], map(float, row[1:]))) for row in lines[1:]}


def add_scale_features(positions, symbols, half, scales):
    """Adds 'scale[offset]': value for every scale of the symbol at each offset inside the sequence."""
    n = len(symbols)
    for t, features in enumerate(positions):
        for d in range(-half, half + 1):
            if 0 <= t + d < n and symbols[t + d] in scales:
                features.update({f"{name}[{d:+d}]": value for name, value in scales[symbols[t + d]].items()})
    return positions


def add_class_features(positions, symbols, half, classes):
    """Adds 'class[offset]' for every class of the symbol at each offset inside the sequence."""
    n = len(symbols)
    for t, features in enumerate(positions):
        for d in range(-half, half + 1):
            if 0 <= t + d < n:
                features.update({f"{name}[{d:+d}]": True for name, members in classes.items()
                                 if symbols[t + d] in members})
    return positions


# ---- internal dev split ---------------------------------------------------------------------------------------
def homology_groups(seqs, proteins, k):
    """Union of: segments of one protein, and proteins sharing an identical k-residue window."""
    parent = {p: p for p in proteins}

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    first = {}
    for (x, _), p in zip(seqs, proteins):
        s = "".join(x)
        for i in range(len(s) - k + 1):
            kmer = s[i:i + k]
            if kmer in first:
                parent[find(p)] = find(first[kmer])
            else:
                first[kmer] = p
    return [find(p) for p in proteins]


def dev_folds(train, groups, fraction, seed):
    """Deterministic partition into round(1 / fraction) folds of whole groups: the groups in a seeded random order
    are cut into consecutive chunks of about equal sequence counts. Fold 0 is the single dev split."""
    n_parts = max(2, int(round(1.0 / fraction)))
    ids = sorted(set(groups))
    members = {g: [] for g in ids}
    for i, g in enumerate(groups):
        members[g].append(i)
    folds = [[] for _ in range(n_parts)]
    done = 0
    for j in np.random.default_rng(seed).permutation(len(ids)):
        part = min(n_parts - 1, done * n_parts // len(train))
        folds[part].extend(members[ids[j]])
        done += len(members[ids[j]])
    return [sorted(f) for f in folds]


# ---- learners -----------------------------------------------------------------------------------------------
def accuracy(pred, gold):
    pairs = [(p, g) for ps, gs in zip(pred, gold) for p, g in zip(ps, gs)]
    return sum(p == g for p, g in pairs) / len(pairs)


def treecrf_scores(model, X, y):
    out = {}
    for method in ("marginal", "viterbi"):
        model.decode = method
        out[method] = accuracy(model.predict(X), y)
    model.decode = "marginal"
    return out


def tune_treecrf(grid, folds, args, label, decode="marginal"):
    """Fit every setting on each fold's fit part with its dev part for early stopping (patience in rounds / learning
    rate). The dev curve of a setting is the position-weighted mean over folds, up to the round every fold
    reached; its best round and accuracy pick the setting (ties: fewer rounds)."""
    runs = []
    for setting in grid:
        params = setting["params"]
        patience = int(np.ceil(args.patience / params.get("learning_rate", 1.0)))
        curves, weights, fold_best, seconds = [], [], [], 0.0
        for Xf, yf, Xd, yd in folds:
            model = TreeCRF(n_rounds=setting.get("max_rounds", args.max_rounds), patience=patience, decode=decode,
                            n_threads=args.threads, **params)
            t0 = time.perf_counter()
            model.fit(Xf, yf, Xd, yd)
            seconds += time.perf_counter() - t0
            curves.append([h["dev_accuracy"] for h in model.history_])
            weights.append(sum(map(len, yd)))
            fold_best.append(model.best_round_)
        common = min(map(len, curves))
        dev = list(np.average(np.array([c[:common] for c in curves]), axis=0, weights=weights))
        best_round = int(np.argmax(dev)) + 1
        run = dict(params=params, decode=decode, best_round=best_round, dev_accuracy=float(dev[best_round - 1]),
                   rounds_run=[len(c) for c in curves], fold_best_rounds=fold_best, patience=patience,
                   seconds=seconds, dev_curve=dev)
        runs.append(run)
        print(f"  [{label}, {decode}] {fmt_params(params)}: dev {run['dev_accuracy'] * 100:.2f}% at round "
              f"{best_round} (rounds run {'/'.join(map(str, run['rounds_run']))}, {seconds:.1f} s)", flush=True)
    best = max(runs, key=lambda r: (round(r["dev_accuracy"], 10), -r["best_round"]))
    return best, runs


def tagging_speed(predict, X, tagging=None) -> float:
    """Positions per second of predict(X) (measure.median_seconds: the median of 5 passes after a warm-up, each
    after a full garbage collection); with ``tagging`` (featurize, symbol sequences) a pass is
    predict(featurize(sequences)) instead (a learner's featurization + tagging)."""
    featurize, X = tagging or ((lambda part: part), X)
    return sum(map(len, X)) / median_seconds(lambda: predict(featurize(X)))


def tagging_phases(model, X) -> dict:
    """Seconds of one pass of the TreeCRF's tagging over X by phase, the median of 3: features (X to rows),
    potentials (the trees, as decoding's grouped potentials) and decoding (marginals and their argmax)."""
    from spacy_treecrf.engine import booster
    phases = {"features": [], "potentials": [], "decoding": []}
    for _ in range(3):
        t0 = time.perf_counter()
        indptr, indices, seq_starts, missing_rows = model._rows(X)
        t1 = time.perf_counter()
        P = model.ensemble.scaled_potentials(indptr, indices, model.allowed, seq_starts, model.params.threads,
                                             missing_rows)
        t2 = time.perf_counter()
        booster.decode(P, seq_starts, "marginal", model.params.threads)
        for name, seconds in zip(phases, (t1 - t0, t2 - t1, time.perf_counter() - t2)):
            phases[name].append(seconds)
    return {name: statistics.median(times) for name, times in phases.items()}


def timed_fits(make_model, train, repeats):
    """(fit seconds of each of ``repeats`` fresh models, the last model) on train = (X, y)."""
    times, model = [], None
    for _ in range(repeats):
        model = make_model()
        t0 = time.perf_counter()
        model.fit(*train)
        times.append(time.perf_counter() - t0)
    return times, model


def _fit_treecrf(params, rounds, train, test, threads, repeats):
    """final_treecrf's fits, in a fresh process: (fit seconds, history, test scores, tagging positions/s, peak RSS
    MB of the process, tagging seconds by phase)."""
    times, model = timed_fits(lambda: TreeCRF(n_rounds=rounds, decode="marginal", n_threads=threads,
                                              early_stopping=False, **params),
                              train, repeats)
    rss = peak_rss_mb()  # of the fits (tagging needs less)
    speed = tagging_speed(model.predict, test[0])
    return (times, [h["seconds"] for h in model.history_], treecrf_scores(model, *test), speed, rss,
            tagging_phases(model, test[0]))


def in_fresh_process(function, *args):
    """function(*args) in a spawned process (its peak RSS is its own, not this benchmark's)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args).result()


def final_treecrf(params, rounds, train, test, args, curve=False):
    """Retrain on the full training set for the dev-chosen rounds, timed without any dev evaluation (median of
    ``--repeats`` fits, in a fresh process; training is deterministic, so every fit gives the same model)."""
    Xtr, ytr = train
    Xte, yte = test
    times, cum, scores, speed, rss, phases = in_fresh_process(_fit_treecrf, params, rounds, train, test,
                                                              args.threads, args.repeats)
    per_round = np.diff([0.0] + cum)
    out = dict(params=params, rounds=rounds, seconds=statistics.median(times), seconds_all=times,
               median_round_seconds=float(np.median(per_round)), cumulative_seconds=cum, test=scores,
               positions_per_second=speed, peak_rss_mb=rss, tagging_phases=phases)
    if curve:  # Figure 1: test accuracy per round. Separate runs; their own (test-picked) truncation is unused.
        out["test_curve"] = {}
        for method in ("marginal", "viterbi"):
            n = max(rounds, args.curve_rounds)
            m = TreeCRF(n_rounds=n, patience=n, decode=method, n_threads=args.threads, **params)
            m.fit(Xtr, ytr, Xte, yte)
            out["test_curve"][method] = [h["dev_accuracy"] for h in m.history_]
    return out


CRFSUITE_GRID = [(0.0, 0.01), (0.0, 0.1), (0.0, 1.0), (0.0, 10.0), (0.1, 0.1), (0.5, 0.01)]


def crfsuite_scores(model, X, y):
    viterbi = model.predict(X)
    marginal = [[max(p, key=p.get) for p in seq] for seq in model.predict_marginals(X)]
    return {"marginal": accuracy(marginal, y), "viterbi": accuracy(viterbi, y)}


def run_crfsuite(folds, train, test, args, tagging=None, keep_model: bool = False):
    """c1 / c2 from a small grid on the same folds (position-weighted mean dev accuracy, marginal decoding as
    for TreeCRF), then refit on the full training set (median time of ``--repeats`` fits). ``tagging``:
    (featurize, symbol sequences) to time the tagging from (tagging_speed), None: test's feature dicts, False:
    not timed (positions_per_second None);
    ``keep_model``: the refitted model is returned too (``model``)."""
    import sklearn_crfsuite
    runs = []
    for c1, c2 in CRFSUITE_GRID:
        accs, weights, seconds = {"marginal": [], "viterbi": []}, [], 0.0
        for Xf, yf, Xd, yd in folds:
            model = sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2, max_iterations=args.crf_max_iterations)
            t0 = time.perf_counter()
            model.fit(Xf, yf)
            seconds += time.perf_counter() - t0
            for method, acc in crfsuite_scores(model, Xd, yd).items():
                accs[method].append(acc)
            weights.append(sum(map(len, yd)))
        dev = {method: float(np.average(v, weights=weights)) for method, v in accs.items()}
        runs.append(dict(c1=c1, c2=c2, dev=dev, seconds=seconds))
        print(f"  [crfsuite] c1={c1:g} c2={c2:g}: dev marginal {dev['marginal'] * 100:.2f}% "
              f"viterbi {dev['viterbi'] * 100:.2f}% ({seconds:.1f} s)", flush=True)
    best = max(runs, key=lambda r: r["dev"]["marginal"])
    times, iters, scores, speed, rss, model = in_fresh_process(_fit_crfsuite, best["c1"], best["c2"], train, test,
                                                               args.crf_max_iterations, args.repeats, tagging,
                                                               keep_model)
    return dict(c1=best["c1"], c2=best["c2"], dev=best["dev"], grid=runs, seconds=statistics.median(times),
                seconds_all=times, iterations=len(iters),
                cumulative_seconds=[float(v) for v in np.cumsum([it.get("time", 0.0) for it in iters])],
                test=scores, positions_per_second=speed, peak_rss_mb=rss, **({"model": model} if keep_model else {}))


def _fit_crfsuite(c1, c2, train, test, max_iterations, repeats, tagging=None, keep_model=False):
    """run_crfsuite's refits, in a fresh process: (fit seconds, L-BFGS iterations, test scores, tagging
    positions/s, peak RSS MB, the model with ``keep_model`` else None)."""
    import sklearn_crfsuite
    times, model = timed_fits(lambda: sklearn_crfsuite.CRF(algorithm="lbfgs", c1=c1, c2=c2,
                                                           max_iterations=max_iterations), train, repeats)
    log = model.training_log_
    iters = [dict(it) for it in log.iterations] if log is not None else []
    rss = peak_rss_mb()
    speed = None if tagging is False else tagging_speed(model.predict, test[0], tagging)
    return times, iters, crfsuite_scores(model, *test), speed, rss, model if keep_model else None


# ---- one task -------------------------------------------------------------------------------------------------
def fmt_params(p):
    return ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in p.items())


def shrinkage_grid(args):
    """The paper's per-label trees (PAPER_SETTINGS) with lambda tuned, and the variants asked for."""
    paper = dict(PAPER_SETTINGS, max_leaves=100, learning_rate=1.0)
    grid = [{"params": dict(paper, shrinkage=float(lam))} for lam in args.lambdas]
    grid += [{"params": dict(paper, shrinkage=float(lam), loss=loss)}
             for loss in args.other_losses for lam in args.lambdas]
    for lam in args.slow_lambdas:  # learning rate < 1 (Friedman's shrinkage on top of the paper's lambda)
        grid.append({"params": dict(paper, shrinkage=float(lam), learning_rate=args.slow_rate),
                     "max_rounds": args.slow_max_rounds})
    for lam in args.newton_lambdas:  # Newton leaf values (Friedman's TreeBoost step), at rate 1 and the slow rate
        grid += [{"params": dict(paper, shrinkage=float(lam), learning_rate=rate, leaf_values="newton"),
                  "max_rounds": args.max_rounds if rate == 1.0 else args.slow_max_rounds}
                 for rate in (1.0, args.slow_rate)]
    for name in ("subsample", "colsample"):  # Friedman's stochastic gradient boosting; per-tree feature columns
        share = getattr(args, name)
        grid += [{"params": dict(paper, shrinkage=float(lam), **{name: share})}
                 for lam in (args.lambdas if share < 1 else ())]
    return grid


def original_grid(args):
    return [{"params": dict(PAPER_SETTINGS, max_leaves=int(L), shrinkage=0.0, learning_rate=1.0)} for L in args.leaves]


def shared_grid(args):
    """Shared trees (one a round for all labels): their leaves are few next to K per-label trees' per round, so
    larger trees; position_mean leaves (the paper's mean over a leaf's cells steps far too short there); an L1
    penalty on leaf values keeps only the labels that matter in a leaf (smaller models, cheaper tagging)."""
    return [{"params": dict(max_leaves=int(L), shrinkage=float(lam), learning_rate=1.0, shared_trees=True,
                            leaf_values=args.shared_leaf_values, label_splits=splits, l1=float(l1))}
            for L in args.shared_leaves for lam in args.shared_lambdas for splits in args.shared_label_splits
            for l1 in args.shared_l1]


def run_task(name, root, args):
    spec = TASKS[name]
    print(f"\n=== {name} ===", flush=True)
    if name.startswith("nettalk"):
        train, test = load_nettalk(root, spec["label"])
        groups = list(range(len(train)))
    else:
        train, test, proteins = load_protein(root)
        groups = homology_groups(train, proteins, 2 * spec["half"] + 1)
    classes = read_classes(RESIDUE_CLASSES) if name == "protein" and args.residue_classes else {}
    scales = read_scales(RESIDUE_SCALES) if name == "protein" and args.residue_scales else {}
    X = lambda seqs: [add_scale_features(add_class_features(window_features(x, spec["half"]), x, spec["half"],
                                                            classes), x, spec["half"], scales) for x, _ in seqs]
    Y = lambda seqs: [list(y) for _, y in seqs]
    Xtr, ytr, Xte, yte = X(train), Y(train), X(test), Y(test)
    parts = dev_folds(train, groups, args.dev_fraction, args.seed)[:args.folds]
    folds = []
    for dev in parts:
        dev_set = set(dev)
        fit = [i for i in range(len(train)) if i not in dev_set]
        folds.append(([Xtr[i] for i in fit], [ytr[i] for i in fit], [Xtr[i] for i in dev], [ytr[i] for i in dev]))
    n_feat = len({f"{k}={v}" for seq in Xtr for pos in seq for k, v in pos.items()})
    info = dict(classes=sorted(classes), scales=sorted(next(iter(scales.values()), {})), train_sequences=len(train), test_sequences=len(test),
                train_positions=sum(map(len, ytr)), test_positions=sum(map(len, yte)), groups=len(set(groups)),
                features=n_feat,
                dev_sequences=[len(d) for d in parts], dev_positions=[sum(len(ytr[i]) for i in d) for d in parts],
                labels=sorted({l for ys in ytr for l in ys}))
    print(f"  {info['train_sequences']} train / {info['test_sequences']} test sequences, {info['train_positions']} / "
          f"{info['test_positions']} positions, {n_feat} features; {info['groups']} split groups; dev "
          f"{'fold' if len(parts) == 1 else f'{len(parts)} folds'}: "
          f"{'/'.join(map(str, info['dev_sequences']))} sequences, "
          f"{'/'.join(map(str, info['dev_positions']))} positions", flush=True)
    if classes:
        print(f"  residue identity and classes ({', '.join(info['classes'])}) at every offset", flush=True)
    if scales:
        print(f"  residue scales ({', '.join(info['scales'])}) at every offset, as numbers", flush=True)

    result = dict(task=name, info=info, paper=spec["paper"], target=spec["target"])
    families = {"shrinkage": shrinkage_grid(args), "original": original_grid(args), "shared": shared_grid(args)}
    families = {name: grid for name, grid in families.items() if name in args.families}
    decoders = ["marginal"] + (["viterbi"] if args.tune_viterbi else [])
    for family, grid in families.items():
        for decode in decoders:
            t0 = time.perf_counter()
            best, runs = tune_treecrf(grid, folds, args, family, decode)
            tuning = time.perf_counter() - t0
            final = final_treecrf(best["params"], best["best_round"], (Xtr, ytr), (Xte, yte), args,
                                  curve=bool(args.plot) and family == "shrinkage" and decode == "marginal")
            final.update(tuned_for=decode, dev_accuracy=best["dev_accuracy"], tuning_seconds=tuning, grid=runs,
                         dev_curve=best["dev_curve"])
            if decode == "marginal":
                result[family] = final
            else:
                result[family]["viterbi_tuned"] = final
            print(f"  [{family}, tuned for {decode}] chosen {fmt_params(best['params'])}, {best['best_round']} "
                  f"rounds: test marginal {final['test']['marginal'] * 100:.2f}%, viterbi "
                  f"{final['test']['viterbi'] * 100:.2f}% (full-train fit {final['seconds']:.1f} s)", flush=True)
    t0 = time.perf_counter()
    result["crfsuite"] = run_crfsuite(folds, (Xtr, ytr), (Xte, yte), args)
    result["crfsuite"]["tuning_seconds"] = time.perf_counter() - t0
    print_table(result)
    return result


def print_table(res):
    crf = res["crfsuite"]
    name = res["task"]
    print(f"\n{name}: test token accuracy (%), paper's Table 4 in brackets; fit s = full-train fit (median of "
          f"repeats); x CRFsuite = fit s / CRFsuite fit s")
    head = (f"{'method':<20}{'settings (marginal-tuned)':<46}{'marginal':>15}{'viterbi':>15}{'fit s':>7}"
            f"{'rounds':>7}{'x CRFsuite':>11}")
    print(head)
    print("-" * len(head))
    for family in [f for f in ("shrinkage", "original", "shared") if f in res]:
        r = res[family]
        paper = (res["paper"] or {}).get(family)
        bracket = (lambda decoder: f" ({paper[decoder]:5.2f})") if paper else (lambda decoder: " " * 8)
        print(f"{'TreeCRF ' + family:<20}{fmt_params(r['params']):<46}"
              f"{r['test']['marginal'] * 100:>7.2f}{bracket('marginal')}"
              f"{r['test']['viterbi'] * 100:>7.2f}{bracket('viterbi')}"
              f"{r['seconds']:>7.1f}{r['rounds']:>7}{r['seconds'] / crf['seconds']:>11.2f}")
        v = r.get("viterbi_tuned")
        if v:
            print(f"{'  tuned for Viterbi':<20}{fmt_params(v['params']):<46}{v['test']['marginal'] * 100:>7.2f}{'':8}"
                  f"{v['test']['viterbi'] * 100:>7.2f}{bracket('viterbi')}"
                  f"{v['seconds']:>7.1f}{v['rounds']:>7}{v['seconds'] / crf['seconds']:>11.2f}")
    print(f"{'CRFsuite L-BFGS':<20}{'c1=%g, c2=%g' % (crf['c1'], crf['c2']):<46}"
          f"{crf['test']['marginal'] * 100:>7.2f}{'':8}{crf['test']['viterbi'] * 100:>7.2f}{'':8}"
          f"{crf['seconds']:>7.1f}{crf['iterations']:>7}{1.0:>11.2f}")
    families = [f for f in ("shrinkage", "original", "shared") if f in res]
    if res["target"] is not None and "shrinkage" in res:
        ok = res["shrinkage"]["test"]["marginal"] * 100 >= res["target"]
        print(f"target: TreeCRF shrinkage, marginal >= {res['target']}%: {'MET' if ok else 'NOT MET'}")
    print("tuning seconds: " + ", ".join(f"TreeCRF {f} {res[f]['tuning_seconds']:.0f}" for f in families)
          + f", CRFsuite {crf['tuning_seconds']:.0f}; CRFsuite {crf['iterations']} L-BFGS iterations")
    for f in families + ["crfsuite"]:
        r = res[f]
        round_ms = f", median round {r['median_round_seconds'] * 1000:.0f} ms" if f != "crfsuite" else ""
        phases = "".join(f", {name} {seconds:.3f} s" for name, seconds in r.get("tagging_phases", {}).items())
        print(f"{f}: tagging {r['positions_per_second']:,.0f} positions/s{' (' + phases[2:] + ')' if phases else ''}"
              f", peak RSS of the full-train fit {r['peak_rss_mb']:,.0f} MB{round_ms}")


# ---- per-round cost flatness ------------------------------------------------------------------------------------
def flatness(root, args):
    train, _ = load_nettalk(root)
    X = [window_features(x, 6) for x, _ in train]
    y = [list(l) for _, l in train]
    model = TreeCRF(n_rounds=200, max_leaves=100, shrinkage=args.flatness_shrinkage, n_threads=args.threads,
                    early_stopping=False, **PAPER_SETTINGS)
    model.fit(X, y)
    cum = np.array([h["seconds"] for h in model.history_])
    per = np.diff(np.concatenate([[0.0], cum]))
    late, early = per[180:200], per[10:30]
    out = dict(shrinkage=args.flatness_shrinkage, rounds=len(per), total_seconds=float(cum[-1]),
               mean_ratio=float(late.mean() / early.mean()), median_ratio=float(np.median(late) / np.median(early)),
               mean_early=float(early.mean()), mean_late=float(late.mean()), per_round_seconds=per.tolist())
    print(f"\nflatness (NETtalk, 200 rounds, max_leaves=100, shrinkage={args.flatness_shrinkage:g}, "
          f"{cum[-1]:.1f} s): rounds 11-30 mean {out['mean_early'] * 1000:.1f} ms, rounds 181-200 mean "
          f"{out['mean_late'] * 1000:.1f} ms -> ratio {out['mean_ratio']:.3f} (medians: {out['median_ratio']:.3f}); "
          f"target <= 1.2: {'MET' if out['mean_ratio'] <= 1.2 else 'NOT MET'}", flush=True)
    return out


# ---- plots ------------------------------------------------------------------------------------------------------
def plot(results, out_dir: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, res in results.items():
        families = [f for f in ("shrinkage", "shared", "original") if f in res]
        sh = res[families[0]]
        fig, ax = plt.subplots(figsize=(6, 4))
        for method, style in (("marginal", "-"), ("viterbi", "--")):
            curve = sh.get("test_curve", {}).get(method)
            if curve:
                ax.plot(range(1, len(curve) + 1), np.array(curve) * 100, style, label=f"test, {method}")
        ax.plot(range(1, len(sh["dev_curve"]) + 1), np.array(sh["dev_curve"]) * 100, ":",
                label="internal dev, marginal (fit split)")
        ax.axvline(sh["rounds"], color="grey", lw=0.8)
        ax.axhline(res["crfsuite"]["test"]["marginal"] * 100, color="k", lw=0.8, ls="-.", label="CRFsuite test, marginal")
        ax.set_xlabel("boosting round")
        ax.set_ylabel("token accuracy (%)")
        ax.set_title(f"{name}: TreeCRF {fmt_params(sh['params'])}, {sh['rounds']} rounds (dev-chosen)", fontsize=8)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}_accuracy.png", dpi=120)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 4))
        for family in families:
            cum = res[family]["cumulative_seconds"]
            ax.plot(range(1, len(cum) + 1), cum, label=f"TreeCRF {family}")
        crf = res["crfsuite"]
        if crf["cumulative_seconds"]:
            ax.plot(range(1, len(crf["cumulative_seconds"]) + 1), crf["cumulative_seconds"], label="CRFsuite L-BFGS")
        ax.set_xlabel("round / L-BFGS iteration")
        ax.set_ylabel("cumulative training seconds")
        ax.set_title(f"{name}: training time (full training set)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}_seconds.png", dpi=120)
        plt.close(fig)


def plot_flatness(flat, out_dir: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out_dir.mkdir(parents=True, exist_ok=True)
    per = np.array(flat["per_round_seconds"])
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(range(1, len(per) + 1), np.cumsum(per))
    ax.set_xlabel("boosting round")
    ax.set_ylabel("cumulative seconds")
    ax.set_title(f"NETtalk, 200 rounds: late/early round cost {flat['mean_ratio']:.2f}")
    fig.tight_layout()
    fig.savefig(out_dir / "nettalk_flatness.png", dpi=120)
    plt.close(fig)


def environment():
    def git(*a):
        try:
            return subprocess.run(["git", *a], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except Exception:
            return None
    diff = git("diff", "HEAD", "--", "spacy_treecrf") or ""
    return dict(commit=git("rev-parse", "HEAD"), dirty=bool(git("status", "--porcelain", "--", "spacy_treecrf")),
                engine_diff_sha1=hashlib.sha1(diff.encode()).hexdigest() if diff else None,
                engine_path=str(Path(sys.modules[TreeCRF.__module__].__file__).parent),
                python=platform.python_version(), cpus=os.cpu_count())


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["nettalk", "protein", "nettalk_phoneme_stress", "all", "none"], default="all",
                   help="'none' with --flatness runs only the flatness check")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--out", default=None, help="write all results as JSON here")
    p.add_argument("--plot", default=None, help="directory for PNG plots (adds one test-curve run per task)")
    p.add_argument("--flatness", action="store_true", help="200 NETtalk rounds: late/early per-round cost")
    p.add_argument("--flatness-shrinkage", type=float, default=40.0)
    p.add_argument("--residue-classes", action=argparse.BooleanOptionalAction, default=True,
                   help="protein: also the residue-class indicators of projects/protein_ss/lexicons at each offset")
    p.add_argument("--residue-scales", action=argparse.BooleanOptionalAction, default=False,
                   help="protein: also the numeric residue scales of projects/protein_ss/scales at each offset")
    p.add_argument("--lambdas", type=float, nargs="+", default=[10, 40, 100, 200, 1000],
                   help="shrinkage grid (max_leaves=100, learning_rate=1)")
    p.add_argument("--other-losses", nargs="*", default=[], choices=["pseudo_likelihood", "hamming", "rank"],
                   help="also tune the shrinkage grid with these boosting losses (the default loss is 'crf')")
    p.add_argument("--slow-lambdas", type=float, nargs="*", default=[200],
                   help="shrinkages also tried with --slow-rate")
    p.add_argument("--slow-rate", type=float, default=0.3)
    p.add_argument("--slow-max-rounds", type=int, default=500)
    p.add_argument("--newton-lambdas", type=float, nargs="*", default=[],
                   help="also tune the shrinkage grid with leaf_values='newton' at these shrinkages (at learning "
                        "rate 1 and --slow-rate)")
    p.add_argument("--subsample", type=float, default=1.0,
                   help="also tune the shrinkage grid with this per-round position subsample (< 1 to enable)")
    p.add_argument("--colsample", type=float, default=1.0,
                   help="also tune the shrinkage grid with this per-tree feature-column share (< 1 to enable)")
    p.add_argument("--leaves", type=int, nargs="+", default=[5, 10, 20, 50],
                   help="max_leaves grid of the original (shrinkage 0) trees")
    p.add_argument("--families", nargs="+", default=["shrinkage", "original"],
                   choices=["shrinkage", "original", "shared"], help="TreeCRF families to tune")
    p.add_argument("--shared-leaves", type=int, nargs="+", default=[1000, 3000],
                   help="max_leaves grid of the shared family")
    p.add_argument("--shared-lambdas", type=float, nargs="+", default=[10.0],
                   help="shrinkage grid of the shared family")
    p.add_argument("--shared-leaf-values", default="position_mean", help="leaf_values of the shared family")
    p.add_argument("--shared-l1", type=float, nargs="+", default=[0.0], help="l1 grid of the shared family")
    p.add_argument("--shared-label-splits", nargs="+", default=["best"], choices=["best", "fallback"],
                   help="label_splits grid of the shared family")
    p.add_argument("--max-rounds", type=int, default=400)
    p.add_argument("--patience", type=int, default=40,
                   help="early-stopping patience in rounds at learning rate 1 (divided by the learning rate)")
    p.add_argument("--curve-rounds", type=int, default=250, help="rounds of the test curves drawn with --plot")
    p.add_argument("--dev-fraction", type=float, default=0.2, help="dev share: the data is cut into 1/this folds")
    p.add_argument("--folds", type=int, default=1,
                   help="how many of those folds serve as dev (1 = a single hold-out; 5 = 5-fold internal CV)")
    p.add_argument("--tune-viterbi", action=argparse.BooleanOptionalAction, default=True,
                   help="also tune each family for Viterbi decoding, as the paper tunes each decoder on its own")
    p.add_argument("--seed", type=int, default=0, help="seed of the dev split")
    p.add_argument("--threads", type=int, default=0, help="TreeCRF threads (0 = all cores)")
    p.add_argument("--repeats", type=int, default=3, help="full-train fits timed per learner (median)")
    p.add_argument("--crf-max-iterations", type=int, default=None)
    args = p.parse_args(argv)
    root = data_dir(args.data_dir)
    results = {"environment": environment(), "settings": vars(args).copy()}
    t0 = time.perf_counter()
    tasks = {"all": ["nettalk", "protein"], "none": []}.get(args.task, [args.task])
    per_task = {name: run_task(name, root, args) for name in tasks}
    results.update(per_task)
    if args.flatness:
        results["flatness"] = flatness(root, args)
    results["total_seconds"] = time.perf_counter() - t0
    print(f"\ntotal {results['total_seconds']:.0f} s")
    if args.plot:
        plot(per_task, Path(args.plot))
        if args.flatness:
            plot_flatness(results["flatness"], Path(args.plot))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
        print(f"results -> {args.out}")


if __name__ == "__main__":
    main()

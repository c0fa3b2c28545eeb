"""Readable trees: an ensemble's strongest root-to-leaf paths (the slides' "circled paths") and the explanation of
one potential, the leaves that made it.

A potential phi(t, s, k) is the sum over trees of the value for label k of every leaf that position t reaches from
previous state s (weighted where the routing rule split a missing value between branches). Listing those leaves,
each with its path, answers "why this label here" exactly: the parts add up to the potential (walk_potentials
sums the same values in the same order). A path reads as the tests it passed: the features present by name, the
absent ones summarised, and the previous labels it admits among those the transition constraints allow for the
label (a constraint never shows up as a rule, and a leaf the constraints never let apply to a label is no rule
for it).
"""
import warnings
from typing import List, NamedTuple, Optional

import numpy as np

from .predict_walk import forest_leaves, walk_potentials
from .trees import FEATURE, LEAF, STATE
from ..errors import Warnings

SHOWN_ENTRIES = 3  # a shared leaf's strongest label entries named in a rule
SHOWN_ABSENT = 2  # absent tests of a path named before the rest are counted


class Part(NamedTuple):
    """One leaf's share of a potential: the tree (its index in the ensemble: its round for shared trees), the
    contribution (the walk's weight times the leaf's value for the label) and the leaf's path, readable."""
    tree: int
    value: float
    rule: str


def conditions(present, absent, feature_names, states, state_names, allowed_states) -> str:
    """A path's tests as a conjunction: ``present`` tests by name, ``absent`` ones (feature ids, root first)
    summarised: the first SHOWN_ABSENT by name (``feature_names``; only those are named: naming costs more than
    the walk), then how many more; and the previous states the leaf admits (``states``, bool S) among
    ``allowed_states`` (nothing when it admits all of them)."""
    conds = list(present)
    if absent:
        more = len(absent) - SHOWN_ABSENT
        conds.append("NOT " + ", NOT ".join(feature_names[f] for f in absent[:SHOWN_ABSENT])
                     + (f" (and {more} more absent test{'s' if more > 1 else ''})" if more > 0 else ""))
    admitted = states & allowed_states
    if not admitted[allowed_states].all():
        conds.append("prev in {" + ",".join(n for n, on in zip(state_names, admitted) if on) + "}")
    return " AND ".join(conds) or "(always)"


def _dense(vectors, node, n_labels):
    """A node's sparse leaf vector (trees.LeafVectors) as n_labels values."""
    out = np.zeros(n_labels)
    span = slice(vectors.ptr[node], vectors.ptr[node + 1])
    out[vectors.label[span]] = vectors.value[span]
    return out


def _allowed(allowed, n_states, n_labels):
    return np.ones((n_states, n_labels), dtype=bool) if allowed is None else np.asarray(allowed, dtype=bool)


def ensemble_rules(ensemble, feature_names, classes, top: int, min_support: float = 5.0, allowed=None):
    """Readable root-to-leaf paths of a booster.Ensemble, strongest first (|value| of leaves with at least
    ``min_support`` examples) as (label, conjunction, value, support). ``allowed`` (S x K, None: all): the
    transition constraints. A shared tree's leaf is named by its label vector's strongest entry that the
    constraints let it apply to; the next strongest (up to SHOWN_ENTRIES in all) end its conjunction, as
    "[same leaf: B-ORG -0.048, B-PER -0.048]". Leaves with fewer examples are left out: where that leaves none,
    the answer is [] with W009, which names the largest leaf's support (a small training set)."""
    nodes, roots, labels, _, vectors = ensemble.forest()
    kind, feature, yes, no = nodes.kind, nodes.feature, nodes.yes, nodes.no
    value, count, states = nodes.value, nodes.count, nodes.states
    K = len(classes)
    allowed = _allowed(allowed, states.shape[1], K)
    state_names = ["<start>"] + list(classes)
    found, largest_hidden = [], 0.0
    for i in range(len(labels)):
        root = roots[i]
        stack = [(0, (), ())]
        while stack:
            node, present, absent = stack.pop()
            g = root + node
            if kind[g] == LEAF:
                if count[g] < min_support:
                    largest_hidden = max(largest_hidden, float(count[g]))
                    continue
                if labels[i] >= 0:
                    k, v, label, others = labels[i], float(value[g]), classes[labels[i]], ""
                else:
                    vector = _dense(vectors, g, K)
                    live = [k for k in np.argsort(-np.abs(vector), kind="stable")
                            if vector[k] != 0.0 and (states[g] & allowed[:, k]).any()][:SHOWN_ENTRIES]
                    if not live:
                        continue
                    k, v = live[0], float(vector[live[0]])
                    label = classes[k]
                    others = ", ".join(f"{classes[j]} {vector[j]:+.3f}" for j in live[1:])
                if not (states[g] & allowed[:, k]).any():
                    continue
                text = conditions([feature_names[f] for f in present], absent, feature_names, states[g],
                                  state_names, allowed[:, k])
                found.append((label, f"{text}  [same leaf: {others}]" if others else text, v,
                              float(count[g])))
            elif kind[g] == FEATURE:
                stack.append((yes[g], present + (feature[g],), absent))
                stack.append((no[g], present, absent + (feature[g],)))
            else:
                stack.append((yes[g], present, absent))
                stack.append((no[g], present, absent))
    if not found and largest_hidden > 0:
        warnings.warn(Warnings.W009.format(min_support=min_support, largest=largest_hidden), stacklevel=3)
    found.sort(key=lambda r: -abs(r[2]))
    return found[:top]



class PathTables(NamedTuple):
    """A Forest's node arrays as Python lists, for climbing from a leaf to its root (list items cost a tenth of
    numpy scalar reads): each node's parent (-1 at roots), kind, no-child (relative to its root) and feature,
    and each tree's root."""
    parent: list
    kind: list
    no: list
    feature: list
    root: list


def path_tables(forest) -> PathTables:
    nodes, roots = forest.nodes, forest.roots
    root_of = np.repeat(roots[:-1], np.diff(roots))
    parent = np.full(len(nodes.kind), -1, dtype=np.int64)
    inner = np.flatnonzero((nodes.kind == FEATURE) | (nodes.kind == STATE))
    parent[root_of[inner] + nodes.yes[inner]] = inner
    parent[root_of[inner] + nodes.no[inner]] = inner
    return PathTables(parent=parent.tolist(), kind=nodes.kind.tolist(), no=nodes.no.tolist(),
                      feature=nodes.feature.tolist(), root=roots.tolist())


def potential_parts(forest, rows, t: int, walk, s: int, k: int, feature_names, classes, allowed: np.ndarray,
                    tables: PathTables) -> List[Part]:
    """The Parts of phi(t, s, k), in tree order: every leaf position t of rows (trees.Rows) reaches from previous
    state s that holds a value for label k, from ``walk`` (position t's ForestWalk entries, as lists: tree,
    leaf, weight; predict_walk.forest_leaves). Their values add up to walk_potentials' phi[t, s, k]."""
    nodes, labels, vectors = forest.nodes, forest.labels, forest.vectors
    state_names = ["<start>"] + list(classes)
    row = set(rows.indices[rows.indptr[t]:rows.indptr[t + 1]].tolist())
    parent, kind, no, feature, root = tables
    parts = []
    for tree, leaf, weight in zip(*walk):
        if not nodes.states[leaf, s]:
            continue
        if labels[tree] >= 0:
            if labels[tree] != k:
                continue
            value = nodes.value[leaf]
        else:
            span = slice(vectors.ptr[leaf], vectors.ptr[leaf + 1])
            hit = np.flatnonzero(vectors.label[span] == k)
            if not len(hit):
                continue
            value = vectors.value[span][hit[0]]
        present, absent = [], []
        child = leaf
        while parent[child] >= 0:
            node = parent[child]
            if kind[node] == FEATURE:
                f = feature[node]
                if no[node] == child - root[tree]:
                    absent.append(f)
                else:  # the yes side: the feature is present, or its variable is missing and was routed here
                    present.append(feature_names[f] + ("" if f in row else " (missing, routed here)"))
            child = node
        rule = conditions(present[::-1], absent[::-1], feature_names, nodes.states[leaf], state_names, allowed[:, k])
        parts.append(Part(tree=tree, value=float(weight * value), rule=rule))
    return parts


class Explanation(NamedTuple):
    """Why a position got its label: the label, the previous label (None at a sequence's first position), the
    potential phi(t, s, k) of that transition (walk_potentials: float64, the trees' values summed in tree
    order; tagging's block kernels sum them in float32) and its Parts, in tree order, adding up to it; -inf
    where the transition constraints forbid the transition (no labelling through it has any probability; its
    Parts still show what the trees add)."""
    label: object
    previous: object
    potential: float
    parts: List[Part]

    def top(self, n: int) -> List[Part]:
        """The n Parts of largest |value|, largest first."""
        return sorted(self.parts, key=lambda part: -abs(part.value))[:n]


def explain_sequence(forest, rows, missing, start: int, ids, feature_names, classes,
                     allowed: Optional[np.ndarray] = None, tables: Optional[PathTables] = None) -> List[Explanation]:
    """The Explanation of each position of the sequence at rows start.. start + len(ids) labelled ``ids``
    (label ids; ``missing``: the rows' MissingIndex, trees.no_missing() for none; ``tables``: the forest's
    path_tables, if the caller keeps them)."""
    S, K = forest.nodes.states.shape[1], len(classes)
    allowed = _allowed(allowed, S, K)
    tables = tables or path_tables(forest)
    at = np.arange(start, start + len(ids), dtype=np.int64)
    phi = walk_potentials(at, rows, forest, missing, S, K)
    ptr, walk = forest_leaves(at, rows, forest, missing, S)
    walk = [column.tolist() for column in walk]
    out = []
    for i, k in enumerate(ids):
        s = 0 if i == 0 else int(ids[i - 1]) + 1
        here = [column[ptr[i]:ptr[i + 1]] for column in walk]
        parts = potential_parts(forest, rows, int(at[i]), here, s, int(k), feature_names, classes, allowed, tables)
        potential = float(phi[i, s, k]) if allowed[s, k] else -np.inf
        out.append(Explanation(label=classes[k], previous=None if i == 0 else classes[ids[i - 1]], potential=potential,
                               parts=parts))
    return out


def explanation_table(words, explanations: List[Explanation], top: int) -> str:
    """Explanations as text: per position its word, label, previous label and potential, then its ``top``
    largest Parts (tree, contribution, path) and the sum of the others."""
    lines = []
    for word, e in zip(words, explanations):
        prev = "<start>" if e.previous is None else e.previous
        lines.append(f"{word!s:<16} {e.label!s:<8} after {prev!s:<8} potential {e.potential:+.4f} "
                     f"from {len(e.parts)} leaves" + ("" if np.isfinite(e.potential) else " (a forbidden transition)"))
        shown = e.top(top)
        for part in shown:
            lines.append(f"    {part.value:+.4f}  tree {part.tree:<4d} {part.rule}")
        if len(e.parts) > len(shown):
            rest = e.potential - sum(part.value for part in shown)
            lines.append(f"    {rest:+.4f}  the other {len(e.parts) - len(shown)} leaves")
    return "\n".join(lines)


class SingleTests(NamedTuple):
    """single_test_weights' result: the binary tests the trees split on (``tests``, int64 atom ids), ``state``
    (tests x labels): the mean over the previous labels allowed before each label of what the test alone adds to
    its potential, and ``transition`` (labels x labels): the potential of label k after label j where no test
    holds (-inf where the transition mask forbids it)."""
    tests: np.ndarray
    state: np.ndarray
    transition: np.ndarray


SINGLE_TEST_CELLS = 1 << 23  # float64 cells of raw potentials a block of single-test rows takes


def single_test_weights(ensemble, allowed: np.ndarray, n_atoms: int, numeric) -> SingleTests:
    """A linear CRF's two weight tables, read off the trees: each split test's effect alone (a row where only it
    holds, against the empty row) and the transitions of the empty row. A tree's effect of a test depends on the
    others that hold, so this is what the test does by itself: what a linear model's weight says. Only binary atoms
    are tests here (``n_atoms`` atoms, of which ``numeric``, a NumericIndex, names the numeric columns' bins:
    their thresholds are no single test)."""
    nodes = ensemble.forest().nodes
    split = np.unique(nodes.feature[nodes.kind == FEATURE])
    split = split[(split >= 0) & (split < n_atoms)]
    if len(numeric.column):
        split = split[numeric.column[split] < 0]
    tests = split.astype(np.int64)
    S, K = allowed.shape
    before = np.asarray(allowed[1:], dtype=bool)  # previous label j (state j + 1) may precede label k
    empty = ensemble.potentials(np.zeros(2, dtype=np.int64), np.zeros(0, dtype=np.int32))[0, 1:]
    state = np.zeros((len(tests), K))
    block = max(1, SINGLE_TEST_CELLS // (S * K))
    for a in range(0, len(tests), block):
        ids = tests[a:a + block]
        phi = ensemble.potentials(np.arange(len(ids) + 1, dtype=np.int64), ids.astype(np.int32))[:, 1:]
        diff = np.where(before[None], phi - empty[None], 0.0)
        state[a:a + len(ids)] = diff.sum(axis=1) / np.maximum(before.sum(axis=0), 1)[None]
    return SingleTests(tests=tests, state=state, transition=np.where(before, empty, -np.inf))

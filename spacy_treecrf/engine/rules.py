"""Readable rules of an ensemble: its strongest root-to-leaf paths (the slides' "circled paths")."""
import numpy as np

from .trees import FEATURE, LEAF

SHOWN_ENTRIES = 3


def _strongest(vector, classes):
    """A shared leaf's strongest label and value, the label followed by the next entries' "(label +value)"."""
    order = [k for k in np.argsort(-np.abs(vector), kind="stable")[:SHOWN_ENTRIES] if vector[k] != 0.0]
    if not order:
        return classes[0], 0.0
    rest = "".join(f" ({classes[k]} {vector[k]:+.3f})" for k in order[1:])
    return f"{classes[order[0]]}{rest}", float(vector[order[0]])


def _dense(vectors, node, n_labels):
    """A node's sparse leaf vector (trees.LeafVectors) as n_labels values."""
    out = np.zeros(n_labels)
    span = slice(vectors.ptr[node], vectors.ptr[node + 1])
    out[vectors.label[span]] = vectors.value[span]
    return out


def ensemble_rules(ensemble, feature_names, classes, top: int, min_support: float = 5.0):
    """Readable root-to-leaf paths of a booster.Ensemble, strongest first (|value| of leaves with at least
    ``min_support`` examples) as (label, conjunction, value, support). Present-feature tests are spelled out;
    absent ones are counted. A shared tree's leaf is named by its label vector's strongest entry, with the next
    strongest (up to SHOWN_ENTRIES in all) in the label."""
    nodes, roots, labels, _, vectors = ensemble.forest()
    kind, feature, yes, no = nodes.kind, nodes.feature, nodes.yes, nodes.no
    value, count, states = nodes.value, nodes.count, nodes.states
    state_names = ["<start>"] + list(classes)
    found = []
    for i in range(len(labels)):
        root = roots[i]
        stack = [(0, (), 0)]
        while stack:
            node, present, absent = stack.pop()
            g = root + node
            if kind[g] == LEAF:
                if count[g] < min_support:
                    continue
                conds = list(present)
                if absent:
                    conds.append(f"{absent} absent test{'s' if absent > 1 else ''}")
                if not states[g].all():
                    conds.append("prev in {" + ",".join(n for n, on in zip(state_names, states[g]) if on) + "}")
                label, v = (classes[labels[i]], float(value[g])) if labels[i] >= 0 else _strongest(
                    _dense(vectors, g, len(classes)), classes)
                found.append((label, " AND ".join(conds) or "(always)", v, float(count[g])))
            elif kind[g] == FEATURE:
                stack.append((yes[g], present + (feature_names[feature[g]],), absent))
                stack.append((no[g], present, absent + 1))
            else:
                stack.append((yes[g], present, absent))
                stack.append((no[g], present, absent))
    found.sort(key=lambda r: -abs(r[2]))
    return found[:top]

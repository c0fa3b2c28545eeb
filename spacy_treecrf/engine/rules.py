"""Readable rules of an ensemble: its strongest root-to-leaf paths (the slides' "circled paths")."""
from .trees import FEATURE, LEAF


def ensemble_rules(ensemble, feature_names, classes, top: int, min_support: float = 5.0):
    """Readable root-to-leaf paths of a booster.Ensemble, strongest first (|value| of leaves with at least
    ``min_support`` examples) as (label, conjunction, value, support). Present-feature tests are spelled out;
    absent ones are counted."""
    nodes, roots, labels, _ = ensemble.forest()
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
                found.append((classes[labels[i]], " AND ".join(conds) or "(always)", float(value[g]),
                              float(count[g])))
            elif kind[g] == FEATURE:
                stack.append((yes[g], present + (feature_names[feature[g]],), absent))
                stack.append((no[g], present, absent + 1))
            else:
                stack.append((yes[g], present, absent))
                stack.append((no[g], present, absent))
    found.sort(key=lambda r: -abs(r[2]))
    return found[:top]

"""Missing input values in the tree engine (paper Sec. 6): instance weighting and surrogate splits.

Missingness reaches the kernels as a second CSR of *variables* per position (``mindptr``/``mindices``, variable
ids sorted within a row) plus ``fvar``, the variable of every feature (-1: the feature belongs to no variable and
is never missing). A variable is the group of binary tests that go missing together (a letter at one window
offset: all its one-hot indicators). A feature test at position t is then present, absent or missing.

- Instance weighting (C4.5's proportional distribution, Sec. 6.1): a feature split is chosen on the examples where
  its variable is known; the others go to both children, their weight multiplied by the share n_yes / (n_yes +
  n_no) of the known ones. At prediction both branches are followed and averaged with those shares. The share is
  count[yes] / (count[yes] + count[no]) of the tree arrays (the missing examples carried into the children keep
  that ratio), so every tree, even one fitted without missing values, can be evaluated this way.
- Surrogate splits (CART, Sec. 6.2): each feature split keeps up to ``N_SURROGATES`` other features ranked by how
  often they send the node's known examples the same way as the split; an example missing the split's variable
  follows the first surrogate it knows, else the majority branch, in training as at prediction.

These are separate kernels: rows without missing values keep the fast paths of ``tree``.
"""
import numpy as np
from numba import njit

from .tree import (FEATURE, LEAF, TIE, new_nodes, _add_row, _best_state, _best_leaf, _clear, _compact, _gain,
                   _grow, _has_feature, _pick_best, _record_candidate, _row_sum, _set_leaf, _split_states,
                   _valid_states)

STRATEGIES = ("instance_weighting", "surrogate", "imputation", "indicator")
ENGINE_STRATEGIES = ("instance_weighting", "surrogate")  # the others are input transforms (estimator, featurizer)
N_SURROGATES = 4


def check_strategy(value, where: str) -> str:
    if value not in STRATEGIES:
        raise ValueError(f"{where} setting 'missing' must be one of {STRATEGIES}, got {value!r}")
    return value


class MissingRows:
    """Where variables are missing: CSR rows (indptr, sorted variable ids) per position, and each feature's
    variable (``feature_var``, -1 for none) among ``n_vars``. ``known``: per variable, at how many positions it
    has a value (it applies there and is not missing; what imputation counts over), if the producer knows."""

    def __init__(self, indptr, indices, feature_var, n_vars: int, known=None):
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        self.feature_var = np.ascontiguousarray(feature_var, dtype=np.int32)
        self.n_vars = int(n_vars)
        self.known = None if known is None else np.asarray(known, dtype=np.int64)

    @property
    def any(self) -> bool:
        return len(self.indices) > 0

    def rows(self) -> np.ndarray:
        """The positions with at least one missing variable."""
        return np.flatnonzero(np.diff(self.indptr) > 0).astype(np.int64)


def most_common_columns(indptr, indices, missing_rows: MissingRows) -> np.ndarray:
    """Imputation table: for each variable, its most common outcome at the ``missing_rows.known`` positions that
    give it a value -- the feature most often present, or -1 when more of them hold none of its features (a falsy
    value, a word too short for a prefix). Ties go to the lower feature id."""
    V = missing_rows.n_vars
    T = len(indptr) - 1
    fvar = missing_rows.feature_var
    t = np.repeat(np.arange(T, dtype=np.int64), np.diff(indptr))
    v = fvar[indices].astype(np.int64)
    has = v >= 0
    t, v, c = t[has], v[has], indices[has].astype(np.int64)
    F = max(len(fvar), 1)
    keys, counts = np.unique(v * F + c, return_counts=True)
    best = np.full(V, -1, dtype=np.int64)
    top = np.zeros(V, dtype=np.int64)
    order = np.lexsort((keys % F, -counts, keys // F))  # per variable: largest count first, then lower id
    first = np.unique(keys[order] // F, return_index=True)[1]
    best[keys[order][first] // F] = keys[order][first] % F
    top[keys[order][first] // F] = counts[order][first]
    known = missing_rows.known
    holding = np.bincount(np.unique(t * V + v) % V, minlength=V)[:V] if V else np.zeros(0, dtype=np.int64)
    return np.where(top > known - holding, best, -1).astype(np.int32)


def fill_rows(indptr, indices, missing_rows: MissingRows, table, n_features: int):
    """Rows where each missing variable v gets the feature table[v] (imputed value or indicator; -1: none)."""
    T = len(indptr) - 1
    F = max(int(n_features), 1)
    t_new = np.repeat(np.arange(T, dtype=np.int64), np.diff(missing_rows.indptr))
    f_new = np.asarray(table, dtype=np.int64)[missing_rows.indices]
    t_old = np.repeat(np.arange(T, dtype=np.int64), np.diff(indptr))
    keys = np.unique(np.concatenate([t_old * F + indices, (t_new * F + f_new)[f_new >= 0]]))
    out_ptr = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // F, minlength=T), out=out_ptr[1:])
    return out_ptr, (keys % F).astype(np.int32)


@njit(cache=True, nogil=True)
def _is_missing(mindptr, mindices, fvar, t, f):
    v = fvar[f]
    return v >= 0 and _has_feature(mindptr, mindices, t, v)


@njit(cache=True, nogil=True)
def _yes_share(count, a, b):
    """Share of a split's known training examples that went to the yes child a (b: the no child)."""
    total = count[a] + count[b]
    return count[a] / total if total > 0.0 else 0.5


@njit(cache=True, nogil=True)
def _route(indptr, indices, mindptr, mindices, fvar, t, node, f, surr_feature, surr_same):
    """Branch of position t at feature split ``node`` on f: 1 yes, 0 no, -1 missing with no known surrogate."""
    if not _is_missing(mindptr, mindices, fvar, t, f):
        return 1 if _has_feature(indptr, indices, t, f) else 0
    for r in range(surr_feature.shape[1]):
        g = surr_feature[node, r]
        if g < 0:
            break
        if not _is_missing(mindptr, mindices, fvar, t, g):
            return 1 if _has_feature(indptr, indices, t, g) == surr_same[node, r] else 0
    return -1


# ---- fitting ----------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _scan_weighted(pbuf, wbuf, lo, hi, D, is_start, w_start, mid, m, rs, ns, with_hist, indptr, indices, dense,
                   touched, mindptr, mindices, mdense, mtouched):
    """One pass over a node's weighted positions: G, N, per-state sums (rs, ns) and, with_hist, the weighted
    feature histogram (dense / touched, as tree._scan) and missing-variable histogram (mdense / mtouched).
    Returns (G, N, touched features, touched variables)."""
    rs[:] = 0.0
    ns[:] = 0.0
    g = 0.0
    n = 0.0
    nt = 0
    nmt = 0
    for i in range(lo, hi):
        t = pbuf[i]
        w = wbuf[i]
        st = is_start[t]
        rt = w * _row_sum(D, t, st, w_start, mid, m)
        nt_w = w * (w_start if st else float(m))
        g += rt
        n += nt_w
        if st:
            if w_start > 0.0:
                rs[0] += w * D[t, 0]
                ns[0] += w
        else:
            for j in range(m):
                rs[mid[j]] += w * D[t, mid[j]]
                ns[mid[j]] += w
        if with_hist:
            nt = _add_row(dense, touched, nt, indptr, indices, t, rt, nt_w)
            nmt = _add_row(mdense, mtouched, nmt, mindptr, mindices, t, rt, nt_w)
    return g, n, nt, nmt


@njit(cache=True, nogil=True, error_model="numpy")
def _best_feature_known(ids, hg, hn, h, g, n, fvar, mdense, lam, min_leaf, feature_ok, gains):
    """Best present/absent split, each feature judged on the examples where its variable is known (the node's G, N
    minus its variable's missing sums). Returns (gain, feature, yes share of the known examples)."""
    for i in range(h):
        v = fvar[ids[i]]
        gk = g
        nk = n
        if v >= 0 and mdense[v, 1] >= 0.0:
            gk -= mdense[v, 0]
            nk -= mdense[v, 1]
        nl = hn[i]
        nr = nk - nl
        gl = hg[i]
        gain = _gain(gl, nl, gk - gl, nr, gk, nk, lam)
        ok = nl >= min_leaf and nr >= min_leaf and nl > 0.0 and nr > 0.0 and gain > 0.0 and feature_ok[ids[i]]
        gains[i] = gain if ok else -1.0
    gain, f, slot = _pick_best(ids, gains, h)
    if f < 0:
        return 0.0, -1, 0.5
    v = fvar[f]
    nk = n - (mdense[v, 1] if v >= 0 and mdense[v, 1] >= 0.0 else 0.0)
    return gain, f, hn[slot] / nk


@njit(cache=True, nogil=True)
def _count_row(cnt, seen, touched, nt, ptr, ids, t, side, w):
    """Add weight w to column ``side`` of cnt for every id in row t (CSR ptr / ids); ids met for the first time
    are reset and listed in touched. Returns the new touched count."""
    for p in range(ptr[t], ptr[t + 1]):
        g = ids[p]
        if not seen[g]:
            seen[g] = True
            cnt[g, 0] = 0.0
            cnt[g, 1] = 0.0
            touched[nt] = g
            nt += 1
        cnt[g, side] += w
    return nt


@njit(cache=True, nogil=True)
def _surrogates(pbuf, wbuf, lo, hi, f, indptr, indices, mindptr, mindices, fvar, cnt, seen, touched, mcnt, mseen,
                mtouched, out_f, out_same):
    """CART's surrogates of the split on f: over the node's positions where f is known, every other feature g
    (of another variable) predicts the split by g present -> same side (or the opposite side); its agreement is
    counted where g is known too. Up to out_f.shape[0] features that beat the majority rule, best agreement rate
    first (then the lower feature id), go to out_f / out_same; the rest of out_f stays -1."""
    vf = fvar[f]
    tot = np.zeros(2)  # weight of the known positions with f present (0) / absent (1)
    nt = 0
    nmt = 0
    for i in range(lo, hi):
        t = pbuf[i]
        if _is_missing(mindptr, mindices, fvar, t, f):
            continue
        w = wbuf[i]
        side = 0 if _has_feature(indptr, indices, t, f) else 1
        tot[side] += w
        nt = _count_row(cnt, seen, touched, nt, indptr, indices, t, side, w)
        nmt = _count_row(mcnt, mseen, mtouched, nmt, mindptr, mindices, t, side, w)
    R = out_f.shape[0]
    out_f[:] = -1
    score = np.full(R, -1.0)
    for i in range(nt):
        g = touched[i]
        v = fvar[g]
        if g == f or (v >= 0 and v == vf):
            continue
        kp = tot[0]
        ka = tot[1]
        if v >= 0 and mseen[v]:
            kp -= mcnt[v, 0]
            ka -= mcnt[v, 1]
        known = kp + ka
        if known <= 0.0:
            continue
        same = cnt[g, 0] + (ka - cnt[g, 1])  # g present with f present + g absent with f absent
        opp = known - same
        agree = max(same, opp)
        if agree <= max(kp, ka) * (1.0 + TIE):
            continue  # no better than sending everything to the larger side
        rate = agree / known
        j = R
        while j > 0 and (rate > score[j - 1] * (1.0 + TIE) or
                         (rate >= score[j - 1] * (1.0 - TIE) and g < out_f[j - 1])):
            j -= 1
        if j == R:
            continue
        for k in range(R - 1, j, -1):
            out_f[k] = out_f[k - 1]
            out_same[k] = out_same[k - 1]
            score[k] = score[k - 1]
        out_f[j] = g
        out_same[j] = same >= opp
        score[j] = rate
    for i in range(nt):
        seen[touched[i]] = False
    for i in range(nmt):
        mseen[mtouched[i]] = False


@njit(cache=True, nogil=True)
def _partition_known(pbuf, wbuf, lo, hi, out, tmp_p, tmp_w, fall_p, fall_w, node, f, share, proportional, indptr,
                     indices, mindptr, mindices, fvar, surr_feature, surr_same, is_start, w_start, m):
    """Split a node's weighted positions on f: the no child keeps the segment's start (in place), the yes child is
    written at ``out``. A position missing f and every surrogate goes to both children with its weight times
    ``share`` / 1 - share (proportional), else to the side that got more of the others (in example counts, so
    that _yes_share of the children's counts picks that side again at prediction). Returns (n_yes, n_no) slots."""
    na = 0
    nb = 0
    nf = 0
    n_yes = 0.0
    n_no = 0.0
    for i in range(lo, hi):
        t = pbuf[i]
        w = wbuf[i]
        d = _route(indptr, indices, mindptr, mindices, fvar, t, node, f, surr_feature, surr_same)
        if d < 0 and not proportional:
            fall_p[nf] = t
            fall_w[nf] = w
            nf += 1
            continue
        if d != 0:
            tmp_p[na] = t
            tmp_w[na] = w * share if d < 0 else w
            na += 1
            n_yes += w * (w_start if is_start[t] else float(m))
        if d <= 0:
            pbuf[lo + nb] = t
            wbuf[lo + nb] = w * (1.0 - share) if d < 0 else w
            nb += 1
            n_no += w * (w_start if is_start[t] else float(m))
    if n_yes > n_no:
        tmp_p[na:na + nf] = fall_p[:nf]
        tmp_w[na:na + nf] = fall_w[:nf]
        na += nf
    else:
        pbuf[lo + nb:lo + nb + nf] = fall_p[:nf]
        wbuf[lo + nb:lo + nb + nf] = fall_w[:nf]
        nb += nf
    pbuf[out:out + na] = tmp_p[:na]
    wbuf[out:out + na] = tmp_w[:na]
    return na, nb


@njit(cache=True, nogil=True)
def fit_tree_missing(indptr, indices, n_features, D, is_start, allowed_k, positions, max_leaves, lam, min_leaf,
                     min_gain, mindptr, mindices, fvar, n_vars, n_surrogates, feature_ok=None, states_last=False):
    """tree.fit_tree for rows with missing values: instance weighting (n_surrogates = 0) or surrogate splits.

    Simpler than fit_tree: every position of a node carries a weight (the product of the shares of the splits
    that sent it on while missing), and each new node is scanned for its own sums and histograms (no histogram
    subtraction). The no child of a feature split and the first child of a state split keep their parent's
    segment of ``pbuf``; the other child is appended. Returns the node arrays of fit_tree (no segments) plus the
    surrogates: surr_feature (nodes x n_surrogates, -1 padded) and surr_same (g present -> yes side).
    ``feature_ok`` as in fit_tree (surrogates may use any feature)."""
    S = D.shape[1]
    if feature_ok is None:
        ok_features = np.ones(n_features, dtype=np.bool_)
    else:
        ok_features = feature_ok
    max_nodes = max(2 * max_leaves - 1, 1)
    (kind, feature, yes, no, value, count, gsum, states, pstart, plen, rs_node, ns_node, cgain, ckind, cfeat,
     cstates) = new_nodes(max_nodes, S)
    cshare = np.full(max_nodes, 0.5)
    surr_feature = np.full((max_nodes, n_surrogates), -1, dtype=np.int32)
    surr_same = np.zeros((max_nodes, n_surrogates), dtype=np.bool_)

    n_pos = positions.shape[0]
    pbuf = np.empty(2 * n_pos + 16, dtype=np.int32)
    wbuf = np.empty(2 * n_pos + 16)
    pbuf[:n_pos] = positions
    wbuf[:n_pos] = 1.0
    used = n_pos
    tmp_p = np.empty(n_pos + 1, dtype=np.int32)
    tmp_w = np.empty(n_pos + 1)
    fall_p = np.empty(n_pos + 1 if n_surrogates > 0 else 0, dtype=np.int32)
    fall_w = np.empty(fall_p.shape[0])
    dense = np.empty((n_features, 2))
    dense[:, 1] = -1.0
    touched = np.empty(n_features, dtype=np.int32)
    mdense = np.empty((n_vars, 2))
    mdense[:, 1] = -1.0
    mtouched = np.empty(n_vars, dtype=np.int32)
    gains = np.empty(n_features)
    n_cnt = n_features if n_surrogates > 0 else 0  # _surrogates' counts
    cnt = np.empty((n_cnt, 2))
    seen = np.zeros(n_cnt, dtype=np.bool_)
    mcnt = np.empty((n_vars if n_surrogates > 0 else 0, 2))
    mseen = np.zeros(mcnt.shape[0], dtype=np.bool_)
    mid = np.empty(S, dtype=np.int64)
    left = np.zeros(S, dtype=np.bool_)

    states[0, :] = True
    plen[0] = n_pos
    n_nodes = 1
    n_leaves = 1
    fresh = np.array([0, -1])
    while True:
        for node in fresh:  # the new leaves: values, and the candidate split of those that may be split
            if node < 0:
                continue
            w_start, m = _valid_states(states[node], allowed_k, mid)
            with_hist = n_leaves < max_leaves
            g, n, nt, nmt = _scan_weighted(pbuf, wbuf, pstart[node], pstart[node] + plen[node], D, is_start,
                                           w_start, mid, m, rs_node[node], ns_node[node], with_hist, indptr,
                                           indices, dense, touched, mindptr, mindices, mdense, mtouched)
            _set_leaf(node, g, n, lam, gsum, count, value)
            if with_hist and n >= 2.0 * min_leaf and n > 0.0:
                ids = np.empty(nt, dtype=np.int32)
                hg = np.empty(nt)
                hn = np.empty(nt)
                h = _compact(dense, touched, nt, ids, hg, hn)
                fg, ff, share = _best_feature_known(ids, hg, hn, h, g, n, fvar, mdense, lam, min_leaf,
                                                        ok_features, gains)
                sg = _best_state(rs_node[node], ns_node[node], states[node], g, n, lam, min_leaf, left)
                _record_candidate(node, fg, ff, sg, left, min_gain, cgain, ckind, cfeat, cstates, states_last)
                cshare[node] = share
            _clear(dense, touched, nt)
            _clear(mdense, mtouched, nmt)
        if n_leaves >= max_leaves:
            break
        best = _best_leaf(n_nodes, kind, yes, cgain, min_gain)
        if best < 0:
            break
        a = n_nodes
        b = n_nodes + 1
        n_nodes += 2
        n_leaves += 1
        kind[best] = ckind[best]
        yes[best] = a
        no[best] = b
        lo = pstart[best]
        hi = lo + plen[best]
        pbuf = _grow(pbuf, used + hi - lo)
        wbuf = _grow(wbuf, used + hi - lo)
        if ckind[best] == FEATURE:
            f = cfeat[best]
            feature[best] = f
            states[a, :] = states[best]
            states[b, :] = states[best]
            if n_surrogates > 0 and fvar[f] >= 0:
                _surrogates(pbuf, wbuf, lo, hi, f, indptr, indices, mindptr, mindices, fvar, cnt, seen, touched,
                            mcnt, mseen, mtouched, surr_feature[best], surr_same[best])
            w_start, m = _valid_states(states[best], allowed_k, mid)
            na, nb = _partition_known(pbuf, wbuf, lo, hi, used, tmp_p, tmp_w, fall_p, fall_w, best, f, cshare[best],
                                      n_surrogates == 0, indptr, indices, mindptr, mindices, fvar, surr_feature,
                                      surr_same, is_start, w_start, m)
            pstart[a] = used
            plen[a] = na
            pstart[b] = lo
            plen[b] = nb
            used += na
        else:
            for s in range(S):
                states[a, s] = states[best, s] and cstates[best, s]
                states[b, s] = states[best, s] and not cstates[best, s]
            pbuf[used:used + hi - lo] = pbuf[lo:hi]
            wbuf[used:used + hi - lo] = wbuf[lo:hi]
            pstart[a] = lo
            plen[a] = hi - lo
            pstart[b] = used
            plen[b] = hi - lo
            used += hi - lo
        fresh[0] = a
        fresh[1] = b
    return (kind[:n_nodes].copy(), feature[:n_nodes].copy(), yes[:n_nodes].copy(), no[:n_nodes].copy(),
            value[:n_nodes].copy(), count[:n_nodes].copy(), states[:n_nodes].copy(), surr_feature[:n_nodes].copy(),
            surr_same[:n_nodes].copy())


# ---- evaluation -------------------------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _eval_tree_missing(out, t, indptr, indices, mindptr, mindices, fvar, kind, feature, yes, no, states, value,
                       count, surr_feature, surr_same, proportional, root, stack, masks, weights):
    """tree._eval_tree for a position with missing values: a split on a missing variable with no known surrogate
    follows both branches weighted by the split's yes share (proportional) or the majority branch."""
    top = 0
    stack[0] = root
    masks[0, :] = True
    weights[0] = 1.0
    while top >= 0:
        node = stack[top]
        kd = kind[node]
        a = root + yes[node]
        b = root + no[node]
        if kd == LEAF:
            v = value[node] * weights[top]
            for s in range(out.shape[0]):
                if masks[top, s]:
                    out[s] += v
            top -= 1
        elif kd == FEATURE:
            d = _route(indptr, indices, mindptr, mindices, fvar, t, node, feature[node], surr_feature, surr_same)
            if d < 0:
                share = _yes_share(count, a, b)
                if proportional:
                    masks[top + 1, :] = masks[top]
                    weights[top + 1] = weights[top] * share
                    weights[top] *= 1.0 - share
                    stack[top] = b
                    top += 1
                    stack[top] = a
                    continue
                d = 1 if share > 0.5 else 0
            stack[top] = a if d == 1 else b
        else:
            new_top = _split_states(stack, masks, top, a, b, states)
            if new_top > top:
                weights[new_top] = weights[top]
            top = new_top


@njit(cache=True, nogil=True)
def potentials_missing(rows, indptr, indices, mindptr, mindices, fvar, n_states, n_labels, kind, feature, yes, no,
                       states, value, count, surr_feature, surr_same, proportional, tree_roots, tree_labels,
                       max_depth):
    """phi (len(rows) x S x K) of tree.ensemble_potentials at the positions ``rows`` (those with missing values)."""
    phi = np.zeros((rows.shape[0], n_states, n_labels))
    stack = np.empty(max_depth + 1, dtype=np.int64)
    masks = np.empty((max_depth + 1, n_states), dtype=np.bool_)
    weights = np.empty(max_depth + 1)
    row = np.empty(n_states)
    for i in range(rows.shape[0]):
        for j in range(tree_roots.shape[0] - 1):
            row[:] = 0.0
            _eval_tree_missing(row, rows[i], indptr, indices, mindptr, mindices, fvar, kind, feature, yes, no, states,
                               value, count, surr_feature, surr_same, proportional, tree_roots[j], stack, masks,
                               weights)
            phi[i, :, tree_labels[j]] += row
    return phi


@njit(cache=True, nogil=True)
def multiply_tree_missing(E, positions, indptr, indices, mindptr, mindices, fvar, kind, feature, yes, no, states,
                          value, count, surr_feature, surr_same, proportional, k, scale_by, max_depth):
    """tree.multiply_tree with missing values: E[t, s, k] *= exp(scale_by * tree(x_t, s))."""
    S = E.shape[1]
    stack = np.empty(max_depth + 1, dtype=np.int64)
    masks = np.empty((max_depth + 1, S), dtype=np.bool_)
    weights = np.empty(max_depth + 1)
    row = np.empty(S)
    for i in range(positions.shape[0]):
        t = positions[i]
        row[:] = 0.0
        _eval_tree_missing(row, t, indptr, indices, mindptr, mindices, fvar, kind, feature, yes, no, states, value,
                           count, surr_feature, surr_same, proportional, 0, stack, masks, weights)
        for s in range(S):
            E[t, s, k] *= np.float32(np.exp(scale_by * row[s]))

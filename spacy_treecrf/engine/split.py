"""Split search: the best feature split and the best previous-state split of a node, and which one a leaf keeps.

The gain of a split is the decrease of the penalised squared error |G_L|^2/(N_L+lam) + |G_R|^2/(N_R+lam) -
|G|^2/(N+lam), summed over the d residual components (GBDT-MO's sum of the labels' gains for a shared tree; one
term for a per-label tree). A feature split is judged from the node's compact histogram (features it holds,
their G and N); where values may be missing, each feature is judged on the examples where its variable is known
(the routing rule's CART-style choice), and its surrogates are ranked here too. A state split sorts the previous
states by mean residual (of the first component: the projection with the most variance) and takes the best
prefix (optimal for squared error when d = 1, Breiman et al.'s ordering trick). A threshold split on a numeric
column (numeric.py) is judged from the cumulative sums of its bins' histogram entries, in both directions for
missing values (where they are not routed).
"""
from typing import NamedTuple

import numpy as np
from numba import njit

from .missing import is_missing
from .numeric import NumericIndex, passes
from .trees import FEATURE, STATE, TIE, tie_slack


class Compact(NamedTuple):
    """A complete histogram, compacted to the features the node holds: ids ascending or in touch order, and
    their residual sums g (m x d) and weights n."""
    ids: np.ndarray
    g: np.ndarray
    n: np.ndarray


class Known(NamedTuple):
    """Where missing values are routed, what best_threshold judges a numeric column on: each atom's variable
    (fvar, int32; -1: none) and the node's histogram of missing variables (the dense array of a Hist over the
    variables); empty arrays where no value is routed."""
    fvar: np.ndarray
    missing: np.ndarray


class Allowed(NamedTuple):
    """What a tree may split on: keep (bool per atom: the histogram entries a leaf keeps, what column subsampling
    left the tree: its binary features and the bins of its numeric columns), binary (keep without the bins: the
    features of present/absent splits), the atoms' NumericIndex (numeric.py) and ``unrouted``, best_threshold's
    ``known`` where no value is routed (empty arrays)."""
    keep: np.ndarray
    binary: np.ndarray
    numeric: NumericIndex
    unrouted: Known


class Candidates(NamedTuple):
    """Per node, the split a leaf would take: gain (-1: none), kind (FEATURE / STATE), feature, the states sent
    to the yes child, and (routing missing values) the yes share of the known examples."""
    gain: np.ndarray
    kind: np.ndarray
    feature: np.ndarray
    states: np.ndarray
    share: np.ndarray


class SurrogateScratch(NamedTuple):
    """Counts of surrogates' agreement: per feature (cnt: present with / absent with the split's feature) and
    per variable (mcnt), with marks of the ids met (seen, mseen) and their lists (touched, mtouched)."""
    cnt: np.ndarray
    seen: np.ndarray
    touched: np.ndarray
    mcnt: np.ndarray
    mseen: np.ndarray
    mtouched: np.ndarray


@njit(cache=True, nogil=True, error_model="numpy")
def gain_of(ql, nl, qr, nr, q, n, lam):
    """The gain from the squared norms q of the residual sums (|G_L|^2, |G_R|^2, |G|^2) and the weights."""
    return ql / (nl + lam) + qr / (nr + lam) - q / (n + lam)


@njit(cache=True, nogil=True)
def sq_norm(g):
    q = 0.0
    for i in range(g.shape[0]):
        q += g[i] * g[i]
    return q


@njit(cache=True, nogil=True)
def split_norms(gl, row, g):
    """(|gl[row]|^2, |g - gl[row]|^2) of a left child's residual sum gl[row] within its parent's g (a row index,
    not a row view: see histogram.py)."""
    ql = 0.0
    qr = 0.0
    for i in range(g.shape[0]):
        left = gl[row, i]
        ql += left * left
        r = g[i] - left
        qr += r * r
    return ql, qr


@njit(cache=True, nogil=True, error_model="numpy")
def best_feature(hist, m, g, n, settings, feature_ok, gains):
    """Best present/absent split from a node's Compact histogram (its first m entries): (gain, feature, yes
    share of the node's weight), feature -1 if none; among gains within TIE of the best, the lowest feature id.
    Only features with feature_ok[f] set may split. gains: scratch, 3 x features."""
    lam = settings.lam
    min_leaf = settings.min_leaf
    ids = hist.ids
    hn = hist.n
    ql, qr = gains[1], gains[2]
    child_norms(hist.g, m, g, ql, qr)
    q = sq_norm(g)
    out = gains[0]
    for i in range(m):  # branch-free, so that it vectorizes
        nl = hn[i]
        nr = n - nl
        gain = gain_of(ql[i], nl, qr[i], nr, q, n, lam)
        ok = (nl >= min_leaf) & (nr >= min_leaf) & (nl > 0.0) & (nr > 0.0) & (gain > 0.0) & feature_ok[ids[i]]
        out[i] = gain if ok else -1.0
    gain, f, slot = pick_best(ids, out, m, tie_slack(n))
    return gain, f, hn[slot] / n if f >= 0 else 0.5


@njit(cache=True, nogil=True)
def child_norms(hg, m, g, ql, qr):
    """ql[i] = |hg[i]|^2 and qr[i] = |g - hg[i]|^2 for the first m rows of a histogram's residual sums; one
    component (a per-label tree) in a loop that vectorizes."""
    if g.shape[0] == 1:
        g0 = g[0]
        for i in range(m):
            left = hg[i, 0]
            ql[i] = left * left
            qr[i] = (g0 - left) * (g0 - left)
        return
    for i in range(m):
        ql[i], qr[i] = split_norms(hg, i, g)


@njit(cache=True, nogil=True, error_model="numpy")
def best_feature_known(hist, m, g, n, fvar, var_dense, settings, feature_ok, gains):
    """best_feature where values may be missing: each feature judged on the examples where its variable is known
    (the node's G, N minus its variable's missing sums in var_dense). Returns (gain, feature, yes share of the
    known examples)."""
    ids = hist.ids
    d = g.shape[0]
    gk = np.empty(d)
    out = gains[0]
    for i in range(m):
        v = fvar[ids[i]]
        gk[:] = g
        nk = n
        if v >= 0 and var_dense[v, d] >= 0.0:
            for q in range(d):
                gk[q] -= var_dense[v, q]
            nk -= var_dense[v, d]
        nl = hist.n[i]
        nr = nk - nl
        ql, qr = split_norms(hist.g, i, gk)
        gain = gain_of(ql, nl, qr, nr, sq_norm(gk), nk, settings.lam)
        ok = (nl >= settings.min_leaf and nr >= settings.min_leaf and nl > 0.0 and nr > 0.0 and gain > 0.0
              and feature_ok[ids[i]])
        out[i] = gain if ok else -1.0
    gain, f, slot = pick_best(ids, out, m, tie_slack(n))
    if f < 0:
        return 0.0, -1, 0.5
    v = fvar[f]
    nk = n - (var_dense[v, d] if v >= 0 and var_dense[v, d] >= 0.0 else 0.0)
    return gain, f, hist.n[slot] / nk


@njit(cache=True, nogil=True, error_model="numpy")
def best_threshold(hist, m, g, n, numeric, known, settings):
    """Best threshold split on a numeric column from a node's Compact histogram (its first m entries; bin atoms
    carry their bins' sums): per column, its bins in ascending order, the yes side of "x <= u" is the running sum
    and that of "x > u" the column's total minus it, so the positions without a value (missing) go to the no side
    of either (numeric.py). Where missing values are routed (known: (fvar, the variables' missing histogram),
    non-empty), a column that belongs to a variable is judged on the examples where that is known, with "x <= u"
    only (a column of no variable is never routed: both tests). Returns
    (gain, test id, yes share of the known examples); among gains within TIE of the best, the lowest test id."""
    column = numeric.column
    n_atoms = column.shape[0]
    ids = hist.ids
    if n_atoms == 0:
        return 0.0, np.int64(-1), 0.5
    at = np.empty(m, dtype=np.int64)
    k = 0
    for i in range(m):
        if column[ids[i]] >= 0:
            at[k] = i
            k += 1
    if k == 0:
        return 0.0, np.int64(-1), 0.5
    order = at[:k]
    for i in range(1, k):  # compacted in feature order (most nodes with numeric columns): no sort needed
        if ids[order[i]] < ids[order[i - 1]]:
            order = order[np.argsort(ids[order])]
            break
    fvar, var_dense = known.fvar, known.missing
    routed = fvar.shape[0] > 0
    d = g.shape[0]
    lam = settings.lam
    min_leaf = settings.min_leaf
    gk = np.empty(d)
    total = np.empty(d)
    cum = np.zeros((1, d))
    rest = np.empty((1, d))
    best = (0.0, np.int64(-1), 0.5)
    i = 0
    while i < k:
        c = column[ids[order[i]]]
        j = i
        gk[:] = g
        nk = n
        v = fvar[ids[order[i]]] if routed else -1
        if v >= 0 and var_dense[v, d] >= 0.0:
            for q in range(d):
                gk[q] -= var_dense[v, q]
            nk -= var_dense[v, d]
        total[:] = 0.0
        n_total = 0.0
        while j < k and column[ids[order[j]]] == c:
            for q in range(d):
                total[q] += hist.g[order[j], q]
            n_total += hist.n[order[j]]
            j += 1
        q_all = sq_norm(gk)
        cum[0, :] = 0.0
        n_cum = 0.0
        for e in range(i, j):
            r = order[e]
            a = ids[r]
            for q in range(d):
                cum[0, q] += hist.g[r, q]
            n_cum += hist.n[r]
            ql, qr = split_norms(cum, 0, gk)  # "x <= u": yes = cum, no = the rest (missing values with it)
            best = _better(best, ql, n_cum, qr, nk - n_cum, q_all, (nk, lam, min_leaf), a)
            if v < 0:  # not routed: "x > u", yes = total - cum, no = cum and the missing values
                for q in range(d):
                    rest[0, q] = total[q] - cum[0, q]
                ql, qr = split_norms(rest, 0, gk)
                best = _better(best, ql, n_total - n_cum, qr, nk - n_total + n_cum, q_all, (nk, lam, min_leaf),
                               n_atoms + a)
        i = j
    return best


@njit(cache=True, nogil=True, error_model="numpy")
def _better(best, ql, nl, qr, nr, q, node, f):
    """best (gain, test, yes share) or the split of test f (yes: squared norm ql, weight nl; no: qr, nr), whichever
    gains more (the lower test id within TIE or tie_slack); node: (its weight n, lam, min_leaf)."""
    n, lam, min_leaf = node
    if not (nl >= min_leaf and nr >= min_leaf and nl > 0.0 and nr > 0.0):
        return best
    gain = gain_of(ql, nl, qr, nr, q, n, lam)
    top, f_best, _ = best
    slack = tie_slack(n)
    if gain > 0.0 and (f_best < 0 or gain > top * (1.0 + TIE) + slack or
                       (gain >= top * (1.0 - TIE) - slack and f < f_best)):
        return gain, np.int64(f), nl / n
    return best


@njit(cache=True, nogil=True)
def pick_best(ids, gains, m, slack):
    """(gain, feature, slot) of the largest of gains[:m] (-1 = refused); among gains within TIE of it or within
    ``slack`` (tie_slack) below it, the lowest feature id. Feature -1 if none is positive."""
    top = 0.0
    for i in range(m):
        if gains[i] > top:
            top = gains[i]
    if top <= 0.0:
        return 0.0, -1, -1
    floor = top * (1.0 - TIE) - slack
    best_f = -1
    best_i = -1
    best_gain = 0.0
    for i in range(m):
        if gains[i] >= floor and (best_f < 0 or ids[i] < best_f):
            best_f = ids[i]
            best_i = i
            best_gain = gains[i]
    return best_gain, best_f, best_i


@njit(cache=True, nogil=True, error_model="numpy")
def best_state(sums, states_row, g, n, settings, left_out):
    """Best subset of previous states (sums: the node's StateSums): sort states by mean residual (its first
    component) and take the best prefix (the shortest among near-ties: tie_slack); the states sent left go to
    left_out. Returns the gain (0.0: none)."""
    rs = sums.r
    ns = sums.n
    lam = settings.lam
    min_leaf = settings.min_leaf
    S = rs.shape[0]
    d = rs.shape[1]
    cand = np.empty(S, dtype=np.int64)
    m = 0
    for s in range(S):
        if states_row[s] and ns[s] > 0.0:
            cand[m] = s
            m += 1
    if m < 2:
        return 0.0
    means = np.empty(m)
    for i in range(m):
        means[i] = rs[cand[i], 0] / ns[cand[i]]
    order = cand[:m][np.argsort(means, kind="mergesort")]
    best_gain = 0.0
    best_cut = -1
    gl = np.zeros((1, d))
    q = sq_norm(g)
    nl = 0.0
    for i in range(m - 1):
        for j in range(d):
            gl[0, j] += rs[order[i], j]
        nl += ns[order[i]]
        nr = n - nl
        if nl >= min_leaf and nr >= min_leaf and nr > 0.0:
            ql, qr = split_norms(gl, 0, g)
            gain = gain_of(ql, nl, qr, nr, q, n, lam)
            if gain > best_gain + tie_slack(n):  # the first of near-tied cuts
                best_gain = gain
                best_cut = i
    left_out[:] = False
    for i in range(best_cut + 1):
        left_out[order[i]] = True
    return best_gain


@njit(cache=True, nogil=True)
def best_of(feature_split, threshold_split, n):
    """The better of a present/absent split and a threshold split of a node of weight n, each (gain, test, yes
    share; test -1: none): the larger gain, the lower test id within TIE or tie_slack(n)."""
    fg, ff, _ = feature_split
    tg, tf, _ = threshold_split
    slack = tie_slack(n)
    if tf >= 0 and (ff < 0 or tg > fg * (1.0 + TIE) + slack or (tg >= fg * (1.0 - TIE) - slack and tf < ff)):
        return threshold_split
    return feature_split


@njit(cache=True, nogil=True)
def record_candidate(cand, node, fg, ff, sg, left, settings, n):
    """Keep the better of the best feature split (fg, ff) and state split (sg, left) of a leaf of weight n in
    cand, the feature split on near-ties (TIE, tie_slack; settings.states_last: the feature split whenever there
    is one); True if the leaf may ever be split."""
    if ff >= 0 and (settings.states_last or fg >= sg * (1.0 - TIE) - tie_slack(n)):
        cand.gain[node] = fg
        cand.kind[node] = FEATURE
        cand.feature[node] = ff
    elif sg > 0.0:
        cand.gain[node] = sg
        cand.kind[node] = STATE
        cand.states[node, :] = left
    else:
        cand.gain[node] = -1.0
    return cand.gain[node] > settings.min_gain and cand.gain[node] > 0.0


@njit(cache=True, nogil=True)
def _count_row(cnt, seen, touched, nt, rows, t, side, w):
    """Add weight w to column ``side`` of cnt for every id in row t of rows; ids met for the first time are
    reset and listed in touched. Returns the new touched count."""
    for p in range(rows.indptr[t], rows.indptr[t + 1]):
        g = rows.indices[p]
        if not seen[g]:
            seen[g] = True
            cnt[g, 0] = 0.0
            cnt[g, 1] = 0.0
            touched[nt] = g
            nt += 1
        cnt[g, side] += w
    return nt


@njit(cache=True, nogil=True)
def surrogates(slots, lo, hi, f, rows, numeric, missing, scratch, out_f, out_same):
    """CART's surrogates of the split on f: over the node's positions slots.pos[lo:hi] (weights slots.val[:, 0])
    where f is known, every other binary feature g (of another variable; numeric bins are no tests of their own,
    see numeric.py) predicts the split by g present -> same side
    (or the opposite side); its agreement is counted where g is known too. Up to out_f.shape[0] features that
    beat the majority rule, best agreement rate first (then the lower feature id), go to out_f / out_same; the
    rest of out_f stays -1."""
    fvar = missing.fvar
    cnt, seen, touched = scratch.cnt, scratch.seen, scratch.touched
    mcnt, mseen = scratch.mcnt, scratch.mseen
    vf = fvar[f]
    tot = np.zeros(2)  # weight of the known positions with f present (0) / absent (1)
    nt = 0
    nmt = 0
    for i in range(lo, hi):
        t = slots.pos[i]
        if is_missing(missing, t, f):
            continue
        w = slots.val[i, 0]
        side = 0 if passes(rows, numeric, t, f) else 1
        tot[side] += w
        nt = _count_row(cnt, seen, touched, nt, rows, t, side, w)
        nmt = _count_row(mcnt, mseen, scratch.mtouched, nmt, missing, t, side, w)
    R = out_f.shape[0]
    out_f[:] = -1
    score = np.full(R, -1.0)
    for i in range(nt):
        g = touched[i]
        v = fvar[g]
        if g == f or (v >= 0 and v == vf) or (numeric.column.shape[0] > 0 and numeric.column[g] >= 0):
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
        mseen[scratch.mtouched[i]] = False

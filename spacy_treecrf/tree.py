"""Best-first regression trees over (position, previous-state) examples, and their evaluation.

A node is a product P x A: a set of positions times a set of previous states (intersected with validity).
A feature split partitions P (feature present / absent) and keeps A; a state split partitions A and keeps P.
So a node's statistics come from per-position sums r_t = sum_{s in A} D[t, s] and counts
n_t = sum_{s in A} W(t, s): scanning a node costs O(its nonzeros + |P| |A|), never O(nonzeros x K).
fit_tree scans as little as it can: at a feature split only the child with fewer positions (the other's
feature histogram and per-state sums are the parent's minus that child's), at a state split only the node
once for both children; r_t moves with the positions, so the large "absent" child of a sparse feature costs
a pass over its positions and its touched features, not over its nonzeros and D.

Leaf values and gains use the paper's shrinkage (Eq. 1): value G / (N + lam); the gain of a split is the
decrease of the penalised squared error G_L^2/(N_L+lam) + G_R^2/(N_R+lam) - G^2/(N+lam).

Tree arrays (one row per node): kind (LEAF / FEATURE / STATE), feature, yes / no children (yes = feature
present, or the state subset chosen for the left), value, count, and the node's own state set ``states``.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

LEAF, FEATURE, STATE = 0, 1, 2


# Relative tolerance under which two gains count as tied (then the lower feature id, the feature split over
# the state split, and the lower node id win). Sums reached by histogram subtraction differ from direct
# sums by rounding only, so exact ties of the arithmetic must not decide the tree.
TIE = 1e-10
# How many positions ahead the scans ask for the rows they will read (a node's positions are scattered).
AHEAD = 16
_PREFETCH = "llvm.prefetch." + ir.IntType(8).as_pointer().intrinsic_name  # mangled as this llvmlite does


@intrinsic
def _prefetch(typingctx, arr, i, j):
    """Ask the CPU to start loading arr[i] (1-d) or arr[i, j] (2-d) into cache; changes no result."""
    if not isinstance(arr, types.Array) or arr.ndim not in (1, 2):
        return None
    sig = types.void(arr, i, j)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 2)][:aryty.ndim]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _PREFETCH)
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _count_trailing_zeros(typingctx, x):
    """The index of the lowest set bit of a nonzero uint64 (one instruction)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.int64(types.uint64), codegen


@njit(cache=True, nogil=True)
def _prefetch_rows(pbuf, i, hi, D, with_d, indptr, indices):
    """Prefetch for a scan at slot i: the D row and indptr entry AHEAD slots on, the CSR row AHEAD/2 on."""
    if i + AHEAD < hi:
        t = pbuf[i + AHEAD]
        _prefetch(indptr, t, 0)
        if with_d:
            for s in range(0, D.shape[1], 8):
                _prefetch(D, t, s)
            _prefetch(D, t, D.shape[1] - 1)
    if i + AHEAD // 2 < hi:
        p = indptr[pbuf[i + AHEAD // 2]]
        _prefetch(indices, p, 0)
        _prefetch(indices, p + 15, 0)


@njit(cache=True, nogil=True, error_model="numpy")
def _gain(gl, nl, gr, nr, g, n, lam):
    return gl * gl / (nl + lam) + gr * gr / (nr + lam) - g * g / (n + lam)


@njit(cache=True, nogil=True)
def csc_index(indptr, indices, n_features):
    """Inverted index of CSR rows: positions of feature f are col_pos[col_ptr[f]:col_ptr[f + 1]], ascending.

    It only depends on the rows: build it once per training set and pass it to every ``fit_tree``."""
    T = indptr.shape[0] - 1
    if T >= 2 ** 31:
        raise ValueError("csc_index: at most 2**31 - 1 positions")
    return _transpose(indptr, indices, n_features)


@njit(cache=True, nogil=True)
def _transpose(indptr, cols, n_cols):
    """(col_ptr, col_pos): the rows' entries by column, rows ascending within each; entries with column -1 are
    left out."""
    T = indptr.shape[0] - 1
    col_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    for p in range(indptr[T]):
        if cols[p] >= 0:
            col_ptr[cols[p] + 1] += 1
    for j in range(n_cols):
        col_ptr[j + 1] += col_ptr[j]
    fill = col_ptr[:n_cols].copy()
    col_pos = np.empty(col_ptr[n_cols], dtype=np.int32)
    for t in range(T):
        for p in range(indptr[t], indptr[t + 1]):
            j = cols[p]
            if j >= 0:
                col_pos[fill[j]] = t
                fill[j] += 1
    return col_ptr, col_pos


@njit(cache=True, nogil=True)
def _valid_states(states_row, allowed_k, mid):
    """A state set's valid states: at a sequence start (weight 1.0 if state 0 is in, else 0.0) and elsewhere
    (those > 0, ascending, into ``mid``; returns their number)."""
    S = states_row.shape[0]
    m = 0
    w_start = 1.0 if states_row[0] and allowed_k[0] else 0.0
    for s in range(1, S):
        if states_row[s] and allowed_k[s]:
            mid[m] = s
            m += 1
    return w_start, m


@njit(cache=True, nogil=True)
def _row_sum(D, t, start, w_start, mid, m):
    """r_t: D[t, s] summed over the valid states, in ascending state order."""
    if start:
        return D[t, 0] if w_start > 0.0 else 0.0
    rt = 0.0
    for j in range(m):
        rt += D[t, mid[j]]
    return rt


@njit(cache=True, nogil=True)
def _scan(pbuf, rbuf, lo, hi, set_r, D, is_start, w_start, mid, m, with_states, rs, ns, with_hist, indptr,
          indices, dense, touched):
    """One pass over the positions pbuf[lo:hi] of a node:
    - set_r: r_t into rbuf (else rbuf holds it already); returns G and N;
    - with_states: per-state residual sums and counts R_s, N_s into rs, ns;
    - with_hist: dense[f] = (sum of r_t, sum of n_t) over the positions holding f (rows not touched before
      have dense[f, 1] < 0; the touched features are listed in ``touched``).
    Returns (G, N, number of touched features)."""
    w_mid = float(m)
    if with_states:
        rs[:] = 0.0
        ns[:] = 0.0
    n_start = 0.0
    n_mid = 0.0
    g = 0.0
    nt = 0
    read_d = set_r or with_states
    for i in range(lo, hi):
        _prefetch_rows(pbuf, i, hi, D, read_d, indptr, indices)
        t = pbuf[i]
        st = is_start[t]
        if set_r:
            rt = _row_sum(D, t, st, w_start, mid, m)
            rbuf[i] = rt
        else:
            rt = rbuf[i]
        g += rt
        if st:
            n_start += 1.0
            if with_states and w_start > 0.0:
                rs[0] += D[t, 0]
        else:
            n_mid += 1.0
            if with_states:
                for j in range(m):
                    rs[mid[j]] += D[t, mid[j]]
        if with_hist:
            nt = _add_row(dense, touched, nt, indptr, indices, t, rt, w_start if st else w_mid)
    if with_states:
        ns[0] = n_start * w_start
        for j in range(m):
            ns[mid[j]] = n_mid
    return g, n_start * w_start + n_mid * w_mid, nt


@njit(cache=True, nogil=True)
def _add_row(dense, touched, nt, indptr, indices, t, r, w):
    """Add position t's residual sum r and weight w to the histogram of every feature in its row; features met
    for the first time (dense[f, 1] < 0) are reset and listed in touched. Returns the new touched count."""
    for p in range(indptr[t], indptr[t + 1]):
        f = indices[p]
        if dense[f, 1] < 0.0:
            dense[f, 0] = 0.0
            dense[f, 1] = 0.0
            touched[nt] = f
            nt += 1
        dense[f, 0] += r
        dense[f, 1] += w
    return nt


@njit(cache=True, nogil=True)
def _scan_state_split(pbuf, rbuf, lo, hi, out, D, is_start, wa_start, mid_a, ma, wb_start, mid_b, mb, with_hist,
                      indptr, indices, dense, touched):
    """A state split's one pass over the node's positions pbuf[lo:hi]: both children's r_t (the first child's
    in place, the second's with a copy of the positions at slot ``out``), their G and N and, with_hist, the
    first child's feature histogram into dense (as in _scan; the second's is the parent's minus it).
    Returns (G_a, N_a, G_b, N_b, number of touched features)."""
    ga = 0.0
    gb = 0.0
    n_start = 0.0
    nt = 0
    wa_mid = float(ma)
    for i in range(lo, hi):
        _prefetch_rows(pbuf, i, hi, D, True, indptr, indices)
        t = pbuf[i]
        st = is_start[t]
        ra = _row_sum(D, t, st, wa_start, mid_a, ma)
        rb = _row_sum(D, t, st, wb_start, mid_b, mb)
        j = out + i - lo
        pbuf[j] = t
        rbuf[i] = ra
        rbuf[j] = rb
        ga += ra
        gb += rb
        if st:
            n_start += 1.0
        if with_hist:
            nt = _add_row(dense, touched, nt, indptr, indices, t, ra, wa_start if st else wa_mid)
    n_mid = (hi - lo) - n_start
    return ga, n_start * wa_start + n_mid * wa_mid, gb, n_start * wb_start + n_mid * float(mb), nt


@njit(cache=True, nogil=True)
def _partition(pbuf, rbuf, lo, hi, tmp_p, tmp_r, f, cptr, cpos, mark, indptr, indices, is_start, w_start, w_mid):
    """Stable in-place partition of a node's slots (positions and their r_t) on feature f: the positions
    without f first, then those with it (usually the fewer, they go through tmp_p/tmp_r). Positions holding f
    are marked from the inverted index, or looked up in their rows when that index is long for the node.
    Returns (n_present, n_absent, G and N of the present, G and N of the absent)."""
    c0 = cptr[f]
    c1 = cptr[f + 1]
    use_mark = (c1 - c0) <= 8 * (hi - lo)
    if use_mark:
        for q in range(c0, c1):
            mark[cpos[q]] = True
    na = 0
    nb = 0
    ga = 0.0
    gb = 0.0
    n_start_a = 0.0
    n_start_b = 0.0
    for i in range(lo, hi):
        t = pbuf[i]
        rt = rbuf[i]
        st = is_start[t]
        if use_mark:
            present = mark[t]
        else:
            present = _has_feature(indptr, indices, t, f)
        if present:
            tmp_p[na] = t
            tmp_r[na] = rt
            na += 1
            ga += rt
            if st:
                n_start_a += 1.0
        else:
            if na > 0:
                pbuf[lo + nb] = t
                rbuf[lo + nb] = rt
            nb += 1
            gb += rt
            if st:
                n_start_b += 1.0
    pbuf[lo + nb:hi] = tmp_p[:na]
    rbuf[lo + nb:hi] = tmp_r[:na]
    if use_mark:
        for q in range(c0, c1):
            mark[cpos[q]] = False
    wa = n_start_a * w_start + (na - n_start_a) * w_mid
    wb = n_start_b * w_start + (nb - n_start_b) * w_mid
    return na, nb, ga, wa, gb, wb


@njit(cache=True, nogil=True)
def _compact(dense, touched, n_touched, ids, hg, hn):
    """Copy the touched features with a positive count into (ids, hg, hn); returns how many. When many are
    touched, dense is read in feature order (faster, and the ids come out ascending)."""
    m = 0
    in_order = 8 * n_touched > dense.shape[0]
    for i in range(dense.shape[0] if in_order else n_touched):
        f = i if in_order else touched[i]
        nf = dense[f, 1]
        if nf > 0.0:
            ids[m] = f
            hg[m] = dense[f, 0]
            hn[m] = nf
            m += 1
    return m


@njit(cache=True, nogil=True)
def _clear(dense, touched, n_touched):
    """Mark the touched rows of dense untouched again."""
    if 8 * n_touched > dense.shape[0]:
        dense[:, 1] = -1.0
    else:
        for i in range(n_touched):
            dense[touched[i], 1] = -1.0


@njit(cache=True, nogil=True)
def _subtract(p_ids, p_g, p_n, p_len, dense):
    """A child's compact histogram as its parent's minus the sibling's (held in dense), written over the
    parent's arrays (in order, so ascending ids stay ascending); returns its length."""
    h = 0
    for i in range(p_len):
        j = p_ids[i]
        gj = p_g[i]
        nj = p_n[i]
        if dense[j, 1] >= 0.0:
            gj -= dense[j, 0]
            nj -= dense[j, 1]
        if nj > 0.0:
            p_ids[h] = j
            p_g[h] = gj
            p_n[h] = nj
            h += 1
    return h


@njit(cache=True, nogil=True, error_model="numpy")
def _best_feature(ids, hg, hn, m, g, n, lam, min_leaf, feature_ok, gains):
    """Best present/absent split from a node's compact histogram: (gain, feature), feature -1 if none; among
    gains within TIE of the best, the lowest feature id. Only features with feature_ok[f] set may split."""
    for i in range(m):  # branch-free, so that it vectorizes
        nl = hn[i]
        nr = n - nl
        gl = hg[i]
        gain = _gain(gl, nl, g - gl, nr, g, n, lam)
        ok = (nl >= min_leaf) & (nr >= min_leaf) & (nl > 0.0) & (nr > 0.0) & (gain > 0.0) & feature_ok[ids[i]]
        gains[i] = gain if ok else -1.0
    gain, f, _ = _pick_best(ids, gains, m)
    return gain, f


@njit(cache=True, nogil=True)
def _pick_best(ids, gains, m):
    """(gain, feature, slot) of the largest of gains[:m] (-1 = refused); among gains within TIE of it, the
    lowest feature id. Feature -1 if none is positive."""
    top = 0.0
    for i in range(m):
        if gains[i] > top:
            top = gains[i]
    if top <= 0.0:
        return 0.0, -1, -1
    floor = top * (1.0 - TIE)
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
def _best_state(rs, ns, states_row, g, n, lam, min_leaf, left_out):
    """Best subset of previous states: sort states by mean residual and take the best prefix."""
    S = rs.shape[0]
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
        means[i] = rs[cand[i]] / ns[cand[i]]
    order = cand[:m][np.argsort(means, kind="mergesort")]
    best_gain = 0.0
    best_cut = -1
    gl = 0.0
    nl = 0.0
    for i in range(m - 1):
        gl += rs[order[i]]
        nl += ns[order[i]]
        nr = n - nl
        if nl >= min_leaf and nr >= min_leaf and nr > 0.0:
            gain = _gain(gl, nl, g - gl, nr, g, n, lam)
            if gain > best_gain:
                best_gain = gain
                best_cut = i
    left_out[:] = False
    for i in range(best_cut + 1):
        left_out[order[i]] = True
    return best_gain


@njit(cache=True, nogil=True)
def _grow(buf, size):
    if size <= buf.shape[0]:
        return buf
    out = np.empty(max(size, 2 * buf.shape[0]), dtype=buf.dtype)
    out[: buf.shape[0]] = buf
    return out


@njit(cache=True, nogil=True)
def _set_leaf(node, g, n, lam, gsum, count, value):
    gsum[node] = g
    count[node] = n
    value[node] = g / (n + lam) if n + lam > 0.0 else 0.0


@njit(cache=True, nogil=True)
def _candidate(node, ids, hg, hn, h, h_ids, h_g, h_n, h_len, gsum, count, rs_node, ns_node, states, rule, feature_ok,
               gains, left, cgain, ckind, cfeat, cstates):
    """A new leaf's best split (the feature split on near-ties); a leaf that may ever be split keeps its compact
    histogram (ids, hg, hn, h) in h_ids / h_g / h_n / h_len until it is. ``rule``: (lam, min_leaf, min_gain,
    states_last) of fit_tree."""
    lam, min_leaf, min_gain, states_last = rule
    g = gsum[node]
    n = count[node]
    fg, ff = _best_feature(ids, hg, hn, h, g, n, lam, min_leaf, feature_ok, gains)
    sg = _best_state(rs_node[node], ns_node[node], states[node], g, n, lam, min_leaf, left)
    if _record_candidate(node, fg, ff, sg, left, min_gain, cgain, ckind, cfeat, cstates, states_last):
        h_ids[node] = ids
        h_g[node] = hg
        h_n[node] = hn
        h_len[node] = h


@njit(cache=True, nogil=True)
def _record_candidate(node, fg, ff, sg, left, min_gain, cgain, ckind, cfeat, cstates, states_last):
    """Keep the better of a leaf's best feature split (fg, ff) and state split (sg, left), the feature split on
    near-ties (``states_last``: the feature split whenever there is one); True if the leaf may ever be split."""
    if ff >= 0 and (states_last or fg >= sg * (1.0 - TIE)):
        cgain[node] = fg
        ckind[node] = FEATURE
        cfeat[node] = ff
    elif sg > 0.0:
        cgain[node] = sg
        ckind[node] = STATE
        cstates[node, :] = left
    else:
        cgain[node] = -1.0
    return cgain[node] > min_gain and cgain[node] > 0.0


@njit(cache=True, nogil=True)
def _children_candidates(scanned, other, do_scanned, do_other, dense, touched, nt, p_ids, p_g, p_n, p_len, h_ids,
                         h_g, h_n, h_len, gsum, count, rs_node, ns_node, states, rule, feature_ok, gains, left, cgain,
                         ckind, cfeat, cstates):
    """Best splits of two new children: the scanned child's from its fresh histogram (dense / touched), the
    other's from the parent's histogram minus it."""
    if do_scanned:
        ids = np.empty(nt, dtype=np.int32)
        hg = np.empty(nt)
        hn = np.empty(nt)
        h = _compact(dense, touched, nt, ids, hg, hn)
        _candidate(scanned, ids, hg, hn, h, h_ids, h_g, h_n, h_len, gsum, count, rs_node, ns_node, states, rule,
                   feature_ok, gains, left, cgain, ckind, cfeat, cstates)
    if do_other:
        h = _subtract(p_ids, p_g, p_n, p_len, dense)
        _candidate(other, p_ids, p_g, p_n, h, h_ids, h_g, h_n, h_len, gsum, count, rs_node, ns_node, states, rule,
                   feature_ok, gains, left, cgain, ckind, cfeat, cstates)
    _clear(dense, touched, nt)


@njit(cache=True, nogil=True)
def _best_leaf(n_nodes, kind, yes, cgain, min_gain):
    """The leaf to expand next: the largest candidate gain, the lowest node id among near-ties; -1 if none."""
    top = 0.0
    for node in range(n_nodes):
        if kind[node] == LEAF and yes[node] < 0 and cgain[node] > min_gain and cgain[node] > top:
            top = cgain[node]
    if top <= 0.0:
        return -1
    for node in range(n_nodes):
        if kind[node] == LEAF and yes[node] < 0 and cgain[node] >= top * (1.0 - TIE) and cgain[node] > min_gain:
            return node
    return -1


@njit(cache=True, nogil=True)
def new_nodes(max_nodes, S):
    """The arrays of a tree being grown: per node kind, feature, yes, no, value, count, gsum, states, its
    segment of positions (pstart, plen), per-state sums (rs, ns); and each leaf's candidate split (gain, kind,
    feature, states)."""
    return (np.zeros(max_nodes, dtype=np.int8), np.full(max_nodes, -1, dtype=np.int32),
            np.full(max_nodes, -1, dtype=np.int32), np.full(max_nodes, -1, dtype=np.int32), np.zeros(max_nodes),
            np.zeros(max_nodes), np.zeros(max_nodes), np.zeros((max_nodes, S), dtype=np.bool_),
            np.zeros(max_nodes, dtype=np.int64), np.zeros(max_nodes, dtype=np.int64), np.zeros((max_nodes, S)),
            np.zeros((max_nodes, S)), np.full(max_nodes, -1.0), np.zeros(max_nodes, dtype=np.int8),
            np.full(max_nodes, -1, dtype=np.int32), np.zeros((max_nodes, S), dtype=np.bool_))


@njit(cache=True, nogil=True)
def influential_positions(D, positions, trim):
    """Influence trimming: the positions with some residual of magnitude >= ``trim`` (all of them if none has),
    without the T x S temporaries a numpy expression would make for every label of a round."""
    keep = np.empty(positions.shape[0], dtype=positions.dtype)
    n = 0
    for i in range(positions.shape[0]):
        t = positions[i]
        for s in range(D.shape[1]):
            if abs(D[t, s]) >= trim:
                keep[n] = t
                n += 1
                break
    return keep[:n].copy() if n > 0 else positions


@njit(cache=True, nogil=True)
def fit_tree(indptr, indices, n_features, D, is_start, allowed_k, positions, max_leaves, lam, min_leaf,
             min_gain, col_ptr=None, col_pos=None, feature_ok=None, states_last=False):
    """Grow one tree best-first to at most ``max_leaves`` leaves on residuals D (T x S).

    Returns the node arrays plus, for each node, the segment of ``pbuf`` holding its positions (the booster
    uses the leaves' segments to update its cached potentials without re-evaluating the tree). Segments are
    ascending. ``col_ptr``, ``col_pos``: the rows' inverted index from ``csc_index`` (built here if not given).
    ``feature_ok`` (bool per feature, default all): the features this tree may split on (column subsampling).
    ``states_last``: a leaf splits on the previous state only where no feature split gains (label_splits
    "fallback" in booster.BoostParams).

    A node's positions sit in a segment of ``pbuf`` with their r_t alongside in ``rbuf``. A feature split
    partitions the segment in place (stable), moving r_t along and summing both children's G and N on the way;
    only the child with fewer positions is scanned for its feature histogram and per-state sums, the other's
    are the parent's minus those. A state split copies the segment for its second child and computes both
    children's r_t and the first child's feature histogram in one pass (the second's is the parent's minus
    it); their per-state sums are the parent's. A leaf that may
    still be split keeps its histogram in compact form (the features it touches, G, N) until it is split.
    """
    if col_ptr is None or col_pos is None:
        cptr, cpos = csc_index(indptr, indices, n_features)
    else:
        cptr, cpos = col_ptr, col_pos
    if feature_ok is None:
        ok_features = np.ones(n_features, dtype=np.bool_)
    else:
        ok_features = feature_ok
    T = D.shape[0]
    S = D.shape[1]
    if T >= 2 ** 31:
        raise ValueError("fit_tree: at most 2**31 - 1 positions")
    max_nodes = max(2 * max_leaves - 1, 1)
    (kind, feature, yes, no, value, count, gsum, states, pstart, plen, rs_node, ns_node, cgain, ckind, cfeat,
     cstates) = new_nodes(max_nodes, S)
    # compact histograms of the leaves that may still be split
    h_ids = [np.empty(0, dtype=np.int32) for _ in range(max_nodes)]
    h_g = [np.empty(0) for _ in range(max_nodes)]
    h_n = [np.empty(0) for _ in range(max_nodes)]
    h_len = np.zeros(max_nodes, dtype=np.int64)

    n_pos = positions.shape[0]
    # positions as int32 (T < 2**31, checked above): less to move while growing, and half the memory in the
    # result, which the booster holds for every label of a round; grows by a copy of the node at each state split
    pbuf = np.empty(2 * n_pos + 16, dtype=np.int32)
    rbuf = np.empty(2 * n_pos + 16)
    ascending = True
    for i in range(1, n_pos):
        if positions[i] < positions[i - 1]:
            ascending = False
            break
    pbuf[:n_pos] = positions if ascending else np.sort(positions)
    used = n_pos
    tmp_p = np.empty(n_pos, dtype=np.int32)
    tmp_r = np.empty(n_pos)
    mark = np.zeros(T, dtype=np.bool_)
    dense = np.empty((n_features, 2))
    dense[:, 1] = -1.0
    touched = np.empty(n_features, dtype=np.int32)
    gains = np.empty(n_features)
    mid = np.empty(S, dtype=np.int64)
    mid_b = np.empty(S, dtype=np.int64)
    left = np.zeros(S, dtype=np.bool_)

    rule = (lam, min_leaf, min_gain, states_last)  # how _candidate picks a leaf's split
    # root: r_t, G, N, per-state sums and the feature histogram in one pass
    states[0, :] = True
    w_start, m_mid = _valid_states(states[0], allowed_k, mid)
    splittable = max_leaves > 1 and n_pos > 0
    g, n, nt = _scan(pbuf, rbuf, 0, n_pos, True, D, is_start, w_start, mid, m_mid, splittable, rs_node[0],
                     ns_node[0], splittable, indptr, indices, dense, touched)
    _set_leaf(0, g, n, lam, gsum, count, value)
    plen[0] = n_pos
    n_nodes = 1
    n_leaves = 1
    if splittable:
        ids = np.empty(nt, dtype=np.int32)
        hg = np.empty(nt)
        hn = np.empty(nt)
        h = _compact(dense, touched, nt, ids, hg, hn)
        _clear(dense, touched, nt)
        _candidate(0, ids, hg, hn, h, h_ids, h_g, h_n, h_len, gsum, count, rs_node, ns_node, states, rule,
                   ok_features, gains, left, cgain, ckind, cfeat, cstates)

    while n_leaves < max_leaves:
        # expand the leaf with the largest gain (the lowest node id among near-ties)
        best = _best_leaf(n_nodes, kind, yes, cgain, min_gain)
        if best < 0:
            break
        a = n_nodes
        b = n_nodes + 1
        n_nodes += 2
        n_leaves += 1
        last = n_leaves >= max_leaves  # the children stay leaves: no candidates needed
        kind[best] = ckind[best]
        yes[best] = a
        no[best] = b
        lo = pstart[best]
        hi = lo + plen[best]
        w_start, m_mid = _valid_states(states[best], allowed_k, mid)
        w_mid = float(m_mid)
        p_ids = h_ids[best]
        p_g = h_g[best]
        p_n = h_n[best]
        p_len = h_len[best]
        h_ids[best] = np.empty(0, dtype=np.int32)
        h_g[best] = np.empty(0)
        h_n[best] = np.empty(0)
        h_len[best] = 0
        if ckind[best] == FEATURE:
            f = cfeat[best]
            feature[best] = f
            states[a, :] = states[best]
            states[b, :] = states[best]
            na, nb, ga, wa, gb, wb = _partition(pbuf, rbuf, lo, hi, tmp_p, tmp_r, f, cptr, cpos, mark, indptr,
                                                indices, is_start, w_start, w_mid)
            pstart[a] = lo + nb
            plen[a] = na
            pstart[b] = lo
            plen[b] = nb
            _set_leaf(a, ga, wa, lam, gsum, count, value)
            _set_leaf(b, gb, wb, lam, gsum, count, value)
            if last:
                break
            split_a = wa >= 2.0 * min_leaf and wa > 0.0
            split_b = wb >= 2.0 * min_leaf and wb > 0.0
            if not (split_a or split_b):
                continue
            # the child with fewer positions from the data, the other one by subtraction
            small, large = (a, b) if na <= nb else (b, a)
            split_small, split_large = (split_a, split_b) if na <= nb else (split_b, split_a)
            s_lo = pstart[small]
            s_hi = s_lo + plen[small]
            with_states = (w_start > 0.0) + m_mid >= 2
            _, _, nt = _scan(pbuf, rbuf, s_lo, s_hi, False, D, is_start, w_start, mid, m_mid, with_states,
                             rs_node[small], ns_node[small], True, indptr, indices, dense, touched)
            if with_states:
                for s in range(S):
                    rs_node[large, s] = rs_node[best, s] - rs_node[small, s]
                    ns_node[large, s] = ns_node[best, s] - ns_node[small, s]
            _children_candidates(small, large, split_small, split_large, dense, touched, nt, p_ids, p_g, p_n, p_len, h_ids, h_g,
                                 h_n, h_len, gsum, count, rs_node, ns_node, states, rule, ok_features, gains,
                                 left, cgain, ckind, cfeat, cstates)
        else:
            for s in range(S):
                states[a, s] = states[best, s] and cstates[best, s]
                states[b, s] = states[best, s] and not cstates[best, s]
                rs_node[a, s] = rs_node[best, s] if states[a, s] else 0.0
                ns_node[a, s] = ns_node[best, s] if states[a, s] else 0.0
                rs_node[b, s] = rs_node[best, s] if states[b, s] else 0.0
                ns_node[b, s] = ns_node[best, s] if states[b, s] else 0.0
            m_len = hi - lo
            pbuf = _grow(pbuf, used + m_len)
            rbuf = _grow(rbuf, used + m_len)
            wa_start, ma = _valid_states(states[a], allowed_k, mid)
            wb_start, mb = _valid_states(states[b], allowed_k, mid_b)
            with_hist = not last
            ga, wa, gb, wb, nt = _scan_state_split(pbuf, rbuf, lo, hi, used, D, is_start, wa_start, mid, ma,
                                                   wb_start, mid_b, mb, with_hist, indptr, indices, dense,
                                                   touched)
            pstart[a] = lo
            plen[a] = m_len
            pstart[b] = used
            plen[b] = m_len
            used += m_len
            _set_leaf(a, ga, wa, lam, gsum, count, value)
            _set_leaf(b, gb, wb, lam, gsum, count, value)
            if last:
                break
            _children_candidates(a, b, wa >= 2.0 * min_leaf and wa > 0.0, wb >= 2.0 * min_leaf and wb > 0.0, dense, touched, nt, p_ids, p_g, p_n, p_len, h_ids, h_g,
                                 h_n, h_len, gsum, count, rs_node, ns_node, states, rule, ok_features, gains,
                                 left, cgain, ckind, cfeat, cstates)
    return (kind[:n_nodes].copy(), feature[:n_nodes].copy(), yes[:n_nodes].copy(), no[:n_nodes].copy(),
            value[:n_nodes].copy(), count[:n_nodes].copy(), states[:n_nodes].copy(), pbuf[:used].copy(),
            pstart[:n_nodes].copy(), plen[:n_nodes].copy())


@njit(cache=True, nogil=True)
def step_leaf_values(D, is_start, allowed_k, kind, states, pbuf, pstart, plen, lam, newton):
    """Leaf values sum(D) / (lam + h) over each leaf's cells, clipped to [-1, 1], in place of the paper's mean
    sum(D) / (lam + N) over its N (position, state) cells, which spreads a position's gradient
    sum_s D = I(y = k) - P(y = k) over the leaf's states and so steps a state-free leaf K + 1 times too short.

    newton: h = sum(|D| (1 - |D|)), one Newton step on the CRF loss with its diagonal Hessian (for a labelled
    cell |D| (1 - |D|) = P (1 - P); Friedman's TreeBoost step for the multinomial deviance). Otherwise h = the
    leaf's positions: a Newton step that takes 1 for each position's curvature (at most 1/4, so the step is
    conservative), which never needs the clip for the CRF loss (|sum over a position's cells| <= 1). The clip keeps the paper's bound
    |leaf value| <= 1, which the cache's float32 range relies on."""
    S = D.shape[1]
    mid = np.empty(S, np.int64)
    value = np.zeros(kind.shape[0])
    for node in range(kind.shape[0]):
        if kind[node] != LEAF:
            continue
        w_start, m = _valid_states(states[node], allowed_k, mid)
        g = 0.0
        h = 0.0
        for i in range(pstart[node], pstart[node] + plen[node]):
            t = pbuf[i]
            if is_start[t]:
                if w_start > 0.0:
                    d = D[t, 0]
                    g += d
                    h += abs(d) * (1.0 - abs(d)) if newton else 1.0
            else:
                for j in range(m):
                    d = D[t, mid[j]]
                    g += d
                    if newton:
                        h += abs(d) * (1.0 - abs(d))
                if m > 0 and not newton:
                    h += 1.0
        if h + lam > 0.0:
            value[node] = min(max(g / (h + lam), -1.0), 1.0)
    return value


@njit(cache=True, nogil=True)
def apply_leaves(E, kind, yes, states, value, pbuf, pstart, plen, k, scale_by):
    """Multiply exp(scale_by * leaf value) into the cached potentials of each leaf's (positions x states)."""
    S = E.shape[1]
    sel = np.empty(S, dtype=np.int64)
    for node in range(kind.shape[0]):
        if kind[node] != LEAF:
            continue
        f = np.float32(np.exp(scale_by * value[node]))
        m = 0
        for s in range(S):
            if states[node, s]:
                sel[m] = s
                m += 1
        for i in range(pstart[node], pstart[node] + plen[node]):
            t = pbuf[i]
            for j in range(m):
                E[t, sel[j], k] *= f


@njit(cache=True, nogil=True)
def apply_trees(E, t0, t1, pbufs, leaf_tree, leaf_label, leaf_lo, leaf_hi, leaf_value, leaf_states, scale_by,
                block):
    """Several trees' apply_leaves at once, for positions t0 <= t < t1: E[t, s, label] *= exp(scale_by * value)
    over each leaf's (positions x states). Every leaf's segment pbufs[leaf_tree[l]][leaf_lo[l]:leaf_hi[l]] must
    be ascending (fit_tree's are). The positions are walked in blocks of ``block``, every leaf applying its part
    of a block in turn: a block of E is loaded once for all the trees instead of once per tree (E[t, s, k] for
    one k lies on a separate cache line for every (t, s))."""
    L = leaf_tree.shape[0]
    S = E.shape[1]
    cur = np.empty(L, dtype=np.int64)
    sel = np.empty((L, S), dtype=np.int64)
    n_sel = np.zeros(L, dtype=np.int64)
    for l in range(L):
        seg = pbufs[leaf_tree[l]]
        p0 = leaf_lo[l]
        p1 = leaf_hi[l]
        while p0 < p1:  # first position >= t0
            mid = (p0 + p1) // 2
            if seg[mid] < t0:
                p0 = mid + 1
            else:
                p1 = mid
        cur[l] = p0
        m = 0
        for s in range(S):
            if leaf_states[l, s]:
                sel[l, m] = s
                m += 1
        n_sel[l] = m
    for b0 in range(t0, t1, block):
        b1 = min(b0 + block, t1)
        for l in range(L):
            seg = pbufs[leaf_tree[l]]
            c = cur[l]
            hi = leaf_hi[l]
            k = leaf_label[l]
            f = np.float32(np.exp(scale_by * leaf_value[l]))
            m = n_sel[l]
            while c < hi and seg[c] < b1:
                t = seg[c]
                for j in range(m):
                    E[t, sel[l, j], k] *= f
                c += 1
            cur[l] = c


@njit(cache=True, nogil=True)
def _has_feature(indptr, indices, t, f):
    p0 = indptr[t]
    p1 = indptr[t + 1]
    while p0 < p1:
        mid = (p0 + p1) // 2
        if indices[mid] < f:
            p0 = mid + 1
        else:
            p1 = mid
    return p0 < indptr[t + 1] and indices[p0] == f


@njit(cache=True, nogil=True)
def _mark_row(present, mark, indptr, indices, t):
    """present[f] = mark for the features of row t (1 before a walk, 0 after it): a feature test is then one
    load from a byte array small enough to stay in cache."""
    for p in range(indptr[t], indptr[t + 1]):
        f = indices[p]
        if f < present.shape[0]:  # features no tree tests need no mark
            present[f] = mark


@njit(cache=True, nogil=True)
def _eval_tree(out, present, kind, feature, yes, no, states, value, root, stack, masks):
    """out[s] += tree(x, s) for all s, x being the row marked 1 in ``present``: one walk from the root that
    carries the set of states still reaching a node."""
    S = out.shape[0]
    top = 0
    stack[0] = root
    masks[0, :] = True
    while top >= 0:
        node = stack[top]
        kd = kind[node]
        if kd == LEAF:
            v = value[node]
            for s in range(S):
                if masks[top, s]:
                    out[s] += v
            top -= 1
        elif kd == FEATURE:
            child = yes[node] if present[feature[node]] else no[node]
            stack[top] = root + child
        else:
            top = _split_states(stack, masks, top, root + yes[node], root + no[node], states)


@njit(cache=True, nogil=True)
def _split_states(stack, masks, top, a, b, states):
    """A walk's state split at stack entry top into children a (yes) and b (no): the no-branch replaces the
    entry, the yes-branch goes on top of it; a branch no state reaches is dropped. Returns the new top."""
    any_a = False
    any_b = False
    for s in range(masks.shape[1]):
        m = masks[top, s]
        ma = m and states[a, s]
        mb = m and states[b, s]
        masks[top + 1, s] = ma
        masks[top, s] = mb
        any_a = any_a or ma
        any_b = any_b or mb
    if any_b:
        stack[top] = b
        if any_a:
            top += 1
            stack[top] = a
    elif any_a:
        masks[top, :] = masks[top + 1]
        stack[top] = a
    else:
        top -= 1
    return top


@njit(cache=True, nogil=True)
def _leaf_slots(kind, yes, no, states, roots):
    """Each tree's leaves numbered left to right, the no-branch (feature absent, state not in the yes-set) on the
    left, plus a "zero slot" first in the subtree of every state split that some state reaches in neither child
    (the walk drops such a state: it gets nothing from that tree). Returns (lo, hi, zero, n_slots): node n's
    subtree holds the slots lo[n]:hi[n] (its zero slot, if any, is lo[n] = zero[n]) and tree i has n_slots[i]."""
    n = kind.shape[0]
    S = states.shape[1]
    lo = np.zeros(n, dtype=np.int64)
    hi = np.zeros(n, dtype=np.int64)
    zero = np.full(n, -1, dtype=np.int64)
    n_trees = roots.shape[0] - 1
    n_slots = np.zeros(n_trees, dtype=np.int64)
    stack = np.empty(n + 1, dtype=np.int64)
    for i in range(n_trees):
        root = roots[i]
        top = 0
        stack[0] = root
        c = 0
        while top >= 0:  # preorder, no-branch first: slots come out left to right
            node = stack[top]
            top -= 1
            lo[node] = c
            if kind[node] == LEAF:
                c += 1
                continue
            if kind[node] == STATE:
                a = root + yes[node]
                b = root + no[node]
                for s in range(S):
                    if not states[a, s] and not states[b, s]:
                        zero[node] = c
                        c += 1
                        break
            stack[top + 1] = root + yes[node]
            stack[top + 2] = root + no[node]
            top += 2
        n_slots[i] = c
        for node in range(roots[i + 1] - 1, root - 1, -1):  # children follow their parent
            hi[node] = lo[node] + 1 if kind[node] == LEAF else hi[root + yes[node]]
    return lo, hi, zero, n_slots


@njit(cache=True, nogil=True)
def _clear_slots(mask, a, b):
    for j in range(a, b):
        mask[j >> 6] &= ~(np.uint64(1) << np.uint64(j & 63))


@njit(cache=True, nogil=True)
def _exit_slot(feature_mask, state_mask):
    """The lowest slot left in both masks: where the walk ends (every tree keeps at least one)."""
    for w in range(feature_mask.shape[0]):
        m = feature_mask[w] & state_mask[w]
        if m != 0:
            return w * 64 + _count_trailing_zeros(m)
    return -1


@njit(cache=True, nogil=True)
def _bitmask_tables(kind, feature, yes, no, states, value, roots, lo, hi, zero, n_words):
    n_trees = roots.shape[0] - 1
    S = states.shape[1]
    full = ~np.uint64(0)
    state_mask = np.full((n_trees, S, n_words), full, dtype=np.uint64)
    slot_value = np.zeros((n_trees, 64 * n_words))
    is_split = kind == FEATURE
    tested = feature[is_split]
    n_tested = tested.max() + 1 if tested.shape[0] else 0
    feature_ptr = np.zeros(n_tested + 1, dtype=np.int64)
    feature_ptr[1:] = np.cumsum(np.bincount(tested, minlength=n_tested))
    fill = feature_ptr[:-1].copy()
    entry_tree = np.empty(tested.shape[0], dtype=np.int32)
    entry_mask = np.full((tested.shape[0], n_words), full, dtype=np.uint64)
    for i in range(n_trees):
        root = roots[i]
        for node in range(root, roots[i + 1]):
            if kind[node] == LEAF:
                slot_value[i, lo[node]] = value[node]
                continue
            a = root + yes[node]
            b = root + no[node]
            if kind[node] == FEATURE:  # present: the walk leaves the no-branch
                e = fill[feature[node]]
                fill[feature[node]] += 1
                entry_tree[e] = i
                _clear_slots(entry_mask[e], lo[b], hi[b])
                continue
            for s in range(S):
                if states[a, s]:  # the zero slot and the no-branch
                    _clear_slots(state_mask[i, s], lo[node], hi[b])
                elif states[b, s]:
                    if zero[node] >= 0:
                        _clear_slots(state_mask[i, s], zero[node], zero[node] + 1)
                else:  # dropped here: both branches go, the zero slot stays
                    _clear_slots(state_mask[i, s], lo[b], hi[a])
    defaults = np.zeros((n_trees, S))
    for i in range(n_trees):
        for s in range(S):
            defaults[i, s] = slot_value[i, _exit_slot(state_mask[i, s], state_mask[i, s])]
    return defaults, feature_ptr, entry_tree, entry_mask, state_mask, slot_value


def bitmask_index(kind, feature, yes, no, states, value, roots):
    """The ensemble as bit masks for bitmask_potentials (QuickScorer, Lucchese et al. 2015, for binary sparse
    rows and previous-state splits): (defaults, feature_ptr, entry_tree, entry_mask, state_mask, state_sensitive,
    slot_value).

    A tree's walk ends at the lowest slot (see _leaf_slots) that no test on the way removes: a present feature
    removes its node's no-branch (entry_mask; the entries of feature f are feature_ptr[f]:feature_ptr[f + 1]),
    a state removes what its state splits send it away from (state_mask, per tree and state). A row with none
    of a tree's features gets the tree's default (its all-absent output, per state).
    state_sensitive marks, per tree, the slots some state removes: where the features alone end the walk at
    any other slot, every state ends there too."""
    lo, hi, zero, n_slots = _leaf_slots(kind, yes, no, states, roots)
    n_words = max(1, (int(n_slots.max()) + 63) // 64) if len(n_slots) else 1
    defaults, feature_ptr, entry_tree, entry_mask, state_mask, slot_value = _bitmask_tables(
        kind, feature, yes, no, states, value, roots, lo, hi, zero, n_words)
    state_sensitive = np.bitwise_or.reduce(~state_mask, axis=1) if len(state_mask) else state_mask[:, 0]
    return defaults, feature_ptr, entry_tree, entry_mask, state_mask, state_sensitive, slot_value


@njit(cache=True, nogil=True)
def bitmask_potentials(indptr, indices, n_labels, labels, defaults, feature_ptr, entry_tree, entry_mask, state_mask,
                       state_sensitive, slot_value):
    """phi (T x S x K) = sum of every tree: at each position only the trees testing one of its features move
    from their default, and a tree's leaf for every state comes from ANDing bit masks, not from walking it.
    Where the features alone end a tree's walk at a slot no state removes, one lookup serves every state.

    Rows may hold feature ids no tree tests."""
    T = indptr.shape[0] - 1
    n_trees, S, n_words = state_mask.shape
    n_tested = feature_ptr.shape[0] - 1
    phi = np.empty((T, S, n_labels))
    same = np.empty(n_labels)  # per label: the trees' values that are the same for every state
    stamp = np.zeros(n_trees, dtype=np.int64)
    feature_mask = np.empty((n_trees, n_words), dtype=np.uint64)
    for t in range(T):
        same[:] = 0.0
        phi[t] = 0.0
        feature_mask[:] = ~np.uint64(0)
        for p in range(indptr[t], indptr[t + 1]):
            f = indices[p]
            if f >= n_tested:
                continue
            for e in range(feature_ptr[f], feature_ptr[f + 1]):  # no branch on a tree's first entry: unpredictable
                i = entry_tree[e]
                stamp[i] = t + 1
                for w in range(n_words):
                    feature_mask[i, w] &= entry_mask[e, w]
        for i in range(n_trees):  # a row of words typically touches nearly every tree: visit them all in order
            k = labels[i]
            if stamp[i] != t + 1:
                for s in range(S):
                    phi[t, s, k] += defaults[i, s]
                continue
            slot = _exit_slot(feature_mask[i], feature_mask[i])
            if (state_sensitive[i, slot >> 6] >> np.uint64(slot & 63)) & np.uint64(1) == 0:
                same[k] += slot_value[i, slot]
                continue
            for s in range(S):
                phi[t, s, k] += slot_value[i, _exit_slot(feature_mask[i], state_mask[i, s])]
        for s in range(S):
            for k in range(n_labels):
                phi[t, s, k] += same[k]
    return phi


def partition_index(kind, feature, yes, no, states, value, roots):
    """The ensemble's tables for partition_potentials: (column_of, column, chain, state_words, chain_value).
    The tested features are numbered 0.. as columns (column_of[f], -1 for a feature no tree tests; column[n]
    the column node n tests); per node its chain (the node where the walk entered the run of no-branches it lies
    on: the root or a yes-child), its state set as 64-bit words and the value of the leaf its chain ends in."""
    is_split = kind == FEATURE
    tested = np.unique(feature[is_split])
    column_of = np.full(int(tested[-1]) + 1 if len(tested) else 0, -1, dtype=np.int32)
    column_of[tested] = np.arange(len(tested), dtype=np.int32)
    column = np.where(is_split, column_of[np.where(is_split, feature, 0)] if len(tested) else -1, -1).astype(np.int32)
    return (column_of, column) + _partition_index(kind, yes, no, states, value, roots,
                                                  max(1, (states.shape[1] + 63) // 64))


@njit(cache=True, nogil=True)
def _partition_index(kind, yes, no, states, value, roots, n_words):
    n, S = states.shape
    chain = np.arange(n, dtype=np.int32)
    words = np.zeros((n, n_words), dtype=np.uint64)
    for node in range(n):
        for s in range(S):
            if states[node, s]:
                words[node, s >> 6] |= np.uint64(1) << np.uint64(s & 63)
    chain_value = value.copy()  # the value of the leaf at the end of the node's run of no-branches
    for i in range(roots.shape[0] - 1):
        root = roots[i]
        for node in range(root, roots[i + 1]):  # children follow their parent
            if kind[node] != LEAF:
                chain[root + no[node]] = chain[node]
        for node in range(roots[i + 1] - 1, root - 1, -1):
            if kind[node] != LEAF:
                chain_value[node] = chain_value[root + no[node]]
    return chain, words, chain_value


def label_state_words(cells):
    """(S x K) booleans -> per label k, its states s with cells[s, k] as 64-bit words (K x ceil(S / 64))."""
    S, K = cells.shape
    words = np.zeros((K, max(1, (S + 63) // 64)), dtype=np.uint64)
    for s in range(S):
        words[:, s // 64] |= np.where(cells[s], np.uint64(1) << np.uint64(s % 64), np.uint64(0))
    return words


@njit(cache=True, nogil=True)
def _grown(buf, need):
    if need <= buf.shape[0]:
        return buf
    out = np.empty((max(need, 2 * buf.shape[0]),) + buf.shape[1:], dtype=buf.dtype)
    out[:buf.shape[0]] = buf
    return out


def block_rows(n_labels: int, n_states: int) -> int:
    """Rows per call of _partition_block: every tree's nodes are visited once per block; 16384 rows, fewer
    where the block's accumulator (K x (S + 1) x rows floats) would pass 64 MB (at least 1024)."""
    return int(min(16384, max(1024, 8_000_000 // (n_labels * (n_states + 1)))))


@njit(cache=True, nogil=True)
def partition_potentials(indptr, indices, labels, kind, yes, no, roots, depths, column_of, column, chain, state_words,
                         chain_value, is_start, start_states, other_states, n_states, block_rows, scaled):
    """phi (T x S x K) = sum of every tree, evaluated one tree at a time over ``block_rows`` rows at once, the
    way fit_tree partitions positions: a node's rows are split by its test, so a row costs nothing at the tests
    on the absent side of its path (see _partition_block).

    Only the cells (t, s, k) with s in start_states[k] (rows with is_start) or other_states[k] (the other rows),
    as 64-bit words, are computed; the rest are 0. Rows may hold feature ids no tree tests.
    Returns (phi, E, c): with ``scaled``, phi is empty and (E, c) are crf.scaled_potentials of phi over those
    cells, made block by block (no T x S x K float64 array); without, E and c are empty."""
    T = indptr.shape[0] - 1
    S = n_states
    n_labels = start_states.shape[0]
    phi = np.zeros((0 if scaled else T, S, n_labels))
    E = np.zeros((T if scaled else 0, S, n_labels), dtype=np.float32)
    c = np.zeros(T if scaled else 0)
    max_depth = 0
    for i in range(depths.shape[0]):
        max_depth = max(max_depth, depths[i])
    block = max(1, block_rows)
    n = min(T, block)
    # per label: a row per state, then the part they all share; rows an odd number of cache lines apart, or the
    # 99 rows a position's cells read fall into one cache set when n is a multiple of 512 (16384 is)
    acc = np.empty((n_labels, S + 1, 8 * ((n + 7) // 8 | 1)))[:, :, :n]
    for r0 in range(0, T, block):
        r1 = min(T, r0 + block)
        rows = indptr[r0:r1 + 1] - indptr[r0]
        acc[:] = 0.0
        _partition_block(acc, rows, indices[indptr[r0]:indptr[r1]], labels, kind, yes, no, roots, column_of, column,
                         chain, state_words, chain_value, is_start[r0:r1], start_states, other_states, max_depth)
        for t in range(r1 - r0):
            states = start_states if is_start[r0 + t] else other_states
            top = -np.inf
            for k in range(n_labels):
                for s in range(S):
                    if (states[k, s >> 6] >> np.uint64(s & 63)) & np.uint64(1):
                        v = acc[k, s, t] + acc[k, S, t]
                        if scaled:
                            acc[k, s, t] = v
                            top = max(top, v)
                        else:
                            phi[r0 + t, s, k] = v
            if scaled:
                if not np.isfinite(top):
                    top = 0.0
                c[r0 + t] = top
                for k in range(n_labels):
                    for s in range(S):
                        if (states[k, s >> 6] >> np.uint64(s & 63)) & np.uint64(1):
                            E[r0 + t, s, k] = np.exp(acc[k, s, t] - top)
    return phi, E, c


@njit(cache=True, nogil=True)
def _tested_columns(indptr, indices, column_of, n_cols):
    """csc_index of the rows restricted to the tested features, by column (see partition_index)."""
    n_map = column_of.shape[0]
    cols = np.empty(indptr[indptr.shape[0] - 1], dtype=np.int32)
    for p in range(cols.shape[0]):
        cols[p] = column_of[indices[p]] if indices[p] < n_map else -1
    return _transpose(indptr, cols, n_cols)


@njit(cache=True, nogil=True)
def _credit(acc, k, t, word, bits, delta):
    """acc[k, s, t] += delta for the states s in ``bits``, the 64-bit word ``word`` of a state set."""
    while bits != 0:
        acc[k, 64 * word + _count_trailing_zeros(bits), t] += delta
        bits &= bits - np.uint64(1)


AT, POS, NXT, WHOLE = 0, 1, 2, 3  # the fields of _partition_block's item records


@njit(cache=True, nogil=True)
def _partition_block(acc, indptr, indices, labels, kind, yes, no, roots, column_of, column, chain, state_words,
                     chain_value, is_start, start_states, other_states, max_depth):
    """acc[k, s, t] += the trees of label k at row t and state s (acc[k, S, t]: the part of every state).

    An item is a row with the previous states that reach a node together; AT is its current chain (see
    partition_index). Entering a chain credits the item with the value of the leaf the chain ends in, so a
    leaf costs nothing: only the moves do (the new chain's value minus the old one's). A feature split moves
    the items that have the feature to the yes-child, found from whichever is shorter: the feature's posting
    list or the node's item list (then tested on a bitmap of the feature). The rest stay where they are: a
    node's list is its chain's and keeps stale entries of items that left. A state split moves states: an
    item whose states go both ways leaves a new item with the yes-states."""
    T = indptr.shape[0] - 1
    S = acc.shape[1] - 1
    n_words = state_words.shape[1]
    n_cols = 0
    for j in column_of:
        n_cols = max(n_cols, j + 1)
    col_ptr, col_pos = _tested_columns(indptr, indices, column_of, n_cols)
    bitmap_of = np.full(n_cols, -1, dtype=np.int64)  # frequent columns get a bit per row
    n_bitmaps = 0
    for f in range(n_cols):
        if (col_ptr[f + 1] - col_ptr[f]) * 64 >= T and T > 0:
            bitmap_of[f] = n_bitmaps
            n_bitmaps += 1
    bitmaps = np.zeros((n_bitmaps, (T + 63) >> 6), dtype=np.uint64)
    for f in range(n_cols):
        if bitmap_of[f] >= 0:
            for p in range(col_ptr[f], col_ptr[f + 1]):
                t = col_pos[p]
                bitmaps[bitmap_of[f], t >> 6] |= np.uint64(1) << np.uint64(t & 63)
    # items, one record each (an item's fields share a cache line): its chain (AT, -1: no state left), row (POS),
    # the row's next item (NXT; a row's first item is the row itself) and whether it holds all the row's states
    # for this label (WHOLE: credited on acc[k, S]); its states as words in ``mask``
    cap = 2 * T + 16
    item = np.empty((cap, 4), dtype=np.int32)
    mask = np.empty((cap, n_words), dtype=np.uint64)
    for t in range(T):
        item[t, POS] = t
        item[t, NXT] = -1
        item[t, WHOLE] = 1
    touched = np.empty(T, dtype=np.int32)  # the rows whose item a state split changed (NXT, WHOLE): reset them
    n_touched = 0
    buf = np.empty(4 * T + 16, dtype=np.int32)  # the item lists of the nodes on the stack, nested
    st_node = np.empty(max_depth + 2, dtype=np.int64)
    st_lo = np.empty(max_depth + 2, dtype=np.int64)
    st_hi = np.empty(max_depth + 2, dtype=np.int64)
    st_live = np.empty(max_depth + 2, dtype=np.int64)
    base = np.zeros(acc.shape[0])  # per label: the trees' root chain values, credited to every row at the end
    for i in range(roots.shape[0] - 1):
        root = roots[i]
        k = labels[i]
        base[k] += chain_value[root]
        for q in range(n_touched):
            item[touched[q], NXT] = -1
            item[touched[q], WHOLE] = 1
        n_touched = 0
        live_start = False
        live_other = False
        for w in range(n_words):
            live_start = live_start or start_states[k, w] != 0
            live_other = live_other or other_states[k, w] != 0
        n_live = 0
        for t in range(T):  # a WHOLE item's states are its row's (mask is set when a state split first needs it)
            if live_start if is_start[t] else live_other:
                item[t, AT] = root
                buf[n_live] = t
                n_live += 1
            else:
                item[t, AT] = -1
        n_items = T
        top = 0
        st_node[0], st_lo[0], st_hi[0], st_live[0] = root, 0, n_live, n_live
        while top >= 0:
            node, lo, hi, live = st_node[top], st_lo[top], st_hi[top], st_live[top]
            top -= 1
            kd = kind[node]
            if live == 0 or kd == LEAF:
                continue
            c = chain[node]
            a = root + yes[node]
            b = root + no[node]
            delta = chain_value[a] - chain_value[c]
            end = hi  # the free part of buf starts after this node's list
            if end + hi - lo > buf.shape[0]:
                buf = _grown(buf, end + hi - lo)
            y = end
            kept = lo
            if kd == FEATURE:
                f = column[node]
                bm = bitmap_of[f]
                scan = bm >= 0 and hi - lo < col_ptr[f + 1] - col_ptr[f]
                if scan:  # test the node's items
                    for q in range(lo, hi):
                        it = buf[q]
                        if item[it, AT] != c:
                            continue
                        t = item[it, POS]
                        if (bitmaps[bm, t >> 6] >> np.uint64(t & 63)) & np.uint64(1):
                            buf[y] = it
                            y += 1
                        else:
                            buf[kept] = it
                            kept += 1
                    hi = kept
                    live_no = kept - lo
                else:  # visit the feature's rows
                    for p in range(col_ptr[f], col_ptr[f + 1]):
                        it = col_pos[p]
                        while it >= 0:
                            if item[it, AT] == c:
                                buf[y] = it
                                y += 1
                            it = item[it, NXT]
                    live_no = live - (y - end)
                for q in range(end, y):
                    it = buf[q]
                    item[it, AT] = a
                    if item[it, WHOLE]:
                        acc[k, S, item[it, POS]] += delta
                    else:
                        for w in range(n_words):
                            _credit(acc, k, item[it, POS], w, mask[it, w], delta)
            else:
                for q in range(lo, hi):
                    it = buf[q]
                    if item[it, AT] != c:
                        continue
                    t = item[it, POS]
                    if item[it, WHOLE]:  # (only a row's own item is WHOLE) its states, before it loses some
                        states = start_states if is_start[t] else other_states
                        for w in range(n_words):
                            mask[it, w] = states[k, w]
                        touched[n_touched] = it
                        n_touched += 1
                    any_a = False
                    any_b = False
                    for w in range(n_words):
                        m = mask[it, w]
                        ma = m & state_words[a, w]
                        mb = m & state_words[b, w] & ~ma
                        _credit(acc, k, t, w, ma, delta)
                        _credit(acc, k, t, w, m & ~(ma | mb), -chain_value[c])  # states no child takes
                        any_a = any_a or ma != 0
                        any_b = any_b or mb != 0
                    if any_a and any_b:  # a new item takes the yes-states
                        if n_items == item.shape[0]:
                            item = _grown(item, n_items + 1)
                            mask = _grown(mask, n_items + 1)
                        j = n_items
                        n_items += 1
                        item[j, POS] = t
                        item[j, WHOLE] = 0
                        item[j, AT] = a
                        item[j, NXT] = item[it, NXT]
                        item[it, NXT] = j
                        for w in range(n_words):
                            mask[j, w] = mask[it, w] & state_words[a, w]
                            mask[it, w] &= state_words[b, w] & ~state_words[a, w]
                        item[it, WHOLE] = 0
                        buf[y] = j
                        y += 1
                        buf[kept] = it
                        kept += 1
                        continue
                    for w in range(n_words):  # the item goes one way, losing the states no child takes
                        mask[it, w] &= state_words[a, w] if any_a else state_words[b, w] & ~state_words[a, w]
                    item[it, WHOLE] = 0
                    if any_a:
                        item[it, AT] = a
                        buf[y] = it
                        y += 1
                    elif any_b:
                        buf[kept] = it
                        kept += 1
                    else:
                        item[it, AT] = -1
                hi = kept
                live_no = kept - lo
            # the no-branch continues this chain on the list left here; the yes-branch's list is above it
            top += 1
            st_node[top], st_lo[top], st_hi[top], st_live[top] = b, lo, hi, live_no
            top += 1
            st_node[top], st_lo[top], st_hi[top], st_live[top] = a, end, y, y - end
    for k in range(acc.shape[0]):
        for t in range(T):
            acc[k, S, t] += base[k]


@njit(cache=True, nogil=True)
def multiply_tree(E, positions, indptr, indices, kind, feature, yes, no, states, value, k, scale_by, max_depth):
    """E[t, s, k] *= exp(scale_by * tree(x_t, s)) at the given positions (those a tree was not fitted on)."""
    S = E.shape[1]
    present = np.zeros(feature.max() + 1 if feature.shape[0] else 1, dtype=np.uint8)
    stack = np.empty(max_depth + 1, dtype=np.int64)
    masks = np.empty((max_depth + 1, S), dtype=np.bool_)
    row = np.empty(S)
    for i in range(positions.shape[0]):
        t = positions[i]
        _mark_row(present, 1, indptr, indices, t)
        row[:] = 0.0
        _eval_tree(row, present, kind, feature, yes, no, states, value, 0, stack, masks)
        _mark_row(present, 0, indptr, indices, t)
        for s in range(S):
            E[t, s, k] *= np.float32(np.exp(scale_by * row[s]))

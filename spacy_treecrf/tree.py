"""Best-first regression trees over (position, previous-state) examples, and their evaluation.

A node is a product P x A: a set of positions times a set of previous states (intersected with validity).
A feature split partitions P (feature present / absent) and keeps A; a state split partitions A and keeps P.
So a node's statistics come from per-position sums r_t = sum_{s in A} D[t, s] and counts
n_t = sum_{s in A} W(t, s): scanning a node costs O(its nonzeros + |P| |A|), never O(nonzeros x K).

Leaf values and gains use the paper's shrinkage (Eq. 1): value G / (N + lam); the gain of a split is the
decrease of the penalised squared error G_L^2/(N_L+lam) + G_R^2/(N_R+lam) - G^2/(N+lam).

Tree arrays (one row per node): kind (LEAF / FEATURE / STATE), feature, yes / no children (yes = feature
present, or the state subset chosen for the left), value, count, and the node's own state set ``states``.
"""
import numpy as np
from numba import njit

LEAF, FEATURE, STATE = 0, 1, 2


@njit(cache=True, nogil=True)
def _valid(is_start, allowed_k, t, s):
    if is_start[t]:
        return s == 0 and allowed_k[0]
    return s > 0 and allowed_k[s]


@njit(cache=True, nogil=True)
def _gain(gl, nl, gr, nr, g, n, lam):
    return gl * gl / (nl + lam) + gr * gr / (nr + lam) - g * g / (n + lam)


@njit(cache=True, nogil=True)
def _node_sums(pbuf, lo, hi, D, is_start, allowed_k, states, r, w):
    """Per-position residual sums and valid-example counts over the node's state set."""
    S = D.shape[1]
    g = 0.0
    n = 0.0
    for i in range(lo, hi):
        t = pbuf[i]
        rt = 0.0
        nt = 0.0
        for s in range(S):
            if states[s] and _valid(is_start, allowed_k, t, s):
                rt += D[t, s]
                nt += 1.0
        r[i - lo] = rt
        w[i - lo] = nt
        g += rt
        n += nt
    return g, n


@njit(cache=True, nogil=True)
def _best_feature(pbuf, lo, hi, r, w, g, n, indptr, indices, hist_g, hist_n, touched, lam, min_leaf):
    """Best present/absent split of the node's positions: one pass over their nonzeros."""
    n_touched = 0
    for i in range(lo, hi):
        t = pbuf[i]
        for p in range(indptr[t], indptr[t + 1]):
            f = indices[p]
            if hist_n[f] < 0.0:
                hist_n[f] = 0.0
                hist_g[f] = 0.0
                touched[n_touched] = f
                n_touched += 1
            hist_g[f] += r[i - lo]
            hist_n[f] += w[i - lo]
    best_gain = 0.0
    best_f = -1
    for i in range(n_touched):
        f = touched[i]
        nl = hist_n[f]
        nr = n - nl
        if nl >= min_leaf and nr >= min_leaf:
            gl = hist_g[f]
            gain = _gain(gl, nl, g - gl, nr, g, n, lam)
            if gain > best_gain or (gain == best_gain and best_f >= 0 and f < best_f):
                best_gain = gain
                best_f = f
        hist_n[f] = -1.0
    return best_gain, best_f


@njit(cache=True, nogil=True)
def _best_state(pbuf, lo, hi, D, is_start, allowed_k, states, g, n, lam, min_leaf, left_out):
    """Best subset of previous states: sort states by mean residual and take the best prefix."""
    S = D.shape[1]
    rs = np.zeros(S)
    ns = np.zeros(S)
    for i in range(lo, hi):
        t = pbuf[i]
        for s in range(S):
            if states[s] and _valid(is_start, allowed_k, t, s):
                rs[s] += D[t, s]
                ns[s] += 1.0
    cand = np.empty(S, dtype=np.int64)
    m = 0
    for s in range(S):
        if states[s] and ns[s] > 0.0:
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
        if nl >= min_leaf and nr >= min_leaf:
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
def fit_tree(indptr, indices, n_features, D, is_start, allowed_k, positions, max_leaves, lam, min_leaf,
             min_gain):
    """Grow one tree best-first to at most ``max_leaves`` leaves on residuals D (T x S).

    Returns the node arrays plus, for each node, the segment of ``pbuf`` holding its positions (the booster
    uses the leaves' segments to update its cached potentials without re-evaluating the tree).
    """
    S = D.shape[1]
    max_nodes = 2 * max_leaves - 1
    kind = np.zeros(max_nodes, dtype=np.int8)
    feature = np.full(max_nodes, -1, dtype=np.int32)
    yes = np.full(max_nodes, -1, dtype=np.int32)
    no = np.full(max_nodes, -1, dtype=np.int32)
    value = np.zeros(max_nodes)
    count = np.zeros(max_nodes)
    gsum = np.zeros(max_nodes)
    states = np.zeros((max_nodes, S), dtype=np.bool_)
    pstart = np.zeros(max_nodes, dtype=np.int64)
    plen = np.zeros(max_nodes, dtype=np.int64)
    # candidate split of each leaf
    cgain = np.full(max_nodes, -1.0)
    ckind = np.zeros(max_nodes, dtype=np.int8)
    cfeat = np.full(max_nodes, -1, dtype=np.int32)
    cstates = np.zeros((max_nodes, S), dtype=np.bool_)

    n_pos = positions.shape[0]
    pbuf = np.empty(max(2 * n_pos, 16), dtype=np.int64)
    pbuf[:n_pos] = positions
    used = n_pos
    r = np.empty(n_pos)
    w = np.empty(n_pos)
    hist_g = np.zeros(n_features)
    hist_n = np.full(n_features, -1.0)
    touched = np.empty(n_features, dtype=np.int32)
    left = np.zeros(S, dtype=np.bool_)

    states[0, :] = True
    plen[0] = n_pos
    n_nodes = 1
    n_leaves = 1
    frontier = [0]
    while len(frontier) > 0:
        # evaluate new leaves in the frontier
        for node in frontier:
            lo = pstart[node]
            hi = lo + plen[node]
            g, n = _node_sums(pbuf, lo, hi, D, is_start, allowed_k, states[node], r, w)
            gsum[node] = g
            count[node] = n
            value[node] = g / (n + lam) if n + lam > 0.0 else 0.0
            fg, ff = _best_feature(pbuf, lo, hi, r, w, g, n, indptr, indices, hist_g, hist_n, touched, lam,
                                   min_leaf)
            sg = _best_state(pbuf, lo, hi, D, is_start, allowed_k, states[node], g, n, lam, min_leaf, left)
            if ff >= 0 and fg >= sg:
                cgain[node] = fg
                ckind[node] = FEATURE
                cfeat[node] = ff
            elif sg > 0.0:
                cgain[node] = sg
                ckind[node] = STATE
                cstates[node, :] = left
            else:
                cgain[node] = -1.0
        frontier.clear()
        if n_leaves >= max_leaves:
            break
        # expand the leaf with the largest gain
        best = -1
        for node in range(n_nodes):
            if kind[node] == LEAF and yes[node] < 0 and cgain[node] > min_gain and cgain[node] > 0.0:
                if best < 0 or cgain[node] > cgain[best]:
                    best = node
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
        if ckind[best] == FEATURE:
            f = cfeat[best]
            feature[best] = f
            states[a, :] = states[best]
            states[b, :] = states[best]
            pbuf = _grow(pbuf, used + (hi - lo))
            na = 0
            for i in range(lo, hi):
                t = pbuf[i]
                present = False
                p0 = indptr[t]
                p1 = indptr[t + 1]
                while p0 < p1:  # rows are sorted: binary search
                    mid = (p0 + p1) // 2
                    if indices[mid] < f:
                        p0 = mid + 1
                    else:
                        p1 = mid
                if p0 < indptr[t + 1] and indices[p0] == f:
                    present = True
                if present:
                    pbuf[used + na] = t
                    na += 1
            pstart[a] = used
            plen[a] = na
            used += na
            nb = 0
            for i in range(lo, hi):
                t = pbuf[i]
                p0 = indptr[t]
                p1 = indptr[t + 1]
                while p0 < p1:
                    mid = (p0 + p1) // 2
                    if indices[mid] < f:
                        p0 = mid + 1
                    else:
                        p1 = mid
                if not (p0 < indptr[t + 1] and indices[p0] == f):
                    pbuf[used + nb] = t
                    nb += 1
            pstart[b] = used
            plen[b] = nb
            used += nb
        else:
            for s in range(S):
                states[a, s] = states[best, s] and cstates[best, s]
                states[b, s] = states[best, s] and not cstates[best, s]
            pstart[a] = lo
            plen[a] = hi - lo
            pstart[b] = lo
            plen[b] = hi - lo
        frontier.append(a)
        frontier.append(b)
    return (kind[:n_nodes].copy(), feature[:n_nodes].copy(), yes[:n_nodes].copy(), no[:n_nodes].copy(),
            value[:n_nodes].copy(), count[:n_nodes].copy(), states[:n_nodes].copy(), pbuf,
            pstart[:n_nodes].copy(), plen[:n_nodes].copy())


@njit(cache=True, nogil=True)
def apply_leaves(E, kind, yes, states, value, pbuf, pstart, plen, k, scale_by):
    """Multiply exp(scale_by * leaf value) into the cached potentials of each leaf's (positions x states)."""
    S = E.shape[1]
    for node in range(kind.shape[0]):
        if kind[node] != LEAF:
            continue
        f = np.float32(np.exp(scale_by * value[node]))
        for i in range(pstart[node], pstart[node] + plen[node]):
            t = pbuf[i]
            for s in range(S):
                if states[node, s]:
                    E[t, s, k] *= f


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
def _eval_tree(out, t, indptr, indices, kind, feature, yes, no, states, value, root, stack, masks):
    """out[s] += tree(x_t, s) for all s: one walk that carries the set of states still reaching a node."""
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
            child = yes[node] if _has_feature(indptr, indices, t, feature[node]) else no[node]
            stack[top] = root + child
        else:
            a = root + yes[node]
            b = root + no[node]
            # the no-branch replaces this entry, the yes-branch goes on top of it
            any_a = False
            any_b = False
            for s in range(S):
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


@njit(cache=True, nogil=True)
def ensemble_potentials(indptr, indices, n_states, n_labels, kind, feature, yes, no, states, value, tree_roots,
                        tree_labels, max_depth):
    """phi (T x S x K) = sum of every tree of every label, evaluated at each position and previous state."""
    T = indptr.shape[0] - 1
    phi = np.zeros((T, n_states, n_labels))
    for t in range(T):
        stack = np.empty(max_depth + 1, dtype=np.int64)
        masks = np.empty((max_depth + 1, n_states), dtype=np.bool_)
        for i in range(tree_roots.shape[0] - 1):
            _eval_tree(phi[t, :, tree_labels[i]], t, indptr, indices, kind, feature, yes, no, states, value,
                       tree_roots[i], stack, masks)
    return phi


@njit(cache=True, nogil=True)
def multiply_tree(E, positions, indptr, indices, kind, feature, yes, no, states, value, k, scale_by, max_depth):
    """E[t, s, k] *= exp(scale_by * tree(x_t, s)) at the given positions (those a tree was not fitted on)."""
    S = E.shape[1]
    for i in range(positions.shape[0]):
        t = positions[i]
        stack = np.empty(max_depth + 1, dtype=np.int64)
        masks = np.empty((max_depth + 1, S), dtype=np.bool_)
        row = np.zeros(S)
        _eval_tree(row, t, indptr, indices, kind, feature, yes, no, states, value, 0, stack, masks)
        for s in range(S):
            E[t, s, k] *= np.float32(np.exp(scale_by * row[s]))

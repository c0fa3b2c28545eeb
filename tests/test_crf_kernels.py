"""CRF kernels against brute-force enumeration of every label path of random tiny CRFs."""
import numpy as np
import pytest

from brute import (all_path_scores, best_path, consistent, dense, logsumexp, path_indicators, path_log_score,
                   potentials_from_phi, random_crf, random_valid_labels, seq_expectations, seq_log_z,
                   structurally_valid, ungrouped)
from spacy_treecrf.engine import crf

SEEDS = range(40)
# (probability of forbidding a transition, log-potential spread)
SETTINGS = [(0.0, 2.0), (0.35, 2.0), (0.0, 8.0), (0.5, 4.0)]


def problem(seed, p_forbid, spread, **kw):
    rng = np.random.default_rng([seed, int(p_forbid * 100), int(spread)])
    return rng, random_crf(rng, p_forbid=p_forbid, scale=spread, **kw)


def sequences(seq_starts):
    return [(int(a), int(b)) for a, b in zip(seq_starts[:-1], seq_starts[1:])]


def no_labels(T):
    return np.full(T, -1, dtype=np.int32)


def free_pass(m, y=None):
    y = no_labels(m["E"].shape[0]) if y is None else y
    return crf.forward_backward(m["P"], m["seq_starts"], y, False)


def pairwise(alpha, beta, scale, E, t, K):
    """xi_t(j, k) = alpha[t-1, j] * E[t, j+1, k] * beta[t, k] / scale[t] (module docstring)."""
    return alpha[t - 1][:, None] * E[t, 1:, :].astype(np.float64) * beta[t][None, :] / scale[t]


def kernel_expectations(alpha, beta, scale, E, a, b):
    """Kernel marginals in the brute-force layout (n x S x K): gamma at the start, xi elsewhere."""
    K = alpha.shape[1]
    out = np.zeros((b - a, K + 1, K))
    out[0, 0] = crf.marginals(alpha, beta)[a]
    for t in range(a + 1, b):
        out[t - a, 1:] = pairwise(alpha, beta, scale, E, t, K)
    return out


# ---------------------------------------------------------------- log Z


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_log_z_matches_enumeration(p_forbid, spread):
    for seed in SEEDS:
        _, m = problem(seed, p_forbid, spread)
        alpha, beta, scale, logz = free_pass(m)
        assert logz.shape == (len(m["seq_starts"]) - 1,)
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            expected = seq_log_z(m["phi"], a, b)
            assert np.isfinite(expected)
            assert logz[q] == pytest.approx(expected, rel=1e-9, abs=1e-9)
        # scaled alpha rows are normalised; log Z = sum(log scale) + sum(c) per sequence
        assert np.allclose(alpha.sum(axis=1), 1.0)
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            assert logz[q] == pytest.approx(np.log(scale[a:b]).sum() + m["c"][a:b].sum(), rel=1e-12)


def test_log_z_single_sequence_by_hand():
    # K = 2, T = 2, no constraints: Z = sum over the 4 paths of exp(phi_0(0, y0) + phi_1(y0 + 1, y1))
    with np.errstate(divide="ignore"):
        phi = np.log(np.array([[[1.0, 2.0], [0, 0], [0, 0]],
                               [[0, 0], [3.0, 5.0], [7.0, 11.0]]]))
    seq_starts = np.array([0, 2])
    P, phi_eff = potentials_from_phi(phi, seq_starts, np.ones((3, 2), dtype=bool))
    _, _, _, logz = crf.forward_backward(P, seq_starts, no_labels(2), False)
    assert logz[0] == pytest.approx(np.log(1 * 3 + 1 * 5 + 2 * 7 + 2 * 11), rel=1e-7)


def test_empty_sequence_is_harmless():
    rng = np.random.default_rng(0)
    m = random_crf(rng, K=3, n_seq=1, max_len=4, p_forbid=0.0)
    T = int(m["seq_starts"][-1])
    seq_starts = np.array([0, 0, T, T], dtype=np.int64)  # empty, real, empty
    _, _, _, logz = crf.forward_backward(m["P"], seq_starts, no_labels(T), False)
    assert logz[0] == 0.0 and logz[2] == 0.0  # one (empty) path of score 0
    assert logz[1] == pytest.approx(seq_log_z(m["phi"], 0, T), rel=1e-9)
    best = crf.viterbi(m["P"], seq_starts)
    assert list(best) == list(best_path(m["phi"], 0, T)[0])


def test_junk_in_structurally_invalid_cells_is_ignored():
    """State 0 away from a start and states > 0 at a start must never be read: scaled_potentials drops them."""
    for seed in range(10):
        rng, m = problem(seed, 0.3, 2.0)
        T, S, K = m["E"].shape
        invalid = ~structurally_valid(m["seq_starts"], T, S)
        junk = m["phi"].copy()
        junk[invalid] = rng.uniform(-3.0, 3.0, size=(invalid.sum(), K))
        P, _ = potentials_from_phi(junk, m["seq_starts"], m["allowed"])
        for got, ref in zip(P, m["P"]):
            assert np.array_equal(got, ref)


def test_the_threaded_pass_of_chosen_sequences_is_the_kernels_there_and_leaves_the_rest(monkeypatch):
    """booster.forward_backward with ``todo`` (the clamped pass of the partially labelled sequences only), in
    one chunk or in threads writing their rows of one result: the kernel's values on the chosen sequences; alpha
    and beta 0, scale 1 and log Z 0 elsewhere."""
    from spacy_treecrf.engine import booster, chunks
    real = chunks.in_chunks
    monkeypatch.setattr(chunks, "in_chunks",
                        lambda starts, threads, call, min_positions=1: real(starts, threads, call, 1))
    for seed in range(10):
        rng, m = problem(seed, 0.3, 2.0, n_seq=30)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"], p_unknown=0.4)
        todo = rng.random(len(m["seq_starts"]) - 1) < 0.5
        at = np.repeat(todo, np.diff(m["seq_starts"]))
        ref = crf.forward_backward(m["P"], m["seq_starts"], y, True)
        for threads in (1, 3):
            got = booster.forward_backward(m["P"], m["seq_starts"], y, True, threads, todo)
            for r, g in zip(ref[:3], got[:3]):
                assert np.array_equal(r[at], g[at])
            assert np.array_equal(ref.logz[todo], got.logz[todo])
            assert not got.alpha[~at].any() and not got.beta[~at].any()
            assert np.all(got.scale[~at] == 1.0) and not got.logz[~todo].any()


def test_kernels_do_not_depend_on_the_grouping():
    """Every kernel gives the same results (up to rounding) whether states with equal rows share a group or each
    state has its own; Viterbi the same path."""
    for seed in range(20):
        rng, m = problem(seed, 0.3, 2.0)
        P1 = ungrouped(m["E"], m["c"], crf.start_mask(m["seq_starts"], len(m["c"])))
        assert len(m["P"].values) <= len(P1.values)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"], p_unknown=0.4)
        for clamp in (False, True):
            for r, g in zip(crf.forward_backward(m["P"], m["seq_starts"], y, clamp),
                            crf.forward_backward(P1, m["seq_starts"], y, clamp)):
                assert np.allclose(r, g, rtol=1e-12, atol=1e-14)
        assert np.array_equal(crf.viterbi(m["P"], m["seq_starts"]), crf.viterbi(P1, m["seq_starts"]))
        partial = rng.random(len(m["seq_starts"]) - 1) < 0.5
        y_full = random_valid_labels(rng, m["phi"], m["seq_starts"])
        y_mix = np.where(np.repeat(partial, np.diff(m["seq_starts"])), y, y_full).astype(np.int32)
        assert np.allclose(residuals(m, y_mix, partial), residuals(dict(m, P=P1), y_mix, partial), atol=1e-12)
        assert np.allclose(crf.gold_log_score(m["P"], m["seq_starts"], y_full),
                           crf.gold_log_score(P1, m["seq_starts"], y_full), rtol=1e-12)


def log_space_forward(phi, a, b):
    """Reference log Z from a forward pass in log space (numpy, float64)."""
    la = phi[a, 0].copy()
    for t in range(a + 1, b):
        la = _lse(la[:, None] + phi[t, 1:], axis=0)
    return logsumexp(la)


def _lse(x, axis):
    top = x.max(axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(top + np.log(np.exp(x - top).sum(axis=axis, keepdims=True)), axis=axis)


def log_space_marginals(phi, a, b):
    """Reference label marginals from a log-space forward-backward (numpy, float64)."""
    K = phi.shape[2]
    n = b - a
    la = np.empty((n, K))
    lb = np.zeros((n, K))
    la[0] = phi[a, 0]
    for i in range(1, n):
        la[i] = _lse(la[i - 1][:, None] + phi[a + i, 1:], axis=0)
    for i in range(n - 2, -1, -1):
        lb[i] = _lse(phi[a + i + 1, 1:] + lb[i + 1][None, :], axis=1)
    lz = logsumexp(la[-1])
    return np.exp(la + lb - lz), lz


@pytest.mark.parametrize("p_forbid", [0.0, 0.3])
def test_long_sequence_large_potentials_stable(p_forbid):
    rng = np.random.default_rng(7)
    K = 4
    seq_starts = np.array([0, 10_000, 10_003, 10_500], dtype=np.int64)
    allowed = np.ones((K + 1, K), dtype=bool)
    if p_forbid:
        allowed[1:] = rng.random((K, K)) >= p_forbid
        allowed[1:, 0] = True
        allowed[1, :] = True  # label 0 can always be reached and left
        allowed[1, 2] = False
    T = int(seq_starts[-1])
    phi = rng.uniform(-50.0, 50.0, size=(T, K + 1, K))
    P, phi_eff = potentials_from_phi(phi, seq_starts, allowed)
    alpha, beta, scale, logz = crf.forward_backward(P, seq_starts, no_labels(T), False)
    for arr in (alpha, beta, scale, logz):
        assert np.all(np.isfinite(arr))
    gamma = crf.marginals(alpha, beta)
    assert np.allclose(gamma.sum(axis=1), 1.0, atol=1e-9)
    for q, (a, b) in enumerate(sequences(seq_starts)):
        ref = log_space_forward(phi_eff, a, b)
        assert logz[q] == pytest.approx(ref, rel=1e-10)
    ref_gamma, _ = log_space_marginals(phi_eff, 0, 10_000)
    assert np.allclose(gamma[:10_000], ref_gamma, atol=1e-8)
    # the clamped pass over a fully hidden labelling is the free pass
    *_, clz = crf.forward_backward(P, seq_starts, no_labels(T), True)
    assert np.allclose(clz, logz, rtol=1e-12)
    # viterbi on the long sequences returns allowed paths
    best = crf.viterbi(P, seq_starts)
    for a, b in sequences(seq_starts):
        assert np.isfinite(path_log_score(phi_eff, a, best[a:b]))


# ---------------------------------------------------------------- marginals


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_marginals_and_pairwise_match_enumeration(p_forbid, spread):
    for seed in SEEDS:
        _, m = problem(seed, p_forbid, spread)
        alpha, beta, scale, _ = free_pass(m)
        gamma = crf.marginals(alpha, beta)
        assert np.allclose(gamma.sum(axis=1), 1.0)
        for a, b in sequences(m["seq_starts"]):
            expected = seq_expectations(m["phi"], a, b)
            # label marginals: sum over states
            assert np.allclose(gamma[a:b], expected.sum(axis=1), atol=1e-10)
            got = kernel_expectations(alpha, beta, scale, m["E"], a, b)
            assert np.allclose(got, expected, atol=1e-10)
            # pairwise marginals are consistent with the label marginals on both sides
            for t in range(a + 1, b):
                xi = got[t - a, 1:]
                assert np.allclose(xi.sum(axis=0), gamma[t], atol=1e-10)
                assert np.allclose(xi.sum(axis=1), gamma[t - 1], atol=1e-10)


# ---------------------------------------------------------------- clamped pass


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_clamped_log_z_matches_consistent_paths(p_forbid, spread):
    for seed in SEEDS:
        rng, m = problem(seed, p_forbid, spread)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"], p_unknown=0.5)
        calpha, cbeta, cscale, clogz = crf.forward_backward(m["P"], m["seq_starts"], y, True)
        _, _, _, logz = crf.forward_backward(m["P"], m["seq_starts"], y, False)
        cgamma = crf.marginals(calpha, cbeta)
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            assert logz[q] == pytest.approx(seq_log_z(m["phi"], a, b), rel=1e-9, abs=1e-9)  # y ignored
            expected = seq_log_z(m["phi"], a, b, y)
            assert np.isfinite(expected)
            assert clogz[q] == pytest.approx(expected, rel=1e-9, abs=1e-9)
            assert clogz[q] <= logz[q] + 1e-9
            # clamped marginals are the conditional marginals given the known labels
            exp_cond = seq_expectations(m["phi"], a, b, y)
            assert np.allclose(cgamma[a:b], exp_cond.sum(axis=1), atol=1e-10)
            assert np.allclose(kernel_expectations(calpha, cbeta, cscale, m["E"], a, b), exp_cond, atol=1e-10)
            known = y[a:b] >= 0
            assert np.allclose(cgamma[a:b][known, y[a:b][known]], 1.0)


def test_clamped_with_inconsistent_labels_is_minus_inf():
    # label 1 may never follow label 0: the labelling (0, 1) has no path, the free pass still has paths
    allowed = np.ones((3, 2), dtype=bool)
    allowed[1, 1] = False
    rng = np.random.default_rng(3)
    seq_starts = np.array([0, 2, 5], dtype=np.int64)
    P, phi = potentials_from_phi(rng.normal(size=(5, 3, 2)), seq_starts, allowed)
    y = np.array([0, 1, -1, 0, -1], dtype=np.int32)
    _, _, _, clogz = crf.forward_backward(P, seq_starts, y, True)
    _, _, _, logz = crf.forward_backward(P, seq_starts, y, False)
    assert clogz[0] == -np.inf
    assert np.isfinite(logz).all()
    assert clogz[1] == pytest.approx(seq_log_z(phi, 2, 5, y), rel=1e-9)


def test_fully_labelled_clamp_gives_gold_score():
    for seed in range(20):
        rng, m = problem(seed, 0.3, 3.0)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"])
        *_, clogz = crf.forward_backward(m["P"], m["seq_starts"], y, True)
        gold = crf.gold_log_score(m["P"], m["seq_starts"], y)
        assert np.allclose(clogz, gold, rtol=1e-9, atol=1e-9)


# ---------------------------------------------------------------- viterbi


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_viterbi_is_brute_force_argmax(p_forbid, spread):
    checked = 0
    for seed in SEEDS:
        _, m = problem(seed, p_forbid, spread)
        best = crf.viterbi(m["P"], m["seq_starts"])
        assert best.dtype == np.int32 and best.shape == (m["E"].shape[0],)
        for a, b in sequences(m["seq_starts"]):
            path, score, second = best_path(m["phi"], a, b)
            got = path_log_score(m["phi"], a, best[a:b])
            assert np.isfinite(got)  # never a forbidden transition
            assert got == pytest.approx(score, rel=1e-9, abs=1e-9)
            if score - second > 1e-6:
                assert list(best[a:b]) == list(path)
                checked += 1
    assert checked > len(SEEDS)


def test_viterbi_keeps_a_path_whose_products_underflow():
    """Label 1 starts 69 nats behind and loses 69 more at each of 11 positions (its product with the leader
    underflows to 0), then only paths through it stay allowed: decoding must still find it."""
    K, n = 2, 14
    seq_starts = np.array([0, n], dtype=np.int64)
    phi = np.zeros((n, K + 1, K))
    phi[0, 0, 1] = -69.0
    phi[1:12, 2, 1] = -69.0  # 1 -> 1
    allowed = np.ones((K + 1, K), dtype=bool)
    allowed[1, 1] = allowed[2, 0] = False  # no crossing between the labels ...
    phi[12, 1, :] = -np.inf  # ... and at position 12 nothing follows label 0
    P, phi_eff = potentials_from_phi(phi, seq_starts, allowed)
    assert (dense(P)[1:12, 2, 1] > 0).all()
    path = crf.viterbi(P, seq_starts)
    assert list(path) == [1] * n
    assert list(best_path(phi_eff, 0, n)[0]) == [1] * n


def test_viterbi_respects_mask_against_strong_potentials():
    # the best unconstrained path would be all 1s, but 1 -> 1 is forbidden
    K = 2
    seq_starts = np.array([0, 5], dtype=np.int64)
    phi = np.zeros((5, K + 1, K))
    phi[:, :, 1] = 10.0
    allowed = np.ones((K + 1, K), dtype=bool)
    allowed[2, 1] = False
    P, phi_eff = potentials_from_phi(phi, seq_starts, allowed)
    assert list(crf.viterbi(P, seq_starts)) == [1, 0, 1, 0, 1]
    assert list(best_path(phi_eff, 0, 5)[0]) == [1, 0, 1, 0, 1]


# ---------------------------------------------------------------- residuals


def residuals(m, y, partial):
    P, seq_starts = m["P"], m["seq_starts"]
    T, S = P.group.shape
    K = P.values.shape[1]
    free = crf.forward_backward(P, seq_starts, y, False)
    clamped = crf.forward_backward(P, seq_starts, y, True)
    out = np.full((K, T, S), np.nan)
    for k in range(K):
        buf = np.full((T, S, 1), np.nan)
        crf.residual_slice(P, seq_starts, y, partial, free, clamped, k, buf)
        out[k] = buf[:, :, 0]
    by_label = out.transpose(1, 2, 0)  # T x S x K, like E
    for k0 in range(K):  # a block of labels at once gives the same cells
        block = np.full((T, S, K - k0), np.nan)
        crf.residual_slice(P, seq_starts, y, partial, free, clamped, k0, block)
        assert np.array_equal(block, by_label[:, :, k0:])
    return by_label


def brute_gradient(phi, seq_starts, y, partial):
    """d log P(y | x) / d phi (fully labelled) or d log sum_{consistent} P / d phi (partial), per cell."""
    T, S, K = phi.shape
    grad = np.zeros((T, S, K))
    for q, (a, b) in enumerate(sequences(seq_starts)):
        if b <= a:
            continue
        if partial[q]:
            target = seq_expectations(phi, a, b, y)
        else:
            target = path_indicators(y[a:b], S, K)
        grad[a:b] = target - seq_expectations(phi, a, b)
    return grad


def log_likelihood(E, c, seq_starts, y, partial):
    P = ungrouped(E, c, crf.start_mask(seq_starts, len(c)))
    *_, logz = crf.forward_backward(P, seq_starts, y, False)
    *_, clogz = crf.forward_backward(P, seq_starts, y, True)
    gold = crf.gold_log_score(P, seq_starts, np.maximum(y, 0))
    return np.where(partial, clogz, gold) - logz


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_residual_fully_labelled_is_functional_gradient(p_forbid, spread):
    for seed in SEEDS:
        rng, m = problem(seed, p_forbid, spread)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"])
        partial = np.zeros(len(m["seq_starts"]) - 1, dtype=bool)
        got = residuals(m, y, partial)
        expected = brute_gradient(m["phi"], m["seq_starts"], y, partial)
        assert np.allclose(got, expected, atol=1e-10)
        # the residual is exactly zero on forbidden and structurally invalid cells
        assert np.all(got[~np.isfinite(m["phi"])] == 0.0)


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_residual_partial_labels_is_marginal_likelihood_gradient(p_forbid, spread):
    n_mixed = 0
    for seed in SEEDS:
        rng, m = problem(seed, p_forbid, spread, n_seq=3)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"])
        partial = rng.random(3) < 0.7
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            if partial[q]:
                y[a:b][rng.random(b - a) < 0.5] = -1
        n_mixed += partial.any() and not partial.all()
        got = residuals(m, y, partial)
        expected = brute_gradient(m["phi"], m["seq_starts"], y, partial)
        assert np.allclose(got, expected, atol=1e-10)
        assert np.all(got[~np.isfinite(m["phi"])] == 0.0)
    assert n_mixed > 5


def test_residual_partial_without_unknowns_equals_fully_labelled():
    for seed in range(15):
        rng, m = problem(seed, 0.3, 3.0)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"])
        n_seq = len(m["seq_starts"]) - 1
        a = residuals(m, y, np.zeros(n_seq, dtype=bool))
        b = residuals(m, y, np.ones(n_seq, dtype=bool))
        assert np.allclose(a, b, atol=1e-10)


@pytest.mark.parametrize("p_forbid", [0.0, 0.35])
def test_residual_matches_finite_differences(p_forbid):
    h = 1e-2
    for seed in range(6):
        rng, m = problem(seed, p_forbid, 1.5, n_seq=3, max_len=5)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"])
        partial = np.array([False, True, True])
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            if partial[q]:
                y[a:b][rng.random(b - a) < 0.5] = -1
        got = residuals(m, y, partial)
        E, c, seq_starts = m["E"], m["c"], m["seq_starts"]
        for t, s, k in zip(*np.nonzero(E)):
            up = E.copy()
            up[t, s, k] *= np.exp(h)
            down = E.copy()
            down[t, s, k] *= np.exp(-h)
            fd = (log_likelihood(up, c, seq_starts, y, partial) -
                  log_likelihood(down, c, seq_starts, y, partial)) / (2 * h)
            q = np.searchsorted(seq_starts, t, side="right") - 1
            assert fd[q] == pytest.approx(got[t, s, k], abs=2e-4)
            others = np.arange(len(fd)) != q
            assert np.allclose(fd[others], 0.0, atol=1e-4)


# ---------------------------------------------------------------- gold score


@pytest.mark.parametrize("p_forbid,spread", SETTINGS)
def test_gold_log_score_matches_path_score(p_forbid, spread):
    for seed in SEEDS:
        rng, m = problem(seed, p_forbid, spread)
        y = random_valid_labels(rng, m["phi"], m["seq_starts"])
        gold = crf.gold_log_score(m["P"], m["seq_starts"], y)
        *_, logz = free_pass(m, y)
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            expected = path_log_score(m["phi"], a, y[a:b])
            assert gold[q] == pytest.approx(expected, rel=1e-9, abs=1e-9)
            # gold - log Z is the log probability of the gold path
            paths, scores = all_path_scores(m["phi"], a, b)
            idx = np.flatnonzero(consistent(paths, y[a:b]))[0]
            assert gold[q] - logz[q] == pytest.approx(scores[idx] - logsumexp(scores), abs=1e-9)
            assert gold[q] <= logz[q]


def test_gold_log_score_of_forbidden_path_is_minus_inf():
    allowed = np.ones((3, 2), dtype=bool)
    allowed[0, 1] = False  # label 1 cannot open a sequence
    seq_starts = np.array([0, 2, 4], dtype=np.int64)
    P, _ = potentials_from_phi(np.zeros((4, 3, 2)), seq_starts, allowed)
    with np.errstate(divide="ignore"):
        gold = crf.gold_log_score(P, seq_starts, np.array([1, 0, 0, 1], dtype=np.int32))
    assert gold[0] == -np.inf
    assert gold[1] == pytest.approx(0.0)


# ---------------------------------------------------------------- small helpers


def test_rescale_preserves_potentials():
    rng = np.random.default_rng(1)
    m = random_crf(rng, K=3, n_seq=3, max_len=6, p_forbid=0.3)
    E = (m["E"] * np.exp(rng.uniform(-20, 20, size=(m["E"].shape[0], 1, 1)))).astype(np.float32)
    E[0] = 0.0  # an all-zero position is left alone
    c = rng.normal(size=E.shape[0])
    with np.errstate(divide="ignore"):
        before = np.log(E.astype(np.float64)) + c[:, None, None]
    P = ungrouped(E, c, crf.start_mask(m["seq_starts"], len(c)))
    crf.rescale(P)
    E, c = dense(P), P.c
    assert np.allclose(E.max(axis=(1, 2))[1:], 1.0) and np.all(E[0] == 0.0)
    with np.errstate(divide="ignore"):
        after = np.log(E.astype(np.float64)) + c[:, None, None]
    finite = np.isfinite(before)
    assert np.array_equal(finite, np.isfinite(after))
    assert np.allclose(after[finite], before[finite], atol=1e-5)


def test_initial_potentials_and_start_mask():
    seq_starts = np.array([0, 3, 3, 5], dtype=np.int64)
    assert list(crf.start_mask(seq_starts, 5)) == [True, False, False, True, False]
    allowed = np.array([[1, 0], [1, 1], [0, 1]], dtype=bool)
    P = crf.initial_potentials(5, allowed, seq_starts)
    E = dense(P)
    assert P.values.dtype == np.float32 and E.shape == (5, 3, 2) and np.all(P.c == 0)
    assert np.array_equal(E[0], [[1, 0], [0, 0], [0, 0]])
    assert np.array_equal(E[1], [[0, 0], [1, 1], [0, 1]])
    assert list(np.diff(P.start)) == [1, 2, 2, 1, 2]  # the two previous labels' allowed rows differ
    no_mask = crf.initial_potentials(2, np.ones((3, 2), bool), np.array([0, 2]))
    assert np.array_equal(no_mask.group, [[0, -1, -1], [-1, 0, 0]])
    # an empty model is uniform over the allowed paths
    *_, logz = crf.forward_backward(P, seq_starts, np.full(5, -1, dtype=np.int32), False)
    assert logz[0] == pytest.approx(np.log(3))  # 0,0,0  0,0,1  0,1,1
    assert logz[2] == pytest.approx(np.log(2))


def test_scaled_potentials_keep_valid_cells_and_their_log_values():
    """E = exp(phi - c) in float32 on exactly the valid cells (state 0 at a sequence's first position, states
    j + 1 elsewhere, as allowed), c the largest valid phi, and a position with no finite valid cell gets c = 0
    (its -inf cells give E = 0)."""
    rng = np.random.default_rng(3)
    seq_starts = np.array([0, 4, 4, 5, 9], dtype=np.int64)
    T, K = 9, 3
    allowed = rng.random((K + 1, K)) < 0.7
    allowed[0, 0] = allowed[1, 1] = True
    phi = rng.normal(scale=30.0, size=(T, K + 1, K))
    phi[6] = -np.inf  # nothing allowed here
    P = crf.scaled_potentials(phi, allowed, crf.start_mask(seq_starts, T))
    E, c = dense(P), P.c
    assert P.values.dtype == np.float32 and c.dtype == np.float64
    is_start = crf.start_mask(seq_starts, T)
    for t in range(T):
        valid = np.zeros((K + 1, K), dtype=bool)
        if is_start[t]:
            valid[0] = allowed[0]
        else:
            valid[1:] = allowed[1:]
        assert np.all(E[t][~valid] == 0.0)
        if t == 6:
            assert c[t] == 0.0 and np.all(E[t] == 0.0)
            continue
        assert c[t] == phi[t][valid].max() and E[t][valid].max() == 1.0
        assert np.allclose(E[t][valid], np.exp(phi[t][valid] - c[t]).astype(np.float32), rtol=1e-6, atol=0.0)


@pytest.mark.parametrize("spread", [2.0, 8.0, 40.0])
def test_product_is_the_potentials_of_the_summed_raw_potentials(spread):
    """crf.product(P, Q) (a stacked model's two stages) holds the cells of scaled_potentials(phi_P + phi_Q): the
    same log value on every cell both factors hold, each position's largest cell 1, whatever the groups of the
    two factors (here P's rows repeat so its states share groups, Q's do not). A cell one factor lost to float32
    (over ~103 nats below its position's best: the spread of 40) is 0 in the product."""
    rng = np.random.default_rng(int(spread))
    seq_starts = np.array([0, 5, 6, 11], dtype=np.int64)
    T, K = 11, 4
    allowed = rng.random((K + 1, K)) < 0.75
    allowed[:, 0] = True
    is_start = crf.start_mask(seq_starts, T)
    phi_p = np.repeat(rng.normal(scale=spread, size=(T, 2, K)), [1, K], axis=1)
    phi_q = rng.normal(scale=spread, size=(T, K + 1, K))
    P, Q = (crf.scaled_potentials(phi, allowed, is_start) for phi in (phi_p, phi_q))
    R, want = crf.product(P, Q), crf.scaled_potentials(phi_p + phi_q, allowed, is_start)
    assert np.array_equal(R.group >= 0, want.group >= 0)
    E, E_want = dense(R).astype(np.float64), dense(want).astype(np.float64)
    held = (dense(P) > 0) & (dense(Q) > 0)
    assert not np.any(E[~held]) and np.all(E.max(axis=(1, 2)) == 1.0)
    on = (dense(P) > 1e-30) & (dense(Q) > 1e-30) & (E_want > 1e-30)  # cells float32 holds to full precision
    assert on.sum() > T and (spread < 40 or (held != (E_want > 0)).any())
    log_e = np.log(E, where=on, out=np.zeros_like(E)) + R.c[:, None, None]
    log_want = np.log(E_want, where=on, out=np.zeros_like(E)) + want.c[:, None, None]
    assert np.allclose(log_e[on], log_want[on], rtol=0.0, atol=1e-5)
    assert R.start[-1] <= P.start[-1] + Q.start[-1] + T * K  # pairs, at most one a state


@pytest.mark.parametrize("p_forbid, spread", SETTINGS)
@pytest.mark.parametrize("n", [1, 3, 7])
def test_nbest_is_the_top_of_brute_force_enumeration(p_forbid, spread, n):
    """The n best paths are distinct allowed paths whose exact probabilities are the n largest of every path's
    (fewer than n allowed paths leave -inf ranks); the first is Viterbi's path unless the top two tie."""
    for seed in SEEDS:
        _, m = problem(seed, p_forbid, spread, min_len=0)
        log_z = crf.forward_backward(m["P"], m["seq_starts"], no_labels(len(m["E"])), False)[3]
        paths, logp = crf.nbest(m["P"], m["seq_starts"], log_z, n)
        best = crf.viterbi(m["P"], m["seq_starts"])
        for q, (a, b) in enumerate(sequences(m["seq_starts"])):
            if b == a:
                assert logp[q, 0] == 0.0 and np.all(np.isneginf(logp[q, 1:]))
                continue
            every, scores = all_path_scores(m["phi"], a, b)
            scores = scores[np.isfinite(scores)]
            exact = np.sort(scores - logsumexp(scores))[::-1][:n]
            got = np.flatnonzero(np.isfinite(logp[q]))
            assert len(got) == len(exact)
            np.testing.assert_allclose(logp[q, got], exact, rtol=0, atol=1e-6)
            found = [tuple(paths[r, a:b]) for r in got]
            assert len(set(found)) == len(found)
            for r, path in zip(got, found):  # each path's own probability is the one reported
                assert path_log_score(m["phi"], a, path) - logsumexp(scores) == pytest.approx(logp[q, r], abs=1e-6)
            if len(got) == 1 or logp[q, 0] - logp[q, 1] > 1e-6:
                assert list(found[0]) == list(best[a:b])


def test_nbest_memory_follows_the_positions_not_the_longest_sequence_times_the_sequences():
    """400 short sequences and one of 2,000 positions: the paths take n x positions (4,400), not sequences x n x
    the longest (a million cells each; with 200k-token docs, gigabytes); each sequence's paths are its own."""
    _, m = problem(0, 0.0, 1.0, min_len=1)
    K = m["P"].values.shape[1]
    lengths = [5] * 400 + [2000]
    seq_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    T = int(seq_starts[-1])
    allowed = np.ones((K + 1, K), dtype=bool)
    P = crf.initial_potentials(T, allowed, seq_starts)
    log_z = crf.forward_backward(P, seq_starts, no_labels(T), False)[3]
    paths, logp = crf.nbest(P, seq_starts, log_z, 3)
    assert paths.shape == (3, T) and logp.shape == (401, 3)
    assert np.all(paths[:, :5] >= 0) and np.all(paths[:, -2000:] >= 0)

"""Every boosting loss's residuals against finite differences of the loss itself, computed by brute force over
all label paths of random tiny CRFs (start states, forbidden transitions, unknown labels); the rank loss's step."""
import numpy as np
import pytest
import spacy

from brute import all_path_scores, consistent, logsumexp, potentials_from_phi, random_crf, random_valid_labels
from conftest import component_config, paper_crf, paper_params
from spacy_treecrf.engine import booster, crf
from test_estimator import toy_data
from conftest import ner_examples

LOSSES = booster.LOSSES
SEEDS = range(12)
# (probability of forbidding a transition, probability of hiding a gold label)
SETTINGS = [(0.0, 0.0), (0.35, 0.0), (0.0, 0.3), (0.3, 0.3)]


def problem(seed, p_forbid, p_unknown):
    rng = np.random.default_rng([seed, int(p_forbid * 100), int(p_unknown * 100)])
    m = random_crf(rng, K=int(rng.integers(2, 4)), max_len=4, p_forbid=p_forbid, scale=1.5)
    return m, random_valid_labels(rng, m["phi"], m["seq_starts"], p_unknown)


def log_prob(phi, a, b, y):
    """log P(the known labels of y[a:b] | X)."""
    paths, scores = all_path_scores(phi, a, b)
    return logsumexp(scores[consistent(paths, y[a:b])]) - logsumexp(scores)


def sequence_nll(phi, seq_starts, y):
    return np.array([-log_prob(phi, a, b, y) for a, b in zip(seq_starts[:-1], seq_starts[1:])])


def pseudo_terms(phi, seq_starts, y):
    """-log P(y_t | gold y_{t-1}, gold y_{t+1}, X), the conditional read off whole paths: the gold path with only
    y_t changed (where a neighbour or y_t is unknown the term is dropped, and any other unknown label is set to
    one that keeps the path allowed: it cancels from the ratio)."""
    out = []
    for a, b in zip(seq_starts[:-1], seq_starts[1:]):
        paths, scores = all_path_scores(phi, a, b)
        for t in range(a, b):
            near = y[max(a, t - 1):min(b, t + 2)]
            if (near < 0).any():
                continue
            fixed = [i for i in range(a, b) if i != t and y[i] >= 0]
            other = [i for i in range(a, b) if i != t and y[i] < 0]
            ok = np.isfinite(scores) & np.all(paths[:, np.array(fixed, dtype=int) - a] == y[fixed], axis=1)
            if other:  # one allowed filling of the unknown labels away from t
                fill = paths[ok][0, np.array(other) - a]
                ok &= np.all(paths[:, np.array(other) - a] == fill, axis=1)
            column = paths[ok, t - a]
            out.append(-(scores[ok][column == y[t]][0] - logsumexp(scores[ok])))
    return np.array(out)


def brute_loss(loss, phi, seq_starts, y):
    if loss == "crf":
        return sequence_nll(phi, seq_starts, y).sum()
    if loss == "rank":
        return np.expm1(sequence_nll(phi, seq_starts, y)).sum()
    if loss == "pseudo_likelihood":
        return pseudo_terms(phi, seq_starts, y).sum()
    total = 0.0  # hamming: one term per known label
    for a, b in zip(seq_starts[:-1], seq_starts[1:]):
        for t in range(a, b):
            if y[t] >= 0:
                only = np.full(len(y), -1, dtype=np.int32)
                only[t] = y[t]
                total -= log_prob(phi, a, b, only)
    return total


def trainer_for(m, y, loss):
    T = len(y)
    params = paper_params(loss=loss, n_threads=1)
    return booster.Trainer(np.zeros(T + 1, dtype=np.int64), np.zeros(0, dtype=np.int32), 1, y, m["seq_starts"],
                           m["allowed"], params, initial=crf.Potentials(*(a.copy() for a in m["P"])))


def kernel_residuals(trainer, passes, K):
    """Residuals in the (T x S x K) layout of phi."""
    T, S = len(trainer.y), K + 1
    by_label = np.concatenate([trainer.residuals(passes, k, np.empty((T, S, 1))) for k in range(K)], axis=2)
    assert np.array_equal(trainer.residuals(passes, 0, np.empty((T, S, K))), by_label)  # one block of all labels
    return by_label


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("p_forbid,p_unknown", SETTINGS)
def test_residuals_are_minus_the_gradient_of_the_loss(loss, p_forbid, p_unknown):
    h = 1e-5
    for seed in SEEDS:
        m, y = problem(seed, p_forbid, p_unknown)
        phi, K = m["phi"], m["K"]
        trainer = trainer_for(m, y, loss)
        passes = trainer.gradient_pass()
        got = kernel_residuals(trainer, passes, K)
        base = brute_loss(loss, phi, m["seq_starts"], y)
        assert -passes.objective == pytest.approx(base, rel=1e-6, abs=1e-9)
        if loss == "rank":  # residuals are the gradient divided by max_j (1 / P_j - 1)
            got = got * np.expm1(sequence_nll(phi, m["seq_starts"], y)).max()
        for t, s, k in zip(*np.nonzero(np.isfinite(phi))):
            up, down = phi.copy(), phi.copy()
            up[t, s, k] += h
            down[t, s, k] -= h
            numeric = -(brute_loss(loss, up, m["seq_starts"], y) - brute_loss(loss, down, m["seq_starts"], y)) / (2 * h)
            assert got[t, s, k] == pytest.approx(numeric, rel=1e-4, abs=1e-6), (seed, t, s, k)


def test_pseudo_likelihood_needs_no_forward_backward_and_reads_only_gold_neighbours():
    """Changing a potential that no pseudo-likelihood term uses (neither from a gold state nor into a gold label)
    changes neither the loss nor any residual."""
    rng = np.random.default_rng(3)
    m = random_crf(rng, K=3, n_seq=1, max_len=4, min_len=4)
    y = random_valid_labels(rng, m["phi"], m["seq_starts"])
    s = next(j + 1 for j in range(3) if j != y[1])
    k = next(j for j in range(3) if j != y[2])
    trainer = trainer_for(m, y, "pseudo_likelihood")
    before = trainer.gradient_pass()
    phi = m["phi"].copy()
    phi[2, s, k] += 5.0
    trainer.P, _ = potentials_from_phi(phi, m["seq_starts"], m["allowed"])
    after = trainer.gradient_pass()
    assert before.free is None and after.free is None
    assert after.objective == pytest.approx(before.objective, rel=1e-6)
    assert np.allclose(kernel_residuals(trainer, after, 3), kernel_residuals(trainer_for(m, y, "pseudo_likelihood"),
                                                                              before, 3), atol=1e-6)


def test_rank_line_search_never_raises_the_loss_and_keeps_the_step_bounded():
    X, y = toy_data(60)
    model = paper_crf(n_rounds=8, max_leaves=8, loss="rank").fit(X, y)
    history = [h["train_loss_before"] for h in model.history_]
    assert all(b <= a * (1 + 1e-6) for a, b in zip(history, history[1:]))
    assert history[-1] < history[0] / 10
    ens = model.ensemble
    leaves = ens.nodes.kind == 0
    # learning_rate 1: per round no log potential moves by more than 1
    assert 0 < np.abs(ens.nodes.value[leaves]).max() <= 1 + 1e-9


@pytest.mark.parametrize("loss", LOSSES)
def test_every_loss_learns_the_toy_task_and_round_trips(loss):
    X, y = toy_data()
    model = paper_crf(n_rounds=15, max_leaves=8, shrinkage=1.0, loss=loss).fit(X, y)
    Xt, yt = toy_data(40, seed=1)
    assert model.score(Xt, yt) == 1.0
    loaded = paper_crf().from_bytes(model.to_bytes())
    assert loaded.params.loss == loss
    assert loaded.predict(Xt) == model.predict(Xt)


@pytest.mark.parametrize("loss,accuracy", [("crf", 0.95), ("hamming", 0.95), ("rank", 0.95),
                                           ("pseudo_likelihood", 0.85)])
def test_unknown_labels(loss, accuracy):
    """The likelihood losses sum over unknown labels; the pseudo-likelihood drops every term next to one, so a
    label copied from an unknown neighbour is never learnt from that position."""
    X, y = toy_data()
    partial = [[None if i % 4 == 1 else lab for i, lab in enumerate(seq)] for seq in y]
    model = paper_crf(n_rounds=15, max_leaves=8, shrinkage=1.0, loss=loss).fit(X, partial)
    Xt, yt = toy_data(40, seed=1)
    assert model.score(Xt, yt) >= accuracy


def test_unknown_loss_is_a_clear_error():
    with pytest.raises(ValueError, match=r"'loss' must be one of \('crf', 'pseudo_likelihood', 'hamming', "
                                         r"'rank'\), got 'hinge'"):
        paper_crf(loss="hinge")
    nlp = spacy.blank("en")
    with pytest.raises(Exception, match="loss"):
        nlp.add_pipe("treecrf", config=component_config({"loss": "hinge"}))


@pytest.mark.parametrize("loss", LOSSES)
def test_component_reports_the_loss_it_boosts(loss):
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config=component_config({"max_leaves": 8, "shrinkage": 1.0, "loss": loss}))
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    values = [nlp.update(examples, losses={})["treecrf"] for _ in range(10)]
    assert values[-1] < values[0] / 2
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    trainer = nlp.get_pipe("treecrf").feeder.trainer
    assert trainer.params.loss == loss

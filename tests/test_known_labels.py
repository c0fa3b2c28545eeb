"""Decoding around known labels (clamped decoding) against brute-force enumeration of the paths that agree with
them, in the kernels and through the estimator; the refusals of known labels no allowed path agrees with."""
import random

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from brute import all_path_scores, logsumexp, random_crf, start_positions
from conftest import LANG, SMALL, component_config
from spacy_treecrf import TreeCRF
from spacy_treecrf.doc_scores import bio_spans
from spacy_treecrf.engine import crf
from spacy_treecrf.engine.ensemble import potentials_to_scaled

SEEDS = range(30)
SETTINGS = [(0.0, 2.0), (0.35, 2.0), (0.5, 6.0)]  # (probability of forbidding a transition, potential spread)


def random_permitted(rng, T, K, p_known=0.3, p_ruled_out=0.2):
    """Per position the labels it may take: all, one (a known label) or all but one (a label ruled out)."""
    permitted = np.ones((T, K), dtype=bool)
    for t in range(T):
        u = rng.random()
        if u < p_known:
            permitted[t] = False
            permitted[t, rng.integers(K)] = True
        elif u < p_known + p_ruled_out and K > 1:
            permitted[t, rng.integers(K)] = False
    return permitted


def agreeing_paths(phi, permitted, a, b):
    """(paths, log scores) of the allowed paths of positions a:b that take a permitted label everywhere."""
    paths, scores = all_path_scores(phi, a, b)
    keep = np.isfinite(scores) & np.all(permitted[a + np.arange(b - a), paths], axis=1)
    return paths[keep], scores[keep]


def clamped(raw_phi, permitted, seq_starts, allowed):
    """alive, dead and the clamped Potentials of raw potentials, as SequenceModel.decode makes them."""
    alive, dead = crf.agreeing_labels(permitted, seq_starts, allowed)
    phi = raw_phi.copy()
    crf.clamp_potentials(phi, alive, start_positions(seq_starts, len(phi)))
    return alive, dead, potentials_to_scaled(phi, allowed, seq_starts)


def problems(p_forbid, spread):
    for seed in SEEDS:
        rng = np.random.default_rng([seed, int(p_forbid * 100), int(spread)])
        m = random_crf(rng, K=int(rng.integers(1, 5)), p_forbid=p_forbid, scale=spread)
        T, K = len(m["phi"]), m["K"]
        raw = rng.normal(scale=spread, size=(T, K + 1, K))  # (what the trees give: no -inf anywhere)
        yield rng, m, raw, random_permitted(rng, T, K)


@pytest.mark.parametrize("p_forbid, spread", SETTINGS)
def test_agreeing_labels_are_the_labels_of_agreeing_paths(p_forbid, spread):
    for _, m, raw, permitted in problems(p_forbid, spread):
        alive, dead = crf.agreeing_labels(permitted, m["seq_starts"], m["allowed"])
        phi = np.where(m["allowed"][None], raw, -np.inf)  # the mask, as brute force scores paths
        for q, (a, b) in enumerate(zip(m["seq_starts"][:-1], m["seq_starts"][1:])):
            paths, _ = agreeing_paths(phi, permitted, a, b)
            assert (dead[q] < 0) == (len(paths) > 0)
            if len(paths):
                for i in range(b - a):
                    assert set(np.flatnonzero(alive[a + i])) == set(paths[:, i].tolist())
            else:  # the first position no agreeing prefix reaches
                prefixes = [agreeing_paths(phi, permitted, a, a + n)[0] for n in range(1, b - a + 1)]
                assert dead[q] == next(n for n, p in enumerate(prefixes) if len(p) == 0)


@pytest.mark.parametrize("p_forbid, spread", SETTINGS)
def test_clamped_decoding_is_enumeration_over_the_agreeing_paths(p_forbid, spread):
    """Viterbi's path, log Z, the marginals, the n best paths and their probabilities, given the known labels,
    equal brute force over the allowed paths that agree with them."""
    for _, m, raw, permitted in problems(p_forbid, spread):
        seq_starts, allowed = m["seq_starts"], m["allowed"]
        alive, dead, P = clamped(raw, permitted, seq_starts, allowed)
        if np.any(dead >= 0):
            continue
        phi = np.where(allowed[None], raw, -np.inf)
        fb = crf.forward_backward(P, seq_starts, np.full(len(raw), -1, dtype=np.int32), False)
        gamma = crf.marginals(fb.alpha, fb.beta)
        best = crf.viterbi(P, seq_starts)
        paths, logp = crf.nbest(P, seq_starts, fb.logz, 4)
        for q, (a, b) in enumerate(zip(seq_starts[:-1], seq_starts[1:])):
            agreeing, scores = agreeing_paths(phi, permitted, a, b)
            log_z = logsumexp(scores)
            assert fb.logz[q] == pytest.approx(log_z, abs=1e-5)
            probs = np.exp(scores - log_z)
            for i in range(b - a):
                expected = np.bincount(agreeing[:, i], weights=probs, minlength=m["K"])
                np.testing.assert_allclose(gamma[a + i], expected, atol=1e-6)
            order = np.argsort(-scores, kind="stable")
            top = scores[order[0]]
            assert any(np.array_equal(best[a:b], agreeing[r]) for r in order if scores[r] > top - 1e-5)
            kept = np.flatnonzero(np.isfinite(logp[q]))
            assert len(kept) == min(4, len(scores))
            np.testing.assert_allclose(logp[q, kept], scores[order[:len(kept)]] - log_z, atol=1e-5)
            for r in kept:  # each reported path agrees and is the one its probability says
                hit = np.flatnonzero(np.all(agreeing == paths[r, a:b], axis=1))
                assert len(hit) == 1 and scores[hit[0]] - log_z == pytest.approx(logp[q, r], abs=1e-5)


def test_a_forced_path_far_below_the_best_is_not_lost_to_underflow():
    """Known labels hundreds of nats against the potentials: the clamped potentials are scaled after the
    restriction, to the cells agreeing paths use (the labels and previous labels they allow), so the path they
    force is decoded; scaling first would leave every cell of it 0 in float32, and so would scaling position 3
    over the rows of previous labels the known label rules out."""
    K, T = 3, 4
    seq_starts = np.array([0, T])
    allowed = np.ones((K + 1, K), dtype=bool)
    raw = np.zeros((T, K + 1, K))
    raw[:, :, 0] = 300.0  # label 0 everywhere, by 300 nats a position ...
    raw[3, 3] = 0.0  # ... but after label 2, where the forced path goes, nothing is favoured
    permitted = np.ones((T, K), dtype=bool)
    permitted[2] = [False, False, True]
    alive, dead, P = clamped(raw, permitted, seq_starts, allowed)
    assert np.all(dead < 0)
    assert crf.viterbi(P, seq_starts).tolist() == [0, 0, 2, 0]
    fb = crf.forward_backward(P, seq_starts, np.full(T, -1, dtype=np.int32), False)
    assert np.isfinite(fb.logz[0])
    naive = potentials_to_scaled(raw, allowed, seq_starts)  # unclamped: the forced cell underflowed to 0
    assert naive.values[naive.start[2]:naive.start[3], 2].max() == 0.0


# ---------------------------------------------------------------- through the estimator


@pytest.fixture(scope="module")
def bio_model():
    """A small BIO tagger: 'a'/'b' open an X span, 'c' continues one, anything else is O (with noise)."""
    rng = random.Random(3)
    X, Y = [], []
    for _ in range(300):
        seq, ys = [], []
        for _ in range(rng.randint(1, 6)):
            w = rng.choice("abcdef")
            label = "B-X" if w in "ab" else "I-X" if w == "c" and ys and ys[-1] != "O" else "O"
            if rng.random() < 0.1:
                label = "O" if label == "I-X" else label
            seq.append({"w": w, "odd": len(ys) % 2 == 1})
            ys.append(label)
        X.append(seq)
        Y.append(ys)
    return TreeCRF(n_rounds=15, allowed_transitions="bio", early_stopping=False).fit(X, Y)


def model_phi(est, X):
    """The model's raw potentials of X with the transition mask as -inf (the brute-force layout)."""
    rows = est._rows(X)
    phi = est.crf_.ensemble.potentials(rows.indptr, rows.indices, 1, rows.missing,
                                       valid=(est.allowed, rows.seq_starts))
    return np.where(est.allowed[None], phi, -np.inf), rows.seq_starts


def test_estimator_known_labels_are_brute_force_over_agreeing_paths(bio_model):
    est = bio_model
    rng = random.Random(5)
    labels = est.classes_
    X = [[{"w": rng.choice("abcdef"), "odd": i % 2 == 1} for i in range(rng.randint(1, 5))] for _ in range(40)]
    known = [[rng.choice(labels) if rng.random() < 0.3 else None for _ in x] for x in X]
    phi, seq_starts = model_phi(est, X)
    index = {label: k for k, label in enumerate(labels)}
    permitted = np.ones((len(phi), len(labels)), dtype=bool)
    flat = [label for ks in known for label in ks]
    for t, label in enumerate(flat):
        if label is not None:
            permitted[t] = np.arange(len(labels)) == index[label]
    possible = [len(agreeing_paths(phi, permitted, a, b)[0]) > 0 for a, b in zip(seq_starts[:-1], seq_starts[1:])]
    X = [x for x, ok in zip(X, possible) if ok]
    known = [k for k, ok in zip(known, possible) if ok]
    assert len(X) >= 20
    phi, seq_starts = model_phi(est, X)
    permitted = np.ones((len(phi), len(labels)), dtype=bool)
    for t, label in enumerate(label for ks in known for label in ks):
        if label is not None:
            permitted[t] = np.arange(len(labels)) == index[label]
    predicted = est.predict(X, known=known)
    marginals = est.predict_marginals(X, known=known)
    nbest = est.predict_nbest(X, 3, known=known)
    sure = est.predict_confidence(X, known=known)
    for q, (a, b) in enumerate(zip(seq_starts[:-1], seq_starts[1:])):
        paths, scores = agreeing_paths(phi, permitted, a, b)
        log_z = logsumexp(scores)
        order = np.argsort(-scores, kind="stable")
        assert [index[label] for label in predicted[q]] == paths[order[0]].tolist()
        for i in range(b - a):
            expected = np.bincount(paths[:, i], weights=np.exp(scores - log_z), minlength=len(labels))
            np.testing.assert_allclose([marginals[q][i][label] for label in labels], expected, atol=1e-5)
        assert [[index[label] for label in path] for path, _ in nbest[q]] == [paths[r].tolist()
                                                                             for r in order[:3]]
        np.testing.assert_allclose([p for _, p in nbest[q]], np.exp(scores[order[:3]] - log_z), rtol=1e-5)
        assert sure.probability[q] == pytest.approx(np.exp(scores[order[0]] - log_z), rel=1e-5)
        picked = [marginals[q][i][predicted[q][i]] for i in range(b - a)]
        assert sure.least_marginal[q] == pytest.approx(min(picked), rel=1e-5)
        for i, label in enumerate(known[q]):
            if label is not None:
                assert predicted[q][i] == label and marginals[q][i][label] == pytest.approx(1.0)


def test_nothing_known_is_the_unconstrained_decoding(bio_model):
    X = [[{"w": w} for w in "acfbcc"], [{"w": "e"}]]
    assert bio_model.predict(X, known=[[None] * 6, [None]]) == bio_model.predict(X)
    free = bio_model.predict_marginals(X)
    assert bio_model.predict_marginals(X, known=None) == free
    sure = bio_model.predict_confidence(X)
    assert np.all((sure.probability > 0) & (sure.probability <= 1))
    assert np.all(sure.least_marginal <= 1) and np.all(sure.mean_entropy >= 0)


def test_confidence_of_an_empty_sequence_is_certainty(bio_model):
    sure = bio_model.predict_confidence([[], [{"w": "a"}]])
    assert sure.probability[0] == 1.0 and sure.least_marginal[0] == 1.0 and sure.mean_entropy[0] == 0.0


def test_known_labels_no_allowed_path_agrees_with_are_refused_naming_the_position(bio_model):
    X = [[{"w": "a"}], [{"w": "f"}, {"w": "c"}, {"w": "c"}]]
    with pytest.raises(ValueError, match=r"E223.*known\[1\]\[1\].*known\[1\]\[0\]: 'O'; known\[1\]\[1\]: 'I-X'"):
        bio_model.predict(X, known=[[None], ["O", "I-X", None]])
    with pytest.raises(ValueError, match=r"E223.*known\[0\]\[0\]"):  # I-X cannot open a sequence
        bio_model.predict_marginals(X, known=[["I-X"], [None] * 3])


def test_bad_known_labels_are_refused(bio_model):
    X = [[{"w": "a"}, {"w": "c"}]]
    with pytest.raises(ValueError, match=r"E224.*known\[0\]\[1\].*'B-Y'"):
        bio_model.predict(X, known=[[None, "B-Y"]])
    with pytest.raises(ValueError, match="E059"):
        bio_model.predict(X, known=[[None]])
    with pytest.raises(ValueError, match="E054"):
        bio_model.predict_nbest(X, 2, known=[[None, None], [None]])
    with pytest.raises(TypeError, match="E202"):
        bio_model.predict(X, known="B-X")


# ---------------------------------------------------------------- the component: decoding around preset annotation


def ruler_pipeline(model_bytes, patterns, **config):
    """entity_ruler, then a treecrf (overwrite = false) loaded from ``model_bytes``."""
    nlp = spacy.blank(LANG)
    nlp.add_pipe("entity_ruler").add_patterns(patterns)
    crf = nlp.add_pipe("treecrf", config=component_config({**SMALL, "overwrite": False, **config}))
    crf.from_bytes(model_bytes)
    return nlp, crf


def brute_ents(crf, doc_words, permitted_of):
    """The spans of the best labelling of a doc (its words) among those that agree with ``permitted_of(labels,
    n)`` (tokens x labels), by enumerating the model's paths, and that labelling's probability."""
    doc = Doc(crf.vocab, words=doc_words)
    rows = crf._rows([doc])
    phi = crf.crf.ensemble.potentials(rows.indptr, rows.indices, 1, rows.missing, valid=(crf.allowed, rows.seq_starts))
    phi = np.where(crf.allowed[None], phi, -np.inf)
    labels = list(crf.labels)
    paths, scores = agreeing_paths(phi, permitted_of(labels, len(doc)), 0, len(doc))
    best = paths[np.argmax(scores)]
    tags = [labels[k] for k in best]
    return bio_spans(tags), float(np.exp(scores.max() - logsumexp(scores)))


def only(labels, n, fixed, ruled_out=()):
    """permitted: token i takes ``fixed[i]``, token j may not take label l for (j, l) in ``ruled_out``."""
    permitted = np.ones((n, len(labels)), dtype=bool)
    for i, label in fixed.items():
        permitted[i] = [lab == label for lab in labels]
    for j, label in ruled_out:
        if label in labels:  # (a label the model lacks it never takes)
            permitted[j, labels.index(label)] = False
    return permitted


@pytest.mark.parametrize("text, pattern, fixed, after", [
    ("Alice lives in Paris .", ("LOC", "Alice"), {0: "B-LOC"}, (1, "I-LOC")),
    ("Bob visited Paris today .", ("LOC", [{"ORTH": "Bob"}, {"ORTH": "visited"}]), {0: "B-LOC", 1: "I-LOC"},
     (2, "I-LOC")),
    ("Carol met Alice in Rome", ("LOC", "Rome"), {4: "B-LOC"}, None),
    ("We flew to New York with Bob .", ("PER", "York"), {4: "B-PER"}, (5, "I-PER")),
])
def test_entity_ruler_then_treecrf_keeps_the_rulers_entities_and_decodes_around_them(ner_model, text, pattern,
                                                                                       fixed, after):
    """Every ruler entity is kept exactly, and the others are the best labelling that agrees with the ruler's:
    its tokens take B-/I- of its label, the token after it cannot continue it, the rest is free (the ruler sets
    every other token O, which spaCy's ner does not hold it to either)."""
    nlp_bytes = ner_model[1]
    label, words = pattern
    nlp, crf = ruler_pipeline(nlp_bytes, [{"label": label, "pattern": words}])
    doc = nlp(text)
    expected, probability = brute_ents(crf, [t.text for t in doc], lambda labels, n: only(
        labels, n, fixed, [after] if after else []))
    ruler = sorted(i for i, tag in fixed.items() if tag.startswith("B-"))
    assert [(e.start, e.label_) for e in doc.ents if e.start in ruler] == [(i, label) for i in ruler]
    assert [(e.start, e.end, e.label_) for e in doc.ents] == expected
    assert doc._.treecrf_confidence["treecrf"]["probability"] == pytest.approx(probability, rel=1e-5)
    for e in doc.ents:  # the preset entity is certain given itself; the others have their conditional probability
        assert 0 < e._.treecrf_prob <= 1 + 1e-9


def test_decoding_around_a_ruler_entity_changes_the_entities_next_to_it(ner_model):
    """Not a filter of the free decoding: where the ruler claims half of what the model sees as one entity, the
    rest is labelled anew (the free decoding's entity overlapping the ruler's is not simply dropped)."""
    nlp_free = spacy.blank(LANG)
    free = nlp_free.add_pipe("treecrf", config=component_config(SMALL)).from_bytes(ner_model[1])
    text = "We flew to New York with Bob ."
    free_ents = [(e.start, e.end, e.label_) for e in nlp_free(text).ents]
    assert (3, 5, "LOC") in free_ents and free is not None
    nlp, _ = ruler_pipeline(ner_model[1], [{"label": "PER", "pattern": "New"}])
    ents = [(e.start, e.end, e.label_) for e in nlp(text).ents]
    assert (3, 4, "PER") in ents
    assert any(start == 4 for start, _, _ in ents), ents  # "York" is an entity of its own now, not dropped


def test_a_preset_entity_the_model_cannot_label_is_kept_and_nothing_overlaps_it(ner_model):
    nlp, crf = ruler_pipeline(ner_model[1], [{"label": "PRODUCT", "pattern": [{"ORTH": "New"}, {"ORTH": "York"}]}])
    doc = nlp("Bob visited New York today .")
    assert (2, 4, "PRODUCT") in [(e.start, e.end, e.label_) for e in doc.ents]
    expected, _ = brute_ents(crf, [t.text for t in doc], lambda labels, n: only(labels, n, {2: "O", 3: "O"}))
    assert [(e.start, e.end, e.label_) for e in doc.ents if e.label_ != "PRODUCT"] == expected


def test_preset_outside_holds_the_ruler_O_tokens(ner_model):
    """With preset_outside, tokens set O are O: after a ruler that is every other token, so only its entities."""
    nlp, _ = ruler_pipeline(ner_model[1], [{"label": "LOC", "pattern": "Paris"}], preset_outside=True)
    doc = nlp("Alice lives in Paris .")
    assert [(e.start, e.label_) for e in doc.ents] == [(3, "LOC")]
    nlp, _ = ruler_pipeline(ner_model[1], [{"label": "LOC", "pattern": "Paris"}])
    assert [(e.start, e.label_) for e in nlp("Alice lives in Paris .").ents] == [(0, "PER"), (3, "LOC")]


def test_overwrite_decodes_as_if_nothing_were_known(ner_model):
    nlp = spacy.blank(LANG)
    nlp.add_pipe("entity_ruler").add_patterns([{"label": "LOC", "pattern": "Alice"}])
    nlp.add_pipe("treecrf", config=component_config(SMALL)).from_bytes(ner_model[1])
    assert [(e.start, e.label_) for e in nlp("Alice lives in Paris .").ents] == [(0, "PER"), (3, "LOC")]


def test_preset_tags_are_known_to_their_neighbours():
    """tag target, overwrite = false: a given tag is kept and the others are the best tagging that agrees with it
    (brute force over the model's paths); a tag the model does not know is kept and constrains nothing."""
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "tag", "max_leaves": 8, "shrinkage": 1.0}))
    sentences = [["the", "dog", "runs"], ["a", "cat", "sleeps"], ["dogs", "run"], ["the", "run", "ends"]]
    tags = [["DT", "NN", "VBZ"], ["DT", "NN", "VBZ"], ["NNS", "VBP"], ["DT", "NN", "VBZ"]]
    examples = [Example.from_dict(Doc(nlp.vocab, words=w), {"tags": t}) for w, t in zip(sentences, tags)]
    nlp.initialize(lambda: examples)
    for _ in range(6):
        nlp.update(examples)
    crf.cfg["overwrite"] = False
    words = ["the", "dog", "run"]
    labels = list(crf.labels)
    for given in (["", "VBZ", ""], ["NNS", "", ""], ["XX", "", ""]):
        doc = nlp(Doc(nlp.vocab, words=words, tags=given))
        fixed = {i: tag for i, tag in enumerate(given) if tag in labels}
        rows = crf._rows([Doc(nlp.vocab, words=words)])
        phi = crf.crf.ensemble.potentials(rows.indptr, rows.indices, 1, rows.missing,
                                          valid=(crf.allowed, rows.seq_starts))
        paths, scores = agreeing_paths(phi, only(labels, 3, fixed), 0, 3)
        best = [labels[k] for k in paths[np.argmax(scores)]]
        assert [t.tag_ for t in doc] == [tag or best[i] for i, tag in enumerate(given)]


def test_spans_target_keeps_its_group_and_adds_what_it_finds_around_it():
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "spans", "spans_key": "chunks",
                                                            "max_leaves": 8, "shrinkage": 1.0}))
    words = ["the", "big", "dog", "runs", "to", "the", "cat"]
    chunks = [(0, 3, "NP"), (3, 4, "VP"), (4, 5, "PP"), (5, 7, "NP")]
    gold = Doc(nlp.vocab, words=words)
    gold.spans["chunks"] = [Span(gold, s, e, label) for s, e, label in chunks]
    examples = [Example(Doc(nlp.vocab, words=words), gold)]
    nlp.initialize(lambda: examples)
    for _ in range(6):
        nlp.update(examples)
    crf.cfg["overwrite"] = False
    doc = Doc(nlp.vocab, words=words)
    doc.spans["chunks"] = [Span(doc, 3, 5, "NP")]  # a preset chunk across two gold chunks
    doc = nlp(doc)
    found = [(s.start, s.end, s.label_) for s in doc.spans["chunks"]]
    assert found[0] == (3, 5, "NP")
    assert (0, 3, "NP") in found and (5, 7, "NP") in found
    assert all(not (s < 5 and e > 3) for s, e, _ in found[1:])
    assert len(doc.spans["chunks"].attrs["scores"]) == len(found)


def test_doc_confidence_is_the_labellings_probability_and_travels_with_the_doc(ner_model):
    nlp = spacy.blank(LANG)
    crf = nlp.add_pipe("treecrf", config=component_config(SMALL)).from_bytes(ner_model[1])
    doc = nlp("Carol met Alice in Rome")
    _, probability = brute_ents(crf, [t.text for t in doc], lambda labels, n: np.ones((n, len(labels)), bool))
    sure = doc._.treecrf_confidence["treecrf"]
    assert sure["probability"] == pytest.approx(probability, rel=1e-5)
    labels, probs = doc.user_data[("treecrf", "scores")]["treecrf"][:2]
    picked = [probs[i, list(labels).index(tag)] for i, tag in enumerate(
        (f"{t.ent_iob_}-{t.ent_type_}" if t.ent_type_ else "O") for t in doc)]
    assert sure["least_marginal"] == pytest.approx(min(picked), rel=1e-5)
    copy = Doc(nlp.vocab).from_bytes(doc.to_bytes())
    assert copy._.treecrf_confidence["treecrf"] == pytest.approx(sure)


def test_blocks_of_raw_potentials_do_not_change_the_decoding(bio_model, monkeypatch):
    """The restricted sequences' raw potentials are made in blocks of bounded memory: one sequence a block gives
    what one block of all gives."""
    from spacy_treecrf import model
    rng = random.Random(9)
    X = [[{"w": rng.choice("abcdef")} for _ in range(rng.randint(1, 5))] for _ in range(30)]
    known = [[None] * len(x) for x in X]
    for q in range(0, 30, 3):
        known[q][0] = "B-X"
    whole = bio_model.predict_marginals(X, known=known), bio_model.predict(X, known=known)
    monkeypatch.setattr(model, "CLAMP_CELLS", 1)
    assert (bio_model.predict_marginals(X, known=known), bio_model.predict(X, known=known)) == whole

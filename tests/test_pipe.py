"""The treecrf component in spaCy: training loop, targets, confidence, serialization, errors."""
import subprocess
import sys

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, Span, Token
from spacy.training import Example

from conftest import NER_DATA, component_config, make_nlp, ner_examples, train
import spacy_treecrf.pipe  # noqa: F401
from spacy_treecrf.engine.booster import PARTITION_ROWS

def trained_ner(rounds=12, **config):
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config=component_config({"max_leaves": 8, "shrinkage": 1.0, **config}))
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    for _ in range(rounds):
        nlp.update(examples)
    return nlp, examples


def test_plain_update_loop_learns_and_loss_falls():
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config=component_config({"max_leaves": 8, "shrinkage": 1.0}))
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, losses={})["treecrf"] for _ in range(12)]
    assert losses[-1] < losses[0] / 2
    assert nlp.evaluate(examples)["ents_f"] == 1.0


def test_confidence_span_scores_and_token_marginals():
    nlp, _ = trained_ner()
    doc = nlp("Bob flew to New York .")
    group = doc.spans["treecrf"]
    assert [s.text for s in group] == [e.text for e in doc.ents]
    assert len(group.attrs["scores"]) == len(group)
    for span, p in zip(group, group.attrs["scores"]):
        assert 0.0 < p <= 1.0
        # a span's probability cannot exceed its first token's marginal of B-label
        assert p <= doc[span.start]._.treecrf_marginals["treecrf"]["B-" + span.label_] + 1e-6
    for token in doc:
        assert abs(sum(token._.treecrf_marginals["treecrf"].values()) - 1.0) < 1e-5


@pytest.mark.parametrize("store_scores, per_doc", [(True, 5), (False, 0)])
def test_stored_confidences_leave_the_garbage_collector_little_to_walk(store_scores, per_doc):
    """A doc tagged with store_scores keeps 5 tracked containers (the scores' dict and tuple of arrays, the
    SpanGroup, its attrs and one more dict of spaCy's), 12 with a tuple per span field and a dict per extension;
    without (the default) none. Each is walked by every full collection of the process, and enough of them set
    one off (~120 ms in spacy evaluate's pass over CoNLL-2003 test)."""
    import gc
    nlp, _ = trained_ner(rounds=3, store_scores=store_scores)
    texts = ["Alice flew to New York .", "Rome is big .", "Bob met Carol in Paris today ."] * 20
    list(nlp.pipe(texts[:3]))  # the kernels' first calls
    docs = [nlp.make_doc(text) for text in texts]
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    docs = list(nlp.get_pipe("treecrf").pipe(docs))
    gc.collect()
    gc.collect()  # a tuple is let go once its items are: an inner tuple may be seen after the outer one
    kept = [o for o in gc.get_objects() if id(o) not in before]
    assert len(kept) <= per_doc * len(docs) + 10, sorted({type(o).__name__ for o in kept})
    assert sum(len(doc.ents) for doc in docs) >= len(docs)
    if store_scores:
        for doc in docs:
            assert not gc.is_tracked(doc.user_data[("treecrf", "scores")]["treecrf"])
        assert [e._.treecrf_prob is not None for e in docs[0].ents] == [True] * len(docs[0].ents)
    else:
        assert all(("treecrf", "scores") not in doc.user_data and not doc.spans for doc in docs)


def test_writing_a_batch_holds_no_container_per_doc_or_span_at_once():
    """set_annotations slices a batch's spans and tags one doc at a time (pipe.BatchSpans). A list of (start,
    end, type) tuples per doc, all alive at once, set off Python's collector inside spacy evaluate's timed section,
    and so, every few passes, a full collection over every object of the process (~130 ms on CoNLL-2003 test).
    Here, with a collection threshold of 500 containers, writing 600 docs' entities sets off none (without
    store_scores, the default: with it, a doc keeps its scores' containers by design)."""
    import gc
    nlp, _ = trained_ner(rounds=3, store_scores=False)
    crf = nlp.get_pipe("treecrf")
    docs = [nlp.make_doc(text) for text in ["Alice flew to New York .", "Bob met Carol in Paris today ."] * 300]
    scores = crf.predict(docs)
    runs = []
    threshold = gc.get_threshold()
    gc.callbacks.append(lambda phase, info: runs.append(info["generation"]) if phase == "start" else None)
    try:
        gc.collect()
        runs.clear()
        gc.set_threshold(500, *threshold[1:])
        crf.set_annotations(docs, scores)
    finally:
        gc.set_threshold(*threshold)
        gc.callbacks.pop()
    assert runs == []
    assert sum(len(doc.ents) for doc in docs) >= len(docs)


def test_the_factory_stores_no_scores_unless_asked():
    """store_scores is off by default, as spaCy's own taggers and ner keep no scores: marginals cost a float per
    token and label on every doc kept (XPOS: 200 bytes a token) and a forward-backward pass per batch."""
    crf = spacy.blank("xx").add_pipe("treecrf")
    assert crf.cfg["store_scores"] is False


def test_span_probability_matches_brute_force():
    """P(exact span) from the kernel equals the sum over all label paths that contain exactly that span."""
    import itertools
    from spacy_treecrf.engine import booster, crf

    rng = np.random.default_rng(0)
    K, T = 3, 5  # labels B-X, I-X, O
    phi = rng.normal(size=(T, K + 1, K))
    allowed = np.ones((K + 1, K), dtype=bool)
    starts = np.array([0, T])
    P = booster.potentials_to_scaled(phi, allowed, starts)
    fb = crf.forward_backward(P, starts, np.full(T, -1, np.int32), False)
    scores = {}
    for path in itertools.product(range(K), repeat=T):
        s = phi[0, 0, path[0]] + sum(phi[t, path[t - 1] + 1, path[t]] for t in range(1, T))
        scores[path] = np.exp(s)
    Z = sum(scores.values())
    for a, b in [(0, 1), (1, 3), (2, 5), (4, 5)]:
        got = crf.span_probs(P, fb[0], fb[1], fb[2], np.array([T]), np.array([a]), np.array([b]),
                             np.array([0]), np.array([1]))[0]
        want = sum(v for p, v in scores.items() if p[a] == 0 and all(p[t] == 1 for t in range(a + 1, b))
                   and (b == T or p[b] != 1)) / Z
        assert got == pytest.approx(want, rel=1e-6)


def test_span_prob_extension_is_the_crfs_exact_span_probability():
    """Span._.treecrf_prob of every predicted entity equals the brute-force sum over all label paths (the model's
    own potentials, its BIO mask) that hold exactly that span, and the span group's scores."""
    from brute import all_path_scores, logsumexp

    nlp, _ = trained_ner(rounds=3)
    crf = nlp.get_pipe("treecrf")
    doc = nlp("Bob flew to New York with Alice")
    assert len(doc.ents) >= 2
    indptr, indices = crf._rows([doc])[:2]
    phi = np.where(crf.allowed[None], crf.ensemble.potentials(indptr, indices), -np.inf)
    paths, scores = all_path_scores(phi, 0, len(doc))
    log_z = logsumexp(scores)
    labels = list(crf.labels)
    for span, score in zip(doc.spans["treecrf"], doc.spans["treecrf"].attrs["scores"]):
        a, b = span.start, span.end
        inside = labels.index("I-" + span.label_) if "I-" + span.label_ in labels else -1  # -1: no path has it
        exact = (paths[:, a] == labels.index("B-" + span.label_)) & np.all(paths[:, a + 1:b] == inside, axis=1)
        if b < len(doc):
            exact &= paths[:, b] != inside
        want = np.exp(logsumexp(scores[exact]) - log_z)
        assert span._.treecrf_prob == pytest.approx(want, rel=1e-5)
        assert span._.treecrf_prob == score
        assert 0.0 < want < 1.0
    for ent in doc.ents:  # the same span through doc.ents and by characters
        assert ent._.treecrf_prob == doc.char_span(ent.start_char, ent.end_char, ent.label_)._.treecrf_prob
    assert doc[0:2]._.treecrf_prob is None  # no treecrf predicted this span
    assert doc.char_span(0, 3, "LOC")._.treecrf_prob is None  # nor this label


def test_span_prob_extension_survives_serialization_and_processes():
    from spacy.tokens import DocBin

    nlp, _ = trained_ner(rounds=3)
    texts = ["Alice flew to New York .", "Rome is big .", "Bob met Carol", "Paris"] * 2

    def probs(docs):
        return [[(e.text, e.label_, e._.treecrf_prob) for e in d.ents] for d in docs]
    here = list(nlp.pipe(texts))
    want = probs(here)
    assert all(p is not None for d in want for _, _, p in d) and any(want)
    assert probs(Doc(nlp.vocab).from_bytes(d.to_bytes()) for d in here) == want
    assert probs(DocBin(docs=here, store_user_data=True).get_docs(nlp.vocab)) == want
    assert probs(nlp.pipe(texts, n_process=2, batch_size=3)) == want
    quiet = nlp.get_pipe("treecrf")
    quiet.cfg["store_scores"] = False
    unscored = list(nlp.pipe(texts))
    assert [[(e.text, e.label_) for e in d.ents] for d in unscored] == [[(t, lab) for t, lab, _ in d] for d in want]
    assert all(e._.treecrf_prob is None for d in unscored for e in d.ents)
    assert all("treecrf" not in d.spans for d in unscored)  # the scored copy of the entities goes with the scores


def test_n_best_analyses_are_the_top_paths_by_brute_force():
    """Doc._.treecrf_nbest: the n most probable BIO taggings of the doc under the model's own potentials (all
    label paths enumerated), best first, the first the Viterbi tags, each with its spans; kept through
    serialization and n_process."""
    from spacy.tokens import DocBin

    from brute import all_path_scores, logsumexp

    nlp, _ = trained_ner(rounds=3, n_best=4)
    crf = nlp.get_pipe("treecrf")
    doc = nlp("Bob flew to New York")
    analyses = doc._.treecrf_nbest["treecrf"]
    assert len(analyses) == 4
    indptr, indices = crf._rows([doc])[:2]
    phi = np.where(crf.allowed[None], crf.ensemble.potentials(indptr, indices), -np.inf)
    paths, scores = all_path_scores(phi, 0, len(doc))
    order = np.argsort(-scores, kind="stable")[:4]
    want = [([crf.labels[k] for k in paths[i]], float(np.exp(scores[i] - logsumexp(scores)))) for i in order]
    assert [a["tags"] for a in analyses] == [tags for tags, _ in want]
    assert [a["probability"] for a in analyses] == pytest.approx([p for _, p in want], rel=1e-5)
    assert [(e.start, e.end, e.label_) for e in analyses[0]["spans"]] == [(e.start, e.end, e.label_) for e in doc.ents]
    assert analyses[0]["spans"].attrs["probability"] == analyses[0]["probability"]
    texts = ["Alice flew to New York .", "Rome is big .", "Bob met Carol", "Paris"]
    here = [d._.treecrf_nbest for d in nlp.pipe(texts)]
    def plain(nbest):
        return [(a["tags"], a["probability"]) for a in nbest["treecrf"]]
    assert [plain(d._.treecrf_nbest) for d in DocBin(docs=list(nlp.pipe(texts)), store_user_data=True).get_docs(
        nlp.vocab)] == [plain(n) for n in here]
    assert [plain(d._.treecrf_nbest) for d in nlp.pipe(texts, n_process=2, batch_size=2)] == [plain(n) for n in here]
    assert len(nlp("Paris")._.treecrf_nbest["treecrf"]) == crf.allowed[0].sum() < 4  # the labels BIO lets start
    for bad in (-1, 1.5, True, 10 ** 6):
        with pytest.raises(ValueError, match="n_best"):
            trained_ner(rounds=0, n_best=bad)
    assert trained_ner(rounds=1)[0]("Bob")._.treecrf_nbest is None  # off by default


def test_missing_gold_is_unknown_not_outside():
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf")
    doc = nlp.make_doc("Alice lives in Paris")
    ref = nlp.make_doc("Alice lives in Paris")
    ref.set_ents([Span(ref, 0, 1, "PER")], default="missing")
    eg = Example(doc, ref)
    assert crf._gold(eg) == ["B-PER", None, None, None]


def test_misaligned_tokens_are_unknown():
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf")
    pred = Doc(nlp.vocab, words=["New York", "is", "big"])
    ref = Doc(nlp.vocab, words=["New", "York", "is", "big"], spaces=[True, True, True, False])
    ref.set_ents([Span(ref, 0, 2, "LOC")], default="outside")
    assert crf._gold(Example(pred, ref)) == [None, "O", "O"]


def test_save_load_in_a_new_process_gives_identical_predictions(tmp_path):
    nlp, examples = trained_ner()
    nlp.to_disk(tmp_path / "model")
    texts = ["Alice flew to New York .", "Rome is big .", "Bob"]
    here = [[(e.start_char, e.end_char, e.label_) for e in doc.ents] for doc in nlp.pipe(texts)]
    code = ("import spacy, json, sys; nlp = spacy.load(sys.argv[1]); "
            "print(json.dumps([[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in nlp.pipe(sys.argv[2:])]))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "model"), *texts], capture_output=True,
                         text=True, check=True)
    import json
    assert json.loads(out.stdout) == [[list(e) for e in doc] for doc in here]
    assert nlp.get_pipe("treecrf").to_bytes() == spacy.load(tmp_path / "model").get_pipe("treecrf").to_bytes()


def test_pipe_with_two_processes_equals_one():
    nlp, _ = trained_ner()
    texts = ["Alice flew to New York .", "Rome is big .", "Bob met Carol", "Paris"] * 3
    one = [[(e.start, e.end, e.label_) for e in d.ents] for d in nlp.pipe(texts)]
    two = [[(e.start, e.end, e.label_) for e in d.ents] for d in nlp.pipe(texts, n_process=2, batch_size=3)]
    assert one == two


@pytest.mark.parametrize("n_threads", [1, 2])
def test_pipe_in_batches_equals_one_doc_at_a_time(n_threads):
    """Whatever the batch (under PARTITION_ROWS tokens: the bit-mask or walk kernels; over: the partition
    kernel), the annotations and their order are those of one doc at a time."""
    nlp, _ = trained_ner(n_threads=n_threads)
    texts = ["Alice flew to New York .", "Rome is big .", "Bob met Carol", "Paris", "", "Carol and Bob in Rome"] * 40
    want = [[(e.start, e.end, e.label_) for e in nlp(text).ents] for text in texts]
    assert sum(len(nlp.make_doc(text)) for text in texts) > PARTITION_ROWS
    for batch_size in (1, 7, 1000):
        docs = list(nlp.pipe(texts, batch_size=batch_size))
        assert [doc.text for doc in docs] == texts
        assert [[(e.start, e.end, e.label_) for e in doc.ents] for doc in docs] == want


def test_label_dictionary_trains_on_rows_without_each_docs_own_labels(tmp_path):
    nlp, examples = trained_ner(features={"@misc": "spacy_treecrf.window_features.v1", "label_dictionary": True})
    crf = nlp.get_pipe("treecrf")
    names = crf.featurizer.feature_names()
    # "Carol" (B-PER) and "Rome" (B-LOC) occur once: their own labels are not in their training rows ...
    carol = crf._rows([examples[3].predicted], crf._own_labels([examples[3]]))
    assert "ld=B-PER@0" not in [names[c] for c in carol[1][carol[0][0]:carol[0][1]]]
    # ... but the dictionary tells unseen text about them; "Alice" (twice) keeps B-PER in training rows too
    unseen = crf._rows([nlp.make_doc("Carol and Alice")])
    assert "ld=B-PER@0" in [names[c] for c in unseen[1][unseen[0][0]:unseen[0][1]]]
    alice = crf._rows([examples[0].predicted], crf._own_labels([examples[0]]))
    assert "ld=B-PER@0" in [names[c] for c in alice[1][alice[0][0]:alice[0][1]]]
    assert nlp.evaluate(examples)["ents_f"] == 1.0
    nlp.to_disk(tmp_path / "model")
    texts = ["Carol flew to Rome .", "Alice met Bob"]
    loaded = spacy.load(tmp_path / "model")
    assert [[(e.start, e.label_) for e in d.ents] for d in loaded.pipe(texts)] == \
        [[(e.start, e.label_) for e in d.ents] for d in nlp.pipe(texts)]


@pytest.mark.parametrize("target,attr", [("tag", "tag_"), ("pos", "pos_")])
def test_token_targets(target, attr):
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config=component_config({"target": target, "max_leaves": 8, "shrinkage": 1.0}))
    words = ["the", "dog", "runs", "a", "cat", "sleeps"]
    tags = {"tag": ["DT", "NN", "VBZ", "DT", "NN", "VBZ"], "pos": ["DET", "NOUN", "VERB", "DET", "NOUN", "VERB"]}
    examples = [Example.from_dict(Doc(nlp.vocab, words=words), {"tags" if target == "tag" else "pos": tags[target]})]
    nlp.initialize(lambda: examples)
    for _ in range(8):
        nlp.update(examples)
    doc = nlp(Doc(nlp.vocab, words=words))
    assert [getattr(t, attr) for t in doc] == tags[target]
    assert nlp.evaluate(examples)[f"{target}_acc"] == 1.0
    other = {"tag": "XX", "pos": "PROPN"}[target]
    given = Doc(nlp.vocab, words=words, **{"tags" if target == "tag" else "pos": [other] + [""] * 5})
    assert [getattr(t, attr) for t in nlp(given)] == tags[target]  # overwrite (the default) replaces a given tag
    nlp.get_pipe("treecrf").cfg["overwrite"] = False
    given = Doc(nlp.vocab, words=words, **{"tags" if target == "tag" else "pos": [other] + [""] * 5})
    assert [getattr(t, attr) for t in nlp(given)] == [other] + tags[target][1:]  # else only the untagged tokens


def test_pos_target_refuses_non_upos_labels():
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "pos"}))
    examples = [Example.from_dict(Doc(nlp.vocab, words=["a"]), {"pos": ["DET"]})]
    with pytest.raises(ValueError, match="UPOS"):
        crf.initialize(lambda: examples, labels=["DET", "NN"])


def test_spans_target_with_key_and_token_attr_target():
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", name="chunker", config=component_config({"target": "spans", "spans_key": "chunks",
                                                                     "max_leaves": 8, "shrinkage": 1.0}))
    words = ["the", "big", "dog", "runs", "to", "the", "cat"]
    ref = Doc(nlp.vocab, words=words)
    ref.spans["chunks"] = [Span(ref, 0, 3, "NP"), Span(ref, 3, 4, "VP"), Span(ref, 5, 7, "NP")]
    examples = [Example(Doc(nlp.vocab, words=words), ref)]
    nlp.initialize(lambda: examples)
    for _ in range(8):
        nlp.update(examples)
    doc = nlp(Doc(nlp.vocab, words=words))
    assert [(s.start, s.end, s.label_) for s in doc.spans["chunks"]] == [(0, 3, "NP"), (3, 4, "VP"), (5, 7, "NP")]
    assert nlp.evaluate(examples)["spans_chunks_f"] == 1.0

    if not Token.has_extension("stress"):
        Token.set_extension("stress", default=None)
    nlp2 = spacy.blank("en")
    nlp2.add_pipe("treecrf", config=component_config({"target": "token_attr", "token_attr": "stress", "max_leaves": 8,
                                                      "shrinkage": 1.0}))
    letters = list("abba")
    ref = Doc(nlp2.vocab, words=letters)
    for tok, s in zip(ref, ["1", "<", ">", "0"]):
        tok._.stress = s
    examples = [Example(Doc(nlp2.vocab, words=letters), ref)]
    nlp2.initialize(lambda: examples)
    for _ in range(8):
        nlp2.update(examples)
    assert [t._.stress for t in nlp2(Doc(nlp2.vocab, words=letters))] == ["1", "<", ">", "0"]
    assert nlp2.evaluate(examples)["stress_acc"] == 1.0


def test_overlapping_gold_spans_are_a_clear_error():
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf", config=component_config({"target": "spans", "spans_key": "chunks"}))
    ref = Doc(nlp.vocab, words=["a", "b", "c"])
    ref.spans["chunks"] = [Span(ref, 0, 2, "NP"), Span(ref, 1, 3, "VP")]
    with pytest.raises(ValueError, match="overlapping"):
        crf.initialize(lambda: [Example(Doc(nlp.vocab, words=["a", "b", "c"]), ref)])


@pytest.mark.parametrize("config,name", [({"target": "lemma"}, "target"), ({"target": "spans", "spans_key": ""},
                                         "spans_key"), ({"max_leaves": 1}, "max_leaves"),
                                         ({"shrinkage": -1.0}, "shrinkage"), ({"decode": "beam"}, "decode"),
                                         ({"target": "token_attr"}, "token_attr")])
def test_invalid_config_names_the_setting(config, name):
    nlp = spacy.blank("en")
    with pytest.raises(Exception, match=name):
        nlp.add_pipe("treecrf", config=component_config(config))


def test_corrupt_or_foreign_model_bytes_are_clear_errors():
    nlp, _ = trained_ner(rounds=2)
    data = nlp.get_pipe("treecrf").to_bytes()
    other = spacy.blank("en").add_pipe("treecrf", config=component_config({"target": "tag"}))
    with pytest.raises(ValueError, match="target"):
        other.from_bytes(data)
    fresh = spacy.blank("en").add_pipe("treecrf")
    with pytest.raises(ValueError):
        fresh.from_bytes(data[: len(data) // 3])


def test_full_batch_rounds_reuse_the_cached_potentials_although_spacy_copies_examples():
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf", config=component_config({"max_leaves": 8, "round_every": "batch"}))
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    trainer = crf.feeder.trainer
    nlp.update(list(reversed(examples)))  # nlp.update copies the examples; order differs too
    assert crf.feeder.trainer is trainer
    changed = examples[:-1]
    nlp.update(changed)
    assert crf.feeder.trainer is not trainer


def trees_of(crf) -> dict:
    return {key: value.tolist() for key, value in crf.ensemble.arrays().items() if hasattr(value, "tolist")}


def test_round_every_corpus_gathers_small_batches_into_one_full_gradient_round_per_pass():
    """spaCy's loop with batches of one or two docs in a new order every pass: the first update fits round 1 on
    the corpus initialize() saw (so spaCy's evaluation of step 0 scores a round), then one round per pass over the
    corpus (the first batch opens the first pass), the same trees as full-batch rounds; the loss comes with the
    update that completes a round."""
    full, full_crf = make_nlp()
    train(full, ner_examples(full), rounds=4)
    nlp, crf = make_nlp()
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    assert crf.cfg["corpus_size"] == len(examples)
    rng = np.random.default_rng(0)
    for epoch in range(3):
        order = rng.permutation(len(examples))
        batches = [[examples[i] for i in order[:2]], [examples[order[2]]], [examples[i] for i in order[3:]]]
        for b, batch in enumerate(batches):
            losses = nlp.update(batch, losses={})
            last = b == len(batches) - 1
            assert (losses["treecrf"] > 0) == (last or (epoch, b) == (0, 0))
            assert crf.cfg["rounds"] == 1 + epoch + last
    assert trees_of(crf) == trees_of(full_crf)
    texts = [text for text, _ in NER_DATA]
    assert [d.ents for d in nlp.pipe(texts)].__repr__() == [d.ents for d in full.pipe(texts)].__repr__()


def test_round_every_batch_fits_a_round_on_each_batch():
    nlp, crf = make_nlp(round_every="batch")
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    for batch in (examples[:2], examples[2:3], examples[3:]):
        assert nlp.update(batch, losses={})["treecrf"] > 0
    assert crf.cfg["rounds"] == 3


def test_rounds_per_pass_fits_that_many_full_gradient_rounds_at_the_end_of_each_pass():
    """Two rounds a pass over two passes in small batches are the trees of four full-batch rounds: the second
    round of a pass takes its gradient from the potentials the first moved."""
    full, full_crf = make_nlp()
    train(full, ner_examples(full), rounds=6)
    nlp, crf = make_nlp(rounds_per_pass=2)
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    for epoch in range(2):
        for batch in (examples[:2], examples[2:]):
            nlp.update(batch, losses={})
        assert crf.cfg["rounds"] == 2 + 2 * (epoch + 1)  # (2: the first update's, on initialize()'s corpus)
    assert trees_of(crf) == trees_of(full_crf)


def test_the_rounds_run_without_the_pass_examples_held(monkeypatch):
    """The pass's examples (spaCy's copies) are let go before its rounds, not after: the rounds' memory peak need not
    hold a second copy of the training corpus. The next pass still reuses the trainer's cache."""
    from spacy_treecrf.engine import booster
    nlp, crf = make_nlp(rounds_per_pass=2)
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    held = []
    fit_round = booster.Trainer.fit_round

    def watched(self, *args, **kwargs):
        held.append(len(crf.feeder.pending))
        return fit_round(self, *args, **kwargs)
    monkeypatch.setattr(booster.Trainer, "fit_round", watched)
    for _ in range(2):
        trainer = crf.feeder.trainer
        for batch in (examples[:2], examples[2:]):
            nlp.update(batch, losses={})
    # (the first two: the first update's, on the corpus initialize() saw)
    assert held == [0] * 6 and crf.feeder.trainer is trainer and crf.cfg["rounds"] == 6


def test_a_pass_keeps_only_the_examples_the_trainer_lacks_and_takes_the_others_rows_from_it():
    """A pass over an unchanged corpus keeps digests, no examples (spaCy's loop hands update() copies: a second
    corpus), and reuses the trainer. A pass that differs (one example new, one dropped, one twice) keeps only the
    new one and makes the same training set as a component that featurizes them all afresh."""
    nlp, crf = make_nlp()
    examples = ner_examples(nlp)
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    first = crf.feeder.trainer
    nlp.update(examples[:2])
    assert [eg for _, eg in crf.feeder.pending] == [None, None]
    nlp.update(examples[2:])
    assert crf.feeder.trainer is first and crf.cfg["rounds"] == 2
    new = ner_examples(nlp, [("Carol visited Paris .", [(0, 5, "PER"), (14, 19, "LOC")])])
    second = examples[:1] + examples[:1] + examples[2:-1] + new
    assert len(second) == len(examples)
    nlp.update(second[:-1])
    assert all(eg is None for _, eg in crf.feeder.pending)
    nlp.update(second[-1:])
    fresh_nlp, fresh_crf = make_nlp()
    fresh_nlp.initialize(lambda: examples)
    fresh_nlp.update(second)
    got, want = crf.feeder.trainer.training_set(), fresh_crf.feeder.trainer.training_set()
    assert crf.feeder.trainer is not first and crf.cfg["rounds"] == 3
    for name in ("indptr", "indices", "y", "seq_starts"):
        assert np.array_equal(getattr(got, name), getattr(want, name)), name


@pytest.mark.parametrize("value,message", [(0, "E200"), (101, "E200"), ("2", "E200"), (1.5, "Config error"),
                                           (True, "Config error")])
def test_rounds_per_pass_is_checked(value, message):
    """Out of range: the component's E200; not an int: spaCy's config check, which names the setting as well."""
    with pytest.raises(Exception, match=f"{message}(.|\\n)*rounds_per_pass"):
        make_nlp(rounds_per_pass=value)


def chunk_example(nlp, words, chunks):
    ref = Doc(nlp.vocab, words=words)
    ref.spans["chunks"] = [Span(ref, start, end, label) for start, end, label in chunks]
    return Example(Doc(nlp.vocab, words=words), ref)


def test_a_refused_batch_in_the_middle_of_a_pass_keeps_nothing_of_it():
    """A batch whose gold spans overlap is refused when it arrives, naming the doc, not when the pass ends; the
    pass goes on with what was kept before it."""
    nlp, crf = make_nlp(target="spans", spans_key="chunks")
    words = ["the", "big", "dog", "runs"]
    examples = [chunk_example(nlp, words, [(0, 3, "NP"), (3, 4, "VP")]), chunk_example(nlp, words[:3], [(0, 3, "NP")]),
                chunk_example(nlp, words[3:], [(0, 1, "VP")])]
    nlp.initialize(lambda: examples)
    nlp.update(examples[:1])  # round 1, on the corpus initialize() saw; this batch opens the next pass
    with pytest.raises(ValueError, match="E007.*overlapping"):
        nlp.update([chunk_example(nlp, ["a", "b", "c"], [(0, 2, "NP"), (1, 3, "VP")])])
    assert len(crf.feeder.pending) == 1 and crf.cfg["rounds"] == 1
    nlp.update(examples[1:])
    assert crf.cfg["rounds"] == 2


def test_round_every_is_checked_and_loaded_models_keep_their_corpus_size():
    with pytest.raises(ValueError, match="E171.*round_every"):
        make_nlp(round_every="epoch")
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=1)
    other, loaded = make_nlp()
    loaded.from_bytes(crf.to_bytes())
    assert loaded.cfg["corpus_size"] == len(NER_DATA) and loaded.cfg["rounds"] == 1


@pytest.mark.parametrize("computed", [False, True])
def test_cached_potentials_follow_the_extension_values_the_featurizer_reads(computed):
    """The cache key reads stored extension values from user_data in one pass and computed ones token by token:
    a copy keeps the cache, a changed value (or a token marked missing) rebuilds it."""
    if computed:
        Token.set_extension("digest_cue", getter=lambda t: t.doc.user_data.get("cues", {}).get(t.i), force=True)
    else:
        Token.set_extension("digest_cue", default=None, force=True)

    def set_cue(doc, i, value):
        if computed:
            doc.user_data.setdefault("cues", {})[i] = value
        else:
            doc[i]._.digest_cue = value

    nlp = spacy.blank("en")
    features = {"@misc": "spacy_treecrf.window_features.v1", "attrs": ["_.digest_cue"]}
    crf = nlp.add_pipe("treecrf", config=component_config({"max_leaves": 8, "features": features}))
    examples = ner_examples(nlp)
    for eg in examples:
        set_cue(eg.predicted, 0, "first")
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    trainer = crf.feeder.trainer
    nlp.update([Example(eg.predicted.copy(), eg.reference) for eg in examples])
    assert crf.feeder.trainer is trainer
    set_cue(examples[1].predicted, 1, "second")
    nlp.update(examples)
    assert crf.feeder.trainer is not trainer
    trainer = crf.feeder.trainer
    examples[2].predicted[0]._.treecrf_missing = True
    nlp.update(examples)
    assert crf.feeder.trainer is not trainer


def _bio_spans_loop(tags):
    """The tag-by-tag reading of BIO (the reference for sequence_bio_spans)."""
    spans, start, kind = [], -1, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, label = tag.partition("-")
        if kind is not None and (prefix != "I" or label != kind):
            spans.append((start, i, kind))
            kind = None
        if prefix == "B" or (prefix == "I" and kind is None):
            start, kind = i, label
    return spans


def test_sequence_bio_spans_match_the_tag_by_tag_reading():
    """Random BIO-ish tags (stray I-, bare B / I, other labels) cut into sequences, some empty: no span runs
    across a sequence boundary, an I-X continues only an X span."""
    from spacy_treecrf.pipe import sequence_bio_spans
    rng = np.random.default_rng(3)
    labels = ["O", "B-X", "I-X", "B-Y", "I-Y", "B", "I", "X", "I-", "B-X-Z", "I-X-Z"]
    for _ in range(200):
        lengths = rng.integers(0, 7, size=int(rng.integers(1, 6)))
        ids = rng.integers(len(labels), size=int(lengths.sum()))
        seq_starts = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        got = sequence_bio_spans(ids, seq_starts, labels)
        want = [_bio_spans_loop([labels[k] for k in ids[a:b]]) for a, b in zip(seq_starts[:-1], seq_starts[1:])]
        assert got == want


def test_boosting_settings_live_in_the_booster_block_and_the_old_place_still_loads(tmp_path):
    nlp = spacy.blank("en")
    crf = nlp.add_pipe("treecrf", config={"booster": {"max_leaves": 7, "label_splits": "fallback"}})
    assert (crf.params.max_leaves, crf.params.label_splits, crf.params.shrinkage) == (7, "fallback", "auto")
    block = nlp.config["components"]["treecrf"]["booster"]
    assert block["@misc"] == "spacy_treecrf.booster.v1" and block["max_leaves"] == 7
    # what spaCy records (and init config writes) holds no key of the old place and no scheduler
    assert not set(nlp.config["components"]["treecrf"]) & {"max_leaves", "trim", "shared_trees", "scheduler"}
    assert "scheduler" not in block and "scheduler" not in nlp.config.to_str()
    # a config (or a saved pipeline) from before the block: applied, with a warning that says where they go
    old = spacy.blank("en")
    with pytest.warns(UserWarning, match=r"\['max_leaves', 'trim'\] now belong in \[components.treecrf.booster\]"):
        crf = old.add_pipe("treecrf", config={"max_leaves": 9, "trim": 0.1})
    assert (crf.params.max_leaves, crf.params.trim) == (9, 0.1)
    assert old.config["components"]["treecrf"]["max_leaves"] == 9  # a setting it was given stays in its config
    examples = ner_examples(old)
    old.initialize(lambda: examples)
    old.update(examples)
    old.to_disk(tmp_path / "old")
    with pytest.warns(UserWarning, match="now belong"):
        loaded = spacy.load(tmp_path / "old")
    assert loaded.get_pipe("treecrf").params.max_leaves == 9


def test_model_settings_a_load_time_config_cannot_change_are_warned_about(tmp_path):
    """The feature window and the kind of trees are part of a trained model: asked otherwise at load time, the
    model's are used, with W011 naming each (not silently); a plain load says nothing."""
    import warnings

    nlp, _ = trained_ner(rounds=2)
    crf = nlp.get_pipe("treecrf")
    nlp.to_disk(tmp_path / "ner")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spacy.load(tmp_path / "ner")
    window, shared = crf.featurizer.window, crf.params.shared_trees
    override = {"components": {"treecrf": {"features": {"window": window + 1},
                                           "booster": {"shared_trees": not shared}}}}
    with pytest.warns(UserWarning, match=rf"W011.*features.window = {window} \(configured: {window + 1}\), "
                                         rf"booster.shared_trees = {shared} \(configured: {not shared}\)"):
        loaded = spacy.load(tmp_path / "ner", config=override).get_pipe("treecrf")
    assert loaded.featurizer.window == window and loaded.params.shared_trees == shared


def test_settings_given_at_load_time_are_the_ones_used(tmp_path):
    """spacy.load(path, config=...) used to report the new settings in nlp.config while the component kept the
    model file's: decode, store_scores, n_threads, token_attr were silently ignored."""
    nlp, _ = trained_ner(rounds=3, store_scores=True, decode="viterbi")
    nlp.to_disk(tmp_path / "ner")
    override = {"components": {"treecrf": {"decode": "marginal", "store_scores": False, "constrain_bio": False,
                                           "booster": {"n_threads": 1, "max_leaves": 5}}}}
    loaded = spacy.load(tmp_path / "ner", config=override)
    crf = loaded.get_pipe("treecrf")
    assert (crf.cfg["decode"], crf.cfg["store_scores"], crf.cfg["constrain_bio"]) == ("marginal", False, False)
    assert (crf.params.n_threads, crf.params.max_leaves) == (1, 5)
    assert crf.allowed.all()  # no BIO mask: constrain_bio = false means what it says
    doc = loaded("Alice lives in Paris .")
    assert ("treecrf", "scores") not in doc.user_data
    # marginal decoding runs forward-backward, but the span probabilities are stored only with store_scores
    assert "treecrf" not in doc.spans
    # without overrides: what was saved
    again = spacy.load(tmp_path / "ner").get_pipe("treecrf")
    assert (again.cfg["decode"], again.cfg["store_scores"], again.params.max_leaves) == ("viterbi", True, 8)
    assert not again.allowed.all()


def test_a_token_attr_given_at_load_time_is_the_one_written(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"target": "token_attr", "token_attr": "stress_a", "booster": {"max_leaves": 4}})
    words = list("abba")
    examples = [Example(Doc(nlp.vocab, words=words), Doc(nlp.vocab, words=words))]
    for token, value in zip(examples[0].reference, "1001"):
        token._.set("stress_a", value)
    nlp.initialize(lambda: examples)
    nlp.update(examples)
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m", config={"components": {"treecrf": {"token_attr": "stress_b"}}})
    if not Token.has_extension("stress_b"):
        Token.set_extension("stress_b", default=None)
    doc = loaded(Doc(loaded.vocab, words=words))
    assert [t._.stress_b for t in doc] == list("1001") and all(t._.stress_a is None for t in doc)


def test_a_saved_pipeline_that_reads_a_token_extension_tags_text_in_a_new_process(tmp_path):
    """A pipeline trained on a corpus that put `_.chunk` on its tokens failed in a new process with E091 (no such
    extension) on nlp(text); loading registers the extensions its features read, unset values being missing."""
    if not Token.has_extension("chunk_t"):
        Token.set_extension("chunk_t", default=None)
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config={"booster": {"max_leaves": 4},
                                    "features": {"@misc": "spacy_treecrf.window_features.v1", "attrs": ["_.chunk_t"]}})
    examples = ner_examples(nlp)
    for eg in examples:
        for token in eg.predicted:
            token._.chunk_t = "NP" if token.is_title else "O"
    nlp.initialize(lambda: examples)
    for _ in range(3):
        nlp.update(examples)
    nlp.to_disk(tmp_path / "m")
    code = ("import spacy, sys; nlp = spacy.load(sys.argv[1]); "
            "print([(e.text, e.label_) for e in nlp('Alice lives in Paris .').ents])")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "m")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-1500:]
    assert "Alice" in out.stdout


def test_score_weights_that_no_component_gives_are_warned_about_at_initialize():
    """After `spacy init config` the weights are the factory's NER ones; with target pos nothing would weigh the
    tagger's pos_acc. With pos_acc weighted, or an NER component beside it, there is nothing to say."""
    import warnings

    def init_warnings(nlp, examples):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            nlp.initialize(lambda: examples)
        return [str(w.message) for w in caught if "W005" in str(w.message)]

    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config=component_config({"target": "pos", "max_leaves": 4}))
    examples = [Example.from_dict(Doc(nlp.vocab, words=["a", "dog"]), {"pos": ["DET", "NOUN"]})]
    messages = init_warnings(nlp, examples)
    assert len(messages) == 1 and "pos_acc" in messages[0]
    for key in ("ents_f", "ents_p", "ents_r"):  # every NER column of the log, not only the weighted one
        assert f"--training.score_weights.{key} null" in messages[0]
    nlp.config["training"]["score_weights"] = {"ents_f": None, "pos_acc": 1.0}
    assert init_warnings(nlp, examples) == []
    both = spacy.blank("en")
    both.add_pipe("treecrf", name="tagger", config=component_config({"target": "pos", "max_leaves": 4}))
    both.add_pipe("treecrf", name="ner", config=component_config({"max_leaves": 4}))
    tagged = [Example.from_dict(Doc(both.vocab, words=["a", "dog"]), {"pos": ["DET", "NOUN"], "entities": ["O", "U-X"]})]
    assert init_warnings(both, tagged) == []


def test_stored_token_scores_follow_their_tokens_through_retokenization():
    """Marginals are kept per token of the tokenization they were computed on: after merge_entities a merged
    token has none and every other token keeps its own (not its new index's); a split drops the split token's;
    a doc made from a span with copied user_data gives none to tokens that are not the scored ones."""
    nlp, _ = trained_ner(rounds=3, store_scores=True)
    doc = nlp("Alice flew to New York with Bob today .")
    before = {token.text: token._.treecrf_marginals for token in doc}
    assert all(before.values())
    spans = [span for span in doc.ents if len(span) > 1] or [doc[3:5]]
    merged_chars = {(span.start_char, len(span.text)) for span in spans}
    with doc.retokenize() as retokenizer:
        for span in spans:
            retokenizer.merge(span)
    assert any((token.idx, len(token)) in merged_chars for token in doc)
    for token in doc:
        merged = (token.idx, len(token)) in merged_chars
        assert token._.treecrf_marginals == (None if merged else before[token.text])
    doc = nlp("Alice flew to Rome today .")
    with doc.retokenize() as retokenizer:
        retokenizer.split(doc[1], ["fl", "ew"], heads=[(doc[1], 1), doc[0]])
    assert [token._.treecrf_marginals is None for token in doc] == [False, True, True, False, False, False, False]
    doc = nlp("Ann met Bob and Ann left .")
    copied = doc[4:6].as_doc(copy_user_data=True)  # "Ann left": token 0 is not the doc's token 0
    assert [token._.treecrf_marginals for token in copied] == [None, None]

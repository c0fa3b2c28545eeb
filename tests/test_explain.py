"""Explanations and readable rules: the leaves behind a potential add up to it, on real text (the bundled UD EWT
sample) and with missing values routed; rules and explanations read in words and never show a transition the
constraints forbid."""
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from spacy.training.converters import conllu_to_docs
from typer.testing import CliRunner

from conftest import component_config, make_nlp, ner_examples, paper_crf, train
from spacy_treecrf.cli import app
from spacy_treecrf.engine.predict_walk import walk_potentials
from spacy_treecrf.engine.trees import Rows
from spacy_treecrf.errors import Errors
from spacy_treecrf.features import readable_test
from test_estimator import toy_data

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "data"


def ewt(nlp, name):
    """The bundled UD EWT sample's sentences as Examples with gold tags (CC BY-SA 4.0, see its README)."""
    docs = conllu_to_docs((SAMPLE / name).read_text(encoding="utf8"), n_sents=1, no_print=True)
    return [Example(Doc(nlp.vocab, words=[t.text for t in doc]), doc) for doc in docs]


@pytest.fixture(scope="module", params=[True, False], ids=["shared", "per_label"])
def ewt_tagger(request):
    nlp = spacy.blank("en")
    nlp.add_pipe("treecrf", config=component_config({
        "target": "tag", "max_leaves": 16, "shrinkage": 1.0, "shared_trees": request.param, "l1": 0.05,
        "features": {"@misc": "spacy_treecrf.window_features.v1", "suffix": 2, "label_dictionary": True}}))
    nlp.config["training"]["score_weights"] = {"tag_acc": 1.0}
    examples = ewt(nlp, "ewt-sample-train.conllu")
    train(nlp, examples, rounds=4)
    return nlp, ewt(nlp, "ewt-sample-dev.conllu")


def test_contributions_add_up_to_every_potential_of_a_real_test_set(ewt_tagger):
    nlp, dev = ewt_tagger
    crf = nlp.get_pipe("treecrf")
    n = 0
    for eg in dev:
        doc = eg.predicted
        explained = crf.explain(doc)
        tags = [crf.labels[k] for k in crf.predict([doc])["ids"]]
        assert [e.label for e in explained] == tags
        assert [e.previous for e in explained] == [None] + tags[:-1]
        indptr, indices = crf._rows([doc])[:2]
        kernel = crf.ensemble.potentials(indptr, indices)  # tagging's block kernel (float32 sums)
        ids = crf.predict([doc])["ids"]
        for t, e in enumerate(explained):
            s, k = (0 if t == 0 else ids[t - 1] + 1), ids[t]
            assert sum(part.value for part in e.parts) == pytest.approx(e.potential, abs=1e-9)
            assert e.potential == pytest.approx(kernel[t, s, k], abs=1e-5)
            assert [p.tree for p in e.parts] == sorted(p.tree for p in e.parts)
            n += 1
    assert n > 300
    words = [readable_test(name) for name in crf.featurizer.feature_names()]
    rules = " ".join(part.rule for e in crf.explain(dev[0].predicted) for part in e.parts)
    assert any(w in rules for w in words) and "@" not in rules


def test_explain_given_labels_and_bad_input():
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=4)
    doc = nlp.make_doc("Alice lives in Paris .")
    gold = ["B-PER", "O", "O", "B-LOC", "O"]
    why_not = ["O", "O", "O", "O", "O"]
    assert [e.label for e in crf.explain(doc, gold)] == gold
    assert sum(e.potential for e in crf.explain(doc, gold)) > sum(e.potential for e in crf.explain(doc, why_not))
    forbidden = crf.explain(doc, ["O", "I-LOC", "O", "B-LOC", "O"])  # O -> I-LOC: the constraints forbid it
    assert forbidden[1].potential == -np.inf and forbidden[1].parts  # (what the trees add is still shown)
    assert all(np.isfinite(e.potential) for i, e in enumerate(forbidden) if i != 1)
    with pytest.raises(ValueError, match="5 labels"):
        crf.explain(doc, ["O"])
    with pytest.raises(ValueError, match="B-XYZ"):
        crf.explain(doc, ["B-XYZ", "O", "O", "O", "O"])
    with pytest.raises(TypeError, match="spaCy Doc"):
        crf.explain("Alice lives in Paris .")


def test_estimator_explains_routed_missing_values_exactly():
    X, y = toy_data(80)
    rng = np.random.default_rng(3)
    X = [[{key: (None if rng.random() < 0.3 else value) for key, value in position.items()} for position in seq]
         for seq in X]
    for shared in (True, False):
        model = paper_crf(n_rounds=4, max_leaves=8, shared_trees=shared).fit(X, y)
        for x in X[:10]:
            explained = model.explain(x)
            assert [e.label for e in explained] == model.predict([x])[0]
            indptr, indices, _, missing_rows = model._rows([x])
            phi = walk_potentials(np.arange(len(x), dtype=np.int64), Rows(indptr, indices),
                                  model.ensemble.forest(), missing_rows.index(), len(model.classes_) + 1,
                                  len(model.classes_))
            labels = [model.classes_.index(e.label) for e in explained]
            for t, e in enumerate(explained):
                s = 0 if t == 0 else labels[t - 1] + 1
                assert e.potential == phi[t, s, labels[t]]
                assert sum(p.value for p in e.parts) == pytest.approx(e.potential, abs=1e-9)
        routed = [p.rule for x in X[:10] for e in model.explain(x) for p in e.parts]
        assert any("(missing, routed here)" in rule for rule in routed) or not any(
            v is None for x in X[:10] for pos in x for v in pos.values())
    with pytest.raises(TypeError, match="one sequence"):
        model.explain({"w": "a"})
    with pytest.raises(ValueError, match="position 1"):
        model.explain(X[0][:2], [y[0][0], "no such label"])


def test_rules_never_show_a_forbidden_transition():
    nlp, crf = make_nlp(max_leaves=8)
    train(nlp, ner_examples(nlp), rounds=6)
    rules = crf.rules(top=1000, min_support=0)
    assert rules
    for label, rule, _, _ in rules:
        if label.startswith("I-"):  # BIO: I-X only after B-X or I-X
            assert "<start>" not in rule and ",O" not in rule and "{O" not in rule, rule
        assert "@" not in rule and "absent test" not in rule or "NOT " in rule


def test_readable_test_names():
    assert readable_test("w=Mr.@-1") == 'word[-1] = "Mr."'
    assert readable_test("s3=ing@+1") == 'suffix3[+1] = "ing"'
    assert readable_test("p2=Ba@0") == 'prefix2[0] = "Ba"'
    assert readable_test("sh=Xxxxx@0") == "shape[0] = Xxxxx"
    assert readable_test("re=Aa+@0") == "pattern[0] = Aa+"
    assert readable_test("f=is_title@0") == "is_title[0]"
    assert readable_test("a:tag_=NNP@-1") == 'tag_[-1] = "NNP"'
    assert readable_test("ld=B-PER@0") == "seen_as[0] = B-PER"
    assert readable_test("lex=CITY@+1") == "lexicon[+1] = CITY"
    assert readable_test("pad@+2") == "outside[+2]"
    assert readable_test("missing:s3=@-1") == "suffix3[-1] missing"
    assert readable_test("w=a@b@0") == 'word[0] = "a@b"'


def test_cli_explain(tmp_path):
    nlp, _ = make_nlp()
    train(nlp, ner_examples(nlp), rounds=4)
    nlp.to_disk(tmp_path / "model")
    runner = CliRunner()
    out = runner.invoke(app, ["explain", str(tmp_path / "model"), "Alice lives in Paris .", "--top", "2"])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert lines[0] == "== treecrf (ner)"
    assert lines[1].startswith("Alice") and "B-PER" in lines[1] and "after <start>" in lines[1]
    assert 'word[0] = "Alice"' in out.output or "seen_as" in out.output or "pattern" in out.output
    out = runner.invoke(app, ["explain", str(tmp_path / "model"), "Alice", "--component", "nope"])
    assert out.exit_code == 1 and Errors.E179.split("{")[0] in out.output


def test_explain_span():
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=4)
    doc = nlp("Bob visited New York today .")
    for ent in doc.ents:  # a predicted span: its tokens' explanations under the prediction
        assert crf.explain_span(ent) == crf.explain(doc)[ent.start:ent.end]
    other = doc.char_span(4, 11, "LOC")  # "visited": labelled as the span says, the rest as predicted
    assert [e.label for e in crf.explain_span(other)] == ["B-LOC"]
    for bad in (doc[2:2], doc[2:4]):  # an empty span; a span without a label
        with pytest.raises(ValueError, match=r"E216.*labelled Span of at least one token"):
            crf.explain_span(bad)
    tagger = make_nlp(target="tag")[1]
    with pytest.raises(ValueError, match="explain_span"):
        tagger.explain_span(other)

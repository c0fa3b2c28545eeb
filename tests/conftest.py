"""Shared helpers and fixtures: CSR rows of small dense problems, start masks, the grower and tree kernels called
the way the booster calls them, a tiny NER corpus and small trained components."""
import numpy as np
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from spacy_treecrf.engine.booster import PAPER_SETTINGS
from spacy_treecrf.engine.grow import grow_tree
from spacy_treecrf.engine.sparse import csc_index
from spacy_treecrf.engine.numeric import no_numeric
from spacy_treecrf.engine.trees import GrowSettings, Rows, Target, Tree, no_missing

TREE_KEYS = Tree._fields + ("pbuf", "pstart", "plen")


def dense_csr(X):
    """CSR rows (indptr int64, sorted indices int32) of a dense boolean feature matrix."""
    X = np.asarray(X, dtype=bool)
    indptr = np.concatenate([[0], np.cumsum(X.sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int32)  # row-major, so sorted within each row
    return indptr, indices


def ids_csr(rows, n):
    """CSR (indptr, sorted ids) of a list of id lists; n = number of rows."""
    assert len(rows) == n
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    indices = np.array([i for r in rows for i in sorted(r)], dtype=np.int32)
    return indptr, indices


def gain(gl, nl, g, n, lam):
    """The penalised squared-error gain of a split, written out (the reference the kernels are checked against)."""
    gr, nr = g - gl, n - nl
    return gl * gl / (nl + lam) + gr * gr / (nr + lam) - g * g / (n + lam)


def start_mask(seq_starts, T):
    is_start = np.zeros(T, dtype=bool)
    is_start[seq_starts[:-1][seq_starts[:-1] < seq_starts[1:]]] = True
    return is_start


def grow(indptr, indices, n_features, D, is_start, allowed_k, positions=None, max_leaves=4, lam=0.0, min_leaf=1.0,
         min_gain=0.0, feature_ok=None, states_last=False, missing=None, n_surrogates=0, kept_bytes=None,
         numeric=None):
    """grow_tree on plain arrays; D: T x S (one label's residuals) or T x S x d; ``missing``: a MissingRows (None:
    no routing); ``numeric``: the atoms' NumericIndex (None: binary rows); kept_bytes: GrowSettings.kept_bytes (None: its default). Returns a dict of the Tree's fields and
    its segments (pbuf, pstart, plen)."""
    T = len(D)
    D = np.asarray(D, dtype=np.float64)
    D = D.reshape(D.shape + (1,)) if D.ndim == 2 else D
    positions = np.arange(T, dtype=np.int64) if positions is None else np.asarray(positions, dtype=np.int64)
    ok = np.ones(n_features, dtype=np.bool_) if feature_ok is None else np.asarray(feature_ok, dtype=np.bool_)
    target = Target(np.ascontiguousarray(D, dtype=np.float64), np.asarray(is_start, dtype=np.bool_),
                    np.asarray(allowed_k, dtype=np.bool_))
    settings = GrowSettings(int(max_leaves), float(lam), float(min_leaf), float(min_gain), bool(states_last),
                            int(n_surrogates))
    settings = settings if kept_bytes is None else settings._replace(kept_bytes=int(kept_bytes))
    tree, segments = grow_tree(Rows(indptr, indices), csc_index(indptr, indices, n_features), target, positions,
                               settings, ok, no_missing() if missing is None else missing.index(),
                               no_numeric() if numeric is None else numeric)
    return dict(zip(TREE_KEYS, tuple(tree) + tuple(segments)))


def as_tree(tr) -> Tree:
    """The Tree of a dict with its fields (counts 1 and surrogate slots empty where the dict has none)."""
    n = len(tr["kind"])
    slots = {"count": np.ones(n), "surr_feature": np.zeros((n, 0), dtype=np.int32),
             "surr_same": np.zeros((n, 0), dtype=np.bool_), "vector": np.zeros((n, 0))}
    return Tree(*(np.asarray(tr[name]) if name in tr else slots[name] for name in Tree._fields))


def dense_vectors(forest):
    """An ensemble's leaf vectors (trees.LeafVectors, sparse) as nodes x K, K the largest label + 1 or given."""
    v = forest.vectors
    K = int(v.label.max()) + 1 if len(v.label) else 0
    out = np.zeros((len(forest.nodes.kind), K))
    nodes = np.repeat(np.arange(len(forest.nodes.kind)), np.diff(v.ptr))
    out[nodes, v.label] = v.value
    return out


# The engine, featurizer and component tests check the paper's model: a tree per label over every feature column,
# label splits wherever they gain, every word a test, no label dictionary. Those are not the defaults (chosen on dev
# data across tasks: benchmarks/results/defaults_candidates.md), so these tests name them, and a change of the
# defaults does not change what they check; the defaults have tests of their own (test_defaults.py).
PAPER = {"max_leaves": 100, **PAPER_SETTINGS}
PLAIN_FEATURES = {"min_freq": 1, "suffix": 3, "label_dictionary": False}


def paper_crf(**settings):
    from spacy_treecrf import TreeCRF

    return TreeCRF(**{**PAPER, **settings})


def paper_params(**settings):
    from spacy_treecrf.engine.booster import BoostParams

    return BoostParams(**{**PAPER, **settings})


def plain_featurizer(**settings):
    from spacy_treecrf.features import WindowFeaturizer

    return WindowFeaturizer(**{**PLAIN_FEATURES, **settings})


def component_config(config: dict) -> dict:
    """A treecrf component's config with the paper's settings (PAPER, PLAIN_FEATURES) and stored confidences
    (which most tests read) unless ``config`` says otherwise, its boosting settings in the [booster] block where
    they belong."""
    from spacy_treecrf.engine.booster import BoostParams

    booster = {key: value for key, value in config.items() if key in BoostParams.__dataclass_fields__}
    rest = {key: value for key, value in config.items() if key not in booster}
    features = rest.get("features", {})
    if features.get("@misc", "spacy_treecrf.window_features.v1") == "spacy_treecrf.window_features.v1":
        features = {"@misc": "spacy_treecrf.window_features.v1", **PLAIN_FEATURES, **features}
    return {"store_scores": True, **rest, "booster": {**PAPER, **rest.get("booster", {}), **booster},
            "features": features}


# ---- the component on tiny data

NER_DATA = [
    ("Alice lives in Paris .", [(0, 5, "PER"), (15, 20, "LOC")]),
    ("Bob visited New York today .", [(0, 3, "PER"), (12, 20, "LOC")]),
    ("Paris is big .", [(0, 5, "LOC")]),
    ("Carol met Alice in Rome", [(0, 5, "PER"), (10, 15, "PER"), (19, 23, "LOC")]),
    ("We flew to New York with Bob .", [(11, 19, "LOC"), (25, 28, "PER")]),
]
WINDOW = {"@misc": "spacy_treecrf.window_features.v1"}
SMALL = {"max_leaves": 6, "shrinkage": 1.0}
LANG = "xx"  # spaCy's multi-language tokenizer: the same splits here, and three times faster to build


def make_nlp(**config):
    nlp = spacy.blank(LANG)
    crf = nlp.add_pipe("treecrf", config=component_config({**SMALL, **config}))
    return nlp, crf


def ner_examples(nlp, data=NER_DATA):
    """Examples of the tiny NER corpus (or of ``data``: (text, entity offsets) pairs)."""
    return [Example.from_dict(nlp.make_doc(text), {"entities": ents}) for text, ents in data]


def tag_examples(nlp, sentences):
    """sentences: lists of (word, tag); an empty tag is missing gold."""
    return [Example.from_dict(Doc(nlp.vocab, words=[w for w, _ in s]), {"tags": [t for _, t in s]})
            for s in sentences]


def train(nlp, examples, rounds=4, **init):
    if init:
        nlp.get_pipe("treecrf").initialize(lambda: examples, nlp=nlp, **init)
    else:
        nlp.initialize(lambda: examples)
    losses = [nlp.update(examples, losses={})["treecrf"] for _ in range(rounds)]
    return losses


def marginals(doc, name="treecrf"):
    labels, probs = doc.user_data[("treecrf", "scores")][name][:2]
    return labels, probs


def assert_normalised(doc, tol=1e-4):
    _, probs = marginals(doc)
    assert probs.shape[0] == len(doc)
    assert np.all(np.isfinite(probs))
    assert np.all(probs >= -1e-6)
    if len(doc):
        assert np.abs(probs.sum(axis=1) - 1.0).max() < tol


def raw_labels(crf, docs):
    scores = crf.predict(docs)
    labels = crf.labels
    starts = scores["seq_starts"]
    return ([[labels[k] for k in scores["ids"][a:b]] for a, b in zip(starts[:-1], starts[1:])],
            scores["gamma"])


def assert_valid_bio(tags):
    prev = "O"
    for i, tag in enumerate(tags):
        assert tag == "O" or tag[:2] in ("B-", "I-"), tags
        if tag.startswith("I-"):
            assert i > 0, f"I- at the start: {tags}"
            assert prev[2:] == tag[2:] and prev != "O", f"invalid transition {prev} -> {tag}: {tags}"
        prev = tag


@pytest.fixture(scope="module")
def ner_model():
    nlp, crf = make_nlp()
    train(nlp, ner_examples(nlp), rounds=8)
    return nlp, crf.to_bytes()


def fresh_component(target="ner", **config):
    return spacy.blank(LANG).add_pipe("treecrf", config=component_config({"target": target, **config}))


@pytest.fixture(scope="module")
def sharp_model():
    """A small model with very large potentials, the hardest case for overflow: trained, then every leaf value
    multiplied by 100 (as a long-trained, unshrunk model would have)."""
    nlp, crf = make_nlp(max_leaves=4, shrinkage=0.0)
    train(nlp, ner_examples(nlp), rounds=4)
    crf.ensemble.arrays()
    crf.ensemble.nodes = crf.ensemble.nodes._replace(value=crf.ensemble.nodes.value * 100.0)
    phi = crf.ensemble.potentials(*crf.featurizer([nlp.make_doc("Alice lives in Paris .")])[:2])
    assert np.abs(phi).max() > 200  # exp() of these overflows float32 without the per-position scaling
    return nlp

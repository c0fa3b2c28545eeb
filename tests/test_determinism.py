"""Determinism and concurrent use: the same seed gives the same bytes with one or two threads, in one process
or across processes, and predicting from two threads equals predicting in turn."""
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from spacy.tokens import Doc

from conftest import fresh_component, marginals
import spacy_treecrf.pipe  # noqa: F401  (registers the factory)


DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, sys
    import numpy as np, spacy
    from spacy.tokens import Doc
    from spacy.training import Example
    import spacy_treecrf.pipe

    def model_bytes(seed, threads):
        nlp = spacy.blank("xx")
        crf = nlp.add_pipe("treecrf", config={"target": "tag", "booster": {
            "max_leaves": 6, "shrinkage": 1.0, "subsample": 0.7, "random_state": seed, "n_threads": threads}})
        rng = np.random.default_rng(1)
        words = ["w%d" % i for i in range(40)] + ["Ünï", "東京", "😀"]
        examples = []
        for _ in range(1100):  # > 20,000 positions: the threaded kernels split the work
            ws = [words[i] for i in rng.integers(0, len(words), 20)]
            ref = Doc(nlp.vocab, words=ws, tags=["T%d" % (len(w) % 3) for w in ws])
            examples.append(Example(Doc(nlp.vocab, words=ws), ref))
        nlp.initialize(lambda: examples)
        for _ in range(2):
            nlp.update(examples)
        return crf.to_bytes()

    if __name__ == "__main__":
        print(hashlib.sha256(model_bytes(int(sys.argv[1]), int(sys.argv[2]))).hexdigest())
""")


@pytest.fixture(scope="module")
def determinism(tmp_path_factory):
    """(script path, model_bytes function, the bytes of seed 0 with two threads)."""
    path = tmp_path_factory.mktemp("det") / "det_model.py"
    path.write_text(DETERMINISM_SCRIPT, encoding="utf8")
    sys.path.insert(0, str(path.parent))
    try:
        import det_model
    finally:
        sys.path.remove(str(path.parent))
    return path, det_model.model_bytes, det_model.model_bytes(0, 2)


def _trees(data):
    return fresh_component("tag").from_bytes(data).ensemble.arrays()


def test_same_seed_same_bytes_in_process_with_two_threads(determinism):
    _, model_bytes, reference = determinism
    assert model_bytes(0, 2) == reference
    # the thread count is a setting stored in the model; the trees themselves do not depend on it
    one, two = _trees(model_bytes(0, 1)), _trees(reference)
    for name in one:
        np.testing.assert_array_equal(one[name], two[name])
    # subsample < 1: another seed draws other positions, so other trees (not just another stored seed)
    other = _trees(model_bytes(1, 2))
    assert any(other[name].shape != two[name].shape or not np.array_equal(other[name], two[name])
               for name in ("feature", "value"))


def test_same_seed_same_bytes_across_processes(determinism):
    import hashlib
    path, _, reference = determinism
    procs = [subprocess.Popen([sys.executable, str(path), "0", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert [out.strip() for out, _ in outs] == [hashlib.sha256(reference).hexdigest()] * 2

def test_predicting_from_two_threads_equals_sequential(sharp_model):
    nlp = sharp_model
    rng = np.random.default_rng(0)
    vocab = ["Alice", "lives", "in", "Paris", ".", "Bob", "Rome", "New", "York", "met", "東京", "😀"]
    texts = [[[vocab[i] for i in rng.integers(0, len(vocab), int(n))] for n in rng.integers(1, 3000, 6)]
             for _ in range(2)]
    texts[0].append(["Alice"] * 6000)  # large enough for the chunked, GIL-free kernels

    def run(words_list):
        docs = [nlp(Doc(nlp.vocab, words=w)) for w in words_list]
        return [([(e.start, e.end, e.label_) for e in d.ents], marginals(d)[1], d.spans["treecrf"].attrs["scores"])
                for d in docs]

    sequential = [run(t) for t in texts]
    for _ in range(3):
        results = [None, None]
        barrier = threading.Barrier(2)

        def work(i):
            barrier.wait()
            results[i] = run(texts[i])

        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for got, want in zip(results, sequential):
            assert len(got) == len(want)
            for (ents_a, probs_a, scores_a), (ents_b, probs_b, scores_b) in zip(got, want):
                assert ents_a == ents_b
                np.testing.assert_array_equal(scores_a, scores_b)
                np.testing.assert_array_equal(probs_a, probs_b)

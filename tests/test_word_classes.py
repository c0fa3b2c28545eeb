"""Brown clustering (word_classes.py) against a brute-force reference that recomputes the average mutual
information of every candidate merge from scratch, and its files."""
import numpy as np
import pytest

from spacy_treecrf import word_classes
from spacy_treecrf.word_classes import (brown_clusters, cluster_tests, count_bigrams, read_clusters, read_text,
                                        write_clusters)


def random_text(seed, n_words=11, n_lines=60):
    """Lines drawn from a random bigram model over n_words words of Zipf-like frequencies (no exact ties)."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n_words)]
    start = rng.dirichlet(np.ones(n_words) * 0.5)
    follow = rng.dirichlet(np.ones(n_words) * 0.3, size=n_words)
    lines = []
    for _ in range(n_lines):
        w = rng.choice(n_words, p=start)
        line = [words[w]]
        for _ in range(rng.integers(2, 9)):
            w = rng.choice(n_words, p=follow[w])
            line.append(words[w])
        lines.append(line)
    return lines


def reference_brown(lines, n_clusters, min_count):
    """The merges Brown clustering makes, each chosen by recomputing AMI over the clusters for every pair: slots
    as word_classes keeps them (a new word takes the first free slot, a merge keeps the lower slot). Returns
    (each word's phase-1 slot, the phase-2 merges as node pairs, their losses)."""
    counts = {}
    for line in lines:
        for w in line:
            counts[w] = counts.get(w, 0) + 1
    words = [w for w, n in sorted(counts.items(), key=lambda item: -item[1]) if n >= min_count]
    ids = {w: i for i, w in enumerate(words)}
    n_tokens = sum(counts.values())
    n_bigrams = sum(max(len(line) - 1, 0) for line in lines)
    share = np.zeros((len(words), len(words)))
    for line in lines:
        for a, b in zip(line, line[1:]):
            if a in ids and b in ids:
                share[ids[a], ids[b]] += 1.0 / n_bigrams
    unigram = np.array([counts[w] for w in words]) / n_tokens

    def ami(slots):
        total = 0.0
        for c in slots.values():
            for d in slots.values():
                p = share[np.ix_(c, d)].sum()
                if p > 0:
                    total += p * np.log(p / (unigram[c].sum() * unigram[d].sum()))
        return total

    def best(slots):
        before, found = ami(slots), None
        keys = sorted(slots)
        for x, a in enumerate(keys):
            for b in keys[x + 1:]:
                merged = {k: v for k, v in slots.items() if k != b}
                merged[a] = slots[a] + slots[b]
                loss = before - ami(merged)
                if found is None or loss < found[2] - 1e-12:
                    found = (a, b, loss)
        return found

    C1 = min(n_clusters, len(words)) + 1
    slots = {}
    for w in range(len(words)):
        free = min(set(range(C1)) - set(slots))
        slots[free] = [w]
        if w >= C1 - 1:
            a, b, _ = best(slots)
            slots[a] = slots[a] + slots.pop(b)
    leaf = np.zeros(len(words), dtype=np.int64)
    for s, members in slots.items():
        leaf[members] = s
    node = {s: s for s in slots}
    merges, losses = [], []
    for m in range(C1 - 2):
        a, b, loss = best(slots)
        merges.append((node[a], node[b]))
        losses.append(loss)
        slots[a] = slots[a] + slots.pop(b)
        node[a] = C1 + m
    return leaf, np.array(merges, dtype=np.int64).reshape(-1, 2), np.array(losses)


@pytest.mark.parametrize("seed,n_clusters,min_count", [(0, 3, 1), (1, 4, 1), (2, 3, 2), (3, 5, 1), (4, 20, 1)])
def test_incremental_losses_choose_the_merges_a_recomputed_ami_chooses(seed, n_clusters, min_count):
    lines = random_text(seed)
    leaf, merges, losses = reference_brown(lines, n_clusters, min_count)
    _, bigrams = count_bigrams(lines, min_count)
    C1 = min(n_clusters, len(bigrams.unigram)) + 1
    got_merges = np.zeros((max(C1 - 2, 0), 2), dtype=np.int64)
    got_leaf, got_losses = word_classes._cluster(bigrams, n_clusters, got_merges)
    np.testing.assert_array_equal(got_leaf, leaf)
    np.testing.assert_array_equal(got_merges, merges)
    np.testing.assert_allclose(got_losses, losses, rtol=1e-9, atol=1e-12)
    assert (losses >= -1e-12).all()  # merging never gains mutual information


def test_bit_strings_follow_the_merge_tree_and_words_that_share_contexts_share_a_cluster():
    # two word classes that occur in the same frames ("the X runs" / "a X sleeps"): nouns and verbs
    nouns, verbs = ["dog", "cat", "cow", "fox"], ["runs", "sleeps", "eats", "sits"]
    rng = np.random.default_rng(0)
    lines = [[rng.choice(["the", "a"]), rng.choice(nouns), rng.choice(verbs), "."] for _ in range(400)]
    clusters = brown_clusters(lines, n_clusters=4, min_count=1)
    assert set(clusters) == {"the", "a", ".", *nouns, *verbs}
    assert len({clusters[w] for w in nouns}) == 1 and len({clusters[w] for w in verbs}) == 1
    assert clusters["dog"] != clusters["runs"]
    bits = sorted(set(clusters.values()))
    assert all(set(b) <= {"0", "1"} for b in bits)
    assert not any(a != b and b.startswith(a) for a in bits for b in bits)  # leaves of one binary tree


def test_words_below_min_count_are_left_out_and_a_single_word_gets_a_bit_string():
    lines = [["a", "b", "a"], ["a", "c"]]
    assert set(brown_clusters(lines, n_clusters=2, min_count=2)) == {"a"}
    assert brown_clusters([["solo"]], min_count=1) == {"solo": "0"}
    assert brown_clusters([], min_count=1) == {}


@pytest.mark.parametrize("name,value", [("n_clusters", 1), ("n_clusters", 2.5), ("min_count", 0),
                                        ("min_count", True)])
def test_bad_settings_name_themselves(name, value):
    with pytest.raises(ValueError, match=name):
        brown_clusters([["a", "b"]], **{name: value})


def test_cluster_tests_are_the_prefixes_up_to_the_whole_string():
    assert cluster_tests("0110") == ["bc4=0110"]
    assert cluster_tests("01101") == ["bc4=0110", "bc6=01101"]
    assert cluster_tests("0" * 25) == ["bc4=0000", "bc6=000000", "bc10=" + "0" * 10, "bc20=" + "0" * 20]
    assert cluster_tests("1") == ["bc4=1"]


def test_clusters_file_round_trip_and_errors_name_file_and_line(tmp_path):
    clusters = {"dog": "0110", "cat": "0110", "runs": "10"}
    path = tmp_path / "paths"
    write_clusters(clusters, path)
    assert read_clusters(path) == clusters
    (tmp_path / "liang").write_text("0110\tdog\t12\n\n10\truns\t3\n", encoding="utf8")
    assert read_clusters(tmp_path / "liang") == {"dog": "0110", "runs": "10"}
    (tmp_path / "bad").write_text("0110\tdog\n01x\tcat\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"bad, line 2"):
        read_clusters(tmp_path / "bad")
    (tmp_path / "text").write_text("The dog runs .\n  a  cat\n", encoding="utf8")
    assert read_text(tmp_path / "text") == [["The", "dog", "runs", "."], ["a", "cat"]]

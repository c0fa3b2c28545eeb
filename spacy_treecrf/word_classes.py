"""Word classes learned from raw text: Brown clustering (Brown et al. 1992, in the form of Liang 2005, section
3.2), for the features' ``clusters`` tests.

Why: a tree can give a rare word its own label only by splitting on that word's identity, which it rarely does;
a word class shared with frequent words that occur in the same contexts is one test for all of them, and it is
learned from text without labels, as much of it as a user has. The hierarchy gives every word a bit string whose
prefixes are classes at several grains (Ratinov & Roth 2009 and Turian et al. 2010 take prefixes of 4, 6, 10 and
20 bits as features).

The algorithm keeps at most C + 1 clusters (the window): the C most frequent words start as one cluster each;
each further word, in order of frequency, joins as a cluster of its own, and the two clusters whose merge loses
the least average mutual information (AMI) between adjacent clusters are merged. After the last word the C
clusters are merged down to one, and that merge tree gives each cluster its bit string (a merge's first cluster
0, its second 1). Words seen fewer than ``min_count`` times are left out, as are the bigrams they take part in.

Arrays (ClusterState), over the slots 0..C of the window (a slot holds one cluster, or none):
- ``P[i, j]``: the share of the corpus's bigrams (adjacent tokens within a line) whose first word is in cluster i
  and second in cluster j; ``p1[i]``: the share of the tokens in cluster i (both of AMI's marginals, as in
  Liang's implementation);
- ``Q[i, j]``: P[i, j] log(P[i, j] / (p1[i] p1[j])), AMI = the sum of Q over the clusters present;
- ``L[i, j]`` (i < j): the AMI a merge of i and j would lose. Computed afresh it costs O(C) a pair, so it is
  kept up to date instead: merging a and b changes L[i, j] of another pair only through the terms of a and b,
  which are replaced by those of the merged cluster (``_pair_terms``), O(1) a pair; adding a cluster adds its
  terms. A step is O(C^2), a corpus O(V C^2) for V words.
"""
from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple, Sequence, Tuple

import numpy as np
from numba import njit

from .errors import Errors

DEFAULT_CLUSTERS = 256
DEFAULT_MIN_COUNT = 2
PREFIXES = (4, 6, 10, 20)  # the bit-string prefixes the features test


class ClusterState(NamedTuple):
    """The window's slots (module docstring): P, p1, Q and L as described there; ``active[i]``: slot i holds a
    cluster; ``node[i]``: its node in the merge tree (phase 2), -1 before."""
    P: np.ndarray
    p1: np.ndarray
    Q: np.ndarray
    L: np.ndarray
    active: np.ndarray
    node: np.ndarray


class Bigrams(NamedTuple):
    """Word bigram counts by word id (words in order of frequency): ``right_ptr`` / ``right_word`` /
    ``right_share`` (CSR: the words that follow word w and the share of the corpus's bigrams each pair makes),
    the same for the words that precede it (``left_*``), and each word's share of the tokens (``unigram``)."""
    right_ptr: np.ndarray
    right_word: np.ndarray
    right_share: np.ndarray
    left_ptr: np.ndarray
    left_word: np.ndarray
    left_share: np.ndarray
    unigram: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _q(p, pa, pb):
    return p * np.log(p / (pa * pb)) if p > 0.0 else 0.0


@njit(cache=True, nogil=True)
def _merge_loss(st, i, j):
    """L[i, j] afresh: the AMI terms of i and j minus those of their merge (O(C))."""
    P, p1, Q = st.P, st.p1, st.Q
    pm = p1[i] + p1[j]
    loss = Q[i, i] + Q[j, j] + Q[i, j] + Q[j, i] - _q(P[i, i] + P[i, j] + P[j, i] + P[j, j], pm, pm)
    for k in range(P.shape[0]):
        if st.active[k] and k != i and k != j:
            loss += _pair_terms(st, i, j, Q[i, k] + Q[k, i] + Q[j, k] + Q[k, j], P[i, k] + P[j, k],
                                P[k, i] + P[k, j], p1[k])
    return loss


@njit(cache=True, nogil=True, inline="always")
def _pair_terms(st, i, j, q4, into, out_of, pk):
    """What a cluster k adds to L[i, j]: its four terms with i and with j (their sum ``q4``) less its two with i
    and j merged, from k's bigram shares with them (``into``: P[i, k] + P[j, k]; ``out_of``: P[k, i] + P[k, j];
    as they stand, or as a merge makes k) and its share pk."""
    pm = st.p1[i] + st.p1[j]
    return q4 - _q(into, pm, pk) - _q(out_of, pk, pm)


@njit(cache=True, nogil=True)
def _set_q(st, s):
    """Q's row and column of slot s from P (zero where the other slot holds no cluster)."""
    st.Q[s, :] = 0.0
    st.Q[:, s] = 0.0
    for k in range(st.P.shape[0]):
        if st.active[k]:
            st.Q[s, k] = _q(st.P[s, k], st.p1[s], st.p1[k])
            st.Q[k, s] = _q(st.P[k, s], st.p1[k], st.p1[s])


@njit(cache=True, nogil=True)
def _refresh_losses(st, s):
    """L of every pair with slot s, afresh."""
    for k in range(st.P.shape[0]):
        if st.active[k] and k != s:
            st.L[min(s, k), max(s, k)] = _merge_loss(st, min(s, k), max(s, k))


@njit(cache=True, nogil=True)
def _add_word(st, s, w, slot_of, bigrams):
    """Word w (not yet clustered) as a new cluster in the free slot s: its bigram shares with the clusters there
    are, the new terms it adds to every other pair's L, and its own pairs' L."""
    slot_of[w] = s
    st.P[s, :] = 0.0
    st.P[:, s] = 0.0
    for e in range(bigrams.right_ptr[w], bigrams.right_ptr[w + 1]):
        t = slot_of[bigrams.right_word[e]]
        if t >= 0:
            st.P[s, t] += bigrams.right_share[e]
    for e in range(bigrams.left_ptr[w], bigrams.left_ptr[w + 1]):
        t = slot_of[bigrams.left_word[e]]
        if t >= 0 and bigrams.left_word[e] != w:  # (w w is on both lists)
            st.P[t, s] += bigrams.left_share[e]
    st.p1[s] = bigrams.unigram[w]
    st.active[s] = True
    _set_q(st, s)
    C1 = st.P.shape[0]
    P, Q = st.P, st.Q
    for i in range(C1):
        if not st.active[i] or i == s:
            continue
        for j in range(i + 1, C1):
            if st.active[j] and j != s:
                st.L[i, j] += _pair_terms(st, i, j, Q[i, s] + Q[s, i] + Q[j, s] + Q[s, j], P[i, s] + P[j, s],
                                          P[s, i] + P[s, j], st.p1[s])
    _refresh_losses(st, s)


@njit(cache=True, nogil=True)
def _best_pair(st):
    """The pair of present clusters with the least loss (the first such pair, in slot order)."""
    C1 = st.P.shape[0]
    best, bi, bj = np.inf, -1, -1
    for i in range(C1):
        if st.active[i]:
            for j in range(i + 1, C1):
                if st.active[j] and st.L[i, j] < best:
                    best, bi, bj = st.L[i, j], i, j
    return bi, bj, best


@njit(cache=True, nogil=True)
def _merge(st, a, b, slot_of):
    """Merge cluster b into a (a < b): every other pair's L swaps the terms of a and b for the merged cluster's,
    then a's shares, Q and pairs are made afresh; b's slot is freed and its words move to a."""
    P, p1, Q = st.P, st.p1, st.Q
    C1 = P.shape[0]
    row = P[a, :] + P[b, :]  # the merged cluster's shares, as the first and as the second of a bigram
    col = P[:, a] + P[:, b]
    pm = p1[a] + p1[b]
    q_in = np.zeros(C1)  # per cluster k, its terms with the merged one: q(k, merged) + q(merged, k)
    for k in range(C1):
        if st.active[k]:
            q_in[k] = _q(col[k], p1[k], pm) + _q(row[k], pm, p1[k])
    for i in range(C1):
        if not st.active[i] or i == a or i == b:
            continue
        for j in range(i + 1, C1):
            if not st.active[j] or j == a or j == b:
                continue
            st.L[i, j] += (_pair_terms(st, i, j, q_in[i] + q_in[j], col[i] + col[j], row[i] + row[j], pm)
                           - _pair_terms(st, i, j, Q[i, a] + Q[a, i] + Q[j, a] + Q[a, j], P[i, a] + P[j, a],
                                         P[a, i] + P[a, j], p1[a])
                           - _pair_terms(st, i, j, Q[i, b] + Q[b, i] + Q[j, b] + Q[b, j], P[i, b] + P[j, b],
                                         P[b, i] + P[b, j], p1[b]))
    self_share = P[a, a] + P[a, b] + P[b, a] + P[b, b]
    P[a, :] = row
    P[:, a] = col
    P[a, a] = self_share
    p1[a] = pm
    st.active[b] = False
    P[b, :] = 0.0
    P[:, b] = 0.0
    p1[b] = 0.0
    for w in range(slot_of.shape[0]):
        if slot_of[w] == b:
            slot_of[w] = a
    _set_q(st, a)
    _refresh_losses(st, a)


@njit(cache=True, nogil=True)
def _cluster(bigrams, n_clusters, merges):
    """Both phases (module docstring). Returns each word's slot at the end of phase 1 (its cluster, < C + 1), and
    fills ``merges`` (C - 1 rows of the merge tree's nodes: first child, second child; nodes 0..C1-1 are the
    slots' phase-1 clusters, node C1 + m the m-th merge) and the phase-2 merges' losses (returned)."""
    V = bigrams.unigram.shape[0]
    C1 = min(n_clusters, V) + 1
    st = ClusterState(np.zeros((C1, C1)), np.zeros(C1), np.zeros((C1, C1)), np.zeros((C1, C1)),
                      np.zeros(C1, dtype=np.bool_), np.arange(C1))
    slot_of = np.full(V, -1, dtype=np.int64)
    for w in range(V):
        if w < C1 - 1:
            _add_word(st, w, w, slot_of, bigrams)
            continue
        free = 0
        while st.active[free]:
            free += 1
        _add_word(st, free, w, slot_of, bigrams)
        a, b, _ = _best_pair(st)
        _merge(st, a, b, slot_of)
    leaf_of = slot_of.copy()  # (phase 2 moves the words along with their clusters)
    losses = np.zeros(max(C1 - 2, 0))
    for m in range(C1 - 2):
        a, b, loss = _best_pair(st)
        merges[m, 0] = st.node[a]
        merges[m, 1] = st.node[b]
        losses[m] = loss
        _merge(st, a, b, slot_of)
        st.node[a] = C1 + m
    return leaf_of, losses


def count_bigrams(lines: Iterable[Sequence[str]], min_count: int = DEFAULT_MIN_COUNT
                  ) -> Tuple[List[str], Bigrams]:
    """The words seen at least ``min_count`` times in ``lines`` (token lists), most frequent first (ties: first
    seen first), and their Bigrams (pairs of adjacent tokens within a line, both such words)."""
    counts: Dict[str, int] = {}
    kept_lines = []
    for line in lines:
        tokens = list(line)
        kept_lines.append(tokens)
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
    words = [w for w, n in sorted(counts.items(), key=lambda item: -item[1]) if n >= min_count]
    ids = {w: i for i, w in enumerate(words)}
    n_tokens = sum(counts.values())
    pairs: Dict[Tuple[int, int], int] = {}
    n_bigrams = 0
    for tokens in kept_lines:
        n_bigrams += max(len(tokens) - 1, 0)
        for first, second in zip(tokens, tokens[1:]):
            a, b = ids.get(first), ids.get(second)
            if a is not None and b is not None:
                pairs[a, b] = pairs.get((a, b), 0) + 1
    V = len(words)
    pair_ids = np.array(list(pairs), dtype=np.int64).reshape(-1, 2)
    shares = np.array(list(pairs.values()), dtype=np.float64) / max(n_bigrams, 1)

    def csr(by, other):
        order = np.lexsort((pair_ids[:, other], pair_ids[:, by]))
        ptr = np.zeros(V + 1, dtype=np.int64)
        np.cumsum(np.bincount(pair_ids[:, by], minlength=V), out=ptr[1:])
        return ptr, pair_ids[order, other].copy(), shares[order].copy()
    unigram = np.array([counts[w] for w in words], dtype=np.float64) / max(n_tokens, 1)
    return words, Bigrams(*csr(0, 1), *csr(1, 0), unigram)


def brown_clusters(lines: Iterable[Sequence[str]], n_clusters: int = DEFAULT_CLUSTERS,
                   min_count: int = DEFAULT_MIN_COUNT) -> Dict[str, str]:
    """Each word seen at least ``min_count`` times in ``lines`` (token lists, e.g. a text's lines split on
    whitespace) -> its cluster's bit string, from Brown clustering with a window of ``n_clusters`` clusters."""
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or n_clusters < 2:
        raise ValueError(Errors.E235.format(name="n_clusters", value=n_clusters, want="an integer >= 2"))
    if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
        raise ValueError(Errors.E235.format(name="min_count", value=min_count, want="an integer >= 1"))
    words, bigrams = count_bigrams(lines, min_count)
    if not words:
        return {}
    C1 = min(n_clusters, len(words)) + 1
    merges = np.zeros((max(C1 - 2, 0), 2), dtype=np.int64)
    slot_of, _ = _cluster(bigrams, n_clusters, merges)
    return dict(zip(words, bit_strings(slot_of, merges, C1)))


def bit_strings(slot_of: np.ndarray, merges: np.ndarray, n_slots: int) -> List[str]:
    """Each word's bit string: the path from the merge tree's root to its cluster's node (first child 0, second
    1); the word of a tree of one cluster gets "0"."""
    parent: Dict[int, Tuple[int, str]] = {}
    for m, (first, second) in enumerate(merges.tolist()):
        parent[first] = (n_slots + m, "0")
        parent[second] = (n_slots + m, "1")
    paths: Dict[int, str] = {}

    def path(node: int) -> str:
        if node not in paths:
            up = parent.get(node)
            paths[node] = path(up[0]) + up[1] if up else ""
        return paths[node]
    return [path(s) or "0" for s in slot_of.tolist()]


def read_clusters(path) -> Dict[str, str]:
    """A clusters file (Liang's ``wcluster`` output, as most published Brown clusters come): one word a line,
    ``BITS<tab>WORD[<tab>COUNT]``. A line without a tab, or bits that are not 0s and 1s, is an error naming the
    file and line."""
    clusters: Dict[str, str] = {}
    for n, line in enumerate(_lines(path, "clusters file"), 1):
        if line.strip():
            parts = line.split("\t")
            if len(parts) < 2 or not parts[0] or set(parts[0]) - {"0", "1"} or not parts[1]:
                raise ValueError(Errors.E236.format(path=path, line=n, text=line[:80]))
            clusters.setdefault(parts[1], parts[0])
    return clusters


def _lines(path, what: str) -> List[str]:
    """A UTF-8 file's lines; a clear error naming it where it is missing or not UTF-8."""
    if not Path(path).is_file():
        raise ValueError(Errors.E240.format(what=what, path=path))
    try:
        return Path(path).read_text(encoding="utf8").splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(Errors.E241.format(path=path, err=err)) from None


def write_clusters(clusters: Dict[str, str], path) -> None:
    """``clusters`` (word -> bits) as a clusters file read_clusters reads, grouped by bit string."""
    with open(path, "w", encoding="utf8") as f:
        for word, bits in sorted(clusters.items(), key=lambda item: (item[1], item[0])):
            f.write(f"{bits}\t{word}\n")


def read_text(path) -> List[List[str]]:
    """A raw text file's lines split on whitespace (one sentence or paragraph a line, tokens as the text has
    them), the input ``brown_clusters`` learns from."""
    return [line.split() for line in _lines(path, "text file")]


def cluster_tests(bits: str) -> List[str]:
    """The test names of a word's bit string: its prefixes of PREFIXES' lengths, up to the first that takes the
    whole string (a shorter string gives one test for all the longer lengths)."""
    tests = []
    for k in PREFIXES:
        tests.append(f"bc{k}={bits[:k]}")
        if k >= len(bits):
            break
    return tests

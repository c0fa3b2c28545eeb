"""Document context: what the other mentions of a word in the same Doc say about it (features.py's module
docstring), and sentence-bounded windows. A mixin of WindowFeaturizer.

Why: a window of +/-2 tokens cannot tell "Jordan" the country from "Jordan" the player, but the rest of the
document often can: "Michael Jordan" three sentences earlier, "said Jordan", "in jordan" never. A Doc of many
sentences is a document (spaCy's CoNLL-2003 converter makes one per ``-DOCSTART-``), and a capitalised word's
other occurrences in it are cheap, label-free evidence (Chieu & Ng 2003's global features; the label consistency
of Krishnan & Manning 2006 without its second stage). The tests (``doc_context``), on tokens whose first
character is upper-case, over the occurrences of the same lowercase form elsewhere in the Doc:

- ``dc=lower``: another occurrence is all lowercase ("May" / "may").
- ``dc=title``: another occurrence is title-case and not first in its sentence (a sentence-initial or headline
  ALL-CAPS word whose ordinary spelling is a name).
- ``dc=longer``: another occurrence is inside a longer run of capitalised tokens ("Jordan" after "Michael
  Jordan"); ``dc=again`` / ``dc=first``: an earlier / only later occurrences.
- ``dc=acronym``: an ALL-CAPS token (2-6 letters) spelt by the initials of a run of capitalised tokens
  elsewhere ("ECB" and "European Central Bank").
- ``dp=WORD`` / ``dn=WORD``: the lowercase word just before / after another occurrence ("mr.", "said",
  "corp"); only words seen ``min_freq`` times in training keep a test, as word tests.

At most MAX_OTHERS other occurrences are read for the context words of a token, and the rest is counted once per
word, so a word repeated hundreds of times costs linear time. Tokens whose value is missing take part in no test.
Sentences are the Doc's where they are set (a reader's, a sentencizer's or parser's); on a Doc made from text
alone, a token after ".", "?" or "!" starts one here (a Doc from spaCy's corpus reader has none: it is made from
the text).
"""
from collections import defaultdict
from typing import Dict, List, Tuple

import numpy as np
from spacy.attrs import ORTH, SENT_START

# Occurrences read for one token's dp= / dn= tests (the first ones in the Doc).
MAX_OTHERS = 10
# Families of the document tests; dp= and dn= are cut at min_freq like word tests.
DOC_FAMILIES = ("dc=", "dp=", "dn=")
# Where a Doc's sentences are not set, a token after one of these starts a sentence (for the tests, not windows).
SENTENCE_ENDS = frozenset((".", "?", "!"))


def _caps_runs(words: List[str], sent_start: List[bool], cap: List[bool]) -> Tuple[List[int], set]:
    """Per token the length of the run of capitalised tokens it is in (0 outside one; a run stops at a sentence
    start), and the initials (upper-cased) of every stretch of 2-6 tokens within a run ("The European Union": TE,
    TEU, EU)."""
    n = len(words)
    run = [0] * n
    initials = set()
    i = 0
    while i < n:
        if not cap[i]:
            i += 1
            continue
        j = i + 1
        while j < n and cap[j] and not sent_start[j]:
            j += 1
        run[i:j] = [j - i] * (j - i)
        letters = "".join(w[0] for w in words[i:j]).upper()
        initials.update(letters[a:b] for a in range(len(letters)) for b in range(a + 2, min(a + 6, len(letters)) + 1))
        i = j
    return run, initials


def document_cues(words: List[str], sent_start: List[bool]) -> Tuple[List[int], List[str]]:
    """The document tests of one Doc's tokens (``words``, True where a sentence starts) as (token, test name)
    pairs, tokens ascending (see the module docstring). What the other occurrences of a form show is counted once
    per form (its lowercase and mid-sentence title-case occurrences, its two longest runs), and each token takes
    its own share out, so a word repeated m times costs O(m), not O(m^2)."""
    n = len(words)
    lower = [w.lower() for w in words]
    cap = [w[:1].isupper() for w in words]
    run, initials = _caps_runs(words, sent_start, cap)
    where: Dict[str, List[int]] = defaultdict(list)
    for i, form in enumerate(lower):
        where[form].append(i)
    tokens: List[int] = []
    names: List[str] = []
    seen: Dict[str, Tuple[int, int, int, int]] = {}  # form -> (lowercase, title mid-sentence, longest run, next)
    for i in range(n):
        if not cap[i]:
            continue
        found = []
        occurrences = where[lower[i]]
        if len(occurrences) > 1:
            form = seen.get(lower[i])
            if form is None:
                runs = sorted((run[k] for k in occurrences), reverse=True)
                form = seen[lower[i]] = (sum(words[k].islower() for k in occurrences),
                                         sum(words[k].istitle() and not sent_start[k] for k in occurrences),
                                         runs[0], runs[1])
            n_lower, n_title, longest, second = form
            if n_lower:  # (a capitalised token is never lowercase itself)
                found.append("dc=lower")
            if n_title - (words[i].istitle() and not sent_start[i]) > 0:
                found.append("dc=title")
            if (second if run[i] == longest else longest) > run[i]:
                found.append("dc=longer")
            found.append("dc=again" if occurrences[0] < i else "dc=first")
            others = [k for k in occurrences[:MAX_OTHERS + 1] if k != i][:MAX_OTHERS]
            before = {lower[k - 1] for k in others if k > 0 and not sent_start[k]}
            after = {lower[k + 1] for k in others if k + 1 < n and not sent_start[k + 1]}
            found.extend(sorted("dp=" + w for w in before) + sorted("dn=" + w for w in after))
        if 2 <= len(words[i]) <= 6 and words[i].isalpha() and words[i].isupper() and words[i] in initials \
                and run[i] < len(words[i]):
            found.append("dc=acronym")
        tokens.extend([i] * len(found))
        names.extend(found)
    return tokens, names


class DocumentContext:
    """The featurizer's document tests and sentence bounds (see the module docstring)."""

    def _window_starts(self, doc_starts: np.ndarray, table) -> np.ndarray:
        """Where windows stop: the docs' starts, and with ``sentence_windows`` every sentence start as well
        (``table`` read with SENT_START; None: no tokens)."""
        if not self.sentence_windows or table is None:
            return doc_starts
        starts = np.flatnonzero(table.column(SENT_START).astype(np.int64) == 1)
        return np.union1d(doc_starts, starts).astype(np.int64)

    def _document_atoms(self, doc_starts: np.ndarray, table, vocab) -> Tuple[np.ndarray, np.ndarray]:
        """(token, atom) of every document test of the tokens in ``table`` (unknown tests dropped once frozen).
        Only Docs with a capitalised word that occurs twice or an ALL-CAPS word can have a test: they are found
        over all Docs at once (one sort), and only theirs are read word by word."""
        orths = table.column(ORTH)
        uniq, inverse = np.unique(orths, return_inverse=True)
        inverse = inverse.reshape(-1)
        texts = [vocab.strings[int(o)] for o in uniq.tolist()]
        forms, form_of = np.unique([text.lower() for text in texts], return_inverse=True)
        capitalised = np.fromiter((text[:1].isupper() for text in texts), bool, len(texts))[inverse]
        acronym = np.fromiter((2 <= len(t) <= 6 and t.isalpha() and t.isupper() for t in texts), bool,
                              len(texts))[inverse]
        doc_of = np.repeat(np.arange(len(doc_starts) - 1), np.diff(doc_starts))
        _, occurrence, counts = np.unique(doc_of * (len(forms) + 1) + form_of.reshape(-1)[inverse],
                                          return_inverse=True, return_counts=True)
        candidate = (capitalised & (counts[occurrence.reshape(-1)] >= 2)) | acronym
        marks = table.column(SENT_START).astype(np.int64)
        rows: List[int] = []
        atoms: List[int] = []
        for q in np.unique(doc_of[candidate]).tolist():
            s, e = int(doc_starts[q]), int(doc_starts[q + 1])
            words = [texts[k] for k in inverse[s:e].tolist()]
            if marks[s + 1:e].any():  # the Doc's sentences are set (1: starts one, -1: does not)
                starts = [True] + (marks[s + 1:e] == 1).tolist()
            else:  # unset, as on a Doc made from text: a token after a full stop starts one
                starts = [True] + [w in SENTENCE_ENDS for w in words[:-1]]
            tokens, names = document_cues(words, starts)
            for t, name in zip(tokens, names):
                atom = self._intern_one(name)
                if atom >= 0:
                    rows.append(s + t)
                    atoms.append(atom)
        return np.asarray(rows, np.int64), np.asarray(atoms, np.int32)

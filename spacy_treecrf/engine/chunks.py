"""Forward-backward and Viterbi over a batch of sequences, in threads: the sequences are cut into balanced chunks of
whole sequences (the kernels release the GIL), each writing its own rows.
"""
from concurrent.futures import ThreadPoolExecutor
import mmap

import numpy as np

from . import crf
from .crf import Potentials

THREAD_CELLS = 200_000  # a decoding pass goes to threads from this many positions x labels: starting them costs
# about 0.45 ms, which NETtalk phoneme+stress's 7,313 test positions x 121 labels repay (Viterbi 7.0 ms on one
# thread, 4.0 on two) and 728 of them do not (0.62, 0.75)


def pass_min_positions(P: Potentials) -> int:
    """The fewest positions a forward-backward or Viterbi pass over P's labels runs in threads for."""
    return max(1, THREAD_CELLS // max(1, P.values.shape[1]))


def in_chunks(seq_starts: np.ndarray, threads: int, call, min_positions: int = 20000) -> list:
    """call(a, b, q0, q1) over balanced chunks of whole sequences (positions a:b, sequences q0:q1), run in
    threads since the kernels release the GIL; results in chunk order."""
    n_seq = len(seq_starts) - 1
    T = int(seq_starts[-1]) if n_seq >= 0 else 0
    if threads <= 1 or T < min_positions or n_seq < 2:
        return [call(0, T, 0, n_seq)]
    cuts = np.unique(np.searchsorted(seq_starts, np.linspace(0, T, threads + 1), side="left"))
    cuts[0], cuts[-1] = 0, n_seq
    cuts = np.unique(cuts)
    jobs = [(int(seq_starts[q0]), int(seq_starts[q1]), int(q0), int(q1)) for q0, q1 in zip(cuts[:-1], cuts[1:])]
    with ThreadPoolExecutor(len(jobs)) as pool:
        return list(pool.map(lambda job: call(*job), jobs))


def by_chunks(seq_starts, threads: int, call) -> tuple:
    """call(a, b, starts) over chunks of whole sequences (positions a:b, their offsets ``starts`` from a) in
    threads; each returns a tuple of arrays along positions or sequences, joined here in chunk order."""
    parts = in_chunks(seq_starts, threads, lambda a, b, q0, q1: call(a, b, seq_starts[q0:q1 + 1] - a))
    if len(parts) == 1:
        return parts[0]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))


def lazy_zeros(shape) -> np.ndarray:
    """float64 zeros whose memory the OS maps a 4 KB page at a time, as it is written. np.zeros is lazy too, but
    numpy advises the kernel to back arrays of 4 MB and more with 2 MB huge pages, so that a few scattered rows
    written map nearly all of it (82 MB of a T x K alpha on UD EWT XPOS for the 11% of its sequences that are
    partially labelled; 4 KB pages: about 20 MB). np.zeros where the platform has no anonymous private maps."""
    count = int(np.prod(shape))
    if not hasattr(mmap, "MAP_ANONYMOUS") or count == 0:
        return np.zeros(shape)
    pages = mmap.mmap(-1, count * 8, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(pages, dtype=np.float64, count=count).reshape(shape)


def forward_backward(P: Potentials, seq_starts, y, clamp: bool, threads: int, todo=None) -> crf.ForwardBackward:
    """crf.forward_backward of the sequences q with todo[q] (None: all), over sequence chunks in threads, each
    writing its rows of one ForwardBackward made here (no chunk's arrays joined afterwards: a copy of them
    all). With ``todo`` its alpha and beta are lazy_zeros, so the rows of the sequences left out take no memory:
    the clamped pass runs only on the partially labelled sequences (on UD EWT XPOS 1,355 of 12,544, while its
    full arrays would take 158 MB), and the kernels read it only there."""
    T, K = len(P.c), P.values.shape[1]
    n_seq = len(seq_starts) - 1
    zeros = np.zeros if todo is None else lazy_zeros
    out = crf.ForwardBackward(alpha=zeros((T, K)), beta=zeros((T, K)), scale=np.ones(T), logz=np.zeros(n_seq))
    todo = np.ones(n_seq, dtype=np.bool_) if todo is None else np.ascontiguousarray(todo, dtype=np.bool_)

    def chunk(a, b, q0, q1):
        crf.forward_backward_into(crf.part(P, a, b), seq_starts[q0:q1 + 1] - a, y[a:b], clamp, todo[q0:q1],
                                  crf.ForwardBackward(alpha=out.alpha[a:b], beta=out.beta[a:b], scale=out.scale[a:b],
                                                      logz=out.logz[q0:q1]))
    in_chunks(seq_starts, threads, chunk, pass_min_positions(P))
    return out


def viterbi(P: Potentials, seq_starts, threads: int) -> np.ndarray:
    return np.concatenate(in_chunks(seq_starts, threads, lambda a, b, q0, q1: crf.viterbi(
        crf.part(P, a, b), seq_starts[q0:q1 + 1] - a), pass_min_positions(P)))


def decode(P: Potentials, seq_starts: np.ndarray, method: str, threads: int = 1):
    """Label ids per position by Viterbi or by per-position marginal argmax, plus the marginals (or None), from
    the Potentials of Ensemble.scaled_potentials."""
    if method == "viterbi":
        return viterbi(P, seq_starts, threads), None
    gamma = marginal_probs(P, seq_starts, threads)
    return gamma.argmax(axis=1).astype(np.int32), gamma


def marginal_probs(P: Potentials, seq_starts, threads: int = 1) -> np.ndarray:
    y = np.full(P.group.shape[0], -1, dtype=np.int32)
    alpha, beta, _, _ = forward_backward(P, seq_starts, y, False, threads)
    return crf.marginals(alpha, beta)

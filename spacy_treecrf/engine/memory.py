"""What a fit will ask of memory, checked before it is asked: a model of K labels keeps (K + 1) x K transition
masks and, per position, a row for each previous label (S = K + 1) in the potentials' groups, the residuals of a
label tree and the forward-backward tables; numpy would otherwise fail (or the machine swap) minutes into
training, or at once asking for 9.3 GiB for a mask of 100,000 labels.

training_bytes counts those arrays, not every one (not the trees or the feature rows): with the defaults,
2,000 random labels over 20,000 positions, it estimates 1.64 GiB where the fit's peak resident memory was
1.43 GiB (benchmarks/memory_estimate.py; benchmarks/results/first_hour_checks.md).
"""
import ctypes
import ctypes.util
import os
from typing import Optional

from ..errors import Errors


def available_bytes() -> Optional[int]:
    """The memory this process could still get: Linux's MemAvailable, else the machine's physical memory; None
    where neither can be read."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        return None


def training_bytes(n_positions: int, n_labels: int) -> int:
    """What training n_labels labels over n_positions positions takes at once (module docstring): the transition
    mask ((K + 1) x K bools), a label tree's residuals (T x S float64) and the potentials' group table
    (T x S int32), and the forward-backward tables (a few T x K float64)."""
    K, T = int(n_labels), int(n_positions)
    S = K + 1
    return S * K + T * S * (8 + 4) + 4 * T * K * 8


def check_training_memory(n_positions: int, n_labels: int, where: str) -> None:
    """E222 (a ValueError: the input is too large for this machine) where training_bytes exceeds the memory
    available, before any label-sized array is made."""
    need, have = training_bytes(n_positions, n_labels), available_bytes()
    if have is not None and need > have:
        raise ValueError(Errors.E222.format(where=where, n_labels=n_labels, n_positions=n_positions,
                                             need=need / 2 ** 30, have=have / 2 ** 30))


def _glibc_malloc_trim():
    """glibc's malloc_trim (None on other C libraries)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


MALLOC_TRIM = _glibc_malloc_trim()


def release_freed_memory():
    """Return freed heap pages to the system. A round's large buffers are made and freed in worker threads, i.e.
    in glibc's per-thread arenas, which keep freed pages: the resident size grew with every round."""
    if MALLOC_TRIM is not None:
        MALLOC_TRIM(0)

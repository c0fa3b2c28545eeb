"""Low-level helpers for the kernels: cache prefetches, a count of trailing zero bits, a growable buffer, and the
atomic reads, writes and claims and the CPU yield that two threads hand work over with (grow.py's two-thread
grower)."""
import ctypes
import sys

import llvmlite.binding as llvm
from llvmlite import ir
import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# How many positions ahead the scans ask for the rows they will read (a node's positions are scattered).
AHEAD = 16
_PREFETCH = "llvm.prefetch." + ir.IntType(8).as_pointer().intrinsic_name  # mangled as this llvmlite does


@intrinsic
def prefetch(typingctx, arr, i, j):
    """Ask the CPU to start loading arr[i] (1-d), arr[i, j] (2-d) or arr[i, j, 0] (3-d) into cache; changes no
    result."""
    if not isinstance(arr, types.Array) or arr.ndim not in (1, 2, 3):
        return None
    sig = types.void(arr, i, j)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        idx = [context.cast(builder, args[k], signature.args[k], types.intp) for k in (1, 2)][:aryty.ndim]
        idx += [context.get_constant(types.intp, 0)] * (aryty.ndim - len(idx))
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, idx, wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, _PREFETCH)
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def count_trailing_zeros(typingctx, x):
    """The index of the lowest set bit of a nonzero uint64 (one instruction)."""
    if not isinstance(x, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.int64(types.uint64), codegen


def _element(context, builder, signature, args):
    """A pointer to arr[i] of a 1-d array (args: arr, i, ...)."""
    aryty = signature.args[0]
    ary = context.make_array(aryty)(context, builder, args[0])
    idx = context.cast(builder, args[1], signature.args[1], types.intp)
    return cgutils.get_item_pointer(context, builder, aryty, ary, [idx], wraparound=False)


def _int64_array(arr):
    return isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.int64


@intrinsic
def load_acquire(typingctx, arr, i):
    """arr[i] of a 1-d int64 array, read atomically with acquire ordering: whatever the thread that wrote it with
    store_release wrote before that is visible after this read (and the read is never hoisted out of a loop)."""
    if not _int64_array(arr):
        return None

    def codegen(context, builder, signature, args):
        return builder.load_atomic(_element(context, builder, signature, args), "acquire", 8)

    return types.int64(arr, i), codegen


@intrinsic
def store_release(typingctx, arr, i, value):
    """arr[i] = value in a 1-d int64 array, written atomically with release ordering (see load_acquire)."""
    if not _int64_array(arr):
        return None

    def codegen(context, builder, signature, args):
        value = context.cast(builder, args[2], signature.args[2], types.int64)
        builder.store_atomic(value, _element(context, builder, signature, args), "release", 8)
        return context.get_dummy_value()

    return types.void(arr, i, value), codegen


@intrinsic
def compare_exchange(typingctx, arr, i, expected, value):
    """If arr[i] (1-d int64) is ``expected``, set it to ``value``, atomically (acquire and release ordering):
    whether it was. Of two threads claiming the same element this way, exactly one succeeds."""
    if not _int64_array(arr):
        return None

    def codegen(context, builder, signature, args):
        old, new = (context.cast(builder, args[k], signature.args[k], types.int64) for k in (2, 3))
        pair = builder.cmpxchg(_element(context, builder, signature, args), old, new, "acq_rel", "acquire")
        return builder.extract_value(pair, 1)

    return types.boolean(arr, i, expected, value), codegen


@intrinsic
def cycles(typingctx):
    """The CPU's cycle counter (rdtsc on x86; a constant-rate counter elsewhere): for comparing how long two parts
    of one computation took, never as seconds."""
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


# The operating system's "let another thread run" call, under one name the compiled code links to (cached kernels
# find it by that name in a new process too, as this module registers it on import).
_YIELD_SYMBOL = "spacy_treecrf_yield"
_yield_call = ctypes.windll.kernel32.SwitchToThread if sys.platform == "win32" else ctypes.CDLL(None).sched_yield
llvm.add_symbol(_YIELD_SYMBOL, ctypes.cast(_yield_call, ctypes.c_void_p).value)


@intrinsic
def yield_cpu(typingctx):
    """Give the CPU to another runnable thread, if there is one (sched_yield; SwitchToThread on Windows): a thread
    that waits on another by spinning calls it once it has spun a while, so that on a busy machine it does not
    hold a core the thread it waits for could use."""
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(32), []), _YIELD_SYMBOL)
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.void(), codegen


@njit(cache=True, nogil=True)
def with_room(buf, need):
    """buf, or a copy with room for at least ``need`` rows (twice its rows if that is more) when it has fewer."""
    if need <= buf.shape[0]:
        return buf
    out = np.empty((max(need, 2 * buf.shape[0]),) + buf.shape[1:], dtype=buf.dtype)
    out[:buf.shape[0]] = buf
    return out

"""Low-level helpers for the kernels: cache prefetches, a count of trailing zero bits, a growable buffer."""
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


@njit(cache=True, nogil=True)
def with_room(buf, need):
    """buf, or a copy with room for at least ``need`` rows (twice its rows if that is more) when it has fewer."""
    if need <= buf.shape[0]:
        return buf
    out = np.empty((max(need, 2 * buf.shape[0]),) + buf.shape[1:], dtype=buf.dtype)
    out[:buf.shape[0]] = buf
    return out

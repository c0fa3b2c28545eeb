"""What the benchmarks measure the same way: a process's peak resident memory, and the seconds of a call."""
import gc
import resource
import statistics
import time
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's peak resident set in MB: VmHWM, its own address space's high-water mark (ru_maxrss, the
    fallback where /proc is missing, is inherited by a process started with fork + exec, such as a spawned
    worker, from the process it was forked from)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median_turns(calls: dict, passes: int = 5, setup=None) -> dict:
    """The median seconds of each of ``calls`` (name -> call) over ``passes`` turns after an untimed warm-up turn.
    A turn times each call once, one after the other, so that all of them see the same state of the machine (a
    comparison of A's median with B's, taken minutes apart, is one of two machines). Each call is timed after a full
    garbage collection: call(setup()) with ``setup`` (untimed, e.g. fresh copies of the input), else call(). The
    collection before each pass keeps one pass's garbage, and whatever else the process holds (a training set), from
    setting off a full collection inside the next; a collection the pass's own allocations set off still counts."""
    seconds = {name: [] for name in calls}
    for turn in range(passes + 1):
        for name, call in calls.items():
            arg = setup() if setup is not None else None
            gc.collect()
            t0 = time.perf_counter()
            call(arg) if setup is not None else call()
            if turn:
                seconds[name].append(time.perf_counter() - t0)
    return {name: statistics.median(times) for name, times in seconds.items()}


def median_seconds(call, setup=None, passes: int = 5) -> float:
    """The median seconds of ``passes`` timed calls after an untimed warm-up (median_turns of the one call)."""
    return median_turns({"call": call}, passes, setup)["call"]

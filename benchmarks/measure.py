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


def median_seconds(call, setup=None, passes: int = 5) -> float:
    """The median seconds of ``passes`` timed calls after an untimed warm-up, each after a full garbage collection:
    call(setup()) with ``setup`` (untimed, e.g. fresh copies of the input), else call(). The collection before each
    pass keeps one pass's garbage, and whatever else the process holds (a training set), from setting off a full
    collection inside the next; a collection the pass's own allocations set off still counts."""
    seconds = []
    for i in range(passes + 1):
        arg = setup() if setup is not None else None
        gc.collect()
        t0 = time.perf_counter()
        call(arg) if setup is not None else call()
        if i:
            seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds)

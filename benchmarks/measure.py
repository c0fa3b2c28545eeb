"""What the benchmarks measure the same way: a process's peak resident memory."""
import resource
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

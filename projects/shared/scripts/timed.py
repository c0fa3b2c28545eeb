"""Run a command and record its wall seconds and peak resident memory as JSON.

    python timed.py OUT.json [--log FILE] -- COMMAND [ARGS...]

With --log the command's standard output (and error) is also copied to FILE.

Peak RSS is the largest ru_maxrss among the waited-for child processes (Linux: KiB), so it covers the
command's own process tree as far as it waits for its children. The command's exit code is passed on.
"""
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path


def main(argv):
    log = None
    if len(argv) > 2 and argv[1] == "--log":
        log, argv = Path(argv[2]), [argv[0]] + argv[3:]
    if len(argv) < 3 or argv[1] != "--":
        sys.exit(__doc__)
    out, cmd = Path(argv[0]), argv[2:]
    if cmd[0] in ("python", "python3"):  # the interpreter running this script, as weasel does for its commands
        cmd[0] = sys.executable
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    t0 = time.perf_counter()
    if log is None:
        code = subprocess.call(cmd)
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("w", encoding="utf8") as f:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
            for line in proc.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
                f.write(line)
            code = proc.wait()
    wall = time.perf_counter() - t0
    rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out.parent.mkdir(parents=True, exist_ok=True)
    from relpaths import relative
    out.write_text(json.dumps(dict(command=[relative(c) for c in cmd], exit_code=code, wall_seconds=wall,
                                   peak_rss_mb=rss_kib / 1024.0, machine=platform.machine(),
                                   started=started), indent=1))
    print(f"[timed] {wall:.1f} s wall, peak RSS {rss_kib / 1024:.0f} MB -> {out}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Where a command's wall time goes on this machine: CPU seconds per process and the cores left idle.

    python bench/cpu_timeline.py -- toolscale regenerate --work-dir W --warehouse W/wh.duckdb

Runs the command (its output to ``--log``, default ``cpu_timeline.log``), samples ``/proc`` every 0.25 s, and prints
the wall time, the idle core-seconds of the whole machine over the run (so run it on an idle machine), the CPU
seconds of the command's busiest processes (the last sample of each: a process that exits between samples loses
up to 0.25 s), and the idle cores in each 5-second window: where the start or the end of a run leaves cores unused.
Linux only.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def processes() -> dict[int, tuple[float, str]]:
    """pid -> (CPU seconds so far, command line) for every process readable now."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[int(pid)] = ((int(stat[11]) + int(stat[12])) / HZ, cmd[:100])
    return out


def idle_seconds() -> float:
    """The machine's idle time so far, summed over its cores."""
    with open("/proc/stat") as f:
        return int(f.readline().split()[4]) / HZ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log", default="cpu_timeline.log")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    started, idle0, before = time.time(), idle_seconds(), set(processes())
    with open(args.log, "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        seen: dict[int, tuple[float, str]] = {}
        timeline: list[tuple[float, float]] = []
        while proc.poll() is None:
            seen.update({pid: v for pid, v in processes().items() if pid not in before})
            timeline.append((time.time() - started, idle_seconds() - idle0))
            time.sleep(0.25)
    wall, idle = time.time() - started, idle_seconds() - idle0
    cores = os.cpu_count() or 1
    print(f"wall {wall:.1f} s, exit status {proc.returncode}; idle core-s {idle:.1f} of {cores * wall:.1f}")
    for pid, (cpu, cmd) in sorted(seen.items(), key=lambda kv: -kv[1][0])[:6]:
        print(f"{cpu:7.1f} CPU-s  {pid}  {cmd}")
    windows, last = [], (0.0, 0.0)
    for t, i in timeline:
        if t - last[0] >= 5:
            windows.append(f"{t:.0f}s:{(i - last[1]) / (t - last[0]):.2f}")
            last = (t, i)
    print("idle cores per 5 s window: " + " ".join(windows))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Run one command and measure it: wall seconds and peak RSS (like /usr/bin/time -f "%e %M").

    /usr/bin/python3 bench/measure.py [--rss-limit-mib N] [--timeout S] -- CMD ARGS...

Prints one JSON line on stdout: {"rc", "wall_s", "max_rss_mib", "killed"}; the command's
own stdout/stderr go to this process's stderr. The command runs under
`/usr/bin/time -f "%e %M"` (GNU time) and max RSS is its %M (the kernel's high-water
mark, KiB). Going through GNU time matters: Linux carries the parent's RSS high-water
mark across fork+exec into ru_maxrss, so wait4() straight from Python would report at
least Python's own ~14 MiB. Without GNU time it falls back to wait4() rusage.
wall_s is measured here with a monotonic clock (ms resolution). A watchdog polls
/proc every 20 ms and kills the process group if the command's VmRSS goes over
--rss-limit-mib (default 8192) or the wall clock passes --timeout (default 1800 s);
"killed" then names the reason and rc is the signal (negative).
"""
import argparse
import json
import os
import signal
import subprocess
import tempfile
import threading
import sys
import time


def rss_mib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def tree_rss_mib(pid):
    """VmRSS of pid plus its direct children (GNU time -> the measured command)."""
    total = rss_mib(pid)
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            for c in f.read().split():
                total += rss_mib(int(c))
    except OSError:
        pass
    return total


GNU_TIME = "/usr/bin/time"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rss-limit-mib", type=float, default=8192)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    tf = None
    if os.access(GNU_TIME, os.X_OK):
        tf = tempfile.NamedTemporaryFile(prefix="memplan-measure-", suffix=".txt", delete=False)
        tf.close()
        cmd = [GNU_TIME, "-f", "%e %M", "-o", tf.name] + cmd
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr, start_new_session=True)
    state = {"killed": None, "done": False, "seen_mib": 0.0}
    lock = threading.Lock()

    def watchdog():
        while True:
            time.sleep(0.02)
            with lock:
                if state["done"]:
                    return
                reason = None
                now = tree_rss_mib(p.pid)
                state["seen_mib"] = max(state["seen_mib"], now)
                if now > a.rss_limit_mib:
                    reason = "rss>%g MiB" % a.rss_limit_mib
                elif time.monotonic() - t0 > a.timeout:
                    reason = "timeout>%g s" % a.timeout
                if reason:
                    state["killed"] = reason
                    os.killpg(p.pid, signal.SIGKILL)  # its own session: only what we started
                    return

    th = threading.Thread(target=watchdog, daemon=True)
    th.start()
    # Blocking wait4: the wall time is not rounded up to a polling interval. The child
    # stays a zombie (pid not reusable) until waited, and the watchdog checks "done"
    # under the lock, so it never signals a recycled pid.
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # wait for exit, do not reap yet
    with lock:
        state["done"] = True
    _, status, ru = os.wait4(p.pid, 0)
    killed = state["killed"]
    wall = time.monotonic() - t0
    rc = os.waitstatus_to_exitcode(status)
    max_rss_kib = ru.ru_maxrss
    if tf is not None:
        try:
            with open(tf.name) as f:
                lines = [l.split() for l in f.read().splitlines() if l.strip()]
            # GNU time writes "Command exited with non-zero status N" first on failure.
            if lines and len(lines[-1]) == 2:
                max_rss_kib = int(lines[-1][1])
        except (OSError, ValueError):
            pass
        os.unlink(tf.name)
    if killed:  # GNU time died too: report the largest RSS the watchdog saw
        max_rss_kib = max(max_rss_kib, int(state["seen_mib"] * 1024))
        if rc == 0:
            rc = -signal.SIGKILL
    print(json.dumps({"rc": rc, "wall_s": round(wall, 3),
                      "max_rss_mib": round(max_rss_kib / 1024.0, 1), "killed": killed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Check counting shared by the Python test scripts that print every check:
`check(name, ok, detail)` prints "ok  NAME" or "FAIL NAME: DETAIL"."""


class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []

    def __call__(self, name, ok, detail=""):
        ok = bool(ok)
        detail = detail if isinstance(detail, str) else repr(detail)
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    def summary(self):
        """Prints the closing 'N passed, N failed' line; the exit status."""
        print(f"{self.passed} passed, {len(self.failed)} failed")
        return 0 if not self.failed else 1

    def check(self, ok, name, detail=""):
        """The same with the condition first; a detail that is not text is printed as repr."""
        return self(name, bool(ok), "" if ok else str(detail))


def on_terminal(argv, timeout=600):
    """Runs argv with stderr on a pseudo-terminal: (exit, stdout, what the
    terminal received). Past `timeout` seconds the process is killed and
    subprocess.TimeoutExpired raised, so a hang fails the test."""
    import os
    import pty
    import select
    import subprocess
    import tempfile
    import time
    master, slave = pty.openpty()
    with tempfile.TemporaryFile() as out_file:  # a file: stdout never fills a pipe
        p = subprocess.Popen(argv, stdout=out_file, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        received = b""
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired(argv, timeout, output=received)
                if not select.select([master], [], [], min(left, 1.0))[0]:
                    continue
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the other side closed
                    break
                if not chunk:
                    break
                received += chunk
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise
        finally:
            os.close(master)
        out_file.seek(0)
        out = out_file.read()
    return p.returncode, out.decode(), received.decode(errors="replace")

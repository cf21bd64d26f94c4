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


def on_terminal(argv):
    """Runs argv with stderr on a pseudo-terminal: (exit, stdout, what the
    terminal received)."""
    import os
    import pty
    import subprocess
    master, slave = pty.openpty()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        received += chunk
    out = p.stdout.read()
    p.wait()
    os.close(master)
    return p.returncode, out.decode(), received.decode(errors="replace")

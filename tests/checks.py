"""Check counting shared by the Python test scripts that print every check:
`check(name, ok, detail)` prints "ok  NAME" or "FAIL NAME: DETAIL"."""


class Checks:
    def __init__(self):
        self.passed, self.failed = 0, []

    def __call__(self, name, ok, detail=""):
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok

    def check(self, ok, name, detail=""):
        """The same with the condition first; a detail that is not text is printed as repr."""
        return self(name, bool(ok), "" if ok else str(detail))

#!/usr/bin/python3
"""Self-test of scripts/install-deps.sh's disk check: a venv it would make on
a disk without room fails before pip starts, with the space it needs and has.

Run: /usr/bin/python3 tests/tools/install_deps_test.py   (plain unittest)
"""
import os
import re
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class DiskCheckTest(unittest.TestCase):
    def setUp(self):
        # A copy of the scripts and requirements without venvs: install-deps.sh
        # finds its root from its own path, so the repository's venvs are
        # neither looked at nor touched.
        self.root = tempfile.mkdtemp()
        os.mkdir(os.path.join(self.root, "scripts"))
        for name in ("install-deps.sh", "check_pins.py"):
            shutil.copy(os.path.join(ROOT, "scripts", name),
                        os.path.join(self.root, "scripts", name))
        shutil.copytree(os.path.join(ROOT, "requirements"),
                        os.path.join(self.root, "requirements"))

    def tearDown(self):
        shutil.rmtree(self.root)

    def run_venvs(self, min_free_gib):
        env = dict(os.environ, MEMPLAN_VENV_MIN_FREE_GIB=str(min_free_gib),
                   MEMPLAN_VENV_PYTHON="memplan-no-such-python")
        return subprocess.run(
            ["bash", os.path.join(self.root, "scripts", "install-deps.sh"), "--venvs"],
            env=env, capture_output=True, text=True, timeout=60)

    def test_full_disk_fails_before_pip(self):
        r = self.run_venvs(1 << 20)  # a PiB: no disk has it free
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertRegex(
            r.stderr,
            "^install-deps: making .venv needs about 1048576 GiB free; "
            + re.escape(self.root) + r" has [0-9]+\.[0-9] GiB\n$")
        self.assertFalse(os.path.exists(os.path.join(self.root, ".venv")))

    def test_room_goes_on_to_python(self):
        # With room the check passes and the next step runs: here it finds no
        # such Python and says so.
        r = self.run_venvs(0)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(
            r.stderr,
            "install-deps: memplan-no-such-python not found (the torch wheels are "
            "for Python 3.11; set MEMPLAN_VENV_PYTHON)\n")


if __name__ == "__main__":
    unittest.main()

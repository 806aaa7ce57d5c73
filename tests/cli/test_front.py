# SPDX-License-Identifier: MIT
"""ampscope-cli's two halves (issue 33): the front `ampscope-cli` links no LibTorch and runs the
store commands itself (list, show, export, import, annotate, review: milliseconds instead of
LibTorch's half second and ~470 MB per start); every other command, the top-level --help and
--version, it hands to ampscope-cli-engine beside it, with the same arguments, exit status and
process. A front without its engine half says so (exit 3) instead of failing obscurely."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from common import CLI


def needed_libraries(path):
    """The shared libraries an ELF file names (readelf -d, NEEDED)."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True).stdout
    return [line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line]


def run(exe, *args, env=None):
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env=env)
    return p.returncode, p.stdout, p.stderr


class Front(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.db = os.path.join(cls.tmp.name, "runs.sqlite")
        rc, out, err = run(CLI, "run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect",
                           "-q", "--db", cls.db)
        assert rc in (0, 1), err  # through the front: the engine half ran and recorded it
        rc, out, err = run(CLI, "list", "--json", "--db", cls.db)
        assert rc == 0, err
        cls.run_id = json.loads(out)[0]["run_id"]
        # the front alone in a folder: what it can do without its engine half
        cls.alone = os.path.join(cls.tmp.name, "alone", "ampscope-cli")
        os.mkdir(os.path.dirname(cls.alone))
        shutil.copy(CLI, cls.alone)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_front_links_no_libtorch(self):
        libs = needed_libraries(CLI)
        self.assertFalse([lib for lib in libs if "torch" in lib or lib.startswith("libc10")], libs)
        engine = os.path.join(os.path.dirname(CLI), "ampscope-cli-engine")
        self.assertTrue([lib for lib in needed_libraries(engine) if "torch" in lib], "the engine half runs LibTorch")

    def test_store_commands_run_without_the_engine_half(self):
        rc, out, err = run(self.alone, "list", "--json", "--db", self.db)
        self.assertEqual(rc, 0, err)
        self.assertEqual([r["run_id"] for r in json.loads(out)], [self.run_id])
        rc, out, err = run(self.alone, "show", self.run_id[:8], "--db", self.db)
        self.assertEqual(rc, 0, err)
        self.assertIn(self.run_id, out)
        rc, out, err = run(self.alone, "review", self.run_id, "accepted", "--db", self.db)
        self.assertEqual(rc, 0, err)
        rc, out, err = run(self.alone, "show", "nope", "--db", self.db)  # errors as before: exit 2, named
        self.assertEqual(rc, 2, err)
        self.assertIn("nope", err)
        rc, out, err = run(self.alone, "list", "--bogus", "--db", self.db)  # parse errors too
        self.assertEqual(rc, 2, err)
        self.assertIn("--bogus", err)

    def test_other_commands_need_the_engine_half_and_say_so(self):
        for args in (["run", "--model", "demo:mlp", "--probes", "demo"], ["--version"], ["backend"], []):
            rc, out, err = run(self.alone, *args)
            self.assertEqual(rc, 3, f"{args}: {err}")
            self.assertIn("cannot start " + os.path.join(os.path.dirname(self.alone), "ampscope-cli-engine"), err)
            self.assertIn("the LibTorch half of ampscope-cli", err)

    def test_the_engine_half_gets_the_same_arguments_and_exit_status(self):
        rc, out, err = run(CLI, "--version")
        self.assertEqual(rc, 0, err)
        self.assertIn("(torch 2.11.0", out)
        rc, out, err = run(CLI, "run", "--model", "demo:nope", "--probes", "demo", "--db", self.db)
        self.assertEqual(rc, 2, err)
        self.assertIn("demo:nope", err)
        self.assertTrue(err.startswith("ampscope-cli: error:"), err)
        rc, out, err = run(CLI, "--help")
        self.assertEqual(rc, 0, err)
        for command in ("run", "train", "replay", "advise", "list", "show"):
            self.assertIn(command, out)


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""Outputs that never destroy inputs, inputs that never hang, stored text that never drives the
terminal, and messages that say what is wrong (issue #19, the CLI and storage items).

- Every output path (run/train/bench/advise --json, advise --python, export -o) goes through one
  guard: never the database, model, probe or criteria file of the command (file identity), never
  a non-regular file, an existing file of another kind only with --force, checked before any
  work; a failed write is exit 3 naming the path and leaves nothing half-written.
- --keep-fp32-file/--criteria: FIFOs and devices refused without blocking, at most 1 MB; empty
  paths and names are usage errors.
- show/list escape control characters of stored text (reviews, annotations, imported bundles).

Issue 28 (the output guard, round three; class HeldOutputs):
- the output's folder is opened once, when checked; the file is created and renamed inside it
  and never through a symbolic link: a link or folder swapped in while the command works never
  redirects the write (was: `--json` replaced the model);
- nothing is created inside an input folder (a Trainer checkpoint given to replay);
- the journals of the database a --db link leads to are protected; `export -o` never replaces a
  file an exported run read (its model, probes; a replay's checkpoint and batch);
- a value that is not valid UTF-8 is refused before any work, naming the option (was exit 3
  after the whole run: the JSON writer threw).
"""
import ctypes
import ctypes.util
import glob
import json
import os
import select
import shutil
import signal
import sqlite3
import stat
import struct
import subprocess
import tempfile
import time
import unittest
import zipfile

import torch

from common import CLI, run_cli
from test_replay import K, Incident, Net

RUN = ["run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect", "-q"]
TRAIN = ["train", "--model", "demo:mlp", "--data", "demo", "--steps", "1", "--device", "cpu", "-q"]
ADVISE = ["advise", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-bench", "-q"]
BENCH = ["bench", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--unvalidated", "--repeats", "1", "--warmup", "0"]

HOSTILE_AUTHOR = "\x1b]0;pwned\x07\x1b[2J\u009b31mmallory"
HOSTILE_NOTE = "\x1b[31mred\x1b[0m first line\nsecond line \x07"
RAW_CONTROLS = ("\x1b", "\x07", "\u009b", "\x9b")


def sqlite_ok(db):
    con = sqlite3.connect(db)
    try:
        return con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def has_mount_namespace():
    """Root with mount namespaces: read-only and full file systems can be made for a test."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    return subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode == 0


class Trust(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.db = os.path.join(cls.dir, "runs.sqlite")
        rc, out, err = run_cli(*RUN, "--db", cls.db, "--json", os.path.join(cls.dir, "first.json"))
        assert rc in (0, 1), err
        with open(os.path.join(cls.dir, "first.json")) as f:
            cls.run_id = json.load(f)["run_id"]

        class Tiny(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 3)

            def forward(self, x):
                return self.fc(x)

        torch.manual_seed(0)
        cls.model = os.path.join(cls.dir, "tiny.pt")
        torch.jit.script(Tiny().eval()).save(cls.model)
        cls.probes = os.path.join(cls.dir, "probes.pt")
        torch.save({"inputs": torch.randn(8, 4), "labels": torch.randint(0, 3, (8,))}, cls.probes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, data):
        p = self.path(name)
        with open(p, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return p

    @staticmethod
    def read(path):
        with open(path, "rb") as f:
            return f.read()

    def bad(self, args, *words, rc=2, timeout=300):
        got, out, err = run_cli(*args, timeout=timeout)
        self.assertEqual(got, rc, f"{args}: rc {got}\nstdout {out}\nstderr {err}")
        for w in words:
            self.assertIn(w, err, f"{args}: message lacks {w!r}: {err}")
        self.assertNotIn("terminate called", err)
        return err

    def leftovers(self, d=None):
        return sorted(f for f in os.listdir(d or self.dir) if "partial" in f)

    def fresh_db(self, name):
        db = self.path(name)
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
        return db

    # ---- outputs never replace an input --------------------------------------------------------
    def test_json_never_replaces_the_database(self):
        # Was a bug: `advise --json DB --db DB`, `run --json DB`, `train --json DB` replaced the run
        # database with a JSON file and exited 0.
        link = self.path("link.sqlite")
        if not os.path.lexists(link):
            os.symlink(self.db, link)
        with open(self.db, "rb") as f:
            before = f.read(100)
        for cmd, flag in ((RUN, "--json"), (TRAIN, "--json"), (ADVISE, "--json"), (ADVISE, "--python"), (BENCH, "--json")):
            for target in (self.db, link, self.db + "-wal"):
                for force in ([], ["--force"]):
                    args = [*cmd, "--db", self.db, flag, target, *force]
                    t0 = time.monotonic()
                    self.bad(args, target, flag, "run database", "even when forced")
                    self.assertLess(time.monotonic() - t0, 30, f"{args}: refused only after the work")
        with open(self.db, "rb") as f:
            self.assertEqual(f.read(100), before)
        self.assertTrue(sqlite_ok(self.db))
        run_cli("show", self.run_id, "--db", self.db, check_rc=0)
        self.assertEqual(self.leftovers(), [])

    def test_json_never_replaces_model_probes_or_criteria(self):
        criteria = self.write("criteria.json", '{"atol": 0.5, "rtol": 0.5}')
        keep = self.write("keep.txt", "fc\n")
        base = ["run", "--model", self.model, "--probes", self.probes, "--criteria", criteria, "--device", "cpu", "-q", "--no-db"]
        saved = {p: self.read(p) for p in (self.model, self.probes, criteria, keep)}
        for target, role in ((self.model, "model"), (self.probes, "probe file"), (criteria, "criteria file")):
            for force in ([], ["--force"]):
                self.bad([*base, "--json", target, *force], target, role)
        self.bad([*base, "--keep-fp32-file", keep, "--json", keep, "--force"], keep, "--keep-fp32-file")
        self.bad(["advise", "--model", self.model, "--probes", self.probes, "--device", "cpu", "--no-db", "--python",
                  self.model, "--force"], self.model, "--python", "model")
        self.bad(["train", "--model", self.model, "--data", self.probes, "--steps", "1", "--device", "cpu", "--no-db", "--json",
                  self.probes, "--force"], self.probes, "training data")
        for p, data in saved.items():
            self.assertEqual(self.read(p), data, p)

    def test_advise_outputs_are_two_files_by_identity(self):
        a = self.path("advice.json")
        for b in (a, "./" + os.path.relpath(a), os.path.join(self.dir, ".", "advice.json")):
            self.bad([*ADVISE, "--no-db", "--json", a, "--python", b], "--json", "--python")

    def test_non_regular_targets_refused(self):
        # Was a bug: `--json /dev/full` (as root) replaced the device with a regular file.
        fifo = self.path("out.fifo")
        os.mkfifo(fifo)
        targets = [(fifo, "FIFO")]
        dev = self.path("null-clone")
        try:  # a copy of /dev/null's node: nothing of the machine's is at risk if the guard fails
            os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))
            targets.append((dev, "character device"))
        except PermissionError:
            pass
        for target, kind in targets:
            for cmd in (RUN, TRAIN, ADVISE):
                for force in ([], ["--force"]):
                    self.bad([*cmd, "--no-db", "--json", target, *force], target, kind, timeout=60)
            self.bad(["export", self.run_id, "--db", self.db, "-o", target, "--force"], target, kind, timeout=60)
        self.assertTrue(stat.S_ISFIFO(os.stat(fifo).st_mode))
        if len(targets) > 1:
            self.assertTrue(stat.S_ISCHR(os.stat(dev).st_mode))
        rc, out, err = run_cli(*RUN, "--no-db", "--json", "-")
        self.assertIn(rc, (0, 1), err)
        self.assertEqual(json.loads(out)["verdict"], "rejected" if rc else "accepted")

    def test_other_files_only_with_force(self):
        notes = self.write("notes.txt", "precious\n")
        advice = self.path("advice-kind.json")
        rc, _, err = run_cli(*ADVISE, "--no-db", "--json", advice)
        self.assertIn(rc, (0, 1), err)
        for target in (notes, advice):  # an advice JSON is not a run JSON
            self.bad([*RUN, "--no-db", "--json", target], target, "not an ampscope run JSON", "--force")
        with open(notes) as f:
            self.assertEqual(f.read(), "precious\n")
        earlier = self.path("earlier.json")
        for _ in range(2):  # an earlier run JSON is replaced without --force
            rc, _, err = run_cli(*RUN, "--no-db", "--json", earlier)
            self.assertIn(rc, (0, 1), err)
        rc, _, err = run_cli(*RUN, "--no-db", "--json", notes, "--force")
        self.assertIn(rc, (0, 1), err)
        with open(notes) as f:
            self.assertIn("run_id", json.load(f))
        snippet = self.path("snippet.py")
        self.write("snippet.py", "print('mine')\n")
        self.bad([*ADVISE, "--no-db", "--python", snippet], snippet, "--python", "--force")
        self.assertEqual(self.leftovers(), [])

    def test_output_checked_before_any_work(self):
        # Was a bug: `run --json /proc/version` was refused only after the whole run (33 s).
        db = self.fresh_db("never.sqlite")
        for force in ([], ["--force"]):
            t0 = time.monotonic()
            self.bad(["run", "--model", "demo:transformer", "--probes", "demo", "--device", "cpu", "--db", db, "--json",
                      "/proc/version", *force], "/proc/version", "--json")
            self.assertLess(time.monotonic() - t0, 20)
        self.assertFalse(os.path.exists(db), "a run was recorded before the output was refused")
        self.bad([*RUN, "--db", db, "--json", "/proc/version", "--force"], "cannot create a file in /proc")

    @unittest.skipUnless(has_mount_namespace(), "needs root and mount namespaces (a small tmpfs that fills up)")
    def test_write_error_is_exit_3_and_nothing_half_written(self):
        mnt = self.path("full")
        os.makedirs(mnt, exist_ok=True)
        script = f"""
            set -e
            mount -t tmpfs -o size=64k tmpfs {mnt}
            printf '{{"run_id": "x", "verdict": "accepted", "criteria": {{}}, "passes": []}}' > {mnt}/out.json
            dd if=/dev/zero of={mnt}/fill bs=4k 2>/dev/null || true
            set +e
            "$CLI" run --model demo:mlp --probes demo --device cpu -q --no-db --outputs --json {mnt}/out.json 2>{mnt}.err
            echo "rc=$?"
            cat {mnt}/out.json; echo
            ls -a {mnt}
        """
        p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "CLI": CLI})
        with open(mnt + ".err") as f:
            err = f.read()
        self.assertIn("rc=3", p.stdout, p.stdout + p.stderr + err)
        self.assertIn(f"{mnt}/out.json", err)
        self.assertIn("No space left on device", err)
        self.assertIn('{"run_id": "x", "verdict": "accepted"', p.stdout)  # the earlier file, unchanged
        self.assertNotIn("partial", p.stdout)

    # ---- inputs that never hang ------------------------------------------------------------
    def test_keep_fp32_file_devices_fifos_and_size(self):
        # Was a bug: /dev/zero was read until bad_alloc (8.8 GB); a FIFO blocked forever.
        fifo = self.path("keep.fifo")
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
        big = self.write("big-keep.txt", "fc1\n" + "# padding\n" * 120000)
        for path, words in (("/dev/zero", ["device"]), (fifo, ["FIFO"]), (big, ["larger than 1 MB"]), (self.dir, ["directory"])):
            t0 = time.monotonic()
            self.bad([*RUN, "--no-db", "--keep-fp32-file", path], path, "--keep-fp32-file", *words, timeout=60)
            self.assertLess(time.monotonic() - t0, 30)
        self.bad([*RUN, "--no-db", "--criteria", fifo], fifo, "--criteria", "FIFO", timeout=60)

    def test_empty_values_are_usage_errors(self):
        for args, flag in ((RUN + ["--no-db", "--json", ""], "--json"), (RUN + ["--no-db", "--keep-fp32-file", ""], "--keep-fp32-file"),
                           (RUN + ["--no-db", "--output", ""], "--output"), (RUN + ["--no-db", "--criteria", ""], "--criteria"),
                           (ADVISE + ["--no-db", "--python", ""], "--python"), (ADVISE + ["--no-db", "--json", ""], "--json"),
                           (TRAIN + ["--no-db", "--json", ""], "--json"), (BENCH + ["--json", ""], "--json")):
            self.bad(args, flag, "empty")

    # ---- stored text never drives the terminal -------------------------------------------------
    def assert_no_raw_controls(self, text, what):
        for c in RAW_CONTROLS:
            self.assertNotIn(c, text, f"{what}: raw {c!r} in output:\n{text!r}")

    def test_show_and_list_escape_stored_text(self):
        # Was a bug: `show` printed reviewer names and annotations raw: a review by
        # $'\e]0;pwned\a\e[2J' set the terminal's title and cleared the screen.
        db = self.fresh_db("escapes.sqlite")
        shutil.copy(self.db, db)
        run_cli("review", self.run_id, "accepted", "--author", HOSTILE_AUTHOR, "--db", db, check_rc=0)
        run_cli("annotate", self.run_id, HOSTILE_NOTE, "--author", HOSTILE_AUTHOR, "--db", db, check_rc=0)
        bundle = self.path("escapes.ampscope")
        run_cli("export", self.run_id, "-o", bundle, "--db", db, "--force", check_rc=0)
        imported = self.fresh_db("imported.sqlite")
        run_cli("import", bundle, "--db", imported, check_rc=0)
        for d in (db, imported):
            p = subprocess.run([CLI, "show", self.run_id, "--db", d], capture_output=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            out = p.stdout.decode("utf-8", "replace")
            self.assert_no_raw_controls(p.stdout.decode("latin-1"), "show")
            self.assertIn("\\x1b]0;pwned\\x07\\x1b[2J\\u009b31mmallory", out)  # visible, not acted on
            self.assertIn("\\x1b[31mred\\x1b[0m first line\nsecond line \\x07", out)  # the note keeps its line break
            for args in (["list"], ["show", self.run_id, "--json"], ["list", "--json"]):
                p = subprocess.run([CLI, *args, "--db", d], capture_output=True, timeout=120)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assert_no_raw_controls(p.stdout.decode("latin-1"), " ".join(args))
                if args[0] == "show":  # the same output, read as JSON
                    self.assertEqual(json.loads(p.stdout)["run_id"], self.run_id)

    # ---- messages that say what is wrong -------------------------------------------------------
    def test_zip_without_version_record(self):
        # Was: "not a zip archive" for a TorchScript zip whose version record was removed.
        broken = self.path("no-version.pt")
        with zipfile.ZipFile(self.model) as z, zipfile.ZipFile(broken, "w") as o:
            for n in z.namelist():
                if not n.endswith("/version"):
                    o.writestr(n, z.read(n))
        err = self.bad(["run", "--model", broken, "--probes", self.probes, "--device", "cpu", "--no-db", "-q"], broken, "'version' record")
        self.assertNotIn("not a zip archive", err)

    def test_criteria_file_named_when_a_head_exceeds_the_outputs(self):
        criteria = self.write("heads.json", '{"heads": [{"name": "h", "begin": 0, "end": 999}]}')
        self.bad([*RUN, "--no-db", "--criteria", criteria], criteria, "heads[0]", "999")

    def test_ops_without_probes_for_a_model_file(self):
        # Was: `ops --model X.pt` without --probes blamed "demo".
        err = self.bad(["ops", "--model", self.model, "--device", "cpu"], "--probes", self.model)
        self.assertFalse(err.split("error: ", 1)[-1].startswith("demo"), err)

    def test_long_values_are_clipped_in_messages(self):
        glob = "x" * 100000
        err = self.bad([*RUN, "--no-db", "--keep-fp32", glob], "--keep-fp32", "(100000 bytes)")
        self.assertLess(len(err), 3000)
        keep = self.write("long-glob.txt", "y" * 900000 + "\n")
        err = self.bad([*RUN, "--no-db", "--keep-fp32-file", keep], keep, "(900000 bytes)")
        self.assertLess(len(err), 3000)

    def test_model_failures_without_cpp_stack_frames(self):
        # Was: a model whose output width depends on the batch failed with LibTorch's C++ stack
        # frames ("Exception raised from ...", "frame #0: ...") printed after the message.
        class VarWidth(torch.nn.Module):
            def forward(self, x):
                return x[:, : x.shape[0]]

        model = self.path("varwidth.pt")
        torch.jit.script(VarWidth()).save(model)
        probes = self.path("p10.pt")
        torch.save({"inputs": torch.randn(10, 8)}, probes)
        rc, out, err = run_cli("run", "--model", model, "--probes", probes, "--device", "cpu", "--no-db", "-q", "--batch-size", "3")
        self.assertEqual(rc, 3, err)
        self.assertIn("must not depend on the batch", err)
        for frame in ("Exception raised from", "frame #", ".so)"):
            self.assertNotIn(frame, err)
        self.assertLessEqual(len(err.strip().splitlines()), 2, err)

    @unittest.skipUnless(has_mount_namespace(), "needs root and mount namespaces (a read-only mount)")
    def test_read_only_database_in_read_only_folder(self):
        # Was: list/show on a read-only database in a read-only folder failed with "attempt to
        # write a readonly database" (WAL mode needs a -shm file next to it).
        mnt = self.path("ro")
        os.makedirs(mnt, exist_ok=True)
        script = f"""
            set -e
            mount -t tmpfs -o size=16m tmpfs {mnt}
            cp {self.db} {mnt}/runs.sqlite
            mount -o remount,ro {mnt}
            set +e
            "$CLI" list --db {mnt}/runs.sqlite; echo "list rc=$?"
            "$CLI" show {self.run_id} --db {mnt}/runs.sqlite; echo "show rc=$?"
            "$CLI" show {self.run_id} --json --db {mnt}/runs.sqlite >/dev/null; echo "json rc=$?"
            "$CLI" export {self.run_id} --db {mnt}/runs.sqlite -o {self.dir}/from-ro.ampscope --force; echo "export rc=$?"
            "$CLI" annotate {self.run_id} note --db {mnt}/runs.sqlite; echo "annotate rc=$?"
        """
        p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "CLI": CLI})
        for cmd in ("list", "show", "json", "export"):
            self.assertIn(f"{cmd} rc=0", p.stdout, p.stdout + p.stderr)
        self.assertIn(self.run_id[:8], p.stdout)
        self.assertNotIn("annotate rc=0", p.stdout)  # writing stays impossible, and says so
        self.assertNotIn("attempt to write a readonly database", p.stderr)

    @unittest.skipUnless(has_mount_namespace(), "needs root and mount namespaces (a read-only mount)")
    def test_read_only_folder_with_a_wal_shows_what_the_wal_holds(self):
        # A database copied with its -wal (a writer still open, or crashed) into a read-only folder:
        # read as immutable, SQLite ignored the -wal and showed the database without the changes it
        # holds, silently (here: a note added last).
        src = self.path("walsrc")
        os.makedirs(src, exist_ok=True)
        db = os.path.join(src, "runs.sqlite")
        shutil.copy(self.db, db)
        hold = sqlite3.connect(db)  # another connection open: closing the CLI's leaves the -wal in place
        try:
            hold.execute("SELECT count(*) FROM runs").fetchone()
            rc, out, err = run_cli("annotate", self.run_id, "written into the wal only", "--db", db)
            self.assertEqual(rc, 0, err)
            self.assertGreater(os.path.getsize(db + "-wal"), 0)
            mnt = self.path("ro-wal")
            os.makedirs(mnt, exist_ok=True)
            script = f"""
                set -e
                mount -t tmpfs -o size=16m tmpfs {mnt}
                cp {db} {mnt}/runs.sqlite
                cp {db}-wal {mnt}/runs.sqlite-wal
                mount -o remount,ro {mnt}
                set +e
                "$CLI" show {self.run_id} --db {mnt}/runs.sqlite; echo "show rc=$?"
                ls {mnt}
            """
            p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=300,
                               env={**os.environ, "CLI": CLI})
        finally:
            hold.close()
        self.assertIn("show rc=0", p.stdout, p.stdout + p.stderr)
        self.assertIn("written into the wal only", p.stdout, p.stdout + p.stderr)
        self.assertEqual(glob.glob(os.path.join(tempfile.gettempdir(), "ampscope-ro-*")), [])  # the private copy removed


class DeleteWatch:
    """inotify on one folder: waits until a file whose name ends with `suffix` is deleted (the
    output guard's probe file: the last step of the check, before the work)."""

    IN_DELETE = 0x200

    def __init__(self, folder):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, os.fsencode(folder), self.IN_DELETE) < 0:
            raise unittest.SkipTest("inotify is not available")

    def wait(self, suffix, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            buf, i = os.read(self.fd, 65536), 0
            while i < len(buf):
                _, _, _, n = struct.unpack_from("iIII", buf, i)
                name = buf[i + 16:i + 16 + n].rstrip(b"\0")
                i += 16 + n
                if name.endswith(suffix):
                    return True
        return False

    def close(self):
        os.close(self.fd)


_incident = None


def incident():
    global _incident
    if _incident is None:
        _incident = Incident(Net, 7, lambda x, y: (x * 400.0, y), {"lr": 1e-3}, {"init_scale": 2.0 ** 12, "growth_interval": 3})
    return _incident


def tearDownModule():
    if _incident is not None:
        _incident.tmp.cleanup()


class HeldOutputs(unittest.TestCase):
    """Issue 28: the output guard's race, input folders, a database link's journals, export onto
    a recorded input, paths that are not UTF-8."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(1)
        cls.model_template = os.path.join(cls.tmp.name, "model.pt")
        torch.jit.script(torch.nn.Sequential(torch.nn.Linear(4, 3)).eval()).save(cls.model_template)

    def setUp(self):  # each test its own files: one that fails must not break the next
        self.dir = tempfile.mkdtemp(dir=self.tmp.name)
        self.model = os.path.join(self.dir, "model.pt")
        shutil.copy(self.model_template, self.model)
        self.probes = os.path.join(self.dir, "probes.pt")
        torch.save({"inputs": torch.randn(500, 4), "labels": torch.randint(0, 3, (500,))}, self.probes)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.dir, *names)

    def run_args(self, out):
        return ["run", "--model", self.model, "--probes", self.probes, "--device", "cpu", "-q", "--no-db", "--json", out]

    def swapped_after_check(self, out, swap):
        """Runs `run --json out`; stops the process right after the guard checked `out` (its probe
        file deleted), calls swap(), lets it go on. Returns (rc, stderr)."""
        watch = DeleteWatch(os.path.dirname(out))
        try:
            # --batch-size 1: the work after the check takes about a second, far longer than this
            # process needs to stop it (a busy machine included)
            p = subprocess.Popen([CLI, *self.run_args(out), "--batch-size", "1"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            seen = watch.wait(b".partial", 120)
            if seen:
                os.kill(p.pid, signal.SIGSTOP)
                try:
                    swap()
                finally:
                    os.kill(p.pid, signal.SIGCONT)
            _, err = p.communicate(timeout=300)
        finally:
            watch.close()
        self.assertTrue(seen, f"the output was never checked: {err}")
        return p.returncode, err

    def test_symbolic_link_swapped_in_after_the_check(self):
        # Was: the path was resolved again at write time: a link to the model swapped in while the
        # run worked made --json replace the model (seen: the model's bytes became the run JSON).
        model_bytes = open(self.model, "rb").read()
        for earlier in (False, True):  # the name held nothing / an earlier run JSON when checked
            with self.subTest(earlier=earlier):
                d = tempfile.mkdtemp(dir=self.dir)
                out = os.path.join(d, "out.json")
                if earlier:
                    run_cli(*self.run_args(out), check_rc=None)
                    self.assertTrue(os.path.isfile(out))

                def swap():
                    if os.path.lexists(out):
                        os.remove(out)
                    os.symlink(self.model, out)

                rc, err = self.swapped_after_check(out, swap)
                self.assertEqual(open(self.model, "rb").read(), model_bytes, "the model was replaced through the link")
                self.assertEqual(rc, 3, err)
                self.assertIn(out, err)
                self.assertIn("while the command worked", err)
                self.assertTrue(os.path.islink(out))
                self.assertEqual([f for f in os.listdir(d) if "partial" in f], [])

    def test_folder_swapped_in_after_the_check(self):
        # Was: a folder path swapped for a link to another folder made the write land there (over a
        # file of the same name: here a copy of the model).
        other = tempfile.mkdtemp(dir=self.dir)
        victim = os.path.join(other, "out.json")
        shutil.copy(self.model, victim)
        victim_bytes = open(victim, "rb").read()
        d = tempfile.mkdtemp(dir=self.dir)
        sub = os.path.join(d, "sub")
        os.makedirs(sub)
        out = os.path.join(sub, "out.json")

        def swap():
            os.rename(sub, sub + ".checked")
            os.symlink(other, sub)

        rc, err = self.swapped_after_check(out, swap)
        self.assertEqual(open(victim, "rb").read(), victim_bytes, "the file in the swapped-in folder was replaced")
        self.assertIn(rc, (0, 1), err)
        with open(os.path.join(sub + ".checked", "out.json")) as f:  # written in the folder that was checked
            self.assertIn("run_id", json.load(f))

    def test_nothing_created_inside_an_input_folder(self):
        # Was: `replay --json checkpoint-N/<a name the folder does not have>` was accepted: the
        # folder then held the replay JSON (as model.safetensors.index.json it no longer loaded).
        inc = incident()
        hf = self.path(f"checkpoint-{K}")
        shutil.copytree(os.path.join(inc.tmp.name, f"checkpoint-{K}"), hf)
        listing = sorted(os.listdir(hf))
        link = self.path("ckpt-link")
        if not os.path.lexists(link):
            os.symlink(hf, link)
        never = self.path("never.sqlite")
        for name in ("model.safetensors.index.json", "new-scaler.pt"):
            for target in (os.path.join(hf, name), os.path.join(link, name)):
                for force in ([], ["--force"]):
                    with self.subTest(target=target, force=force):
                        t0 = time.monotonic()
                        rc, _, err = run_cli("replay", "--model", inc.model, "--checkpoint", hf, "--batch", inc.batch, "--json",
                                             target, "--db", never, "-q", *force)
                        self.assertEqual(rc, 2, err)
                        for word in ("--json", target, "inside the checkpoint (--checkpoint)", "even when forced"):
                            self.assertIn(word, err)
                        self.assertLess(time.monotonic() - t0, 20, "refused only after the replay")
                        self.assertEqual(sorted(os.listdir(hf)), listing)
        self.assertFalse(os.path.exists(never))

    def test_journals_of_the_database_a_link_leads_to(self):
        # Was: with --db link.sqlite -> real.sqlite, `--json real.sqlite-wal --force` was accepted and
        # renamed the JSON over the live WAL of the real database.
        real = self.path("real.sqlite")
        link = self.path("link-to-real.sqlite")
        run_cli("run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect", "-q", "--db", real, check_rc=None)
        if not os.path.lexists(link):
            os.symlink(real, link)
        for suffix in ("-wal", "-shm", "-journal"):
            target = real + suffix
            rc, _, err = run_cli("run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect", "-q", "--db",
                                 link, "--json", target, "--force")
            self.assertEqual(rc, 2, err)
            self.assertIn("run database", err)
            self.assertIn(target, err)
            self.assertFalse(os.path.exists(target) and os.path.getsize(target) and open(target, "rb").read(1) == b"{")
        self.assertTrue(sqlite_ok(real))

    def test_export_never_replaces_a_file_a_run_read(self):
        # Was: `export RUN -o <the run's model> --force` replaced the model with the export.
        db = self.path("export-inputs.sqlite")
        rc, out, err = run_cli("run", "--model", self.model, "--probes", self.probes, "--device", "cpu", "-q", "--db", db, "--json",
                               self.path("export-run.json"))
        self.assertIn(rc, (0, 1), err)
        run_id = json.load(open(self.path("export-run.json")))["run_id"]
        saved = {p: open(p, "rb").read() for p in (self.model, self.probes)}
        for target, role in ((self.model, "the model of run"), (self.probes, "the probe file of run")):
            rc, _, err = run_cli("export", run_id, "--db", db, "-o", target, "--force")
            self.assertEqual(rc, 2, err)
            self.assertIn(role, err)
            self.assertIn("even when forced", err)
        for p, data in saved.items():
            self.assertEqual(open(p, "rb").read(), data, p)
        rc, _, err = run_cli("export", run_id, "--db", db, "-o", self.path("ok.ampscope"))  # the export itself still works
        self.assertEqual(rc, 0, err)

    def test_export_never_replaces_a_replays_inputs(self):
        inc = incident()
        files = {}
        for name in ("model.pt", "batch.pt", "plain.pt", "optimizer.pt", "scaler.pt"):  # copies: the old binary replaced them
            files[name] = self.path("replay-" + name)
            shutil.copy(os.path.join(inc.tmp.name, name), files[name])
        db = self.path("replay-export.sqlite")
        out = self.path("replay-export.json")
        rc, _, err = run_cli("replay", "--model", files["model.pt"], "--checkpoint", files["plain.pt"], "--optimizer-state",
                             files["optimizer.pt"], "--scaler-state", files["scaler.pt"], "--batch", files["batch.pt"], "--db", db,
                             "--json", out, "-q")
        self.assertIn(rc, (0, 1), err)
        rid = json.load(open(out))["run_id"]
        targets = ((files["model.pt"], "the model of run"), (files["batch.pt"], "the batch of run"),
                   (files["plain.pt"], "the checkpoint of run"), (files["optimizer.pt"], "the optimizer state of run"),
                   (files["scaler.pt"], "the scaler state of run"))
        for target, role in targets:
            before = open(target, "rb").read()
            rc, _, err = run_cli("export", rid, "--db", db, "-o", target, "--force")
            self.assertEqual(rc, 2, err)
            self.assertIn(role, err)
            self.assertEqual(open(target, "rb").read(), before, target)

    def test_paths_that_are_not_utf8_are_refused_before_the_work(self):
        # Was: exit 3 after the whole run ("invalid UTF-8 byte" from the JSON writer), nothing written.
        odd = os.path.join(self.dir, "mod\udcffel.pt")  # the byte 0xff in the file name
        shutil.copy(self.model, odd)
        never = self.path("never-utf8.sqlite")
        out = self.path("utf8.json")
        t0 = time.monotonic()
        rc, _, err = run_cli("run", "--model", odd, "--probes", self.probes, "--device", "cpu", "-q", "--db", never, "--json", out)
        self.assertEqual(rc, 2, err)
        self.assertIn("--model", err)
        self.assertIn("not valid UTF-8", err)
        self.assertIn("\\xff", err)  # shown visibly
        self.assertLess(time.monotonic() - t0, 20)
        self.assertFalse(os.path.exists(never))
        self.assertFalse(os.path.exists(out))
        inc = incident()
        odd_batch = os.path.join(self.dir, "batch\udcfe.pt")
        shutil.copy(inc.batch, odd_batch)
        rc, _, err = run_cli("replay", "--model", inc.model, "--checkpoint", *inc.formats["dict"], "--batch", odd_batch, "--no-db", "-q")
        self.assertEqual(rc, 2, err)
        self.assertIn("--batch", err)
        # an output path is not recorded: a JSON written to a name that is not UTF-8 is fine
        odd_out = os.path.join(self.dir, "out\udcfd.json")
        rc, _, err = run_cli(*self.run_args(odd_out))
        self.assertIn(rc, (0, 1), err)
        self.assertTrue(os.path.isfile(odd_out))


if __name__ == "__main__":
    unittest.main()

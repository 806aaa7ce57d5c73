# SPDX-License-Identifier: MIT
"""Hostile and unusual databases and export targets (issue #15): bad input exits 2 with a
message naming the file and what was expected; nothing crashes; no database is created by a
reading command, written when it belongs to another application, replaced by an export, or
left half-written. After every case that touches a database, PRAGMA integrity_check is ok and
the earlier runs are still there."""
import json
import os
import shutil
import sqlite3
import tempfile
import unittest

from common import run_cli

RUN = ["run", "--model", "demo:mlp", "--probes", "demo", "--device", "cpu", "--no-inspect", "-q"]


def sql(db, *statements):
    con = sqlite3.connect(db)
    try:
        for s in statements:
            con.execute(s)
        con.commit()
    finally:
        con.close()


def query(db, q):
    con = sqlite3.connect(db)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


class HostileStore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.template = os.path.join(cls.tmp.name, "template.sqlite")
        for extra in ([], ["--precision", "fp16"]):  # two runs; the first with layer statistics
            args = [a for a in RUN if a != "--no-inspect"] if not extra else RUN + extra
            run_cli(*args, "--db", cls.template)
        rc, out, err = run_cli("list", "--json", "--db", cls.template, check_rc=0)
        cls.runs = [r["run_id"] for r in json.loads(out)]
        assert len(cls.runs) == 2, out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=self.tmp.name)
        self.db = os.path.join(self.dir, "runs.sqlite")
        shutil.copy(self.template, self.db)

    def intact(self, db=None):
        """integrity_check ok and the earlier runs still listed."""
        db = db or self.db
        self.assertEqual(query(db, "PRAGMA integrity_check")[0][0], "ok")
        rc, out, err = run_cli("list", "--json", "--db", db)
        self.assertEqual(rc, 0, err)
        self.assertLessEqual(set(self.runs), {r["run_id"] for r in json.loads(out)})

    def bad(self, args, *words, cwd=None):
        rc, out, err = run_cli(*args) if cwd is None else self.run_in(cwd, *args)
        self.assertEqual(rc, 2, f"{args}: rc {rc}\nstdout {out}\nstderr {err}")
        for w in words:
            self.assertIn(w, err, f"{args}: message lacks {w!r}: {err}")
        return err

    def run_in(self, cwd, *args):
        old = os.getcwd()
        os.chdir(cwd)
        try:
            return run_cli(*args)
        finally:
            os.chdir(old)

    def leftovers(self):
        return sorted(f for f in os.listdir(self.dir) if "partial" in f or f.startswith("."))

    # ---- 1. export never destroys a file it was not asked to replace ----
    def test_export_refuses_the_open_database_by_identity(self):
        link = os.path.join(self.dir, "link.sqlite")
        os.symlink(self.db, link)
        hard = os.path.join(self.dir, "hard.sqlite")
        os.link(self.db, hard)
        for target, cwd in ((self.db, None), (link, None), (hard, None), ("runs.sqlite", self.dir),
                            ("./sub/../runs.sqlite", self.dir)):
            os.makedirs(os.path.join(self.dir, "sub"), exist_ok=True)
            for force in ([], ["--force"]):
                self.bad(["export", self.runs[0], "-o", target, "--db", self.db, *force],
                         target, "run database being exported from", cwd=cwd)
                self.intact()
        self.assertEqual(self.leftovers(), [])

    def test_export_refuses_other_files_without_force(self):
        notes = os.path.join(self.dir, "notes.txt")
        with open(notes, "w") as f:
            f.write("precious\n")
        other_db = os.path.join(self.dir, "other.sqlite")
        shutil.copy(self.template, other_db)
        for target in (notes, other_db):
            self.bad(["export", self.runs[0], "-o", target, "--db", self.db], target, "not an ampscope export", "--force")
        with open(notes) as f:
            self.assertEqual(f.read(), "precious\n")
        self.intact(other_db)
        bundle = os.path.join(self.dir, "a.ampscope")
        run_cli("export", self.runs[0], "-o", bundle, "--db", self.db, check_rc=0)
        run_cli("export", *self.runs, "-o", bundle, "--db", self.db, check_rc=0)  # an export may be replaced
        run_cli("export", self.runs[0], "-o", notes, "--db", self.db, "--force", check_rc=0)
        fresh = os.path.join(self.dir, "fresh.sqlite")
        rc, out, err = run_cli("import", notes, "--db", fresh, check_rc=0)
        self.assertIn("imported 1 run(s)", out)
        self.assertEqual(self.leftovers(), [])
        self.intact()

    def test_failed_export_leaves_nothing_behind(self):
        self.bad(["export", self.runs[0], "-o", os.path.join(self.dir, "no", "such", "dir", "x.ampscope"), "--db", self.db],
                 "cannot create a file")
        self.bad(["export", self.runs[0], "-o", self.dir, "--db", self.db], "is a directory")
        self.damage_chunk(self.runs_with_layers()[0])
        out = os.path.join(self.dir, "out.ampscope")
        self.bad(["export", self.runs_with_layers()[0], "-o", out, "--db", self.db], self.db, "not exported")
        self.assertFalse(os.path.exists(out))
        self.assertEqual(self.leftovers(), [])
        self.intact()

    # ---- 2. reading commands never create; foreign databases are not written ----
    def test_reading_commands_never_create_a_database(self):
        missing = os.path.join(self.dir, "missing.sqlite")
        for args in (["list"], ["show", "abc"], ["export", "abc", "-o", os.path.join(self.dir, "x.ampscope")],
                     ["annotate", "abc", "note"], ["review", "abc", "accepted"]):
            self.bad([*args, "--db", missing], missing, "file not found")
            self.assertFalse(os.path.exists(missing), args)

    def test_a_foreign_sqlite_file_is_refused_unless_asked(self):
        people = os.path.join(self.dir, "people.sqlite")
        sql(people, "CREATE TABLE people(name TEXT)", "INSERT INTO people VALUES('ada')")
        with open(people, "rb") as f:
            before = f.read()
        for args in (RUN, ["list"], ["show", "abc"], ["import", self.db], ["annotate", "abc", "x"],
                     ["train", "--model", "demo:mlp", "--data", "demo", "--steps", "1", "--device", "cpu", "-q"]):
            self.bad([*args, "--db", people], people, "not an ampscope run database", "people")
            with open(people, "rb") as f:
                self.assertEqual(f.read(), before, args)
        self.assertFalse(os.path.exists(people + "-wal"))
        rc, out, err = run_cli(*RUN, "--db", people, "--init-db")
        self.assertIn(rc, (0, 1), err)
        self.assertEqual(query(people, "SELECT name FROM people"), [("ada",)])
        self.assertEqual(query(people, "SELECT count(*) FROM runs"), [(1,)])
        self.assertEqual(query(people, "PRAGMA integrity_check")[0][0], "ok")

    def test_empty_paths_and_empty_files(self):
        for args in (["list"], RUN, ["show", "abc"]):
            self.bad([*args, "--db", ""], "--db", "empty path")
        empty = os.path.join(self.dir, "empty.sqlite")
        open(empty, "w").close()
        rc, out, err = run_cli("list", "--db", empty, check_rc=0)
        self.assertIn("0 run(s)", out)
        rc, out, err = run_cli(*RUN, "--db", empty)
        self.assertIn(rc, (0, 1), err)
        self.assertEqual(query(empty, "SELECT count(*) FROM runs"), [(1,)])
        self.assertEqual(query(empty, "PRAGMA integrity_check")[0][0], "ok")

    # ---- 3. impossible header values ----
    def test_impossible_schema_versions(self):
        version = query(self.db, "PRAGMA user_version")[0][0]  # what this build writes
        for v in (-1, -2147483648, 2147483647):
            sql(self.db, f"PRAGMA user_version={v}")
            for args in (["list"], ["show", self.runs[0]], ["export", self.runs[0], "-o", os.path.join(self.dir, "x.ampscope")],
                         RUN):
                self.bad([*args, "--db", self.db], self.db, f"impossible schema version {v}")
        sql(self.db, "PRAGMA user_version=99")
        self.bad(["list", "--db", self.db], self.db, "newer ampscope", "99")
        sql(self.db, f"PRAGMA user_version={version}")
        self.intact()

    # ---- 4. malformed JSON columns ----
    def test_malformed_json_columns_name_file_run_and_column(self):
        run = self.runs[0]
        sql(self.db, "DROP TRIGGER runs_criteria_immutable", f"UPDATE runs SET header_json='{{not json' WHERE uuid='{run}'")
        for args in (["show", run], ["show", run, "--json"]):
            self.bad([*args, "--db", self.db], self.db, run, "runs.header_json")
        self.bad(["export", run, "-o", os.path.join(self.dir, "x.ampscope"), "--db", self.db], self.db, run, "runs.header_json")
        other = self.runs[1]
        sql(self.db, f"UPDATE criteria_results SET samples_json='[1' WHERE comparison_id IN "
                     f"(SELECT c.id FROM comparisons c JOIN runs r ON r.id=c.run_id WHERE r.uuid='{other}')")
        self.bad(["show", other, "--db", self.db], self.db, other, "criteria_results.samples_json")
        self.assertEqual(self.leftovers(), [])
        self.intact()

    def test_malformed_benchmark_and_training_json(self):
        run = self.runs[0]
        sql(self.db, "INSERT INTO benchmarks(uuid, run_id, validated, model_sha256, probes_sha256, device, created_at, "
                     f"result_json) VALUES('b1', (SELECT id FROM runs WHERE uuid='{run}'), 1, '', '', 'cpu', '2025', '{{oops')")
        self.bad(["show", run, "--db", self.db], self.db, run, "benchmarks.result_json")
        rc, out, err = run_cli("train", "--model", "demo:mlp", "--data", "demo", "--steps", "2", "--batch-size", "8",
                               "--device", "cpu", "-q", "--db", self.db)
        self.assertEqual(rc, 0, err)
        (train,) = [u for (u,) in query(self.db, "SELECT uuid FROM runs WHERE kind='train'")]
        sql(self.db, "DROP TRIGGER runs_criteria_immutable", f"UPDATE runs SET header_json='[1,' WHERE uuid='{train}'")
        self.bad(["show", train, "--db", self.db], self.db, train, "runs.header_json")
        sql(self.db, f"UPDATE runs SET header_json='{{\"batch_size\": \"many\"}}' WHERE uuid='{train}'")
        self.bad(["show", train, "--db", self.db], self.db, train, "runs.header_json")
        self.intact()

    # ---- 5. one damaged layer chunk ----
    def runs_with_layers(self):
        return [u for (u,) in query(self.db, "SELECT DISTINCT r.uuid FROM runs r JOIN passes p ON p.run_id=r.id "
                                             "JOIN layer_chunks c ON c.pass_id=p.id")]

    def damage_chunk(self, run):
        sql(self.db, "UPDATE layer_chunks SET data=X'414C4331FFFFFFFF' WHERE pass_id=(SELECT max(p.id) FROM passes p "
                     f"JOIN runs r ON r.id=p.run_id WHERE r.uuid='{run}')")

    def test_a_damaged_layer_chunk_shows_what_is_intact(self):
        (run,) = self.runs_with_layers()
        rc, out, err = run_cli("show", run, "--json", "--db", self.db, check_rc=0)
        healthy = json.loads(out)
        self.damage_chunk(run)
        rc, out, err = run_cli("show", run, "--json", "--db", self.db, check_rc=0)
        doc = json.loads(out)
        self.assertEqual(len(doc["damaged"]), 1, doc.get("damaged"))
        self.assertIn("malformed", doc["damaged"][0])
        self.assertEqual(len(doc["passes"]), len(healthy["passes"]))
        self.assertEqual(doc["passes"][0]["layers"], healthy["passes"][0]["layers"])  # the reference pass is intact
        self.assertEqual(doc["passes"][-1]["layers"], [])
        self.assertEqual(doc["comparisons"], healthy["comparisons"])
        self.assertIn("damaged", err)
        rc, out, err = run_cli("show", run, "--layers", "--db", self.db, check_rc=0)
        self.assertIn("DAMAGED:", out)
        self.assertIn("verdict:", out)
        self.intact()


if __name__ == "__main__":
    unittest.main()

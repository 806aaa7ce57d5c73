# SPDX-License-Identifier: MIT
"""Incident replay's inputs and output (issue 21), on the planted backward incident of
test_replay (a Python loop with torch.amp.GradScaler and Adam, state of step K-1 saved):
- `--json` goes through the output guard before any work: never the model, checkpoint (a file,
  or any file of a Trainer folder), batch, optimizer or scaler state file or the database, even
  with --force; never a folder; another file only with --force; an earlier replay JSON freely;
- a standalone .safetensors checkpoint (weights only, optimizer and scaler state beside it)
  replays bitwise like the plain state_dict and like Python;
- every bad input of the issue's list exits 2 naming the file and what was wrong: malformed
  safetensors (oversized, truncated or non-JSON header, overlapping, out-of-order,
  out-of-range offsets, holes, unknown dtype, wrong size), batches whose shape or dtype do not
  fit the model, Trainer folders missing their model file or a shard, scaler states without
  `scale` or with out-of-range factors, optimizer states whose parameter count, order or
  shapes do not match."""
import json
import os
import resource
import struct
import subprocess
import tempfile
import time
import unittest

import torch

from common import as_float, run_cli
from test_replay import K, Incident, Net, replay


_incident = None


def backward_incident():
    """The planted backward incident, built once for every class here (its files do not collide:
    each test writes under names of its own, and none changes the saved state)."""
    global _incident
    if _incident is None:
        _incident = Incident(Net, 7, lambda x, y: (x * 400.0, y), {"lr": 1e-3}, {"init_scale": 2.0 ** 12, "growth_interval": 3})
    return _incident


def tearDownModule():
    if _incident is not None:
        _incident.tmp.cleanup()


DEEP = b"[" * 100_000 + b"]" * 100_000  # a JSON value nested 100k deep


def write_safetensors(path, header, data=b"", length=None):
    raw = json.dumps(header).encode() if isinstance(header, dict) else header
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if length is None else length) + raw + data)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


class ReplayOutputGuard(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = backward_incident()
        cls.d = cls.inc.tmp.name
        cls.hf = os.path.join(cls.d, f"checkpoint-{K}")

    def path(self, name):
        return os.path.join(self.d, name)

    def replay_to(self, ckpt_args, target, *extra, db=None):
        return run_cli("replay", "--model", self.inc.model, "--checkpoint", *ckpt_args, "--batch", self.inc.batch, "--json", target,
                       "--db", db or self.path("runs.sqlite"), "-q", *extra)

    def refused(self, ckpt_args, target, force, *named, db=None):
        before = read_bytes(target) if os.path.isfile(target) else None
        never = self.path("never.sqlite")
        t0 = time.monotonic()
        rc, _, err = self.replay_to(ckpt_args, target, *force, db=db or never)
        self.assertEqual(rc, 2, err)
        for n in ("--json", target, *named):
            self.assertIn(n, err)
        self.assertLess(time.monotonic() - t0, 20, "refused only after the replay")
        self.assertFalse(os.path.exists(never), "the replay ran (and was recorded) before the output was refused")
        if before is not None:
            self.assertEqual(read_bytes(target), before, f"{target} was changed")

    def test_json_never_replaces_an_input(self):
        inc, p = self.inc, self.path
        plain = inc.formats["state_dict"]
        cases = [
            (plain, inc.batch, "--batch"),
            (plain, inc.model, "--model"),
            (plain, p("plain.pt"), "--checkpoint"),
            (plain, p("optimizer.pt"), "--optimizer-state"),
            (plain, p("scaler.pt"), "--scaler-state"),
            ([self.hf], os.path.join(self.hf, "model.safetensors"), "--checkpoint"),
            ([self.hf], os.path.join(self.hf, "optimizer.pt"), "--checkpoint"),
            ([self.hf], os.path.join(self.hf, "trainer_state.json"), "--checkpoint"),
        ]
        db = p("runs.sqlite")
        run_cli("replay", "--model", inc.model, "--checkpoint", *plain, "--batch", inc.batch, "--db", db, "-q")
        self.assertTrue(os.path.exists(db))
        for force in ([], ["--force"]):
            for args, target, role in cases:
                with self.subTest(target=os.path.basename(target), force=force):
                    self.refused(args, target, force, role, "even when forced")
            with self.subTest(target="the database", force=force):
                self.refused(plain, db, force, "run database", "even when forced", db=db)

    def test_json_at_a_folder(self):
        for force in ([], ["--force"]):
            self.refused([self.hf], self.hf, force, "is a directory")

    def test_other_files_only_with_force(self):
        notes = self.path("notes.txt")
        with open(notes, "w") as f:
            f.write("precious\n")
        self.refused(self.inc.formats["dict"], notes, [], "not an ampscope replay JSON", "--force")
        earlier = self.path("earlier.json")
        for _ in range(2):  # an earlier replay JSON is replaced without --force
            rc, _, err = self.replay_to(self.inc.formats["dict"], earlier)
            self.assertEqual(rc, 1, err)
        with open(earlier) as f:
            self.assertEqual(json.load(f)["kind"], "replay")
        rc, _, err = self.replay_to(self.inc.formats["dict"], notes, "--force")
        self.assertEqual(rc, 1, err)
        with open(notes) as f:
            self.assertEqual(json.load(f)["kind"], "replay")
        self.assertEqual([f for f in os.listdir(self.d) if "partial" in f], [])


class ReplayExchange(unittest.TestCase):
    """A recorded replay is exportable for teammates (issue 21): export, import into another
    database, and `show` gives the same replay JSON, with its notes (export said 'key spec not
    found': the exporter read every run as a comparison)."""

    @classmethod
    def setUpClass(cls):
        cls.inc = backward_incident()
        cls.d = cls.inc.tmp.name

    def test_export_and_import_a_replay(self):
        p = lambda n: os.path.join(self.d, n)  # noqa: E731
        rc, out, err = run_cli("replay", "--model", self.inc.model, "--checkpoint", *self.inc.formats["state_dict"], "--batch",
                               self.inc.batch, "--db", p("a.sqlite"), "--json", p("r.json"), "-q")
        self.assertIn(rc, (0, 1), err)
        with open(p("r.json")) as f:
            rid = json.load(f)["run_id"]
        rc, out, err = run_cli("annotate", rid, "seen by the team", "--db", p("a.sqlite"))
        self.assertEqual(rc, 0, err)
        rc, out, err = run_cli("export", rid, "--db", p("a.sqlite"), "-o", p("x.ampscope"))
        self.assertEqual(rc, 0, err)
        for _ in range(2):  # the second import finds it there
            rc, out, err = run_cli("import", p("x.ampscope"), "--db", p("b.sqlite"))
            self.assertEqual(rc, 0, err)
        shown = [run_cli("show", rid, "--json", "--db", p(db)) for db in ("a.sqlite", "b.sqlite")]
        for rc, out, err in shown:
            self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(shown[0][1]), json.loads(shown[1][1]))
        rc, out, err = run_cli("list", "--db", p("b.sqlite"))
        self.assertEqual(out.count(rid[:8]), 1, out)
        self.assertIn("[1 notes]", out)  # the note travelled with it


class SafetensorsCheckpoint(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = backward_incident()
        cls.d = cls.inc.tmp.name

    def test_standalone_file_replays_like_the_state_dict(self):
        from safetensors.torch import save_file
        inc, d = self.inc, self.d
        st = os.path.join(d, "weights.safetensors")
        save_file({k: v.contiguous() for k, v in inc.state[0].items()}, st, metadata={"format": "pt"})
        side = ["--optimizer-state", os.path.join(d, "optimizer.pt"), "--scaler-state", os.path.join(d, "scaler.pt")]
        rc_p, plain = replay(inc.model, inc.formats["state_dict"], inc.batch)
        rc_s, got = replay(inc.model, [st, *side], inc.batch)
        self.assertEqual((rc_p, rc_s), (1, 1), got)
        self.assertEqual(got["checkpoint"]["format"], "safetensors")
        self.assertEqual(got["first_nonfinite"], plain["first_nonfinite"])
        self.assertEqual(got["steps"], plain["steps"], "the same replay, bitwise")
        want = inc.python_step()
        step = got["steps"][0]
        self.assertEqual((as_float(step["loss_ref"]), as_float(step["scale"]), step["skipped"], as_float(step["scale_after"])),
                         (want["ref"]["loss"], want["amp"]["scale"], want["amp"]["skipped"], want["amp"]["scale_after"]))
        for p in step["params"]:
            self.assertEqual((p["sha256_ref"], p["sha256_amp"]), (want["ref"]["sha"][p["name"]], want["amp"]["sha"][p["name"]]))

    def test_malformed_files_exit_2_named(self):
        d, inc = self.d, self.inc
        w = inc.state[0]["head.bias"].contiguous()  # 3 floats, 12 bytes
        entry = lambda dtype="F32", shape=(3,), off=(0, 12): {"dtype": dtype, "shape": list(shape), "data_offsets": list(off)}
        data = w.numpy().tobytes()
        cases = {
            "oversized": ({}, b"", 200_000_000, "header length", "at most 100000000"),
            "truncated": ({}, b"", 64, "header length", "only 2 follow"),
            "notjson": (b"{not json", b"", None, "header", "not valid JSON"),
            "overlap": ({"a": entry(), "b": entry()}, data, None, "overlaps the previous tensor", "'data_offsets'"),
            "outoforder": ({"a": entry(off=(12, 0))}, data, None, "end before begin", "'data_offsets'"),
            "outofrange": ({"a": entry(off=(0, 12)), "b": entry(off=(12, 24))}, data, None, "cover 24 bytes", "holds 12"),
            "hole": ({"a": entry(off=(4, 16))}, data + data[:4], None, "a hole in the data", "'data_offsets'"),
            "dtype": ({"a": entry(dtype="F4")}, data, None, "dtype \"F4\" is not read", "F8_E4M3"),
            "size": ({"a": entry(shape=(4,))}, data, None, "span 12 bytes", "needs 4 x 4"),
            # nested 100k deep: printing it for the message overflowed the stack (signal 11)
            "deepmetadata": (b'{"__metadata__": {"x": ' + DEEP + b"}}", b"", None, "header", "nests deeper than 64 levels"),
            "deepdtype": (b'{"a": {"dtype": ' + DEEP + b', "shape": [3], "data_offsets": [0, 12]}}', data, None, "header",
                          "nests deeper than 64 levels"),
            # NUL padding: nlohmann ended the text at the NUL and accepted it (the format pads with spaces)
            "nulpad": (json.dumps({"head.bias": entry()}).encode() + b"\0" * 4, data, None, "header", "NUL byte"),
            # zero elements, but strides of 2^124: exit 3 ("Stride calculation overflowed")
            "zerohuge": ({"a": entry(shape=(0, 2 ** 62, 2 ** 62), off=(0, 0)), "head.bias": entry()}, data, None, "'a'",
                         "overflows"),
        }
        for name, (header, payload, length, *named) in cases.items():
            path = os.path.join(d, f"bad-{name}.safetensors")
            write_safetensors(path, header, payload, length)
            for args in ([path, "--optimizer-state", os.path.join(d, "optimizer.pt")],):
                with self.subTest(case=name):
                    rc, err = replay(inc.model, args, inc.batch)
                    self.assertEqual(rc, 2, err)
                    for n in (path, *named):
                        self.assertIn(n, err)
                    self.assertNotIn("terminate called", err)


    def test_many_entries_parse_in_n_log_n(self):
        """2e5 entries: the header parse was quadratic (1e5 entries took 160 s); refused for the keys
        that do not match the model, in seconds."""
        n = 200_000
        header = {f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(n)}
        path = os.path.join(self.d, "many.safetensors")
        write_safetensors(path, header)
        t0 = time.monotonic()
        rc, out, err = run_cli("replay", "--model", self.inc.model, "--checkpoint", path, "--batch", self.inc.batch, "-q",
                               timeout=120)
        self.assertEqual(rc, 2, err[:2000])
        self.assertIn("(200000 in all)", err)  # keys the model does not have: the header was read whole
        self.assertLess(time.monotonic() - t0, 60)

    def test_large_file_is_mapped_not_copied(self):
        """A valid 3 GB safetensors file (sparse) under an 8 GB address-space limit: it was read into a
        buffer and copied into a tensor (6 GB besides LibTorch's own mappings): exit 3, "DefaultCPUAllocator:
        can't allocate memory: you tried to allocate 3221225472 bytes".
        Mapped, it loads; its key, which the model does not have, is then refused by name."""
        if os.environ.get("AMPSCOPE_ASAN") == "1":
            self.skipTest("ASan reserves terabytes of shadow address space: it cannot start under an address-space limit")
        path = os.path.join(self.d, "big.safetensors")
        size = 3 << 30
        raw = json.dumps({"big": {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}}).encode()
        raw += b" " * (-(len(raw) + 8) % 8)  # data aligned, as the reference writer pads
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
        os.truncate(path, 8 + len(raw) + size)
        limit = 8 << 30

        def cap():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        try:
            p = subprocess.run([os.environ.get("AMPSCOPE_CLI", "ampscope-cli"), "replay", "--model", self.inc.model,
                                "--checkpoint", path, "--batch", self.inc.batch, "-q"], capture_output=True, text=True,
                               timeout=120, preexec_fn=cap, stdin=subprocess.DEVNULL)
        finally:
            os.unlink(path)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("big", p.stderr)
        self.assertNotIn("bad_alloc", p.stderr)


class BadReplayInputs(unittest.TestCase):
    """The issue's list of bad inputs that test_replay does not already cover, each exit 2 named."""

    @classmethod
    def setUpClass(cls):
        cls.inc = backward_incident()
        cls.d = cls.inc.tmp.name

    def path(self, name):
        return os.path.join(self.d, name)

    def bad(self, ckpt_args, named, batch=None):
        rc, err = replay(self.inc.model, ckpt_args, batch or self.inc.batch)
        self.assertEqual(rc, 2, err)
        for n in named:
            self.assertIn(n, err)
        self.assertNotIn("terminate called", err)

    def test_batch_shape_and_dtype(self):
        x, y = self.inc.x, self.inc.y
        batches = {
            "int-inputs.pt": ({"inputs": x.round().long(), "labels": y}, "int-inputs.pt"),
            "rank.pt": ({"inputs": x[:, None, :], "labels": y}, "rank.pt"),
            "float-labels.pt": ({"inputs": x, "labels": y.float()}, "labels"),
            "short-labels.pt": ({"inputs": x, "labels": y[:5]}, "labels"),
        }
        for name, (content, named) in batches.items():
            torch.save(content, self.path(name))
            with self.subTest(batch=name):
                self.bad(self.inc.formats["dict"], [self.path(name), named], batch=self.path(name))

    def test_trainer_folder_missing_files(self):
        empty = self.path("checkpoint-90")
        os.makedirs(empty, exist_ok=True)
        torch.save({}, os.path.join(empty, "optimizer.pt"))
        self.bad([empty], [empty, "model.safetensors", "pytorch_model.bin"])
        sharded = self.path("checkpoint-91")
        os.makedirs(sharded, exist_ok=True)
        with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": {"fc1.weight": "model-00001-of-00002.safetensors"}}, f)
        self.bad([sharded], ["model-00001-of-00002.safetensors", "missing", "index.json"])
        deep = self.path("checkpoint-92")  # an index JSON nested 100k deep: refused, named, no crash
        os.makedirs(deep, exist_ok=True)
        with open(os.path.join(deep, "model.safetensors.index.json"), "wb") as f:
            f.write(b'{"metadata": {"x": ' + DEEP + b'}, "weight_map": {}}')
        self.bad([deep], ["model.safetensors.index.json", "nests deeper than 64 levels"])

    def test_fifo_and_devices_refused_without_waiting(self):
        """A FIFO or a device where a file is expected (the checkpoint, --batch, --optimizer-state,
        a Trainer folder's weights): opening a FIFO blocked until a writer came, ignoring SIGTERM,
        and /dev/zero never ended. Refused by name at once (issue 28)."""
        fifo = self.path("pipe.pt")
        if not os.path.exists(fifo):
            os.mkfifo(fifo)
        folder = self.path("checkpoint-93")
        os.makedirs(folder, exist_ok=True)
        torch.save(self.inc.state[1], os.path.join(folder, "optimizer.pt"))
        if not os.path.exists(os.path.join(folder, "model.safetensors")):
            os.mkfifo(os.path.join(folder, "model.safetensors"))
        plain = self.inc.formats["state_dict"][0]
        cases = {
            "checkpoint": ([fifo], self.inc.batch, fifo, "a FIFO"),
            "batch": (self.inc.formats["dict"], fifo, fifo, "a FIFO"),
            "optimizer-state": ([plain, "--optimizer-state", fifo], self.inc.batch, fifo, "a FIFO"),
            "trainer member": ([folder], self.inc.batch, "model.safetensors", "a FIFO"),
            "batch device": (self.inc.formats["dict"], "/dev/zero", "/dev/zero", "a device"),
        }
        for name, (ckpt, batch, *named) in cases.items():
            with self.subTest(case=name):
                rc, out, err = run_cli("replay", "--model", self.inc.model, "--checkpoint", *ckpt, "--batch", batch, "-q",
                                       timeout=60)
                self.assertEqual(rc, 2, err)
                for n in named:
                    self.assertIn(n, err)

    def test_scaler_states(self):
        base = self.inc.state[2]
        cases = {
            "noscale": ({k: v for k, v in base.items() if k != "scale"}, "'scale'"),
            "negscale": (dict(base, scale=-1.0), "expected a number >= 0 within float32's range"),
            "hugescale": (dict(base, scale=1e39), "expected a number >= 0 within float32's range"),  # was exit 3
            "nanscale": (dict(base, scale=float("nan")), "scale"),
            "growth": (dict(base, growth_factor=1.0), "growth_factor"),
            "backoff0": (dict(base, backoff_factor=0.0), "backoff_factor"),
            "interval": (dict(base, growth_interval=0), "growth_interval"),
            "tracker": (dict(base, _growth_tracker=-1), "_growth_tracker"),
        }
        for name, (state, named) in cases.items():
            f = self.path(f"scaler-{name}.pt")
            torch.save(state, f)
            with self.subTest(scaler=name):
                self.bad([self.path("dict.pt"), "--scaler-state", f], [f, named])

    def test_optimizer_states(self):
        osd = self.inc.state[1]
        order = json.loads(json.dumps(osd["param_groups"]))
        order[0]["params"] = [1, 0, 2, 3]
        fewer = json.loads(json.dumps(osd["param_groups"]))
        fewer[0]["params"] = [0, 1, 2]
        shape = {k: dict(v) for k, v in osd["state"].items()}
        shape[0]["exp_avg"] = torch.zeros(3, 3)
        cases = {
            "order": ({"state": osd["state"], "param_groups": order}, ["param_groups[0].params", "index 1 where 0 was expected"]),
            "count": ({"state": osd["state"], "param_groups": fewer}, ["hold 3 parameters", "4 trainable"]),
            "shape": ({"state": shape, "param_groups": osd["param_groups"]}, ["state.0", "fc1.weight"]),
            "nostate": ({"param_groups": osd["param_groups"]}, ["state", "missing"]),
        }
        for name, (state, named) in cases.items():
            f = self.path(f"opt-{name}.pt")
            torch.save(state, f)
            with self.subTest(optimizer=name):
                self.bad([self.path("dict.pt"), "--optimizer-state", f], [f, *named])


if __name__ == "__main__":
    unittest.main()

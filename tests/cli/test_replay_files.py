# SPDX-License-Identifier: MIT
"""Checkpoint files users really have (issue 28: "Files users have that are refused or crash",
"Out of memory", "Messages"), on the planted backward incident of test_replay:
- Python objects LibTorch cannot build anywhere in a checkpoint (`pathlib.Path`, an `Enum`
  member, numpy scalars and arrays, a dataclass, a `set`, `bytes`, `complex`, a `torch.dtype`,
  Lightning's AttributeDict) are skipped and named in the warnings; the rest of the file is
  read and the replay equals the one of the plain state_dict (which test_replay holds equal to
  Python's);
- a `torch.amp.GradScaler` pickled as an object (not its `state_dict()`) is read as its state:
  the same scale and skip decision as Python's GradScaler loaded from the same state;
- a pickle whose shared references make 2^40 paths is read in linear time;
- meta and sparse weights are refused naming the key and what was expected;
- `PK` followed by 4 GB is refused by name without reading 4 GB into memory."""
import dataclasses
import enum
import os
import pathlib
import resource
import struct
import subprocess
import tempfile
import threading
import time
import unittest
import zipfile

import numpy as np
import torch

from common import CLI, as_float
from test_replay import K, replay
from test_replay_inputs import backward_incident, tearDownModule  # noqa: F401  (cleans the shared incident)


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Opts:
    lr: float = 1e-3
    name: str = "run"


def hyper_parameters():
    """What users put in Lightning's `hyper_parameters` (save_hyperparameters) and LibTorch cannot build."""
    hp = {"data_dir": pathlib.Path("/data/train"), "color": Color.RED, "np_lr": np.float32(1e-3), "np_steps": np.int64(7),
          "np_mean": np.arange(3, dtype=np.float64), "opts": Opts(), "tags": {"a", "b"}, "frozen": frozenset({1}),
          "token": b"\x00\x01", "z": 1 + 2j, "dtype": torch.float32, "size": torch.Size([2, 3]), "plain": 3}
    try:
        from lightning_fabric.utilities.data import AttributeDict
        hp = AttributeDict(hp)
    except ImportError:
        pass
    return hp


def run_measured(args, timeout=120, limit_as=None):
    """Runs ampscope-cli; returns (rc, stdout + stderr, seconds, peak resident MB) of that process alone."""
    def limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as log:
        p = subprocess.Popen([CLI, *map(str, args)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=limit)
        timer = threading.Timer(timeout, p.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)  # this process's own peak, not the test's other children's
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        out = log.read().decode(errors="replace")
    secs = time.monotonic() - t0
    if secs >= timeout:
        raise AssertionError(f"ampscope-cli {' '.join(map(str, args))} still running after {timeout} s")
    return p.returncode, out, secs, usage.ru_maxrss / 1024


class PickledObjects(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = backward_incident()
        cls.d = cls.inc.tmp.name
        cls.plain = replay(cls.inc.model, cls.inc.formats["dict"], cls.inc.batch)

    def path(self, name):
        return os.path.join(self.d, name)

    def assert_same_replay(self, got, what):
        rc_p, plain = self.plain
        self.assertIn(rc_p, (0, 1), plain)
        self.assertEqual(got[0], rc_p, f"{what}: {got[1]}")
        self.assertEqual(got[1]["steps"], plain["steps"], f"{what}: the same replay as the plain dict, bitwise")

    def lightning(self, name, **extra):
        sd, osd, ssd = self.inc.state
        f = self.path(name)
        torch.save(dict({"epoch": 0, "global_step": K, "pytorch-lightning_version": "2.6.0",
                         "state_dict": {"model." + k: v for k, v in sd.items()}, "optimizer_states": [osd],
                         "lr_schedulers": [], "MixedPrecision": ssd}, **extra), f)
        return f

    def test_objects_libtorch_cannot_build_are_skipped_and_named(self):
        """Each of them made the whole file unreadable: exit 2, "INTERNAL ASSERT FAILED ... expected int"."""
        hp = hyper_parameters()
        f = self.lightning("objects.ckpt", hyper_parameters=hp, hparams_name="kwargs",
                           callbacks={"ModelCheckpoint": {"dirpath": pathlib.Path("/ckpt"), "best_k_models": {}}},
                           loops={"fit_loop": {"state_dict": {"seen": {1, 2}}}})
        got = replay(self.inc.model, [f, "--strip-prefix", "model."], self.inc.batch)
        self.assertNotIsInstance(got[1], str, got[1])
        self.assert_same_replay(got, "objects in hyper_parameters")
        rc, out, _, _ = run_measured(["replay", "--model", self.inc.model, "--checkpoint", f, "--strip-prefix", "model.",
                                      "--batch", self.inc.batch])
        self.assertIn(rc, (0, 1), out)
        for named in ("pathlib.PosixPath", "Color", "numpy", "Opts", "builtins.set", "builtins.frozenset", "bytes"):
            self.assertIn(named, out, "named in the warnings")
        for read in ("complex", "torch.Size", "float32"):  # read, not skipped
            self.assertNotIn(read, out.split("skipped pickled Python objects")[-1].split("\n")[0])

    def test_integers_beyond_32_bits(self):
        """Python pickles an int in the fewest bytes (LONG1 of 5 bytes for 2^32), LibTorch reads only
        8: 'Expected length to be 8, got 5' made the file unreadable; an int beyond int64 (a
        growth_interval of 10^20) gave 'got 9' without the field."""
        f = self.lightning("integers.ckpt", hyper_parameters={"tokens": 3_000_000_000, "seed": 2 ** 40, "neg": -2 ** 40,
                                                              "max": 2 ** 63 - 1, "min": -2 ** 63, "huge": 2 ** 70})
        got = replay(self.inc.model, [f, "--strip-prefix", "model."], self.inc.batch)
        self.assertNotIsInstance(got[1], str, got[1])
        self.assert_same_replay(got, "large integers in hyper_parameters")
        sd, osd, ssd = self.inc.state
        bad = self.path("interval-1e20.pt")
        torch.save({"model": sd, "optimizer": osd, "scaler": dict(ssd, growth_interval=10 ** 20)}, bad)
        rc, out, _, _ = run_measured(["replay", "--model", self.inc.model, "--checkpoint", bad, "--batch", self.inc.batch, "-q"])
        self.assertEqual(rc, 2, out)
        for n in (bad, "growth_interval", "expected a number"):
            self.assertIn(n, out)

    def test_real_lightning_checkpoint(self):
        """A checkpoint written by pytorch-lightning's own Trainer, with those objects in its hyper-parameters."""
        try:
            import pytorch_lightning as pl
        except ImportError:
            self.skipTest("pytorch_lightning is not installed")
        from test_replay import Net
        inc = self.inc

        class Module(pl.LightningModule):
            def __init__(self, **hp):
                super().__init__()
                self.save_hyperparameters()
                self.model = Net()

            def training_step(self, batch, _):
                return torch.nn.functional.cross_entropy(self.model(batch[0]), batch[1])

            def configure_optimizers(self):
                return torch.optim.Adam(self.parameters(), lr=1e-3)

        m = Module(**dict(hyper_parameters()))
        data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inc.x, inc.y), batch_size=len(inc.y))
        trainer = pl.Trainer(max_steps=2, accelerator="cpu", precision="bf16-mixed", logger=False, enable_progress_bar=False,
                             enable_model_summary=False, enable_checkpointing=False, default_root_dir=self.d)
        trainer.fit(m, data)
        f = self.path("real-lightning.ckpt")
        trainer.save_checkpoint(f)
        rc, out, _, _ = run_measured(["replay", "--model", inc.model, "--checkpoint", f, "--strip-prefix", "model.",
                                      "--batch", inc.batch])
        self.assertIn(rc, (0, 1), out)
        for named in ("pathlib.PosixPath", "Color", "Opts"):
            self.assertIn(named, out)
        ck = torch.load(f, weights_only=False)  # the same state as a plain dict replays the same
        plain = self.path("real-lightning-plain.pt")
        torch.save({"model": {k[len("model."):]: v for k, v in ck["state_dict"].items()}, "optimizer": ck["optimizer_states"][0]},
                   plain)
        got, want = replay(inc.model, [f, "--strip-prefix", "model."], inc.batch), replay(inc.model, [plain], inc.batch)
        self.assertNotIsInstance(got[1], str, got[1])
        self.assertEqual(got[1]["steps"], want[1]["steps"])

    def scaler_object(self, ran, enabled=True):
        """A torch.amp.GradScaler holding the incident's scaler state: after steps (its scale and growth
        tracker are tensors) or fresh (None: their initial values are the state)."""
        ssd = self.inc.state[2]
        s = torch.amp.GradScaler("cpu", enabled=enabled)
        if ran:
            p = torch.nn.Parameter(torch.ones(2))
            opt = torch.optim.SGD([p], lr=0.0)
            s.scale(p.sum()).backward()
            s.step(opt)
            s.update()
            self.assertIsInstance(s._scale, torch.Tensor)
        s.load_state_dict(ssd) if enabled else None
        return s

    def test_pickled_grad_scaler_reads_its_state(self):
        """torch.save({"model", "optimizer", "scaler": scaler}) with the GradScaler object: the file was
        unreadable (exit 2, INTERNAL ASSERT ... expected int)."""
        sd, osd, ssd = self.inc.state
        want = self.inc.python_step()["amp"]
        for name, scaler in {"ran": self.scaler_object(True), "fresh": self.scaler_object(False)}.items():
            self.assertEqual(scaler.state_dict(), ssd)
            f = self.path(f"scaler-object-{name}.pt")
            torch.save({"model": sd, "optimizer": osd, "scaler": scaler}, f)
            with self.subTest(scaler=name):
                got = replay(self.inc.model, [f], self.inc.batch)
                self.assertNotIsInstance(got[1], str, got[1])
                self.assert_same_replay(got, name)
                step = got[1]["steps"][0]
                self.assertEqual((as_float(step["scale"]), step["skipped"], as_float(step["scale_after"])),
                                 (want["scale"], want["skipped"], want["scale_after"]), "GradScaler's decision")
        off = self.path("scaler-object-disabled.pt")
        torch.save({"model": sd, "optimizer": osd, "scaler": self.scaler_object(False, enabled=False)}, off)
        empty = self.path("scaler-empty.pt")
        torch.save({"model": sd, "optimizer": osd, "scaler": {}}, empty)
        got, plain = replay(self.inc.model, [off], self.inc.batch), replay(self.inc.model, [empty], self.inc.batch)
        self.assertNotIsInstance(got[1], str, got[1])
        self.assertEqual(got[1]["steps"], plain[1]["steps"], "a disabled GradScaler reads as state_dict() {}")

    def test_shared_references_read_in_linear_time(self):
        """l = [t]; l = [l, l] forty times: 2^40 paths through 41 lists. Every path was walked
        (check_tensors and the unpickler's post-pass): minutes and gigabytes."""
        t = torch.zeros(2)
        nest = [t]
        for _ in range(40):
            nest = [nest, nest]
        f = self.lightning("shared.ckpt", hyper_parameters={"nest": nest})
        self.assertLess(os.path.getsize(f), 100_000)
        rc, out, secs, rss = run_measured(["replay", "--model", self.inc.model, "--checkpoint", f, "--strip-prefix", "model.",
                                           "--batch", self.inc.batch, "-q"], timeout=60)
        self.assertIn(rc, (0, 1), out)
        self.assertLess(secs, 30, "linear in the pickle's size")
        self.assertLess(rss, 2048, "peak resident MB")

    def test_deep_nesting_refused_without_a_crash(self):
        """A pickle nesting a million lists (2 MB) crashed the process (signal 11): the chain was freed
        recursively after check_tensors refused it; and a chain built through the memo (each list
        holding the previous) that the unpickler then refuses (a million values left on its stack)
        crashed freeing its memo. Both refused by name before the unpickler builds them."""
        base = self.path("base.pt")
        torch.save({"a": 1}, base)
        with zipfile.ZipFile(base) as z:
            members = {n: z.read(n) for n in z.namelist()}
        n = 1_000_000
        memo_chain = bytearray(b"\x80\x02]r" + struct.pack("<I", 0))
        for i in range(1, n):
            memo_chain += b"]j" + struct.pack("<I", i - 1) + b"ar" + struct.pack("<I", i)
        cases = {"nested": b"\x80\x02" + b"]" * n + b"a" * (n - 1),  # [[[...]]], as pickle writes nested lists
                 "memo chain": bytes(memo_chain)}
        for name, pickle in cases.items():
            f = self.path(f"deep-{name.replace(' ', '-')}.pt")
            with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as z:
                for member, data in members.items():
                    z.writestr(member, pickle + b"." if member.endswith("data.pkl") else data)
            with self.subTest(pickle=name):
                rc, out, _, _ = run_measured(["replay", "--model", self.inc.model, "--checkpoint", f, "--batch", self.inc.batch,
                                              "-q"])
                self.assertEqual(rc, 2, out)
                for named in (f, "data.pkl", "deeper than"):
                    self.assertIn(named, out)

    def test_meta_and_sparse_weights_named(self):
        """Unpickler text without the key ("unknown type torch._utils._rebuild_meta_tensor_no_storage")."""
        sd = dict(self.inc.state[0])
        cases = {"meta": sd["fc1.weight"].to("meta"), "sparse": sd["fc1.weight"].to_sparse()}
        for name, w in cases.items():
            f = self.path(f"{name}-weights.pt")
            torch.save(dict(sd, **{"fc1.weight": w}), f)
            with self.subTest(weights=name):
                rc, out, _, _ = run_measured(["replay", "--model", self.inc.model, "--checkpoint", f, "--optimizer-state",
                                              self.path("optimizer.pt"), "--batch", self.inc.batch, "-q"])
                self.assertEqual(rc, 2, out)
                for n in (f, "fc1.weight", name, "expected a"):
                    self.assertIn(n, out)


class LargeFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = backward_incident()
        cls.d = cls.inc.tmp.name

    def test_pk_and_4_gb_refused_without_reading_it(self):
        """`PK` + 4 GB (sparse): the whole file was read into memory before the zip reader refused it."""
        f = os.path.join(self.d, "pk4g.pt")
        with open(f, "wb") as out:
            out.write(b"PK\x03\x04")
        os.truncate(f, 4 << 30)
        try:
            rc, out, secs, rss = run_measured(["replay", "--model", self.inc.model, "--checkpoint", f, "--batch", self.inc.batch,
                                               "-q"], timeout=120)
        finally:
            os.unlink(f)
        self.assertEqual(rc, 2, out)
        self.assertIn(f, out)
        self.assertLess(rss, 2048, "peak resident MB: the file is not read whole")


if __name__ == "__main__":
    unittest.main()

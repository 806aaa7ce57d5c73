# SPDX-License-Identifier: MIT
"""Training: Python torch trains the same TorchScript model on the same data with
torch.autocast("cpu", float16) + torch.amp.GradScaler("cpu") + SGD; ampscope-cli train must
report the same scale every step, the same skipped steps and the same losses (bitwise: same
graph, same kernels, same optimizer arithmetic). Also resume equivalence, bad checkpoints,
and the demo story."""
import json
import math
import os
import tempfile
import unittest

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from common import as_float, run_cli


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(12, 32)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def train_json(*args):
    rc, out, err = run_cli("train", *map(str, args), "--json", "-", "-q")
    return rc, (json.loads(out) if rc in (0, 1) else err)


class TrainOracle(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.manual_seed(0)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "net.pt")
        torch.jit.script(Net()).save(cls.model)
        g = torch.Generator().manual_seed(1)
        x = torch.randn(96, 12, generator=g) * 4
        y = torch.randint(0, 3, (96,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": x, "labels": y}, cls.data)
        cls.x, cls.y = x, y

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def python_run(self, steps, batch, lr, init_scale, growth_interval):
        """The user's own PyTorch loop, for both sides."""
        ref = torch.jit.load(self.model)
        amp = torch.jit.load(self.model)
        ref.train()
        amp.train()
        opt_r = torch.optim.SGD(ref.parameters(), lr=lr)
        opt_a = torch.optim.SGD(amp.parameters(), lr=lr)
        scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
        out = []
        cursor = 0
        with torch.jit.optimized_execution(False):
            for step in range(steps):
                b, e = cursor, min(len(self.x), cursor + batch)
                cursor = 0 if e >= len(self.x) else e
                xb, yb = self.x[b:e], self.y[b:e]
                opt_r.zero_grad()
                opt_a.zero_grad()
                lr_ = F.cross_entropy(ref(xb), yb)
                lr_.backward()
                opt_r.step()
                scale = scaler.get_scale()
                with torch.autocast("cpu", dtype=torch.float16):
                    la = F.cross_entropy(amp(xb), yb)
                scaler.scale(la).backward()
                scaler.unscale_(opt_a)
                found_inf = sum(v.item() for v in scaler._per_optimizer_states[id(opt_a)]["found_inf_per_device"].values())
                scaler.step(opt_a)
                scaler.update()
                out.append({"loss_ref": lr_.item(), "loss_amp": la.item(), "scale": scale, "skipped": found_inf > 0,
                            "tracker": scaler._growth_tracker.item()})
        return out, scaler.get_scale()

    def test_whole_loop_matches_pytorch(self):
        steps, batch, lr, init, interval = 24, 16, 0.05, 2.0 ** 24, 3
        want, final_scale = self.python_run(steps, batch, lr, init, interval)
        rc, got = train_json("--model", self.model, "--data", self.data, "--steps", steps, "--batch-size", batch,
                             "--lr", lr, "--precision", "fp16", "--init-scale", init, "--growth-interval", interval,
                             "--device", "cpu")
        self.assertEqual(rc, 0, got)
        self.assertEqual(len(got["steps"]), steps)
        skipped = 0
        for w, g in zip(want, got["steps"]):
            self.assertEqual(as_float(g["scale"]), w["scale"], f"step {g['step']}")
            self.assertEqual(g["skipped"], w["skipped"], f"step {g['step']}")
            self.assertEqual(as_float(g["loss_ref"]), w["loss_ref"], f"step {g['step']}")
            self.assertEqual(as_float(g["loss_amp"]), w["loss_amp"], f"step {g['step']}")
            skipped += w["skipped"]
        self.assertGreater(skipped, 0, "init scale 2^24 should make PyTorch skip steps")
        self.assertLess(skipped, steps)
        self.assertEqual(got["summary"]["skipped"], skipped)
        self.assertEqual(got["summary"]["effective_updates"], steps - skipped)
        self.assertEqual(as_float(got["summary"]["final_scale"]), final_scale)

    def test_resume_is_bitwise_equivalent(self):
        for policy in (["--precision", "fp16"], ["--no-autocast", "--no-scaler"]):
            with tempfile.TemporaryDirectory() as d:
                common = ["--model", self.model, "--data", self.data, "--batch-size", 16, "--lr", 0.05,
                          "--optimizer", "sgd", "--momentum", 0.9, "--init-scale", 2.0 ** 20, "--growth-interval", 2,
                          "--device", "cpu", *policy]
                rc, straight = train_json(*common, "--steps", 10)
                self.assertEqual(rc, 0, straight)
                rc, first = train_json(*common, "--steps", 4, "--checkpoint-every", 4, "--checkpoint-dir", d)
                self.assertEqual(rc, 0, first)
                ckpt = first["checkpoints"][0]
                rc, second = train_json(*common, "--steps", 10, "--resume", ckpt)
                self.assertEqual(rc, 0, second)
                self.assertFalse(second["policy_changed"])
                self.assertEqual([s["step"] for s in second["steps"]], list(range(4, 10)))
                for a, b in zip(straight["steps"][4:], second["steps"]):
                    for k in ("loss_ref", "loss_amp", "scale", "skipped", "effective_updates", "divergence", "grad_norm"):
                        self.assertEqual(a[k], b[k], f"{policy} step {a['step']} {k}")

    def test_resume_with_buffers_dropout_and_a_short_last_batch(self):
        """BatchNorm running statistics (buffers), dropout in train mode, and batch counts that do
        not divide the data: a resumed run must continue bitwise as the uninterrupted one."""
        class BnDrop(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(12, 24)
                self.bn = torch.nn.BatchNorm1d(24)
                self.drop = torch.nn.Dropout(0.3)
                self.fc2 = torch.nn.Linear(24, 3)

            def forward(self, x):
                return self.fc2(self.drop(torch.relu(self.bn(self.fc1(x)))))

        torch.manual_seed(3)
        model = os.path.join(self.tmp.name, "bndrop.pt")
        torch.jit.script(BnDrop()).save(model)
        g = torch.Generator().manual_seed(2)
        for n, bs, acc, stop in ((100, 16, 1, 7), (100, 16, 3, 3), (50, 12, 2, 4)):
            data = os.path.join(self.tmp.name, f"data{n}.pt")
            torch.save({"inputs": torch.randn(n, 12, generator=g) * 3, "labels": torch.randint(0, 3, (n,), generator=g)}, data)
            with tempfile.TemporaryDirectory() as d:
                common = ["--model", model, "--data", data, "--batch-size", bs, "--accumulate", acc, "--lr", 0.05,
                          "--optimizer", "adam", "--precision", "fp16", "--device", "cpu", "--seed", 5]
                rc, straight = train_json(*common, "--steps", stop + 5)
                self.assertIn(rc, (0, 1), straight)
                rc, first = train_json(*common, "--steps", stop, "--checkpoint-every", stop, "--checkpoint-dir", d)
                self.assertIn(rc, (0, 1), first)
                rc, second = train_json(*common, "--steps", stop + 5, "--resume", first["checkpoints"][0])
                self.assertIn(rc, (0, 1), second)
                self.assertEqual([s["step"] for s in second["steps"]], list(range(stop, stop + 5)))
                for a, b in zip(straight["steps"][stop:], second["steps"]):
                    for k in ("loss_ref", "loss_amp", "scale", "skipped", "divergence", "grad_norm"):
                        self.assertEqual(a[k], b[k], f"n={n} bs={bs} acc={acc}: step {a['step']} {k}")

    def test_resume_with_another_policy_is_an_experiment_change(self):
        with tempfile.TemporaryDirectory() as d:
            common = ["--model", self.model, "--data", self.data, "--device", "cpu"]
            rc, first = train_json(*common, "--steps", 2, "--checkpoint-every", 2, "--checkpoint-dir", d)
            rc, second = train_json(*common, "--steps", 4, "--resume", first["checkpoints"][0], "--precision", "bf16")
            self.assertEqual(rc, 0)
            self.assertTrue(second["policy_changed"])
            self.assertTrue(any("experiment change" in w for w in second["warnings"]))
            # both policies named, the checkpoint's first (was: only this run's)
            self.assertTrue(any("(the checkpoint's fp16" in w and ", this run's bf16" in w for w in second["warnings"]),
                            second["warnings"])

    def test_hostile_checkpoint_counters_are_refused_by_key(self):
        """A checkpoint's counters, GradScaler state, generator state, data cursor and policy edited:
        each bad value refused naming the file and key (exit 2; were: trained on with a negative
        step or loss scale, a NaN scale skipping every step, exit 3 on a generator state)."""
        with tempfile.TemporaryDirectory() as d:
            rc, first = train_json("--model", self.model, "--data", self.data, "--steps", 2, "--checkpoint-every", 2,
                                   "--checkpoint-dir", d, "--device", "cpu")
            ckpt = first["checkpoints"][0]
            cases = [("step", -1, "-1; expected an integer from 0 to"),
                     ("effective_updates", -3, "expected an integer from 0 to 2"),
                     ("effective_updates", 3, "expected an integer from 0 to 2"),
                     ("scaler.scale", float("nan"), "expected a finite loss scale >= 0"),
                     ("scaler.scale", -1.0, "expected a finite loss scale >= 0"),
                     ("scaler.growth_factor", 0.5, "expected a finite factor > 1"),
                     ("scaler.backoff_factor", 2.0, "expected a factor between 0 and 1"),
                     ("scaler.growth_interval", 0, "scaler.growth_interval"),
                     ("scaler._growth_tracker", -1, "scaler._growth_tracker"),
                     ("data.cursor", -16, "data.cursor"),
                     ("data.cursor", 10 ** 15, "expected a sample index below the"),
                     ("rng.cpu", torch.zeros(10, dtype=torch.uint8), "not a state of this CPU generator"),
                     ("ampscope.format", "ampscope-checkpoint-9", "unknown checkpoint format 'ampscope-checkpoint-9'")]
            for key, value, said in cases:
                m = torch.jit.load(ckpt)
                m._c.setattr(key, value)
                bad = os.path.join(d, "bad.ckpt")
                m.save(bad)
                rc, _, se = run_cli("train", "--model", self.model, "--data", self.data, "--steps", 4, "--resume", bad,
                                    "--device", "cpu", "--no-db", "-q")
                self.assertEqual(rc, 2, f"{key}={value}: {se}")
                self.assertIn(said, se, key)
                self.assertIn(key, se, key)
            # a loss scale of 0 is what a run whose every step overflowed saves (65536 backed off to an FP32
            # underflow): resumed, not refused
            m = torch.jit.load(ckpt)
            m._c.setattr("scaler.scale", 0.0)
            m.save(os.path.join(d, "zero.ckpt"))
            rc, _, se = run_cli("train", "--model", self.model, "--data", self.data, "--steps", 4, "--resume",
                                os.path.join(d, "zero.ckpt"), "--device", "cpu", "--no-db", "-q")
            self.assertIn(rc, (0, 1), se)
            # the file itself re-saved resumes (the edits, not the re-saving, are refused)
            m = torch.jit.load(ckpt)
            m.save(os.path.join(d, "same.ckpt"))
            rc, _, se = run_cli("train", "--model", self.model, "--data", self.data, "--steps", 4, "--resume",
                                os.path.join(d, "same.ckpt"), "--device", "cpu", "--no-db", "-q")
            self.assertIn(rc, (0, 1), se)

    def test_bad_checkpoints_are_input_errors(self):
        with tempfile.TemporaryDirectory() as d:
            bad = os.path.join(d, "bad.ckpt")
            with open(bad, "wb") as f:
                f.write(b"not a checkpoint")
            rc, _, err = run_cli("train", "--model", self.model, "--data", self.data, "--steps", 2, "--resume", bad)
            self.assertEqual(rc, 2)
            self.assertIn(bad, err)
            rc, first = train_json("--model", "demo:mlp", "--data", "demo", "--steps", 1, "--checkpoint-every", 1,
                                   "--checkpoint-dir", d)
            rc, _, err = run_cli("train", "--model", self.model, "--data", self.data, "--steps", 2, "--resume",
                                 first["checkpoints"][0])
            self.assertEqual(rc, 2, err)
            self.assertIn("another model", err)
        # the engine names the field ("data"); the CLI the flag that gave it
        rc, _, err = run_cli("train", "--model", self.model, "--data", "demo", "--steps", 1, "--no-db")
        self.assertEqual(rc, 2, err)
        self.assertIn("demo: field '--data': the built-in training set belongs to the demo models", err)
        rc, _, err = run_cli("train", "--model", self.model, "--data", "/no/such/data.pt", "--steps", 1, "--no-db")
        self.assertEqual(rc, 2, err)
        self.assertIn("/no/such/data.pt: field '--data': file not found", err)  # was: field '--probes'


class WideOracle(unittest.TestCase):
    """PyTorch's own recipe under every option ampscope offers: the optimizers, clipping after
    unscale_, gradient accumulation, BF16, a cosine schedule on effective updates, an FP32
    region (autocast disabled around a module, its input cast to FP32), and GradScaler's scale,
    skips and growth tracker compared every step."""

    @classmethod
    def setUpClass(cls):
        torch.manual_seed(4)
        cls.tmp = tempfile.TemporaryDirectory()
        cls.model = os.path.join(cls.tmp.name, "net.pt")
        torch.jit.script(Net()).save(cls.model)
        g = torch.Generator().manual_seed(6)
        cls.x = torch.randn(70, 12, generator=g) * 4  # 70 = 4 batches of 16 + a short one
        cls.y = torch.randint(0, 3, (70,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def python_run(self, steps, o):
        ref, amp = torch.jit.load(self.model), torch.jit.load(self.model)
        ref.train()
        amp.train()
        if o.get("keep_fp32"):  # what --keep-fp32 fc2 does, written the way a user would
            amp = torch.jit.load(self.model)
            amp.train()
        make = {"sgd": lambda p: torch.optim.SGD(p, lr=o["lr"], momentum=0.9, weight_decay=o.get("wd", 0.0)),
                "adam": lambda p: torch.optim.Adam(p, lr=o["lr"], weight_decay=o.get("wd", 0.0)),
                "adamw": lambda p: torch.optim.AdamW(p, lr=o["lr"], weight_decay=o.get("wd", 0.0))}[o["opt"]]
        opt_r, opt_a = make(ref.parameters()), make(amp.parameters())
        dtype = torch.bfloat16 if o.get("bf16") else torch.float16
        scaler = torch.amp.GradScaler("cpu", init_scale=o["init"], growth_interval=o["interval"])
        acc, bs, n = o.get("acc", 1), o["bs"], len(self.x)
        out, cursor, effective = [], 0, 0
        with torch.jit.optimized_execution(False):
            for step in range(steps):
                lr = o["lr"] * 0.5 * (1 + math.cos(math.pi * min(effective, steps) / steps)) if o.get("cosine") else o["lr"]
                for opt in (opt_r, opt_a):
                    for gr in opt.param_groups:
                        gr["lr"] = lr
                opt_r.zero_grad()
                opt_a.zero_grad()
                loss_r = loss_a = 0.0
                scale = scaler.get_scale()
                for _ in range(acc):
                    b, e = cursor, min(n, cursor + bs)
                    cursor = 0 if e >= n else e
                    xb, yb = self.x[b:e], self.y[b:e]
                    lr_ = F.cross_entropy(ref(xb), yb) / acc
                    lr_.backward()
                    loss_r += lr_.item()
                    with torch.autocast("cpu", dtype=dtype):
                        if o.get("keep_fp32"):
                            h = amp.act(amp.fc1(xb))
                            with torch.autocast("cpu", enabled=False):
                                logits = amp.fc2(h.float())
                        else:
                            logits = amp(xb)
                        la = F.cross_entropy(logits, yb) / acc
                    scaler.scale(la).backward()
                    loss_a += la.item()
                if o.get("clip"):
                    torch.nn.utils.clip_grad_norm_(ref.parameters(), o["clip"])
                opt_r.step()
                scaler.unscale_(opt_a)
                if o.get("clip"):
                    torch.nn.utils.clip_grad_norm_(amp.parameters(), o["clip"])
                found = sum(v.item() for v in scaler._per_optimizer_states[id(opt_a)]["found_inf_per_device"].values())
                scaler.step(opt_a)
                scaler.update()
                effective += found == 0
                out.append({"loss_ref": loss_r, "loss_amp": loss_a, "scale": scale, "skipped": found > 0,
                            "lr": lr, "growth_tracker": int(scaler._growth_tracker.item())})
        return out

    def check(self, steps, o, exact=True):
        want = self.python_run(steps, o)
        args = ["--model", self.model, "--data", self.data, "--steps", steps, "--batch-size", o["bs"], "--lr", o["lr"],
                "--optimizer", o["opt"], "--init-scale", o["init"], "--growth-interval", o["interval"], "--device", "cpu",
                "--precision", "bf16" if o.get("bf16") else "fp16", "--accumulate", o.get("acc", 1)]
        if o["opt"] == "sgd":
            args += ["--momentum", 0.9]
        if o.get("wd"):
            args += ["--weight-decay", o["wd"]]
        if o.get("clip"):
            args += ["--clip-grad-norm", o["clip"]]
        if o.get("cosine"):
            args += ["--lr-schedule", "cosine"]
        if o.get("keep_fp32"):
            args += ["--keep-fp32", "fc2"]
        rc, got = train_json(*args)
        self.assertIn(rc, (0, 1), got)
        skipped = 0
        for w, g in zip(want, got["steps"], strict=True):
            where = f"{o} step {g['step']}"
            for k in ("scale", "lr", "growth_tracker"):
                self.assertEqual(as_float(g[k]), w[k], f"{where} {k}")
            self.assertEqual(g["skipped"], w["skipped"], where)
            for k in ("loss_ref", "loss_amp"):
                if exact:
                    self.assertEqual(as_float(g[k]), w[k], f"{where} {k}")
                else:
                    self.assertAlmostEqual(as_float(g[k]), w[k], delta=1e-5 * max(1.0, abs(w[k])), msg=f"{where} {k}")
            skipped += w["skipped"]
        return skipped

    def test_sgd_clipping_accumulation_cosine(self):
        skipped = self.check(14, {"opt": "sgd", "lr": 0.05, "bs": 16, "acc": 3, "clip": 0.5, "cosine": True,
                                  "init": 2.0 ** 24, "interval": 2})
        self.assertGreater(skipped, 0, "the schedule must follow effective updates across skipped steps")

    def test_adam_and_adamw(self):
        for opt in ("adam", "adamw"):
            self.check(10, {"opt": opt, "lr": 0.01, "wd": 0.01, "bs": 16, "init": 2.0 ** 20, "interval": 3}, exact=False)

    def test_bf16_and_an_fp32_region(self):
        self.check(8, {"opt": "sgd", "lr": 0.05, "bs": 16, "bf16": True, "init": 2.0 ** 10, "interval": 2})
        self.check(8, {"opt": "sgd", "lr": 0.05, "bs": 16, "keep_fp32": True, "init": 2.0 ** 16, "interval": 2})


class DemoTrainingStory(unittest.TestCase):
    DEMO_40 = ["--model", "demo:transformer", "--data", "demo", "--steps", 40, "--device", "cpu"]
    _fp16 = None

    @classmethod
    def fp16_40_steps(cls):
        """The demo's default 40-step FP16 run with the scaler: one process for the tests that read it."""
        if cls._fp16 is None:
            cls._fp16 = train_json(*cls.DEMO_40)
        return cls._fp16

    def test_fp16_skips_first_steps_then_trains_bf16_needs_no_scaler(self):
        rc, fp16 = self.fp16_40_steps()
        self.assertEqual(rc, 0)
        steps = fp16["steps"]
        self.assertTrue(steps[0]["skipped"])
        self.assertEqual(steps[0]["nonfinite_stage"], "gradient")
        self.assertEqual(as_float(steps[0]["scale"]), 65536.0)
        self.assertEqual(as_float(steps[1]["scale"]), 32768.0)  # backed off
        self.assertFalse(steps[1]["skipped"])
        self.assertGreater(fp16["summary"]["effective_updates"], 35)
        last = steps[-1]
        self.assertLess(as_float(last["loss_amp"]), as_float(steps[0]["loss_amp"]) / 5)  # it trains
        self.assertAlmostEqual(as_float(last["loss_amp"]), as_float(last["loss_ref"]), delta=0.1 * as_float(last["loss_ref"]))
        rc, bf16 = train_json(*self.DEMO_40, "--precision", "bf16", "--no-scaler")
        self.assertEqual(rc, 0)
        self.assertEqual(bf16["summary"]["skipped"], 0)
        self.assertTrue(all(s["nonfinite_stage"] is None for s in bf16["steps"]))
        self.assertEqual(bf16["summary"]["effective_updates"], 40)

    def test_training_run_is_recorded_step_by_step(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "runs.sqlite")
            rc, r = train_json("--model", "demo:transformer", "--data", "demo", "--steps", 4, "--device", "cpu",
                               "--db", db, "--checkpoint-every", 2, "--checkpoint-dir", d)
            self.assertEqual(rc, 0)
            rc, out, err = run_cli("list", "--json", "--db", db)
            rows = json.loads(out)
            self.assertEqual(len(rows), 1)
            self.assertEqual(rows[0]["kind"], "train")
            self.assertEqual(rows[0]["status"], "completed")
            import sqlite3
            con = sqlite3.connect(db)
            steps = con.execute("SELECT step, scale, skipped, effective_updates, growth_tracker, divergence "
                                "FROM training_steps ORDER BY step").fetchall()
            ckpts = con.execute("SELECT step, path FROM checkpoints ORDER BY step").fetchall()
            con.close()
            self.assertEqual([s[0] for s in steps], [0, 1, 2, 3])
            for got, want in zip(steps, r["steps"]):
                self.assertEqual(got[1], as_float(want["scale"]))
                self.assertEqual(bool(got[2]), want["skipped"])
                self.assertEqual(got[3], want["effective_updates"])
                self.assertEqual(got[4], want["growth_tracker"])
                self.assertEqual(got[5], as_float(want["divergence"]))
            self.assertEqual([s[4] for s in steps], [0, 1, 2, 3])  # demo: skips step 0, then grows its tracker
            self.assertEqual([c[0] for c in ckpts], [2, 4])
            rc, out, _ = run_cli("show", r["run_id"], "--db", db)
            self.assertEqual(rc, 0)
            self.assertIn("skipped steps: 0", out)

    def test_autocast_only_fp16_on_the_demo(self):
        """What the demo shows (README): autocast-only FP16 underflows. Gradient elements that
        FP32 has and FP16 flushes to zero grow as the loss falls (hundreds, then over a
        thousand per step); with the scaler almost none are lost. It never overflows, so
        nothing is skipped."""
        rc, plain = train_json(*self.DEMO_40, "--no-scaler")
        rc2, scaled = self.fp16_40_steps()
        self.assertEqual((rc, rc2), (0, 0))
        self.assertEqual(plain["summary"]["skipped"], 0)
        self.assertTrue(all(s["nonfinite_stage"] is None for s in plain["steps"]))
        lost_plain = [s["grad_underflow"] for s in plain["steps"]]
        lost_scaled = [s["grad_underflow"] for s in scaled["steps"] if not s["skipped"]]
        self.assertTrue(all(x is not None and x > 0 for x in lost_plain), lost_plain)
        self.assertGreater(sum(lost_plain[-10:]), 3 * sum(lost_plain[:10]), "underflow grows as the loss falls")
        self.assertGreater(sum(lost_plain), 50 * max(1, sum(lost_scaled)), (lost_plain, lost_scaled))

    def test_lr_schedule_follows_effective_updates(self):
        rc, r = train_json("--model", "demo:transformer", "--data", "demo", "--steps", 6, "--device", "cpu",
                           "--lr-schedule", "cosine")
        steps = r["steps"]
        self.assertTrue(steps[0]["skipped"])
        self.assertEqual(steps[0]["lr"], steps[1]["lr"])  # no effective update yet: schedule did not advance
        rc, r2 = train_json("--model", "demo:transformer", "--data", "demo", "--steps", 6, "--device", "cpu",
                            "--lr-schedule", "cosine", "--lr-per-iteration")
        self.assertNotEqual(r2["steps"][0]["lr"], r2["steps"][1]["lr"])
        self.assertTrue(any("schedule ran ahead" in w for w in r2["warnings"]))



class Wide(torch.nn.Module):
    """Large activations into a small head: in FP16, scaled by 2^16, the head's weight gradient
    (activations^T @ output gradient) overflows while the forward and the loss stay finite."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 64)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(64, 3)
        with torch.no_grad():
            self.fc1.weight.mul_(300.0)
            self.head.weight.mul_(0.05)

    def forward(self, x):
        return self.head(self.act(self.fc1(x)))


def finite(ts):
    return all(t is None or bool(torch.isfinite(t).all()) for t in ts)


class MidOverflow(torch.nn.Module):
    """The same overflow planted in a middle block: large activations into `mid`, whose small
    output keeps the head's gradient finite; mid's weight gradient overflows in FP16."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 64)
        self.act = torch.nn.ReLU()
        self.mid = torch.nn.Linear(64, 64)
        self.act2 = torch.nn.ReLU()
        self.head = torch.nn.Linear(64, 3)
        with torch.no_grad():
            self.fc1.weight.mul_(300.0)
            self.mid.weight.mul_(0.002)

    def forward(self, x):
        return self.head(self.act2(self.mid(self.act(self.fc1(x)))))


class FirstNonFiniteOp(TorchDispatchMode):
    """Every ATen op of the backward pass, as the dispatcher runs it: the first whose floating
    inputs are finite and whose outputs are not."""

    def __init__(self):
        super().__init__()
        self.first = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.first is None:
            leaves = lambda v: [t for t in tree_leaves(v) if isinstance(t, torch.Tensor) and t.is_floating_point()]
            outs = leaves(out)
            if outs and finite(leaves((args, kwargs))) and not finite(outs):
                self.first = func._schema.name
        return out


def python_backward_origin(net, x, y, scale=65536.0):
    """The user's step in Python with hooks on every autograd node; the origin is the first
    node to run whose incoming gradients are finite and whose results are not (its module
    from forward hooks), and the first ATen op inside it that made them non-finite."""
    module_of = {}

    def remember(name):
        def hook(mod, inp, out):
            module_of.setdefault(out.grad_fn, name)  # returns None: the output stays as it is
        return hook

    handles = [m.register_forward_hook(remember(name)) for name, m in net.named_modules() if name]
    with torch.autocast("cpu", dtype=torch.float16):
        loss = F.cross_entropy(net(x), y)
    for h in handles:
        h.remove()
    assert bool(torch.isfinite(loss))
    scaled = loss * scale
    events, seen, todo = [], set(), [scaled.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_hook(lambda gi, go, node=node: events.append((node, finite(go), finite(gi))))
        todo.extend(n for n, _ in node.next_functions)
    mode = FirstNonFiniteOp()
    with mode:
        torch.autograd.grad(scaled, list(net.parameters()), allow_unused=True)
    born = [n for n, go_finite, gi_finite in events if go_finite and not gi_finite]
    assert born, "the planted overflow must happen in Python too"
    return born[0].name(), module_of.get(born[0], ""), mode.first


class BackwardOrigin(unittest.TestCase):
    def check(self, net, want_module):
        with tempfile.TemporaryDirectory() as tmp:
            model = os.path.join(tmp, "net.pt")
            torch.jit.script(net).save(model)
            g = torch.Generator().manual_seed(4)
            x = torch.randn(64, 8, generator=g)
            y = torch.randint(0, 3, (64,), generator=g)
            data = os.path.join(tmp, "data.pt")
            torch.save({"inputs": x, "labels": y}, data)
            args = ["--model", model, "--data", data, "--steps", 3, "--batch-size", 32, "--precision", "fp16", "--no-db"]
            rc, res = train_json(*args)
            rc2, unguarded = train_json(*args, "--no-guards")
        self.assertIn(rc, (0, 1), res)
        self.assertIn(rc2, (0, 1), unguarded)
        step = res["steps"][0]
        want_node, module, want_op = python_backward_origin(net, x[:32], y[:32])
        self.assertEqual(module, want_module, "the planted overflow is where the test meant it")
        self.assertTrue(step["found_inf"] and step["skipped"], step)
        self.assertEqual(step["nonfinite_stage"], "gradient")
        origin = step["origin"]
        self.assertEqual(origin["stage"], "backward")
        self.assertEqual(origin["grad_fn"], want_node)
        self.assertEqual(origin["module"], module)
        self.assertEqual(origin["op"], want_op)
        # the diagnostic re-run leaves the training untouched: every step as without guards
        # (and so without re-runs): losses, scales, skips, gradient norms, weights' divergence
        for a, b in zip(res["steps"], unguarded["steps"], strict=True):
            for k in ("loss_ref", "loss_amp", "scale", "skipped", "effective_updates", "grad_norm", "divergence"):
                self.assertEqual(a[k], b[k], f"step {a['step']} {k}")

    def test_origin_in_the_head(self):
        torch.manual_seed(3)
        self.check(Wide(), "head")

    def test_origin_in_a_middle_block(self):
        torch.manual_seed(3)
        self.check(MidOverflow(), "mid")


class NothingToTrain(unittest.TestCase):
    def test_a_model_without_parameters_is_refused_saying_so(self):
        """A model with no parameter at all: refused before step 0 naming the model and `parameters`,
        saying it has none (it said every parameter had requires_grad=False)."""
        class NoParams(torch.nn.Module):
            def forward(self, x):
                return x[:, :3] * 2

        with tempfile.TemporaryDirectory() as d:
            model, data = os.path.join(d, "m.pt"), os.path.join(d, "data.pt")
            torch.jit.script(NoParams()).save(model)
            torch.save({"inputs": torch.randn(8, 12), "labels": torch.randint(0, 3, (8,))}, data)
            rc, out, err = run_cli("train", "--model", model, "--data", data, "--steps", 1, "--no-db", "-q")
        self.assertEqual(rc, 2, out + err)
        self.assertIn(model, err)
        self.assertIn("parameters", err)
        self.assertIn("the model has none", err)


class InputOrigin(unittest.TestCase):
    """A NaN or inf in the data is the input's, not the first layer's: the step's non-finite stage
    is "input", its origin names the rows of the data file that hold it (the first layer only
    carried it on; was: "forward", born at fc1's aten::linear). A step whose batch is finite and
    whose forward overflows still names the op."""

    def test_non_finite_data_is_named_as_the_input(self):
        torch.manual_seed(2)
        x, y = torch.randn(24, 12), torch.randint(0, 3, (24,))
        x[13, 4] = float("nan")
        x[21, 0] = float("inf")
        with tempfile.TemporaryDirectory() as d:
            model, data = os.path.join(d, "net.pt"), os.path.join(d, "data.pt")
            torch.jit.script(Net()).save(model)
            torch.save({"inputs": x, "labels": y}, data)
            rc, r = train_json("--model", model, "--data", data, "--steps", 3, "--batch-size", 8, "--precision",
                               "bf16", "--loss", "ce", "--no-db")
        self.assertIn(rc, (0, 1), r)
        steps = r["steps"]
        self.assertIsNone(steps[0]["nonfinite_stage"])  # rows 0-7: finite
        for step, rows in ((1, ["row 13"]), (2, ["row 21"])):
            self.assertEqual(steps[step]["nonfinite_stage"], "input", steps[step])
            o = steps[step]["origin"]
            self.assertEqual((o["stage"], o["module"], o["samples"]), ("input", "", rows), o)


if __name__ == "__main__":
    unittest.main()

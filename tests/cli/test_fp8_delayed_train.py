# SPDX-License-Identifier: MIT
"""train --precision fp8-delayed (issue 30) against Transformer Engine's DelayedScaling written
here from its documented rule (TeDelayed), in Python torch from the same wheel: every linear's
input and weight cast to E4M3 in the forward and its grad_output to E5M2 in the backward (TE's
HYBRID format), each with the scale its own amax history gave at the end of the step before; the
histories carry over the steps, and a run resumed from a checkpoint continues them. The data grow
along each epoch, so the growing activation outruns its stale scale at known steps, and which
steps depends on the history's length and the margin."""
import copy
import json
import os
import tempfile
import unittest

import torch

from common import as_float, run_cli, small_mlp

E4M3, E5M2 = (torch.float8_e4m3fn, 448.0, 464.0), (torch.float8_e5m2, 57344.0, 61440.0)


class TeDelayed:
    """Transformer Engine's DelayedScaling as its documentation states it, one slot per FP8 tensor
    ("fc1/input", "fc1/weight", "fc1/grad_output"): the cast of a step uses the scale computed at the
    end of the step before (1 at the first: an empty history); the step's amax enters history[0];
    at the end of the step amax = max(history), the history rolls by one and its first slot is
    zeroed, scale = (fmax / amax) / 2^margin (kept when amax is 0 or not finite). `clamped` counts a
    step's values whose |x| * scale rounds past fmax (the cast clamps them), by step."""

    def __init__(self, history, margin, weight_cache=False):
        self.len, self.margin, self.slots = history, margin, {}
        self.clamped, self.first = 0, ""
        # TE's modules given is_first_microbatch: a weight cast in a step's first micro-batch only
        # (its FP8 workspace), the later ones reuse it and record no amax for it
        self.weight_cache, self.first_micro, self.weights = weight_cache, True, {}

    def cast_weight(self, w, name):
        if self.weight_cache and not self.first_micro and name in self.weights:
            return self.weights[name]
        self.weights[name] = self.cast(w, name, E4M3)
        return self.weights[name]

    def cast(self, t, name, fmt):
        dtype, fmax, past = fmt
        slot = self.slots.setdefault(name, {"hist": torch.zeros(self.len), "scale": torch.tensor(1.0), "fmax": fmax})
        t = t.detach().float()
        slot["hist"][0] = torch.maximum(slot["hist"][0], torch.max(torch.abs(t)))
        y = t * slot["scale"]
        n = int(((y.abs() > past) if fmt is E4M3 else (y.abs() >= past)).sum())
        if n and not self.clamped:
            self.first = name
        self.clamped += n
        return y.clamp(-fmax, fmax).to(dtype).float() / slot["scale"]

    def update(self):
        """The exit of TE's fp8_autocast (one micro-batch): histories roll, scales follow."""
        for slot in self.slots.values():
            amax = torch.max(slot["hist"])
            slot["hist"] = torch.roll(slot["hist"], -1, 0)
            slot["hist"][0] = 0.0
            if torch.isfinite(amax) and amax > 0:
                sf = (torch.tensor(slot["fmax"]) / amax) / (2.0 ** self.margin)
                slot["scale"] = torch.where(torch.isinf(sf), torch.tensor(torch.finfo(torch.float32).max), sf)

    def end_step(self):
        """The step's (clamped, first tensor), reset."""
        step = (self.clamped, self.first)
        self.clamped, self.first = 0, ""
        self.weights = {}
        return step


class DelayedMm(torch.autograd.Function):
    """The GEMMs on FP8 values: forward mm(input_q, weight_q^T) in FP32 cast to BF16; backward
    grad_output cast (E5M2), grad_input = grad_output_q @ weight_q, grad_weight = grad_output_q^T @
    input_q, in FP32 cast to grad_output's dtype (the forward's casts are the backward's operands)."""

    @staticmethod
    def forward(ctx, x, w, xq, wq, slot, te):
        ctx.save_for_backward(xq, wq)
        ctx.slot, ctx.te = slot, te
        with torch.autocast("cpu", enabled=False):
            return torch.mm(xq, wq.t()).to(torch.bfloat16).reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, go):
        xq, wq = ctx.saved_tensors
        goq = ctx.te.cast(go.reshape(-1, go.shape[-1]), ctx.slot, E5M2)
        gi = torch.mm(goq, wq).to(go.dtype).reshape(*go.shape[:-1], wq.shape[1])
        gw = torch.mm(goq.t(), xq).to(go.dtype)
        return gi, gw, None, None, None, None


class DelayedLinear(torch.nn.Module):
    def __init__(self, lin, name, te):
        super().__init__()
        self.weight, self.bias, self.name, self.te = lin.weight, lin.bias, name, te

    def forward(self, x):
        xq = self.te.cast(x.reshape(-1, x.shape[-1]), self.name + "/input", E4M3)
        wq = self.te.cast_weight(self.weight, self.name + "/weight")
        out = DelayedMm.apply(x, self.weight, xq, wq, self.name + "/grad_output", self.te)
        return out + self.bias.to(out.dtype)


class Fp8DelayedTrain(unittest.TestCase):
    """40 samples in batches of 16 (the last batch 8, so the epochs do not divide the steps) whose
    magnitude grows along the epoch: batch 1 outruns the scale batch 0 gave, batch 2 the one batch
    1 gave; the next epoch starts small again. With TE's default history the scales then remember
    the largest batch; with a history of one step they forget it and batch 1 outruns again at
    step 4; a margin of 2 leaves room for the growth."""

    STEPS, BATCH, LR = 7, 16, 0.5
    CONFIGS = ((1024, 0), (1, 0), (1, 2))

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        torch.manual_seed(3)
        cls.model = small_mlp(32, 64, 5).train()
        cls.path = os.path.join(cls.tmp.name, "mlp.pt")
        torch.jit.script(cls.model).save(cls.path)
        g = torch.Generator().manual_seed(11)
        cls.x = torch.randn(40, 32, generator=g) * (1.0 + torch.arange(40.0).unsqueeze(1) / 6.0)
        cls.y = torch.randint(0, 5, (40,), generator=g)
        cls.data = os.path.join(cls.tmp.name, "data.pt")
        torch.save({"inputs": cls.x, "labels": cls.y}, cls.data)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def reference(self, history, margin, accumulate=1, per_micro_batch=True, weight_cache=False):
        """Each step's AMP loss and (clamped, first tensor) under TeDelayed; with `accumulate`
        micro-batches a step (their losses / accumulate, summed), TE's update after each
        micro-batch, or (per_micro_batch=False, the alternative the test rules out) after the step;
        `weight_cache`: the weights cast in each step's first micro-batch only."""
        te = TeDelayed(history, margin, weight_cache)
        m = copy.deepcopy(self.model)
        for name in ("fc1", "fc2"):
            setattr(m, name, DelayedLinear(getattr(m, name), name, te))
        opt = torch.optim.SGD(m.parameters(), lr=self.LR)
        losses, clamped, cursor = [], [], 0
        for _ in range(self.STEPS):
            opt.zero_grad()
            total = 0.0
            for i in range(accumulate):
                te.first_micro = i == 0
                b, e = cursor, min(len(self.x), cursor + self.BATCH)
                cursor = 0 if e >= len(self.x) else e
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = torch.nn.functional.cross_entropy(m(self.x[b:e]), self.y[b:e]) / accumulate
                loss.backward()
                total += loss.item()
                if per_micro_batch:
                    te.update()
            if not per_micro_batch:
                te.update()
            opt.step()
            losses.append(total)
            clamped.append(te.end_step())
        return losses, clamped

    def train(self, d, *extra, steps=None, precision="fp8-delayed"):
        out = os.path.join(d, "train-%d.json" % len(os.listdir(d)))
        rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", steps or self.STEPS,
                            "--batch-size", self.BATCH, "--lr", self.LR, "--precision", precision, "--no-scaler",
                            "--loss", "ce", "--device", "cpu", "--no-db", "--json", out, "-q", *extra)
        self.assertIn(rc, (0, 1), se)
        with open(out) as f:
            return json.load(f)

    @staticmethod
    def steps_of(got):
        return ([as_float(s["loss_amp"]) for s in got["steps"]],
                [(s["fp8_saturated"], s["fp8_saturated_at"] or "") for s in got["steps"]])

    def test_every_step_as_te_delayed_scaling(self):
        seen = {}
        with tempfile.TemporaryDirectory() as d:
            for history, margin in self.CONFIGS:
                want = self.reference(history, margin)
                got = self.train(d, "--fp8-amax-history", history, "--fp8-margin", margin)
                self.assertEqual(got["fp8_delayed"], {"amax_history": history, "margin": margin})
                self.assertEqual(self.steps_of(got), want, (history, margin))
                seen[(history, margin)] = [i for i, (n, _) in enumerate(want[1]) if n]
        # the oracle separates the settings: the growing input outruns at known steps
        self.assertEqual(seen[(1024, 0)][:2], [1, 2], seen)
        self.assertIn(4, seen[(1, 0)], "a one-step history forgets the large batch")
        self.assertNotIn(4, seen[(1024, 0)], "the default history remembers it")
        self.assertLess(len(seen[(1, 2)]), len(seen[(1, 0)]), "a margin leaves room")

    def test_accumulated_micro_batches_each_a_te_step(self):
        """--accumulate 2: TE's fp8_autocast wraps each micro-batch (as Megatron and NeMo open it),
        so the histories and scales move on after every micro-batch, twice a step; the second
        micro-batch of a step casts with the scales the first one gave. A one-step history tells
        that from an update per optimizer step."""
        with tempfile.TemporaryDirectory() as d:
            got = self.steps_of(self.train(d, "--fp8-amax-history", 1, "--accumulate", 2))
        want = self.reference(1, 0, accumulate=2)
        self.assertEqual(got, want)
        self.assertNotEqual(self.reference(1, 0, accumulate=2, per_micro_batch=False), want)

    def test_weight_cache_as_te_given_is_first_microbatch(self):
        """--fp8-weight-cache, --accumulate 3: a step's later micro-batches reuse the weights its first
        one cast (with the scales before that micro-batch's update) and record no weight amax, as
        TE's modules do given is_first_microbatch; recasting each micro-batch trains differently
        (the weights move a lot at this learning rate, so their scales move between steps)."""
        for history in (1, 1024):
            with tempfile.TemporaryDirectory() as d:
                got = self.train(d, "--fp8-amax-history", history, "--accumulate", 3, "--fp8-weight-cache")
            self.assertEqual(got["fp8_delayed"], {"amax_history": history, "margin": 0, "weight_cache": True})
            want = self.reference(history, 0, accumulate=3, weight_cache=True)
            self.assertEqual(self.steps_of(got), want, history)
            self.assertNotEqual(self.reference(history, 0, accumulate=3), want, history)
        rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 1, "--precision", "fp8",
                            "--fp8-weight-cache", "--no-db")
        self.assertEqual(rc, 2, se)
        self.assertIn("--fp8-weight-cache", se)
        self.assertIn("expected precision fp8-delayed", se)

    def test_resumed_run_continues_the_histories(self):
        """Checkpoint after 3 steps, resume to 7: steps 3..6 as the uninterrupted run (and TE's);
        without the histories step 3 would cast with scale 1."""
        with tempfile.TemporaryDirectory() as d:
            full = self.train(d, "--fp8-amax-history", 4)
            first = self.train(d, "--fp8-amax-history", 4, "--checkpoint-every", 3, "--checkpoint-dir", d, steps=3)
            ckpt = first["checkpoints"][0]
            rest = self.train(d, "--fp8-amax-history", 4, "--resume", ckpt)
            self.assertEqual([s["step"] for s in rest["steps"]], [3, 4, 5, 6])
            want_losses, want_clamped = self.steps_of(full)
            got_losses, got_clamped = self.steps_of(rest)
            self.assertEqual(got_losses, want_losses[3:])
            self.assertEqual(got_clamped, want_clamped[3:])
            self.assertEqual(self.steps_of(full), self.reference(4, 0))
            # another history length is refused by name; a checkpoint of another precision warns
            rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 5, "--batch-size",
                                self.BATCH, "--precision", "fp8-delayed", "--fp8-amax-history", 8, "--resume", ckpt,
                                "--no-db", "-q")
            self.assertEqual(rc, 2, se)
            self.assertIn("fp8.delayed.", se)
            self.assertIn("holds 4 steps of amax history; this run keeps 8", se)
            bf16 = self.train(d, "--checkpoint-every", 3, "--checkpoint-dir", d, steps=3, precision="bf16")
            rc, so, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 4, "--batch-size",
                                 self.BATCH, "--precision", "fp8-delayed", "--resume", bf16["checkpoints"][0],
                                 "--no-scaler", "--no-db")
            self.assertIn(rc, (0, 1), se)
            self.assertIn("the histories start empty", so)

    def planted(self, at, value):
        """Two steps on the data with x[at] = value: (the CLI's steps, TE's (clamped, first) by step)."""
        x = self.x.clone()
        x[at] = value
        with tempfile.TemporaryDirectory() as d:
            data = os.path.join(d, "planted.pt")
            torch.save({"inputs": x, "labels": self.y}, data)
            saved = self.x
            try:
                self.x = x
                _, want = self.reference(1024, 0)
            finally:
                self.x = saved
            out = os.path.join(d, "t.json")
            rc, _, se = run_cli("train", "--model", self.path, "--data", data, "--steps", 2, "--batch-size",
                                self.BATCH, "--lr", self.LR, "--precision", "fp8-delayed", "--no-scaler", "--loss",
                                "ce", "--device", "cpu", "--no-db", "--json", out, "-q")
            self.assertIn(rc, (0, 1), se)
            with open(out) as f:
                return json.load(f)["steps"], want

    def test_a_non_finite_step_is_diagnosed_without_recording_twice(self):
        """Step 1's batch holds a NaN (an inf would be clamped to 448 by the cast): the step goes
        non-finite and is named for its input, row 20 of the data (not fc1's linear, which only
        carried it on); the step's clamped count is TE's, counted once. (A forward re-run under
        DelayedTrainingScope::Quiet counts nothing again: DelayedTraining.AQuietReRunRecordsNothing.)"""
        steps, want = self.planted((20, 3), float("nan"))
        self.assertEqual(steps[1]["nonfinite_stage"], "input")
        o = steps[1]["origin"]
        self.assertEqual((o["stage"], o["samples"]), ("input", ["row 20"]))
        self.assertGreater(want[1][0], 0, "step 1 clamps values (the growing batch)")
        self.assertEqual([(s["fp8_saturated"], s["fp8_saturated_at"] or "") for s in steps], want[:2])

    def test_an_inf_input_is_counted_as_clamped(self):
        """Step 0's batch holds an inf: the cast clamps it to 448 (TE's saturating cast does too), so
        the step's clamped count is TE's, the inf included (was: left out, "clamped: none" for an
        inf the cast made finite)."""
        steps, want = self.planted((3, 2), float("inf"))
        self.assertGreater(want[0][0], 0)
        self.assertEqual((steps[0]["fp8_saturated"], steps[0]["fp8_saturated_at"]), want[0])

    def test_hostile_checkpoint_state_is_refused_by_key(self):
        """A checkpoint's fp8-delayed state edited: each bad value refused naming its key (exit 2)."""
        with tempfile.TemporaryDirectory() as d:
            ckpt = self.train(d, "--fp8-amax-history", 4, "--checkpoint-every", 2, "--checkpoint-dir", d,
                              steps=2)["checkpoints"][0]
            m = torch.jit.load(ckpt)
            names = [m._c.getattr(f"fp8.delayed.{i}.name") for i in range(6)]  # 6 tensors were saved
            grad = next(i for i, n in enumerate(names) if n.endswith("grad_output"))
            fwd = next(i for i, n in enumerate(names) if not n.endswith("grad_output"))
            cases = [("fp8.delayed.0.scale", -1.0, "expected a finite scale > 0"),
                     ("fp8.delayed.0.element", "e3m4", "'e3m4'; expected e4m3 or e5m2"),
                     ("fp8.delayed.0.steps", -5, "expected a count >= 0"),
                     ("fp8.delayed.1.history", -torch.ones(4), "holds a negative amax"),
                     ("fp8.delayed.count", 99, "fp8.delayed.6.name"),
                     # were accepted: a count short of the entries, a name twice or empty, a format
                     # against the tensor's role, an empty history ("resume with an amax history of 0")
                     ("fp8.delayed.count", 3, "3, yet fp8.delayed.3 is there too"),
                     ("fp8.delayed.1.name", names[0], "comes twice"),
                     ("fp8.delayed.1.name", "", "empty; expected the name of an FP8 tensor"),
                     (f"fp8.delayed.{fwd}.element", "e5m2", f"'e5m2' for '{names[fwd]}'; expected e4m3"),
                     (f"fp8.delayed.{grad}.element", "e4m3", f"'e4m3' for '{names[grad]}'; expected e5m2"),
                     ("fp8.delayed.1.history", torch.zeros(0), "holds 0 steps of amax history; this run keeps 4: "
                      "expected 1 to 1048576 steps")]
            for key, value, said in cases:
                m = torch.jit.load(ckpt)
                m._c.setattr(key, value)
                bad = os.path.join(d, "bad.ckpt")
                m.save(bad)
                rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 4, "--batch-size",
                                    self.BATCH, "--precision", "fp8-delayed", "--fp8-amax-history", 4, "--resume", bad,
                                    "--no-scaler", "--no-db", "-q")
                self.assertEqual(rc, 2, f"{key}: {se}")
                self.assertIn(said, se, key)
                self.assertIn(bad, se, key)
            # a tensor renamed: its history matches nothing the model casts, and the model's tensor
            # of that name starts empty; both said after the first step (was: silently)
            m = torch.jit.load(ckpt)
            m._c.setattr(f"fp8.delayed.{fwd}.name", "nosuch/input")
            bad = os.path.join(d, "renamed.ckpt")
            m.save(bad)
            out = os.path.join(d, "renamed.json")
            rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 4, "--batch-size",
                                self.BATCH, "--precision", "fp8-delayed", "--fp8-amax-history", 4, "--resume", bad,
                                "--no-scaler", "--no-db", "-q", "--json", out)
            self.assertIn(rc, (0, 1), se)
            with open(out) as f:
                w = " ".join(json.load(f)["warnings"])
            self.assertIn("the checkpoint's amax histories of 1 FP8 tensors match none the model cast in its first "
                          "resumed step ('nosuch/input'): not used (a module that did not run in that step, or a "
                          "checkpoint of another model)", w)
            self.assertIn(f"1 FP8 tensors the model casts have no amax history in the checkpoint ('{names[fwd]}')", w)
            m = torch.jit.load(ckpt)  # unchanged: nothing said
            same = os.path.join(d, "same.ckpt")
            m.save(same)
            rc, _, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 4, "--batch-size",
                                self.BATCH, "--precision", "fp8-delayed", "--fp8-amax-history", 4, "--resume", same,
                                "--no-scaler", "--no-db", "-q", "--json", out)
            with open(out) as f:
                self.assertFalse([x for x in json.load(f)["warnings"] if "amax histor" in x])

    def test_settings_and_refusals(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "runs.sqlite")
            rc, so, se = run_cli("train", "--model", self.path, "--data", self.data, "--steps", 3, "--batch-size",
                                 self.BATCH, "--precision", "fp8-delayed", "--fp8-amax-history", 2, "--no-scaler",
                                 "--db", db)
            self.assertIn(rc, (0, 1), se)
            self.assertIn("fp8-delayed: amax history 2 micro-batches, margin 0; values beyond the stale scale, clamped: step 1",
                          so)
            uuid = so.split()[2]
            rc, so, se = run_cli("show", uuid, "--db", db, "--json")
            self.assertEqual(rc, 0, se)
            shown = json.loads(so)
            self.assertEqual(shown["fp8_delayed"], {"amax_history": 2, "margin": 0})
            self.assertGreater(shown["steps"][1]["fp8_saturated"], 0)
            self.assertEqual(shown["steps"][1]["fp8_saturated_at"], "fc1/input")
        rc, _, se = run_cli("train", "--model", "demo:mlp", "--data", "demo", "--steps", 1, "--precision", "bf16",
                            "--fp8-margin", 1, "--no-db")
        self.assertEqual(rc, 2)
        self.assertIn("--fp8-margin", se)
        self.assertIn("applies to --precision fp8-delayed only", se)
        rc, _, se = run_cli("replay", "--model", self.path, "--checkpoint", self.path, "--batch", self.data,
                            "--precision", "fp8-delayed")
        self.assertEqual(rc, 2, se)
        self.assertIn("'fp8-delayed'; expected fp16, bf16, fp8, fp8-rowwise or mxfp8 (fp8-delayed trains with `train` only)",
                      se)


class Fp8DelayedAdvise(unittest.TestCase):
    """advise --precision fp8-delayed takes the recipe's history and margin as run does: the passes
    of the search and the verifying run use them (the recorded run holds them); advising a recorded
    run keeps its own and refuses the flags."""

    def test_settings_reach_the_verifying_run(self):
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "runs.sqlite")
            advice = os.path.join(d, "advice.json")
            rc, _, se = run_cli("advise", "--model", "demo:mlp", "--probes", "demo", "--precision", "fp8-delayed",
                                "--fp8-amax-history", 4, "--fp8-margin", 1, "--atol", 0.5, "--rtol", 0.5,
                                "--max-flips", 40, "--no-bench", "--db", db, "--json", advice, "-q")
            self.assertEqual(rc, 0, se)
            with open(advice) as f:
                run = json.load(f)["verified_run"]
            self.assertTrue(run)
            rc, so, se = run_cli("show", run, "--db", db, "--json")
            self.assertEqual(rc, 0, se)
            self.assertEqual(json.loads(so)["fp8_delayed"], {"amax_history": 4, "margin": 1, "amax_compute_algo": "max"})
            rc, _, se = run_cli("advise", run, "--db", db, "--fp8-margin", 2, "--no-bench", "-q")
            self.assertEqual(rc, 2, se)
            self.assertIn("--fp8-margin", se)
            self.assertIn("a recorded run's model, probes and criteria are fixed", se)
        rc, _, se = run_cli("advise", "--model", "demo:mlp", "--probes", "demo", "--precision", "fp8", "--fp8-margin", 1,
                            "--no-db", "-q")
        self.assertEqual(rc, 2, se)
        self.assertIn("applies to --precision fp8-delayed only", se)


if __name__ == "__main__":
    unittest.main()

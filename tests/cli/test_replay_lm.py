# SPDX-License-Identifier: MIT
"""Incident replay of a language model (`replay --loss lm|model`, issue 21): a Python training
loop (torch.autocast FP16, torch.amp.GradScaler, Adam; Hugging Face's causal-LM convention:
logits at t against the token at t + 1, labels -100 ignored) on a tiny causal LM exported with
torch.export. A rare token whose embedding is large (60000, representable in FP16) appears
only in the batch of step K: the mix layer's FP16 output overflows there. The state of step
K-1 and that batch are saved; `ampscope-cli replay` on the .pt2 program must give Python's
losses, scale, skip decision and updated parameters bitwise, and name the module and op
Python's forward hooks name. Bad input (--loss lm on a classifier, token labels that do not fit
the logits, --loss model on a program that returns logits) exits 2, named. A tiny Hugging Face
LLaMA (non-persistent buffers) and a tiny GPT-2 (tied weights), transformers configs with random
weights, replay a step bitwise with both losses; train updates GPT-2's tied pair as one."""
import copy
import hashlib
import json
import math
import os
import tempfile
import unittest

import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import as_float, run_cli
from test_replay import FirstNonFiniteFunction, replay

warnings.filterwarnings("ignore")
try:
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
    transformers.logging.set_verbosity_error()
except ImportError:  # tools/bootstrap.sh installs it into .venv (tests only)
    transformers = None

K = 3  # the incident's step
V, W, N, T = 32, 16, 8, 10
RARE = V - 1  # only the batch of step K holds it


class CausalLM(nn.Module):
    """input_ids [N, T], attention_mask [N, T] -> logits [N, T, V]."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, W)
        self.mix = nn.Linear(W, W)
        self.head = nn.Linear(W, V)
        with torch.no_grad():  # mix's first output overflows FP16 on the rare token
            self.emb.weight[RARE] = 60000.0 * torch.sign(self.mix.weight[0])

    def logits(self, input_ids, attention_mask):
        h = torch.relu(self.mix(self.emb(input_ids)))
        return self.head(h * attention_mask.unsqueeze(-1))  # int mask: h keeps its dtype

    def forward(self, input_ids, attention_mask):
        return self.logits(input_ids, attention_mask)


class CausalLMWithLoss(CausalLM):
    """Returns its own loss given labels, as Hugging Face models do (--loss model)."""

    def forward(self, input_ids, attention_mask, labels):
        return shifted_ce(self.logits(input_ids, attention_mask), labels)


def shifted_ce(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100)


def sha(t):
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b


def token_batches(seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for step in range(K + 1):
        ids = torch.randint(0, RARE, (N, T), generator=g)
        mask = torch.ones(N, T, dtype=torch.long)
        mask[1, 7:] = 0  # a padded sample
        if step == K:
            ids[2, 4] = RARE
        labels = ids.masked_fill(mask == 0, -100)
        out.append((ids, mask, labels))
    return out


class LMIncident:
    """The user's job in Python up to step K-1; the state saved as a dict checkpoint."""

    def __init__(self, cls, inside, seed=5, opt_kwargs=None, scaler_kwargs=None):
        torch.manual_seed(seed)
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.net, self.inside = cls(), inside
        self.opt_kwargs = opt_kwargs or {"lr": 1e-3}
        data = token_batches(seed)
        self.ids, self.mask, self.labels = data[K]
        args = (self.ids, self.mask, self.labels) if inside else (self.ids, self.mask)
        self.model = os.path.join(d, "lm.pt2")
        torch.export.save(torch.export.export(self.net, args), self.model)
        opt = torch.optim.Adam(self.net.parameters(), **self.opt_kwargs)
        scaler = torch.amp.GradScaler("cpu", **(scaler_kwargs or {"init_scale": 2.0 ** 10}))
        for ids, mask, labels in data[:K]:
            loss, _, skipped = self.amp_step(self.net, opt, scaler, ids, mask, labels, torch.float16)
            assert not skipped and math.isfinite(loss), "the ordinary steps train"
        self.state = (copy.deepcopy(self.net.state_dict()), copy.deepcopy(opt.state_dict()), scaler.state_dict())
        self.ckpt = os.path.join(d, "ckpt.pt")
        torch.save({"model": self.state[0], "optimizer": self.state[1], "scaler": self.state[2]}, self.ckpt)
        self.batch = os.path.join(d, "batch.pt")
        if inside:
            torch.save({"inputs": [self.ids, self.mask, self.labels]}, self.batch)
        else:
            torch.save({"inputs": [self.ids, self.mask], "labels": self.labels}, self.batch)

    def loss(self, net, ids, mask, labels):
        return net(ids, mask, labels) if self.inside else shifted_ce(net(ids, mask), labels)

    def amp_step(self, net, opt, scaler, ids, mask, labels, dtype):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = self.loss(net, ids, mask, labels)
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        found = sum(v.item() for v in scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()) > 0
        scaler.step(opt)
        scaler.update()
        return loss.item(), scale, found

    def python_step(self, dtype=torch.float16):
        """Step K from the saved state: the AMP job's and the FP32 reference's figures."""
        sd, osd, ssd = self.state
        out = {}
        for side in ("amp", "ref"):
            net = copy.deepcopy(self.net)
            net.load_state_dict(sd)
            opt = torch.optim.Adam(net.parameters(), **self.opt_kwargs)
            opt.load_state_dict(copy.deepcopy(osd))
            if side == "amp":
                scaler = torch.amp.GradScaler("cpu")
                scaler.load_state_dict(ssd)
                loss, scale, skipped = self.amp_step(net, opt, scaler, self.ids, self.mask, self.labels, dtype)
                out[side] = {"loss": loss, "scale": scale, "skipped": skipped, "scale_after": scaler.get_scale()}
            else:
                opt.zero_grad()
                loss = self.loss(net, self.ids, self.mask, self.labels)
                loss.backward()
                opt.step()
                out[side] = {"loss": loss.item()}
            out[side]["sha"] = {n: sha(p) for n, p in net.named_parameters()}
        return out

    def python_forward_origin(self):
        net, bad = copy.deepcopy(self.net), []
        for n, m in net.named_modules():
            if n:
                m.register_forward_hook(lambda m, i, o, n=n: bad.append(n) if not bool(torch.isfinite(o).all()) else None)
        mode = FirstNonFiniteFunction()
        args = (self.ids, self.mask, self.labels) if self.inside else (self.ids, self.mask)
        with torch.autocast("cpu", dtype=torch.float16), torch.no_grad(), mode:
            net(*args)
        return bad[0], "aten::" + mode.first


class ReplayLM(unittest.TestCase):
    def check_same_as_python(self, got, want):
        step = got["steps"][-1]
        self.assertTrue(same(as_float(step["loss_amp"]), want["amp"]["loss"]), (step["loss_amp"], want["amp"]["loss"]))
        self.assertEqual(as_float(step["loss_ref"]), want["ref"]["loss"])
        self.assertEqual(as_float(step["scale"]), want["amp"]["scale"])
        self.assertEqual(step["skipped"], want["amp"]["skipped"])
        self.assertEqual(as_float(step["scale_after"]), want["amp"]["scale_after"])
        self.assertEqual(sorted(p["name"] for p in step["params"]), sorted(want["ref"]["sha"]))
        for p in step["params"]:
            self.assertEqual(p["sha256_ref"], want["ref"]["sha"][p["name"]], f"FP32 reference {p['name']}")
            self.assertEqual(p["sha256_amp"], want["amp"]["sha"][p["name"]], f"AMP {p['name']}")

    def check_incident(self, cls, inside, loss):
        inc = LMIncident(cls, inside)
        try:
            module, op = inc.python_forward_origin()
            self.assertEqual(module, "mix", "the overflow is where the test planted it")
            want = inc.python_step()
            self.assertTrue(want["amp"]["skipped"], "GradScaler skips the planted step in Python")
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--loss", loss, "--device", "cpu")
            self.assertEqual(rc, 1, got)
            f = got["first_nonfinite"]
            self.assertEqual((f["stage"], f["module"], f["op"], f["side"], f["step"]), ("forward", module, op, "amp", 0))
            self.check_same_as_python(got, want)
            # the remedy BF16: no overflow, the AMP update applied, bitwise Python's
            want = inc.python_step(torch.bfloat16)
            self.assertFalse(want["amp"]["skipped"])
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--loss", loss, "--precision", "bf16", "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.assertIsNone(got["first_nonfinite"])
            self.check_same_as_python(got, want)
        finally:
            inc.tmp.cleanup()

    def test_loss_lm_replays_pythons_step(self):
        self.check_incident(CausalLM, False, "lm")

    def test_loss_model_replays_pythons_step(self):
        self.check_incident(CausalLMWithLoss, True, "model")

    def test_default_loss_of_token_labels_is_lm(self):
        inc = LMIncident(CausalLM, False)
        try:
            want = inc.python_step(torch.bfloat16)
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--precision", "bf16", "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.check_same_as_python(got, want)
        finally:
            inc.tmp.cleanup()


class Logits(nn.Module):
    """A Hugging Face causal LM as the job calls it: logits of (input_ids, attention_mask)."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask).logits


class OwnLoss(Logits):
    """... or with labels, its own loss (Hugging Face's shifted cross-entropy)."""

    def forward(self, input_ids, attention_mask, labels):
        return self.lm(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss


def tiny_llama():
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                        num_key_value_heads=1, max_position_embeddings=16, use_cache=False))


def tiny_gpt2():
    """GPT-2 ties lm_head.weight to transformer.wte.weight (one Parameter); dropout off (replay seeds its own RNG)."""
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=16, n_embd=32, n_layer=1, n_head=2, use_cache=False, resid_pdrop=0.0,
                                      embd_pdrop=0.0, attn_pdrop=0.0))


@unittest.skipIf(transformers is None, "transformers is not installed (tools/bootstrap.sh installs it)")
class HuggingFaceLM(unittest.TestCase):
    """A tiny LLaMA and a tiny GPT-2 (random weights, from a config: no hub) trained two AMP steps
    in Python; the third step replayed from its dict checkpoint equals Python's bitwise, with the
    loss computed by replay (lm) and by the model itself (model). Strict key matching: LLaMA's
    non-persistent rotary_emb buffers are in the program, not in the state_dict, and are not
    missing; GPT-2's tied lm_head.weight is one parameter, as in the job's optimizer."""

    def incident(self, lm, cls, loss):
        torch.manual_seed(2)
        inc = LMIncident.__new__(LMIncident)
        inc.tmp, inc.inside, inc.opt_kwargs = tempfile.TemporaryDirectory(), loss == "model", {"lr": 1e-3}
        inc.net = cls(lm())
        d = inc.tmp.name
        data = token_batches(9)
        inc.ids, inc.mask, inc.labels = data[K]
        args = (inc.ids, inc.mask, inc.labels) if inc.inside else (inc.ids, inc.mask)
        inc.model = os.path.join(d, "lm.pt2")
        torch.export.save(torch.export.export(inc.net.train(), args), inc.model)
        opt = torch.optim.Adam(inc.net.parameters(), **inc.opt_kwargs)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
        for ids, mask, labels in data[:2]:
            inc.amp_step(inc.net, opt, scaler, ids, mask, labels, torch.float16)
        inc.state = (copy.deepcopy(inc.net.state_dict()), copy.deepcopy(opt.state_dict()), scaler.state_dict())
        inc.ckpt, inc.batch = os.path.join(d, "ckpt.pt"), os.path.join(d, "batch.pt")
        torch.save({"model": inc.state[0], "optimizer": inc.state[1], "scaler": inc.state[2]}, inc.ckpt)
        torch.save({"inputs": list(args)} if inc.inside else {"inputs": list(args), "labels": inc.labels}, inc.batch)
        return inc

    def check(self, lm, cls, loss):
        inc = self.incident(lm, cls, loss)
        try:
            want = inc.python_step()
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--loss", loss, "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.assertEqual((got["keys"]["missing"], got["keys"]["unexpected"], got["keys"]["mismatched"]), ([], [], []))
            self.assertIsNone(got["first_nonfinite"])
            ReplayLM.check_same_as_python(self, got, want)
        finally:
            inc.tmp.cleanup()

    def test_llama_loss_lm(self):
        self.check(tiny_llama, Logits, "lm")

    def test_llama_loss_model(self):
        self.check(tiny_llama, OwnLoss, "model")

    def test_llama_non_persistent_buffer_in_the_checkpoint_is_unexpected(self):
        """A checkpoint that holds a non-persistent buffer's key: load_state_dict(strict=True)
        refuses it as unexpected, strict=False ignores it (the model keeps its own value)."""
        inc = self.incident(tiny_llama, Logits, "lm")
        try:
            sd, osd, ssd = inc.state
            non_persistent = sorted({n for n, _ in inc.net.named_buffers()} - set(sd))
            self.assertEqual(non_persistent, ["lm.model.rotary_emb.inv_freq", "lm.model.rotary_emb.original_inv_freq"])
            extra = dict(sd, **{n: 2 * b for n, b in inc.net.named_buffers() if n in non_persistent})
            with self.assertRaisesRegex(RuntimeError, "Unexpected key"):
                copy.deepcopy(inc.net).load_state_dict(extra)
            torch.save({"model": extra, "optimizer": osd, "scaler": ssd}, inc.ckpt)
            rc, err = replay(inc.model, [inc.ckpt], inc.batch, "--loss", "lm", "--device", "cpu")
            self.assertEqual(rc, 2, err)
            for n in ["ckpt.pt", "not in the model"] + non_persistent:
                self.assertIn(n, err)
            want = inc.python_step()  # load_state_dict(sd): the model's own inv_freq
            rc, got = replay(inc.model, [inc.ckpt, "--non-strict"], inc.batch, "--loss", "lm", "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.assertEqual((got["keys"]["missing"], sorted(got["keys"]["unexpected"])), ([], non_persistent))
            ReplayLM.check_same_as_python(self, got, want)
        finally:
            inc.tmp.cleanup()

    def test_gpt2_tied_weights_loss_lm(self):
        """lm_head.weight is transformer.wte.weight: one parameter (both uses' gradients, one Adam
        state, one update), named by its first occurrence as model.parameters() orders them."""
        self.check(tiny_gpt2, Logits, "lm")

    def test_gpt2_tied_weights_loss_model(self):
        self.check(tiny_gpt2, OwnLoss, "model")

    def test_gpt2_checkpoint_with_one_tied_name(self):
        """Hugging Face's save_pretrained (safetensors refuses shared tensors) writes one name of a
        tied pair: the other is loaded through it, not missing; the replay is still Python's."""
        inc = self.incident(tiny_gpt2, Logits, "lm")
        try:
            sd, osd, ssd = inc.state
            self.assertEqual(sd["lm.lm_head.weight"].data_ptr(), sd["lm.transformer.wte.weight"].data_ptr())
            torch.save({"model": {k: v for k, v in sd.items() if k != "lm.lm_head.weight"}, "optimizer": osd, "scaler": ssd}, inc.ckpt)
            want = inc.python_step()
            rc, got = replay(inc.model, [inc.ckpt], inc.batch, "--loss", "lm", "--device", "cpu")
            self.assertEqual(rc, 0, got)
            self.assertEqual((got["keys"]["missing"], got["keys"]["unexpected"]), ([], []))
            ReplayLM.check_same_as_python(self, got, want)
        finally:
            inc.tmp.cleanup()

    def test_gpt2_train_updates_the_tied_pair_as_one(self):
        """train --loss lm on a tied GPT-2 program equals the user's eager loop (SGD, autocast FP16,
        GradScaler) step by step. The program's graph reads the pair through one placeholder (the
        other is unused): the losses matched before; the weights' divergence (over
        model.parameters(), the tied one once) shows whether the pair is one tensor."""
        torch.manual_seed(3)
        net = Logits(tiny_gpt2())
        self.assertIs(net.lm.lm_head.weight, net.lm.transformer.wte.weight)
        data = token_batches(9)
        ids = torch.cat([d[0] for d in data])
        mask = torch.ones_like(ids)  # the train command feeds inputs, the mask is one of them
        labels = torch.cat([d[2] for d in data])
        steps, b = 4, N
        with tempfile.TemporaryDirectory() as d:
            model, tokens = os.path.join(d, "gpt2.pt2"), os.path.join(d, "tokens.pt")
            torch.export.save(torch.export.export(net.train(), (ids[:b], mask[:b])), model)
            torch.save({"inputs": [ids, mask], "labels": labels}, tokens)
            ref, amp = copy.deepcopy(net), copy.deepcopy(net)
            opt_r, opt_a = torch.optim.SGD(ref.parameters(), lr=0.5), torch.optim.SGD(amp.parameters(), lr=0.5)
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 8)
            want = []
            for step in range(steps):
                x, m, y = ids[step * b:(step + 1) * b], mask[step * b:(step + 1) * b], labels[step * b:(step + 1) * b]
                opt_r.zero_grad()
                opt_a.zero_grad()
                lr_ = shifted_ce(ref(x, m), y)
                lr_.backward()
                opt_r.step()
                scale = scaler.get_scale()
                with torch.autocast("cpu", dtype=torch.float16):
                    la = shifted_ce(amp(x, m), y)
                scaler.scale(la).backward()
                scaler.step(opt_a)
                scaler.update()
                with torch.no_grad():  # ||w_amp - w_ref|| / ||w_ref|| over model.parameters(): the tied one once
                    num = sum(((a.double() - r.double()) ** 2).sum() for a, r in zip(amp.parameters(), ref.parameters()))
                    den = sum((r.double() ** 2).sum() for r in ref.parameters())
                want.append((lr_.item(), la.item(), scale, math.sqrt(num / den)))
            rc, so, se = run_cli("train", "--model", model, "--data", tokens, "--loss", "lm", "--steps", steps, "--batch-size", b,
                                 "--lr", 0.5, "--precision", "fp16", "--init-scale", 2.0 ** 8, "--device", "cpu", "--json", "-", "-q")
            self.assertIn(rc, (0, 1), se)
            got = json.loads(so)["steps"]
            self.assertEqual(len(got), steps)
            for w, g in zip(want, got):
                self.assertEqual((as_float(g["loss_ref"]), as_float(g["loss_amp"]), as_float(g["scale"])), w[:3], f"step {g['step']}")
                self.assertAlmostEqual(as_float(g["divergence"]), w[3], delta=1e-9 * w[3], msg=f"step {g['step']}")


class CausalLMWithBuffer(CausalLM):
    """A non-persistent buffer (register_buffer(persistent=False), as LLaMA's rotary inv_freq): in
    the program, not in the state_dict."""

    def __init__(self):
        super().__init__()
        self.register_buffer("gain", torch.full((W,), 0.5), persistent=False)

    def logits(self, input_ids, attention_mask):
        h = torch.relu(self.mix(self.emb(input_ids))) * self.gain
        return self.head(h * attention_mask.unsqueeze(-1))


class NonPersistentBuffer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = LMIncident(CausalLMWithBuffer, False)

    @classmethod
    def tearDownClass(cls):
        cls.inc.tmp.cleanup()

    def test_strict_replay_without_the_buffer(self):
        self.assertNotIn("gain", self.inc.state[0])
        want = self.inc.python_step(torch.bfloat16)
        rc, got = replay(self.inc.model, [self.inc.ckpt], self.inc.batch, "--precision", "bf16", "--device", "cpu")
        self.assertEqual(rc, 0, got)
        self.assertEqual((got["keys"]["missing"], got["keys"]["unexpected"]), ([], []))
        ReplayLM.check_same_as_python(self, got, want)

    def test_persistent_flag_not_a_bool(self):
        from test_export import edit_json, rewrite

        def change(j):
            for spec in j["graph_module"]["signature"]["input_specs"]:
                if "buffer" in spec:
                    spec["buffer"]["persistent"] = "no"
        bad = os.path.join(self.inc.tmp.name, "bad-persistent.pt2")
        rewrite(self.inc.model, bad, edit_json("models/model.json", change))
        rc, err = replay(bad, [self.inc.ckpt], self.inc.batch, "--precision", "bf16", "--device", "cpu")
        self.assertEqual(rc, 2, err)
        for n in ("bad-persistent.pt2", "'gain' persistent", "expected true or false"):
            self.assertIn(n, err)


class BadLMInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.inc = LMIncident(CausalLM, False)
        d = cls.d = cls.inc.tmp.name
        ids, mask, labels = cls.inc.ids, cls.inc.mask, cls.inc.labels
        p = lambda n: os.path.join(d, n)
        torch.save({"inputs": [ids, mask], "labels": labels[:, 0]}, p("flat.pt"))
        torch.save({"inputs": [ids, mask], "labels": torch.cat([labels, labels[:, :1]], 1)}, p("long.pt"))
        # a classifier (TorchScript) with its own checkpoint, given token labels
        clf = nn.Sequential(nn.Linear(4, 3))
        torch.jit.script(clf).save(p("clf.pt"))
        opt = torch.optim.Adam(clf.parameters())
        torch.save({"model": clf.state_dict(), "optimizer": opt.state_dict(), "scaler": torch.amp.GradScaler("cpu").state_dict()},
                   p("clf-ckpt.pt"))
        torch.save({"inputs": torch.randn(N, 4), "labels": torch.randint(0, 3, (N, T))}, p("clf-tokens.pt"))

    @classmethod
    def tearDownClass(cls):
        cls.inc.tmp.cleanup()

    def bad(self, model, ckpt, batch, loss, *named):
        rc, err = replay(model, [ckpt], batch, "--loss", loss, "--device", "cpu")
        self.assertEqual(rc, 2, err)
        for n in named:
            self.assertIn(n, err)
        self.assertNotIn("terminate called", err)

    def test_lm_needs_token_labels(self):
        self.bad(self.inc.model, self.inc.ckpt, os.path.join(self.d, "flat.pt"), "lm", "flat.pt", "labels", "token labels [N, T]")

    def test_lm_labels_that_do_not_fit_the_logits(self):
        self.bad(self.inc.model, self.inc.ckpt, os.path.join(self.d, "long.pt"), "lm", "long.pt", "labels", f"[N, {T + 1}]")

    def test_lm_on_a_classifier(self):
        p = lambda n: os.path.join(self.d, n)
        self.bad(p("clf.pt"), p("clf-ckpt.pt"), p("clf-tokens.pt"), "lm", "clf-tokens.pt", "labels", "logits")

    def test_ce_with_token_labels(self):
        self.bad(self.inc.model, self.inc.ckpt, self.inc.batch, "ce", "batch.pt", "are for loss lm")

    def test_model_loss_on_a_program_returning_logits(self):
        self.bad(self.inc.model, self.inc.ckpt, self.inc.batch, "model", "lm.pt2", "loss model: the output is", "expected the loss")


if __name__ == "__main__":
    unittest.main()

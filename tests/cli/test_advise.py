# SPDX-License-Identifier: MIT
"""ampscope-cli advise: which modules must stay in FP32 for the AMP passes to meet the criteria.

The models are planted here, with weights and probes chosen so that every module but the
planted ones computes exactly in FP16 and BF16 (small integers and powers of two), and the
oracle is eager PyTorch (the same wheel) on the original nn.Module under torch.autocast("cpu",
dtype), with the advised modules wrapped in autocast(enabled=False) and their inputs cast to
FP32, as ampscope's FP32 regions run them:

- Planted: `blocks.0.up` overflows FP16 (2^12 x > 65504 for the "edge" samples; `blocks.0.scale`
  brings it back down, so FP32 and BF16 are fine there), and `head` rounds a weight 1 + 2^-10
  to 1 in BF16, which ties (and so flips) the "boundary" samples whose two top scores differ by
  k 2^-10; FP16 holds that weight exactly. The minimal FP32 set is {blocks.0.up, head}.
- RootOp: the FP16 overflow is in the root module's own `x @ self.w`: no submodule can fix it.
- Broken: the FP32 reference itself is infinite for one probe.
- Fragile: `fragile` is a Linear whose zero-sum rows cancel inputs near 1000, so the FP16
  rounding of its inputs and weights is large next to its small output; its SQNR is checked
  against a Python computation on the FP32 reference's own inputs to each module."""
import contextlib
import itertools
import json
import math
import os
import tempfile
import unittest

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import as_float, comparison_of, run_cli, run_json

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
ATOL, RTOL = 0.1, 0.01  # loose: only non-finite outputs and flips reject the planted model
CRITERIA = ["--max-flips", 0, "--atol", ATOL, "--rtol", RTOL]
PLANTED_SET = {"blocks.0.up", "head"}


class Scale(nn.Module):
    """x * s: no autocast policy for mul, so it runs in its input's dtype (FP32 after an FP32 region)."""

    def __init__(self, s: float):
        super().__init__()
        self.s = s

    def forward(self, x):
        return x * self.s


class Block(nn.Module):
    def __init__(self, weight, s):
        super().__init__()
        self.up = nn.Linear(4, 4, bias=False)
        self.scale = Scale(s)
        self.act = nn.ReLU()
        with torch.no_grad():
            self.up.weight.copy_(weight)

    def forward(self, x):
        return self.act(self.scale(self.up(x)))


class Planted(nn.Module):
    def __init__(self):
        super().__init__()
        swap = torch.eye(4)[[1, 0, 3, 2]]  # head input h = (x1, x0, x3, x2)
        self.blocks = nn.ModuleList([Block(torch.eye(4) * 2.0**12, 2.0**-12), Block(swap * 2.0, 0.5)])
        self.head = nn.Linear(4, 3, bias=False)
        with torch.no_grad():  # scores (x0, (1 + 2^-10) x1, x3)
            self.head.weight.copy_(torch.tensor([[0.0, 1, 0, 0], [1 + 2.0**-10, 0, 0, 0], [0, 0, 1, 0]]))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Drifting(Planted):
    """Planted whose passes are not reproducible: a call counter (a plain int attribute, no tensor
    state) switches its head after the 6th forward. Until then it is Planted (BF16 flips the
    boundary samples in `head`); from then on the root applies the head's 1 + 2^-10 weight as
    1 plus an FP32 correction, bitwise the same in FP32 and exact under AMP, so only the FP16
    overflow in blocks.0.up remains. The advisor's search runs late (after the reference, the
    plain AMP passes, the FP32 check and 14 sensitivity passes) and accepts {blocks.0.up}; the
    verifying run loads the model afresh, runs early, and rejects that set in BF16."""

    calls: int

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        for b in self.blocks:
            x = b(x)
        if self.calls <= 6:
            return self.head(x)
        nudge = torch.zeros(3, 4)
        nudge[1, 0] = 2.0**-10
        exact = F.linear(x, self.head.weight - nudge).float()
        return exact + (x[:, 0:1].float() * 2.0**-10) * torch.tensor([0.0, 1.0, 0.0])


class RootOp(nn.Module):
    """The FP16 overflow is born in the root module's own matmul, outside any submodule."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.eye(4) * 2.0**12)
        self.head = nn.Linear(4, 3, bias=False)
        with torch.no_grad():
            self.head.weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]]))

    def forward(self, x):
        return self.head(torch.relu(x @ self.w) * 2.0**-12)


class Broken(nn.Module):
    """Finite weights; the probe with 3e38 in it makes the FP32 reference infinite."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3, bias=False)
        self.act = nn.ReLU()
        self.head = nn.Linear(3, 3, bias=False)
        with torch.no_grad():
            self.fc.weight.copy_(torch.tensor([[2.0, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]]))
            self.head.weight.copy_(torch.eye(3))

    def forward(self, x):
        return self.head(self.act(self.fc(x)))


class Fragile(nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(11)
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fragile = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.randn(16, 8, generator=g) * 0.5)
            self.fc1.bias.copy_(1000 + torch.randn(16, generator=g))  # outputs near 1000
            r = torch.randn(16, 16, generator=g)
            self.fragile.weight.copy_(r - r.mean(1, keepdim=True))  # rows sum to 0: the 1000s cancel
            self.fragile.bias.zero_()
            self.head.weight.copy_(torch.randn(4, 16, generator=g) * 0.3)
            self.head.bias.copy_(torch.randn(4, generator=g) * 0.1)

    def forward(self, x):
        return self.head(self.fragile(self.act(self.fc1(x))))


def planted_probes(model):
    """12 ordinary (integers 0..8, top-2 margin >= 0.5), 6 boundary (x0 == x1 == k: scores k and
    k (1 + 2^-10)), 6 edge (one entry 16..31: 2^12 x >= 65536 overflows FP16 in blocks.0.up)."""
    g = torch.Generator().manual_seed(7)
    xs, tags = [], []

    def margin(x):
        with torch.no_grad():
            s = model(x)[0].sort(descending=True).values
        return (s[0] - s[1]).item()

    while len(xs) < 12:
        x = torch.randint(0, 9, (1, 4), generator=g).float()
        if margin(x) >= 0.5:
            xs.append(x)
            tags.append("ordinary")
    for k in range(1, 7):
        xs.append(torch.tensor([[k, k, 0.0, k - 1]]))
        tags.append("boundary")
    while len(xs) < 24:
        x = torch.randint(0, 9, (1, 4), generator=g).float()
        x[0, int(torch.randint(0, 4, (1,), generator=g))] = float(torch.randint(16, 32, (1,), generator=g))
        if margin(x) >= 0.5:
            xs.append(x)
            tags.append("edge")
    return torch.cat(xs), tags


@contextlib.contextmanager
def fp32_regions(model, paths):
    """autocast(enabled=False) around each module, its floating inputs cast to FP32."""
    hooks = []
    for path in paths:
        mod = model.get_submodule(path)

        def pre(m, args):
            m._advise_ctx = torch.autocast("cpu", enabled=False)
            m._advise_ctx.__enter__()
            return tuple(a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)

        def post(m, _args, out):
            m._advise_ctx.__exit__(None, None, None)
            return out

        hooks += [mod.register_forward_pre_hook(pre), mod.register_forward_hook(post)]
    try:
        yield
    finally:
        for h in hooks:
            h.remove()


def eager(model, x, precision, keep=()):
    with torch.no_grad(), fp32_regions(model, keep):
        if precision == "fp32":
            return model(x).float()
        with torch.autocast("cpu", dtype=DTYPES[precision]):
            return model(x).float()


def meets(ref, out, atol=ATOL, rtol=RTOL, max_flips=0):
    """The run's criteria, written independently: finite, decisions (argmax), |amp-ref| <= atol + rtol |ref|."""
    if not torch.isfinite(out).all():
        return False, f"{int((~torch.isfinite(out)).any(1).sum())} non-finite samples"
    flips = int((out.argmax(1) != ref.argmax(1)).sum())
    if flips > max_flips:
        return False, f"{flips} flips"
    if not ((out.double() - ref.double()).abs() <= atol + rtol * ref.double().abs()).all():
        return False, "outside tolerance"
    return True, "meets"


def sqnr_db(ref, amp):
    """torch.ao.ns.fx.utils.compute_sqnr in float64."""
    ref, amp = ref.double(), amp.double()
    noise = (amp - ref).norm()
    return math.inf if noise == 0 else (20 * torch.log10(ref.norm() / noise)).item()


def leaves(model):
    return [n for n, m in model.named_modules() if n and not list(m.children())]


def candidate_names(adv):
    return [c["module"] if isinstance(c, dict) else c for c in adv["candidates"]]


def simulate_search(ordered, passes):
    """minimal_passing_set (engine/src/advise/search.cpp) step by step, the empty set known to fail
    (the plain AMP passes rejected it): `passes(set)` is called once per distinct set, and the
    sets it was called with are returned with the set found."""
    memo = {(): False}
    asked = []

    def ev(s):
        key = tuple(sorted(s))
        if key not in memo:
            asked.append(key)
            memo[key] = passes(list(s))
        return memo[key]

    if not ev(ordered):
        return None, asked
    found, rest = [], list(ordered)
    while True:
        lo, hi = 0, len(rest)
        while hi - lo > 1:
            mid = lo + (hi - lo) // 2
            if ev(found + rest[:mid]):
                hi = mid
            else:
                lo = mid
        found.append(rest[hi - 1])
        rest = rest[:hi - 1]
        if ev(found):
            break
    dropped = True
    while dropped:
        dropped = False
        for i in range(len(found)):
            without = found[:i] + found[i + 1:]
            if ev(without):
                found, dropped = without, True
                break
    return found, asked


def write_planted(cls, directory):
    """The planted model as TorchScript and its probe file (with labels, ids, tags) in `directory`,
    set on `cls`: planted, x, tags, ref (eager FP32 scores), model_path, probe_path."""
    torch.manual_seed(0)
    cls.planted = Planted().eval()
    cls.x, cls.tags = planted_probes(cls.planted)
    cls.ref = eager(cls.planted, cls.x, "fp32")
    cls.model_path = os.path.join(directory, "planted.pt")
    torch.jit.script(cls.planted).save(cls.model_path)
    cls.probe_path = os.path.join(directory, "planted-probes.pt")
    torch.save({"inputs": cls.x, "labels": cls.ref.argmax(1), "ids": [f"s{i}" for i in range(len(cls.x))],
                "tags": cls.tags}, cls.probe_path)


class Advise(unittest.TestCase):
    counter = itertools.count()

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        t = cls.tmp.name
        cls.db = os.path.join(t, "runs.sqlite")
        write_planted(cls, t)
        cls.pt2_path = cls.path("planted.pt2")
        torch.export.save(torch.export.export(cls.planted, (cls.x,)), cls.pt2_path)
        cls.advice_path = cls.path("advice.json")
        cls.snippet_path = cls.path("advice_snippet.py")
        cls.rc, cls.out, cls.err = run_cli("advise", "--model", cls.model_path, "--probes", cls.probe_path,
                                           "--precision", "fp16,bf16", *CRITERIA, "--batch-size", len(cls.x),
                                           "--db", cls.db, "--json", cls.advice_path, "--python", cls.snippet_path,
                                           "-q")
        cls.advice = None
        if os.path.exists(cls.advice_path):
            with open(cls.advice_path) as f:
                cls.advice = json.load(f)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.tmp.name, name)

    def planted_advice(self):
        self.assertIsNotNone(self.advice, f"advise wrote no JSON: rc {self.rc}\nstdout:\n{self.out}\nstderr:\n{self.err}")
        self.assertEqual(self.rc, 0, f"stdout:\n{self.out}\nstderr:\n{self.err}")
        return self.advice

    def advise(self, *args, model=None, probes=None):
        """advise ... --json FILE -q; returns (rc, JSON or None, stderr)."""
        out = self.path(f"advise-{next(self.counter)}.json")
        pre = ["advise"]
        if model is not None:
            pre += ["--model", model, "--probes", probes]
        rc, so, se = run_cli(*pre, *args, "--db", self.db, "--json", out, "-q")
        if not os.path.exists(out):
            return rc, None, se
        with open(out) as f:
            return rc, json.load(f), se

    def run_planted(self, *extra, model=None):
        out = self.path(f"run-{next(self.counter)}.json")
        rc, so, se = run_cli("run", "--model", model or self.model_path, "--probes", self.probe_path,
                             "--precision", "fp16,bf16", *CRITERIA, "--batch-size", len(self.x), *extra,
                             "--db", self.db, "--json", out, "-q")
        self.assertTrue(os.path.exists(out), f"run {' '.join(map(str, extra))}: rc {rc}\n{se}")
        with open(out) as f:
            return rc, json.load(f)

    def show(self, run_id):
        rc, so, se = run_cli("show", run_id, "--json", "--db", self.db)
        self.assertEqual(rc, 0, f"show {run_id}: {se}")
        return json.loads(so)

    # --- the planted model, in Python alone: the oracle must separate the alternatives ----------

    def test_planted_oracle_separates_the_alternatives(self):
        x, ref, m = self.x, self.ref, self.planted
        self.assertTrue(torch.isfinite(ref).all())
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            up16 = m.blocks[0].up(x)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            up_bf16 = m.blocks[0].up(x)
        edge = torch.tensor([t == "edge" for t in self.tags])
        self.assertGreater(m.blocks[0].up(x).abs().max().item(), 65504)  # FP32: 2^12 * 28 = 114688
        self.assertTrue((~torch.isfinite(up16)).any(1).equal(edge), "FP16 overflows blocks.0.up on the edge samples only")
        self.assertTrue(torch.equal(up_bf16.float(), m.blocks[0].up(x)), "BF16 computes blocks.0.up exactly")
        boundary = torch.tensor([t == "boundary" for t in self.tags])
        flips_bf16 = eager(m, x, "bf16").argmax(1) != ref.argmax(1)
        self.assertTrue(flips_bf16.equal(boundary), "BF16 flips exactly the boundary samples")
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # nothing but the head is inexact
            h = m.blocks[1](m.blocks[0](x))
        self.assertTrue(torch.equal(h.float(), m.blocks[1](m.blocks[0](x))))
        want = {(): (False, False), ("blocks.0.up",): (True, False), ("head",): (False, True),
                ("blocks.0.up", "head"): (True, True)}
        for keep, (ok16, okbf16) in want.items():
            self.assertEqual(meets(ref, eager(m, x, "fp16", keep))[0], ok16, f"fp16 keeping {keep}")
            self.assertEqual(meets(ref, eager(m, x, "bf16", keep))[0], okbf16, f"bf16 keeping {keep}")
        # no single other module fixes either failure
        for other in leaves(m):
            if other in PLANTED_SET:
                continue
            self.assertFalse(meets(ref, eager(m, x, "fp16", ("head", other)))[0], other)
            self.assertFalse(meets(ref, eager(m, x, "bf16", ("blocks.0.up", other)))[0], other)

    # --- advise on the planted model ------------------------------------------------------------

    def test_planted_set_is_found(self):
        adv = self.planted_advice()
        self.assertEqual(adv["outcome"], "found", adv["message"])
        self.assertEqual(adv["keep_fp32"], ["blocks.0.up", "head"])  # named_modules() order
        why = {r["module"]: r["why"] for r in adv["reasons"]}
        self.assertIn(why.get("blocks.0.up"), ("overflow", "origin"), adv["reasons"])
        self.assertEqual(why.get("head"), "flips", adv["reasons"])
        self.assertIsNone(adv["advised_from"])
        # The search replayed in Python over the advisor's candidate order, each set judged by the
        # eager oracle (FP16 first, BF16 only when FP16 meets the criteria, as the advisor stops):
        # the same set, exactly as many sets checked and passes run.
        order = candidate_names(adv)
        self.assertEqual(sorted(order), sorted(leaves(self.planted)))  # no module owns ops outside them
        search_passes = []

        def passes(keep):
            ok16 = meets(self.ref, eager(self.planted, self.x, "fp16", keep))[0]
            search_passes.append(1 if not ok16 else 2)
            return ok16 and meets(self.ref, eager(self.planted, self.x, "bf16", keep))[0]

        found, asked = simulate_search(order, passes)
        self.assertEqual(set(found), PLANTED_SET)
        self.assertNotIn((), asked)  # the plain AMP passes already rejected the empty set
        self.assertEqual(adv["evaluations"], len(asked), asked)
        n, k = len(order), len(PLANTED_SET)
        self.assertLessEqual(adv["evaluations"], 2 * k * math.ceil(math.log2(n)) + 1)
        # reference + plain AMP (2) + FP32 check + sensitivity (2 per leaf) + the search's + shares
        self.assertEqual(adv["passes_used"], 1 + 2 + 1 + 2 * n + sum(search_passes) + 1)
        for k in ("ops", "flops"):
            self.assertGreater(adv["fp32_share"][k], 0)
            self.assertLess(adv["fp32_share"][k], 1)
        self.assertTrue(adv["message"])

    def test_planted_candidates_and_sensitivity(self):
        adv = self.planted_advice()
        self.assertEqual(set(candidate_names(adv)), set(leaves(self.planted)))
        sens = {(s["module"], s["precision"]): s for s in adv["sensitivity"]}
        up16, upbf16 = sens[("blocks.0.up", "fp16")], sens[("blocks.0.up", "bf16")]
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16):
            want_overflow = int((~torch.isfinite(self.planted.blocks[0].up(self.x))).sum())
        self.assertEqual(want_overflow, 6)
        self.assertEqual(up16["overflow"], want_overflow)
        self.assertTrue(up16["origin"])
        self.assertEqual(up16["elements"], self.x.numel())
        self.assertEqual(upbf16["overflow"], 0)
        self.assertFalse(upbf16["origin"])
        self.assertEqual(as_float(upbf16["sqnr_db"]), math.inf)  # exact in BF16

    def test_set_is_minimal_and_sufficient(self):
        adv = self.planted_advice()
        kept = adv["keep_fp32"]
        failing = {"blocks.0.up": "fp16", "head": "bf16"}  # leaving it out rejects this pass
        for m in kept:
            rest = [k for k in kept if k != m]
            flags = [a for k in rest for a in ("--keep-fp32", k)]
            rc, run = self.run_planted(*flags)
            self.assertEqual(run["verdict"], "rejected", f"without {m}")
            self.assertEqual(rc, 1, f"without {m}")
            self.assertEqual(comparison_of(run, failing[m])["verdict"], "rejected", f"without {m}")
        rc, run = self.run_planted("--keep-fp32-file", self.advice_path)
        self.assertEqual((rc, run["verdict"]), (0, "accepted"))
        for p in run["passes"][1:]:
            self.assertEqual(set(p["keep_fp32"]), PLANTED_SET, p["precision"])
        # the verifying run advise recorded
        shown = self.show(adv["verified_run"])
        self.assertEqual(shown["run_id"], adv["verified_run"])
        self.assertEqual(shown["verdict"], "accepted")
        self.assertEqual(shown["criteria"]["max_flips"], 0)
        self.assertEqual(shown["criteria"]["atol"], ATOL)
        self.assertEqual(shown["criteria"]["rtol"], RTOL)
        self.assertEqual(sorted(p["precision"] for p in shown["passes"]), ["bf16", "fp16", "fp32"])
        for p in shown["passes"]:
            if p["precision"] != "fp32":
                self.assertEqual(set(p["keep_fp32"]), PLANTED_SET, p["precision"])

    def test_oracle_agrees_with_the_verified_set(self):
        adv = self.planted_advice()
        for p in ("fp16", "bf16"):
            ok, why = meets(self.ref, eager(self.planted, self.x, p, adv["keep_fp32"]))
            self.assertTrue(ok, f"{p}: {why}")

    def test_advise_a_recorded_run(self):
        rc, run = self.run_planted()
        self.assertEqual((rc, run["verdict"]), (1, "rejected"))
        rc, adv, err = self.advise(run["run_id"])
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 0, err)
        self.assertEqual(adv["outcome"], "found")
        self.assertEqual(set(adv["keep_fp32"]), PLANTED_SET)
        self.assertEqual(adv["advised_from"], run["run_id"])
        shown = self.show(adv["verified_run"])
        self.assertEqual(shown["verdict"], "accepted")
        self.assertEqual(shown["advised_from"], run["run_id"])
        self.assertEqual(shown["criteria"]["max_flips"], 0)  # the recorded run's criteria
        self.assertEqual(shown["criteria"]["atol"], ATOL)

    def test_torch_export_program_gets_the_same_set(self):
        rc, adv, err = self.advise("--precision", "fp16,bf16", *CRITERIA, "--batch-size", len(self.x),
                                   model=self.pt2_path, probes=self.probe_path)
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 0, err)
        self.assertEqual(adv["outcome"], "found")
        self.assertEqual(set(adv["keep_fp32"]), PLANTED_SET)

    def test_python_snippet(self):
        adv = self.planted_advice()
        with open(self.snippet_path) as f:
            code = f.read()
        compile(code, self.snippet_path, "exec")
        self.assertIn("autocast", code)
        self.assertIn("enabled=False", code)
        for m in adv["keep_fp32"]:
            self.assertIn(m, code)

    # --- a set whose verifying run rejects it ---------------------------------------------------

    def test_unverified_set(self):
        model = Drifting().eval()
        x = self.x
        self.assertTrue(torch.equal(eager(model, x, "fp32"), self.ref))  # call 1: as Planted
        self.assertFalse(meets(self.ref, eager(model, x, "bf16", ["blocks.0.up"]))[0])  # call 2: head flips in BF16
        for _ in range(4):
            eager(model, x, "fp32")
        self.assertEqual(model.calls, 6)
        self.assertTrue(torch.equal(eager(model, x, "fp32"), self.ref), "FP32 drifts too")  # call 7 on: the same bits
        for p in ("fp16", "bf16"):  # and {blocks.0.up} meets the criteria
            self.assertTrue(meets(self.ref, eager(model, x, p, ["blocks.0.up"]))[0], p)
        path = self.path("drifting.pt")
        torch.jit.script(Drifting().eval()).save(path)
        out, snippet = self.path("drifting-advice.json"), self.path("drifting-snippet.py")
        rc, so, se = run_cli("advise", "--model", path, "--probes", self.probe_path, "--precision", "fp16,bf16", *CRITERIA,
                             "--batch-size", len(x), "--db", self.db, "--json", out, "--python", snippet, "--no-bench")
        with open(out) as f:
            adv = json.load(f)
        self.assertEqual(adv["keep_fp32"], ["blocks.0.up"],
                         f"the search's passes no longer drift (a plain int attribute restored between passes?): {adv['message']}")
        self.assertEqual((rc, adv["outcome"], adv["verified_verdict"]), (1, "unverified", "rejected"), so + se)
        self.assertIn("verifying run was rejected", adv["message"])
        self.assertIsNone(adv["timing"])
        self.assertTrue(so.startswith("advise: unverified: "), so)
        self.assertFalse(os.path.exists(snippet), "a Python snippet for an unverified set")
        self.assertIn(f"--python {snippet} was not written", se)
        self.assertIn(f"run --keep-fp32-file {out} takes it only with --allow-unverified", se)  # the CLI's flag
        self.assertEqual(self.show(adv["verified_run"])["verdict"], "rejected")
        # run --keep-fp32-file refuses it, naming the file, unless --allow-unverified
        args = ["run", "--model", path, "--probes", self.probe_path, "--precision", "fp16,bf16", *CRITERIA,
                "--batch-size", len(x), "--db", self.db, "-q", "--keep-fp32-file", out]
        rc, so, se = run_cli(*args)
        self.assertEqual(rc, 2, so + se)
        self.assertIn(out, se)
        self.assertIn("unverified", se)
        self.assertIn("--allow-unverified", se)
        rc, run = run_json(*args[:-3], "--keep-fp32-file", out, "--allow-unverified")
        self.assertEqual((rc, run["verdict"]), (1, "rejected"))  # the set runs, and is rejected again
        self.assertEqual(comparison_of(run, "bf16")["verdict"], "rejected")
        for p in run["passes"][1:]:
            self.assertEqual(p["keep_fp32"], ["blocks.0.up"])

    # --- what no FP32 set can fix --------------------------------------------------------------

    def test_already_accepted(self):
        # BF16 alone never overflows; its 6 flips are within --max-flips 6
        self.assertTrue(meets(self.ref, eager(self.planted, self.x, "bf16"), max_flips=6)[0])
        rc, adv, err = self.advise("--precision", "bf16", "--max-flips", 6, "--atol", ATOL, "--rtol", RTOL,
                                   "--batch-size", len(self.x), model=self.model_path, probes=self.probe_path)
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 0, err)
        self.assertEqual(adv["outcome"], "already_accepted", adv["message"])
        self.assertEqual(adv["keep_fp32"], [])

    def test_invalid_reference(self):
        model = Broken().eval()
        x = torch.tensor([[1.0, 2, 3, 0], [0, 1, 1, 1], [3e38, 1, 0, 0], [2, 0, 1, 2]] * 4)
        ref = eager(model, x, "fp32")
        self.assertFalse(torch.isfinite(ref).all())  # 2 * 3e38 is Inf in FP32
        path, probes = self.path("broken.pt"), self.path("broken-probes.pt")
        torch.jit.script(model).save(path)
        torch.save({"inputs": x}, probes)
        rc, adv, err = self.advise("--precision", "fp16,bf16", model=path, probes=probes)
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 1, err)
        self.assertEqual(adv["outcome"], "invalid_reference")
        self.assertIn("no FP32 set can be judged against a broken reference", adv["message"])
        self.assertEqual(adv["keep_fp32"], [])
        # an FP8 recipe's set is kept in BF16: the message says so (was: "no FP32 set")
        rc, adv, err = self.advise("--precision", "fp8", model=path, probes=probes)
        self.assertEqual((rc, adv["outcome"]), (1, "invalid_reference"), err)
        self.assertIn("no BF16 set can be judged against a broken reference", adv["message"])
        self.assertEqual(adv["keep_bf16"], [])

    def test_fp32_cannot_pass(self):
        labels = self.ref.argmax(1).clone()
        labels[:2] = (labels[:2] + 1) % 3  # FP32 gets these two wrong: accuracy 22/24
        self.assertLess((self.ref.argmax(1) == labels).float().mean().item(), 1.0)
        probes = self.path("wrong-labels.pt")
        torch.save({"inputs": self.x, "labels": labels}, probes)
        rc, adv, err = self.advise("--precision", "fp16,bf16", *CRITERIA, "--quality-metric", "accuracy",
                                   "--quality-threshold", 1.0, model=self.model_path, probes=probes)
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 1, err)
        self.assertEqual(adv["outcome"], "fp32_cannot_pass", adv["message"])
        self.assertIn("accuracy", adv["message"].lower())
        self.assertEqual(adv["keep_fp32"], [])

    def test_whole_model_only(self):
        model = RootOp().eval()
        x = self.x
        ref = eager(model, x, "fp32")
        self.assertTrue(torch.isfinite(ref).all())
        self.assertFalse(meets(ref, eager(model, x, "fp16"))[0])
        self.assertFalse(meets(ref, eager(model, x, "fp16", ["head"]))[0])  # the only submodule
        self.assertTrue(meets(ref, eager(model, x, "bf16"))[0])
        path, probes = self.path("rootop.pt"), self.path("rootop-probes.pt")
        torch.jit.script(model).save(path)
        torch.save({"inputs": x, "labels": ref.argmax(1)}, probes)
        rc, adv, err = self.advise("--precision", "fp16,bf16", *CRITERIA, model=path, probes=probes)
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 1, err)
        self.assertEqual(adv["outcome"], "whole_model_only", adv["message"])
        self.assertTrue(adv["message"])

    # --- sensitivity against Python -----------------------------------------------------------

    def test_sensitivity_matches_python(self):
        model = Fragile().eval()
        x = torch.randn(32, 8, generator=torch.Generator().manual_seed(12))
        captured = {}
        hooks = [model.get_submodule(n).register_forward_hook(
            lambda _m, args, out, n=n: captured.__setitem__(n, (args[0].clone(), out.clone()))) for n in leaves(model)]
        with torch.no_grad():
            model(x)
        for h in hooks:
            h.remove()
        want = {}
        for p, dt in DTYPES.items():
            for n, (inp, ref) in captured.items():
                with torch.no_grad(), torch.autocast("cpu", dtype=dt):
                    amp = model.get_submodule(n)(inp)
                a, r = amp.double(), ref.double()
                want[n, p] = {"sqnr_db": sqnr_db(ref, amp), "rel_error": ((a - r).norm() / r.norm()).item(),
                              "overflow": int((torch.isfinite(r) & ~torch.isfinite(a)).sum()),
                              "underflow": int(((r != 0) & (a == 0)).sum()), "elements": ref.numel()}
        fp16 = sorted((w["sqnr_db"], n) for (n, p), w in want.items() if p == "fp16")
        self.assertEqual(fp16[0][1], "fragile")
        self.assertLess(fp16[0][0] + 30, fp16[1][0], fp16)  # by a wide margin (17.6 dB vs 68.0 dB)
        path, probes = self.path("fragile.pt"), self.path("fragile-probes.pt")
        torch.jit.script(model).save(path)
        torch.save({"inputs": x}, probes)
        rc, adv, err = self.advise("--precision", "fp16,bf16", "--batch-size", len(x), model=path, probes=probes)
        self.assertIsNotNone(adv, err)
        self.assertEqual(rc, 0, err)
        sens = adv["sensitivity"]
        got_fp16 = [s for s in sens if s["precision"] == "fp16"]
        self.assertEqual(got_fp16[0]["module"], "fragile")
        order = [as_float(s["sqnr_db"]) for s in sens]
        self.assertEqual(order, sorted(order), "ranked worst (lowest SQNR) first")
        got = {(s["module"], s["precision"]): s for s in sens}
        self.assertEqual(set(got), set(want))
        for key, w in want.items():
            g = got[key]
            s_got, s_want = as_float(g["sqnr_db"]), w["sqnr_db"]
            if math.isinf(s_want):
                self.assertEqual(s_got, s_want, key)
            else:
                self.assertTrue(abs(s_got - s_want) <= 0.05 or abs(s_got - s_want) <= 1e-6 * abs(s_want),
                                f"{key}: sqnr {s_got} dB, Python {s_want} dB")
            self.assertAlmostEqual(as_float(g["rel_error"]), w["rel_error"], delta=1e-4 * w["rel_error"] + 1e-12,
                                   msg=str(key))
            for k in ("overflow", "underflow", "elements"):
                self.assertEqual(g[k], w[k], f"{key} {k}")
            self.assertFalse(g["origin"], key)

    # --- bad input ------------------------------------------------------------------------------

    def test_bad_granularity(self):
        rc, so, se = run_cli("advise", "--model", self.model_path, "--probes", self.probe_path, "--granularity",
                             "banana", "--db", self.db, "-q")
        self.assertEqual(rc, 2, so + se)
        self.assertIn("--granularity", so + se)


if __name__ == "__main__":
    unittest.main()

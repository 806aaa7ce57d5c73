# SPDX-License-Identifier: MIT
"""Plain PyTorch: a loop with autocast FP16 and a CPU GradScaler trains into a batch (step K)
whose scaled gradients overflow FP16 in `head`. Capture writes one bundle holding the state
from before step K (bitwise equal to the test's own snapshot), the batch, the RNG state and a
program; today's `ampscope-cli replay`, given the bundle's files and settings, names the module
and op Python's hooks name and computes the FP32 reference loss Python computes. Also: the
job goes on by default (at most one bundle), raise_on_incident raises after writing, a
non-finite loss under BF16 without a scaler is caught by the loss check, a model that export
refuses still gets a bundle that says why."""
import copy
import os

import pytest
import torch
import torch.nn.functional as F

from ampscope_capture import Capture, IncidentError
from helpers import as_float, cli, check_format, forward_origin, group_names, replay_bundle, replay_files, same_replay, same_tensors

K = 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 64)
        self.act = torch.nn.ReLU()
        self.head = torch.nn.Linear(64, 3)

    def forward(self, x):
        return self.head(self.act(self.fc1(x)))


def data(n_steps, plant_at=K, factor=400.0):
    g = torch.Generator().manual_seed(7)
    out = []
    for s in range(n_steps):
        x, y = torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g)
        out.append((x * factor if s == plant_at else x, y))
    return out


def fp16_job(out, steps=K + 3, **capture_kwargs):
    """The user's loop (docs/capture.md); returns (capture, {step: state before it})."""
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.Adam([{"params": net.fc1.parameters()}, {"params": net.head.parameters(), "lr": 2e-3}], lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12, growth_interval=3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    cap = Capture(net, opt, scaler, out=out, loss="ce", clip_grad_norm=1.0, lr_scheduler=sched, **capture_kwargs)
    before = {}
    for step, (x, y) in enumerate(data(steps)):
        before[step] = copy.deepcopy((net.state_dict(), opt.state_dict(), scaler.state_dict(), torch.get_rng_state(), net,
                                      sched.state_dict()))
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        cap.check(loss, grad_norm=norm)
        scaler.step(opt)
        scaler.update()
        sched.step()
    return cap, before


@pytest.fixture(scope="module")
def fp16(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("plain") / "incidents")
    return fp16_job(out)


def test_bundle_holds_the_state_before_the_failing_step(fp16):
    cap, before = fp16
    assert len(cap.bundles) == 1, "one incident, one bundle; the job went on"
    b = cap.bundles[0]
    assert os.path.basename(b) == f"incident-step{K}-rank0"
    inc, ckpt, batch = check_format(b, what="grad", step=K, framework="pytorch", dtype="float16", loss="ce", scaler=True, kind="adam")
    assert "GradScaler skips" in inc["detected"]["detail"]
    assert inc["clip_grad_norm"] == 1.0 and inc["accumulation_steps"] == 1
    sd, osd, ssd, rng, _, lrs = before[K]
    assert same_tensors(ckpt["model"], sd)
    assert same_tensors(ckpt["optimizer"]["state"], osd["state"])
    assert ckpt["scaler"] == ssd
    assert ckpt["lr_scheduler"] == lrs
    assert torch.equal(ckpt["rng_state"]["cpu"], rng)
    assert group_names(ckpt) == [["fc1.weight", "fc1.bias"], ["head.weight", "head.bias"]]
    assert [g["lr"] for g in ckpt["optimizer"]["param_groups"]] == [g["lr"] for g in osd["param_groups"]]
    x, y = data(K + 1)[K]
    assert len(batch["inputs"]) == 1 and torch.equal(batch["inputs"][0], x) and torch.equal(batch["labels"], y)
    # the program runs the batch like the module it was exported from
    ep = torch.export.load(os.path.join(b, "model.pt2"))
    net = copy.deepcopy(before[K][4])
    assert torch.equal(ep.module()(x), net(x))


def test_todays_replay_names_pythons_origin(fp16):
    """`ampscope-cli replay --model --checkpoint --batch --loss --precision` on the bundle's
    files: the backward origin Python's autograd hooks find, and Python's FP32 loss bitwise.
    (Two param groups, by their param_names.)"""
    from test_train import python_backward_origin

    cap, before = fp16
    x, y = data(K + 1)[K]
    net = copy.deepcopy(before[K][4])
    scale = before[K][2]["scale"]
    node, module, op = python_backward_origin(copy.deepcopy(net), x, y, scale=scale)
    assert module == "head", "the overflow is where the test planted it"
    rc, got = replay_files(cap.bundles[0])
    assert rc == 1, got
    f = got["first_nonfinite"]
    assert (f["stage"], f["module"], f["op"], f["autograd_node"], f["step"]) == ("backward", module, op, node, 0)
    step = got["steps"][0]
    assert as_float(step["loss_ref"]) == F.cross_entropy(net(x), y).item()
    assert as_float(step["scale"]) == scale and step["skipped"]


def test_replay_bundle_alone(fp16):
    """`ampscope-cli replay BUNDLE`: the same replay with nothing else to type (clipping 1.0,
    the scaler, both groups by name, from the bundle)."""
    cap, _ = fp16
    rc, alone = replay_bundle(cap.bundles[0])
    assert rc == 1, alone
    rc, by_hand = replay_files(cap.bundles[0], "--clip-grad-norm", 1.0)
    assert rc == 1, by_hand
    same_replay(alone, by_hand)


def test_export_never_replaces_the_bundle_a_replay_read(fp16, tmp_path):
    """`export -o BUNDLE/incident.json --force` replaced the incident record a recorded replay read
    (the checkpoint and batch were protected, the bundle's own record was not): exit 2, untouched."""
    import json
    import shutil
    import subprocess

    cap, _ = fp16
    b = str(tmp_path / "bundle")
    shutil.copytree(cap.bundles[0], b)
    db, out = str(tmp_path / "db.sqlite"), str(tmp_path / "replay.json")
    p = subprocess.run([cli(), "replay", b, "--device", "cpu", "--db", db, "--json", out, "-q"], capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode in (0, 1), p.stderr
    with open(out) as f:
        rid = json.load(f)["run_id"]
    record = os.path.join(b, "incident.json")
    with open(record, "rb") as f:
        before = f.read()
    p = subprocess.run([cli(), "export", rid, "--db", db, "-o", record, "--force"], capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert p.returncode == 2, p.stderr
    assert "the incident bundle of run " + rid[:8] in p.stderr, p.stderr
    with open(record, "rb") as f:
        assert f.read() == before


def test_bad_bundles_exit_2_named(fp16, tmp_path):
    """A bundle missing a file, of another version, or whose checkpoint names parameters the
    program does not have: exit 2, naming what is wrong."""
    import json
    import shutil

    cap, _ = fp16
    cases = {}
    for name, edit in (("missing", "checkpoint.pt"), ("version", "version"), ("names", "fc9.weight"),
                       ("kind", "the optimizer sgd (as the bundle's")):
        b = str(tmp_path / name)
        shutil.copytree(cap.bundles[0], b)
        cases[name] = (b, edit)
    os.remove(os.path.join(cases["missing"][0], "checkpoint.pt"))
    with open(os.path.join(cases["version"][0], "incident.json")) as f:
        inc = json.load(f)
    with open(os.path.join(cases["version"][0], "incident.json"), "w") as f:
        json.dump(dict(inc, version=2), f)
    # the job's Adam recorded as sgd: the message blames incident.json's optimizer.kind (was: "as asked")
    with open(os.path.join(cases["kind"][0], "incident.json")) as f:
        inc = json.load(f)
    with open(os.path.join(cases["kind"][0], "incident.json"), "w") as f:
        json.dump(dict(inc, optimizer=dict(inc["optimizer"], kind="sgd")), f)
    ck = torch.load(os.path.join(cases["names"][0], "checkpoint.pt"), weights_only=True)
    ck["model"]["fc9.weight"] = ck["model"].pop("fc1.weight")
    torch.save(ck, os.path.join(cases["names"][0], "checkpoint.pt"))
    for name, (b, named) in cases.items():
        rc, err = replay_bundle(b)
        assert rc == 2, (name, err)
        assert named in err, (name, err)
    # an FP32 region of the bundle that names no module: incident.json named, not --keep-fp32,
    # also beside a flag's region (the bundle's come first in the list)
    b = str(tmp_path / "region")
    shutil.copytree(cap.bundles[0], b)
    with open(os.path.join(b, "incident.json")) as f:
        inc = json.load(f)
    inc["precision"]["keep_fp32"] = ["no_such_module"]
    with open(os.path.join(b, "incident.json"), "w") as f:
        json.dump(inc, f)
    rc, err = replay_bundle(b, "--keep-fp32", "fc1")
    assert rc == 2, err
    assert err.startswith("ampscope-cli: error: " + os.path.join(b, "incident.json")), err
    assert "precision.keep_fp32[0]" in err and "no_such_module" in err, err


def test_at_most_one_bundle_and_raise_option(tmp_path):
    out = str(tmp_path / "inc")
    cap, _ = fp16_job(out)  # a second job into the same folder: max_bundles counts what is there
    assert len(cap.bundles) == 1
    again, _ = fp16_job(out)
    assert again.bundles == [] and len(os.listdir(out)) == 1
    with pytest.MonkeyPatch.context() as mp:  # another rank of a torchrun job, the same folder: its own bundle
        mp.setenv("RANK", "1")
        mp.setenv("WORLD_SIZE", "2")
        other, _ = fp16_job(out)
    assert [os.path.basename(b) for b in other.bundles] == [f"incident-step{K}-rank1"]
    assert sorted(os.listdir(out)) == [f"incident-step{K}-rank0", f"incident-step{K}-rank1"]
    with pytest.raises(IncidentError) as e:
        fp16_job(str(tmp_path / "raise"), raise_on_incident=True)
    assert os.path.isfile(os.path.join(e.value.path, "incident.json"))


class VarNorm(torch.nn.Module):
    """A hand-written normalisation, (x - E[x]) * rsqrt(E[x²] - E[x]² + eps): in BF16 the
    difference of two large, nearly equal numbers goes negative, and rsqrt gives NaN."""

    def forward(self, h):
        m = h.mean(-1, keepdim=True)
        var = (h * h).mean(-1, keepdim=True) - m * m
        return (h - m) * torch.rsqrt(var + 1e-6)


class VarNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 32)
        with torch.no_grad():
            self.proj.weight[:, 0] = 1.0  # input 0 is a common offset of every feature
        self.norm = VarNorm()
        self.head = torch.nn.Linear(32, 3)

    def forward(self, x):
        return self.head(self.norm(self.proj(x)))


def test_bf16_loss_without_scaler(tmp_path):
    torch.manual_seed(3)
    net = VarNet()
    opt = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.9)
    cap = Capture(net, opt, out=str(tmp_path / "inc"), loss="ce", dtype=torch.bfloat16)
    g = torch.Generator().manual_seed(3)
    before = None
    for step in range(K + 2):
        x, y = torch.randn(16, 8, generator=g), torch.randint(0, 3, (16,), generator=g)
        if step == K:
            x[:, 0] = 300.0  # a large common offset: E[h²] and E[h]² nearly equal
            before = copy.deepcopy(net)
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        cap.check(loss)
        opt.step()
    assert len(cap.bundles) == 1
    inc, ckpt, batch = check_format(cap.bundles[0], what="loss", step=K, framework="pytorch", dtype="bfloat16", loss="ce", scaler=False,
                                    kind="sgd")
    module, first = forward_origin(copy.deepcopy(before), batch["inputs"], torch.bfloat16)
    assert module == "norm" and first == "rsqrt"
    rc, got = replay_files(cap.bundles[0])
    assert rc == 1, got
    f = got["first_nonfinite"]
    assert (f["stage"], f["module"], f["op"], f["side"]) == ("forward", module, "aten::" + first, "amp")
    assert as_float(got["steps"][0]["loss_ref"]) == F.cross_entropy(before(batch["inputs"][0]), batch["labels"]).item()


class Unexportable(Net):
    def forward(self, x):
        if float(x.abs().max()) > 1000.0:  # data-dependent Python control flow: export refuses it
            x = x * 0.5
        return super().forward(x)


def test_export_failure_still_writes_the_bundle(tmp_path):
    torch.manual_seed(7)
    net = Unexportable()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    cap = Capture(net, opt, out=str(tmp_path / "inc"), loss="ce")
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    cap.begin(x, labels=y)
    loss = F.cross_entropy(net(x), y) * float("nan")
    loss.backward()
    assert cap.check(loss) is not None
    inc = check_format.__globals__["read"](cap.bundles[0])
    assert inc["files"]["model"] is None and inc["export_error"]
    assert not os.path.exists(os.path.join(cap.bundles[0], "model.pt2"))


def test_skipped_step_seen_by_end(tmp_path):
    """A loop that calls begin() and end() only (no check): the step GradScaler skips is an
    incident of kind 'skip', written with GradScaler's state from before the step."""
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    cap = Capture(net, opt, scaler, out=str(tmp_path / "inc"), loss="ce")
    for step, (x, y) in enumerate(data(K + 2)):
        before = copy.deepcopy((net.state_dict(), scaler.state_dict()))
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if cap.end():
            assert step == K
            _, ckpt, _ = check_format(cap.bundles[0], what="skip", step=K, framework="pytorch", dtype="float16", loss="ce", scaler=True,
                                      kind="sgd")
            assert ckpt["scaler"] == before[1] and same_tensors(ckpt["model"], before[0])
    assert len(cap.bundles) == 1


def test_spike_and_torchrun_rank(tmp_path, monkeypatch):
    """spike=5: a finite loss above 5 x its running mean is an incident; torchrun's RANK,
    LOCAL_RANK and WORLD_SIZE name the bundle and fill its fields."""
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    cap = Capture(net, opt, out=str(tmp_path / "inc"), loss="ce", dtype=torch.bfloat16, spike=5.0)
    for step, (x, y) in enumerate(data(16, plant_at=14, factor=200.0)):
        cap.begin(x, labels=y)
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        cap.check(loss)
        opt.step()
    assert len(cap.bundles) == 1 and os.path.basename(cap.bundles[0]) == "incident-step14-rank3"
    inc = check_format.__globals__["read"](cap.bundles[0])
    assert (inc["detected"]["what"], inc["rank"], inc["local_rank"], inc["world_size"]) == ("spike", 3, 1, 4)


@pytest.mark.parametrize("with_norm", [False, True], ids=["foreach-screen", "job-norm"])
def test_nonfinite_gradient_without_scaler(tmp_path, with_norm):
    """No GradScaler, a finite loss and one NaN gradient (planted by a tensor hook at step K):
    found by the per-step foreach norm screen, or through the norm the job computed, and
    confirmed by the exact non-finite check as 'grad'. A step with finite gradients writes
    nothing."""
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    cap = Capture(net, opt, out=str(tmp_path / "inc"), loss="ce", dtype=torch.bfloat16)
    step_now = [0]
    net.fc1.bias.register_hook(lambda g: g * float("nan") if step_now[0] == K else g)
    for step, (x, y) in enumerate(data(K + 2, plant_at=-1)):
        step_now[0] = step
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(net.parameters(), 1e9) if with_norm else None
        path = cap.check(loss, grad_norm=norm)
        assert (path is not None) == (step == K)
        opt.step()
    inc, _, _ = check_format(cap.bundles[0], what="grad", step=K, framework="pytorch", dtype="bfloat16", loss="ce", scaler=False,
                             kind="adamw")
    assert "foreach non-finite check" in inc["detected"]["detail"]


def test_param_names_are_the_programs(tmp_path):
    """An optimizer built with names of a wrapper (DDP's 'module.' prefix): the bundle's groups
    name the parameters as the exported module and the checkpoint do."""
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.SGD([{"params": [("module." + n, p) for n, p in net.named_parameters()]}], lr=1e-2)
    cap = Capture(net, opt, out=str(tmp_path / "inc"), loss="ce")
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 0])
    cap.begin(x, labels=y)
    (F.cross_entropy(net(x), y) * float("inf")).backward()
    assert cap.check() is not None
    _, ckpt, _ = check_format(cap.bundles[0], what="grad", step=0, framework="pytorch", dtype="float16", loss="ce", scaler=False,
                              kind="sgd")
    assert group_names(ckpt) == [list(ckpt["model"])]


def test_replay_bundle_reference_step_is_the_jobs_optimizer(fp16):
    """The FP32 reference step of `replay BUNDLE` updates the parameters exactly as the job's own
    optimizer (Adam, two groups at the scheduler's learning rates, clipping 1.0) does from the
    bundle's state, in Python, bitwise."""
    import hashlib

    cap, _ = fp16
    b = cap.bundles[0]
    ckpt = torch.load(os.path.join(b, "checkpoint.pt"), weights_only=True)
    batch = torch.load(os.path.join(b, "batch.pt"), weights_only=True)
    net = Net()
    net.load_state_dict(ckpt["model"])
    opt = torch.optim.Adam([{"params": net.fc1.parameters()}, {"params": net.head.parameters()}], lr=1.0)
    opt.load_state_dict(ckpt["optimizer"])
    F.cross_entropy(net(batch["inputs"][0]), batch["labels"]).backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
    opt.step()
    want = {n: hashlib.sha256(p.detach().contiguous().numpy().tobytes()).hexdigest() for n, p in net.named_parameters()}
    rc, got = replay_bundle(b)
    assert rc == 1, got
    assert {p["name"]: p["sha256_ref"] for p in got["steps"][0]["params"]} == want


def test_the_jobs_own_loss_module_is_replayed(tmp_path):
    """Capture(loss=<the job's loss module>): CrossEntropyLoss with class weights and label
    smoothing, which no built-in loss kind computes, in the FP16 loop above (a GradScaler; the
    scaled gradients of step K overflow). The bundle's program holds model and loss under the
    model's own parameter names (labels as its last input); `replay BUNDLE` alone computes the
    FP32 reference loss the job's loss computes at that state (bitwise; plain ce differs) and
    reproduces the skipped step."""
    torch.manual_seed(7)
    net = Net()
    criterion = torch.nn.CrossEntropyLoss(weight=torch.tensor([0.2, 1.0, 3.0]), label_smoothing=0.3)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12, growth_interval=3)
    cap = Capture(net, opt, scaler, out=str(tmp_path / "inc"), loss=criterion)
    before = {}
    for step, (x, y) in enumerate(data(K + 2)):
        before[step] = copy.deepcopy(net)
        cap.begin(x, labels=y)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = criterion(net(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        cap.check(loss)
        scaler.step(opt)
        scaler.update()
    assert len(cap.bundles) == 1
    inc, ckpt, batch = check_format(cap.bundles[0], what="grad", step=K, framework="pytorch", dtype="float16", loss="model",
                                    scaler=True, kind="adam")
    src = inc["loss_source"]
    assert src["callable"] == "CrossEntropyLoss" and (src["options"]["label_smoothing"], src["options"]["weight"]) == (0.3, [3])
    assert sorted(ckpt["model"]) == sorted(before[K].state_dict()), "the model's own names, not a wrapper's"
    x, y = batch["inputs"]
    assert torch.equal(x, data(K + 1)[K][0]) and torch.equal(y, data(K + 1)[K][1]), "the labels are the program's last input"
    rc, got = replay_bundle(cap.bundles[0])
    assert rc == 1, got
    assert got["steps"][0]["skipped"] is True, got["steps"][0]
    with torch.no_grad():
        expected = criterion(before[K](x), y).item()
    assert as_float(got["steps"][0]["loss_ref"]) == expected
    assert expected != F.cross_entropy(before[K](x), y).item(), "the oracle separates the job's loss from plain ce"


def test_accumulation_is_said_by_the_replay(tmp_path):
    """A job that accumulates two micro-batches per optimizer step: the bundle records
    accumulation_steps 2 and holds the step's last micro-batch; `replay BUNDLE` says that its
    gradients and update are not the job's (it steps on that micro-batch alone)."""
    torch.manual_seed(7)
    net = Net()
    opt = torch.optim.SGD(net.parameters(), lr=1e-2)
    cap = Capture(net, opt, out=str(tmp_path / "inc"), loss="ce", dtype=torch.bfloat16, accumulation_steps=2)
    batches = data(6, plant_at=99)
    batches[5] = (batches[5][0].clone(), batches[5][1])
    batches[5][0][0, 0] = float("nan")  # the second micro-batch of optimizer step 2
    for step in range(3):
        opt.zero_grad()
        for micro in range(2):
            x, y = batches[2 * step + micro]
            cap.begin(x, labels=y, step=step)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x), y) / 2
            loss.backward()
        cap.check(loss)
        opt.step()
    assert len(cap.bundles) == 1
    inc, _, batch = check_format(cap.bundles[0], what="loss", step=2, framework="pytorch", dtype="bfloat16", loss="ce", scaler=False,
                                 kind="sgd")
    assert inc["accumulation_steps"] == 2
    assert torch.allclose(batch["inputs"][0], batches[5][0], equal_nan=True), "the last micro-batch"
    rc, got = replay_bundle(cap.bundles[0])
    assert rc == 1, got
    assert got["inputs"]["incident"]["accumulation_steps"] == 2
    assert any("2 micro-batches per optimizer step" in w for w in got["warnings"]), got["warnings"]

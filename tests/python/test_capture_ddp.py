# SPDX-License-Identifier: MIT
"""Which rank, under torchrun: two CPU ranks (gloo) train a DistributedDataParallel model;
rank 1's batch of step K holds a NaN, which the all-reduce spreads to rank 0's gradients.
Capture.watch_ddp checks each rank's own gradients before the all-reduce: the one bundle is
rank 1's, and it names rank 1 (not 0) as where the incident started. Gloo sometimes aborts at
interpreter exit after the work is done: each rank writes done<rank>.json when its work is
over, and a non-zero exit is accepted only when both did."""
import json
import os
import subprocess
import sys

import pytest
import torch

from helpers import read, replay_bundle

HERE = os.path.dirname(os.path.abspath(__file__))
K = 3
gloo = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(), reason="no gloo backend")


def torchrun(job, tmp_path, *args):
    """Runs JOB on two CPU ranks; returns {rank: bundles}. Each rank writes done<rank>.json
    when its work is over; a non-zero exit is accepted only as gloo's abort after both did."""
    out, done = tmp_path / "incidents", tmp_path / "done"
    done.mkdir()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        os.path.join(HERE, job), str(out), str(done), *args], capture_output=True, text=True, timeout=300, env=env,
                       stdin=subprocess.DEVNULL)
    finished = sorted(f for f in os.listdir(done) if f.startswith("done"))
    assert finished == ["done0.json", "done1.json"], f"rc {p.returncode}\n{p.stdout}\n{p.stderr[-4000:]}"
    if p.returncode != 0:  # only an abort after both ranks finished their work
        assert "gloo" in p.stderr.lower() or "signal" in p.stderr.lower(), p.stderr[-4000:]
    results = {}
    for f in finished:
        with open(done / f) as fh:
            r = json.load(fh)
        results[r["rank"]] = r["bundles"] if "seen" not in r else (r["bundles"], r["seen"])
    return results


@gloo
def test_the_bundle_names_the_rank_it_started_on(tmp_path):
    results = torchrun("ddp_job.py", tmp_path)
    assert results[0] == [], "rank 0 only received the NaN through the all-reduce: it writes nothing"
    assert [os.path.basename(b) for b in results[1]] == [f"incident-step{K}-rank1"]
    inc = read(results[1][0])
    assert (inc["rank"], inc["world_size"], inc["detected"]["what"]) == (1, 2, "loss")
    assert inc["origin_ranks"] == [1]
    assert inc["local"] == {"loss": True, "grads": True}
    assert [(r["rank"], r["step"], r["loss"], r["grads"]) for r in inc["ranks"]] == [(0, K, False, False), (1, K, True, True)]
    ckpt = torch.load(os.path.join(results[1][0], "checkpoint.pt"), weights_only=True)
    assert sorted(ckpt["model"]) == ["fc1.bias", "fc1.weight", "head.bias", "head.weight"], "the module's names, not DDP's"


@gloo
@pytest.mark.parametrize("mode", ["plain", "sharded"])
def test_fsdp2_the_bundle_names_the_rank_and_holds_the_full_state(tmp_path, mode):
    """FSDP2 (fully_shard, two groups of AdamW): the reduce-scatter is watched through
    set_custom_reduce_scatter; only rank 1 (whose batch holds the NaN) writes, naming rank 1;
    the bundle holds the full weights and moments (as the job's own full-state gathering gives
    them at that step) by parameter name, in the optimizer's own form; with make_plain the
    program is exported from an unsharded copy and `replay BUNDLE` alone reproduces the
    incident; without it the bundle says why there is no program."""
    results = torchrun("fsdp_job.py", tmp_path, mode)
    assert results[0] == [], "rank 0 only received the NaN through the reduce-scatter: it writes nothing"
    assert [os.path.basename(b) for b in results[1]] == [f"incident-step{K}-rank1"]
    path = results[1][0]
    inc = read(path)
    assert (inc["rank"], inc["world_size"], inc["detected"]["what"], inc["origin_ranks"]) == (1, 2, "loss", [1])
    assert [(r["rank"], r["loss"], r["grads"]) for r in inc["ranks"]] == [(0, False, False), (1, True, True)]
    ckpt = torch.load(os.path.join(path, "checkpoint.pt"), weights_only=True)
    oracle = torch.load(tmp_path / "done" / "oracle1.pt", weights_only=False)
    assert sorted(ckpt["model"]) == sorted(oracle["model"]) == ["fc1.bias", "fc1.weight", "head.bias", "head.weight"]
    for k, v in oracle["model"].items():
        assert ckpt["model"][k].shape == v.shape and torch.equal(ckpt["model"][k], v), k
    groups = ckpt["optimizer"]["param_groups"]
    assert [g["param_names"] for g in groups] == [["fc1.weight", "head.weight"], ["fc1.bias", "head.bias"]]
    assert [g["params"] for g in groups] == [[0, 1], [2, 3]] and [g["weight_decay"] for g in groups] == [0.1, 0.0]
    names = [n for g in groups for n in g["param_names"]]
    for i, name in enumerate(names):
        for key in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(ckpt["optimizer"]["state"][i][key], oracle["optimizer"]["state"][name][key]), (name, key)
    if mode == "sharded":
        assert inc["files"]["model"] is None and "make_plain" in inc["export_error"]
        return
    assert inc["files"]["model"] == "model.pt2", inc["export_error"]
    rc, r = replay_bundle(path)
    assert rc in (0, 1), r
    assert r["first_nonfinite"]["stage"] == "input", r["first_nonfinite"]
    assert (r["inputs"]["incident"]["rank"], r["inputs"]["incident"]["origin_ranks"]) == (1, [1])


@gloo
@pytest.mark.parametrize("framework", ["lightning", "hf"])
def test_framework_callbacks_name_the_rank_under_ddp(tmp_path, framework):
    """Lightning's DDP strategy and the HF Trainer under torchrun (their own DDP wrapping, their
    own samplers): the callback watches each rank's gradients before the all-reduce, so the one
    bundle is from the rank whose batch held the NaN (the job's own log says which) and names it."""
    pytest.importorskip("pytorch_lightning" if framework == "lightning" else "transformers")
    results = torchrun("frameworks_ddp_job.py", tmp_path, framework)
    seen = results[0][1] + results[1][1]
    assert len(seen) == 1, f"the planted row reaches exactly one rank's batch once: {seen}"
    origin, step = seen[0]
    other = 1 - origin
    assert results[other][0] == [], "the other rank only received the NaN through the all-reduce: it writes nothing"
    assert [os.path.basename(b) for b in results[origin][0]] == [f"incident-step{step}-rank{origin}"]
    inc = read(results[origin][0][0])
    assert (inc["rank"], inc["world_size"], inc["detected"]["what"], inc["origin_ranks"]) == (origin, 2, "loss", [origin])
    assert inc["local"] == {"loss": True, "grads": True}
    assert sorted((r["rank"], r["loss"]) for r in inc["ranks"]) == sorted([(origin, True), (other, False)])
    assert inc["files"]["model"] == "model.pt2", inc["export_error"]
    rc, r = replay_bundle(results[origin][0][0])
    assert rc in (0, 1), r
    assert r["first_nonfinite"]["stage"] == "input", r["first_nonfinite"]
    assert r["inputs"]["incident"]["origin_ranks"] == [origin]

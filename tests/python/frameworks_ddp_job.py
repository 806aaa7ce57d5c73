# SPDX-License-Identifier: MIT
"""A Lightning (strategy "ddp") or Hugging Face Trainer job for test_capture_ddp.py, run by
torchrun on two CPU ranks (gloo) with bf16 autocast: one row of the dataset holds a NaN, and
the framework's own sampler decides which rank's batch of which step gets it. The job logs,
by a forward pre-hook of its own, the (rank, step) whose batch held a non-finite value: the
oracle of which rank the incident started on. Every rank writes done<rank>.json with its
bundles and that log once its work is done (gloo may abort at interpreter exit after that)."""
import json
import os
import sys
import warnings

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

N, B, NAN_ROW, STEPS = 48, 4, 13, 5


def rows():
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(N, 8, generator=g), torch.randint(0, 3, (N,), generator=g)
    x[NAN_ROW, 5] = float("nan")
    return x, y


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.head = torch.nn.Linear(16, 3)

    def forward(self, x, labels=None):
        logits = self.head(torch.relu(self.fc1(x)))
        if labels is None:
            return logits
        return {"loss": F.cross_entropy(logits.float(), labels), "logits": logits}


def log_inputs(module, seen, step_of):
    def pre(mod, args, kwargs):
        if torch.compiler.is_exporting():  # the capture exporting the model: not a training forward
            return
        x = args[0] if args else kwargs["x"]
        if mod.training and not torch.isfinite(x).all():
            seen.append([int(os.environ["RANK"]), int(step_of())])
    return module.register_forward_pre_hook(pre, with_kwargs=True)


def lightning(out, root):
    import pytorch_lightning as pl

    from ampscope_capture.lightning import CaptureCallback

    class Module(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = Net()

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-3)

    torch.manual_seed(0)
    x, y = rows()
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=B, shuffle=False)
    cap, seen = CaptureCallback(out=out, loss="ce"), []
    model = Module()
    trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", precision="bf16-mixed", max_steps=STEPS, callbacks=[cap],
                         logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         default_root_dir=root)
    log_inputs(model.net, seen, lambda: trainer.global_step)
    trainer.fit(model, train_dataloaders=data)
    return cap.bundles, seen


def hf(out, root):
    import transformers

    from ampscope_capture.hf import CaptureCallback

    class Rows(torch.utils.data.Dataset):
        def __init__(self):
            self.x, self.y = rows()

        def __len__(self):
            return N

        def __getitem__(self, i):
            return {"x": self.x[i], "labels": self.y[i]}

    torch.manual_seed(0)
    model, cap, seen = Net(), CaptureCallback(out=out), []
    args = transformers.TrainingArguments(output_dir=root, bf16=True, use_cpu=True, max_steps=STEPS, per_device_train_batch_size=B,
                                          learning_rate=1e-3, report_to=[], save_strategy="no", logging_steps=100,
                                          train_sampling_strategy="sequential", disable_tqdm=True, dataloader_num_workers=0,
                                          ddp_backend="gloo")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Rows(), callbacks=[cap])
    log_inputs(model, seen, lambda: trainer.state.global_step)
    trainer.train()
    return cap.bundles, seen


def main(out, done, framework):
    warnings.simplefilter("ignore")
    bundles, seen = (lightning if framework == "lightning" else hf)(out, os.path.join(done, "root" + os.environ["RANK"]))
    import torch.distributed as dist

    rank = dist.get_rank()
    with open(os.path.join(done, f"done{rank}.json"), "w") as f:
        json.dump({"rank": rank, "bundles": bundles, "seen": seen}, f)
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])

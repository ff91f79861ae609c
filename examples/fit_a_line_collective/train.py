"""fit_a_line, collective mode: dynamic graph, paddle.DataParallel over gloo (CPU), no pservers.

Run it as a PaddleCloud job with pservers = 0: the launcher sets PADDLE_DISTRI_BACKEND=gloo,
PADDLE_TRAINER_ENDPOINTS and the rest. Every trainer trains on its own data shard; gradients are
averaged across trainers at every step, so all replicas keep identical weights.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import paddle
import paddle.distributed as dist

BATCH = 32
PASSES = int(os.environ.get("PADDLE_INIT_NUM_PASSES", "8"))  # from the job's -passes
LEARNING_RATE = 0.05

T0 = time.time()
paddle.set_device("cpu")
dist.init_parallel_env()
rank, world = dist.get_rank(), dist.get_world_size()

import prepare_data  # noqa: E402
from paddlecloud import metrics  # noqa: E402
from paddlecloud.runtime.dataset import cluster_files_reader  # noqa: E402 (after init: rank known)

records = list(cluster_files_reader(prepare_data.prepare(), world, rank)())
xs = np.array([r[0] for r in records], dtype="float32")
ys = np.array([[r[1]] for r in records], dtype="float32")
# Every rank must run the same number of steps (each step is an all-reduce): use the smallest.
n_batches = paddle.to_tensor([len(records) // BATCH], dtype="int64")
dist.all_reduce(n_batches, op=dist.ReduceOp.MIN)
steps_per_pass = int(n_batches.item())
print(f"trainer {rank}/{world}: {len(records)} records in my shard, {steps_per_pass} steps per pass", flush=True)

paddle.seed(0)  # DataParallel also broadcasts rank 0's initial weights
model = paddle.DataParallel(paddle.nn.Linear(13, 1))
opt = paddle.optimizer.SGD(learning_rate=LEARNING_RATE, parameters=model.parameters())
step = 0
for pass_id in range(PASSES):
    for b in range(steps_per_pass):
        xb = paddle.to_tensor(xs[b * BATCH : (b + 1) * BATCH])
        yb = paddle.to_tensor(ys[b * BATCH : (b + 1) * BATCH])
        loss = paddle.nn.functional.mse_loss(model(xb), yb)
        loss.backward()  # gradients are all-reduced across trainers here
        opt.step()
        opt.clear_grad()
        metrics.log(step=step, loss=float(loss))  # the job page's loss curve
        if step % 50 == 0:
            print(f"pass {pass_id} step {step} loss {float(loss):.4f}", flush=True)
        step += 1
print(f"pass {PASSES - 1} step {step} loss {float(loss):.4f} (final)", flush=True)
if rank == 0:
    # The job's output folder: /pfs/<dc>/home/<user>/jobs/<job>/output/<run>/ on both engines.
    model_path = str(Path(os.environ.get("PADDLECLOUD_OUTPUT_DIR", ".")) / "model.pdparams")  # paddle.save takes a str
    paddle.save(model.state_dict(), model_path)
    print(f"model saved to {model_path}", flush=True)
print(f"trainer {rank} done: {step} steps, {time.time() - T0:.1f}s", flush=True)

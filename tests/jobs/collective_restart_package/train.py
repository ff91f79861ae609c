"""A collective (gloo, CPU) training that saves a checkpoint after every pass and resumes from the newest: the job of
the real-Paddle restart and elastic tests (tests/jobs/test_paddle_jobs.py) and of bench/resilience.py.

With CRASH_AT_PASS=k, trainer 1 of the first attempt kills itself (SIGKILL) three steps into pass k, after pass
k - 1 was saved; the portal restarts the whole job (spec max_restarts) and it resumes from that checkpoint. Every
rank's data and the initial weights are seeded, so a resumed run ends with the same weights and loss as one never
disturbed: rank 0 prints both, exactly (repr), on its last line. It leaves after the pass it is in when it gets
SIGTERM (a preemption, or an elastic job stopped to grow). PASS_PAUSE (seconds) stands for a pass's longer work
and SAVE_EVERY (passes) for the checkpoint cadence. With OOM_AT_PASS=k, trainer 1 of every attempt outgrows any
memory limit three steps into pass k (a leak the restarts cannot mend: the job ends CrashLoop).
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import paddle
import paddle.distributed as dist
from paddlecloud import checkpoint, metrics

PASSES = int(os.environ.get("PADDLE_INIT_NUM_PASSES", "6"))
CRASH_AT_PASS = int(os.environ.get("CRASH_AT_PASS", "-1"))
OOM_AT_PASS = int(os.environ.get("OOM_AT_PASS", "-1"))
PASS_PAUSE = float(os.environ.get("PASS_PAUSE", "0"))
SAVE_EVERY = int(os.environ.get("SAVE_EVERY", "1"))
STEPS, BATCH = 20, 16

paddle.set_device("cpu")
dist.init_parallel_env()
rank, world = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(rank)
xs = rng.normal(size=(STEPS * BATCH, 13)).astype("float32")
ys = (xs @ np.linspace(-1, 1, 13).astype("float32") + 0.5).reshape(-1, 1).astype("float32")

paddle.seed(0)
model = paddle.DataParallel(paddle.nn.Linear(13, 1))
opt = paddle.optimizer.SGD(learning_rate=0.02, parameters=model.parameters())
saved = checkpoint.load_paddle(model, opt)  # the newest pass saved, None on a first run
first = 0 if saved is None else saved + 1
attempt = os.environ.get("PADDLECLOUD_ATTEMPT")
print(f"trainer {rank} of {world} attempt {attempt} starts at pass {first} "
      f"(restarted because: {os.environ.get('PADDLECLOUD_RESTART_REASON')})", flush=True)  # fmt: skip
loss = None
for pass_id in range(first, PASSES):
    for b in range(STEPS):
        if pass_id == CRASH_AT_PASS and b == 3 and rank == 1 and attempt == "1":
            os.kill(os.getpid(), signal.SIGKILL)  # a rank lost mid-pass: a crash, an OOM kill, a lost node
        if pass_id == OOM_AT_PASS and b == 3 and rank == 1:
            leak = [np.ones(2**27) for _ in range(1024)]  # 1 GiB a block, written: the memory limit's OOM kill
        batch = slice(b * BATCH, (b + 1) * BATCH)
        loss = paddle.nn.functional.mse_loss(model(paddle.to_tensor(xs[batch])), paddle.to_tensor(ys[batch]))
        loss.backward()
        opt.step()
        opt.clear_grad()
        metrics.log(step=pass_id * STEPS + b, total_steps=PASSES * STEPS, loss=float(loss))
    time.sleep(PASS_PAUSE)
    if rank == 0 and (pass_id + 1) % SAVE_EVERY == 0:
        checkpoint.save_paddle(pass_id, model, opt, keep=2)
    print(f"trainer {rank} pass {pass_id} done", flush=True)
    if checkpoint.stop_requested():  # preempted, or stopped to grow (elastic): saved; leave before the SIGKILL
        break
if rank == 0 and loss is not None:
    weights = sum(float(p.sum()) for p in model.parameters())
    print(f"final loss {float(loss)!r} weights {weights!r}", flush=True)

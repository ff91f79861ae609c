"""A parameter-server job whose trainers fail or leave as told (test_ps_retry): real Paddle, fleet, GEO-SGD.

Each trainer marks what it did in the job's output folder, so a retried attempt behaves differently:
- RETRY_FAIL_TRAINER=i: trainer i exits 3 at step RETRY_FAIL_STEP on its first attempt only (after the
  gloo rendezvous: its peers' mesh breaks). With RETRY_FAIL_AFTER_LEAVE it first waits until the
  leaving trainer has left.
- RETRY_LEAVE_TRAINER=i: trainer i exits 0 right after the rendezvous, without the final barrier, so
  a later rendezvous can never complete.
Otherwise every trainer trains RETRY_STEPS steps, meets the others at the final barrier and exits 0.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import paddle
import paddle.distributed.fleet as fleet

OUT = Path(os.environ["PADDLECLOUD_OUTPUT_DIR"])
STEPS = int(os.environ.get("RETRY_STEPS", "400"))
FAIL_TRAINER = int(os.environ.get("RETRY_FAIL_TRAINER", "-1"))
FAIL_STEP = int(os.environ.get("RETRY_FAIL_STEP", "20"))
LEAVE_TRAINER = int(os.environ.get("RETRY_LEAVE_TRAINER", "-1"))


def leave(code: int, why: str) -> None:
    print(why, flush=True)
    os._exit(code)  # at once: no Paddle exit handlers that would wait for the peers


paddle.enable_static()
fleet.init()  # the trainers' gloo rendezvous
x = paddle.static.data(name="x", shape=[None, 13], dtype="float32")
y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
loss = paddle.mean(paddle.nn.functional.square_error_cost(paddle.static.nn.fc(x, size=1), y))
strategy = fleet.DistributedStrategy()
strategy.a_sync = True
strategy.a_sync_configs = {"k_steps": 10}
fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=0.05), strategy).minimize(loss)

if fleet.is_server():
    fleet.init_server()
    fleet.run_server()
me = fleet.worker_index()
left = OUT / f"trainer-{LEAVE_TRAINER}-left"
if me == LEAVE_TRAINER:
    left.write_text("")
    leave(0, f"trainer {me} leaves without the final barrier")
exe = paddle.static.Executor(paddle.CPUPlace())
exe.run(paddle.static.default_startup_program())
fleet.init_worker()
failed_once = OUT / f"trainer-{me}-failed-once"
rng = np.random.default_rng(me)
for step in range(STEPS):
    xb = rng.random((32, 13), dtype="float32")
    (value,) = exe.run(
        paddle.static.default_main_program(), feed={"x": xb, "y": xb.sum(1, keepdims=True)}, fetch_list=[loss]
    )
    if step % 100 == 0:
        print(f"trainer {me} step {step} loss {float(np.mean(value)):.4f}", flush=True)
    if me == FAIL_TRAINER and step == FAIL_STEP and not failed_once.exists():
        deadline = time.monotonic() + 60
        while "RETRY_FAIL_AFTER_LEAVE" in os.environ and not left.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        failed_once.write_text("")
        leave(3, f"trainer {me} fails once on purpose at step {step}")
fleet.stop_worker()
fleet.barrier_worker()  # every trainer of this rendezvous round: a dead peer fails it
print(f"trainer {me} done: {STEPS} steps", flush=True)

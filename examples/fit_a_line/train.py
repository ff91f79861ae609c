"""fit_a_line: linear regression on UCI-housing-like data, parameter-server mode (fleet, GEO-SGD).

Run it as a PaddleCloud job with pservers > 0: the launcher sets every variable fleet reads.
pservers serve until the job system stops them once every trainer has exited 0 (a 3.0.0 pserver
never returns from run_server()); trainers train on their own data shard and exit 0.

Preemption: trainer 0 saves a checkpoint after every pass (paddlecloud.checkpoint, in the job's output
folder); a run that follows a preemption starts after the last saved pass, trainer 0 with its weights.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import paddle
import paddle.distributed.fleet as fleet

BATCH = 32
PASSES = int(os.environ.get("PADDLE_INIT_NUM_PASSES", "8"))  # from the job's -passes
# Seconds trainers rest after each pass (job env, default 0): a pass takes ~0.1 s on a free core, so a
# preemption demo (and its test) sets this to have the run still going when the preemption comes.
PASS_PAUSE = float(os.environ.get("FIT_A_LINE_PASS_PAUSE", "0"))
LEARNING_RATE = 0.05

T0 = time.time()
paddle.enable_static()  # PS mode runs static graphs only (and FLAGS_enable_pir_api=0)
fleet.init()  # PaddleCloudRoleMaker reads the launcher's TRAINING_ROLE, PADDLE_* variables

x = paddle.static.data(name="x", shape=[None, 13], dtype="float32")
y = paddle.static.data(name="y", shape=[None, 1], dtype="float32")
pred = paddle.static.nn.fc(x, size=1)
loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))

strategy = fleet.DistributedStrategy()
# GEO-SGD: the only PS mode that trains under exe.run in 3.0.0 (plain async never pulls the
# weights back, sync mode crashes); every trainer syncs with the pservers every 10 local steps.
strategy.a_sync = True
strategy.a_sync_configs = {"k_steps": 10}
optimizer = fleet.distributed_optimizer(paddle.optimizer.SGD(learning_rate=LEARNING_RATE), strategy)
optimizer.minimize(loss)


def batches(reader_records: list[tuple[list[float], float]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    for i in range(0, len(reader_records) - BATCH + 1, BATCH):
        chunk = reader_records[i : i + BATCH]
        yield (
            np.array([r[0] for r in chunk], dtype="float32"),
            np.array([[r[1]] for r in chunk], dtype="float32"),
        )


if fleet.is_server():
    print(f"pserver {fleet.server_index()} serving", flush=True)
    fleet.init_server()
    fleet.run_server()  # never returns: the job system stops pservers when the trainers are done
else:
    import prepare_data
    from paddlecloud import checkpoint, metrics
    from paddlecloud.runtime.dataset import cluster_files_reader

    me, n = fleet.worker_index(), fleet.worker_num()
    records = list(cluster_files_reader(prepare_data.prepare(), n, me)())
    print(f"trainer {me}/{n}: {len(records)} records in my shard", flush=True)

    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(paddle.static.default_startup_program())
    fleet.init_worker()  # waits here until every pserver accepts connections (the launcher's pserver_gate)
    main_program = paddle.static.default_main_program()
    scope = paddle.static.global_scope()

    def weights() -> dict[str, np.ndarray]:
        return {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main_program.all_parameters()}

    last = checkpoint.latest()  # None on a first run; after a preemption, the last pass trainer 0 saved
    first_pass = last.step + 1 if last else 0
    if last is not None:
        print(f"trainer {me}: attempt {checkpoint.attempt()} resumes after pass {last.step}", flush=True)
        if me == 0:  # GEO-SGD pushes trainer 0's change from the fresh start: the pservers follow
            saved = np.load(last.path / "weights.npz")
            for p in main_program.all_parameters():
                scope.find_var(p.name).get_tensor().set(saved[p.name], paddle.CPUPlace())
    per_pass = len(records) // BATCH
    step = first_pass * per_pass
    value = np.zeros(1)
    for pass_id in range(first_pass, PASSES):
        for xb, yb in batches(records):
            (value,) = exe.run(main_program, feed={"x": xb, "y": yb}, fetch_list=[loss])
            metrics.log(step=step, loss=float(np.mean(value)))  # the job page's loss curve
            if step % 50 == 0:
                print(f"pass {pass_id} step {step} loss {float(np.mean(value)):.4f}", flush=True)
            step += 1
        if me == 0:
            checkpoint.save(pass_id, lambda folder: np.savez(folder / "weights.npz", **weights()))
        time.sleep(PASS_PAUSE)
    print(f"pass {PASSES - 1} step {step} loss {float(np.mean(value)):.4f} (final)", flush=True)
    fleet.stop_worker()  # flushes the GEO communicator; does not stop the pservers
    if me == 0:
        # The job's output folder: /pfs/<dc>/home/<user>/jobs/<job>/output/<run>/ on both engines.
        model = Path(os.environ.get("PADDLECLOUD_OUTPUT_DIR", ".")) / "model.npz"
        np.savez(model, **weights())
        print(f"model saved to {model}", flush=True)
    print(f"trainer {me} done: {step} steps, {time.time() - T0:.1f}s", flush=True)

"""A stand-in for a Paddle job, for engine tests that need no Paddle: same env contract, same roles."""

import os
import signal
import socket
import sys
import time

if os.environ.get("FAKE_IGNORE_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # as a busy Paddle process may: only SIGKILL ends it

role = os.environ.get("TRAINING_ROLE", "TRAINER")
if role == "PSERVER":
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", int(os.environ["PADDLE_PORT"])))
    server.listen()
    print(f"pserver {os.environ['PADDLE_PORT']} serving", flush=True)
    if "FAKE_PSERVER_EXIT" in os.environ:  # a pserver that returns early (Paddle's never do by themselves)
        time.sleep(1)
        print("pserver returning early", flush=True)
        sys.exit(int(os.environ["FAKE_PSERVER_EXIT"]))
    while True:
        time.sleep(1)
me = int(os.environ["PADDLE_TRAINER_ID"])
steps = int(os.environ.get("FAKE_STEPS", "5"))
fail_trainer = int(os.environ.get("FAKE_FAIL_TRAINER", "-1"))
total = int(os.environ.get("FAKE_TOTAL_STEPS", "0"))  # log progress as paddlecloud.metrics users do
if total:
    from paddlecloud import metrics
for step in range(steps):
    print(f"trainer {me} step {step} loss {10.0 / (step + 1):.4f}", flush=True)
    if total:
        metrics.log(step + 1, total_steps=total, loss=10.0 / (step + 1))
    if me == fail_trainer and step == steps // 2 and "FAKE_RAISE" in os.environ:
        raise ValueError(os.environ["FAKE_RAISE"])
    if me == fail_trainer and step == steps // 2:
        print("trainer giving up", flush=True)
        sys.exit(int(os.environ.get("FAKE_EXIT_CODE", "3")))
    pause = float(os.environ.get("FAKE_STEP_SECONDS", "0.1"))
    if "FAKE_BURN" in os.environ:  # the step's time is spent computing, silently (a busy trainer that logs nothing)
        until = time.monotonic() + pause
        while time.monotonic() < until:
            sum(range(10_000))
    else:
        time.sleep(pause)
print(f"trainer {me} done", flush=True)

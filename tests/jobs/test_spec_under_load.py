"""A hang check: a pathological quantity is a quick 400 while other users submit and log in at once.

One `"memory": "1e999999999"` once kept a server thread busy for minutes inside the submit transaction,
and on SQLite every other write waited on its lock. Here the three requests run together against a
live server; the bound (10 s) is generous: it catches a hang, it does not measure speed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import requests
from django.contrib.auth.models import User

from accounts.models import issue_token
from datacenters.models import Datacenter
from jobs.models import Job
from tests.conftest import PASSWORD

SPEC = {"jobname": "fit", "entry": "python train.py"}


def test_a_huge_quantity_is_refused_while_others_submit_and_log_in(
    live_server: Any, transactional_db: None, alice: User, bob: User, carol: User, local_dc: Datacenter
) -> None:
    (Path(local_dc.storage_root) / "home" / "bob" / "jobs" / "fit").mkdir(parents=True)
    api = f"{live_server.url}/api/v1"
    alice_auth = {"Authorization": f"Token {issue_token(alice).key}"}
    bob_auth = {"Authorization": f"Token {issue_token(bob).key}"}

    def timed(call: Any) -> tuple[requests.Response, float]:
        started = time.monotonic()
        response = call()
        return response, time.monotonic() - started

    calls = {
        "huge": lambda: requests.post(f"{api}/jobs", json={**SPEC, "memory": "1e999999999"}, headers=alice_auth,
                                      timeout=60),
        "huge psmemory": lambda: requests.post(f"{api}/jobs", json={**SPEC, "pservers": 1, "psmemory": "1e999999"},
                                               headers=alice_auth, timeout=60),
        "bob submits": lambda: requests.post(f"{api}/jobs", json=SPEC, headers=bob_auth, timeout=60),
        "carol logs in": lambda: requests.post(f"{api}/auth/token", json={"username": "carol", "password": PASSWORD},
                                               timeout=60),
    }
    with ThreadPoolExecutor(len(calls)) as pool:
        futures = {name: pool.submit(timed, call) for name, call in calls.items()}
        results = {name: future.result() for name, future in futures.items()}

    for name, (_, took) in results.items():
        assert took < 10, f"{name} took {took:.1f} s"
    assert results["huge"][0].status_code == 400
    assert [e["field"] for e in results["huge"][0].json()["errors"]] == ["memory"]
    assert len(results["huge"][0].content) < 1000
    assert results["huge psmemory"][0].status_code == 400
    assert results["bob submits"][0].status_code == 201, results["bob submits"][0].json()
    assert results["carol logs in"][0].status_code == 200
    assert list(Job.objects.values_list("owner__username", flat=True)) == ["bob"]

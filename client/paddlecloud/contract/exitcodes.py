"""The exit codes of paddlecloud-launch's own failures (not its entry's): the launcher exits with them.

Engines read them; the reason is then the launcher's last ``[paddlecloud-launch] error: ...`` log line.
"""

from __future__ import annotations

BAD_FACTS = 64  # a PADDLECLOUD_* variable is missing, malformed or inconsistent
DNS = 68  # a peer's host name did not resolve in time
PSERVER_UNREACHABLE = 69  # a pserver did not accept connections, or pserver 0's rendezvous store answer, in time
VENV = 70  # the requirements' venv could not be created, or pip failed
OS_ERROR = 71  # log folder, store port taken, cannot start /bin/sh
RENDEZVOUS = 72  # PS mode: the trainers' gloo rendezvous did not complete within its bound
ISOLATION = 73  # k8s: the pod's NetworkPolicies were not in force within their bound (runtime/isolation.py)

LAUNCHER_CODES = (BAD_FACTS, DNS, PSERVER_UNREACHABLE, VENV, OS_ERROR, RENDEZVOUS, ISOLATION)

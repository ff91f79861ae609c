"""Python's start-up hook in a PS trainer's entry: Paddle's init_worker first waits for the pservers (pserver_gate).

The launcher puts this folder first on the entry's PYTHONPATH, so Python runs this module instead of any other
sitecustomize; that one (a venv's, the system's) then runs here, as it would have.
"""

from paddlecloud.runtime import pserver_gate

pserver_gate.install()
pserver_gate.run_next_sitecustomize()

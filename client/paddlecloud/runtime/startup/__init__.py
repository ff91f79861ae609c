"""The folder a PS trainer's entry has first on its PYTHONPATH: its sitecustomize (see ``pserver_gate``)."""

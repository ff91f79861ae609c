"""The local engine: job processes on the worker's host, each in a bubblewrap sandbox."""

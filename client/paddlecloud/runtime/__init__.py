"""What runs inside a job: the launcher and its environment, the gloo store, the venv cache, the log cap,
the metrics writer and the data tools. It imports only itself and `paddlecloud.contract`, never the CLI
or the SDK, so a job's processes load nothing they do not use.
"""

"""PaddleCloud client package: CLI, SDK, dataset tools and the in-pod launcher (no Django here)."""

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    # Lazy so `import paddlecloud` stays instant inside jobs: nothing loads until a name is used.
    if name in ("trainer_id", "trainers"):
        from paddlecloud import dataset  # noqa: PLC0415 - lazy by design (above)

        return getattr(dataset, name)
    # The SDK (paddlecloud/job.py), loaded on first use only.
    if name in ("PaddleJob", "CephFSVolume", "dist_train"):
        from paddlecloud import job  # noqa: PLC0415 - lazy by design (above)

        return getattr(job, name)
    raise AttributeError(f"module 'paddlecloud' has no attribute {name!r}")

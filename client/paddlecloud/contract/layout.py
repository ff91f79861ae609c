"""Where a job's files lie on the PFS: one rule for both sides (the portal reads them, the launcher writes them).

In the user's home on a datacenter (`/pfs/<dc>/home/<user>`):

    jobs/<jobname>/                      the job's folder: `paddlectl submit DIR` uploads the package here
    jobs/<jobname>/output/<uid>/         one run's output (PADDLECLOUD_OUTPUT_DIR): a reused name never
                                         mixes the files of two runs
        <role>_<index>/log.txt           each worker's log (trainer_0, pserver_1, ...)
        <role>_<index>/metrics.jsonl     its metric points (paddlecloud.metrics)
        checkpoints/step-<n>/            one checkpoint (paddlecloud.checkpoint), with its CHECKPOINT_META
"""

from __future__ import annotations

LOG_NAME = "log.txt"
METRICS_NAME = "metrics.jsonl"
CHECKPOINTS_NAME = "checkpoints"
CHECKPOINT_META = ".paddlecloud-checkpoint.json"  # in each checkpoint: {"step", "time", "metric"} as save wrote it


def job_folder_parts(jobname: str) -> list[str]:
    """The job's folder, below its owner's home."""
    return ["jobs", jobname]


def default_package(datacenter: str, username: str, jobname: str) -> str:
    """The package of a job whose spec names none: its own folder, as a logical path."""
    return "/".join([f"/pfs/{datacenter}/home/{username}", *job_folder_parts(jobname)])


def output_parts(jobname: str, uid: str) -> list[str]:
    """One run's output folder, below its owner's home."""
    return [*job_folder_parts(jobname), "output", uid]


def worker_folder(role: str, index: int | str) -> str:
    """The folder of worker `index` of `role` in its run's output folder: `trainer_0`, `pserver_1`."""
    return f"{role}_{index}"

"""paddlecloud/__init__.py: the documented names and module paths of user code lead to the floors' modules."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import paddlecloud
import pytest
from paddlecloud.runtime import dataset, metrics, recordio
from paddlecloud.sdk import errors, images, job


@pytest.mark.parametrize(
    ("documented", "module"),
    [
        ("paddlecloud.dataset", dataset),
        ("paddlecloud.recordio", recordio),
        ("paddlecloud.metrics", metrics),
        ("paddlecloud.ctl.errors", errors),
        ("paddlecloud.ctl.images", images),
    ],
)
def test_a_documented_module_path_is_the_module_where_it_lives(documented: str, module: object) -> None:
    assert importlib.import_module(documented) is module
    assert module.__spec__ is not None and module.__spec__.name == module.__name__  # its own spec, not the alias's


def test_the_package_names_are_the_sdk_and_runtime_ones() -> None:
    assert (paddlecloud.PaddleJob, paddlecloud.CephFSVolume, paddlecloud.dist_train) == (
        job.PaddleJob, job.CephFSVolume, job.dist_train
    )
    assert (paddlecloud.PaddleCloudError, paddlecloud.APIError, paddlecloud.JobFailed) == (
        errors.PaddleCloudError, errors.APIError, errors.JobFailed
    )
    assert (paddlecloud.trainer_id, paddlecloud.trainers) == (dataset.trainer_id, dataset.trainers)
    assert paddlecloud.metrics is metrics
    assert isinstance(paddlecloud.__version__, str) and paddlecloud.__version__
    with pytest.raises(AttributeError):
        paddlecloud.nothing_of_that_name  # noqa: B018 - the attribute access is the test


def test_a_script_uses_the_documented_paths_in_a_fresh_interpreter() -> None:
    code = (
        "from paddlecloud.dataset import split, cluster_files_reader\n"
        "import paddlecloud.recordio, paddlecloud\n"
        "from paddlecloud.ctl.errors import PaddleCloudError\n"
        "from paddlecloud import metrics, PaddleJob\n"
        "print(split.__module__, paddlecloud.recordio.__name__, PaddleCloudError.__module__, metrics.__name__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ)
    assert out.stdout.split() == [
        "paddlecloud.runtime.dataset", "paddlecloud.runtime.recordio", "paddlecloud.sdk.errors",
        "paddlecloud.runtime.metrics",
    ]

"""What a job says when the kubelet cannot pull its image: containerd's words (recorded with the real
kubelet, containerd 2.4 and the distribution registry in tests/k8s/test_registry_pulls.py) plus their meaning."""

from __future__ import annotations

import pytest

from jobs.engines.kubernetes.status import pull_message

IMAGE = '"10.244.0.1:40513/alice/paddle:denied-2e8f041b"'
NO_LOGIN = (
    f"failed to pull and unpack image {IMAGE}: failed to resolve image: pull access denied, repository does "
    "not exist or may require authorization: authorization failed: no basic auth credentials"
)
WRONG_PASSWORD = (
    f"failed to pull and unpack image {IMAGE}: failed to resolve image: unexpected status from HEAD request to "
    "https://10.244.0.1:40513/v2/alice/paddle/manifests/denied-2e8f041b: 401 Unauthorized"
)


@pytest.mark.parametrize(
    ("kubelet", "meaning"),
    [
        (NO_LOGIN, "the registry wants a login: submit with a registry secret for it (-registry)"),
        (WRONG_PASSWORD, "the registry refused the login: check the registry secret's username and password"),
    ],
)
def test_a_refused_pull_keeps_the_registrys_answer_and_says_what_it_means(kubelet: str, meaning: str) -> None:
    assert pull_message("ErrImagePull", kubelet) == f"ErrImagePull: {kubelet} ({meaning})"


def test_a_pull_failure_with_no_known_meaning_is_passed_on_as_it_is() -> None:
    kubelet = f"failed to pull and unpack image {IMAGE}: not found"
    assert pull_message("ImagePullBackOff", kubelet) == f"ImagePullBackOff: {kubelet}"

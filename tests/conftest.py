"""Shared fixtures: the personas every route is tried with.

Alice is a normal user, Bob is another normal user who must never see Alice's things, Carol is an
operator (staff), and anonymous has no credentials at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from rest_framework.test import APIClient
from xdist.scheduler import LoadScopeScheduling

from accounts.models import ApiToken, issue_token
from datacenters.models import Datacenter, Engine, StorageKind
from tests import background_build
from tests.timing import pytest_runtest_logreport, pytest_terminal_summary  # noqa: F401  (hooks, by name)

PASSWORD = "correct horse battery staple"
class _BuiltTestsOnWorkersOfTheirOwn(LoadScopeScheduling):  # type: ignore[misc]  # an untyped base
    """pytest-xdist's scheduling with every test its own unit, except the tests under tests/k8s (and the others of
    background_build.BUILT_FOR): two units, the control plane's tests and the real node's, so one worker runs each
    (one real node per host: the node is root's and has fixed paths) while the other workers run the rest.
    (`--dist loadgroup` with an xdist_group mark would say the same, but pytest-xdist 3.8 marks the node id where
    pytest 9 no longer reads it, so the groups are silently lost.)"""

    def _split_scope(self, nodeid: str) -> str:
        return background_build.unit_of(nodeid) if background_build.needs_build(nodeid) else nodeid

    def _assign_work_unit(self, node: Any) -> None:
        """A worker that holds no built unit gets one as soon as its part of CI's background build is done, wherever
        the unit stands in the queue. Sent in collection order (last, while CI builds), the node's unit (most of the
        Kubernetes tests, a third of the suite's time) ran on one worker after the other had run out of tests: busy
        2,701 s against 2,103 s in a warm CI run; 2,756 s and 2,626 s with this. (The warm run's wall time stayed
        45 min: the two cores were busy either way, 1.6 and 1.7 of 2; on a cold machine a unit waits for its part
        no longer than the part itself takes.)"""
        held = self.assigned_work.get(node, {})
        prefix = background_build.UNIT_PREFIX
        if not any(scope.startswith(prefix) and not all(unit.values()) for scope, unit in held.items()):
            ready = next((scope for scope in self.workqueue if background_build.unit_ready(scope)), None)
            if ready is not None:
                self.workqueue.move_to_end(ready, last=False)
        super()._assign_work_unit(node)


@pytest.hookimpl(optionalhook=True)  # known only while pytest-xdist is loaded (not with -p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadScopeScheduling | None:
    """scripts/pytest.sh asks for `--dist loadgroup`; any other mode keeps pytest-xdist's own scheduler."""
    return _BuiltTestsOnWorkersOfTheirOwn(config, log) if config.getvalue("dist") == "loadgroup" else None


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    # Login throttling counts live in the cache; each test starts from zero.
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(db: None) -> User:
    return User.objects.create_user("alice", "alice@example.com", PASSWORD)


@pytest.fixture
def bob(db: None) -> User:
    return User.objects.create_user("bob", "bob@example.com", PASSWORD)


@pytest.fixture
def carol(db: None) -> User:
    return User.objects.create_user("carol", "carol@example.com", PASSWORD, is_staff=True, is_superuser=True)


@pytest.fixture
def local_dc(db: None, tmp_path: Path) -> Datacenter:
    root = tmp_path / "pfs" / "local"
    (root / "home").mkdir(parents=True)
    (root / "public").mkdir()
    # A large capacity: tests not about scheduling must not queue behind each other on a 2-core CI host
    # (the scheduler's own tests set theirs; tests/jobs/test_scheduler*.py).
    return Datacenter.objects.create(
        name="local", engine=Engine.LOCAL, storage_kind=StorageKind.LOCAL, storage_root=str(root),
        capacity_cpu="256", capacity_memory="1Ti",
    )  # fmt: skip


def client_for(user: User | None) -> APIClient:
    client = APIClient()
    if user is not None:
        token: ApiToken = issue_token(user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def alice_api(alice: User) -> APIClient:
    return client_for(alice)


@pytest.fixture
def bob_api(bob: User) -> APIClient:
    return client_for(bob)


@pytest.fixture
def carol_api(carol: User) -> APIClient:
    return client_for(carol)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()

"""Jobs through the API, shared by paddlectl and the SDK: submit (uploading the package), wait, logs.

Log following reads each worker's log by cursor (`?cursor=` from the previous answer), so no line is
missed or repeated, and it pins the job by its uid, so a job submitted again under the same name
is never mixed in. When the portal is briefly unreachable (a restart), following waits and carries
on from the same cursors.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from paddlecloud.contract import layout
from paddlecloud.contract.states import TERMINAL_JOB_STATES, worker_names
from paddlecloud.sdk import images
from paddlecloud.sdk import spec as specs
from paddlecloud.sdk.errors import APIError, NetworkError, PaddleCloudError, UsageProblem
from paddlecloud.sdk.files import Files, check_remote, is_remote
from paddlecloud.sdk.session import Session, cursor_answers
from paddlecloud.sdk.transfers import Progress, Summary

OUTAGE_LIMIT = 600.0  # seconds a follower waits for an unreachable portal before it gives up
FINAL_GRACE = 60.0  # seconds to wait for the last log bytes of an ended job that is never released


def job_path(name: str) -> str:
    return f"/jobs/{quote(name, safe='')}"


def package_dir(session: Session, datacenter: str, jobname: str) -> str:
    """Where `submit ./dir` uploads the package: the job's folder in the user's home."""
    return layout.default_package(datacenter, session.username, jobname)


LONG_POLL_SECONDS = 10.0  # the portal's bound on one waiting request (jobs/api/waiting.py)


def get(session: Session, name: str, unless_state: str = "", wait: float = 0.0) -> dict[str, Any]:
    """The job; with `unless_state`, the portal answers once its state is another, or after `wait` s."""
    params = {"state": unless_state, "wait": f"{min(wait, LONG_POLL_SECONDS):.3f}"} if unless_state else None
    data: dict[str, Any] = session.get(job_path(name), params=params)
    return data


def submit(
    session: Session,
    spec: dict[str, Any],
    package: str | Path | None,
    progress: Progress | None = None,
    chunk_size: int | None = None,
    flags: dict[str, str] | None = None,
    dry_run: bool = False,
    before_create: Callable[[dict[str, Any]], None] | None = None,
    create: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], Summary | None]:
    """Check the spec, ask the portal (a dry run), upload a local package directory, and create the job.

    The dry run comes first, so a job the portal would refuse (quota, registry, name, a bad value)
    uploads nothing. If the job is still refused after the upload (something changed in between),
    what the upload added is removed again. dry_run=True stops after the dry run and returns its answer.
    before_create(body): called once the package is in place, just before the job is created (`-build`
    requests the image build there and names it in the body). create(body): what is made of the checked body
    instead of one job (`submit -sweep`: an experiment whose trials run the package); refused, the upload is
    removed as a refused job's is.
    """
    body = {k: v for k, v in spec.items() if v is not None}
    body.setdefault("datacenter", session.portal_datacenter)
    specs.check(body, flags)
    names = {**specs.FLAGS, **(flags or {})}
    local: Path | None = None
    if package is not None and str(package) != "":
        text = str(package)
        if is_remote(text):
            body["package"] = check_remote(text, session).rstrip("/")
        else:
            local = Path(text).expanduser()
            if not local.exists():
                raise UsageProblem(f"{names['package']}: {text} does not exist (a local directory or a /pfs/ path)")
            if not local.is_dir():
                raise UsageProblem(f"{names['package']}: {text} is not a directory")
            body["package"] = package_dir(session, body["datacenter"], body["jobname"])
    params = {"dry_run": "1", **({"upload_pending": "1"} if local is not None else {})}
    checked = _post_job(session, body, params, flags)
    if dry_run:
        return checked, None
    if local is None:
        return _create(session, body, flags, before_create, create), None
    files = Files(session)
    before = _before_upload(files, body["package"])
    summary = files.copy([str(local) + "/"], body["package"] + "/", progress, chunk_size, package=True)
    try:
        job = _create(session, body, flags, before_create, create)
    except APIError:
        _remove_added(files, body["package"], before)
        raise
    return job, summary


def _create(
    session: Session,
    body: dict[str, Any],
    flags: dict[str, str] | None,
    before_create: Callable[[dict[str, Any]], None] | None,
    create: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """before_create, then the job; a build it requested for a job the portal then refuses is cancelled
    (before the caller removes the uploaded package: no job waits for it, nothing builds a half-removed folder)."""
    if before_create:
        before_create(body)
    if create is not None:
        return create(body)
    # One key for this submission: a retry after a lost answer (or a 502-504) gets the job it created.
    key = {"Idempotency-Key": uuid.uuid4().hex}
    try:
        return _post_job(session, body, None, flags, key)
    except APIError:
        if body.get("build"):
            with contextlib.suppress(PaddleCloudError):  # the job's refusal is the error the user needs
                images.cancel_build(session, body["build"])
        raise


def _post_job(
    session: Session,
    body: dict[str, Any],
    params: dict[str, str] | None,
    flags: dict[str, str] | None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """POST /jobs; retried like a GET (a dry run creates nothing, a submit carries its idempotency key)."""
    try:
        answer: dict[str, Any] = session.post("/jobs", body, params=params, headers=headers, retry=True)
    except APIError as exc:
        if exc.status in (400, 409) and exc.errors:
            raise APIError(exc.status, specs.flag_message(exc.errors, exc.detail, flags), exc.code,
                           exc.errors) from None
        raise
    return answer


@dataclass(frozen=True)
class _Before:
    """What was there before an upload: the first folder the upload creates, else the folder's entries."""

    created: str | None
    entries: frozenset[str] = frozenset()


def _before_upload(files: Files, folder: str) -> _Before:
    parts = folder.strip("/").split("/")
    # /pfs/<dc>/home/<user> is there; the folders below it (jobs/, jobs/<name>/) may not be yet.
    for depth in range(5, len(parts) + 1):
        path = "/" + "/".join(parts[:depth])
        if files.stat(path) is None:
            return _Before(created=path)
    return _Before(created=None, entries=frozenset(str(e["path"]) for e in files.ls(folder, recursive=True)))


def _remove_added(files: Files, folder: str, before: _Before) -> None:
    """Undo an upload the portal then refused: the folders it created, else only the entries it added."""
    try:
        if before.created is not None:
            files.rm(before.created, recursive=True)
            return
        removed: list[str] = []
        for path in sorted(str(entry["path"]) for entry in files.ls(folder, recursive=True)):
            if path not in before.entries and not any(path.startswith(gone + "/") for gone in removed):
                files.rm(path, recursive=True)
                removed.append(path)
    except (APIError, NetworkError):
        pass  # the refusal is what the user must see; a leftover package is only clutter


def workers_of(job: dict[str, Any]) -> list[str]:
    """The names of a job's workers (as the API describes the job), trainers first."""
    trainers = int((job.get("trainers") or {}).get("total") or job.get("spec", {}).get("parallelism") or 0)
    pservers = int((job.get("pservers") or {}).get("total") or job.get("spec", {}).get("pservers") or 0)
    return worker_names(trainers, pservers)


class _Outage:
    """Waits out a portal that is down for a while (a restart), up to `limit` seconds in all."""

    def __init__(self, limit: float, notify: Callable[[str], None] | None) -> None:
        self.limit = limit
        self.notify = notify

    @staticmethod
    def _is_outage(exc: BaseException) -> bool:
        return isinstance(exc, NetworkError) or (isinstance(exc, APIError) and exc.status in (502, 503, 504))

    def call(self, fn: Callable[[], Any]) -> Any:
        import tenacity  # noqa: PLC0415 - here, not at the top: it costs `paddlectl --help` ~25 ms

        waited = False

        def tell(state: tenacity.RetryCallState) -> None:
            nonlocal waited
            if not waited and self.notify and state.outcome is not None:
                self.notify(f"{state.outcome.exception()}; waiting for the portal to come back")
            waited = True

        waiting = tenacity.Retrying(
            retry=tenacity.retry_if_exception(self._is_outage),
            stop=tenacity.stop_after_delay(max(self.limit, 0.0)),
            wait=tenacity.wait_exponential(multiplier=1.0, max=5.0),
            before_sleep=tell,
            reraise=True,
        )
        result = waiting(fn)
        if waited and self.notify:
            self.notify("the portal is back; carrying on")
        return result


class LogStream:
    """Iterate (worker, text) pieces of a job's logs; `job` holds the job as last seen.

    follow: keep reading until every log is complete (the job ended and its processes are gone).
    tail: start from the last N lines of each log.
    """

    def __init__(
        self,
        session: Session,
        name: str,
        worker: str | None = None,
        tail: int | None = None,
        follow: bool = False,
        poll: float = 1.0,
        notify: Callable[[str], None] | None = None,
        outage_limit: float = OUTAGE_LIMIT,
    ) -> None:
        self.session = session
        self.name = name
        self.worker = worker
        self.tail = tail
        self.follow = follow
        self.poll = poll
        self.outage = _Outage(outage_limit if follow else 0.0, notify)
        self.job: dict[str, Any] = {}
        self.workers: list[str] = []
        self._state = ""  # the job's state, as the last log answer gave it

    def _read(self, uid: str, worker: str, cursor: str, first: bool) -> dict[str, Any]:
        params: dict[str, Any] = {"worker": worker, "cursor": cursor}
        if first and self.tail is not None:
            params["tail"] = self.tail
        answer: dict[str, Any] = self.outage.call(lambda: self.session.get(f"{job_path(uid)}/logs", params))
        return answer

    def _drain(
        self, uid: str, worker: str, cursors: dict[str, str], complete: dict[str, bool], first: dict[str, bool]
    ) -> Iterator[tuple[str, str, list[float | None]]]:
        """Read one worker's log until nothing new comes (an answer holds at most 256 KiB)."""

        def fetch(cursor: str) -> dict[str, Any]:
            answer = self._read(uid, worker, cursor, first[worker])
            first[worker] = False
            return answer

        for answer in cursor_answers(fetch, cursors[worker]):
            self._state = answer.get("state", self._state)
            text = answer.get("text", "")
            cursors[worker] = answer.get("cursor", cursors[worker])
            complete[worker] = bool(answer.get("complete"))
            if not text:
                return
            yield worker, text, list(answer.get("times") or [])

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for worker, text, _ in self.stamped():
            yield worker, text

    def stamped(self) -> Iterator[tuple[str, str, list[float | None]]]:
        """(worker, text, times) pieces: `times` has when each line starting in `text` arrived (the API's)."""
        self.job = self.outage.call(lambda: get(self.session, self.name))
        uid = self.job["uid"]
        self.workers = [self.worker] if self.worker else workers_of(self.job)
        cursors = dict.fromkeys(self.workers, "")
        complete = dict.fromkeys(self.workers, False)
        first = dict.fromkeys(self.workers, True)
        ended_at: float | None = None
        self._state = self.job.get("state", "")
        while True:
            for worker in self.workers:
                if not complete[worker]:
                    yield from self._drain(uid, worker, cursors, complete, first)
            if not self.follow or all(complete.values()):
                break
            if self._state in TERMINAL_JOB_STATES:
                # Ended: the logs become complete once its processes are gone; do not wait forever.
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at > FINAL_GRACE:
                    break
            time.sleep(self.poll)
        if self.follow:
            self.job = self.outage.call(lambda: get(self.session, uid))


def lines(pieces: Iterator[tuple[str, str]], prefix: bool) -> Iterator[str]:
    """Whole lines (with their newline) from LogStream pieces; `[worker] ` in front when asked."""
    for worker, text in pieces:
        for line in text.splitlines(keepends=True):
            if not line.endswith("\n"):
                line += "\n"  # the last line of a finished log may lack its newline
            yield f"[{worker}] {line}" if prefix else line


def stamped_lines(pieces: Iterator[tuple[str, str, list[float | None]]], prefix: bool) -> Iterator[str]:
    """Like `lines`, each line after the UTC time it arrived (RFC 3339, ms), `-` where none was kept."""
    open_line: dict[str, bool] = {}
    for worker, text, times in pieces:
        parts = text.split("\n")
        if parts[-1] == "":
            parts.pop()
        for i, part in enumerate(parts):
            ended = i < len(parts) - 1 or text.endswith("\n")
            when = times[i] if i < len(times) else None
            if i == 0 and open_line.get(worker):
                stamp = "...".ljust(24)  # the rest of a line whose start was printed already
            else:
                stamp = _utc(when) if when is not None else "-".ljust(24)
            open_line[worker] = not ended
            yield f"{stamp} {f'[{worker}] ' if prefix else ''}{part}\n"


def _utc(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def wait(
    session: Session,
    name: str,
    timeout: float | None = None,
    poll: float = 2.0,
    notify: Callable[[str], None] | None = None,
    on_state: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Poll until the job ends (succeeded, failed, killed); return it. TimeoutError after `timeout` s."""
    outage = _Outage(OUTAGE_LIMIT, notify)
    job: dict[str, Any] = outage.call(lambda: get(session, name))
    uid = job["uid"]
    deadline = None if timeout is None else time.monotonic() + timeout
    last_state = None
    while True:
        if job.get("state") != last_state:
            last_state = job.get("state")
            if on_state:
                on_state(job)
        if job.get("state") in TERMINAL_JOB_STATES:
            return job
        if deadline is not None and time.monotonic() >= deadline:
            raise PaddleCloudError(f"job {name} is still {job.get('state')} after {timeout:g} s")
        job = _next_state(session, uid, job, poll, outage, deadline)


def _next_state(
    session: Session, uid: str, job: dict[str, Any], poll: float, outage: _Outage, deadline: float | None
) -> dict[str, Any]:
    """The job once its state changes: the portal holds the request until then (long polling), up to its
    bound; where it answers at once (its waiting slots are taken) this waits `poll` s between asks."""
    asked = time.monotonic()
    left = LONG_POLL_SECONDS if deadline is None else max(0.0, deadline - asked)
    seen = str(job.get("state", ""))
    now: dict[str, Any] = outage.call(lambda: get(session, uid, unless_state=seen, wait=left))
    if now.get("state") == seen:
        time.sleep(max(0.0, min(poll - (time.monotonic() - asked), left)))
    return now

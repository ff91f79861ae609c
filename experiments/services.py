"""Every write to experiments: create (the sweep and the template checked, then the rows), advance (the ended
trials recorded, the next ones submitted up to `parallel`, the experiment ended once every trial has) and kill.

Each trial is an ordinary job submitted through jobs.services, so the scheduler treats it as any other (quota,
fair share, priority, preemption); `parallel` only caps how many of the experiment's trials wait or run at once.
`advance` is safe to run twice or at once: it holds the experiment's row while it decides.
"""

from __future__ import annotations

import secrets
import string
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.errors import Conflict, DomainError, Invalid, Unavailable
from experiments import asha as asha_rule
from experiments import keep, progress, search
from experiments.models import Experiment, ExperimentState, Trial
from jobs import services as jobs
from jobs.files import checkpoints
from jobs.models import STARTED_STATES, TERMINAL_STATES, Job, JobState, Reason

MAX_SUBMITS = 10  # trials one advance submits at most (it holds the experiment's row meanwhile); it says "more"
MAX_RUNNING = 20  # running experiments per user
WAITING, REFUSED, REMOVED, STOPPED = "waiting", "refused", "removed", "stopped"
FINAL = {REFUSED, REMOVED, STOPPED, *TERMINAL_STATES}
_TEMPLATE_SET_BY_SWEEP = ("jobname", "params", "keep")  # keep: the sweep's own `keep` decides for trials


class InvalidTemplate(Invalid):
    """The template breaks the job spec's rules: `problems` holds each `template.<field>`'s messages."""

    def __init__(self, problems: Mapping[str, Any]) -> None:
        super().__init__([f"{field}: {problem}" for field, found in problems.items() for problem in found])
        self.problems = problems


def trial_spec(template: Mapping[str, Any], name: str, index: int, params: Mapping[str, Any]) -> dict[str, Any]:
    """The job spec of trial `index`: the template, its name `<experiment>-<index>`, and its params."""
    return {**template, "jobname": f"{name}-{index}", "params": dict(params)}


def _checked_template(user: User, sweep: search.Sweep, template: object) -> Any:
    """The first trial as a dry run: the spec's rules, the datacenter, the quota and the package, as a job's."""
    if not isinstance(template, dict):
        raise Invalid("must be an object: the job spec every trial is made from", "template")
    for key in _TEMPLATE_SET_BY_SWEEP:
        if key in template:
            raise Invalid("the sweep sets it for each trial", f"template.{key}")
    if not template.get("package"):
        raise Invalid("required: the folder every trial runs (paddlectl submit -sweep uploads it)", "template.package")
    try:
        return jobs.submit_request(user, trial_spec(template, sweep.name, 0, sweep.trials[0]), check_only=True)
    except jobs.InvalidSpec as exc:
        raise InvalidTemplate({f"template.{field}": found for field, found in exc.problems.items()}) from None
    except DomainError as exc:
        exc.field = f"template.{exc.field}" if exc.field else "template"
        raise


def then_spec(then: Mapping[str, Any], name: str, best: Trial | None) -> dict[str, Any]:
    """The `then` job's spec: its own, named `<experiment>-best` unless it says, with the best trial's params and
    (where it saved one) its latest checkpoint to start from."""
    spec: dict[str, Any] = {"jobname": f"{name}-best", **then, "params": dict(best.params) if best else {}}
    saved = best is not None and best.job is not None and checkpoints.chosen(best.job, None) is not None
    # Never a rerun's own resume: without the best trial's checkpoint, `then` starts from nothing.
    spec["resume_from"] = best.job.uid if saved and best is not None and best.job is not None else ""
    return spec


def _checked_then(user: User, sweep: search.Sweep, then: object) -> None:
    """The `then` job as a dry run, as if the first trial were the best; Invalid naming `then.<field>`."""
    if then is None:
        return
    if not isinstance(then, dict):
        raise Invalid("must be an object: the job spec to run once the experiment succeeded", "then")
    if "params" in then or "resume_from" in then:
        raise Invalid("the best trial sets it", f"then.{'params' if 'params' in then else 'resume_from'}")
    spec = {**then_spec(then, sweep.name, None), "params": sweep.trials[0]}
    try:
        jobs.submit_request(user, spec, check_only=True)
    except jobs.InvalidSpec as exc:
        raise InvalidTemplate({f"then.{field}": found for field, found in exc.problems.items()}) from None
    except DomainError as exc:
        exc.field = f"then.{exc.field}" if exc.field else "then"
        raise


def create(user: User, data: Mapping[str, Any]) -> Experiment:
    """The experiment and its trials (none submitted yet: the caller has `advance` submit them once committed)."""
    try:
        sweep = search.parse(dict(data))
    except search.SweepProblem as exc:
        raise Invalid(exc.message, exc.key) from None
    if Experiment.objects.filter(owner=user, state=ExperimentState.RUNNING).count() >= MAX_RUNNING:
        raise Invalid(f"you have {MAX_RUNNING} running experiments, the most; kill one or let one end", "name")
    template = data.get("template")
    checked = _checked_template(user, sweep, template).checked
    _checked_then(user, sweep, data.get("then"))
    suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
    stored = {key: value for key, value in data.items() if key != "template"}
    try:
        with transaction.atomic():
            experiment = Experiment.objects.create(
                uid=f"{sweep.name}-{suffix}", name=sweep.name, owner=user, datacenter=checked.datacenter,
                template=dict(template or {}), sweep=stored,
            )  # fmt: skip
            Trial.objects.bulk_create(
                Trial(experiment=experiment, index=i, params=params) for i, params in enumerate(sweep.trials)
            )
    except IntegrityError:
        raise Conflict(f"an experiment named {sweep.name} is running; kill it or choose another name", "name") from None
    return experiment


def _progress_of(trial: Trial) -> progress.Progress:
    return progress.Progress(trial.best, trial.last, trial.steps, trial.cursor, dict(trial.rungs or {}))


def _read_trials(experiment_id: int, metric: search.Metric | None, asha: search.Asha | None) -> set[int]:
    """Read on in each started trial's metrics (outside any lock), record the trials whose job ended (their metric
    read to the end first), and return the ids of trials that passed an ASHA rung. A trial whose job its owner
    removed (`kill -rm`) has ended too. A final state is never written over."""
    trials = Trial.objects.filter(experiment_id=experiment_id).exclude(state__in=[*FINAL, WAITING])
    trials.filter(job=None).update(state=REMOVED, message="its job was removed")
    rungs = asha.rungs() if asha else []
    passed: set[int] = set()
    for trial in trials.exclude(job=None).select_related("job", "job__datacenter", "job__owner"):
        job = trial.job
        assert job is not None
        still = Trial.objects.filter(pk=trial.pk).exclude(state__in=FINAL)
        ended = job.state in TERMINAL_STATES and job.released
        found = _progress_of(trial)
        if metric and (ended or job.state in STARTED_STATES):
            reads = progress.READS_AT_END if ended else progress.READS_WHILE_RUNNING
            if progress.read_on(job, metric, found, rungs, reads) and not ended:
                passed.add(trial.pk)
        fields = {"best": found.best, "last": found.last, "steps": found.steps, "cursor": found.cursor,
                  "rungs": found.rungs}  # fmt: skip
        if ended:
            still.update(state=job.state, message=job.message[:500], **fields)
        else:  # final only once released (above)
            still.update(state=job.state if job.state not in TERMINAL_STATES else trial.state, **fields)
    return passed


def _stop_behind(experiment: Experiment, passed: set[int], metric: search.Metric, asha: search.Asha) -> None:
    """ASHA, under the experiment's lock: each trial that passed a rung since the last look goes on only if it is
    among the best 1/reduction there; the others are stopped (their job killed, reason EarlyStopped)."""
    reported = list(experiment.trials.exclude(rungs={}).values_list("pk", "rungs"))
    rungs = asha.rungs()
    for trial in experiment.trials.filter(pk__in=passed, state__in=STARTED_STATES).select_related("job"):
        index = max(map(int, trial.rungs))  # its highest rung decides
        values = [float(r[str(index)]) for _, r in reported if str(index) in r]
        value = float(trial.rungs[str(index)])
        if not asha_rule.stops(value, values, metric, asha.reduction):
            continue
        why = (f"stopped early at rung {index + 1} (step {rungs[index]}): {metric.name} {value:.6g} is not among "
               f"the best 1/{asha.reduction} of the {len(values)} trials there (cutoff "
               f"{asha_rule.cutoff(values, metric, asha.reduction):.6g})")[:500]  # fmt: skip
        # Only a trial whose job this kill ended is stopped: one that ended meanwhile keeps how it ended.
        if trial.job is not None and jobs.kill(trial.job, reason=Reason.EARLY_STOPPED, message=why):
            Trial.objects.filter(pk=trial.pk).update(state=STOPPED, message=why)


def _waits(exc: DomainError) -> bool:
    """A refusal that passes: storage away for now, or the owner's queue full (their other jobs will leave it)."""
    return isinstance(exc, Unavailable) or (isinstance(exc, Invalid) and exc.field == "queue")


def _submit(trial: Trial, experiment: Experiment) -> bool:
    """Submit the trial's job; False (the trial still waits) where the refusal passes."""
    spec = trial_spec(experiment.template, experiment.name, trial.index, trial.params)
    try:
        done = jobs.submit_request(experiment.owner, spec, trial_of=(experiment.uid, trial.index))
    except jobs.InvalidSpec as exc:
        trial.state, trial.message = REFUSED, str(exc)[:500]
    except DomainError as exc:
        if _waits(exc):
            return False
        trial.state, trial.message = REFUSED, f"{exc.field or 'job'}: {exc.message}"[:500]
    else:
        trial.job, trial.state = done.job, done.job.state
    trial.save(update_fields=["job", "state", "message"])
    return True


def _end_if_done(experiment: Experiment) -> None:
    trials = experiment.trials
    if trials.exclude(state__in=FINAL).exists():
        return
    total, succeeded = trials.count(), trials.filter(state=JobState.SUCCEEDED).count()
    stopped = trials.filter(state=STOPPED).count()
    state = ExperimentState.SUCCEEDED if succeeded else ExperimentState.FAILED
    message = f"{succeeded} of {total} trials succeeded" + (f", {stopped} stopped early" if stopped else "")
    ended = Experiment.objects.filter(pk=experiment.pk, state=ExperimentState.RUNNING).update(
        state=state, message=message, finished_at=timezone.now()
    )
    then = (experiment.sweep or {}).get("then")
    if ended and succeeded and then:
        _submit_then(experiment, then, message)


def _submit_then(experiment: Experiment, then: Mapping[str, Any], message: str) -> None:
    """Submit the sweep's `then` job once (the experiment just ended succeeded); a refusal is told in its message."""
    best = experiment.trials_by_metric().exclude(best=None).select_related("job__owner", "job__datacenter").first()
    best = best or experiment.trials.filter(state=JobState.SUCCEEDED).select_related("job").order_by("index").first()
    try:
        done = jobs.submit_request(experiment.owner, then_spec(then, experiment.name, best))
    except DomainError as exc:
        told = f"{message}; its `then` job was refused: {getattr(exc, 'field', '') or 'job'}: {exc.message}"
        Experiment.objects.filter(pk=experiment.pk).update(message=told[:500])
        return
    Experiment.objects.filter(pk=experiment.pk).update(then_job=done.job, message=f"{message}; then {done.job.uid}")


def advance(experiment_id: int) -> bool:
    """Record the trials that ended, remove the checkpoints their keep policy does not keep, submit the next ones
    up to `parallel` (at most MAX_SUBMITS a pass, so the row lock is short), and end the experiment when all did.
    True: more trials may be submitted, or checkpoints removed, now (call again)."""
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    if experiment is None:
        return False
    parallel, metric, asha = search.running_settings(experiment.sweep)
    passed = _read_trials(experiment_id, metric, asha)  # reads files, outside the lock; a killed one's trials end too
    # The keep policy removes checkpoints of ended trials, outside the lock too; a full pass may have left more (an
    # ended experiment's too): "call again".
    more_to_remove = keep.prune(experiment) == keep.MAX_TRIALS
    with transaction.atomic():
        locked = Experiment.objects.select_for_update(of=("self",)).filter(pk=experiment_id)
        experiment = locked.filter(state=ExperimentState.RUNNING).select_related("owner").first()
        if experiment is None:
            return more_to_remove
        if asha and metric and passed:
            _stop_behind(experiment, passed, metric, asha)
        room = max(parallel - experiment.trials.exclude(state__in=[*FINAL, WAITING]).count(), 0)
        batch = list(experiment.trials.filter(state=WAITING).order_by("index")[: min(room, MAX_SUBMITS)])
        submitted = 0
        for trial in batch:
            if not _submit(trial, experiment):
                break
            submitted += 1
        _end_if_done(experiment)
    return (submitted == MAX_SUBMITS and room > MAX_SUBMITS) or more_to_remove


def kill(experiment: Experiment) -> Experiment:
    """Killed: no trial is submitted any more, and each trial's job that still waits or runs is killed."""
    with transaction.atomic():
        changed = Experiment.objects.filter(pk=experiment.pk, state=ExperimentState.RUNNING).update(
            state=ExperimentState.KILLED, message="killed by its owner", finished_at=timezone.now()
        )
        if not changed:
            experiment.refresh_from_db()
            raise Conflict(f"experiment {experiment.name} is {experiment.state}", "state")
        never = Trial.objects.filter(experiment=experiment, state=WAITING)
        never.update(state=REFUSED, message="never submitted: the experiment was killed")
    for job in Job.objects.filter(pk__in=experiment.trials.exclude(job=None).values("job")).exclude(
        state__in=TERMINAL_STATES
    ):
        jobs.kill(job)
    experiment.refresh_from_db()
    return experiment

"""paddlectl's job commands: submit, get jobs/workers, wait, kill, delete job (logs: cmd_logs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from paddlecloud.contract import keeping, states
from paddlecloud.contract import spec as contract_spec
from paddlecloud.ctl.app import (
    OUTPUT,
    cli,
    complete_jobs,
    delete,
    get,
    note,
    parse_chunk_size,
    session_of,
    warn,
)
from paddlecloud.ctl.cmd_logs import follow_logs
from paddlecloud.ctl.output import BarProgress, age, dump, emit, human_bytes, jobs_table, workers_table
from paddlecloud.sdk import experiments, images, jobs, spec
from paddlecloud.sdk.errors import PaddleCloudError, UsageProblem, describe_end
from paddlecloud.sdk.files import is_remote
from paddlecloud.sdk.jobs import job_path, wait
from paddlecloud.sdk.session import Session
from paddlecloud.sdk.transfers import Summary


def _default_jobname(package: str) -> str:
    base = Path(package.rstrip("/")).name.lower()
    name = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)[:40].rstrip("-")
    return name or "paddle-cluster-job"


@cli.command(short_help="Submit a job to PaddlePaddle Cloud.")
@click.option("-jobname", "--jobname", help="The job's name: a-z, 0-9 and '-', at most 40 (default: the package's).")
@click.option("-cpu", "--cpu", default="1", show_default=True, help="CPU for each trainer: 2, 0.5 or 500m.")
@click.option("-gpu", "--gpu", type=int, default=0, show_default=True, help="GPUs for each trainer.")
@click.option("-memory", "--memory", default="1Gi", show_default=True, help="Memory for each trainer: 1Gi, 512Mi.")
@click.option("-parallelism", "--parallelism", default="1", show_default=True, metavar="N|MIN:MAX",
              help="Number of trainers; MIN:MAX (collective mode): elastic, it starts with as many as fit and grows.")
@click.option("-pservers", "--pservers", type=int, default=0, show_default=True,
              help="Number of parameter servers (0: collective mode).")
@click.option("-pscpu", "--pscpu", default="1", show_default=True, help="CPU for each parameter server.")
@click.option("-psmemory", "--psmemory", default="1Gi", show_default=True, help="Memory for each parameter server.")
@click.option("-entry", "--entry", required=True, help='Command that starts a trainer, e.g. "python train.py".')
@click.option("-passes", "--passes", type=int, default=1, show_default=True, help="Passes over the data.")
@click.option("-image", "--image", default="", help="Runtime image (default: the datacenter's).")
@click.option("-registry", "--registry", default="", help="Registry secret for a private image (see `registry`).")
@click.option("-datacenter", "--datacenter", default=None, help="Datacenter (default: the config's current one).")
@click.option("-env", "--env", multiple=True, metavar="NAME=VALUE", help="Environment variable; repeat for more.")
@click.option("-param", "--param", "params", multiple=True, metavar="NAME=VALUE",
              help="A hyperparameter the job reads with paddlecloud.params() (true/false, a number or text); "
              "repeat for more.")
@click.option("-after", "--after", "after", multiple=True, metavar="NAME[:ok|any|failed]",
              help="Start only once your job NAME ended so (ok: succeeded, the default; any; failed: did not "
              "succeed); repeat for more. It waits as WaitingForDependency, or fails DependencyNeverSatisfied.")
@click.option("-resume-from", "--resume-from", "resume_from", default=None, metavar="JOB[:STEP]",
              help="Start from a checkpoint of another run of yours (its latest without STEP): the job finds it "
              "as paddlecloud.checkpoint.latest(). Without it, a rerun of a failed job resumes from that run.")
@click.option("-no-resume", "--no-resume", "no_resume", is_flag=True,
              help="Start from nothing, even as a rerun of a failed job that left checkpoints.")
@click.option("-keep", "--keep", "keep", default=None, metavar="best=N,latest=M[,goal=maximize]",
              help="Once the job ended, remove its checkpoints other than the latest M and the best N by the metric "
              "each was saved with (keys left out: 1, 1, minimize).")
@click.option("-max-retries", "--max-retries", "max_retries", type=int, default=0, show_default=True,
              help="Restarts of a failed trainer before the job fails.")
@click.option("-max-restarts", "--max-restarts", "max_restarts", type=int, default=0, show_default=True,
              help="Times the whole job runs again from its latest checkpoint after a failure (the failed run "
              "is charged; the same failure with no new checkpoint 3 times in a row ends it, CrashLoop).")
@click.option("-pending-timeout", "--pending-timeout", "pending_timeout", type=int, default=None,
              help="Seconds the job may wait for resources before it fails.")
@click.option("-stall-timeout", "--stall-timeout", "stall_timeout", type=int, default=None,
              help="Seconds without a trainer's log line before the job is marked Stalled (default: the datacenter's).")
@click.option("-stall-action", "--stall-action", "stall_action", type=click.Choice(contract_spec.STALL_ACTIONS),
              default=None, help="What a stall does: warn (a warning and an event; the default) or fail the job.")
@click.option("-priority", "--priority", default=None, metavar="CLASS",
              help="Priority class: who starts first when the datacenter is full (`paddlectl get priorities` "
              "lists yours; default: normal).")
@click.option("-no-preempt", "--no-preempt", "no_preempt", is_flag=True, default=False,
              help="Never stop this job for a higher-priority one (where its priority class allows it).")
@click.option("-notify", "--notify", default=None, metavar="email,webhook=URL",
              help="Tell you when the job ends: email, webhook=URL, both (webhook last) or none "
              "(default: your profile's choice).")
@click.option("-topology", "--topology", hidden=True, help="PaddlePaddle v1 config (retired; ignored).")
@click.option("-chunk-size", "--chunk-size", "chunk_size", default=None, metavar="SIZE",
              help="Upload chunk size, a multiple of 64Ki (default: the portal's).")
@click.option("-wait", "--wait", "wait_end", is_flag=True, help="Wait until the job ends; exit 1 unless it succeeded.")
@click.option("-f", "--follow", is_flag=True, help="Follow the logs until the job ends; exit 1 unless it succeeded.")
@click.option("-dry-run", "--dry-run", "dry_run", is_flag=True,
              help="Only ask the portal whether it would accept the job (quota included); upload and create nothing.")
@click.option("-o", "--output", type=OUTPUT, default="table", help="Print the submitted job as json or yaml.")
@click.option("-build", "--build", "build", is_flag=True,
              help="Build -image in the cluster first (the package on -base-image, pushed with -registry); "
              "the job waits for it, then runs on it.")
@click.option("-base-image", "--base-image", "base_image", default="",
              help="With -build: the image to build on (default: the datacenter's).")
@click.option("-sweep", "--sweep", "sweep", default=None, metavar="FILE",
              help="Run an experiment: the trials of the sweep in FILE (YAML: name, params, search, max_trials, "
              "parallel, seed, metric), each a job made of these flags with its own params.")
@click.argument("package")
@click.pass_context
def submit(ctx: click.Context, /, package: str, **flags: Any) -> None:
    """Submit a job. PACKAGE is a local directory, uploaded (resumably) to the job's folder
    /pfs/<datacenter>/home/<user>/jobs/<jobname>/ first, or a /pfs/ directory already there.

    \b
    paddlectl submit -jobname fit -pservers 2 -parallelism 2 -cpu 1 -memory 1Gi \\
        -entry "python train.py" ./fit_a_line
    """
    if flags["topology"]:
        warn("-topology is a PaddlePaddle v1 option and is ignored; use -entry")
    sweep = experiments.read_sweep(flags["sweep"]) if flags["sweep"] else None
    if sweep is not None and flags["params"]:
        raise UsageProblem("-param: with -sweep the sweep's params decide each trial's")
    jobname = flags["jobname"] or (sweep or {}).get("name") or _default_jobname(package)
    if sweep is not None:
        sweep.setdefault("name", jobname)
    body = _submit_body(jobname, flags)
    spec.check(body)  # before the config is even read
    chunk = parse_chunk_size(flags["chunk_size"])
    _check_package(package)
    if flags["build"] and not (flags["image"] and flags["registry"]):
        raise UsageProblem("-build needs -image (where to push the build) and -registry (the secret to push with)")
    session = session_of(ctx)
    before_create = _build_requester(session, flags["base_image"]) if flags["build"] else None
    create = (lambda checked: experiments.create(session, sweep, checked)) if sweep is not None else None
    job, summary = jobs.submit(
        session, body, package, BarProgress(), chunk, dry_run=flags["dry_run"], before_create=before_create,
        create=create,
    )
    if sweep is not None and not flags["dry_run"]:
        _echo_experiment(job, flags["output"])
        return
    if flags["dry_run"]:
        _echo_dry_run(job, jobname, flags["output"])
        return
    _echo_submitted(job, summary, flags["output"])
    if flags["follow"]:
        follow_logs(ctx, job["uid"], None, None, True, None)
    elif flags["wait_end"]:
        wait_job(ctx, job["uid"])
    elif flags["output"] == "table":
        note(f"follow it with: paddlectl logs -f {job['name']}")


def _parallelism(text: str) -> dict[str, int]:
    """-parallelism N, or MIN:MAX for an elastic job: the spec's parallelism (and min_parallelism)."""
    least, colon, most = text.partition(":")
    try:
        sizes = {"parallelism": int(most if colon else least)}
        if colon:
            sizes["min_parallelism"] = int(least)
    except ValueError:
        raise UsageProblem(f"-parallelism: {text!r} is not a whole number or MIN:MAX (e.g. 4, or 2:4)") from None
    return sizes


def _submit_body(jobname: str, flags: dict[str, Any]) -> dict[str, Any]:
    """The job spec sent to the portal, from submit's flags."""
    body = {
        "jobname": jobname,
        "entry": flags["entry"],
        **_parallelism(flags["parallelism"]),
        "pservers": flags["pservers"],
        "cpu": flags["cpu"],
        "memory": flags["memory"],
        "gpu": flags["gpu"],
        "pscpu": flags["pscpu"],
        "psmemory": flags["psmemory"],
        "passes": flags["passes"],
        "image": flags["image"],
        "registry": flags["registry"],
        "env": spec.parse_env(flags["env"]),
        "params": spec.parse_params(flags["params"]),
        "max_retries": flags["max_retries"],
        "max_restarts": flags["max_restarts"],
        "pending_timeout": flags["pending_timeout"],
        "datacenter": flags["datacenter"],
        "priority": flags["priority"],
    }
    if flags["no_preempt"]:
        body["no_preempt"] = True
    body.update(_checkpoint_flags(flags))
    if flags["after"]:
        body["after"] = list(flags["after"])
    for name in ("stall_timeout", "stall_action"):
        if flags[name] is not None:
            body[name] = flags[name]
    if flags["notify"] is not None:
        try:
            body["notify"] = contract_spec.parse_notify(flags["notify"])
        except ValueError as exc:
            raise UsageProblem(f"-notify: {exc}") from None
    return body


def _checkpoint_flags(flags: dict[str, Any]) -> dict[str, Any]:
    """-resume-from, -no-resume and -keep as spec fields (only those given)."""
    fields: dict[str, Any] = {}
    if flags["resume_from"] and flags["no_resume"]:
        raise UsageProblem("-no-resume: not with -resume-from")
    if flags["resume_from"] is not None or flags["no_resume"]:
        fields["resume_from"] = "" if flags["no_resume"] else flags["resume_from"]
    if flags["keep"] is not None:
        try:
            fields["keep"] = keeping.parse_flag(flags["keep"])
        except ValueError as exc:
            raise UsageProblem(f"-keep: {exc}") from None
    return fields


def _build_requester(session: Session, base_image: str) -> Callable[[dict[str, Any]], None]:
    """`submit -build`: once the package is uploaded, request its image build; the job waits for it."""

    def request_build(spec: dict[str, Any]) -> None:
        build = images.request_build(
            session, spec["package"], spec["image"], spec["registry"], base_image, spec.get("datacenter")
        )
        spec["build"] = build["uid"]
        note(f"image build {build['uid']} of {spec['image']} queued; the job waits for it "
             f"(paddlectl image-logs -f {build['uid']})")

    return request_build


def _check_package(package: str) -> None:
    if not is_remote(package) and not Path(package).expanduser().is_dir():
        what = "is not a directory" if Path(package).expanduser().exists() else "does not exist"
        raise UsageProblem(f"PACKAGE: {package} {what} (give a local directory or a /pfs/ path)")


def _echo_experiment(experiment: dict[str, Any], output: str) -> None:
    if output in ("json", "yaml"):
        click.echo(dump(experiment, output))
        return
    trials = experiment.get("trials") or {}
    click.echo(f"experiment {experiment['name']} submitted: {trials.get('total', 0)} trials")
    note(f"watch it with: paddlectl get experiment {experiment['name']}")


def _echo_dry_run(answer: dict[str, Any], jobname: str, output: str) -> None:
    if output in ("json", "yaml"):
        click.echo(dump(answer, output))
        return
    asked = answer.get("requested") or {}
    click.echo(f"the portal would accept job {jobname} on {answer['job']['datacenter']} "
               f"({asked.get('cpu', 0):g} cores, {human_bytes(int(asked.get('memory', 0)))}B memory, "
               f"{asked.get('gpu', 0)} GPUs in all); nothing was uploaded or created")


def _echo_submitted(job: dict[str, Any], summary: Summary | None, output: str) -> None:
    if summary is not None:
        plural = "s" if summary.files != 1 else ""
        note(f"uploaded {summary.files} file{plural} ({human_bytes(summary.bytes)}B) to {job['spec'].get('package')}"
             + (f", {summary.chunks_reused} chunks already there" if summary.chunks_reused else ""))
    if output in ("json", "yaml"):
        click.echo(dump(job, output))
    else:
        click.echo(f"job {job['name']} submitted to {job['datacenter']} (uid {job['uid']}, {job['state']})")


@get.command("jobs", short_help="List your jobs (newest first).")
@click.option("-active", "--active", is_flag=True, help="Only jobs still queued, pending or running.")
@click.option("-state", "--state", type=click.Choice(states.JOB_STATES), help="Only jobs in this state.")
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default="table",
              help="wide: the table with each job's PARAMS.")
@click.pass_context
def get_jobs(ctx: click.Context, active: bool, state: str | None, output: str) -> None:
    """NAME, STATE, TRAINERS and PSERVERS (ready/total), AGE, PROGRESS, REASON, MESSAGE (-o wide: and PARAMS).

    TRAINERS counts running and finished trainers; PSERVERS running ones. MESSAGE says why (a failed
    job: the failing worker's exit and last error line), cut at 80 characters (-o json: whole)."""
    params: dict[str, Any] = {}
    if active:
        params["active"] = "1"
    if state:
        params["state"] = state
    items = list(session_of(ctx).paginate("/jobs", params))
    emit(items, output, lambda: jobs_table(items, wide=output == "wide"))


@get.command("workers", short_help="List the workers (trainers and pservers) of a job.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def get_workers(ctx: click.Context, job: str, output: str) -> None:
    """NAME, ROLE, STATE, START (how long ago), RESTARTS, EXIT CODE, CPU (cores), MEM, MESSAGE."""
    items = list(session_of(ctx).paginate(f"{job_path(job)}/workers"))
    emit(items, output, lambda: workers_table(items))


def wait_job(ctx: click.Context, job: str, timeout: float | None = None) -> None:
    def show(current: dict[str, Any]) -> None:
        if current["state"] not in states.TERMINAL_JOB_STATES:  # the end is told below
            note(f"job {current['name']}: {current['state']}")

    end = wait(session_of(ctx), job, timeout=timeout, notify=note, on_state=show)
    if end.get("state") != states.SUCCEEDED:
        raise PaddleCloudError(describe_end(end))
    note(describe_end(end))


@cli.command("wait", short_help="Wait until a job ends; exit 0 if it succeeded, 1 if not.")
@click.option("--timeout", type=float, default=None, help="Give up (exit 1) after this many seconds.")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def wait_command(ctx: click.Context, job: str, timeout: float | None) -> None:
    """Wait until JOB succeeds, fails or is killed, printing its state changes."""
    wait_job(ctx, job, timeout)


def kill_job(ctx: click.Context, job: str, remove: bool) -> None:
    session = session_of(ctx)
    if remove:
        session.delete(job_path(job), {"rm": "1"})
        click.echo(f"job {job} removed")
        return
    answer = session.delete(job_path(job))
    if answer.get("state") == "killed":
        click.echo(f"job {answer['name']} killed")
    else:
        click.echo(f"job {answer['name']} had already {answer.get('state')}; nothing to kill")


@cli.command(short_help="Stop the job (or `kill experiment NAME`). -rm will remove the job from history.")
@click.option("-rm", "--rm", "remove", is_flag=True, help="Also remove the job from the history.")
@click.argument("what", nargs=-1, required=True, metavar="JOB | experiment NAME", shell_complete=complete_jobs)
@click.pass_context
def kill(ctx: click.Context, what: tuple[str, ...], remove: bool) -> None:
    """Stop every worker of JOB; with -rm also forget the job (its files stay on the PFS).

    `kill experiment NAME` stops an experiment: no more trials, and every trial still waiting or running is killed."""
    if len(what) == 2 and what[0] == "experiment":
        if remove:
            raise UsageProblem("-rm: an experiment is killed, never removed")
        answer = experiments.kill(session_of(ctx), what[1])
        click.echo(f"experiment {answer['name']} killed")
        return
    if len(what) != 1:
        raise UsageProblem("kill takes one JOB, or `experiment NAME`")
    kill_job(ctx, what[0], remove)


@delete.command("job", short_help="Kill a job and remove it from the history (kill -rm).")
@click.option("-all", "--all", "every", is_flag=True, help="Every run of that name (e.g. killed and resubmitted).")
@click.argument("job", shell_complete=complete_jobs)
@click.pass_context
def delete_job(ctx: click.Context, job: str, every: bool) -> None:
    """Kill JOB (a name, or one run's uid) and remove it from the history. Where several runs have that
    name, says which there are and asks for the run's uid or --all, never picking one by itself."""
    session = session_of(ctx)
    runs = [j for j in session.paginate("/jobs", {}) if j.get("name") == job]
    if not every and len(runs) > 1:
        listed = ", ".join(f"{r['uid']} ({r['state']}, {age(r.get('created_at'))} ago)" for r in runs)
        raise PaddleCloudError(
            f"job {job} has {len(runs)} runs: {listed}; delete one with `paddlectl delete job UID`, "
            f"or all of them with `paddlectl delete job --all {job}`"
        )
    if not every or not runs:
        kill_job(ctx, job, True)  # one run, a uid, or nothing: the portal answers (404 names it)
        return
    for run in runs:
        session.delete(job_path(run["uid"]), {"rm": "1"})
        click.echo(f"job {job} (uid {run['uid']}) removed")

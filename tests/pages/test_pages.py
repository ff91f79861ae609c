"""Dashboard pages with the personas: anonymous is sent to log in, Bob never sees Alice's things, Carol sees all."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from datacenters.models import Datacenter
from jobs.files.logfiles import read_chunk
from jobs.models import Job, JobState, Role, Worker
from registry.models import RegistrySecret

HTML = "<script>alert(1)</script><b>bold</b>"


def page_client(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def make_job(dc: Datacenter, owner: User, name: str = "fit", uid: str = "fit-ab12c", **fields: object) -> Job:
    fields.setdefault("state", JobState.SUCCEEDED)
    fields.setdefault("released", True)
    spec = {"parallelism": 2, "pservers": 1, "entry": "python train.py", "cpu": "1", "memory": "1Gi",
            "pscpu": "1", "psmemory": "1Gi", "passes": 1, "env": {"WANDB_TOKEN": "sekret-value"}}  # fmt: skip
    job = Job.objects.create(owner=owner, datacenter=dc, name=name, uid=uid, spec=spec, **fields)
    Worker.objects.create(job=job, role=Role.TRAINER, index=0, state="succeeded", host="node-1")
    return job


def write_log(dc: Datacenter, job: Job, worker: str, text: str) -> None:
    role, _, index = worker.partition("-")
    folder = Path(dc.storage_root, "home", job.owner.username, "jobs", job.name, "output", job.uid, f"{role}_{index}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "log.txt").write_text(text)


@pytest.fixture
def world(alice: User, bob: User, carol: User, local_dc: Datacenter) -> Job:
    return make_job(local_dc, alice)


PAGES = ["/jobs/", "/jobs/new", "/files/", "/registries/", "/quota/", "/profile/"]
ALICE_PAGES = ["/jobs/fit-ab12c/", "/jobs/fit/", "/jobs/fit-ab12c/logs", "/jobs/fit-ab12c/live",
               "/jobs/fit-ab12c/logs/trainer-0/download"]  # fmt: skip


@pytest.mark.parametrize("url", PAGES + ALICE_PAGES)
def test_anonymous_is_sent_to_log_in(world: Job, url: str) -> None:
    response = page_client(None).get(url)
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.parametrize("url", PAGES)
def test_every_page_renders_for_a_user(world: Job, alice: User, url: str) -> None:
    assert page_client(alice).get(url).status_code == 200


@pytest.mark.parametrize("url", ALICE_PAGES)
def test_bob_gets_404_for_alices_job_pages(world: Job, local_dc: Datacenter, alice: User, bob: User, url: str) -> None:
    write_log(local_dc, world, "trainer-0", "hello\n")
    assert page_client(alice).get(url).status_code == 200
    assert page_client(bob).get(url).status_code == 404


def test_bob_gets_404_for_alices_files(world: Job, bob: User) -> None:
    assert page_client(bob).get("/files/", {"path": "/pfs/local/home/alice"}).status_code == 404
    assert page_client(bob).get("/files/", {"path": "/pfs/local/home/bob"}).status_code == 200


def test_staff_sees_everyones_jobs_and_can_filter_by_owner(
    world: Job, local_dc: Datacenter, bob: User, carol: User
) -> None:
    make_job(local_dc, bob, name="bobs", uid="bobs-zz999")
    listing = page_client(carol).get("/jobs/").content.decode()
    assert "fit-ab12c" in listing and "bobs-zz999" in listing
    only_bob = page_client(carol).get("/jobs/", {"owner": "bob"}).content.decode()
    assert "bobs-zz999" in only_bob and "fit-ab12c" not in only_bob
    assert page_client(carol).get("/jobs/fit-ab12c/").status_code == 200
    mine = page_client(bob).get("/jobs/").content.decode()
    assert "bobs-zz999" in mine and "fit-ab12c" not in mine


def test_the_list_filters_and_refuses_a_bad_state_with_a_message(world: Job, local_dc: Datacenter, alice: User) -> None:
    make_job(local_dc, alice, name="run", uid="run-aaaaa", state=JobState.RUNNING, released=False)
    client = page_client(alice)
    running = client.get("/jobs/", {"state": "running"}).content.decode()
    assert "run-aaaaa" in running and "fit-ab12c" not in running
    assert 'hx-trigger="every 2s"' in running  # an active job listed: the table refreshes itself
    done = client.get("/jobs/", {"state": "succeeded", "q": "fi"}).content.decode()
    assert "fit-ab12c" in done and "run-aaaaa" not in done and "every 2s" not in done
    assert 'hx-trigger="every 5s"' in done  # none active: slowly, so a job submitted elsewhere shows up
    bad = client.get("/jobs/", {"state": "bogus"})
    assert bad.status_code == 400 and "bogus is not one of the available choices" in bad.content.decode()
    partial = client.get("/jobs/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<div id="job-table"') and "<html" not in partial


def test_a_name_shows_the_newest_run_and_links_the_others(world: Job, local_dc: Datacenter, alice: User) -> None:
    newer = make_job(local_dc, alice, uid="fit-new00", state=JobState.RUNNING, released=False)
    page = page_client(alice).get("/jobs/fit/").content.decode()
    assert 'data-uid="fit-new00"' in page and 'href="/jobs/fit-ab12c/"' in page
    assert 'data-testid="kill"' in page and 'data-testid="delete"' not in page
    assert newer.uid in page


def test_the_job_page_shows_env_names_never_values(world: Job, alice: User) -> None:
    page = page_client(alice).get("/jobs/fit-ab12c/").content.decode()
    assert "WANDB_TOKEN" in page and "sekret-value" not in page
    assert 'data-testid="kill"' not in page and 'data-testid="delete"' in page  # finished: delete, no kill
    assert "/pfs/local/home/alice/jobs/fit/output/fit-ab12c" in page
    assert "jobs/_metrics.html" not in page  # the include rendered (h13's partial goes there)


def test_kill_and_delete(world: Job, local_dc: Datacenter, alice: User, bob: User) -> None:
    running = make_job(local_dc, alice, name="run", uid="run-aaaaa", state=JobState.RUNNING, released=False)
    assert page_client(bob).post("/jobs/run-aaaaa/kill").status_code == 404
    assert page_client(alice).post("/jobs/run-aaaaa/kill").status_code == 302
    running.refresh_from_db()
    assert running.state == JobState.KILLED
    live = page_client(alice).get("/jobs/run-aaaaa/live").content.decode()
    assert 'data-testid="kill"' not in live and "every 1s" not in live
    assert page_client(bob).post("/jobs/fit-ab12c/delete").status_code == 404
    assert page_client(alice).post("/jobs/fit-ab12c/delete").status_code == 302
    assert not Job.objects.filter(uid="fit-ab12c").exists()


def test_a_log_that_prints_html_is_shown_and_downloaded_as_text(world: Job, local_dc: Datacenter, alice: User) -> None:
    write_log(local_dc, world, "trainer-0", f"{HTML}\n")
    download = page_client(alice).get("/jobs/fit-ab12c/logs/trainer-0/download")
    assert download["Content-Type"].startswith("text/plain") and "attachment" in download["Content-Disposition"]
    assert b"".join(download.streaming_content) == f"{HTML}\n".encode()  # type: ignore[attr-defined]
    assert page_client(alice).get("/jobs/fit-ab12c/logs/pserver-7/download").status_code == 404


def test_a_log_that_is_a_symlink_is_not_downloaded(
    world: Job, local_dc: Datacenter, alice: User, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do-not-show")
    write_log(local_dc, world, "trainer-0", "x\n")
    log = Path(local_dc.storage_root, "home/alice/jobs/fit/output/fit-ab12c/trainer_0/log.txt")
    log.unlink()
    log.symlink_to(secret)
    response = page_client(alice).get("/jobs/fit-ab12c/logs/trainer-0/download")
    assert response.status_code == 403 and b"do-not-show" not in response.content


def test_a_progress_update_is_passed_on_before_its_newline(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    log.write_bytes(b"epoch 1\n10%\r20%\r30")
    with log.open("rb") as handle:
        chunk = read_chunk(handle, 0, final=False)
    assert chunk.text == "epoch 1\n10%\r20%\r" and chunk.cursor == str(len(b"epoch 1\n10%\r20%\r"))


def test_a_file_named_with_html_is_listed_as_text(world: Job, local_dc: Datacenter, alice: User) -> None:
    home = Path(local_dc.storage_root, "home", "alice")
    home.mkdir(parents=True, exist_ok=True)
    (home / "<img src=x onerror=alert(1)>.txt").write_text("x")
    page = page_client(alice).get("/files/", {"path": "/pfs/local/home/alice"}).content.decode()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;.txt" in page
    assert "Content-Security-Policy" in page_client(alice).get("/files/").headers


def test_mkdir_and_delete_from_the_file_browser(world: Job, local_dc: Datacenter, alice: User, bob: User) -> None:
    client = page_client(alice)
    client.get("/files/")  # makes the home
    client.post("/files/mkdir", {"parent": "/pfs/local/home/alice", "name": "data"})
    assert Path(local_dc.storage_root, "home/alice/data").is_dir()
    page_client(bob).post("/files/rm", {"path": "/pfs/local/home/alice/data"})
    assert Path(local_dc.storage_root, "home/alice/data").is_dir()
    client.post("/files/rm", {"path": "/pfs/local/home/alice/data"})
    assert not Path(local_dc.storage_root, "home/alice/data").exists()


def test_submit_form_errors_are_the_apis_and_create_nothing(world: Job, alice: User) -> None:
    body = {"jobname": "Bad_Name", "entry": "python train.py", "cpu": "lots", "datacenter": "local"}
    api = APIClient()
    api.force_authenticate(alice)
    api_errors = api.post("/api/v1/jobs", body, format="json").json()
    before = Job.objects.count()
    response = page_client(alice).post("/jobs/new", body)
    assert response.status_code == 400 and Job.objects.count() == before
    form = response.context["form"]
    expected: dict[str, list[str]] = {}
    for error in api_errors["errors"]:
        expected.setdefault(error["field"], []).append(error["message"])
    for field in ("jobname", "cpu"):
        assert form.errors[field] == expected[field]


def test_a_submit_with_a_missing_package_names_the_package(world: Job, alice: User) -> None:
    body = {"jobname": "fresh", "entry": "python train.py", "datacenter": "local"}
    response = page_client(alice).post("/jobs/new", body)
    assert response.status_code == 400 and "does not exist" in " ".join(response.context["form"].errors["package"])
    assert not Job.objects.filter(name="fresh").exists()


def test_submit_creates_the_job_from_the_form(world: Job, local_dc: Datacenter, alice: User) -> None:
    Path(local_dc.storage_root, "home/alice/jobs/fresh").mkdir(parents=True)
    body = {"jobname": "fresh", "entry": "python train.py", "datacenter": "local", "env": "A=1\nB=two"}
    response = page_client(alice).post("/jobs/new", body)
    job = Job.objects.get(name="fresh")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.uid}/"
    assert job.spec["env"] == {"A": "1", "B": "two"}


def test_clone_prefills_the_form_and_gives_env_values_only_to_the_owner(world: Job, alice: User, carol: User) -> None:
    own = page_client(alice).get("/jobs/new", {"clone": "fit-ab12c"}).content.decode()
    assert 'value="fit"' in own and "WANDB_TOKEN=sekret-value" in own
    staff = page_client(carol).get("/jobs/new", {"clone": "fit-ab12c"}).content.decode()
    assert "WANDB_TOKEN=" in staff and "sekret-value" not in staff


def test_registries_list_add_delete_never_show_the_password(world: Job, alice: User, bob: User) -> None:
    client = page_client(alice)
    body = {"name": "hub", "server": "registry.example.com", "username": "al", "password": "pw-secret-1"}
    assert client.post("/registries/", body).status_code == 302
    page = client.get("/registries/").content.decode()
    assert "registry.example.com" in page and "pw-secret-1" not in page
    again = client.post("/registries/", body)
    assert again.status_code == 400 and "already have a registry secret" in again.content.decode()
    assert page_client(bob).post("/registries/hub/delete").status_code == 404
    assert client.post("/registries/hub/delete").status_code == 302
    assert not RegistrySecret.objects.filter(name="hub").exists()


def test_profile_config_names_the_real_datacenters(world: Job, alice: User) -> None:
    page = page_client(alice).get("/profile/").content.decode()
    assert "- name: local" in page and "current-datacenter: local" in page


def test_the_admin_links_job_rows_to_the_job_page(world: Job, carol: User) -> None:
    page = page_client(carol).get("/admin/jobs/job/").content.decode()
    assert 'href="/jobs/fit-ab12c/"' in page


def test_the_job_page_without_javascript_tables_the_last_metric_points_of_a_long_file(
    world: Job, local_dc: Datacenter, alice: User
) -> None:
    folder = Path(local_dc.storage_root, "home", "alice", "jobs", "fit", "output", world.uid, "trainer_0")
    folder.mkdir(parents=True)
    point = '{{"step": {}, "time": 0, "values": {{"loss": {}, "lr": 0.1}}}}\n'
    lines = [point.format(step, 1 / (step + 1)) for step in range(3000)]
    (folder / "metrics.jsonl").write_text("".join(lines))  # more than the 64 KiB read from its end
    text = page_client(alice).get(f"/jobs/{world.uid}/").content.decode()
    table = text.split('data-testid="metrics-table" data-worker="trainer-0">', 1)[1].split("</table>", 1)[0]
    assert '<th scope="col">loss</th><th scope="col">lr</th>' in table
    steps = [cell.split("</td>", 1)[0] for cell in table.split("<tr><td>")[1:]]
    assert steps == [str(step) for step in range(2990, 3000)]
    assert "<td>0.000333333</td><td>0.1</td>" in table


def test_the_submit_form_takes_after_and_resume_from_in_paddlectls_words(
    world: Job, local_dc: Datacenter, alice: User
) -> None:
    Path(local_dc.storage_root, "home/alice/jobs/next").mkdir(parents=True)
    client = page_client(alice)
    body = {"jobname": "next", "entry": "python train.py", "datacenter": "local"}
    twice = client.post("/jobs/new", {**body, "after": "fit:any, fit"})
    assert twice.status_code == 400 and "names a job twice" in " ".join(twice.context["form"].errors["after"])
    bad = client.post("/jobs/new", {**body, "after": "fit:any", "resume_from": "Not A Job!"})
    assert bad.status_code == 400 and "JOB or JOB:STEP" in " ".join(bad.context["form"].errors["resume_from"])
    assert not Job.objects.filter(name="next").exists()
    created = client.post("/jobs/new", {**body, "after": "fit:any"})
    job = Job.objects.get(name="next")
    assert created.status_code == 302 and job.spec["after"] == ["fit:any"]
    clone = client.get("/jobs/new", {"clone": job.uid}).content.decode()
    assert 'value="fit:any"' in clone


def test_an_empty_dashboard_offers_submit_and_the_first_job_steps(alice: User, local_dc: Datacenter) -> None:
    page = page_client(alice).get("/").content.decode()
    assert 'data-testid="first-job-submit"' in page and 'href="/jobs/new"' in page
    assert 'href="/files/"' in page and 'href="/profile/"' in page
    make_job(local_dc, alice)
    assert 'data-testid="first-job"' not in page_client(alice).get("/").content.decode()

"""Hundreds of bad inputs on every API operation: a bounded JSON 4xx naming the field, nothing created.

Each case says which operation it attacks (the table must cover every operation the OpenAPI generator
lists), the status it must get, and the field, parameter or rule the answer must name. After each one
the database rows and the files under the storage root are exactly as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import pytest

from tests.adversarial.conftest import SWEEP, Operation, World, error_body, names, operations, snapshot
from tests.storage.conftest import checksum

HOME = "/pfs/local/home/alice"
JOB = {"jobname": "bad", "entry": "python train.py", "package": f"{HOME}/jobs/fit"}
UPLOAD = {"path": f"{HOME}/u.bin", "size": 10, "checksum": checksum(b"0123456789")}
REGISTRY = {"name": "quay", "server": "quay.example.com", "username": "robot", "password": "pw"}
LOGIN = {"username": "alice", "password": "x"}
TOO_LARGE = 3 * 1024 * 1024  # over Django's 2.5 MB DATA_UPLOAD_MAX_MEMORY_SIZE, the portal's body limit
DEEP = 100_000  # far deeper than any real spec; Python's json recursion limit is ~1000


@dataclass(frozen=True)
class Case:
    op: Operation
    label: str
    status: int | tuple[int, ...]
    name: str | tuple[str, ...]  # what the answer must name (any of these): the field, parameter or rule
    url: str = ""  # default: the op's path; {upload} is alice's open upload's id
    body: Any = None  # sent as JSON
    raw: bytes | str | None = None  # sent as is, with content_type
    content_type: str = "application/json"
    persona: str = "alice"
    headers: dict[str, Any] = field(default_factory=dict)  # WSGI environ extras (HTTP_*)
    field: str | None = None  # when set, errors[] must hold this exact field
    slow: bool = False  # a pathological value: run with a hang bound

    @property
    def id(self) -> str:
        return f"{self.op[0]} {self.op[1]} {self.label}"


def C(
    method: str, path: str, label: str, status: int | tuple[int, ...], name: str | tuple[str, ...], **kw: Any
) -> Case:
    return Case((method, path), label, status, name, **kw)


def field_case(op: Operation, label: str, body: Any, fname: str, status: int = 400, **kw: Any) -> Case:
    return Case(op, label, status, fname, body=body, field=fname, **kw)


CASES: list[Case] = []
# Names the table loops below share (module level), with their widest types.
raw: bytes | str
status: int | tuple[int, ...]
word: str | tuple[str, ...]

# --- quantities in the job spec and in the operators' quota PUT ---------------------------------
SUBMIT = ("POST", "/api/v1/jobs")
QUOTA_PUT = ("PUT", "/api/v1/quota/{datacenter}/{username}")
BAD_QUANTITIES = {
    "NaN": False,
    "sNaN": False,
    "Infinity": False,
    "-Infinity": False,
    "-1": False,
    "0x10": False,
    "1e999999999": True,
    "1e999999": True,
    "1e-999999999": True,
    "9" * 10000: False,
}
for quantity_field in ("cpu", "memory", "pscpu", "psmemory"):
    for value, slow in BAD_QUANTITIES.items():
        CASES.append(
            field_case(
                SUBMIT, f"{quantity_field}={value[:12]}", {**JOB, quantity_field: value}, quantity_field, slow=slow
            )
        )
for quantity_field in ("cpu", "memory", "storage"):
    for value, slow in BAD_QUANTITIES.items():
        if value == "-1":
            continue  # tests/portal/test_bad_input.py has negatives
        CASES.append(
            field_case(
                QUOTA_PUT,
                f"{quantity_field}={value[:12]}",
                {quantity_field: value},
                quantity_field,
                url="/api/v1/quota/local/alice",
                persona="carol",
                slow=slow,
            )
        )
for int_field in ("gpu", "jobs", "storage_files"):
    for not_int in (10**30, 1.5, "NaN", [1]):
        CASES.append(
            field_case(
                QUOTA_PUT,
                f"{int_field}={str(not_int)[:12]}",
                {int_field: not_int},
                int_field,
                url="/api/v1/quota/local/alice",
                persona="carol",
            )
        )

# --- the job spec: wrong types, over-long strings, unknown fields, env names, packages ---------
for label, body, fname in [
    ("jobname is a number", {**JOB, "jobname": 123}, "jobname"),
    ("jobname 41 chars", {**JOB, "jobname": "a" * 41}, "jobname"),
    ("jobname 100k chars", {**JOB, "jobname": "a" * 100_000}, "jobname"),
    ("jobname with NUL", {**JOB, "jobname": "a\x00b"}, "jobname"),
    ("jobname is null", {**JOB, "jobname": None}, "jobname"),
    ("entry missing", {k: v for k, v in JOB.items() if k != "entry"}, "entry"),
    ("entry 1 MB", {**JOB, "entry": "x" * 1_000_000}, "entry"),
    ("entry with NUL", {**JOB, "entry": "python\x00x"}, "entry"),
    ("entry is a list", {**JOB, "entry": ["python", "t.py"]}, "entry"),
    ("parallelism is text", {**JOB, "parallelism": "two"}, "parallelism"),
    ("parallelism 0", {**JOB, "parallelism": 0}, "parallelism"),
    ("parallelism 10^30", {**JOB, "parallelism": 10**30}, "parallelism"),
    ("pservers -1", {**JOB, "pservers": -1}, "pservers"),
    ("gpu 1e6", {**JOB, "gpu": 1_000_000}, "gpu"),
    ("gpu is a dict", {**JOB, "gpu": {"n": 1}}, "gpu"),
    ("passes 0", {**JOB, "passes": 0}, "passes"),
    ("max_retries 11", {**JOB, "max_retries": 11}, "max_retries"),
    ("min_parallelism 0", {**JOB, "min_parallelism": 0}, "min_parallelism"),
    ("min_parallelism over parallelism", {**JOB, "parallelism": 2, "min_parallelism": 3}, "min_parallelism"),
    ("min_parallelism in PS mode", {**JOB, "parallelism": 2, "pservers": 1, "min_parallelism": 1}, "min_parallelism"),
    ("min_parallelism is text", {**JOB, "min_parallelism": "one"}, "min_parallelism"),
    ("pending_timeout 0", {**JOB, "pending_timeout": 0}, "pending_timeout"),
    ("stall_timeout 9", {**JOB, "stall_timeout": 9}, "stall_timeout"),
    ("stall_action panic", {**JOB, "stall_action": "panic"}, "stall_action"),
    ("image 301 chars", {**JOB, "image": "i" * 301}, "image"),
    ("registry unknown", {**JOB, "registry": "nope"}, "registry"),
    ("datacenter unknown", {**JOB, "datacenter": "mars"}, "datacenter"),
    ("datacenter 10k chars", {**JOB, "datacenter": "m" * 10_000}, "datacenter"),
    ("unknown field gpus", {**JOB, "gpus": 1}, "gpus"),
    ("env is a list", {**JOB, "env": ["A=1"]}, "env"),
    ("env value is a dict", {**JOB, "env": {"A": {"b": 1}}}, "env"),
    ("env value 1 MB", {**JOB, "env": {"A": "v" * 1_000_000}}, "env"),
    ("env name with =", {**JOB, "env": {"A=B": "1"}}, "env"),
    ("env name empty", {**JOB, "env": {"": "1"}}, "env"),
    ("env PADDLE_TRAINER_ID", {**JOB, "env": {"PADDLE_TRAINER_ID": "3"}}, "env"),
    ("package is a number", {**JOB, "package": 5}, "package"),
    ("package 5000 chars", {**JOB, "package": HOME + "/" + "p" * 5000}, "package"),
    ("package missing folder", {**JOB, "package": f"{HOME}/nope"}, "package"),
    ("package is a file", {**JOB, "package": f"{HOME}/data.txt"}, "package"),
    ("package in bob's home", {**JOB, "package": "/pfs/local/home/bob"}, "package"),
    ("package with ..", {**JOB, "package": f"{HOME}/../bob"}, "package"),
    ("package with NUL", {**JOB, "package": f"{HOME}/a\x00b"}, "package"),
    ("package relative", {**JOB, "package": "jobs/fit"}, "package"),
]:
    CASES.append(field_case(SUBMIT, label, body, fname))
# JSON numbers that Python reads as float('inf') and a 10^400-digit integer: still a named 400.
for label, literal in [("1e400", "1e400"), ("-1e400", "-1e400"), ("10^400", "1" + "0" * 400)]:
    for int_field in ("parallelism", "gpu", "passes"):
        CASES.append(
            C(
                *SUBMIT,
                f"{int_field} {label}",
                400,
                int_field,
                field=int_field,
                raw=json.dumps(JOB)[:-1] + f', "{int_field}": {literal}}}',
            )
        )
for env_name in ("LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "LD_BIND_NOW", "PYTHONSTARTUP", "PYTHONHOME"):
    CASES.append(field_case(SUBMIT, f"env {env_name}", {**JOB, "env": {env_name: "/tmp/x"}}, "env"))
    CASES.append(Case(SUBMIT, f"env {env_name} names it", 400, env_name, body={**JOB, "env": {env_name: "/tmp/x"}}))

# --- paths: the PFS root and its datacenters are not places; bad text; other homes -------------
BAD_PATHS = {
    "/pfs": ("path", 400),
    "/pfs/": ("path", 400),
    "/pfs/local": ("path", 400),
    "/pfs/local/": ("path", 400),
    f"{HOME}/../bob": ("path", 400),
    f"{HOME}/a\x00b": ("path", 400),
    "pfs/local/home/alice": ("path", 400),
    "/pfs/local/home/bob/secret": ("home", 403),
}
for bad_path, (word, code) in BAD_PATHS.items():
    for path in ("ls", "stat", "download"):
        CASES.append(
            C(
                "GET",
                f"/api/v1/files/{path}",
                f"path={bad_path!r}",
                code,
                word,
                url=f"/api/v1/files/{path}?path={quote(bad_path)}",
            )
        )
    CASES.append(C("POST", "/api/v1/files/mkdir", f"path={bad_path!r}", code, word, body={"path": bad_path}))
    CASES.append(C("POST", "/api/v1/files/rm", f"path={bad_path!r}", code, word, body={"path": bad_path}))
    CASES.append(
        C("POST", "/api/v1/files/uploads", f"path={bad_path!r}", code, word, body={**UPLOAD, "path": bad_path})
    )
    if code == 400:
        CASES.append(
            C(*SUBMIT, f"package={bad_path!r}", 400, "package", body={**JOB, "package": bad_path}, field="package")
        )
        CASES.append(
            C(
                "GET",
                "/api/v1/files/uploads",
                f"path={bad_path!r}",
                400,
                "path",
                url=f"/api/v1/files/uploads?path={quote(bad_path)}",
            )
        )
for path in ("ls", "stat", "download"):
    # Invalid UTF-8 (%ff) and a lone surrogate: not a name any filesystem entry has; say so, not "no such file".
    CASES.append(
        C(
            "GET",
            f"/api/v1/files/{path}",
            "path invalid UTF-8",
            400,
            "path",
            url=f"/api/v1/files/{path}?path={quote(HOME)}/%ff",
        )
    )
    CASES.append(C("GET", f"/api/v1/files/{path}", "path missing", 400, "path", url=f"/api/v1/files/{path}"))
    CASES.append(
        C(
            "GET",
            f"/api/v1/files/{path}",
            "path 5000 bytes",
            400,
            "path",
            url=f"/api/v1/files/{path}?path={HOME}/{'n' * 5000}",
        )
    )
CASES.append(
    C(
        "POST",
        "/api/v1/files/mkdir",
        "path lone surrogate",
        400,
        "path",
        raw='{"path": "/pfs/local/home/alice/\\udcff"}',
    )
)
CASES.append(
    C(
        "POST",
        "/api/v1/files/mkdir",
        "body invalid UTF-8",
        400,
        ("utf-8", "json", "unicode"),
        raw=b'{"path": "/pfs/local/home/alice/\xff"}',
    )
)
CASES.append(
    C(
        "POST",
        "/api/v1/files/mkdir",
        "unknown field parent",
        400,
        "parent",
        body={"path": f"{HOME}/d", "parent": True},
        field="parent",
    )
)
CASES.append(
    C(
        "POST",
        "/api/v1/files/mkdir",
        "parents is text",
        400,
        "parents",
        body={"path": f"{HOME}/d", "parents": "maybe"},
        field="parents",
    )
)
CASES.append(
    C(
        "POST",
        "/api/v1/files/rm",
        "unknown field force",
        400,
        "force",
        body={"path": f"{HOME}/data.txt", "force": True},
        field="force",
    )
)
CASES.append(
    C(
        "POST",
        "/api/v1/files/rm",
        "recursive is a list",
        400,
        "recursive",
        body={"path": f"{HOME}/out", "recursive": [1]},
        field="recursive",
    )
)
CASES.append(C("POST", "/api/v1/files/rm", "home itself", (400, 403), "home", body={"path": HOME, "recursive": True}))

# --- uploads --------------------------------------------------------------------------------
UPLOADS = ("POST", "/api/v1/files/uploads")
for label, body, fname in [
    ("size -1", {**UPLOAD, "size": -1}, "size"),
    ("size 2^63", {**UPLOAD, "size": 2**63}, "size"),
    ("size is text", {**UPLOAD, "size": "ten"}, "size"),
    ("size 1e999", {**UPLOAD, "size": "1e999"}, "size"),
    ("checksum md5", {**UPLOAD, "checksum": "md5:00"}, "checksum"),
    ("checksum 1 MB", {**UPLOAD, "checksum": "x" * 1_000_000}, "checksum"),
    ("chunk_size 100", {**UPLOAD, "chunk_size": 100}, "chunk_size"),
    ("chunk_size 0", {**UPLOAD, "chunk_size": 0}, "chunk_size"),
    ("chunk_size 2^40", {**UPLOAD, "chunk_size": 2**40}, "chunk_size"),
    ("unknown field sha", {**UPLOAD, "sha": "x"}, "sha"),
    ("path missing", {k: v for k, v in UPLOAD.items() if k != "path"}, "path"),
]:
    CASES.append(field_case(UPLOADS, label, body, fname))
UPLOAD_LIST = ("GET", "/api/v1/files/uploads")
CASES.append(C(*UPLOAD_LIST, "state unknown", 400, "state", url="/api/v1/files/uploads?state=lost", field="state"))
CASES.append(C(*UPLOAD_LIST, "unknown parameter", 400, "sort", url="/api/v1/files/uploads?sort=name"))
ONE_UPLOAD = "/api/v1/files/uploads/{upload_id}"
for verify in ("maybe", "2", "yes please", "x" * 10_000):
    CASES.append(
        C(
            "GET",
            ONE_UPLOAD,
            f"verify={verify[:10]}",
            400,
            "verify",
            url=f"/api/v1/files/uploads/{{upload}}?verify={verify}",
        )
    )
for label, upload_id in [
    ("not a uuid", "nope"),
    ("unknown uuid", "00000000-0000-0000-0000-000000000000"),
    ("10k chars", "u" * 10_000),
]:
    CASES.append(C("GET", ONE_UPLOAD, f"id {label}", 404, "upload", url=f"/api/v1/files/uploads/{upload_id}"))
    CASES.append(C("DELETE", ONE_UPLOAD, f"id {label}", 404, "upload", url=f"/api/v1/files/uploads/{upload_id}"))
    CASES.append(
        C(
            "POST",
            ONE_UPLOAD + "/complete",
            f"id {label}",
            404,
            "upload",
            url=f"/api/v1/files/uploads/{upload_id}/complete",
        )
    )
CHUNKS = ("PUT", "/api/v1/files/uploads/{upload_id}/chunks/{index}")
GOOD_CHUNK = {"HTTP_X_CHUNK_CHECKSUM": checksum(b"x" * 65536)}
CHUNK_CASES: list[tuple[str, str, dict[str, str], bytes, int | tuple[int, ...], str]] = [
    ("negative index", "/api/v1/files/uploads/{upload}/chunks/-1", GOOD_CHUNK, b"x" * 65536, (400, 404), "index"),
    ("index past the end", "/api/v1/files/uploads/{upload}/chunks/2", GOOD_CHUNK, b"x" * 65536, (400, 404), "index"),
    ("index 10^30", "/api/v1/files/uploads/{upload}/chunks/" + "9" * 30, GOOD_CHUNK, b"x", (400, 404), "index"),
    ("index not a number", "/api/v1/files/uploads/{upload}/chunks/one", GOOD_CHUNK, b"x", (400, 404), "index"),
    ("no checksum header", "/api/v1/files/uploads/{upload}/chunks/0", {}, b"x" * 65536, 400, "X-Chunk-Checksum"),
    (
        "checksum header md5",
        "/api/v1/files/uploads/{upload}/chunks/0",
        {"HTTP_X_CHUNK_CHECKSUM": "md5:0"},
        b"x" * 65536,
        400,
        "X-Chunk-Checksum",
    ),
    ("short chunk", "/api/v1/files/uploads/{upload}/chunks/0", GOOD_CHUNK, b"x" * 100, 400, "length"),
]
for label, url, headers, raw, status, word in CHUNK_CASES:
    CASES.append(
        C(*CHUNKS, label, status, word, url=url, raw=raw, content_type="application/octet-stream", headers=headers)
    )

# --- lists: one rule for page, page_size and cursor on every list -------------------------------
LISTS = {
    ("GET", "/api/v1/jobs"): "/api/v1/jobs?",
    ("GET", "/api/v1/jobs/"): "/api/v1/jobs/?",
    ("GET", "/api/v1/datacenters"): "/api/v1/datacenters?",
    ("GET", "/api/v1/registry/"): "/api/v1/registry/?",
    ("GET", "/api/v1/jobs/{name}/workers"): "/api/v1/jobs/fit/workers?",
    ("GET", "/api/v1/jobs/{name}/events"): "/api/v1/jobs/fit/events?",
    ("GET", "/api/v1/files/ls"): f"/api/v1/files/ls?path={HOME}&",
    ("GET", "/api/v1/files/uploads"): "/api/v1/files/uploads?",
}
for op, prefix in LISTS.items():
    for parameter, value in [
        ("page", "0"),
        ("page", "-1"),
        ("page", "abc"),
        ("page", "9" * 30),
        ("page_size", "0"),
        ("page_size", "-1"),
        ("page_size", "1000000000"),
        ("page_size", "abc"),
    ]:
        # A page past the end may be a 404 (it names the page); a page number no list reaches is a 400.
        status = (400, 404) if value == "9" * 30 else 400
        CASES.append(Case(op, f"{parameter}={value[:10]}", status, parameter, url=f"{prefix}{parameter}={value}"))
# --- where a job starts from: after (dependencies) and resume_from (a checkpoint) --------------------
STARTS_FROM: list[tuple[str, dict[str, Any], str, int]] = [
    ("after a string", {"after": "fit"}, "after", 400),
    ("after condition unknown", {"after": ["fit:maybe"]}, "after", 400),
    ("after 17 jobs", {"after": [f"j{i}" for i in range(17)]}, "after", 400),
    ("after an unknown job", {"after": ["nope"]}, "after", 400),
    ("after a job twice", {"after": ["fit", "fit:any"]}, "after", 400),
    ("after 10k chars", {"after": ["a" * 10_000]}, "after", 400),
    ("resume_from a list", {"resume_from": ["fit"]}, "resume_from", 400),
    ("resume_from bad shape", {"resume_from": "fit:step-3"}, "resume_from", 400),
    ("resume_from 10k chars", {"resume_from": "f" * 10_000}, "resume_from", 400),
    ("keep a list", {"keep": [1, 1]}, "keep", 400),
    ("keep a huge count", {"keep": {"best": 10**30}}, "keep.best", 400),
    ("keep 10k keys", {"keep": {f"k{i}": 1 for i in range(10_000)}}, "keep", 400),
    ("keep a goal of 10k chars", {"keep": {"goal": "m" * 10_000}}, "keep.goal", 400),
    ("resume_from no checkpoint", {"resume_from": "fit"}, "resume_from", 400),
    ("resume_from an unknown job", {"resume_from": "nope:3"}, "resume_from", 400),
]
for label, change, fname, status in STARTS_FROM:
    CASES.append(field_case(SUBMIT, label, {**JOB, **change}, fname, status))
CASES.append(C("GET", "/api/v1/jobs", "state unknown", 400, "state", url="/api/v1/jobs?state=lost", field="state"))
CASES.append(C("GET", "/api/v1/jobs/", "state 10k chars", 400, "state", url="/api/v1/jobs/?state=" + "s" * 10_000))

# --- one job: names, logs' worker/tail/cursor, kill/remove flags ----------------------------------
for op in [
    ("GET", "/api/v1/jobs/{name}"),
    ("DELETE", "/api/v1/jobs/{name}"),
    ("GET", "/api/v1/jobs/{name}/logs"),
    ("GET", "/api/v1/jobs/{name}/metrics"),
    ("GET", "/api/v1/jobs/{name}/workers"),
    ("GET", "/api/v1/jobs/{name}/events"),
    ("GET", "/api/v1/jobs/{name}/checkpoints"),
    ("GET", "/api/v1/jobs/{name}/logs/search"),
]:
    base = op[1].replace("{name}", "nope")
    CASES.append(Case(op, "unknown job", 404, "nope", url=base))
    CASES.append(Case(op, "job name 20k chars", 404, "job", url=op[1].replace("{name}", "j" * 20_000)))
LOGS = ("GET", "/api/v1/jobs/{name}/logs")
for label, query, word in [
    ("worker unknown", "worker=trainer-9", "worker"),
    ("worker 10k chars", "worker=" + "w" * 10_000, "worker"),
    ("tail -1", "tail=-1", "tail"),
    ("tail text", "tail=ten", "tail"),
    ("cursor garbage", "cursor=not-a-cursor", "cursor"),
    ("cursor negative", "cursor=-5", "cursor"),
    ("cursor 10k chars", "cursor=" + "c" * 10_000, "cursor"),
]:
    CASES.append(Case(LOGS, label, 400, word, url=f"/api/v1/jobs/fit/logs?{query}"))
SEARCH = ("GET", "/api/v1/jobs/{name}/logs/search")
for label, query, word in [
    ("q missing", "", "q"),
    ("q empty", "q=", "q"),
    ("q 10k chars", "q=" + "q" * 10_000, "q"),
    ("from negative", "q=x&from=-1", "from"),
    ("from text", "q=x&from=ten", "from"),
    ("from past 2**62", f"q=x&from={2**63}", "from"),
    ("from 10k chars", "q=x&from=" + "9" * 10_000, "from"),
    ("worker unknown", "q=x&worker=trainer-9", "worker"),
]:
    CASES.append(Case(SEARCH, label, 400, word, url=f"/api/v1/jobs/fit/logs/search?{query}"))
METRICS = ("GET", "/api/v1/jobs/{name}/metrics")
for label, query, word in [
    ("worker unknown", "worker=trainer-9", "worker"),
    ("worker 10k chars", "worker=" + "w" * 10_000, "worker"),
    ("cursor garbage", "cursor=not-a-cursor", "cursor"),
    ("cursor negative", "cursor=-5", "cursor"),
]:
    CASES.append(Case(METRICS, label, 400, word, url=f"/api/v1/jobs/fit/metrics?{query}"))
CASES.append(C("DELETE", "/api/v1/jobs/{name}", "rm=maybe", 400, "rm", url="/api/v1/jobs/fit?rm=maybe"))

# --- image builds ---------------------------------------------------------------------------------
BUILD = {"package": f"{HOME}/jobs/fit", "image": "harbor.example.com/alice/fit:1", "registry": "harbor"}
IMAGES = ("POST", "/api/v1/images")
for label, body, fname in [
    ("image 10k chars", {**BUILD, "image": "i" * 10_000}, "image"),
    ("image is a list", {**BUILD, "image": ["x"]}, "image"),
    ("package 10k chars", {**BUILD, "package": "/" + "p" * 10_000}, "package"),
    ("package missing", {k: v for k, v in BUILD.items() if k != "package"}, "package"),
    ("registry is a list", {**BUILD, "registry": ["harbor"]}, "registry"),
    ("base_image 10k chars", {**BUILD, "base_image": "b" * 10_000}, "base_image"),
    ("unknown field dockerfile", {**BUILD, "dockerfile": "FROM x"}, "dockerfile"),
    ("datacenter unknown", {**BUILD, "datacenter": "nowhere"}, "datacenter"),
    ("datacenter runs local jobs", BUILD, "datacenter"),
]:
    CASES.append(field_case(IMAGES, label, body, fname))
CASES.append(
    C("POST", "/api/v1/images", "dry_run=maybe", 400, "dry_run", url="/api/v1/images?dry_run=maybe", body=BUILD)
)
CASES.append(C("GET", "/api/v1/images", "state unknown", 400, "state", url="/api/v1/images?state=sleeping"))
CASES.append(C("GET", "/api/v1/images", "active=maybe", 400, "active", url="/api/v1/images?active=maybe"))
for op in [("GET", "/api/v1/images/{uid}"), ("DELETE", "/api/v1/images/{uid}"), ("GET", "/api/v1/images/{uid}/log")]:
    CASES.append(Case(op, "unknown build", 404, "nope", url=op[1].replace("{uid}", "nope")))
    CASES.append(Case(op, "build id 20k chars", 404, "build", url=op[1].replace("{uid}", "b" * 20_000)))
for label, query in [("cursor garbage", "cursor=not-a-cursor"), ("cursor negative", "cursor=-5")]:
    CASES.append(
        C("GET", "/api/v1/images/{uid}/log", label, 400, "cursor", url=f"/api/v1/images/build-alice001/log?{query}")
    )

# --- notification preferences ---------------------------------------------------------------------
NOTIFY = ("PUT", "/api/v1/notifications")
for label, body, fname in [
    ("webhook not http", {"email": True, "webhook": "ftp://hooks.example/x"}, "webhook"),
    ("webhook 10k chars", {"email": False, "webhook": "https://h.example/" + "x" * 10_000}, "webhook"),
    ("email is text", {"email": "maybe", "webhook": ""}, "email"),
    ("email is a list", {"email": [True]}, "email"),
    ("unknown field sms", {"email": True, "sms": "+1"}, "sms"),
]:
    CASES.append(field_case(NOTIFY, label, body, fname))

# --- registry, quota, tokens ----------------------------------------------------------------------
REG = ("POST", "/api/v1/registry/")
for label, body, fname in [
    ("server 10k chars", {**REGISTRY, "server": "s" * 10_000}, "server"),
    ("password 1 MB", {**REGISTRY, "password": "p" * 1_000_000}, "password"),
    ("username is a list", {**REGISTRY, "username": ["a"]}, "username"),
    ("unknown field email", {**REGISTRY, "email": "a@b"}, "email"),
    ("name with NUL", {**REGISTRY, "name": "a\x00b"}, "name"),
    ("created_at given", {**REGISTRY, "created_at": "2020-01-01"}, "created_at"),
]:
    CASES.append(field_case(REG, label, body, fname))
for op in [("GET", "/api/v1/registry/{name}/"), ("DELETE", "/api/v1/registry/{name}/")]:
    CASES.append(Case(op, "unknown name", 404, "nope", url="/api/v1/registry/nope/"))
    CASES.append(Case(op, "name 20k chars", 404, "registry", url="/api/v1/registry/" + "r" * 20_000 + "/"))
QUOTA = ("GET", "/api/v1/quota")
CASES.append(C(*QUOTA, "datacenter 10k chars", 400, "datacenter", url="/api/v1/quota?datacenter=" + "d" * 10_000))
CASES.append(C(*QUOTA, "datacenter empty", 400, "datacenter", url="/api/v1/quota?datacenter="))
USAGE = ("GET", "/api/v1/usage")
CASES.append(C(*USAGE, "since not a date", 400, "since", url="/api/v1/usage?since=yesterday", field="since"))
CASES.append(C(*USAGE, "window over 366 days", 400, "since", url="/api/v1/usage?since=2024-01-01&until=2025-06-01"))
CASES.append(C(*USAGE, "group_by unknown", 400, "group_by", url="/api/v1/usage?group_by=month", field="group_by"))
CASES.append(C(*USAGE, "another user's", 403, "user", url="/api/v1/usage?user=bob", field="user"))
QUOTA_GET = ("GET", "/api/v1/quota/{datacenter}/{username}")
CASES.append(C(*QUOTA_GET, "unknown user", 404, "zed", url="/api/v1/quota/local/zed", persona="carol"))
CASES.append(C(*QUOTA_GET, "user 20k chars", 404, "user", url="/api/v1/quota/local/" + "z" * 20_000, persona="carol"))
CASES.append(
    C(
        *QUOTA_PUT,
        "quota unknown field",
        400,
        "gpus",
        url="/api/v1/quota/local/alice",
        persona="carol",
        body={"gpus": 1, "cpu": "2"},
        field="gpus",
    )
)
CASES.append(
    C(
        *QUOTA_PUT,
        "datacenter 20k chars",
        404,
        "datacenter",
        persona="carol",
        body={"gpu": 1},
        url="/api/v1/quota/" + "d" * 20_000 + "/alice",
    )
)
# --- the queue, priorities, operators' verbs and capacities (jobs/api/queue.py, datacenters/api.py) ----
QUEUE = ("GET", "/api/v1/queue")
CASES.append(
    C(*QUEUE, "datacenter unknown", 400, "datacenter", url="/api/v1/queue?datacenter=nope", field="datacenter")
)
CASES.append(C(*QUEUE, "datacenter 10k chars", 400, "datacenter", url="/api/v1/queue?datacenter=" + "d" * 10_000))
CASES.append(C(*QUEUE, "datacenter empty", 400, "datacenter", url="/api/v1/queue?datacenter="))
CASES.append(C("GET", "/api/v1/priorities", "page=0", 400, "page", url="/api/v1/priorities?page=0"))
for verb in ("hold", "release", "front"):
    op = ("POST", f"/api/v1/jobs/{{name}}/{verb}")
    CASES.append(Case(op, "unknown job", 404, "nope", url=f"/api/v1/jobs/nope/{verb}", persona="carol"))
    CASES.append(Case(op, "job name 20k chars", 404, "job", url=f"/api/v1/jobs/{'j' * 20_000}/{verb}", persona="carol"))
    CASES.append(Case(op, "unknown owner", 404, "fit", url=f"/api/v1/jobs/fit/{verb}?owner=zed", persona="carol"))
# --- experiments: the sweep, its template, and names (experiments/api.py, experiments/search.py) ------
EXPERIMENTS = ("POST", "/api/v1/experiments")
SWEEP_CHANGES: list[tuple[str, dict[str, Any], str]] = [
    ("name with a space", {"name": "my sweep"}, "name"),
    ("name 10k chars", {"name": "s" * 10_000}, "name"),
    ("name a number", {"name": 7}, "name"),
    ("params empty", {"params": {}}, "params"),
    ("params a list", {"params": ["lr"]}, "params"),
    ("values empty", {"params": {"lr": {"values": []}}}, "params.lr.values"),
    ("values 100k long", {"params": {"lr": {"values": list(range(100_000))}}}, "params.lr.values"),
    ("param name 10k chars", {"params": {"l" * 10_000: {"values": [1]}}}, "params"),
    ("search unknown", {"search": "bayes"}, "search"),
    ("max_trials 10^30", {"max_trials": 10**30}, "max_trials"),
    ("parallel 0", {"parallel": 0}, "parallel"),
    ("parallel text", {"parallel": "two"}, "parallel"),
    ("metric goal unknown", {"metric": {"name": "loss", "goal": "lowest"}}, "metric.goal"),
    ("unknown key", {"trials": 3}, "trials"),
    ("template a string", {"template": "python train.py"}, "template"),
    ("template cpu not a quantity", {"template": {**SWEEP["template"], "cpu": "lots"}}, "template.cpu"),
    ("template package outside home", {"template": {**SWEEP["template"], "package": "/etc"}}, "template.package"),
    ("template sets params", {"template": {**SWEEP["template"], "params": {"lr": 1}}}, "template.params"),
    ("keep.best 10^30", {"keep": {"best": 10**30}}, "keep.best"),
    ("keep a string", {"keep": "best"}, "keep"),
]
for label, change, fname in SWEEP_CHANGES:
    CASES.append(field_case(EXPERIMENTS, label, {**SWEEP, "name": "bad", **change}, fname))
CASES.append(C(*EXPERIMENTS, "running name taken", 409, "name", body=SWEEP))
for path in ("", "/trials", "/kill"):
    method = "POST" if path == "/kill" else "GET"
    op = (method, f"/api/v1/experiments/{{name}}{path}")
    CASES.append(Case(op, "unknown experiment", 404, "nope", url=f"/api/v1/experiments/nope{path}"))
    CASES.append(Case(op, "name 20k chars", 404, "experiment", url=f"/api/v1/experiments/{'e' * 20_000}{path}"))
    CASES.append(Case(op, "bob's view of alice's", 404, "grid", url=f"/api/v1/experiments/grid{path}", persona="bob"))
TRIALS = ("GET", "/api/v1/experiments/{name}/trials")
CASES.append(C(*TRIALS, "ordering unknown", 400, "ordering", url="/api/v1/experiments/grid/trials?ordering=loss"))
CASES.append(C("GET", "/api/v1/experiments", "page=0", 400, "page", url="/api/v1/experiments?page=0"))
ONE_DATACENTER = ("GET", "/api/v1/datacenters/{name}")
CASES.append(C(*ONE_DATACENTER, "unknown", 404, "nope", url="/api/v1/datacenters/nope"))
CASES.append(C(*ONE_DATACENTER, "name 20k chars", 404, "datacenter", url="/api/v1/datacenters/" + "d" * 20_000))
CAPACITY = ("PATCH", "/api/v1/datacenters/{name}")
for label, capacity, fname in [
    ("cpu not a quantity", {"cpu": "2 cores"}, "capacity.cpu"),
    ("cpu negative", {"cpu": "-2"}, "capacity.cpu"),
    ("cpu 10k chars", {"cpu": "1" * 10_000}, "capacity.cpu"),
    ("memory in GB", {"memory": "8GB"}, "capacity.memory"),
    ("memory a list", {"memory": ["8Gi"]}, "capacity.memory"),
    ("gpu negative", {"gpu": -1}, "capacity.gpu"),
    ("gpu 10^30", {"gpu": 10**30}, "capacity.gpu"),
    ("gpu text", {"gpu": "two"}, "capacity.gpu"),
    ("unknown resource", {"disk": "1Ti"}, "capacity.disk"),
]:
    CASES.append(
        field_case(CAPACITY, label, {"capacity": capacity}, fname, url="/api/v1/datacenters/local", persona="carol")
    )
CASES.append(
    field_case(
        CAPACITY, "capacity a string", {"capacity": "2"}, "capacity", url="/api/v1/datacenters/local", persona="carol"
    )
)
CASES.append(
    field_case(
        CAPACITY,
        "unknown field",
        {"capacity": {}, "name": "x"},
        "name",
        url="/api/v1/datacenters/local",
        persona="carol",
    )
)
CASES.append(
    C(
        *CAPACITY,
        "unknown datacenter",
        404,
        "nope",
        url="/api/v1/datacenters/nope",
        persona="carol",
        body={"capacity": {"cpu": "2"}},
    )
)
for login_op in [("POST", "/api/v1/auth/token"), ("POST", "/api-token-auth/")]:
    for label, body, fname in [
        ("username 151 chars", {**LOGIN, "username": "u" * 151}, "username"),
        ("password 1 MB", {**LOGIN, "password": "p" * 1_000_000}, "password"),
        ("username is a dict", {**LOGIN, "username": {"a": 1}}, "username"),
        ("unknown field user", {**LOGIN, "user": "alice"}, "user"),
        ("empty body", {}, "username"),
    ]:
        CASES.append(field_case(login_op, label, body, fname, persona="anon"))
TOKEN_DELETE = ("DELETE", "/api/v1/auth/token")
CASES.append(
    C(
        *TOKEN_DELETE,
        "malformed Authorization",
        401,
        "Token",
        persona="anon",
        headers={"HTTP_AUTHORIZATION": "Token a b c"},
    )
)
CASES.append(
    C(
        *TOKEN_DELETE,
        "Authorization 10k chars",
        401,
        "token",
        persona="anon",
        headers={"HTTP_AUTHORIZATION": "Token " + "k" * 10_000},
    )
)
CASES.append(
    C(
        *TOKEN_DELETE,
        "Basic auth",
        401,
        "credentials",
        persona="anon",
        headers={"HTTP_AUTHORIZATION": "Basic YWxpY2U6eA=="},
    )
)
CASES.append(
    C(
        "GET",
        "/api/v1/datacenters",
        "unknown token",
        401,
        "token",
        persona="anon",
        headers={"HTTP_AUTHORIZATION": "Token " + "0" * 40},
    )
)

# --- every JSON body: malformed, too deep, not an object, wrong type, too large --------------------
JSON_BODIES: dict[Operation, tuple[str, dict[str, Any], str]] = {
    ("POST", "/api-token-auth/"): ("/api-token-auth/", LOGIN, "anon"),
    ("POST", "/api/v1/auth/token"): ("/api/v1/auth/token", LOGIN, "anon"),
    ("POST", "/api/v1/jobs"): ("/api/v1/jobs", JOB, "alice"),
    ("POST", "/api/v1/jobs/"): ("/api/v1/jobs/", JOB, "alice"),
    ("POST", "/api/v1/experiments"): ("/api/v1/experiments", {**SWEEP, "name": "bad"}, "alice"),
    ("POST", "/api/v1/files/mkdir"): ("/api/v1/files/mkdir", {"path": f"{HOME}/d"}, "alice"),
    ("POST", "/api/v1/files/rm"): ("/api/v1/files/rm", {"path": f"{HOME}/data.txt"}, "alice"),
    ("POST", "/api/v1/files/uploads"): ("/api/v1/files/uploads", UPLOAD, "alice"),
    ("PUT", "/api/v1/quota/{datacenter}/{username}"): ("/api/v1/quota/local/alice", {"gpu": 1}, "carol"),
    ("PATCH", "/api/v1/datacenters/{name}"): ("/api/v1/datacenters/local", {"capacity": {"cpu": "2"}}, "carol"),
    ("POST", "/api/v1/registry/"): ("/api/v1/registry/", REGISTRY, "alice"),
    ("POST", "/api/v1/images"): ("/api/v1/images", BUILD, "alice"),
}
for op, (url, good, persona) in JSON_BODIES.items():
    text = json.dumps(good)
    first = next(iter(good))
    bodies: list[tuple[str, str, str, int, str | tuple[str, ...]]] = [
        ("malformed JSON", text[:-3], "application/json", 400, "JSON"),
        ("nested too deep", "[" * DEEP + "]" * DEEP, "application/json", 400, ("nest", "deep", "depth")),
        (
            "nested too deep in a field",
            text[:-1] + ', "x": ' + '{"a":' * DEEP + "1" + "}" * DEEP + "}",
            "application/json",
            400,
            ("nest", "deep", "depth"),
        ),
        ("a JSON array", "[" + text + "]", "application/json", 400, "object"),
        ("a JSON string", json.dumps(text), "application/json", 400, "object"),
        ("text/plain", text, "text/plain", 415, "text/plain"),
        ("multipart", text, "multipart/form-data; boundary=x", 415, "multipart/form-data"),
        (
            "body too large",
            text[:-1] + ', "x": "' + "y" * TOO_LARGE + '"}',
            "application/json",
            413,
            ("large", "limit", "bytes"),
        ),
        ("first field null", json.dumps({**good, first: None}), "application/json", 400, first),
    ]
    for label, raw, content_type, status, word in bodies:
        if label == "first field null" and op == QUOTA_PUT:
            continue  # null is how an operator resets a quota to the datacenter's default
        CASES.append(Case(op, label, status, word, url=url, raw=raw, content_type=content_type, persona=persona))

# --- methods no route has: a 405 in the error shape naming the method ------------------------------
PATHS = sorted({path for _, path in operations()})
STAFF_ONLY = {
    "/api/v1/quota/{datacenter}/{username}",
    "/api/v1/jobs/{name}/hold",
    "/api/v1/jobs/{name}/release",
    "/api/v1/jobs/{name}/front",
}
EXAMPLE_URLS = {
    "/api/v1/files/uploads/{upload_id}": "/api/v1/files/uploads/{upload}",
    "/api/v1/files/uploads/{upload_id}/chunks/{index}": "/api/v1/files/uploads/{upload}/chunks/0",
    "/api/v1/files/uploads/{upload_id}/complete": "/api/v1/files/uploads/{upload}/complete",
    "/api/v1/images/{uid}": "/api/v1/images/build-alice001",
    "/api/v1/images/{uid}/log": "/api/v1/images/build-alice001/log",
    "/api/v1/jobs/{name}": "/api/v1/jobs/fit",
    "/api/v1/experiments/{name}": "/api/v1/experiments/grid",
    "/api/v1/experiments/{name}/trials": "/api/v1/experiments/grid/trials",
    "/api/v1/experiments/{name}/kill": "/api/v1/experiments/grid/kill",
    "/api/v1/jobs/{name}/logs": "/api/v1/jobs/fit/logs",
    "/api/v1/jobs/{name}/metrics": "/api/v1/jobs/fit/metrics",
    "/api/v1/jobs/{name}/checkpoints": "/api/v1/jobs/fit/checkpoints",
    "/api/v1/jobs/{name}/workers": "/api/v1/jobs/fit/workers",
    "/api/v1/jobs/{name}/events": "/api/v1/jobs/fit/events",
    "/api/v1/jobs/{name}/hold": "/api/v1/jobs/fit/hold",
    "/api/v1/jobs/{name}/release": "/api/v1/jobs/fit/release",
    "/api/v1/jobs/{name}/front": "/api/v1/jobs/fit/front",
    "/api/v1/datacenters/{name}": "/api/v1/datacenters/local",
    "/api/v1/quota/{datacenter}/{username}": "/api/v1/quota/local/alice",
    "/api/v1/registry/{name}/": "/api/v1/registry/harbor/",
}
for path in PATHS:
    allowed = {m for m, p in operations() if p == path}
    op = (sorted(allowed)[0], path)
    for method in ("PATCH", "PUT", "POST", "DELETE"):
        if method not in allowed:
            persona = "carol" if path in STAFF_ONLY else ("anon" if path in ("/api/v1/version",) else "alice")
            CASES.append(
                Case(
                    op,
                    f"method {method}",
                    405,
                    method,
                    url=EXAMPLE_URLS.get(path, path),
                    persona=persona,
                    raw="{}" if method != "DELETE" else None,
                )
            )

IDS = [case.id for case in CASES]


def test_there_are_enough_cases_and_every_operation_has_some() -> None:
    assert len(CASES) >= 150, len(CASES)
    assert len(set(IDS)) == len(IDS), sorted({i for i in IDS if IDS.count(i) > 1})
    unknown = {case.op for case in CASES} - set(operations())
    assert not unknown, f"cases for operations the API does not have: {unknown}"
    missing = set(operations()) - {case.op for case in CASES} - {("GET", "/api/v1/version")}
    # GET /api/v1/version takes no input at all; its other methods are tried above (405).
    assert not missing, f"no bad-input cases for {sorted(missing)}: add them to CASES"


def _params(case: Case) -> Any:
    marks = [pytest.mark.timeout(60, method="thread")] if case.slow else []
    return pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", [_params(c) for c in CASES])
def test_bad_input_is_refused_naming_it_and_creates_nothing(world: World, case: Case) -> None:
    api = world.api(case.persona)
    url = (case.url or case.op[1]).replace("{upload}", world.upload["id"])
    method = case.label.split()[1] if case.label.startswith("method ") else case.op[0]
    before = snapshot(world)
    if case.raw is not None:
        # DRF sends bytes as they are (force_bytes); its stubs say str.
        response = api.generic(method, url, case.raw, content_type=case.content_type, **case.headers)  # type: ignore[arg-type]
    elif case.body is not None:
        response = api.generic(method, url, json.dumps(case.body), content_type="application/json", **case.headers)
    else:
        response = api.generic(method, url, **case.headers)
    wanted = case.status if isinstance(case.status, tuple) else (case.status,)
    assert response.status_code in wanted, (response.status_code, response.content[:600])
    body = error_body(response)
    words = case.name if isinstance(case.name, tuple) else (case.name,)
    assert any(names(body, word) for word in words), f"the answer does not name {words}: {body}"
    if case.field is not None:
        fields = {e["field"] or "" for e in body["errors"]}
        assert any(f == case.field or f.startswith((f"{case.field}.", f"{case.field}[")) for f in fields), body
    assert snapshot(world) == before, "a refused request changed rows or files"

"""What each environment variable means, for docs/reference/settings.md (tools/docs/gen_settings.py).

The generator finds the variables in the code (their names, how they are read, their defaults); the words
live here. A variable the code reads that has no entry here fails `make docs-check`: say what it means.
`default` is only for defaults the code cannot show as a plain value (a path, a computed value) or that
`make run` changes; the generator prints the code's own default otherwise.
"""

from __future__ import annotations

from typing import NamedTuple


class Help(NamedTuple):
    meaning: str
    default: str = ""  # words for the default, where the code's value alone would not say it


PORTAL: dict[str, Help] = {
    "PADDLECLOUD_VAR_DIR": Help(
        "every runtime file: SQLite db, broker folders, generated keys, logs, local PFS", "`./var`"
    ),
    "DEBUG": Help(
        "development mode; set `false` in production (then `SECRET_KEY`, `PADDLECLOUD_ENCRYPTION_KEY`, "
        "`DATABASE_URL`, `CELERY_BROKER_URL` and `ALLOWED_HOSTS` are required)",
    ),
    "PADDLECLOUD_EMBEDDED": Help(
        "the single-host embedded portal: with DEBUG off, generated secrets, SQLite and the filesystem broker "
        "are accepted, and `ALLOWED_HOSTS` must be loopback names only",
    ),
    "SECRET_KEY": Help("Django's signing key", "generated into `var/secret_key`"),
    "PADDLECLOUD_ENCRYPTION_KEY": Help(
        "comma-separated Fernet keys, newest first; encrypts secrets at rest (see "
        "[key rotation](../how-to/operators/backups-and-upgrades.md#rotate-the-encryption-key))",
        "generated into `var/encryption_key`",
    ),
    "ALLOWED_HOSTS": Help(
        "comma-separated host names the portal answers to",
        "`localhost,127.0.0.1,[::1]` when DEBUG or embedded; else none",
    ),
    "CSRF_TRUSTED_ORIGINS": Help("comma-separated origins, e.g. `https://paddlecloud.example.com`"),
    "DATABASE_URL": Help(
        "e.g. `postgresql://user:pass@host:5432/paddlecloud`", "SQLite `var/db.sqlite3`"
    ),
    "DATABASE_CONN_MAX_AGE": Help("seconds a database connection is reused"),
    "PADDLECLOUD_DB_BUSY_TIMEOUT": Help("SQLite: seconds a write waits for the write lock before failing"),
    "PADDLECLOUD_DB_STATEMENT_TIMEOUT": Help(
        "PostgreSQL: seconds one statement may run before the server cancels it (`statement_timeout`; 0: no bound)"
    ),
    "PADDLECLOUD_CACHE_URL": Help(
        "Redis URL for the cache (login throttling shared by all web hosts); values are JSON either way",
        "file cache under `var/cache`",
    ),
    "TIME_ZONE": Help("Django's time zone"),
    "PADDLECLOUD_STATIC_ROOT": Help(
        "where `collectstatic` puts the files whitenoise serves (the portal image: `/app/staticfiles`, in the "
        "image)",
        "`$PADDLECLOUD_VAR_DIR/static`",
    ),
    "SESSION_COOKIE_SECURE": Help(
        "cookies only over HTTPS", "`true` unless DEBUG or embedded (plain HTTP on loopback)"
    ),
    "CSRF_COOKIE_SECURE": Help(
        "cookies only over HTTPS", "`true` unless DEBUG or embedded (plain HTTP on loopback)"
    ),
    "PADDLECLOUD_INSTANCE": Help(
        "a random id `make run` gives each start; the portal sends it as `X-PaddleCloud-Instance`, and "
        "`make run` waits until the answer on its port carries it (see [What `make run` does]"
        "(../tutorial/first-job.md#what-make-run-does))",
    ),
    "PADDLECLOUD_SITE": Help(
        "this portal installation on its host: its local jobs' uids (PADDLECLOUD_JOB_UID_BASE) and requirement "
        "layers are its own, apart from another portal's on the same host; `legacy` for a var folder that ran "
        "local jobs before it had one (its uids stay at 1,000,000,000 + N)",
        "generated once into `var/site-id`",
    ),
    "PADDLECLOUD_SIGNUP": Help(
        "who may make an account: `open` (active at once), `approval` (staff approve it in the admin; the "
        "production deploy's setting) or `closed` (operators add users)"
    ),
    "PADDLECLOUD_SIGNUP_RATE": Help("accounts made per client address (DRF rate syntax); a 429 past it"),
    "PADDLECLOUD_TOKEN_TTL_DAYS": Help("API token lifetime"),
    "PADDLECLOUD_LOGIN_RATE": Help(
        "failed logins allowed per (client address, username) (DRF rate syntax)"
    ),
    "PADDLECLOUD_LOGIN_USER_RATE": Help("failed logins allowed per username, from all addresses together"),
    "PADDLECLOUD_LOGIN_ADDRESS_RATE": Help(
        "failed logins allowed per client address, over all usernames (high: users share addresses)"
    ),
    "PADDLECLOUD_TRUSTED_PROXIES": Help(
        "proxies in front of the portal that append to `X-Forwarded-For`; set it (e.g. `1` behind one "
        "ingress) or every user shares the proxy's address for login throttling"
    ),
    "PADDLECLOUD_PUBLIC_URL": Help(
        "the URL users reach the portal at (printed links, paddlectl config)"
    ),
    "EMAIL_HOST": Help(
        "SMTP for notification emails; unset, emails go to the console backend (the worker's log)",
        "console backend",
    ),
    "EMAIL_BACKEND": Help(
        "Django's email backend: SMTP when `EMAIL_HOST` is set, else the console (the worker's log)",
        "SMTP with `EMAIL_HOST`, else the console backend",
    ),
    "EMAIL_PORT": Help("SMTP for notification emails: the server's port"),
    "EMAIL_HOST_USER": Help("SMTP for notification emails: the login"),
    "EMAIL_HOST_PASSWORD": Help("SMTP for notification emails: the password", "empty"),
    "EMAIL_USE_TLS": Help("SMTP for notification emails: STARTTLS"),
    "DEFAULT_FROM_EMAIL": Help("SMTP for notification emails: the sender"),
    "PADDLECLOUD_WEBHOOK_ALLOW_PRIVATE": Help(
        "allow webhooks to loopback/private addresses (a portal on a private network)"
    ),
    "PADDLECLOUD_WEBHOOK_TIMEOUT": Help(
        "seconds one webhook POST may take in all, from connect to the end of the answer"
    ),
    "CELERY_BROKER_URL": Help(
        "e.g. `redis://redis:6379/0`",
        "`pcfs://` (the embedded broker: a folder of message files under `var/celery`, no server; see "
        "[The embedded broker](../explanation/architecture.md#the-embedded-broker))",
    ),
    "PADDLECLOUD_HEARTBEAT_SECONDS": Help("how often workers report to the admin's \"Worker heartbeats\""),
    "LOG_LEVEL": Help("`DEBUG`, `INFO`, `WARNING`, `ERROR`"),
    "PADDLECLOUD_UPLOAD_CHUNK": Help("chunk size when the client does not choose one", "`8388608` (8 MiB)"),
    "PADDLECLOUD_UPLOAD_MAX_CHUNK": Help(
        "largest chunk accepted (multiple of 64 KiB, at most 1 GiB)", "`67108864` (64 MiB)"
    ),
    "PADDLECLOUD_UPLOAD_EXPIRE_SECONDS": Help(
        "an upload with no activity for this long is abandoned (temp file and reservation removed)"
    ),
    "PADDLECLOUD_UPLOAD_VERIFY_INLINE": Help(
        "larger uploads are verified after `complete` answers 202", "`4294967296` (4 GiB)"
    ),
    "PADDLECLOUD_RECONCILE_SECONDS": Help("how often the reconciler follows running jobs"),
    "PADDLECLOUD_K8S_WATCH": Help(
        "the control worker watches Kubernetes datacenters (no list call per cycle, changes at once); `false` "
        "lists every cycle"
    ),
    "PADDLECLOUD_LONG_POLL_SLOTS": Help(
        "requests per web process that may wait for a job's change at once (`?wait=`; see "
        "[Long polling](jobs.md#long-polling))"
    ),
    "PADDLECLOUD_DOWNLOADS_PER_USER": Help(
        "downloads (files, whole worker logs) one user may have going at once on one web host; one more is a 429 "
        "with `Retry-After`"
    ),
    "PADDLECLOUD_KILL_GRACE_SECONDS": Help("SIGTERM to SIGKILL grace when stopping job processes"),
    "PADDLECLOUD_RENDEZVOUS_TIMEOUT": Help(
        "PS mode, both engines: seconds the trainers' gloo rendezvous may take from the first arrival before the "
        "job fails `RendezvousTimeout` (see [Retries in parameter-server mode]"
        "(job-environment.md#retries-in-parameter-server-mode))"
    ),
    "PADDLECLOUD_VENV_CACHE": Help(
        "local engine: runtimes (`runtimes/`) and users' requirement layers (`layers/<site>/user-<id>/`)",
        "`~/.cache/paddlecloud/venvs`",
    ),
    "PADDLECLOUD_JOB_UID_BASE": Help(
        "local jobs of portal user N run as uid and gid BASE + N (one unprivileged uid per user; above the "
        "ranges `useradd` gives accounts and subordinate ids; a uid that names a host account, or passes "
        "2^31 - 2, refuses the job); apart per PADDLECLOUD_SITE by default, with a 1 in 1,024 chance that two "
        "portals on one host draw the same: set it apart by hand to be sure",
        "1,000,000,000 + 2^20 x the site's slot (0 to 1,023; 0 for `legacy`)",
    ),
    "PADDLECLOUD_POD_UID": Help(
        "the user every job container runs as (`securityContext`); a root worker hands the job's folders to "
        "it; never 0"
    ),
    "PADDLECLOUD_POD_GID": Help("the group every job container runs as (`securityContext`); never 0"),
}

# Read where they are used, on the workers, not in portal/settings.py.
WORKERS: dict[str, Help] = {
    "PADDLECLOUD_K8S_CLUSTER_CIDRS": Help(
        "Kubernetes NetworkPolicies: the ranges a job's egress never reaches; comma-separated CIDRs, read when "
        "a job or build starts (see [Network policies](../explanation/isolation.md#network-policies-on-kubernetes))",
        "every non-global range",
    ),
    "PADDLECLOUD_K8S_REGISTRY_CIDRS": Help(
        "Kubernetes NetworkPolicies: the private ranges where the datacenter's own registries live (image "
        "builders may reach those); comma-separated CIDRs, read when a job or build starts",
        "none",
    ),
    "PADDLECLOUD_K8S_QPS": Help(
        "Kubernetes: calls a second to a datacenter's API server per worker process (a token bucket, at most "
        "1000; see [How a job is followed](../explanation/kubernetes.md#how-a-job-is-followed))",
        "`50`",
    ),
    "PADDLECLOUD_K8S_BURST": Help(
        "Kubernetes: the burst of calls allowed after a quiet spell (the token bucket's size)", "`100`"
    ),
    "XDG_CACHE_HOME": Help(
        "`manage.py bootstrap` (`make run`): a new SQLite database is a copy of the migrated one kept in "
        "`paddlecloud/migrated/` beneath it (see [What `make run` does](../tutorial/first-job.md#what-make-run-does))",
        "`~/.cache`",
    ),
}

# Read by the scripts `make run` and `make stop` call (scripts/common.sh).
SCRIPTS: dict[str, Help] = {
    "PADDLECLOUD_PORT": Help(
        "port `make run` binds on 127.0.0.1; it never picks another by itself (see [What `make run` does]"
        "(../tutorial/first-job.md#what-make-run-does))"
    ),
}

# paddlectl and the SDK (client/paddlecloud/sdk, client/paddlecloud/ctl), on the user's machine.
CLIENT: dict[str, Help] = {
    "PADDLE_CONFIG": Help("the config file paddlectl and the SDK read", "`~/.paddle/config`"),
    "PADDLE_TOKEN_CACHE": Help(
        "where tokens are cached, one file per endpoint and user (mode 0600)", "`~/.paddle/token_cache/`"
    ),
    "PADDLECTL_DEBUG": Help("set (not `0`): a failure prints its traceback after the one `error:` line"),
    "PADDLECTL_RETRIES": Help(
        "how many more times a request that may be repeated (a GET; a submit, with its `Idempotency-Key`) is "
        "sent after a lost answer, a refused connection or a 502-504"
    ),
    "PADDLECTL_RETRY_WAIT": Help("seconds: the base of the exponential wait between two tries"),
    "PADDLECTL_UPLOAD_PARALLEL": Help("upload chunks sent at once, each on its own connection (1-16)"),
    "PADDLE_NOTEBOOK": Help(
        "`YES` in a notebook: `dist_train` uploads the package and submits its `paddle_job` instead of "
        "training here"
    ),
    "CEPHFS_MONITOR_ADDRS": Help(
        "the original SDK's `CephFSVolume` (kept so old code runs; PaddleCloud mounts the storage itself): "
        "monitors, comma-separated"
    ),
    "CEPHFS_USER": Help("the original SDK's `CephFSVolume`: the CephFS user"),
    "CEPHFS_SECRET": Help("the original SDK's `CephFSVolume`: the secret's name"),
    "CEPHFS_MOUNT_PATH": Help("the original SDK's `CephFSVolume`: where it is mounted"),
    "CEPHFS_PATH": Help("the original SDK's `CephFSVolume`: the path in CephFS"),
}

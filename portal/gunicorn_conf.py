"""How gunicorn serves the portal: one config for `make run`, the image, the deploy and the tests (`-c python:...`).

Why gevent workers: a threaded worker gives each connection one of a handful of threads for as long as it
lasts, so eight clients that dribble their headers, hold a download unread or wait on a long poll silenced
the portal for everyone (issue 34). Here a connection costs a greenlet (a few KiB; bench/web_under_load.py
prints the figure), and Django's code stays the synchronous code it is: the database driver (psycopg) and
every socket, sleep and lock are made cooperative by gevent's monkey-patching, which the worker applies
before the portal is imported. The alternatives were weighed: an ASGI server buffers a synchronous
FileResponse whole in memory under Django, and a buffering proxy (nginx) is not something `make run` can
install on a fresh machine; behind an operator's own proxy or Ingress this config serves as it is.

What is bounded, per worker process: WORKER_CONNECTIONS connections at once (the rest wait in the listen
backlog); a request's line and headers must arrive within KEEPALIVE seconds (gunicorn's gevent worker
times the parse with the keep-alive deadline), so a slowloris client is cut; the request line and
header sizes as below (gunicorn answers 400 to anything bigger). A user's concurrent downloads are
bounded by the portal itself (core/streams.py), their long polls too (jobs/api/waiting.py).

One rule for request code under these workers: never wait on the network or sleep inside a database
transaction. On SQLite (the embedded default) a transaction holds the write lock from BEGIN, and another
request's BEGIN waits in SQLite's busy handler, which does not yield: the whole worker would stall until the
first could go on. CPU-heavy loops yield now and then (time.sleep(0), as jobs/follow/log_search.py does).
"""

from __future__ import annotations

worker_class = "portal.web_worker.Worker"  # gevent's, with a zero-copy sendfile for downloads
workers = 2  # make run's; the image and the deploy say their own on the command line
WORKER_CONNECTIONS = 1000
worker_connections = WORKER_CONNECTIONS
KEEPALIVE = 10  # seconds: an idle kept-alive connection's life, and the deadline for a request's headers
keepalive = KEEPALIVE
# The worker's heartbeat: a worker whose event loop is stuck for this long (a request that computes
# without yielding) is killed and replaced, with the requests it held. Not a bound on one request.
timeout = 60
graceful_timeout = 30
limit_request_line = 8190
limit_request_fields = 100
limit_request_field_size = 8190

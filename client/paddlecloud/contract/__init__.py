"""The job contract shared by the portal and the client (no Django here): one place for every rule.

The floor under the SDK, the CLI and the runtime; it imports nothing of the project but itself.
- `quantity`: the bounded parser of Kubernetes quantities (cpu, memory, storage) and its caps.
- `spec`: the job spec's rules (job name, integer limits, field lengths, env names) and their messages.
- `jobenv`: `JobEnv`, every PADDLECLOUD_* variable the engines set and the launcher reads.
- `states`: the names of job, worker and build states, of roles and of workers ("trainer-0").
- `logtimes`: log.times, when each byte of a worker's log arrived; `metricline`: one metrics.jsonl line.
- `imageref`, `dockerfile`: image references and the runtime image's Dockerfile; `units`: sizes and times.
- `version`: the release both sides carry.
"""

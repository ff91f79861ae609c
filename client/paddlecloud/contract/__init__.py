"""The job contract shared by the portal and the client (no Django here): one place for every rule.

- `quantity`: the bounded parser of Kubernetes quantities (cpu, memory, storage) and its caps.
- `spec`: the job spec's rules (job name, integer limits, field lengths, env names) and their messages.
- `jobenv`: `JobEnv`, every PADDLECLOUD_* variable the engines set and the launcher reads.
"""

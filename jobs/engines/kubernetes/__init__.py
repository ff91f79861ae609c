"""The Kubernetes engine: engine (start/poll/stop), client (the API calls), manifests and names (pure
builders of a job's objects), status (pure rules reading them back), rules (datacenter/spec checks)."""

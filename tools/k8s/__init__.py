"""Test control plane tooling: build script, pinned versions and the TestCluster harness."""

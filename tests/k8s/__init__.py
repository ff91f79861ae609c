"""Tests against the real test control plane and node (tools/k8s). A package, so that its clusters are
package-scoped fixtures: stopped once the worker running them moves on to other tests (tests/k8s/conftest.py)."""

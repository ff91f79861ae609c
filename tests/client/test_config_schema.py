"""The config file's schema: each shape problem is one message naming the line and the key (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
from paddlecloud.sdk import config
from paddlecloud.sdk.errors import ConfigError

ENTRY = "- name: dc\n  username: alice\n  endpoint: http://127.0.0.1:8000\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("datacenters: x\ncurrent-datacenter: dc\n", "line 1: `datacenters:` must be a list of `- name: ...` entries"),
        ("datacenters:\ncurrent-datacenter: dc\n", "line 1: `datacenters:` is missing or empty; add at least one"),
        ("current-datacenter: dc\n", "line 1: `datacenters:` is missing or empty; add at least one"),
        ("datacenters:\n- just text\ncurrent-datacenter: dc\n",
         "line 2: datacenters[0] must be a mapping with name, username and endpoint"),
        ("datacenters:\n" + ENTRY + "current-datacenter: 7\n",
         "line 5: current-datacenter must be text, not int (7); put it in quotes"),
        ("datacenters:\n" + ENTRY.replace("alice", "") + "current-datacenter: dc\n",
         "line 3: datacenters[0].username is empty"),
        ("datacenters:\n" + ENTRY + ENTRY + "current-datacenter: dc\n",
         "line 5: datacenters[1]: the name 'dc' is used twice"),
        ("datacenters:\n" + ENTRY + "  colour: red\n  zone: b\ncurrent-datacenter: dc\n",
         "line 5: datacenters[0]: unknown key 'colour'; expected one of: name, username, password, endpoint, "
         "datacenter"),
    ],
)
def test_a_shape_problem_names_its_line_and_key(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config.parse(text, Path("/nowhere/config"))
    assert str(caught.value) == f"/nowhere/config {message}"


def test_optional_keys_may_be_empty() -> None:
    text = "datacenters:\n" + ENTRY + "  password:\n  datacenter:\ncurrent-datacenter: dc\n"
    entry = config.parse(text, Path("/nowhere/config")).current()
    assert (entry.password, entry.portal_name) == (None, "dc")

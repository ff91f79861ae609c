"""~/.paddle/config: validation with line numbers, config init/use/view, and a token cache that heals itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from paddlecloud.ctl.commands import cli
from paddlecloud.sdk import config as configfile

from accounts.models import ApiToken
from tests.cli.conftest import Portal, config_text, one_line_error, write_config
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db(transaction=True)


def run(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


GOOD = """\
datacenters:
- name: datacenter1
  username: alice
  password: secret
  endpoint: http://127.0.0.1:8000
- name: dc2
  username: bob
  endpoint: https://cloud.example.com/
current-datacenter: datacenter1
"""


def test_the_original_format_is_read(tmp_path: Path) -> None:
    config = configfile.parse(GOOD, tmp_path / "config")
    assert config.current() == configfile.Datacenter("datacenter1", "alice", "http://127.0.0.1:8000", "secret",
                                                     "datacenter1")
    second = config.get("dc2")
    assert (second.endpoint, second.password, second.home) == ("https://cloud.example.com", None, "/pfs/dc2/home/bob")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("datacenters: [\n", "line 2: not valid YAML"),
        (GOOD.replace("current-datacenter: datacenter1\n", ""), "`current-datacenter:` is missing; add "
                                                                "`current-datacenter: datacenter1`"),
        (GOOD.replace("current-datacenter: datacenter1", "current-datacenter: dc3"),
         "line 9: current-datacenter 'dc3' is not one of the configured datacenters: datacenter1, dc2"),
        (GOOD.replace("http://127.0.0.1:8000", "127.0.0.1:8000"),
         "line 5: datacenters[0].endpoint: '127.0.0.1:8000' is not an http(s) URL"),
        (GOOD.replace("http://127.0.0.1:8000", "http://127.0.0.1:99999"),
         "line 5: datacenters[0].endpoint: 'http://127.0.0.1:99999' is not a valid URL"),
        (GOOD.replace("current-datacenter:", "current_datacenter:"),
         "line 9: unknown key 'current_datacenter'; did you mean 'current-datacenter'?"),
        (GOOD.replace("  username: bob\n", "  usrname: bob\n"),
         "line 7: datacenters[1]: unknown key 'usrname'; did you mean 'username'?"),
        (GOOD.replace("  username: bob\n", ""), "line 6: datacenters[1] has no `username:`"),
        (GOOD.replace("password: secret", "password: 123456"),
         "line 4: datacenters[0].password must be text, not int (123456); put it in quotes"),
        ("", "the file is empty"),
        ("- a\n- b\n", "line 1: must be a mapping with `datacenters:` and `current-datacenter:`"),
        ("datacenters: []\ncurrent-datacenter: x\n", "line 1: `datacenters:` is missing or empty"),
    ],
)
def test_a_bad_config_is_named_by_line_and_key(cli_home: Path, text: str, message: str) -> None:
    write_config(cli_home / ".paddle" / "config", text)
    result = run("get", "jobs")
    assert result.exit_code == 2
    line = one_line_error(result)
    assert line.startswith("error: ~/.paddle/config") and message in line, line


def test_a_missing_config_says_how_to_create_one(cli_home: Path) -> None:
    result = run("get", "jobs")
    assert result.exit_code == 2
    assert "no config file at ~/.paddle/config; create it with `paddlectl config init" in one_line_error(result)


def test_a_config_others_can_read_is_a_warning(cli_home: Path) -> None:
    write_config(cli_home / ".paddle" / "config", GOOD, mode=0o644)
    result = run("config", "view")
    assert result.exit_code == 0
    assert "warning: ~/.paddle/config can be read by other users (mode 0644)" in result.stderr
    assert "chmod 600 ~/.paddle/config" in result.stderr
    assert "secret" not in result.stdout
    assert result.stdout.splitlines()[2].split() == ["*", "datacenter1", "datacenter1", "http://127.0.0.1:8000",
                                                     "alice", "yes"]


def test_config_use_switches_and_keeps_comments(cli_home: Path) -> None:
    path = write_config(cli_home / ".paddle" / "config", "# my datacenters\n" + GOOD)
    result = run("config", "use", "dc2")
    assert (result.exit_code, result.stdout) == (0, "current datacenter: dc2 (https://cloud.example.com as bob)\n")
    text = path.read_text()
    assert text.startswith("# my datacenters\n") and "current-datacenter: dc2\n" in text
    assert path.stat().st_mode & 0o777 == 0o600
    unknown = run("config", "use", "nope")
    assert unknown.exit_code == 2
    assert "no datacenter named 'nope'; configured: datacenter1, dc2" in one_line_error(unknown)


def test_config_init_writes_a_private_config_and_checks_the_login(portal: Portal) -> None:
    portal.config.unlink()
    result = run("config", "init", "--endpoint", portal.url + "/", "--username", "alice", "--password-stdin",
                 input=PASSWORD + "\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"wrote ~/.paddle/config: local at {portal.url} as alice, current\n"
    assert portal.config.stat().st_mode & 0o777 == 0o600
    written = configfile.load(portal.config)
    assert (written.current_name, written.current().password, written.current().endpoint) == (
        "local", PASSWORD, portal.url)
    assert run("get", "jobs").exit_code == 0
    # A second datacenter entry is added next to the first, and becomes current.
    again = run("config", "init", "--endpoint", portal.url, "--username", "alice", "--password", PASSWORD,
                "--datacenter", "local", "--name", "mine", "--no-save-password")
    assert again.exit_code == 0, again.stderr
    both = configfile.load(portal.config)
    assert [d.name for d in both.datacenters] == ["local", "mine"] and both.current().password is None
    assert both.current().portal_name == "local"
    assert run("get", "jobs").exit_code == 0  # the token was cached by init


def test_config_init_refuses_a_wrong_password_and_writes_nothing(portal: Portal) -> None:
    portal.config.unlink()
    result = run("config", "init", "--endpoint", portal.url, "--username", "alice", "--password-stdin",
                 input="wrong\n")
    assert result.exit_code == 1
    assert "username or password is incorrect" in one_line_error(result)
    assert not portal.config.exists()


def test_a_stale_cached_token_is_replaced_by_a_new_login(portal: Portal) -> None:
    assert run("login").exit_code == 0
    cache = next((portal.home / ".paddle" / "token_cache").iterdir())
    old = json.loads(cache.read_text())["token"]
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")  # a password change revokes tokens, say
    result = run("get", "jobs")
    assert result.exit_code == 0, result.stderr
    new = json.loads(cache.read_text())["token"]
    assert new != old


def test_an_expired_token_without_a_password_asks_to_log_in(portal: Portal) -> None:
    assert run("login").exit_code == 0
    write_config(portal.config, config_text(portal.url, password=None))
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    result = run("get", "jobs")
    assert result.exit_code == 1
    assert "refused the saved token of alice (expired or revoked)" in one_line_error(result)
    assert "run `paddlectl login`" in result.stderr
    # login reads the password from stdin when there is no terminal to ask on
    assert run("login", "--password-stdin", input=PASSWORD + "\n").exit_code == 0
    assert run("get", "jobs").exit_code == 0

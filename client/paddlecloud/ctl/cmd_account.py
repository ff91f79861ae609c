"""paddlectl's account commands: login, logout, registry secrets, quota, datacenters, version."""

from __future__ import annotations

import platform
from urllib.parse import quote

import click

from paddlecloud.contract.version import __version__
from paddlecloud.ctl.app import (
    OUTPUT,
    cli,
    delete,
    get,
    note,
    password_from,
    password_prompt,
    read_stdin_secret,
    session_of,
    state,
    warn,
)
from paddlecloud.ctl.output import datacenters_table, emit, quota_table, registry_table
from paddlecloud.sdk import config as configfile
from paddlecloud.sdk.errors import ConfigError
from paddlecloud.sdk.session import Session


@cli.command(short_help="Log in (asks for the password if the config has none) and cache the token.")
@click.option("--password-stdin", "-password-stdin", "password_stdin", is_flag=True,
              help="Read the password from standard input.")
@click.pass_context
def login(ctx: click.Context, password_stdin: bool) -> None:
    """Log in to the current datacenter's portal; the token is cached (0600) for later commands."""
    st = state(ctx)
    config = configfile.load(st.config_path)
    for message in config.warnings:
        warn(message)
    entry = config.current()
    session = Session(entry, config_path=config.path, password_prompt=password_prompt())
    password = read_stdin_secret("password") if password_stdin else None
    if password is None and entry.password is None and session.password_prompt is None:
        raise ConfigError("no password in the config and no terminal to ask on; use --password-stdin")
    answer = session.login(password)
    until = f" (the token is valid until {answer['expires_at']})" if answer.get("expires_at") else ""
    click.echo(f"logged in to {entry.endpoint} as {answer.get('username', entry.username)}{until}")


@cli.command(short_help="Revoke the cached token and forget it.")
@click.pass_context
def logout(ctx: click.Context) -> None:
    session = session_of(ctx)
    revoked = session.logout()
    click.echo(f"logged out of {session.endpoint}" if revoked else "not logged in")


@cli.command(short_help="Add a registry secret on PaddleCloud (for private images).")
@click.option("-name", "--name", required=True, help="Your name for it, used by submit -registry.")
@click.option("-username", "--username", required=True, help="Registry user.")
@click.option("-password", "--password", default=None, help="Registry password (better: --password-stdin).")
@click.option("-password-stdin", "--password-stdin", "password_stdin", is_flag=True,
              help="Read the password from standard input.")
@click.option("-server", "--server", required=True, help="Registry server, e.g. registry.example.com.")
@click.pass_context
def registry(ctx: click.Context, name: str, username: str, password: str | None, password_stdin: bool,
             server: str) -> None:
    """Store registry credentials (the password is write-only) for jobs with private images."""
    password = password_from(password, password_stdin, "-password", f"Password for {username} at {server}", True)
    session_of(ctx).post("/registry", {"name": name, "server": server, "username": username, "password": password})
    click.echo(f"registry secret {name} added for {server}; use it with: paddlectl submit -registry {name} ...")


@get.command("registry", short_help="List your registry secrets.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_registry(ctx: click.Context, output: str) -> None:
    """NAME, SERVER, USERNAME, AGE (passwords are write-only and never shown)."""
    items = list(session_of(ctx).paginate("/registry"))
    emit(items, output, lambda: registry_table(items))


@delete.command("registry", short_help="Delete a registry secret.")
@click.argument("name")
@click.pass_context
def delete_registry(ctx: click.Context, name: str) -> None:
    session_of(ctx).delete(f"/registry/{quote(name, safe='')}")
    click.echo(f"registry secret {name} deleted")


@get.command("quota", short_help="Show your limits and usage: compute and storage.")
@click.option("-datacenter", "--datacenter", default=None, help="Only this datacenter.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_quota(ctx: click.Context, datacenter: str | None, output: str) -> None:
    """Per datacenter: cpu (cores), memory, gpu, running jobs, storage (bytes) and files: USED, LIMIT, FREE."""
    params = {"datacenter": datacenter} if datacenter else None
    items = session_of(ctx).get("/quota", params)["results"]
    emit(items, output, lambda: quota_table(items))


@get.command("datacenters", short_help="List the datacenters you may use.")
@click.option("-o", "--output", type=OUTPUT, default="table")
@click.pass_context
def get_datacenters(ctx: click.Context, output: str) -> None:
    """CURRENT (the config's), NAME, ENGINE, STORAGE, DESCRIPTION."""
    session = session_of(ctx)
    items = list(session.paginate("/datacenters"))
    emit(items, output, lambda: datacenters_table(items, session.portal_datacenter))


@cli.command(short_help="Print the client's and the portal's versions.")
@click.option("--client", "-client", "client_only", is_flag=True, help="Only the client's version.")
@click.pass_context
def version(ctx: click.Context, client_only: bool) -> None:
    click.echo(f"paddlectl {__version__} (python {platform.python_version()})")
    if client_only:
        return
    try:
        config_ = configfile.load(state(ctx).config_path)
    except ConfigError as exc:
        note(f"portal: unknown ({exc})")
        return
    session = Session(config_.current(), config_path=config_.path)
    info = session.version()
    click.echo(f"portal {info.get('version')} (api {info.get('api')}) at {session.endpoint}")

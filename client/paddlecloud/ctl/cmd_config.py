"""paddlectl's config commands: config init, use, view (the file at $PADDLE_CONFIG or ~/.paddle/config)."""

from __future__ import annotations

import click

from paddlecloud.ctl.app import AliasGroup, cli, password_from, state, warn
from paddlecloud.ctl.output import config_table
from paddlecloud.sdk import config as configfile
from paddlecloud.sdk.errors import UsageProblem
from paddlecloud.sdk.session import Session


@cli.group(cls=AliasGroup, short_help="Write, switch and show the config file (~/.paddle/config).")
def config() -> None:
    """The config file: $PADDLE_CONFIG or ~/.paddle/config (see `config init`)."""


@config.command("init", short_help="Add a datacenter to the config file (and make it current).")
@click.option("--endpoint", "-endpoint", required=True, help="The portal's URL, e.g. http://127.0.0.1:8000.")
@click.option("--username", "-username", required=True)
@click.option("--password", "-password", default=None, help="Better: --password-stdin.")
@click.option("--password-stdin", "-password-stdin", "password_stdin", is_flag=True,
              help="Read the password from standard input.")
@click.option("--datacenter", "-datacenter", default=None,
              help="The datacenter's name on the portal (default: the only one you may use).")
@click.option("--name", "-name", default=None, help="Your label for it in the file (default: the datacenter).")
@click.option("--save-password/--no-save-password", default=True, show_default=True,
              help="Keep the password in the file (as the original did) or only the token in the cache.")
@click.pass_context
def config_init(ctx: click.Context, endpoint: str, username: str, password: str | None, password_stdin: bool,
                datacenter: str | None, name: str | None, save_password: bool) -> None:
    """Write (or update) the config file without questions, checking the login when a password is given.

    \b
    echo "$PASSWORD" | paddlectl config init --endpoint http://127.0.0.1:8000 \\
        --username demo --password-stdin --datacenter local
    """
    endpoint = endpoint.strip().rstrip("/")
    problem = configfile.check_endpoint(endpoint)
    if problem:
        raise UsageProblem(f"--endpoint: {problem}")
    password = password_from(password, password_stdin, "--password", f"Password for {username} at {endpoint}")
    path = state(ctx).config_path
    probe = configfile.Datacenter(name=name or datacenter or "?", username=username, endpoint=endpoint,
                                  password=password, portal_name=datacenter or "?")
    if password is not None:
        session = Session(probe, config_path=path)
        session.login(password)  # checks the endpoint and the password now, and caches the token
        if datacenter is None:
            usable = [d["name"] for d in session.paginate("/datacenters")]
            if len(usable) != 1:
                raise UsageProblem(f"--datacenter is required: you may use {', '.join(usable) or 'none'}")
            datacenter = usable[0]
    elif datacenter is None:
        raise UsageProblem("--datacenter is required when no password is given")
    entry = configfile.Datacenter(
        name=name or datacenter, username=username, endpoint=endpoint,
        password=password if save_password else None, portal_name=datacenter,
    )
    configfile.save_entry(path, entry)
    saved = "" if save_password or password is None else " (password not saved; the token is cached)"
    click.echo(f"wrote {configfile.shown(path)}: {entry.name} at {endpoint} as {username}, current{saved}")


@config.command("use", short_help="Switch the current datacenter.")
@click.argument("name")
@click.pass_context
def config_use(ctx: click.Context, name: str) -> None:
    path = state(ctx).config_path
    updated = configfile.set_current(path, name)
    entry = updated.current()
    click.echo(f"current datacenter: {entry.name} ({entry.endpoint} as {entry.username})")


@config.command("view", short_help="Show the configured datacenters (passwords hidden).")
@click.pass_context
def config_view(ctx: click.Context) -> None:
    config_ = configfile.load(state(ctx).config_path)
    for message in config_.warnings:
        warn(message)
    click.echo(f"# {configfile.shown(config_.path)}")
    click.echo(config_table(config_.datacenters, config_.current_name))

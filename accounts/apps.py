"""Accounts: users come from django.contrib.auth; this app adds API tokens, signup and profile."""

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    label = "accounts"
    verbose_name = "Accounts and API tokens"

    def ready(self) -> None:
        from accounts import signals  # noqa: PLC0415 - models must be loaded first

        signals.connect()

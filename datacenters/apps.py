"""Datacenters: the clusters jobs run on, their storage, and per-user quotas."""

from django.apps import AppConfig


class DatacentersConfig(AppConfig):
    name = "datacenters"
    label = "datacenters"
    verbose_name = "Datacenters and quotas"

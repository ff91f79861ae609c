"""Datacenters: the clusters jobs run on, their storage, and per-user quotas."""

from django.apps import AppConfig
from django.db.models.signals import post_save


class DatacentersConfig(AppConfig):
    name = "datacenters"
    label = "datacenters"
    verbose_name = "Datacenters and quotas"

    def ready(self) -> None:
        # In ready(), not at the top: these import models, which Django allows only once its app registry is ready.
        from datacenters import newcomers  # noqa: PLC0415
        from datacenters.models import Datacenter  # noqa: PLC0415

        post_save.connect(newcomers.datacenter_made, sender=Datacenter, dispatch_uid="datacenters.newcomers")

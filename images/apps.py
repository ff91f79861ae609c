"""Images: runtime images built in the cluster (a Kaniko Job) from a package folder on the PFS."""

from django.apps import AppConfig


class ImagesConfig(AppConfig):
    name = "images"
    verbose_name = "Image builds"

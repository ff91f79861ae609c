"""Images: runtime images built in the cluster (a Kaniko Job) from a package folder on the PFS."""

from django.apps import AppConfig


class ImagesConfig(AppConfig):
    name = "images"
    verbose_name = "Image builds"

    def ready(self) -> None:
        # jobs never imports images: a job naming a build reaches it through these hooks.
        from images import jobs_on_builds  # noqa: PLC0415 - apps are importable only once the registry is ready
        from jobs import hooks  # noqa: PLC0415

        hooks.register(
            spec_check=jobs_on_builds.check_build,
            start_gate=jobs_on_builds.gate,
            image_sources=jobs_on_builds.builds_of,
        )

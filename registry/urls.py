"""Registry logins' routes, mounted by the portal like every app's."""

from django.urls import URLPattern, URLResolver, path
from rest_framework.routers import SimpleRouter

from registry import views
from registry.api import RegistrySecretViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # paddlectl calls paths both with and without the slash
router.register("registry", RegistrySecretViewSet, basename="registry")

page_urlpatterns: list[URLPattern] = [
    path("registries/", views.registry_list, name="registries"),
    path("registries/<str:name>/delete", views.registry_delete, name="registries-delete"),
]

api_urlpatterns: list[URLPattern | URLResolver] = list(router.urls)

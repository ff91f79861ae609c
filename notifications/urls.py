"""Notifications' routes, mounted by the portal like every app's."""

from django.urls import URLPattern, path

from notifications import views
from notifications.api import NotifyPreferenceView

page_urlpatterns: list[URLPattern] = [
    path("profile/notifications/", views.settings_page, name="notifications"),
    path("profile/notifications/test", views.send_test, name="notifications-test"),
    path("profile/notifications/last-test", views.last_test, name="notifications-last-test"),
]

api_urlpatterns: list[URLPattern] = [
    path("notifications", NotifyPreferenceView.as_view(), name="api-notifications"),
]

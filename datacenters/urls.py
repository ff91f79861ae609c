"""Datacenters' routes (and each user's quota), mounted by the portal like every app's."""

from django.urls import URLPattern, path

from datacenters import api, views

page_urlpatterns: list[URLPattern] = [
    path("quota/", views.quota_page, name="quota"),
]

api_urlpatterns: list[URLPattern] = [
    path("datacenters", api.DatacenterList.as_view(), name="api-datacenters"),
    path("datacenters/<str:name>", api.DatacenterDetail.as_view(), name="api-datacenter"),
    path("quota", api.QuotaView.as_view(), name="api-quota"),
    path("quota/<str:datacenter>/<str:username>", api.QuotaAdminView.as_view(), name="api-quota-admin"),
]

"""The quota page: compute and storage limits of each datacenter the user may use, with usage bars."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from datacenters import quota
from datacenters.models import Datacenter


@login_required
def quota_page(request: HttpRequest) -> HttpResponse:
    reports = [quota.report(request.user, dc) for dc in Datacenter.objects.usable_by(request.user)]
    return render(request, "datacenters/quota.html", {"quotas": reports})

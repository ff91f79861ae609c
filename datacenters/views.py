"""The quota page: each datacenter's limits and usage bars, with the team guarantee and capacity that also bound."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from datacenters import quota
from datacenters.capacity import capacity
from datacenters.models import Datacenter, team_of


@login_required
def quota_page(request: HttpRequest) -> HttpResponse:
    reports = []
    for datacenter in Datacenter.objects.usable_by(request.user):
        report = quota.report(request.user, datacenter)
        # What also bounds the user's jobs there: their team's guarantee and the datacenter's capacity.
        report["team"] = team_of(request.user, datacenter)
        report["capacity"] = capacity(datacenter).as_json()
        reports.append(report)
    return render(request, "datacenters/quota.html", {"quotas": reports})

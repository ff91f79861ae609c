"""Priority classes in the admin: operators list, add and edit them; the default class cannot be renamed or deleted."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from jobs.models import PriorityClass
from jobs.scheduling import priorities
from tests.pages.test_pages import page_client

pytestmark = pytest.mark.django_db


def test_an_operator_lists_adds_and_edits_priority_classes(carol: User, alice: User) -> None:
    priorities.ensure_classes()
    client = page_client(carol)
    listing = client.get("/admin/jobs/priorityclass/").content.decode()
    assert all(name in listing for name in ("low", "normal", "high"))
    added = client.post("/admin/jobs/priorityclass/add/", {
        "name": "deadline", "value": "5000", "open_to_all": "", "may_opt_out": "on", "users": [alice.pk],
        "description": "The paper's last week",
    })  # fmt: skip
    assert added.status_code == 302, added.content.decode()[:2000]
    deadline = PriorityClass.objects.get(name="deadline")
    assert (deadline.value, deadline.open_to_all, list(deadline.users.all())) == (5000, False, [alice])
    refused = client.post("/admin/jobs/priorityclass/add/", {"name": "Not A Label", "value": "1"})
    assert refused.status_code == 200 and not PriorityClass.objects.filter(value=1).exists()  # the form's error


def test_the_default_class_cannot_be_renamed_or_deleted(carol: User) -> None:
    priorities.ensure_classes()
    normal = PriorityClass.objects.get(name=priorities.DEFAULT)
    low = PriorityClass.objects.get(name="low")
    client = page_client(carol)
    edit = {"name": "renamed", "value": "150", "open_to_all": "on"}
    client.post(f"/admin/jobs/priorityclass/{normal.pk}/change/", edit)
    normal.refresh_from_db()
    assert (normal.name, normal.value) == ("normal", 150)  # its value is an operator's; its name is the default
    assert client.get(f"/admin/jobs/priorityclass/{normal.pk}/delete/").status_code == 403
    both = {"action": "delete_selected", "_selected_action": [normal.pk, low.pk], "post": "yes"}
    assert client.post("/admin/jobs/priorityclass/", both).status_code == 403  # the bulk action refuses it whole
    assert PriorityClass.objects.count() == 3
    client.post("/admin/jobs/priorityclass/", {**both, "_selected_action": [low.pk]})
    assert set(PriorityClass.objects.values_list("name", flat=True)) == {"normal", "high"}


def test_users_cannot_reach_the_admins_classes(alice: User) -> None:
    answer = page_client(alice).get("/admin/jobs/priorityclass/")
    assert answer.status_code == 302 and "/login/" in answer["Location"]

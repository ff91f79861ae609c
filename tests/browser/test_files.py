"""The file browser in a real browser: a new user's empty home keeps its controls and takes an upload."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from datacenters.models import Datacenter
from tests.browser.conftest import Page

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_new_user_uploads_a_folder_into_an_empty_home_and_makes_a_folder(
    logged_in: Page, local_dc: Datacenter, alice: User, tmp_path: Path
) -> None:
    home = Path(local_dc.storage_root) / "home" / "alice"
    assert not home.exists()  # a new user: the page makes the home, empty
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "train.txt").write_text("1,2\n")

    logged_in.goto("/files/")
    page = logged_in.page
    assert page.text_content('[data-testid="empty-folder"]') == "Empty folder."
    assert page.is_visible('[data-testid="mkdir"]') and page.is_visible('[data-testid="storage-quota"]')
    logged_in.screenshot("file-browser-empty")

    with page.expect_navigation(timeout=60_000):  # the page reloads once the upload is done
        page.set_input_files('[data-testid="upload-folder"]', str(folder))
    page.wait_for_selector('a.dir:text-is("data/")')
    assert page.locator('[data-testid="empty-folder"]').count() == 0
    assert (home / "data" / "train.txt").read_text() == "1,2\n"

    page.click('a.dir:text-is("data/")')
    page.fill('[data-testid="mkdir-name"]', "inner")
    page.click('[data-testid="mkdir"]')
    page.click('a.dir:text-is("inner/")')
    page.wait_for_selector('[data-testid="empty-folder"]')  # an empty sub-folder keeps its controls too
    assert page.is_visible('[data-testid="mkdir"]') and page.locator('[data-testid="upload-files"]').count() == 1
    assert (home / "data" / "inner").is_dir()
    assert logged_in.problems == []

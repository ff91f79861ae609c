"""manage.py rotate_encryption_key: re-encrypt every stored secret with the newest key.

Put the new key first in PADDLECLOUD_ENCRYPTION_KEY (keep the old ones after it), run this, then
drop the old keys.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand
from django.db import transaction

from core.crypto import encrypted_fields


class Command(BaseCommand):
    help = "Re-encrypt every encrypted column with the first key of PADDLECLOUD_ENCRYPTION_KEY."

    def handle(self, *args: Any, **options: Any) -> None:
        total = 0
        for model in apps.get_models():
            names = encrypted_fields(model)
            if not names:
                continue
            count = 0
            for row in model._default_manager.all().only("pk", *names).iterator():
                # Reading decrypts with any key; update() encrypts with the newest.
                with transaction.atomic():
                    model._default_manager.filter(pk=row.pk).update(**{n: getattr(row, n) for n in names})
                count += 1
            total += count
            self.stdout.write(f"{model._meta.label}: re-encrypted {count} row(s) ({', '.join(names)})")
        self.stdout.write(f"done: {total} row(s)")

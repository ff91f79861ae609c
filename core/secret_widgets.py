"""Admin form support for write-only secrets: never rendered back, blank on edit keeps the old one."""

from __future__ import annotations

from typing import Any

from django import forms


class WriteOnlySecretField(forms.CharField):
    widget = forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"})

    def __init__(self, *args: Any, textarea: bool = False, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        if textarea:
            # A Textarea would echo the value, so it is always rendered empty.
            kwargs["widget"] = forms.Textarea(attrs={"rows": 4, "placeholder": "(unchanged)"})
        super().__init__(*args, **kwargs)

    def prepare_value(self, value: Any) -> str:
        return ""


class WriteOnlySecretsForm(forms.ModelForm):  # type: ignore[type-arg]
    """Keeps the stored value of each secret field left blank while editing."""

    secret_fields: tuple[str, ...] = ()
    required_secrets: tuple[str, ...] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in self.secret_fields:
            field = self.fields[name]
            stored = bool(self.instance.pk and getattr(self.instance, name))
            field.help_text = ("A value is stored; leave blank to keep it. " if stored else "") + str(
                field.help_text or ""
            )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for name in self.secret_fields:
            if not cleaned.get(name) and self.instance.pk:
                cleaned[name] = getattr(type(self.instance).objects.get(pk=self.instance.pk), name)
                setattr(self.instance, name, cleaned[name])
            if name in self.required_secrets and not cleaned.get(name):
                self.add_error(name, "This field is required.")
        return cleaned

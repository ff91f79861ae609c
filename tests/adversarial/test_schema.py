"""The OpenAPI schema documents every operation's error responses with the one Error component."""

from __future__ import annotations

from tests.adversarial.conftest import operations, schema

ERROR_REF = "#/components/schemas/Error"
PUBLIC = {("GET", "/api/v1/version"), ("POST", "/api/v1/auth/token"), ("POST", "/api-token-auth/")}
LOGINS = {("POST", "/api/v1/auth/token"), ("POST", "/api-token-auth/")}


def test_every_operation_documents_its_errors_with_the_error_schema() -> None:
    for method, path in operations():
        responses = schema()["paths"][path][method.lower()]["responses"]
        expected = set()
        if (method, path) not in PUBLIC:
            expected |= {"401", "403", "404"}
        if method in ("POST", "PUT", "PATCH"):
            expected |= {"400", "413", "415"}
        if (method, path) in LOGINS:
            expected |= {"401", "403", "429"}
        missing = expected - set(responses)
        assert not missing, f"{method} {path} does not document {sorted(missing)}"
        for code, response in responses.items():
            if code >= "400":
                assert response["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}, (method, path, code)


def test_the_error_component_is_the_shape_errors_py_answers() -> None:
    components = schema()["components"]["schemas"]
    assert set(components["Error"]["required"]) == {"detail", "code", "errors"}
    assert components["Error"]["properties"]["errors"]["items"] == {"$ref": "#/components/schemas/ErrorItem"}
    assert set(components["ErrorItem"]["properties"]) == {"field", "code", "message"}
    assert components["ErrorItem"]["properties"]["field"]["nullable"] is True


def test_upload_fields_that_some_answers_omit_are_not_required() -> None:
    upload = schema()["components"]["schemas"]["Upload"]
    assert {"received", "present", "wrong", "missing"}.isdisjoint(upload["required"])
    assert {"id", "path", "state"} <= set(upload["required"])

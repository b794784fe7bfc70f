"""Every /api/ route is documented with its request, response and error schemas."""

from __future__ import annotations


def test_openapi__every_route_documents_auth_success_and_errors(client):
    schema = client.get("/api/openapi.json").json()
    operations = [
        (path, method, op)
        for path, item in schema["paths"].items()
        if path.startswith("/api/")
        for method, op in item.items()
    ]

    # with POST /api/runs/{id}/fork, GET /api/runs/{id}/streams/{name} (Server-Sent Events) and the
    # four bulk routes
    assert len(operations) == 20
    for path, method, op in operations:
        where = f"{method.upper()} {path}"
        assert op.get("security") == [{"ApiKeyAuth": []}], where
        assert op.get("summary") and op.get("description"), where
        codes = set(op["responses"])
        assert "401" in codes and codes & {"200", "201", "202"}, where
        for code in codes - {"200", "201", "202"}:
            ref = op["responses"][code]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorOut"), where
        if method == "post" and "actions" not in path:
            assert "requestBody" in op, where
    assert schema["components"]["securitySchemes"]["ApiKeyAuth"] == {"type": "http", "scheme": "bearer"}


def test_docs_page__is_served(client):
    response = client.get("/api/docs")

    assert response.status_code == 200
    assert b"openapi.json" in response.content

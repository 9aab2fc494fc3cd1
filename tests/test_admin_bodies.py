"""Every admin endpoint answers a bad body (not JSON, deeply nested, wrong types, huge numbers,
unknown fields) with 400 and a clear message, over the real HTTP server, and changes nothing."""

import pytest
import requests

from tests.fixtures.observability import clock, status_server  # noqa: F401  (fixtures)

AUTH = {"Authorization": "Bearer s3cret-token"}
PATHS = ("/admin/hold/i-idle", "/admin/release/i-idle", "/admin/drain/i-idle", "/admin/cancel/i-idle",
         "/admin/pause", "/admin/resume")
DEEP = b"[" * 2000 + b"]" * 2000                       # under the 4 KiB body cap
BAD_BODIES = {
    "nested arrays": DEEP,
    "nested in an object": b'{"reason": ' + b"[" * 2000 + b"]" * 2000 + b"}",
    "nested objects": b'{"reason": ' + b'{"a":' * 600 + b'"x"' + b"}" * 600 + b"}",
    "not JSON": b"{nope",
    "not UTF-8": b'{"reason": "\xff\xfe"}',
    "a string": b'"pause please"',
    "null": b"null",
    "a number reason": b'{"reason": 5}',
    "a huge number": b'{"reason": 1e999}',
    "4000 digits": b'{"reason": ' + b"9" * 4000 + b"}",
    "NaN": b'{"reason": NaN}',
    "a list reason": b'{"reason": ["a"]}',
    "true": b'{"reason": true}',
    "an unknown field": b'{"reason": "disk", "node": "i-busy"}',
}


@pytest.mark.parametrize("path", PATHS)
def test_a_bad_admin_body_is_a_400_naming_what_is_wrong_and_changes_nothing(status_server, path):  # noqa: F811
    before = status_server.admin.to_json()
    for what, body in BAD_BODIES.items():
        resp = requests.post(status_server.url + path, headers={**AUTH, "Content-Type": "application/json"},
                             data=body, timeout=10)
        assert resp.status_code == 400, (what, resp.status_code, resp.text)
        error = resp.json()["error"]
        assert error.startswith(path.split("/")[2] + ": ") and "internal" not in error, (what, error)
    assert status_server.admin.to_json() == before


def test_the_messages_say_what_is_wrong(status_server):  # noqa: F811
    def error(body):
        return requests.post(status_server.url + "/admin/pause", headers=AUTH, data=body,
                             timeout=10).json()["error"]
    assert error(DEEP) == 'pause: body must be a JSON object: expected an empty body or {"reason": "..."}'
    assert error(BAD_BODIES["nested in an object"]).startswith("pause: body is nested too deeply")
    assert error(BAD_BODIES["a huge number"]).startswith("pause: numbers are not taken here (1e999)")
    assert error(BAD_BODIES["an unknown field"]) == "pause: unknown field 'node' (known: reason)"
    assert error(b'{"reason": "a", "x": null}') == "pause: unknown field 'x' (known: reason)"
    assert error(b'{"reason": null}').startswith("pause: reason must be a text, not null")


def test_good_bodies_still_work(status_server):  # noqa: F811
    resp = requests.post(status_server.url + "/admin/pause", headers=AUTH,
                         json={"reason": "disk swap\x07 tonight"}, timeout=10)
    assert resp.status_code == 200 and status_server.admin.paused == "disk swap tonight"
    for path in PATHS[:4]:
        assert requests.post(status_server.url + path, headers=AUTH, timeout=10).status_code == 200
    assert requests.post(status_server.url + "/admin/resume", headers=AUTH, data=b"{}", timeout=10).status_code == 200
    assert status_server.admin.paused is None

"""Odd requests to Rojo's MCP endpoint, against a real server process: raw HTTP for what no
well-behaved client sends, and the SDK's own client where one can send it.

Each is answered in a few words that say what to send instead, with the JSON-RPC error
the transport's rules give, and nothing in it is run or stored.
"""

import json
import re

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from roject.identity.tokens import api_token_create
from roject.storage import project_root_create
from rojos.models import Message
from tests.support.mcp_clients import mcp_url, with_mcp

pytestmark = pytest.mark.django_db(transaction=True)

SERVED = [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS]
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
CREATE_D = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "tools/call",
    "params": {"name": "create_directory", "arguments": {"path": "d"}},
}


@pytest.fixture
def server(module_server):
    return module_server


@pytest.fixture
def secret(users) -> str:
    return api_token_create(user=users["editor"], name="agent").secret


def _post(server, project, secret: str, body, **headers: str) -> httpx2.Response:
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {secret}", **headers}
    url = mcp_url(server.base_url, project.pk)
    if isinstance(body, bytes):
        return httpx2.post(
            url, content=body, headers={"Content-Type": "application/json", **headers}
        )
    return httpx2.post(url, json=body, headers=headers)


@pytest.mark.parametrize(
    "body",
    [CREATE_D, {"jsonrpc": "2.0", "method": "notifications/initialized"}],
    ids=["request", "notification"],
)
def test_a_protocol_version_not_served_is_400_naming_those_that_are(server, project, secret, body):
    """An MCP-Protocol-Version the server does not speak is answered 400, as the transport
    says a server MUST, with the 2026 protocol's unsupported-version error (-32022) whose
    message and `data.supported` name the versions served; before, a request without the
    2026 `_meta` was told that `params._meta` lacked its envelope keys. Nothing is run."""
    answer = _post(server, project, secret, body, **{"MCP-Protocol-Version": "2025-13-01"})

    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == -32022
    assert error["message"] == (
        "Unsupported protocol version '2025-13-01' (MCP-Protocol-Version): this server "
        "speaks " + ", ".join(SERVED)
    )
    assert error["data"] == {"supported": SERVED, "requested": "2025-13-01"}
    assert not (project_root_create(project.pk) / "d").exists()
    assert Message.objects.count() == 0


def test_the_sdks_client_sending_a_wrong_version_is_told_the_ones_served(server, project, secret):
    """The SDK's client, its HTTP client set to send a version that does not exist, fails
    to connect with an error naming the versions this server speaks."""
    with pytest.raises(ExceptionGroup) as refused:  # from the SDK's task group
        with_mcp(
            mcp_url(server.base_url, project.pk),
            secret,
            lambda client: client.list_tools(),
            headers={"MCP-Protocol-Version": "2025-13-01"},
        )
    said = (
        re.escape("Unsupported protocol version '2025-13-01'") + ".*" + re.escape(", ".join(SERVED))
    )
    assert refused.group_contains(MCPError, match=said)


def test_a_future_clients_probe_is_answered_with_a_version_it_can_retry_at(server, project, secret):
    """A client newer than the server probes server/discover at its own version (here the
    SDK's client, asked to probe at one to come): the -32022 answer lists 2026-07-28 among
    the versions served, and the probe at that version succeeds."""

    async def probe(client):
        try:
            await client.session.send_discover("2027-01-01")
        except MCPError as exc:
            retried = await client.session.send_discover(exc.error.data["supported"][-1])
            return exc, retried
        raise AssertionError("a probe at 2027-01-01 was served")

    refused, retried = with_mcp(mcp_url(server.base_url, project.pk), secret, probe)
    assert (refused.error.code, refused.error.data["supported"]) == (-32022, SERVED)
    assert "2026-07-28" in retried["supportedVersions"]


def test_a_long_version_is_named_cut(server, project, secret):
    """A version kilobytes long is named by its first 64 characters."""
    answer = _post(server, project, secret, CREATE_D, **{"MCP-Protocol-Version": "9" * 5000})
    assert answer.status_code == 400
    assert answer.json()["error"]["data"]["requested"] == "9" * 64 + "…"


@pytest.mark.parametrize("content_type", ["text/plain", None])
def test_a_body_not_sent_as_json_is_415_saying_so(server, project, secret, content_type):
    """A message sent as text/plain, or with no Content-Type, is answered 415 with a
    JSON-RPC error saying to send application/json; before, the SDK's transport security
    answered a bare 400 in plain text, "Invalid Content-Type header". Nothing is run."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {secret}"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    url = mcp_url(server.base_url, project.pk)

    answer = httpx2.post(url, content=json.dumps(CREATE_D).encode(), headers=headers)

    assert answer.status_code == 415, answer.text
    named = "Content-Type 'text/plain'" if content_type else "No Content-Type"
    assert answer.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"{named}: send the JSON-RPC message as application/json",
        },
    }
    assert not (project_root_create(project.pk) / "d").exists()


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"42", "The body is a number, not a JSON-RPC message"),
        (b'"ping"', "The body is a string, not a JSON-RPC message"),
        (b"null", "The body is null, not a JSON-RPC message"),
        (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', '"jsonrpc" must be "2.0"'),
        (b'{"jsonrpc": "2.0", "id": 1}', 'The message has no "method"'),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', '"method" must be a string'),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', '"params" must be'),
        (b'{"jsonrpc": "2.0", "id": 1, "result": 5}', '"result" must be an object'),
        (b'{"jsonrpc": "2.0", "id": 1, "error": "no"}', '"error" must be an object'),
    ],
)
def test_json_of_the_wrong_shape_is_an_invalid_request_saying_what_is_wrong(
    server, project, secret, body, said
):
    """JSON that is not one JSON-RPC message is answered 400 with -32600 (invalid request)
    in a line that says what is wrong; before, the SDK answered -32602 (invalid params)
    with up to seven pydantic reports naming its model classes."""
    answer = _post(server, project, secret, body)

    assert answer.status_code == 400, answer.text
    assert answer.json()["id"] is None
    error = answer.json()["error"]
    assert error["code"] == -32600
    assert error["message"].startswith(f"Invalid request: {said}")
    assert "pydantic" not in error["message"] and len(error["message"]) < 200


@pytest.mark.parametrize("request_id", ["1.5", "1.0", "true", "null", "{}", "[1]"])
def test_a_request_whose_id_is_no_string_or_whole_number_is_refused_not_dropped(
    server, project, secret, request_id
):
    """A request whose id is not a string or a whole number is refused with -32600, never
    run; before, the SDK took it for a notification and answered 202, so the client waited
    for good for an answer that never came, and a tools/call ran."""
    body = json.dumps(CREATE_D).replace('"id": 7', f'"id": {request_id}').encode()

    answer = _post(server, project, secret, body)

    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == {
        "code": -32600,
        "message": 'Invalid request: "id" must be a string or a whole number '
        "(leave it out for a notification)",
    }
    assert not (project_root_create(project.pk) / "d").exists()
    assert Message.objects.count() == 0


@pytest.mark.parametrize(
    "version", [None, "2025-06-18", "2026-07-28"], ids=["no version", "2025", "2026"]
)
def test_a_body_that_is_not_json_is_a_parse_error_and_big_ids_are_echoed(
    server, project, secret, version
):
    """A body cut short is -32700 (parse error) saying where; a request whose id is a whole
    number beyond 64 bits is answered with that id, whole, at every version."""
    headers = {} if version is None else {"MCP-Protocol-Version": version}

    cut = _post(server, project, secret, b'{"jsonrpc": "2.0", "id": 1,', **headers)
    big = _post(
        server,
        project,
        secret,
        b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}',
    )

    assert cut.status_code == 400
    assert cut.json()["error"]["code"] == -32700
    assert cut.json()["error"]["message"].startswith("Parse error: the body is not JSON (EOF")
    assert (big.status_code, big.json()["id"]) == (200, 123456789012345678901234567890)


def test_half_an_emoji_in_a_calls_arguments_is_written_as_the_replacement_character(
    server, project, secret
):
    """Arguments holding a lone surrogate escape (an emoji cut in two, as a JavaScript
    client's JSON.stringify writes it) run, that half written as U+FFFD, as the API and the
    providers' streams have it; before, the SDK's parser refused the whole call with a
    parse error. A pair whole is kept as it is."""
    call = {
        **CREATE_D,
        "params": {
            "name": "write_text_content",
            "arguments": {"path": "e.txt", "text": "cut \ud83d, whole \ud83d\ude00"},
        },
    }

    answer = _post(server, project, secret, json.dumps(call).encode())

    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["isError"] is False
    written = (project_root_create(project.pk) / "e.txt").read_text()
    assert written == "cut \ufffd, whole \U0001f600"


def test_a_nul_in_a_calls_arguments_is_written_as_the_replacement_character(
    server, project, secret
):
    """A NUL escape in the arguments (no store keeps one: PostgreSQL's jsonb refuses it, so
    the call's record could not be stored) is written as U+FFFD, as the API has it, and the
    call runs and is kept."""
    call = {
        **CREATE_D,
        "params": {"name": "write_text_content", "arguments": {"path": "n.txt", "text": "a\0b"}},
    }

    answer = _post(server, project, secret, json.dumps(call).encode())

    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["isError"] is False
    assert (project_root_create(project.pk) / "n.txt").read_text() == "a\ufffdb"
    stored = Message.objects.filter(role="assistant").values_list("tool_calls", flat=True)
    assert "\ufffd" in json.dumps(list(stored), ensure_ascii=False)


@pytest.mark.parametrize("version", [None, "2026-07-28"], ids=["2025", "2026"])
@pytest.mark.parametrize("accept", [None, "text/event-stream"])
def test_a_client_that_does_not_accept_json_is_406_saying_what_to_accept(
    server, project, secret, version, accept
):
    """A request whose Accept leaves out application/json (or that sends none) is answered
    406 with a JSON-RPC error saying what to accept, at every version; before, the SDK
    answered a bare 406 with no body at 2026-07-28."""
    headers = {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}
    if accept is not None:
        headers["Accept"] = accept
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    url = mcp_url(server.base_url, project.pk)

    with httpx2.Client() as client:
        del client.headers["Accept"]  # httpx's own default, */*, is not sent
        answer = client.post(url, content=json.dumps(CREATE_D).encode(), headers=headers)

    assert answer.status_code == 406, answer.text
    assert answer.json()["error"] == {
        "code": -32600,
        "message": "Not Acceptable: accept application/json and text/event-stream (Accept header)",
    }
    assert not (project_root_create(project.pk) / "d").exists()

"""ROJO_LOG_FORMAT=json: a server process's every line is one JSON object, with the request's
id where there is a request, and no secret of the process's."""

import json

import httpx2
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_server_logs_json_lines_with_the_request_id(server_process):
    server = server_process(ROJO_LOG_FORMAT="json", ROJO_KEY_SOMETHING="sk-never-logged-42")

    httpx2.get(server.base_url + "/accounts/login/", headers={"X-Request-ID": "req-7f3a"})
    httpx2.get(server.base_url + "/accounts/login/", headers={"X-Request-ID": "<script>"})
    server.stop()

    lines = [json.loads(line) for line in server.log().splitlines() if line.strip()]
    assert lines, "the server logged nothing"
    access = [
        line
        for line in lines
        if line["logger"] == "uvicorn.access" and "/accounts/login/" in line["message"]
    ]
    assert access[0]["request_id"] == "req-7f3a"
    assert access[1]["request_id"] != "<script>"  # made up here, not taken from a header
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert "sk-never-logged-42" not in server.log()

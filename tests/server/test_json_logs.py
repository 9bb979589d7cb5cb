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


def test_the_image_command_logs_its_start_as_json_lines_too(server_process):
    """`manage.py serve` (the image's command) wrote the migrations and the doctor's findings
    as plain text before the server's JSON lines: a log pipeline that reads JSON lost the
    start's errors, the ones that say why a process is not ready."""
    server = server_process(
        "serve", ROJO_LOG_FORMAT="json", ROJO_PUBLIC_URL="https://chat.example.com",
        ALLOWED_HOSTS="127.0.0.1",
    )  # fmt: skip
    server.stop()

    lines = [json.loads(line) for line in server.log().splitlines() if line.strip()]
    messages = [line["message"] for line in lines]
    assert any(m.startswith("Running migrations") for m in messages), messages
    doctor = [line for line in lines if line["message"].startswith("doctor: ERROR")]
    assert doctor and {line["level"] for line in doctor} == {"error"}, lines
    assert any("allowed-hosts-url" in line["message"] for line in doctor)

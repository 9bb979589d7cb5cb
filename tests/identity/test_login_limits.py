"""Failed logins are limited per username and per client address, on the site's login form and
the admin's: past the limit a readable refusal that says when to try again, never a 500."""

import os
import re
import threading
import time
import uuid

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from playwright.sync_api import expect

from tests.conftest import make_user
from tests.support.browser import screenshot

pytestmark = pytest.mark.django_db

LOGINS = {"site": "/login/", "admin": "/admin/login/"}
DID_NOT_MATCH = {
    "site": "Your username and password did not match.",
    "admin": "Please enter the correct username and password for a staff account.",
}


@pytest.fixture(autouse=True)
def limits(settings):
    settings.ROJO_LOGIN_USER_FAILURES = 3
    settings.ROJO_LOGIN_ADDRESS_FAILURES = 6
    settings.ROJO_LOGIN_LOCKOUT_SECONDS = 600
    settings.ROJO_PROXY_COUNT = 0


@pytest.fixture
def staff(db):
    user = make_user("staffer")
    user.is_staff = True
    user.save()
    return user


def log_in(login: str, username: str, password: str, address: str = "198.51.100.1", **headers):
    """Post the login form from `address`; the response, and whether a session was started."""
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        LOGINS[login], {"username": username, "password": password}, headers=headers
    )
    return response, settings.SESSION_COOKIE_NAME in client.cookies


def assert_refused(response, *, within: int) -> None:
    """A 429 page with the sentence that says when to try again, and Retry-After."""
    assert response.status_code == 429
    page = response.content.decode()
    match = re.search(r"Too many failed logins[^<]*Try again in (\d+) (minute|second)s?\.", page)
    assert match, page
    wait = int(match.group(1)) * (60 if match.group(2) == "minute" else 1)
    assert 0 < wait <= within
    assert 0 < int(response.headers["Retry-After"]) <= within
    assert "Traceback" not in page


def alerts(response) -> list[str]:
    return re.findall(r'<p class="form-error" role="alert">(.*?)</p>', response.content.decode())


@pytest.mark.parametrize("login", LOGINS)
def test_a_username_is_locked_after_its_failures_even_with_the_right_password(login, staff):
    """Three wrong passwords are answered as wrong; the fourth attempt, even with the right
    password and from another address, is refused with when to try again."""
    for n in range(3):
        response, session = log_in(login, "staffer", f"wrong-{n}", address=f"198.51.100.{n}")
        assert response.status_code == 200
        assert DID_NOT_MATCH[login] in response.content.decode()
        assert not session

    response, session = log_in(login, "staffer", "pw-staffer", address="198.51.100.99")

    assert_refused(response, within=600)
    assert not session


def test_the_site_and_the_admin_count_together(staff):
    """Guesses cannot be spread over the two login pages."""
    log_in("site", "staffer", "wrong-1")
    log_in("admin", "staffer", "wrong-2")
    log_in("site", "staffer", "wrong-3")

    response, _ = log_in("admin", "staffer", "pw-staffer")

    assert_refused(response, within=600)


@pytest.mark.parametrize("login", LOGINS)
def test_an_address_is_locked_after_its_failures_whatever_the_username(login, staff):
    """Six failures from one address, each for another username (existing or not): then the
    address is refused, a correct login from it too; other addresses log in."""
    names = ["owner", "ghost-1", "ghost-2", "ghost-3", "ghost-4", "ghost-5"]
    for name in names:
        response, _ = log_in(login, name, "wrong", address="203.0.113.7")
        assert response.status_code == 200

    locked, session = log_in(login, "staffer", "pw-staffer", address="203.0.113.7")
    elsewhere, other_session = log_in(login, "staffer", "pw-staffer", address="203.0.113.8")

    assert_refused(locked, within=600)
    assert not session
    assert elsewhere.status_code == 302 and other_session


def test_a_refusal_is_the_same_for_a_username_that_does_not_exist(users):
    """The lockout tells nothing of which accounts exist."""
    for n in range(3):
        log_in("site", "owner", "wrong", address=f"198.51.100.{n}")
        log_in("site", "nobody-here", "wrong", address=f"198.51.100.{n}")

    real, _ = log_in("site", "owner", "wrong", address="198.51.100.50")
    missing, _ = log_in("site", "nobody-here", "wrong", address="198.51.100.50")

    assert_refused(real, within=600)
    assert_refused(missing, within=600)
    assert alerts(real) == alerts(missing) and len(alerts(real)) == 1


def test_the_right_password_forgives_the_usernames_failures(users):
    """A user who mistyped twice and then logged in starts afresh."""
    log_in("site", "owner", "wrong-1")
    log_in("site", "owner", "wrong-2")
    response, session = log_in("site", "owner", "pw-owner")
    assert response.status_code == 302 and session

    for n in range(3):
        response, _ = log_in("site", "owner", f"wrong-again-{n}")
        assert response.status_code == 200
    assert_refused(log_in("site", "owner", "pw-owner")[0], within=600)


def test_the_right_password_works_once_the_lockout_has_expired(users, settings):
    settings.ROJO_LOGIN_LOCKOUT_SECONDS = 2
    for n in range(3):
        log_in("site", "owner", f"wrong-{n}")
    refused, _ = log_in("site", "owner", "pw-owner")
    assert_refused(refused, within=2)

    time.sleep(int(refused["Retry-After"]) + 0.2)
    response, session = log_in("site", "owner", "pw-owner")

    assert response.status_code == 302 and session


def test_behind_a_proxy_the_address_it_saw_is_counted_not_the_clients_word(users, settings):
    """With ROJO_PROXY_COUNT=1 every request comes from the proxy's address; the limit counts
    the last X-Forwarded-For entry (what the proxy added), whatever the client put before."""
    settings.ROJO_PROXY_COUNT = 1
    for n in range(6):
        response, _ = log_in(
            "site",
            f"ghost-{n}",
            "wrong",
            address="10.0.0.1",
            X_Forwarded_For=f"1.2.3.{n}, 192.0.2.5",
        )
        assert response.status_code == 200

    spoofed, _ = log_in(
        "site", "owner", "pw-owner", address="10.0.0.1", X_Forwarded_For="9.9.9.9, 192.0.2.5"
    )
    other, session = log_in(
        "site", "owner", "pw-owner", address="10.0.0.1", X_Forwarded_For="192.0.2.6"
    )

    assert_refused(spoofed, within=600)
    assert other.status_code == 302 and session


def test_ipv6_addresses_of_one_network_count_together(users):
    """One client holds a whole /64: its addresses are one address to the limit."""
    for n in range(6):
        log_in("site", f"ghost-{n}", "wrong", address=f"2001:db8:1:2::{n + 1:x}")

    response, _ = log_in("site", "owner", "pw-owner", address="2001:db8:1:2:ffff::1")

    assert_refused(response, within=600)


def test_the_limits_can_be_turned_off(users, settings):
    settings.ROJO_LOGIN_USER_FAILURES = 0
    settings.ROJO_LOGIN_ADDRESS_FAILURES = 0
    for n in range(10):
        assert log_in("site", "owner", f"wrong-{n}")[0].status_code == 200

    assert log_in("site", "owner", "pw-owner")[0].status_code == 302


def test_an_unreachable_cache_refuses_logins_in_words_not_a_500(users, settings):
    """Redis down: the login page says so (503, Retry-After) rather than letting guesses in
    uncounted or failing with a 500."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }

    response, session = log_in("site", "owner", "pw-owner")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "The server cannot check logins right now." in response.content.decode()
    assert not session


@pytest.mark.django_db(transaction=True)
def test_parallel_guesses_on_the_live_server_check_at_most_the_limit(asgi_server, users):
    """Twelve wrong passwords sent at once, over HTTP to the ASGI server: three are checked
    (and answered as wrong), nine are refused. The count is claimed before the check."""
    import httpx2

    answers: list[int] = []
    barrier = threading.Barrier(12)

    def guess(n: int) -> None:
        csrf = _get_new_csrf_string()
        with httpx2.Client(
            base_url=asgi_server, cookies={settings.CSRF_COOKIE_NAME: csrf}, timeout=30
        ) as http:
            barrier.wait()
            response = http.post(
                "/login/",
                data={"username": "owner", "password": f"wrong-{n}", "csrfmiddlewaretoken": csrf},
            )
            answers.append(response.status_code)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert sorted(answers) == [200] * 3 + [429] * 9
    assert get_user_model().objects.get(username="owner").last_login is None


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("login", LOGINS)
def test_the_refusal_reads_on_the_login_page_in_a_browser(page_for, staff, login):
    """What a person sees: the sentence on the page, in place of the form's usual error."""
    page = page_for()
    page.goto(LOGINS[login])
    for attempt in ["wrong-1", "wrong-2", "wrong-3", "pw-staffer"]:
        page.get_by_label("Username").fill("staffer")
        page.get_by_label("Password").fill(attempt)
        page.get_by_role("button", name="Log in").click()
        page.wait_for_load_state()

    error = page.locator(".form-error, .errornote")
    expect(error).to_have_text(
        "Too many failed logins for this username or from your network. Try again in 10 minutes."
    )
    screenshot(page, f"login-refused-{login}")


@pytest.mark.django_db(transaction=True)
def test_parallel_guesses_of_the_old_password_in_the_admin_check_at_most_the_limit(
    server_process,
):
    """A staff session someone else holds cannot guess its password at the admin's password
    change: twelve wrong old passwords sent at once (over two server processes, with Redis)
    are counted as logins, three checked and nine refused; then the right one is refused
    too, the site's login with it, and the password is unchanged."""
    import httpx2

    limits = {
        "ROJO_LOGIN_USER_FAILURES": "3",
        "ROJO_LOGIN_ADDRESS_FAILURES": "6",
        "ROJO_LOGIN_LOCKOUT_SECONDS": "600",
    }
    servers = [server_process(**limits).base_url]
    if os.environ.get("REDIS_URL"):  # the counts are shared across processes through Redis
        servers.append(server_process(**limits).base_url)
    # Redis may be shared with other runs: a name of this run's own counts apart.
    staff = make_user(f"staffer-{uuid.uuid4().hex[:12]}")
    staff.is_staff = True
    staff.save()
    csrf = _get_new_csrf_string()
    session = Client()
    session.force_login(staff)
    cookies = {
        settings.CSRF_COOKIE_NAME: csrf,
        settings.SESSION_COOKIE_NAME: session.cookies[settings.SESSION_COOKIE_NAME].value,
    }
    answers: list[int] = []
    barrier = threading.Barrier(12)

    def post(n: int, path: str, data: dict, *, together: bool = False) -> httpx2.Response:
        with httpx2.Client(base_url=servers[n % len(servers)], cookies=cookies, timeout=60) as http:
            if together:
                barrier.wait()
            return http.post(path, data={**data, "csrfmiddlewaretoken": csrf})

    def change(n: int, old: str, *, together: bool = False) -> httpx2.Response:
        new = "a-new-long-password-9"
        form = {"old_password": old, "new_password1": new, "new_password2": new}
        return post(n, "/admin/password_change/", form, together=together)

    def guess(n: int) -> None:
        answers.append(change(n, f"wrong-{n}", together=True).status_code)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert sorted(answers) == [200] * 3 + [429] * 9
    assert_refused(change(0, f"pw-{staff.username}"), within=600)
    login = {"username": staff.username, "password": f"pw-{staff.username}"}
    assert_refused(post(1, "/login/", login), within=600)
    staff.refresh_from_db()
    assert staff.check_password(f"pw-{staff.username}")


def test_the_right_old_password_changes_it_and_forgives_the_failures(staff):
    """The limits do not get in the way of a person who mistyped once."""
    client = Client(REMOTE_ADDR="198.51.100.1")
    client.force_login(staff)
    form = {"new_password1": "a-new-long-password-9", "new_password2": "a-new-long-password-9"}

    wrong = client.post("/admin/password_change/", {"old_password": "wrong", **form})
    right = client.post("/admin/password_change/", {"old_password": "pw-staffer", **form})

    assert wrong.status_code == 200
    assert "Your old password was entered incorrectly." in wrong.content.decode()
    assert right.status_code == 302 and right["Location"] == "/admin/password_change/done/"
    staff.refresh_from_db()
    assert staff.check_password("a-new-long-password-9")
    for n in range(3):
        assert log_in("site", "staffer", f"wrong-{n}")[0].status_code == 200

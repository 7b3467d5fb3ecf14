"""What a browser client meets: CORS for an allow-list, JSON only (415), HTTPS (issue 26, §3).

Every test runs the services as real processes on loopback. The requests are
those a browser sends (a preflight ``OPTIONS`` with ``Origin`` and
``Access-Control-Request-*``, a ``POST`` with ``Origin``, the ``text/plain``
``POST`` a page on any site can send without a preflight), made with httpx.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest
from _browsers import (
    ALLOWED_ORIGIN,
    OTHER_ORIGIN,
    browser_deployment,
    cors_headers,
    post_body,
    preflight,
    self_signed_certificate,
    serve_over_tls,
    stored_submissions,
)
from _deploy import DOMAIN, expected_counts, make_deployment, stored_counts, wait_until

from shuffledp._validation import InvalidParameterError
from shuffledp.cli import build_parser, main
from shuffledp.service.cors import MAX_AGE_SECONDS, check_origin
from shuffledp.service.shuffler import BATCH_FORMAT, SUBMISSIONS_FORMAT
from shuffledp.service.task import new_id
from shuffledp.service.wire import b64encode

pytestmark = pytest.mark.slow

LOCAL_PAGE = "http://localhost:8000"  # a page served on loopback (development)

#: What an allowed page's answers carry: it may read them, and a 503's Retry-After.
READABLE = {
    "access-control-allow-origin": ALLOWED_ORIGIN,
    "access-control-expose-headers": "Retry-After",
}


def _body(dep, seed=1, value="red"):
    """A well-formed submissions request of one fresh user (bytes, as a page would send)."""
    item = dep.client(seed=seed).prepare(value).to_json()
    return json.dumps({"format": SUBMISSIONS_FORMAT, "submissions": [item]}).encode()


# -- CORS ---------------------------------------------------------------------------------


def test_preflights_answer_the_allowed_origins_only(deploy):
    dep = browser_deployment(deploy, [ALLOWED_ORIGIN, LOCAL_PAGE])
    task_url = f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}"
    for origin in (ALLOWED_ORIGIN, LOCAL_PAGE):
        answer = preflight(dep.submissions_url, origin)
        assert answer.status_code == 204, answer.text
        assert cors_headers(answer) == {
            "access-control-allow-origin": origin,
            "access-control-allow-methods": "POST",
            "access-control-allow-headers": "Content-Type",
            "access-control-max-age": str(MAX_AGE_SECONDS),
        }
        assert answer.headers["vary"] == "Origin"
        on_task = preflight(task_url, origin, method="GET", headers=None)
        assert on_task.status_code == 204
        assert cors_headers(on_task)["access-control-allow-methods"] == "GET"
    # another origin, or an allowed one written otherwise: 403, no CORS header at all
    for origin in (OTHER_ORIGIN, "null", ALLOWED_ORIGIN + "/", "https://SURVEY.example.org"):
        refused = preflight(dep.submissions_url, origin)
        assert refused.status_code == 403, origin
        assert refused.json()["reason"] == "origin_not_allowed"
        assert cors_headers(refused) == {}, origin
        assert refused.headers["vary"] == "Origin"
    # no Origin: not a preflight, the route does not take OPTIONS (as before)
    plain = preflight(dep.submissions_url, None)
    assert plain.status_code == 405 and cors_headers(plain) == {}
    # other routes take no part
    health = preflight(f"{dep.shuffler.url}/v1/health", ALLOWED_ORIGIN, method="GET")
    assert health.status_code == 405 and cors_headers(health) == {}
    got = httpx.get(f"{dep.shuffler.url}/v1/metrics", headers={"Origin": ALLOWED_ORIGIN})
    assert got.status_code == 200 and cors_headers(got) == {}
    assert dep.shuffler_metrics()["rejected"] == {"origin_not_allowed": 4}


def test_posts_from_a_browser_are_stored_for_allowed_origins_only(deploy):
    dep = browser_deployment(deploy)
    url = dep.submissions_url
    assert stored_submissions(dep) == (0, 0)
    # an allowed page: stored, and it may read the answer
    accepted = post_body(url, _body(dep, 1), origin=ALLOWED_ORIGIN)
    assert accepted.status_code == 200, accepted.text
    assert cors_headers(accepted) == READABLE
    assert "Origin" in accepted.headers["vary"]
    assert stored_submissions(dep) == (1, 1)
    # its errors too (the page reads the reason)
    malformed = post_body(url, b"{", origin=ALLOWED_ORIGIN)
    assert malformed.status_code == 400
    assert cors_headers(malformed) == READABLE
    # another site's page: refused before the body is read, nothing stored, nothing exposed
    for origin in (OTHER_ORIGIN, "null"):
        refused = post_body(url, _body(dep, 2), origin=origin)
        assert refused.status_code == 403 and refused.json()["reason"] == "origin_not_allowed"
        assert cors_headers(refused) == {}
    assert stored_submissions(dep) == (1, 1)
    # no Origin (a client outside a browser): as before
    assert post_body(url, _body(dep, 3)).status_code == 200
    assert stored_submissions(dep) == (2, 2)
    # GET of the public task: answered whatever the Origin, readable by allowed pages only
    task_url = f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}"
    mine = httpx.get(task_url, headers={"Origin": ALLOWED_ORIGIN}, timeout=10)
    theirs = httpx.get(task_url, headers={"Origin": OTHER_ORIGIN}, timeout=10)
    assert mine.status_code == theirs.status_code == 200
    assert mine.json() == theirs.json() == dep.task.to_dict()
    assert cors_headers(mine) == READABLE
    assert cors_headers(theirs) == {}
    assert "Origin" in theirs.headers["vary"]
    rejected = dep.shuffler_metrics()["rejected"]
    assert rejected == {"malformed_json": 1, "origin_not_allowed": 2}


def test_by_default_no_origin_is_allowed(deploy):
    dep = deploy("krr", min_batch_users=100)
    assert preflight(dep.submissions_url, ALLOWED_ORIGIN).status_code == 403
    refused = post_body(dep.submissions_url, _body(dep), origin=ALLOWED_ORIGIN)
    assert refused.status_code == 403 and cors_headers(refused) == {}
    assert post_body(dep.submissions_url, _body(dep, 2)).status_code == 200
    assert stored_submissions(dep) == (1, 1)


def test_the_allow_list_from_its_environment_variable(deploy):
    dep = deploy(shuffler_env={"SHUFFLEDP_ALLOW_ORIGIN": f"{ALLOWED_ORIGIN}, {LOCAL_PAGE}"})
    for origin in (ALLOWED_ORIGIN, LOCAL_PAGE):
        answer = preflight(dep.submissions_url, origin)
        assert answer.status_code == 204
        assert cors_headers(answer)["access-control-allow-origin"] == origin
    assert preflight(dep.submissions_url, OTHER_ORIGIN).status_code == 403


def _parsed_origins(monkeypatch, flags, variable=None):
    if variable is None:
        monkeypatch.delenv("SHUFFLEDP_ALLOW_ORIGIN", raising=False)
    else:
        monkeypatch.setenv("SHUFFLEDP_ALLOW_ORIGIN", variable)
    argv = ["serve", "shuffler", "--task", "t.json", "--store", "sqlite:///s.db",
            "--forward", "http://127.0.0.1:9", "--forward-token-file", "f", *flags]  # fmt: skip
    return build_parser(argv).parse_args(argv).allow_origin


def test_repeated_flags_and_the_variable(monkeypatch):
    a, b, c = "https://a.example", "https://b.example:8443", "http://127.0.0.1:3000"
    assert _parsed_origins(monkeypatch, []) is None
    assert _parsed_origins(monkeypatch, ["--allow-origin", a, "--allow-origin", c]) == [a, c]
    # commas, spaces or both; the flags replace the variable's list, never add to it
    assert _parsed_origins(monkeypatch, [], f"{a},{b}  {c}") == [a, b, c]
    assert _parsed_origins(monkeypatch, ["--allow-origin", c], f"{a},{b}") == [c]
    assert _parsed_origins(monkeypatch, [], "") is None  # empty: unset


@pytest.mark.parametrize(
    ("origin", "fragment"),
    [
        ("*", "a wildcard is refused: every web page a user visits could"),
        ("https://*.example.org", "a wildcard is refused"),
        ("null", "sandboxed frames"),
        ("https://survey.example.org/", "no path, not even '/'"),
        ("https://survey.example.org/form", "browsers send 'https://survey.example.org'"),
        ("https://survey.example.org:443", "without the default port 443"),
        ("HTTPS://Survey.example.org", "lower case: write 'https://survey.example.org'"),
        ("http://survey.example.org", "no secure context"),
        ("survey.example.org", "scheme://host[:port]"),
        ("ftp://survey.example.org", "scheme://host[:port]"),
        ("https://user@survey.example.org", "no user name"),
        ("https://survey.example.org:70000", "Port out of range"),
        ("https://bücher.example", "xn-- form"),
        ("https://a_b.example", "is not a host name or address"),
    ],
)
def test_a_bad_origin_says_why(origin, fragment):
    with pytest.raises(InvalidParameterError) as caught:
        check_origin(origin, "--allow-origin")
    message = str(caught.value)
    assert message.startswith(f"--allow-origin {origin!r}") and fragment in message, message


@pytest.mark.parametrize(
    "origin",
    ["https://survey.example.org", "https://survey.example.org:8443", "http://localhost:8000",
     "http://127.0.0.1:5173", "http://[::1]:8000", "https://[2001:db8::1]",
     "https://xn--bcher-kva.example", "http://app.localhost"],
)  # fmt: skip
def test_origins_as_browsers_send_them_are_accepted(origin):
    assert check_origin(origin, "--allow-origin") == origin


def _serve_fails(tmp_path, extra, env=None):
    """Run ``serve shuffler`` with ``extra`` options; return its one stderr line (exit 2)."""
    dep = tmp_path / "dep"
    if not dep.exists():
        make_deployment(dep, start=False)
    done = subprocess.run(
        [sys.executable, "-m", "shuffledp", "serve", "shuffler",
         "--task", str(dep / "task.json"), "--store", f"sqlite:///{tmp_path / 's.db'}",
         "--forward", "http://127.0.0.1:9", "--forward-token-file", str(dep / "forward.token"),
         *extra],
        capture_output=True, text=True, timeout=60, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "s.db").exists()
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_bad_serve_options_are_one_line_and_exit_2(tmp_path):
    line = _serve_fails(tmp_path, ["--allow-origin", ALLOWED_ORIGIN, "--allow-origin", "*"])
    assert "--allow-origin '*': a wildcard is refused" in line, line
    variable = {"SHUFFLEDP_ALLOW_ORIGIN": f"{ALLOWED_ORIGIN},{OTHER_ORIGIN}/"}
    line = _serve_fails(tmp_path, [], variable)
    assert "no path" in line and line.endswith("(from SHUFFLEDP_ALLOW_ORIGIN)"), line
    cert, key = self_signed_certificate(tmp_path, "a")
    _, other_key = self_signed_certificate(tmp_path, "b")
    line = _serve_fails(tmp_path, ["--tls-certfile", str(cert)])
    assert "--tls-certfile needs --tls-keyfile: give both" in line, line
    line = _serve_fails(tmp_path, [], {"SHUFFLEDP_TLS_KEYFILE": str(key)})
    assert "--tls-keyfile needs --tls-certfile" in line, line
    line = _serve_fails(tmp_path, ["--tls-certfile", str(cert), "--tls-keyfile", str(other_key)])
    assert "is not the private key of --tls-certfile" in line, line
    line = _serve_fails(tmp_path, ["--tls-certfile", str(key), "--tls-keyfile", str(key)])
    assert "holds no PEM certificate" in line, line
    from cryptography.hazmat.primitives import serialization

    key_object = serialization.load_pem_private_key(key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key_object.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"passphrase"),
        )
    )
    line = _serve_fails(tmp_path, ["--tls-certfile", str(cert), "--tls-keyfile", str(encrypted)])
    assert "is encrypted: give the key without a passphrase" in line, line
    missing = str(tmp_path / "none.key")
    line = _serve_fails(tmp_path, ["--tls-certfile", str(cert), "--tls-keyfile", missing])
    assert f"--tls-keyfile {missing!r}: no such file" in line, line


# -- Content-Type: JSON only --------------------------------------------------------------


def test_a_body_that_is_not_json_is_refused_415_and_nothing_stored(deploy):
    dep = browser_deployment(deploy)
    url = dep.submissions_url
    body = _body(dep)  # well-formed: only its Content-Type is wrong
    # what a page on any site can send without a preflight (a form, fetch in no-cors mode)
    for content_type in (
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        None,
        "application/json; charset=latin-1",
        "application/jsonx",
    ):
        for origin in (None, ALLOWED_ORIGIN):
            refused = post_body(url, body, origin=origin, content_type=content_type)
            assert refused.status_code == 415, (content_type, refused.text)
            assert refused.json()["reason"] == "unsupported_media_type"
            assert "application/json" in refused.json()["error"]
    # (an Origin the shuffler does not allow is refused before: 403)
    assert post_body(url, body, origin=OTHER_ORIGIN, content_type="text/plain").status_code == 403
    assert stored_submissions(dep) == (0, 0)
    assert dep.shuffler_metrics()["rejected"] == {
        "unsupported_media_type": 14,
        "origin_not_allowed": 1,
    }
    # JSON, with or without parameters, in any case
    for i, content_type in enumerate(
        ("application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8")
    ):
        accepted = post_body(url, _body(dep, 10 + i), content_type=content_type)
        assert accepted.status_code == 200, (content_type, accepted.text)
    assert stored_submissions(dep) == (3, 3)


def test_the_analyzer_takes_json_batches_only(deploy):
    dep = deploy("krr", min_batch_users=100)
    batch = {
        "format": BATCH_FORMAT, "task_id": dep.task.task_id, "batch_id": new_id(),
        "n_users": 100, "n_messages": 0, "payload": b64encode(b""),
    }  # fmt: skip
    auth = {"Authorization": f"Bearer {dep.forward_token}"}
    url = f"{dep.analyzer.url}/v1/batches"
    for content_type in ("text/plain", None):
        refused = post_body(
            url, json.dumps(batch).encode(), content_type=content_type, headers=auth
        )
        assert refused.status_code == 415 and refused.json()["reason"] == "unsupported_media_type"
    # the bearer is checked first: nothing about the body is said to a stranger
    stranger = post_body(url, b"{}", content_type="text/plain")
    assert stranger.status_code == 401
    assert dep.analyzer_metrics()["rejected"] == {"unsupported_media_type": 2, "missing_bearer": 1}
    assert dep.analyzer_metrics().get("batches_received", 0) == 0
    # the analyzer answers no browser: no CORS header, whatever the Origin
    for path in ("/v1/task", "/v1/health"):
        got = httpx.get(f"{dep.analyzer.url}{path}", headers={"Origin": ALLOWED_ORIGIN})
        assert got.status_code == 200 and cors_headers(got) == {}
    assert preflight(url, ALLOWED_ORIGIN).status_code == 405


def test_the_python_client_and_the_forwarding_send_json(deploy):
    dep = deploy("krr", min_batch_users=100)
    values = [DOMAIN[i % 5] for i in range(100)]
    subs = dep.client(seed=4).submit_many(values, per_request=25)
    dep.wait_aggregated(100)
    assert stored_counts(dep).tolist() == expected_counts(subs).tolist()
    assert dep.shuffler_metrics()["rejected"] == {} == dep.analyzer_metrics()["rejected"]


# -- HTTPS --------------------------------------------------------------------------------


def test_an_https_round_trip_with_a_self_signed_certificate(deploy, tmp_path, capsys):
    cert, key = self_signed_certificate(tmp_path)
    dep = deploy("krr", min_batch_users=100, start=False)
    serve_over_tls(dep, cert, key)
    assert dep.shuffler.url.startswith("https://") and dep.analyzer.url.startswith("https://")
    task_url = f"{dep.shuffler.url}/v1/tasks/{dep.task.task_id}"
    # without the CA the certificate is refused: one line, exit 2, nothing sent
    base = ["client", "submit", "--task", task_url, "--shuffler", dep.shuffler.url]
    code = main([*base, "--value", "red"])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert "CERTIFICATE_VERIFY_FAILED" in err
    code = main([*base, "--value", "red", "--ca-file", "/dev/null"])
    err = capsys.readouterr().err
    assert code == 2 and "--ca-file '/dev/null': cannot read CA certificates" in err, err
    # with it: the task over HTTPS, one user from the command line, 99 from the library
    code = main(
        [*base, "--value", "red", "--ca-file", str(cert), "--task-digest", dep.task.digest()]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert json.loads(out)["task_id"] == dep.task.task_id
    subs = dep.client(seed=5, ca_file=cert).submit_many(
        [DOMAIN[i % 5] for i in range(99)], per_request=33
    )
    # the shuffler forwards over HTTPS (trusting the analyzer through SSL_CERT_FILE)
    with dep.analyzer.http() as analyzer, dep.shuffler.http() as shuffler:
        assert stored_submissions(dep, shuffler)[0] == 100

        def aggregated() -> bool:
            metrics = analyzer.get(f"{dep.analyzer.url}/v1/metrics").json()
            return bool(metrics.get("users_aggregated") == 100)

        wait_until(aggregated, 60, "100 users aggregated over HTTPS")
        release = analyzer.get(f"{dep.analyzer.url}/v1/estimate", timeout=60)
        assert release.status_code == 200 and release.json()["n"] == 100
        metrics = shuffler.get(f"{dep.shuffler.url}/v1/metrics").json()
        assert metrics["batches_forwarded"] == 1 and metrics.get("forward_failures", 0) == 0
    extra = stored_counts(dep) - expected_counts(subs)  # the command line's user
    assert extra.sum() == 1 and extra.min() == 0
    # plain HTTP to the HTTPS port is not served
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{dep.shuffler.port}/v1/health", timeout=5)

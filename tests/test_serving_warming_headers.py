"""The page a model still warming answers with (web/serving/server.py warming_response) is a 503
that
any WSGI server may send: a hop-by-hop header (Connection) set by the application makes waitress
refuse the answer, and the client got a 500 instead."""
from wsgiref.util import is_hop_by_hop

from web.serving.server import warming_response
from web_support import HX


def test_warming_answers_are_503s_without_hop_by_hop_headers(app):
    for state in ("waiting", "warming", "ready", "failed"):
        record = {"state": state, "step": "warming: sampling", "done": 1, "steps": 3,
                  "problem": "no such file"}
        for headers in ({}, HX):
            with app.test_request_context("/?model=smollm2&prompt=Hello", headers=headers):
                r = warming_response(app, "smollm2", "SmolLM2-135M-Instruct", record)
                assert r.status_code == 503
                assert [k for k, _ in r.headers.items() if is_hop_by_hop(k)] == [], state
                assert ("Retry-After" in r.headers) == (state != "failed")

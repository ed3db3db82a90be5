"""Every request example of README.md and docs/*.md runs against the service, and the answer pasted
under it is what the service answers (volatile fields masked): a wrong paste fails here.
`python -m tests.docs_examples --write` pastes the service's answers after a deliberate change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.main import create_app
from app.sched import profile_kernels
from app.sched.dag import list_kernel
from app.settings import Settings
from app.sim import compiled
from tests import docs_examples as docs
from tests.conftest import Client

PAGES = docs.pages()


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    """The compiled loops made ready first, as the service's start-up does."""
    for module in (profile_kernels, list_kernel, compiled):
        module.warm()


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_pasted_answer_is_the_service_answer(page: Path) -> None:
    outcomes = docs.run_page(page, Client(create_app(Settings())))
    wrong = [f"{o.example.where()} {o.example.method} {o.example.path}: {p}"
             for o in outcomes for p in o.problems]
    assert not wrong, "\n\n".join(wrong)


def test_the_readme_shows_every_endpoint() -> None:
    readme = docs.examples(docs.ROOT / "README.md")
    shown = {(e.method, "/" + e.path.strip("/").split("/")[0]) for e in readme}
    for endpoint in [("POST", "/schedule"), ("POST", "/dag"), ("PUT", "/clusters"), ("POST", "/simulate")]:
        assert endpoint in shown, f"README has no example of {endpoint}"


def _page(tmp_path: Path, curl: str, answer: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(f"Try:\n\n```sh\n{curl}\n```\n\nanswers:\n\n{answer}\n")
    return page


def test_a_wrong_paste_is_caught(client: Client, tmp_path: Path) -> None:
    good = client.get("/healthz").json()
    curl = "curl -s http://127.0.0.1:8000/healthz"
    assert docs.run_page(_page(tmp_path, curl, f"```json\n{json.dumps(good)}\n```"), client)[0].problems == []
    wrong = {**good, "status": "not what it says"} if "status" in good else {**good, "extra": 1}
    outcome = docs.run_page(_page(tmp_path, curl, f"```json\n{json.dumps(wrong)}\n```"), client)[0]
    assert outcome.problems and "not what it says" in outcome.problems[0]


def test_a_wrong_status_or_header_is_caught(client: Client, tmp_path: Path) -> None:
    curl = "curl -si http://127.0.0.1:8000/clusters/none"
    body = json.dumps(client.get("/clusters/none").json())
    ok = docs.run_page(_page(tmp_path, curl, f"```http\nHTTP/1.1 404 Not Found\n\n{body}\n```"), client)
    assert ok[0].problems == []
    bad = docs.run_page(_page(tmp_path, curl, "```http\nHTTP/1.1 200 OK\ncontent-type: text/plain\n\n"
                              f"{body}\n```"), client)
    assert len(bad[0].problems) == 2, bad[0].problems


def test_volatile_fields_are_masked_and_carried_to_later_requests(client: Client, tmp_path: Path) -> None:
    """A pasted plan id differs from the one the service makes: not a mismatch, and a later GET of
    the pasted id asks for the service's."""
    dag = {"tasks": [{"id": "a", "work": 10}], "groups": [{"id": "g"}], "algorithm": "heft",
           "time_budget_s": 0}
    first = client.post("/dag/plan", json=dag).json()
    assert first["plan_id"] != (pasted_id := "0" * 32)
    post = (f"curl -s http://127.0.0.1:8000/dag/plan -H 'content-type: application/json' "
            f"-d '{json.dumps(dag)}'")
    page = tmp_path / "page.md"
    page.write_text(f"```sh\n{post}\n```\n\n```json\n{json.dumps({**first, 'plan_id': pasted_id})}\n```\n\n"
                    f"```sh\ncurl -s http://127.0.0.1:8000/dag/plan/{pasted_id}\n```\n\n"
                    f"```json\n{json.dumps({**first, 'plan_id': pasted_id})}\n```\n")
    outcomes = docs.run_page(page, client)
    assert [o.problems for o in outcomes] == [[], []]
    assert outcomes[1].got.status == 200


def test_text_answers_compare_line_by_line() -> None:
    assert docs._compare_lines("a\n…\nc", "a\nb\nc") == []
    assert docs._compare_lines("a\nc", "a\nb\nc") != []
    assert docs._compare_lines("a\n…", "a\nb\nc") == []
    assert docs._compare_lines("a\n…\nd", "a\nb\nc") != []
    assert docs._compare_lines("ab…", "abc") == [] and docs._compare_lines("ax…", "abc") != []


@pytest.mark.parametrize("text", [
    "```sh\ncurl -s http://127.0.0.1:8000/healthz\n```\n",  # no answer
    "```sh\ncurl -s http://127.0.0.1:8000/healthz\n```\n```python\nx\n```\n",  # not an answer block
    "```sh\ncurl -si http://127.0.0.1:8000/healthz\n```\n```json\n{}\n```\n",  # -i wants ```http
    "```sh\ncurl -s --insecure http://127.0.0.1:8000/healthz\n```\n```json\n{}\n```\n",  # unknown option
])
def test_malformed_examples_are_refused(tmp_path: Path, text: str) -> None:
    page = tmp_path / "page.md"
    page.write_text(text)
    with pytest.raises(ValueError):
        docs.examples(page)

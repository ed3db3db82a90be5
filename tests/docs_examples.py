"""The request examples of README.md and docs/*.md, read from the markdown and run against the service.

An example is a fenced ```sh block holding one `curl` command, followed (prose may come between) by
its answer: a ```json block (the body of a 200 answer; the curl then has no `-i`) or, for a curl
with `-i`, a ```http block: the status line, some headers, a blank line and the body. A JSON body is
compared whole after masking the volatile fields (`VOLATILE_KEYS`, `VOLATILE_HEADERS`); any other
body line by line, in order, a line `…` standing for lines left out and a line ending in `…`
for a line's beginning. The examples of one page run in
order against one fresh service, so a page can PUT a cluster and then PATCH it; a volatile value of
an earlier answer (a plan id) is replaced by what the service really answered in later requests.

`python -m tests.docs_examples [--write] [PAGE ...]` runs the pages and prints each mismatch;
`--write` pastes the service's answers into the pages instead (then read the diff before committing).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASE = "http://127.0.0.1:8000"
VOLATILE_KEYS = frozenset({"plan_id", "timing_ms", "ms", "total_budget_s"})
VOLATILE_HEADERS = frozenset({"x-request-id", "x-worker-pid", "content-length", "date"})
ELISION = "…"
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
HEREDOC = re.compile(r"<<-?\s*'?(\w+)'?")


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass
class Block:
    lang: str
    text: str
    line: int  # 1-based line of the opening fence
    start: int  # offsets of the block's text in the page
    end: int


@dataclass
class Example:
    page: Path
    line: int
    method: str
    path: str
    headers: dict[str, str]
    body: str | None
    with_headers: bool  # curl -i: the answer is an http block
    answer: Block

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str


@dataclass
class Outcome:
    example: Example
    got: Answer
    problems: list[str] = field(default_factory=list)


def blocks(text: str) -> Iterator[Block]:
    for m in FENCE.finditer(text):
        yield Block(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1, m.start(2), m.end(2))


def examples(page: Path) -> list[Example]:
    """Every curl example of the page, in order; a curl without an answer block is an error."""
    found, pending = [], None
    for block in blocks(page.read_text()):
        if pending is not None:
            if block.lang not in ("json", "http"):
                raise ValueError(f"{page.name}:{pending[0].line}: the curl example's next block is "
                                 f"```{block.lang}, not its ```json or ```http answer")
            found.append(_example(page, *pending, block))
            pending = None
        elif block.lang in ("sh", "bash", "console") and re.search(r"^\s*curl\s", block.text, re.M):
            pending = (block, block.text)
    if pending is not None:
        raise ValueError(f"{page.name}:{pending[0].line}: a curl example without an answer block")
    return found


def _example(page: Path, block: Block, text: str, answer: Block) -> Example:
    command, body = _split_heredoc(text.strip())
    args = shlex.split(command.replace("\\\n", " "))
    if args[0] != "curl" or "\ncurl" in text:
        raise ValueError(f"{page.name}:{block.line}: one curl command per example block")
    method, url, headers, data, with_headers = None, None, {}, None, False
    rest = iter(args[1:])
    for arg in rest:
        if arg in ("-s", "-S", "-sS", "--silent"):
            continue
        if arg in ("-i", "-si", "-is", "--include"):
            with_headers = True
        elif arg in ("-X", "--request"):
            method = next(rest)
        elif arg in ("-H", "--header"):
            name, _, value = next(rest).partition(":")
            headers[name.strip().lower()] = value.strip()
        elif arg in ("-d", "--data", "--data-binary"):
            data = next(rest)
        elif arg.startswith(BASE):
            url = arg.removeprefix(BASE)
        else:
            raise ValueError(f"{page.name}:{block.line}: curl option {arg!r} is not understood here")
    if url is None:
        raise ValueError(f"{page.name}:{block.line}: no {BASE} URL in the curl")
    if data == "@-":
        if body is None:
            raise ValueError(f"{page.name}:{block.line}: -d @- without a here-document")
        data = body
    if with_headers != (answer.lang == "http"):
        raise ValueError(f"{page.name}:{answer.line}: a curl with -i is answered by ```http, else ```json")
    method = method or ("POST" if data is not None else "GET")
    return Example(page, block.line, method, url, headers, data, with_headers, answer)


def _split_heredoc(text: str) -> tuple[str, str | None]:
    first, _, rest = text.partition("\n")
    m = HEREDOC.search(first)
    if m is None:
        return text, None
    end = rest.rfind("\n" + m.group(1))
    body = rest[:end] if end >= 0 else rest.removesuffix(m.group(1))
    return first[: m.start()], body


def parse_answer(block: Block) -> Answer:
    if block.lang == "json":
        return Answer(200, {}, block.text)
    head, _, body = block.text.partition("\n\n")
    status_line, *lines = head.splitlines()
    m = re.match(r"HTTP/[\d.]+ (\d{3})", status_line)
    if m is None:
        raise ValueError(f"line {block.line}: an http answer starts with its status line")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Answer(int(m.group(1)), headers, body)


# ---------------------------------------------------------------------------------------- running


def run_page(page: Path, client: Any) -> list[Outcome]:
    """Run the page's examples in order on `client` (tests.conftest.Client over a fresh app)."""
    outcomes, swaps = [], {}
    for ex in examples(page):
        got = _send(client, ex, swaps)
        outcomes.append(Outcome(ex, got, compare(parse_answer(ex.answer), got, swaps)))
    return outcomes


def _send(client: Any, ex: Example, swaps: dict[str, str]) -> Answer:
    def swap(text: str) -> str:
        for old, new in swaps.items():
            text = text.replace(old, new)
        return text

    headers = {k: swap(v) for k, v in ex.headers.items()}
    body = swap(ex.body).encode() if ex.body is not None else None
    r = client.request(ex.method, swap(ex.path), headers=headers, content=body)
    return Answer(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.text)


def compare(want: Answer, got: Answer, swaps: dict[str, str]) -> list[str]:
    """What differs between the pasted answer and the service's (empty: they agree)."""
    problems = []
    if want.status != got.status:
        problems.append(f"status {got.status}, the page says {want.status}")
    for name, value in want.headers.items():
        if name not in got.headers:
            problems.append(f"no header {name}")
        elif name not in VOLATILE_HEADERS and value != got.headers[name]:
            problems.append(f"header {name}: {got.headers[name]!r}, the page says {value!r}")
    if "json" in got.headers.get("content-type", "") and (want.body.strip() or got.body.strip()):
        problems += _compare_json(want.body, got.body, swaps)
    else:
        problems += _compare_lines(want.body, got.body)
    return problems


def _compare_json(want_text: str, got_text: str, swaps: dict[str, str]) -> list[str]:
    try:
        want = json.loads(want_text)
    except json.JSONDecodeError as e:
        return [f"the pasted answer is not JSON: {e}"]
    got = json.loads(got_text)
    masked_want, masked_got = mask(want, got, swaps), mask(got, got, {})
    if masked_want == masked_got:
        return []
    diff = difflib.unified_diff(dump(masked_want).splitlines(), dump(masked_got).splitlines(),
                                "pasted", "the service answered", lineterm="", n=2)
    return ["the pasted answer is not the service's (volatile fields masked):\n" + "\n".join(diff)]


def mask(value: Any, got: Any, swaps: dict[str, str]) -> Any:
    """`value` with the volatile fields' values replaced by "<volatile>"; each pasted volatile
    string value is noted in `swaps` with the service's own (found at the same place in `got`)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            other = got.get(k) if isinstance(got, dict) else None
            if k in VOLATILE_KEYS:
                if isinstance(v, str) and isinstance(other, str) and v != other:
                    swaps[v] = other
                out[k] = "<volatile>"
            else:
                out[k] = mask(v, other, swaps)
        return out
    if isinstance(value, list):
        others = got if isinstance(got, list) else []
        return [mask(v, others[i] if i < len(others) else None, swaps) for i, v in enumerate(value)]
    return value


def _compare_lines(want: str, got: str) -> list[str]:
    """Each pasted line appears in the answer in order; `…` stands for lines left out."""
    lines, at, gap = got.splitlines(), 0, False
    for line in want.splitlines():
        if line.strip() == ELISION:
            gap = True
            continue
        def same(i: int, line: str = line) -> bool:  # a line ending in … is a line's beginning
            return lines[i].startswith(line[:-1]) if line.endswith(ELISION) else lines[i] == line
        if gap:
            found = next((i for i in range(at, len(lines)) if same(i)), None)
        else:
            found = at if at < len(lines) and same(at) else None
        if found is None:
            return [f"the answer has no line {line!r} where the page shows it; it begins:\n{got[:600]}"]
        at, gap = found + 1, False
    if not gap and at < len(lines):
        return [f"the answer goes on after the pasted lines (end the paste with {ELISION}): {lines[at]!r}"]
    return []


# ---------------------------------------------------------------------------------------- printing


def dump(value: Any, indent: int = 0, width: int = 110, record: bool = False) -> str:
    """JSON as the pages paste it: a value on one line when it fits, and a record in a list (a
    dict of scalars) always; a longer flat dict's members filled onto lines; else one member a line."""
    flat = json.dumps(value, ensure_ascii=False)
    if len(flat) + indent <= width or (record and _shallow(value)) or not isinstance(value, (dict, list)):
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict) and _shallow(value):
        lines, line = [], ""
        for k, v in value.items():
            item = f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)},"
            if line and len(pad) + len(line) + 1 + len(item) > width:
                lines.append(line)
                line = ""
            line = f"{line} {item}" if line else item
        lines.append(line.removesuffix(","))
        return "{\n" + "\n".join(pad + x for x in lines) + "\n" + " " * indent + "}"
    if isinstance(value, dict):
        items = [f"{pad}{json.dumps(k)}: {dump(v, indent + 2, width)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    items = [pad + dump(v, indent + 2, width, record=True) for v in value]
    return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"


def _shallow(value: Any) -> bool:
    """A scalar, or a record of scalars and lists of scalars: pasted on one line, however long."""
    if isinstance(value, list):
        return all(not isinstance(v, (dict, list)) for v in value)
    if isinstance(value, dict):
        return all(not isinstance(v, dict) and (not isinstance(v, list) or _shallow(v))
                   for v in value.values())
    return True


def pasted(got: Answer, block: Block) -> str:
    """The service's answer written as the page's answer block (its headers kept as listed)."""
    is_json = "json" in got.headers.get("content-type", "")
    body = dump(json.loads(got.body)) if is_json and got.body.strip() else got.body
    if block.lang == "json":
        return body + "\n"
    want = parse_answer(block)
    head = [block.text.splitlines()[0].split()[0] + f" {got.status}"]
    head += [f"{name}: {got.headers.get(name, '')}" for name in want.headers]
    keep = body if is_json else want.body  # a text body is pasted by hand, with its elisions
    return "\n".join(head) + "\n\n" + (keep.rstrip("\n") + "\n" if keep.strip() else "")


def _client() -> Any:
    from app.main import create_app
    from app.sched import profile_kernels
    from app.sched.dag import list_kernel
    from app.settings import Settings
    from app.sim import compiled
    from tests.conftest import Client

    for module in (profile_kernels, list_kernel, compiled):
        module.warm()  # as the app's start-up does: no example's budget goes on compiling
    return Client(create_app(Settings()))


def main(argv: list[str]) -> int:
    write = "--write" in argv
    chosen = [ROOT / a for a in argv if a != "--write"] or pages()
    failed = 0
    for page in chosen:
        outcomes = run_page(page, _client())
        text = page.read_text()
        for o in reversed(outcomes):
            if o.problems and write:
                b = o.example.answer
                text = text[: b.start] + pasted(o.got, b) + text[b.end :]
            for problem in o.problems:
                print(f"{o.example.where()}: {problem}")
        failed += sum(bool(o.problems) for o in outcomes)
        if write:
            page.write_text(text)
    return 1 if failed and not write else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

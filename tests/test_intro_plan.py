"""The introduction's chapter plan lists every page of the book's table of contents, in its order: a chapter added
to _toc.yml but not to the plan would be missing from the page readers start on."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_intro_plan_lists_every_toc_page_in_order():
    toc = re.findall(r"- file: book/(\S+)", (ROOT / "_toc.yml").read_text())
    intro = (ROOT / "book" / "intro.md").read_text()
    plan = intro.split("```{chapter-plan}", 1)[1].split("```", 1)[0]
    keys = [line.split("|", 1)[0].strip() for line in plan.strip().splitlines()]
    listed = [f"{int(k):02d}_" if k.isdigit() else k for k in keys]
    assert len(listed) == len(toc)
    for key, page in zip(listed, toc):
        assert page.startswith(key) if key.endswith("_") else page == key, (key, page)
    numbered = sum(k.isdigit() for k in keys)
    words = {11: "Eleven", 12: "Twelve", 13: "Thirteen", 14: "Fourteen"}
    assert f"{words[numbered]} chapters" in intro

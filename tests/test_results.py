"""The published tables are what results/ gives, the README stays a short guide, and
every relative link in the README and docs/ reaches a file and a heading that exist."""

import json
import os
import re

import pytest

from launch import results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _block(path):
    text = open(os.path.join(ROOT, path)).read()
    return results.BEGIN + text.split(results.BEGIN, 1)[1].split(results.END, 1)[0] + results.END


def test_the_readme_and_results_page_hold_what_results_gives():
    block = results.render()
    for path in ("README.md", "docs/results.md"):
        assert _block(path) == block, f"{path} is out of date with results/: run python -m launch.results"
    assert "LEARNED" in block and "| full |" in block and "| 16 |" in block


def test_the_readme_is_a_short_guide():
    assert len(open(os.path.join(ROOT, "README.md")).read().splitlines()) <= 350


def _anchor(heading: str) -> str:
    """GitHub's anchor for a markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_relative_links_reach_a_file_and_a_heading():
    docs = os.path.join(ROOT, "docs")
    pages = ["README.md"] + [os.path.join("docs", p) for p in os.listdir(docs) if p.endswith(".md")]
    broken = []
    for page in pages:
        text = open(os.path.join(ROOT, page)).read()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            here = os.path.join(ROOT, os.path.dirname(page))
            full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, page)
            if not os.path.exists(full):
                broken.append(f"{page}: {target} (no such file)")
            elif anchor and full.endswith(".md"):
                heads = {_anchor(h) for h in re.findall(r"(?m)^#+ (.*)$", open(full).read())}
                if anchor not in heads:
                    broken.append(f"{page}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_demo_block_states_the_verdict_or_that_there_is_none(tmp_path):
    src = json.load(open(os.path.join(ROOT, "results", "demo", "summary.json")))
    for d in ("demo", "dossier_span", "horizon"):
        os.makedirs(tmp_path / d)
    one = dict(src, eval={**src["eval"], "interval": None, "learned": None,
                          "rows": {k: v for k, v in src["eval"]["rows"].items() if k.endswith("(seed 0)")}})
    json.dump(one, open(tmp_path / "demo" / "summary.json", "w"))
    text = "\n".join(results.demo(str(tmp_path)))
    assert "Verdict: none (one seed" in text and "seed 1" not in text
    with pytest.raises(SystemExit, match="no summaries"):
        results.ablation(str(tmp_path))
    with pytest.raises(SystemExit, match="no results block"):
        results.replace_block("no markers here", "x", "README.md")

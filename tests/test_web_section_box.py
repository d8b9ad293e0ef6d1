"""The box every section is drawn in (templates/macros.html section_box): while the prompt is
refused it holds the prompt's message and what the section would show, and nothing else of the
section is rendered (no template repeats that branch)."""
import glob
import os
import re

from web_support import error_message, text_of, url

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_refused_prompt_leaves_each_section_its_notice_only(client):
    from web.core.registry import sections
    message = error_message(text_of(client.get(url("/", prompt=""))), "prompt")
    assert message == "The prompt is empty: type some text."
    for s in sections():
        r = client.get(url(f"/section/{s.id}", prompt=""), headers={"HX-Request": "true"})
        assert r.status_code == 422
        box = re.search(r'<section id="%s" class="section[^"]*".*?</section>' % s.id, text_of(r),
                        re.S)
        assert box, s.id
        notices = re.findall(r'<p class="notice">(.*?)</p>', box.group(0), re.S)
        assert len(notices) == 1 and notices[0].startswith("Fix the prompt above"), s.id
        assert notices[0].endswith(": " + message), (s.id, notices[0])
        assert 'class="part' not in box.group(0) and "data-figure" not in box.group(0)


def test_no_section_template_repeats_the_prompt_branch():
    for path in glob.glob(os.path.join(ROOT, "templates", "sections", "*.html")):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert '"prompt" in state.errors' not in text, path
        assert "section_box(section, num, state" in text, path

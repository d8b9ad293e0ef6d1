"""Retake docs/screenshot.png: `python docs/screenshot.py [URL]` with the app running
(`make run`). Uses Debian's Chromium through Playwright, like the browser tests."""
import os
import sys

from playwright.sync_api import sync_playwright

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshot.png")
QUERY = "?ov_steps=3"      # the default prompt, and the overview three tokens into generating

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
    page = browser.new_page(viewport={"width": 1280, "height": 1325})
    page.goto(URL.rstrip("/") + "/" + QUERY)
    page.wait_for_load_state("networkidle")
    page.locator(".plot .main-svg").first.wait_for(state="attached")
    page.screenshot(path=OUT)
    browser.close()
print(OUT, os.path.getsize(OUT), "bytes")

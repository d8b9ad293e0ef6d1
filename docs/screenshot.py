"""Retake docs/screenshot.png: `python docs/screenshot.py [URL]` with the app running
(`make run`). Uses Debian's Chromium through Playwright, like the browser tests."""
import os
import sys

from playwright.sync_api import sync_playwright

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8000/"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "screenshot.png")
QUERY = ("?prompt=It%20is%20a%20truth%20universally%20acknowledged%2C%20that%20a%20single%20"
         "man%20in%20possession%20of%20a%20good%20fortune%2C%0Amust%20be%20in%20want%20of%20a"
         "&step=4")

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path=os.environ.get("CHROMIUM", "/usr/bin/chromium"),
                                args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
    page = browser.new_page(viewport={"width": 1100, "height": 1500})
    page.goto(URL.rstrip("/") + "/" + QUERY)
    page.locator(".plot .main-svg").first.wait_for(state="attached")
    page.screenshot(path=OUT)
    browser.close()
print(OUT, os.path.getsize(OUT), "bytes")

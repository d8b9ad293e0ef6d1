"""The security headers every response carries: `init_app(app)` adds them after each request."""

# Content-Security-Policy: scripts only from this server (no inline script, no eval), nothing
# from any other origin, no plugins, no framing. The one loosening is for Plotly:
#   style-src 'unsafe-inline'  plotly.js (4.x) writes its CSS rules into a <style> element it
#                              creates at run time (lib/dom.js addStyleRule: the modebar, hover
#                              and drag cursors) and sets style="" attributes on the SVG it
#                              draws; without it the figures draw unstyled hover labels and
#                              Chromium reports a violation per figure. Inline *styles* cannot
#                              run code; inline scripts stay forbidden.
#   img-src data:              plotly.js draws a heatmap into a <canvas> and shows it as an SVG
#                              <image> whose href is canvas.toDataURL() (traces/heatmap/plot.js);
#                              without data: every heatmap is blank. An image cannot run code
#                              (an SVG loaded as an image runs no script). No blob:, no origins.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; font-src 'self'; connect-src 'self'; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",                   # frame-ancestors for old browsers
    "Referrer-Policy": "no-referrer",            # the URL holds the prompt: never send it on
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
}


def add_security_headers(response):
    response.headers.update(SECURITY_HEADERS)
    return response


def init_app(app):
    """Every response of `app` (pages, partials, files, errors, 503s) gets SECURITY_HEADERS."""
    app.after_request(add_security_headers)

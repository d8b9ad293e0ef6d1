"""Third-party scripts, served from their installed packages (no CDN, nothing committed).

Plotly.js ships inside the `plotly` Python package; htmx is installed from npm by `npm ci`
(package.json pins it to 2.0.x).
"""
import os

import plotly
from flask import Blueprint, abort, current_app, send_file

bp = Blueprint("assets", __name__, url_prefix="/vendor")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLOTLY_JS = os.path.join(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
HTMX_JS = os.path.join(ROOT, "node_modules", "htmx.org", "dist", "htmx.min.js")
ONE_DAY = 24 * 3600


def _send(path):
    if not os.path.exists(path):
        current_app.logger.error("missing %s: run `make run` (it runs `npm ci`)", path)
        abort(404)
    return send_file(path, mimetype="text/javascript", max_age=ONE_DAY, conditional=True)


@bp.get("/plotly.min.js")
def plotly_js():
    """plotly.js, as shipped in the installed plotly package."""
    return _send(current_app.config.get("PLOTLY_JS", PLOTLY_JS))


@bp.get("/htmx.min.js")
def htmx_js():
    """htmx 2, from node_modules."""
    return _send(current_app.config.get("HTMX_JS", HTMX_JS))

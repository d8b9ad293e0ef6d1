"""The page stays readable with every "Go deeper" disclosure open, at three sizes: a laptop
(1280x900), a projector at 150% zoom (1024x768, device scale factor 1.5) and a phone (390x844).

Every section is loaded (all at once, as printing asks for them), every <details> on the page is
opened (as a reader clicking each summary: static/deeper.js fits the figures inside), then one pass
over the DOM collects every defect, named by size, section and element:
- a figure (`.plot[data-figure]`, drawn: it has a `.main-svg`) narrower than 250 px, or drawn
  wider than its own box;
- a figure's export buttons (`.plot-tools`) taller than 60 px;
- a table cell whose text overflows it, or whose short text (at most 3 words) takes more than 3
  lines or breaks inside a word (a cell's problems are gathered per table);
- an axis of a figure that shows the same tick label twice ("0 0 0 0");
- two labels of one figure (annotations, tick labels, axis titles, the title, legend items, text
  of text traces) whose boxes overlap by more than 2 px;
- a figure's title or axis title running past an edge of the drawing (cut off);
- a table wider than its box that is cut with no cue that there is more (its box does not
  scroll, or scrolls with no shadow on the side that has more);
- one quantity drawn on different scales where the reader compares it: the axes of one figure
  (its subplots) or of figures side by side (in one `.figures` or `.two-col` box) that have the
  same title, tick format and suffix, and type, but different ranges (a bar of 309 ms drawn as
  long as one of 364 ms; each stage's bars filling their own panel). Only numeric axes whose
  quantity is named (a title, a tick format or suffix) can be told apart, and counts are left
  out (a histogram of a whole beside one of its part counts different populations);
- anything that sticks out of the window to the right (the page scrolls sideways);
- the text of a failed environment probe ("... downloads it ... and that failed", a traceback).
The test fails listing them all.

Then every slide of presentation mode at the projector's size (1024x768 at 150%): one pass of
the same checks over the slide on screen, plus a slide wider than its screen (the page scrolls
sideways; a figure drawn for another width sticking out of its box).
"""
import os
import re
import time
import warnings

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from web.core.registry import SECTIONS
from web.presentation.tour import tour_steps
from web_support import every_disclosure

SIZES = (
    ("1280x900", {"viewport": {"width": 1280, "height": 900}}),
    ("1024x768@1.5", {"viewport": {"width": 1024, "height": 768}, "device_scale_factor": 1.5}),
    ("390x844", {"viewport": {"width": 390, "height": 844}}),
)
MIN_PLOT_WIDTH = 250
MAX_TOOLS_HEIGHT = 60
OVERLAP_PX = 2
OVERLAPS_PER_FIGURE = 5     # listed one by one; more are counted
CELLS_PER_TABLE = 4
SCALE_APART = 0.02          # two ranges of one quantity differ: by 2% of the wider span
PROBE_FAILURES = ("downloads it", "download it", "and that failed", "Traceback")
LIMITS = {"minPlot": MIN_PLOT_WIDTH, "maxTools": MAX_TOOLS_HEIGHT, "overlap": OVERLAP_PX,
          "perFigure": OVERLAPS_PER_FIGURE, "perTable": CELLS_PER_TABLE, "scale": SCALE_APART,
          "probe": list(PROBE_FAILURES)}

# Opens every <details> (each fires its toggle event, as a click on its summary does).
OPEN_ALL = """() => {
  let n = 0;
  document.querySelectorAll('details').forEach(d => { if (!d.open) { d.open = true; n++; } });
  return n;
}"""

# Resolves once every figure on the page has been drawn at its box's size (six animation frames
# after the last change of any figure's width; at most 5 s).
SETTLED = """() => new Promise(resolve => {
  const sizes = () => Array.from(document.querySelectorAll('.plot[data-figure]'))
    .map(p => { const s = p.querySelector('.main-svg');
                return s ? Math.round(s.getBoundingClientRect().width) : -1; }).join(',');
  let last = sizes(), calm = 0, start = performance.now();
  const tick = () => {
    const now = sizes();
    calm = now === last ? calm + 1 : 0;
    last = now;
    if (calm >= 6 || performance.now() - start > 5000) resolve(); else next(tick);
  };
  // the next frame, or 100 ms: a headless page that draws no frames must not hang the test
  const next = f => { let done = false;
    const go = () => { if (!done) { done = true; f(); } };
    requestAnimationFrame(go); setTimeout(go, 100); };
  next(tick);
})"""

CHECKS = """(limits) => {
  const out = [];
  const visible = el => {
    if (!el.getClientRects().length) return false;
    const cs = getComputedStyle(el);
    return cs.visibility !== 'hidden' && cs.display !== 'none' && Number(cs.opacity) !== 0;
  };
  const short = (s, n) => { s = (s || '').replace(/\\s+/g, ' ').trim();
                            return s.length > n ? s.slice(0, n - 1) + '…' : s; };
  const where = el => { const s = el.closest('section.section'); return s ? s.id : '(page)'; };
  const plotName = p => p.getAttribute('aria-label') || p.id || 'a figure';
  const add = (el, what) => out.push(where(el) + ' | ' + what);

  // --- figures and their export buttons ---
  document.querySelectorAll('.plot[data-figure]').forEach(p => {
    const svg = p.querySelector('.main-svg');
    if (!svg || !visible(p)) return;
    const box = p.getBoundingClientRect(), drawn = svg.getBoundingClientRect();
    if (drawn.width < limits.minPlot)
      add(p, `figure "${short(plotName(p), 70)}" is ${Math.round(drawn.width)} px wide (< ${limits.minPlot})`);
    if (drawn.width > box.width + 2)
      add(p, `figure "${short(plotName(p), 70)}" is drawn ${Math.round(drawn.width)} px wide in a ${Math.round(box.width)} px box`);
    // the figure's title and axis titles are whole: none runs past an edge of the drawing
    p.querySelectorAll('text.gtitle, text[class$="title"]').forEach(t => {
      if (!/^(gtitle|[xy]\\d*title)$/.test(t.getAttribute('class')) || !t.textContent.trim()) return;
      const r = t.getBoundingClientRect();
      const past = Math.max(drawn.left - r.left, r.right - drawn.right,
                            drawn.top - r.top, r.bottom - drawn.bottom);
      if (past > limits.overlap)
        add(p, `figure "${short(plotName(p), 70)}": ${t.getAttribute('class') === 'gtitle' ? 'title' : 'axis title'} "${short(t.textContent, 30)}" is cut off by ${Math.round(past)} px`);
    });
  });
  document.querySelectorAll('.plot-tools').forEach(t => {
    if (!visible(t)) return;
    const h = t.getBoundingClientRect().height;
    const p = t.previousElementSibling;
    if (h > limits.maxTools)
      add(t, `export buttons of "${short(p ? plotName(p) : '?', 70)}" are ${Math.round(h)} px tall (> ${limits.maxTools})`);
  });

  // --- table cells ---
  const lines = el => {
    const tops = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.textContent.trim()) continue;
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) {
        if (r.width < 1 || r.height < 1) continue;
        const mid = r.top + r.height / 2;
        if (!tops.some(t => Math.abs(t - mid) < r.height / 2)) tops.push(mid);
      }
    }
    return tops.length;
  };
  // cells with a problem, gathered per table (a narrow table has many): a few named, all counted
  const tables = new Map();
  const note = (c, name, kind, example) => {
    const key = where(c) + '\u0000' + name + '\u0000' + kind;
    if (!tables.has(key)) tables.set(key, {cell: c, name, kind, examples: []});
    tables.get(key).examples.push(example);
  };
  document.querySelectorAll('td, th').forEach(c => {
    if (!visible(c)) return;
    const text = short(c.textContent, 60);
    if (!text) return;
    const table = c.closest('table');
    const name = table.getAttribute('aria-label') || (table.caption && short(table.caption.textContent, 50))
      || (table.className ? 'table.' + table.className.split(' ').join('.') : 'a table');
    if (c.scrollWidth > c.clientWidth + 1)
      note(c, name, 'overflow', `"${short(text, 30)}" (${c.scrollWidth} px in ${c.clientWidth} px)`);
    const words = text.split(' ').length;
    if (words <= 3) {
      // a short text may wrap between words and after a hyphen or slash, nowhere else
      const pieces = text.split(/\\s+|(?<=[-\\/–])/).filter(Boolean).length;
      const n = lines(c);
      if (n > 3 || n > pieces) note(c, name, 'wrap', `"${text}" on ${n} lines`);
    }
  });
  for (const {cell, name, kind, examples} of tables.values()) {
    const shown = examples.slice(0, limits.perTable).join(', ');
    const more = examples.length > limits.perTable ? `, and ${examples.length - limits.perTable} more` : '';
    add(cell, kind === 'overflow'
      ? `${name}: text overflows ${examples.length} cell${examples.length > 1 ? 's' : ''}: ${shown}${more}`
      : `${name}: ${examples.length} short cell${examples.length > 1 ? 's' : ''} (at most 3 words) wrap within a word or onto more than 3 lines: ${shown}${more}`);
  }

  // --- figures: repeated tick labels, overlapping labels ---
  const corners = el => {
    // the text's own box, turned as it is drawn (tick labels may be rotated)
    let b;
    try { b = el.getBBox(); } catch (e) { return null; }
    const m = el.getScreenCTM();
    if (!m || b.width < 1 || b.height < 1) return null;
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
  };
  // depth of the overlap of two convex polygons (0 if apart): the smallest overlap of their
  // projections over every edge's normal (separating axis theorem)
  const depth = (P, Q) => {
    let least = Infinity;
    for (const poly of [P, Q]) {
      for (let i = 0; i < poly.length; i++) {
        const [x1, y1] = poly[i], [x2, y2] = poly[(i + 1) % poly.length];
        let nx = y1 - y2, ny = x2 - x1;
        const len = Math.hypot(nx, ny);
        if (!len) continue;
        nx /= len; ny /= len;
        const proj = pts => pts.map(([x, y]) => x * nx + y * ny);
        const a = proj(P), b = proj(Q);
        const o = Math.min(Math.max(...a), Math.max(...b)) - Math.max(Math.min(...a), Math.min(...b));
        if (o <= 0) return 0;
        least = Math.min(least, o);
      }
    }
    return least;
  };
  const LABELS = [
    ['annotation', '.annotation-text-g text'], ['tick label', '.xtick text, .ytick text'],
    ['axis title', '.g-xtitle text, .g-ytitle text, [class^="g-x"][class$="title"] text, [class^="g-y"][class$="title"] text'],
    ['title', '.g-gtitle text'], ['legend item', '.legend .legendtext'],
    ['text of a trace', '.textpoint text']];
  document.querySelectorAll('.plot[data-figure]').forEach(p => {
    if (!p.querySelector('.main-svg') || !visible(p)) return;
    const name = short(plotName(p), 70);
    // tick labels, axis by axis (each subplot's axis has its own layer)
    const axes = new Map();
    p.querySelectorAll('.xtick text, .ytick text').forEach(t => {
      const layer = t.closest('[class*="axislayer"]') || t.parentNode.parentNode;
      const letter = t.closest('.xtick') ? 'x' : 'y';
      const key = layer;
      if (!axes.has(key)) axes.set(key, {letter, labels: []});
      const s = (t.textContent || '').trim();
      if (s && visible(t)) axes.get(key).labels.push(s);
    });
    for (const {letter, labels} of axes.values()) {
      const seen = new Set(), twice = new Set();
      labels.forEach(s => { if (seen.has(s)) twice.add(s); seen.add(s); });
      if (twice.size)
        add(p, `figure "${name}": the ${letter} axis repeats ${Array.from(twice).map(s => '"' + short(s, 20) + '"').join(', ')} (labels: ${short(labels.join(' '), 80)})`);
    }
    const items = [];
    const taken = new Set();
    for (const [kind, sel] of LABELS) {
      p.querySelectorAll(sel).forEach(t => {
        if (taken.has(t) || !(t.textContent || '').trim() || !visible(t)) return;
        taken.add(t);
        const c = corners(t);
        if (!c) return;
        const xs = c.map(q => q[0]), ys = c.map(q => q[1]);
        const what = kind === 'tick label' ? (t.closest('.xtick') ? 'x' : 'y') + ' tick label' : kind;
        items.push({kind: what, text: short(t.textContent, 30), c,
                    box: [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)]});
      });
    }
    let overlaps = 0;
    for (let i = 0; i < items.length; i++) {
      for (let j = i + 1; j < items.length; j++) {
        const a = items[i], b = items[j];
        if (a.box[0] >= b.box[2] - limits.overlap || b.box[0] >= a.box[2] - limits.overlap ||
            a.box[1] >= b.box[3] - limits.overlap || b.box[1] >= a.box[3] - limits.overlap) continue;
        const d = depth(a.c, b.c);
        if (d <= limits.overlap) continue;
        if (++overlaps <= limits.perFigure)
          add(p, `figure "${name}": ${a.kind} "${a.text}" and ${b.kind} "${b.text}" overlap by ${d.toFixed(1)} px`);
      }
    }
    if (overlaps > limits.perFigure)
      add(p, `figure "${name}": ${overlaps - limits.perFigure} more overlapping pairs of labels`);
  });

  // --- a table wider than its box, cut with no cue that there is more: the box that clips it
  // (the table itself on a phone, else its nearest ancestor that clips or scrolls) must scroll
  // and show a cue, a shadow that scrolls with the content (a background attached "local") ---
  document.querySelectorAll('main table').forEach(t => {
    if (!visible(t)) return;
    let box = null;
    for (let a = t; a && a !== document.body && !box; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== 'visible') box = a;
    if (!box || box.scrollWidth <= box.clientWidth + 1) return;   // no box: the check below
    const cs = getComputedStyle(box);
    const scrolls = cs.overflowX === 'auto' || cs.overflowX === 'scroll';
    const cue = /gradient/.test(cs.backgroundImage) && /local/.test(cs.backgroundAttachment);
    if (scrolls && cue) return;
    const name = t.getAttribute('aria-label') || (t.caption && short(t.caption.textContent, 50))
      || (t.className ? 'table.' + t.className.split(' ').join('.') : 'a table');
    add(t, `${name}: ${box.scrollWidth} px of table in a ${box.clientWidth} px box, cut with no ` +
        `cue that there is more (${scrolls ? 'it scrolls, with no shadow on the side that has more' : 'the box does not scroll'})`);
  });

  // --- one quantity on different scales: axes of one figure, or of figures side by side, with
  // the same name (title, tick format, suffix, type) but different ranges ---
  const scales = p => {
    const fl = p._fullLayout;
    if (!fl) return [];
    return Object.keys(fl).filter(k => /^[xy]axis\\d*$/.test(k)).map(k => {
      const ax = fl[k];
      if (!ax || ax.visible === false || !Array.isArray(ax.range) ||
          !['linear', 'log', 'date'].includes(ax.type)) return null;
      // the figure's own title (the full layout holds a placeholder where it has none)
      const own = (p.layout || {})[k] || {};
      const title = (typeof own.title === 'string' ? own.title : (own.title && own.title.text) || '')
        .replace(/<[^>]*>/g, ' ').replace(/\\s+/g, ' ').trim();
      if (!title && !ax.tickformat && !ax.ticksuffix) return null;     // its quantity unnamed
      // a count of things (a histogram's height) is one quantity only for equal populations:
      // a whole's histogram beside one of its part's has its own count scale
      if (/\\bcounts?\\b/i.test(title)) return null;
      const range = ax.range.map(Number);
      return {axis: k, letter: k[0], range, title,
              key: [k[0], ax.type, title, ax.tickformat || '', ax.ticksuffix || '', ax.tickprefix || ''].join('|')};
    }).filter(Boolean);
  };
  const apart = (a, b) => {
    const span = Math.max(Math.abs(a[1] - a[0]), Math.abs(b[1] - b[0])) || 1;
    return Math.abs(Math.min(...a) - Math.min(...b)) > limits.scale * span ||
           Math.abs(Math.max(...a) - Math.max(...b)) > limits.scale * span;
  };
  const fmt = r => '[' + r.map(v => +v.toPrecision(3)).join(', ') + ']';
  const drawn = Array.from(document.querySelectorAll('.plot[data-figure]'))
    .filter(p => p.querySelector('.main-svg') && visible(p));
  drawn.forEach(p => {
    const groups = new Map();
    scales(p).forEach(s => { if (!groups.has(s.key)) groups.set(s.key, []); groups.get(s.key).push(s); });
    for (const axes of groups.values()) {
      const odd = axes.filter(s => apart(s.range, axes[0].range));
      if (odd.length)
        add(p, `figure "${short(plotName(p), 70)}": its ${axes[0].letter} axes ${axes.map(s => s.axis).join(', ')} show one quantity ` +
            `("${short(axes[0].title || 'unnamed', 30)}") on different ranges: ${axes.map(s => fmt(s.range)).join(' and ')}`);
    }
  });
  const boxes = new Map();
  drawn.forEach(p => {
    const box = p.closest('.figures, .two-col');
    if (!box) return;
    if (!boxes.has(box)) boxes.set(box, []);
    boxes.get(box).push(p);
  });
  for (const plots of boxes.values()) {
    for (let i = 0; i < plots.length; i++) {
      for (let j = i + 1; j < plots.length; j++) {
        const b = scales(plots[j]);
        scales(plots[i]).forEach(s => {
          const t = b.find(x => x.key === s.key);
          if (t && apart(s.range, t.range))
            add(plots[i], `figures "${short(plotName(plots[i]), 40)}" and "${short(plotName(plots[j]), 40)}" side by side show one quantity ` +
                `("${short(s.title || 'unnamed', 30)}") on different ${s.letter} ranges: ${fmt(s.range)} and ${fmt(t.range)}`);
        });
      }
    }
  }

  // --- presentation mode: the slide on screen is no wider than the screen ---
  if (document.body.classList.contains('present')) {
    const slide = document.querySelector('main .section.current');
    const over = Math.max(document.scrollingElement.scrollWidth - window.innerWidth,
                          slide ? Math.round(slide.getBoundingClientRect().right - window.innerWidth) : 0);
    if (slide && over > 1)
      add(slide, `the slide is ${over} px wider than the ${window.innerWidth} px screen (the page scrolls sideways)`);
  }

  // --- anything that sticks out of the window to the right (the page scrolls sideways) ---
  const right = window.innerWidth + 1;
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox !== 'visible' && ox !== 'clip' || a.classList.contains('plot')) return true;
    }
    return false;
  };
  const wide = new Map();
  document.querySelectorAll('main *').forEach(el => {
    const r = el.getBoundingClientRect();
    if (r.right <= right || r.width === 0 || !visible(el)) return;
    const parent = el.parentElement.getBoundingClientRect();
    if (parent.right > right || clipped(el)) return;       // its parent stuck out first
    const key = where(el);
    if (!wide.has(key)) wide.set(key, {el, names: []});
    wide.get(key).names.push(`${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}` +
      `${el.classList.length ? '.' + Array.from(el.classList).join('.') : ''} ("${short(el.textContent, 30)}") ` +
      `ends at ${Math.round(r.right)} px`);
  });
  for (const {el, names} of wide.values())
    add(el, `wider than the ${window.innerWidth} px window: ${names.slice(0, 3).join('; ')}` +
        (names.length > 3 ? `, and ${names.length - 3} more` : ''));

  // --- text of a failed probe of the environment ---
  document.querySelectorAll('#overview, section.section').forEach(s => {
    const text = s.textContent;
    for (const phrase of limits.probe) {
      const at = text.indexOf(phrase);
      if (at >= 0) add(s, `says "${short(text.slice(Math.max(0, at - 60), at + 60), 120)}"`);
    }
  });
  return out;
}"""


def load_every_section(page, timeout_s=120):
    """Asks for every section that is still a placeholder (as printing does: lazy.js's
    Explainer.loadAll) and waits until none is left; a placeholder refused by a busy server asks
    again by itself, or is asked again here."""
    deadline = time.monotonic() + timeout_s
    left = page.evaluate("() => window.Explainer.loadAll()")
    while left and time.monotonic() < deadline:
        page.wait_for_timeout(250)
        left = page.evaluate("""() => {
          document.querySelectorAll('[data-lazy] .lazy-failed:not([hidden]) .lazy-retry')
            .forEach(b => b.click());
          return document.querySelectorAll('[data-lazy]').length;
        }""")
    assert not left, f"{left} sections still not loaded after {timeout_s} s"
    page.wait_for_load_state("networkidle")


def defects_at(browser, base_url, size, options) -> list:
    context = browser.new_context(base_url=base_url, bypass_csp=True, **options)
    try:
        page = context.new_page()
        page.goto("/?open=" + every_disclosure())    # each section arrives with its "Go deeper"
        load_every_section(page)                       # open; OPEN_ALL opens the other details
        page.evaluate(OPEN_ALL)
        page.wait_for_load_state("networkidle")
        page.evaluate(SETTLED)
        found = page.evaluate(CHECKS, LIMITS)
        sections = page.evaluate("() => Array.from(document.querySelectorAll('section.section'))"
                                 ".map(s => s.id)")
        missing = [s.id for s in SECTIONS if s.id not in sections]
        return [f"{size} | {d}" for d in found] + [f"{size} | {m} | section missing"
                                                   for m in missing]
    finally:
        context.close()


# Defects found when this test was written and not mended yet, one per line as `kind()` names
# them (numbers left out): the test fails on any defect not listed here, and names each listed
# one still present as a warning in the test summary. Mend one, then delete its line.
KNOWN_DEFECTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             "layout_known_defects.txt")


def kind(defect: str) -> str:
    """A defect without its measurements (pixel counts and numbers change with fonts)."""
    return re.sub(r"\d+(\.\d+)?", "N", defect).strip()


def known_defects() -> set:
    with open(KNOWN_DEFECTS, encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def test_every_section_is_readable_with_every_disclosure_open(browser, base_url):
    """All three sizes, every defect listed (by section, in page order) before it fails."""
    order = {s.id: i for i, s in enumerate(SECTIONS)}
    defects = []
    for size, options in SIZES:
        found = defects_at(browser, base_url, size, options)
        found.sort(key=lambda d: order.get(d.split(" | ")[1], -1))
        defects += found
    known = known_defects()
    new = [d for d in defects if kind(d) not in known]
    still = sorted({kind(d) for d in defects} & known)
    if still:
        warnings.warn(f"{len(still)} known layout defects still to mend (listed in "
                      f"{os.path.basename(KNOWN_DEFECTS)}):\n" + "\n".join(still),
                      stacklevel=1)
    assert not new, f"{len(new)} new layout defects:\n" + "\n".join(new)


# The slide on screen once it is loaded and fitted: [its id, still loading?].
SLIDE = """() => {
  const s = document.querySelector('main .section.current');
  return [s ? s.id : '', !s || s.hasAttribute('data-lazy') || !!s.querySelector('.htmx-request')
          || document.querySelector('.htmx-request') !== null];
}"""


# The slide's figures are drawn at their boxes' widths (static/present.js redraws a figure drawn
# while its slide was hidden, once the slide is fitted): true once none is wider than its box.
REDRAWN = """() => Array.from(document.querySelectorAll('main .section.current .plot[data-figure]'))
  .filter(p => p.getClientRects().length && p.querySelector('.main-svg'))
  .every(p => p.querySelector('.main-svg').getBoundingClientRect().width
              <= p.getBoundingClientRect().width + 2)"""
REDRAW_MS = 3000            # the time present.js has to redraw them; after it, a defect


def slide_defects(browser, base_url) -> tuple:
    """Every slide of presentation mode at the projector's size, in turn: the checks over the
    slide on screen (its defects, and the page's). (defects, the ids of the slides shown)."""
    size, options = SIZES[1]
    context = browser.new_context(base_url=base_url, bypass_csp=True, **options)
    found, shown = [], []
    try:
        page = context.new_page()
        page.goto("/?present=1&tour=1")
        for _step in tour_steps(SECTIONS):
            page.wait_for_function(f"() => ({SLIDE})()[0] && !({SLIDE})()[1]", timeout=60_000)
            page.wait_for_load_state("networkidle")
            try:
                page.wait_for_function(REDRAWN, timeout=REDRAW_MS)
            except PlaywrightTimeout:
                pass                                # still too wide: the checks name it
            page.evaluate(SETTLED)
            shown.append(page.evaluate(SLIDE)[0])
            found += [f"slides at {size} | {d}" for d in page.evaluate(CHECKS, LIMITS)
                      if d.split(" | ")[0] in (shown[-1], "(page)")]
            page.keyboard.press("ArrowRight")
    finally:
        context.close()
    return found, shown


def test_every_slide_is_readable_on_a_projector(browser, base_url):
    """Presentation mode, slide by slide, at 1024x768 and 150%: no slide is wider than its
    screen, and each passes the page's checks (listed defects as above)."""
    defects, shown = slide_defects(browser, base_url)
    assert shown == ["overview" if s.target == "prompt" else s.target
                     for s in tour_steps(SECTIONS)]              # every slide, one by one
    known = known_defects()
    new = [d for d in defects if kind(d) not in known]
    still = sorted({kind(d) for d in defects} & known)
    if still:
        warnings.warn(f"{len(still)} known slide defects still to mend (listed in "
                      f"{os.path.basename(KNOWN_DEFECTS)}):\n" + "\n".join(still),
                      stacklevel=1)
    assert not new, f"{len(new)} new slide defects:\n" + "\n".join(new)


PLANT = """async () => {
  const s = document.createElement('section');
  s.className = 'section';
  s.id = 'planted';
  s.innerHTML = `
    <div class="plot-box"><div class="plot" id="planted-plot" data-figure="{}" aria-label="planted figure"
         style="width: 200px; height: 300px"></div>
      <div class="plot-tools" style="height: 100px"><button type="button">PNG</button></div></div>
    <table aria-label="planted table" style="table-layout: fixed; width: 120px">
      <tr><td style="white-space: nowrap; width: 40px; overflow: hidden">a long unbroken cell text</td>
          <td style="width: 20px; overflow-wrap: anywhere">GPT-2 small</td></tr></table>
    <div style="overflow-x: auto; width: 100px"><table aria-label="planted wide table">
      <tr><td style="white-space: nowrap">a table wider than its box</td></tr></table></div>
    <div style="overflow: hidden; width: 100px"><table aria-label="planted clipped table">
      <tr><td style="white-space: nowrap">a table cut off by its box</td></tr></table></div>
    <div class="plot" id="planted-panels" data-figure="{}" aria-label="planted panels"
         style="width: 400px; height: 300px"></div>
    <div class="figures"><div class="plot" id="planted-left" data-figure="{}" aria-label="planted left"
         style="width: 300px; height: 200px"></div>
      <div class="plot" id="planted-right" data-figure="{}" aria-label="planted right"
         style="width: 300px; height: 200px"></div></div>
    <div id="planted-wide" style="width: 3000px; height: 4px"></div>
    <p>gpt2: not available on this machine (tiktoken downloads it from the internet on first use,
       and that failed)</p>`;
  document.querySelector('main').appendChild(s);
  // two panels of one figure: one probability, each on its own range (10% and 40%)
  await Plotly.newPlot('planted-panels',
    [{type: 'bar', x: [0, 1], y: [0.1, 0.05]}, {type: 'bar', x: [0, 1], y: [0.4, 0.2], yaxis: 'y2'}],
    {width: 400, height: 300, yaxis: {domain: [0.55, 1], tickformat: '.0%'},
     yaxis2: {domain: [0, 0.45], tickformat: '.0%'}});
  // two timelines side by side, each with its own time axis (309 ms and 364 ms)
  for (const [id, end] of [['planted-left', 309], ['planted-right', 364]])
    await Plotly.newPlot(id, [{type: 'bar', orientation: 'h', x: [end], y: ['slot 0']}],
      {width: 300, height: 200, xaxis: {title: {text: 'time (ms)'}, range: [0, end]}});
  await Plotly.newPlot('planted-plot', [{x: [0, 1, 2], y: [0.001, 0.002, 0.003]}],
    {width: 200, height: 300, yaxis: {tickformat: '.0f'},
     annotations: [{x: 1, y: 0.002, text: 'one label', showarrow: false},
                   {x: 1, y: 0.002, text: 'another label', showarrow: false}]});
}"""


# Presentation mode with the planted section as the slide on screen.
PRESENT_PLANTED = """() => {
  document.body.classList.add('present');
  document.querySelectorAll('main .section.current').forEach(c => c.classList.remove('current'));
  document.getElementById('planted').classList.add('current');
}"""


def test_the_checks_find_planted_defects(browser, base_url):
    """Each kind of defect, planted in a section of its own, is found and named."""
    context = browser.new_context(base_url=base_url, bypass_csp=True,
                                  viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto("/")
        page.evaluate(PLANT)
        found = page.evaluate(CHECKS, LIMITS)
        page.evaluate(PRESENT_PLANTED)
        on_slide = page.evaluate(CHECKS, LIMITS)
    finally:
        context.close()
    slide = re.compile(r"planted \| the slide is \d+ px wider than the 1280 px screen \(the page "
                       r"scrolls sideways\)")
    assert any(slide.fullmatch(d) for d in on_slide) and not any("the slide is" in d for d in found)
    planted = [d for d in found if d.startswith("planted | ")]
    expected = (
        'figure "planted figure" is 200 px wide (< 250)',
        'export buttons of "planted figure" are 100 px tall (> 60)',
        'planted table: text overflows 1 cell: "a long unbroken cell text"',
        'planted table: 1 short cell (at most 3 words) wrap within a word or onto more than 3 '
        'lines: "GPT-2 small"',
        'figure "planted figure": the y axis repeats "0"',
        'figure "planted figure": annotation "one label" and annotation "another label" overlap',
        'planted wide table: ',
        'cut with no cue that there is more (it scrolls, with no shadow on the side that has more)',
        'planted clipped table: ',
        'cut with no cue that there is more (the box does not scroll)',
        'figure "planted panels": its y axes yaxis, yaxis2 show one quantity ("unnamed") on '
        'different ranges: [0, 0.105] and [0, 0.421]',
        'figures "planted left" and "planted right" side by side show one quantity ("time (ms)") '
        'on different x ranges: [0, 309] and [0, 364]',
        'says "',
    )
    for text in expected:
        assert any(text in d for d in planted), f"not found: {text}\n" + "\n".join(planted)

"""What the page withholds from a class's members while a poll is open: the places that show
the poll's answer (web/classroom/polls.py PollKind.withholds), on every route a member can reach.

A member is a browser holding a student id (`cls_s`) and the codes it joined (`cls_j`), both
set by the join at path / (web/classroom/views.py). While one of those sessions has a poll open
and the id is one of its members, the page's own routes (web/core/views.py: the page, a section, the
overview; web/serving/streaming.py: the streamed answer) show each withheld place as a short note
that
says why, and nothing of its content: no number, no attribute, no "show" button. The server
decides; a blur in the browser would hide nothing from a phone's page source.

The teacher (not a member) sees everything. Someone who is not in the class sees the page as
anyone does: the model is public, and running it yourself is exploring, not peeking at the
class's answer; a student who leaves the class (or clears the site's cookies) is no longer
counted as a voice either.

When the poll closes or is revealed, static/classroom.js loads the page again, and the places
come back. If the store cannot be asked (a Redis that does not answer), every place is
withheld: the answer must not leak because the store is down.
"""
from dataclasses import dataclass

from flask import current_app, request

from web.classroom import codes, polls

OPEN = ("open", "revealing")


@dataclass(frozen=True)
class Withheld:
    places: frozenset = frozenset()      # place ids, or "*" for every place
    poll: str = ""                       # the open poll's label, for the note
    reason: str = ""

    def __bool__(self):
        return bool(self.places)

    def covers(self, place: str) -> bool:
        return "*" in self.places or place in self.places

    def key(self) -> str:
        """For caches of rendered answers: the same page withheld alike is the same answer."""
        return ",".join(sorted(self.places))


NOTHING = Withheld()


def withheld() -> Withheld:
    """What this request must not show (computed once per request: kept in its environ, since
    flask.g outlives a request when an app context was already pushed)."""
    key = "explainer.withheld"
    if key not in request.environ:
        request.environ[key] = _withheld()
    return request.environ[key]


def _withheld() -> Withheld:
    from web.classroom.views import JOINED_COOKIE, STUDENT_COOKIE, now
    sid = request.cookies.get(STUDENT_COOKIE, "")
    joined = [c for c in request.cookies.get(JOINED_COOKIE, "").split(".")[:4]
              if codes.normalize(c) == c]
    if not joined or not codes.STUDENT_ID.fullmatch(sid):
        return NOTHING
    classroom = current_app.extensions["classroom"]
    places, labels = set(), []
    try:
        store, t = classroom.store, now()
        for code in joined:
            session = store.session(code, t)
            poll = session and session["poll"]
            if poll and poll["status"] in OPEN and store.is_member(code, sid):
                kind = polls.KINDS.get(poll["kind"])
                places |= set(kind.withholds if kind else polls.EVERYWHERE)
                labels.append(poll["spec"].get("label", ""))
    except Exception:                        # noqa: BLE001 - the store is not answering
        current_app.logger.warning("withheld: the class store did not answer; withholding all")
        return Withheld(frozenset(polls.EVERYWHERE), "",
                        "The class store is not answering, so this page cannot tell whether "
                        "a poll of your class is open: every part that could give an answer "
                        "away is withheld until it answers.")
    if not places:
        return NOTHING
    return Withheld(frozenset(places), "; ".join(x for x in labels if x))

"""A section whose rebuild at the defaults runs past its own time budget too (the server is too
busy to compute even them now) answers a 503 busy message, not a 500."""
from web.core import limits
from web.core.params import parse_state
from web.core.registry import all_params
from web_support import HX


class BusyServerSection:
    """A section whose every build runs past the budget it is given, whatever its values."""
    id, title, template, params = "stalled", "Stalled", None, ()
    reads = ()

    def __init__(self):
        self.builds = 0

    def build(self, lm, state):
        self.builds += 1
        state.deadline.end -= limits.REQUEST_SECONDS + 1
        state.check_time("merges")
        return {}


def test_a_rebuild_over_its_own_budget_is_a_503_busy_answer(app):
    from web.core.views import build_in_budget
    section = BusyServerSection()
    with app.test_request_context("/section/stalled?merges=40", headers=HX):
        state = parse_state(b"merges=40", all_params())
        try:
            build_in_budget(app.extensions["explainer"].default_model, state, section)
        except limits.Busy as e:
            busy = e
        else:
            busy = None
        assert busy is not None and section.builds == 2
        response = app.handle_user_exception(busy)
    assert response.status_code == 503
    assert response.get_data(as_text=True) == limits.BUSY_MESSAGE
    assert response.headers["Retry-After"] == str(limits.RETRY_AFTER_SECONDS)

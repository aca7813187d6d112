#!/usr/bin/python3
# The web UI's team and dashboard views in headless chromium
# (js/ui_views.mjs): the roster, the thought graph (one node per thought of
# two external agents), an action approved by its button and done after
# its result, a directive; the charts, the pending approval, the audit
# table and its filters.  Screenshots: E2E_LOGDIR/ui-team*.png,
# ui-dashboard*.png, ui-views-chat.png.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ui import browser_test

browser_test("ui_views")

#!/usr/bin/python3
# Text is text in the web UI, in headless chromium (js/ui_xss.mjs): an
# <img onerror> and a <script> payload as the user's message, the model's
# output, a tool's arguments and result, an external agent's thoughts, a
# proposed action and a directive are shown as text in the chat, team and
# dashboard views: window.__xss stays undefined, no such element is made,
# no CSP violation.  Screenshots: E2E_LOGDIR/ui-xss-*.png.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ui import browser_test

browser_test("ui_xss")

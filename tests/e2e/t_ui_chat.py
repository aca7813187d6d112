#!/usr/bin/python3
# The web UI's chat view in headless chromium (js/ui_chat.mjs): a session
# made from the page, Enter sends and Shift+Enter does not, the streamed
# reply equal to /log character for character, usage after done; a tool
# call needing approval, approved by a click, runs exactly once; the
# autonomy selector.  fakellm is the model, server-everything's echo the
# (high-risk) tool.  Any CSP violation, page error or failed request fails
# it; screenshots: E2E_LOGDIR/ui-start.png, ui-chat*.png.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ui import browser_test

browser_test("ui_chat")

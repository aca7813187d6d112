#!/usr/bin/python3
# Exact resume in the web UI, in headless chromium (js/ui_resume.mjs): a
# reload in the middle of a streaming turn, then the text compared with
# /log character for character (nothing duplicated or missing); a pending
# approval still shown after a reload and run once when approved there;
# the worker SIGKILLed mid-turn: #conn-status reconnecting then live, the
# interrupted and the re-run reply both exact.  Screenshots:
# E2E_LOGDIR/ui-resume-*.png.
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ui import browser_test

browser_test("ui_resume")

#!/usr/bin/python3
# The web UI's knowledge view and the chat's context blocks in headless
# chromium (js/ui_knowledge.mjs): a document added from the page is listed
# with its preview, length and title, and the Conn's kb_added/kb_removed
# bring another client's changes; a search shows its hits' scores, the mode
# and the keyword-only note; a chat turn's rag_context shows as a
# .rag-context block before the reply, naming the document; the remove
# button removes it; with an observer token the list and the search work
# and a refused add or remove shows the server's error.  parleyd's script
# provider answers the turn (no embedder: keyword search).  Any CSP
# violation, page error or unexpected HTTP error fails it; screenshots:
# E2E_LOGDIR/ui-knowledge*.png (light and dark).
import sys, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from parley import *
from ui import need_browser, run_ui

ADMIN = "ui-kb-admin-3e9d1c"
OBSERVER = "ui-kb-observer-8a2f64"


async def test():
    need_browser()
    d = Daemon(workers=1, token=ADMIN,
               extra="token %s role observer\n" % OBSERVER)
    with with_daemon(d):
        run_ui("ui_knowledge.mjs", d, env={"UI_OBSERVER": OBSERVER})

run_test("ui_knowledge", test)

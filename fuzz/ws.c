/*
 * The WebSocket frame reader (src/ws.c) fed client frames as a socket
 * delivers them.  Checks what ws_parse promises: it consumes no more than
 * it was given and everything when it wants more, a text message is valid
 * UTF-8, a control payload fits 125 bytes, a data message fits the bound,
 * a failure names a close code and sticks, and the messages and the
 * verdict are the same whether the bytes come cut or whole.
 */
#include <stdio.h>

#include "parley/utf8.h"
#include "parley/ws.h"
#include "fuzz.h"

#define MAX_FRAME	4096
#define MAX_MESSAGE	16384

static void
look(const struct ws_message *m)
{
	FUZZ_CHECK(m->data != NULL);
	switch (m->opcode) {
	case WS_OP_TEXT:
		FUZZ_CHECK(utf8_valid(m->data, m->len));
		/* FALLTHROUGH */
	case WS_OP_BINARY:
		FUZZ_CHECK(m->len <= MAX_MESSAGE);
		break;
	case WS_OP_CLOSE:
		FUZZ_CHECK(m->len <= WS_MAX_CONTROL);
		FUZZ_CHECK(m->close_reason_len <= m->len);
		if (m->close_reason_len > 0)
			FUZZ_CHECK(utf8_valid((const unsigned char *)
			    m->close_reason, m->close_reason_len));
		break;
	case WS_OP_PING:
	case WS_OP_PONG:
		FUZZ_CHECK(m->len <= WS_MAX_CONTROL);
		break;
	default:
		FUZZ_CHECK(!"unknown opcode delivered");
	}
}

/* Feeds what cut hands out; a digest of the messages and the verdict. */
static uint64_t
run(struct fuzz_cut *cut)
{
	struct ws_parser	 p;
	struct ws_message	 m;
	const uint8_t		*frag;
	enum ws_status		 st = WS_NEED_MORE;
	uint64_t		 sum = 14695981039346656037ULL;
	uint16_t		 code;
	size_t			 n, off, used;

	ws_parser_init(&p, MAX_FRAME, MAX_MESSAGE);
	while (st != WS_FAIL && (n = fuzz_cut_next(cut, &frag)) > 0) {
		for (off = 0; off < n; off += used) {
			used = (size_t)-1;
			st = ws_parse(&p, frag + off, n - off, &used, &m);
			FUZZ_CHECK(used <= n - off);
			if (st == WS_FAIL) {
				code = ws_parser_close_code(&p);
				FUZZ_CHECK(code == WS_CLOSE_PROTOCOL ||
				    code == WS_CLOSE_INVALID_DATA ||
				    code == WS_CLOSE_TOO_BIG ||
				    code == WS_CLOSE_INTERNAL);
				FUZZ_CHECK(ws_parser_error(&p) != NULL);
				FUZZ_CHECK(ws_parse(&p, frag, n, &used, &m) ==
				    WS_FAIL && used == 0);
				fuzz_sum(&sum, &code, sizeof(code));
				break;
			}
			if (st == WS_NEED_MORE) {
				FUZZ_CHECK(used == n - off);
				continue;
			}
			/* What completes a message is always a byte of it. */
			FUZZ_CHECK(used > 0);
			look(&m);
			fuzz_sum(&sum, &m.opcode, sizeof(m.opcode));
			fuzz_sum(&sum, &m.len, sizeof(m.len));
			fuzz_sum(&sum, m.data, m.len);
			if (m.opcode == WS_OP_CLOSE)
				fuzz_sum(&sum, &m.close_code,
				    sizeof(m.close_code));
		}
	}
	fuzz_cut_done(cut);
	ws_parser_free(&p);
	return sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FUZZ_CUT_TWICE(data, size, run);
	return 0;
}

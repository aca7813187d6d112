/*
 * What an MCP server answers (workers/mcp_xfer.c, workers/mcp.c): a JSON
 * body (one message or a batch) or an event stream carrying the response
 * and maybe the server's own requests, as libcurl delivers it to
 * write_cb; then xfer_result picks the response out, and a result is read
 * as a tool call's text (result_text) or a tools/list page (pend_add).
 * The input's first byte chooses: bit 0 an event stream, bits 1-2 the
 * HTTP status (200, 202, 400, 500), bit 3 the transfer failed; the rest
 * is cut as fuzz.h says, and must come to the same whether cut or whole.
 * The static functions make it an include.
 */
#include "../workers/mcp.c"
#include "../workers/mcp_xfer.c"
#include "../workers/mcp_ask.c"

#include "fuzz.h"

/* Reads what cut hands out as one answer; a digest of what came of it. */
static uint64_t
run(int mode, struct fuzz_cut *cut)
{
	static const long	 statuses[] = { 200, 202, 400, 500 };
	struct cfg_mcp_server	 cfg;
	struct mcp_ctx		 ctx;
	struct mcp_srv		 srv;
	struct xfer		 x;
	struct ask		*a;
	const cJSON		*res, *tools, *t;
	const uint8_t		*frag;
	uint64_t		 sum = 14695981039346656037ULL;
	char			 why[512], *text;
	size_t			 n, got, i;
	int			 rpc_error, r;

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.name, sizeof(cfg.name), "fz");
	memset(&ctx, 0, sizeof(ctx));
	TAILQ_INIT(&ctx.asks);
	memset(&srv, 0, sizeof(srv));
	srv.ctx = &ctx;
	srv.cfg = &cfg;
	memset(&x, 0, sizeof(x));
	x.ctx = &ctx;
	x.srv = &srv;
	x.kind = X_CALL;
	x.id = 1;
	x.is_sse = mode & 1;
	/* As xfer_new sets it: a call's cap is max-result; bit 4 of the mode
	 * makes it small enough for inputs to pass it. */
	cfg.max_result = mode & 16 ? 4096 : 0;
	x.max = cfg.max_result > 0 ? cfg.max_result : MCP_MAX_BODY;

	while ((n = fuzz_cut_next(cut, &frag)) > 0) {
		got = write_cb((char *)frag, 1, n, &x);
		/* Short only to stop: too big, or our response is in. */
		if (got != n) {
			FUZZ_CHECK(got == 0);
			FUZZ_CHECK(x.too_big || x.msg != NULL || x.sse != NULL);
			break;
		}
	}
	fuzz_cut_done(cut);
	FUZZ_CHECK(x.rlen <= x.max && x.got <= x.max);
	FUZZ_CHECK(ctx.nasks <= MCP_MAX_ASKS);

	why[0] = '\0';
	r = xfer_result(&x, mode & 8 ? CURLE_WRITE_ERROR : CURLE_OK,
	    statuses[(mode >> 1) & 3], why, sizeof(why), &rpc_error);
	FUZZ_CHECK(r == 0 || why[0] != '\0');
	FUZZ_CHECK(r == -1 || x.msg != NULL);
	fuzz_sum(&sum, &r, sizeof(r));
	fuzz_sum(&sum, why, strlen(why));
	fuzz_sum(&sum, &ctx.nasks, sizeof(ctx.nasks));
	if (r == 0) {
		res = cJSON_GetObjectItemCaseSensitive(x.msg, "result");
		if ((text = result_text(res)) != NULL) {
			fuzz_sum(&sum, text, strlen(text) + 1);
			free(text);
		}
		tools = cJSON_GetObjectItemCaseSensitive(res, "tools");
		cJSON_ArrayForEach(t, tools)
			if (pend_add(&srv, t) == -1)
				break;
		FUZZ_CHECK(srv.npend <= MCP_MAX_TOOLS);
		for (i = 0; i < srv.npend; i++)
			fuzz_sum(&sum, srv.pend[i].full,
			    strlen(srv.pend[i].full) + 1);
		stools_free(srv.pend, srv.npend);
	}

	while ((a = TAILQ_FIRST(&ctx.asks)) != NULL) {
		TAILQ_REMOVE(&ctx.asks, a, entry);
		cJSON_Delete(a->msg);
		free(a);
	}
	sse_parser_free(x.sse);
	cJSON_Delete(x.msg);
	free(x.resp);
	return sum;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_cut	 cut, whole;
	uint64_t	 a, b;

	fuzz_quiet();
	if (size < 1)
		return 0;
	fuzz_cut_init(&cut, data + 1, size - 1);
	fuzz_cut_whole(&whole, &cut);
	a = run(data[0], &cut);
	b = run(data[0], &whole);
	/* Where the reads end must not change the answer. */
	FUZZ_CHECK(a == b);
	return 0;
}

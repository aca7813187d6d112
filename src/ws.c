/*
 * RFC 6455 server-side framing.  The parser is a two-state machine
 * (collecting a frame header, then its payload) that unmasks payload
 * bytes as they arrive straight into the message buffer, so nothing is
 * buffered twice and any split of the input gives the same result.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "parley/utf8.h"
#include "parley/ws.h"
#include "parley/util.h"

#define WS_GUID		"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_KEY_B64LEN	24	/* base64 of 16 bytes, with "==" */

/* A buffer larger than this is released after its message is delivered. */
#define WS_KEEP_BUF	(64 * 1024)

enum { WS_ST_HEADER, WS_ST_PAYLOAD, WS_ST_FAILED };

static int	ws_is_control(int);
static int	ws_close_code_ok(unsigned int);
static enum ws_status ws_fail(struct ws_parser *, uint16_t, const char *);
static int	ws_header_base(struct ws_parser *);
static int	ws_header_length(struct ws_parser *);
static size_t	ws_header_extlen(const struct ws_parser *);
static int	ws_msg_reserve(struct ws_parser *, size_t);
static void	ws_msg_reset(struct ws_parser *);
static int	ws_finish_frame(struct ws_parser *, struct ws_message *);
static int	ws_payload(struct ws_parser *, const unsigned char *, size_t);

int
ws_accept_key(const char *client_key, char out[29])
{
	unsigned char	 in[WS_KEY_B64LEN + sizeof(WS_GUID) - 1];
	unsigned char	 md[EVP_MAX_MD_SIZE];
	unsigned int	 mdlen = 0;
	size_t		 i;
	int		 v;

	out[0] = '\0';
	if (client_key == NULL || strlen(client_key) != WS_KEY_B64LEN)
		return -1;
	for (i = 0; i < WS_KEY_B64LEN - 2; i++)
		if (util_b64_value((unsigned char)client_key[i], 0) == -1)
			return -1;
	if (client_key[22] != '=' || client_key[23] != '=')
		return -1;
	/* the last symbol carries 2 bits of the 16th byte; the rest is padding */
	v = util_b64_value((unsigned char)client_key[21], 0);
	if ((v & 0x0f) != 0)
		return -1;

	memcpy(in, client_key, WS_KEY_B64LEN);
	memcpy(in + WS_KEY_B64LEN, WS_GUID, sizeof(WS_GUID) - 1);
	if (!EVP_Digest(in, sizeof(in), md, &mdlen, EVP_sha1(), NULL) ||
	    mdlen != 20)
		return -1;
	if (EVP_EncodeBlock((unsigned char *)out, md, 20) != WS_ACCEPT_LEN)
		return -1;
	out[WS_ACCEPT_LEN] = '\0';
	return 0;
}

void
ws_parser_init(struct ws_parser *p, size_t max_frame, size_t max_message)
{
	memset(p, 0, sizeof(*p));
	p->max_frame = max_frame;
	p->max_message = max_message;
	p->state = WS_ST_HEADER;
	p->hdr_need = 2;
}

void
ws_parser_free(struct ws_parser *p)
{
	free(p->msg);
	p->msg = NULL;
	p->msg_len = p->msg_cap = 0;
}

uint16_t
ws_parser_close_code(const struct ws_parser *p)
{
	return p->close_code;
}

const char *
ws_parser_error(const struct ws_parser *p)
{
	return p->error != NULL ? p->error : "no error";
}

static enum ws_status
ws_fail(struct ws_parser *p, uint16_t code, const char *why)
{
	p->state = WS_ST_FAILED;
	p->close_code = code;
	p->error = why;
	return WS_FAIL;
}

static int
ws_is_control(int opcode)
{
	return (opcode & 0x8) != 0;
}

/* Codes a peer may put in a close frame (RFC 6455 7.4, IANA registry). */
static int
ws_close_code_ok(unsigned int code)
{
	if (code < 1000 || code >= 5000)
		return 0;
	if (code >= 3000)
		return 1;
	if (code == 1004 || code == 1005 || code == 1006 || code >= 1015)
		return 0;
	return 1;
}

static size_t
ws_header_extlen(const struct ws_parser *p)
{
	switch (p->hdr[1] & 0x7f) {
	case 126:
		return 2;
	case 127:
		return 8;
	default:
		return 0;
	}
}

/* Checks the first two header bytes; -1 after ws_fail. */
static int
ws_header_base(struct ws_parser *p)
{
	unsigned char	b0 = p->hdr[0], b1 = p->hdr[1];

	p->fin = (b0 & 0x80) != 0;
	p->opcode = b0 & 0x0f;
	if (b0 & 0x70) {
		ws_fail(p, WS_CLOSE_PROTOCOL, "reserved bits set");
		return -1;
	}
	switch (p->opcode) {
	case WS_OP_CONT:
	case WS_OP_TEXT:
	case WS_OP_BINARY:
	case WS_OP_CLOSE:
	case WS_OP_PING:
	case WS_OP_PONG:
		break;
	default:
		ws_fail(p, WS_CLOSE_PROTOCOL, "unknown opcode");
		return -1;
	}
	if ((b1 & 0x80) == 0) {
		ws_fail(p, WS_CLOSE_PROTOCOL, "unmasked client frame");
		return -1;
	}
	if (ws_is_control(p->opcode)) {
		if (!p->fin) {
			ws_fail(p, WS_CLOSE_PROTOCOL,
			    "fragmented control frame");
			return -1;
		}
		if ((b1 & 0x7f) > WS_MAX_CONTROL) {
			ws_fail(p, WS_CLOSE_PROTOCOL,
			    "control frame too long");
			return -1;
		}
	} else if (p->opcode == WS_OP_CONT) {
		if (p->msg_opcode == 0) {
			ws_fail(p, WS_CLOSE_PROTOCOL,
			    "continuation without message");
			return -1;
		}
	} else if (p->msg_opcode != 0) {
		ws_fail(p, WS_CLOSE_PROTOCOL,
		    "new message inside fragmented message");
		return -1;
	}
	p->hdr_need = 2 + ws_header_extlen(p) + 4;
	return 0;
}

/* Decodes and checks the payload length once it is complete; -1 on fail. */
static int
ws_header_length(struct ws_parser *p)
{
	uint64_t	len = p->hdr[1] & 0x7f;
	size_t		i, ext = ws_header_extlen(p);

	if (ext > 0) {
		len = 0;
		for (i = 0; i < ext; i++)
			len = (len << 8) | p->hdr[2 + i];
		if (ext == 8 && (len >> 63) != 0) {
			ws_fail(p, WS_CLOSE_PROTOCOL,
			    "length most significant bit set");
			return -1;
		}
		if ((ext == 2 && len < 126) || (ext == 8 && len <= 0xffff)) {
			ws_fail(p, WS_CLOSE_PROTOCOL,
			    "non-minimal length encoding");
			return -1;
		}
	}
	p->frame_len = len;
	if (ws_is_control(p->opcode))
		return 0;
	if (len > p->max_frame) {
		ws_fail(p, WS_CLOSE_TOO_BIG, "frame too big");
		return -1;
	}
	if (len > p->max_message - p->msg_len) {
		ws_fail(p, WS_CLOSE_TOO_BIG, "message too big");
		return -1;
	}
	return 0;
}

/*
 * Grows the message buffer to hold n more bytes; the header check
 * guarantees msg_len + n <= max_message.  -1 when out of memory.
 */
static int
ws_msg_reserve(struct ws_parser *p, size_t n)
{
	size_t		 need = p->msg_len + n, cap;
	unsigned char	*nbuf;

	if (need <= p->msg_cap)
		return 0;
	cap = p->msg_cap < 256 ? 256 : p->msg_cap;
	while (cap < need && cap <= SIZE_MAX / 2)
		cap *= 2;
	if (cap > p->max_message)
		cap = p->max_message;
	if (cap < need)
		cap = need;
	if ((nbuf = realloc(p->msg, cap)) == NULL)
		return -1;
	p->msg = nbuf;
	p->msg_cap = cap;
	return 0;
}

static void
ws_msg_reset(struct ws_parser *p)
{
	p->msg_opcode = 0;
	p->msg_len = 0;
	p->msg_delivered = 0;
	if (p->msg_cap > WS_KEEP_BUF)
		ws_parser_free(p);
}

/*
 * Called when the current frame's payload is complete.  Returns 1 with
 * *msg filled when a message is ready, 0 when not, -1 after ws_fail.
 */
static int
ws_finish_frame(struct ws_parser *p, struct ws_message *msg)
{
	unsigned int	code;

	p->state = WS_ST_HEADER;
	p->hdr_len = 0;
	p->hdr_need = 2;

	memset(msg, 0, sizeof(*msg));
	if (ws_is_control(p->opcode)) {
		msg->opcode = p->opcode;
		msg->data = p->ctrl;
		msg->len = p->ctrl_len;
		if (p->opcode != WS_OP_CLOSE)
			return 1;
		msg->close_code = WS_CLOSE_NO_STATUS;
		msg->close_reason = (const char *)p->ctrl;
		if (p->ctrl_len == 0)
			return 1;
		if (p->ctrl_len == 1) {
			ws_fail(p, WS_CLOSE_PROTOCOL, "close payload of 1 byte");
			return -1;
		}
		code = (unsigned int)p->ctrl[0] << 8 | p->ctrl[1];
		if (!ws_close_code_ok(code)) {
			ws_fail(p, WS_CLOSE_PROTOCOL, "invalid close code");
			return -1;
		}
		if (!utf8_valid(p->ctrl + 2, p->ctrl_len - 2)) {
			ws_fail(p, WS_CLOSE_INVALID_DATA,
			    "close reason not UTF-8");
			return -1;
		}
		msg->close_code = (uint16_t)code;
		msg->close_reason = (const char *)p->ctrl + 2;
		msg->close_reason_len = p->ctrl_len - 2;
		return 1;
	}

	if (!p->fin)
		return 0;
	if (p->msg_opcode == WS_OP_TEXT && !utf8_complete(&p->utf8)) {
		ws_fail(p, WS_CLOSE_INVALID_DATA, "truncated UTF-8 in text");
		return -1;
	}
	msg->opcode = p->msg_opcode;
	msg->data = p->msg != NULL ? p->msg : (const unsigned char *)"";
	msg->len = p->msg_len;
	p->msg_delivered = 1;
	return 1;
}

/* Unmasks n payload bytes into the control or message buffer; -1 on fail. */
static int
ws_payload(struct ws_parser *p, const unsigned char *src, size_t n)
{
	const unsigned char	*key = p->hdr + p->hdr_need - 4;
	unsigned char		*dst;
	size_t			 j;

	if (ws_is_control(p->opcode))
		dst = p->ctrl + p->ctrl_len;
	else {
		if (ws_msg_reserve(p, n) == -1) {
			ws_fail(p, WS_CLOSE_INTERNAL, "out of memory");
			return -1;
		}
		dst = p->msg + p->msg_len;
	}
	for (j = 0; j < n; j++)
		dst[j] = src[j] ^ key[(p->frame_pos + j) & 3];
	if (ws_is_control(p->opcode)) {
		p->ctrl_len += n;
		return 0;
	}
	p->msg_len += n;
	/* checked per fragment so a bad sequence fails before the message ends */
	if (p->msg_opcode == WS_OP_TEXT && utf8_feed(&p->utf8, dst, n) == -1) {
		ws_fail(p, WS_CLOSE_INVALID_DATA, "invalid UTF-8 in text");
		return -1;
	}
	return 0;
}

enum ws_status
ws_parse(struct ws_parser *p, const unsigned char *buf, size_t len,
    size_t *used, struct ws_message *msg)
{
	size_t		 i = 0, n;
	int		 r;

	*used = 0;
	if (p->state == WS_ST_FAILED)
		return WS_FAIL;
	/* the previous call handed out the buffer; it is ours again */
	if (p->msg_delivered)
		ws_msg_reset(p);

	for (;;) {
		if (p->state == WS_ST_HEADER) {
			if (i == len)
				break;
			p->hdr[p->hdr_len++] = buf[i++];
			if (p->hdr_len == 2 && ws_header_base(p) == -1)
				goto fail;
			if (p->hdr_len >= 2 &&
			    p->hdr_len == 2 + ws_header_extlen(p) &&
			    ws_header_length(p) == -1)
				goto fail;
			if (p->hdr_len < p->hdr_need)
				continue;

			p->frame_pos = 0;
			if (ws_is_control(p->opcode))
				p->ctrl_len = 0;
			else if (p->opcode != WS_OP_CONT) {
				p->msg_opcode = p->opcode;
				p->msg_len = 0;
				utf8_init(&p->utf8);
			}
			p->state = WS_ST_PAYLOAD;
		}

		/* WS_ST_PAYLOAD */
		n = len - i;
		if ((uint64_t)n > p->frame_len - p->frame_pos)
			n = (size_t)(p->frame_len - p->frame_pos);
		if (n > 0 && ws_payload(p, buf + i, n) == -1)
			goto fail;
		i += n;
		p->frame_pos += n;
		if (p->frame_pos < p->frame_len)
			break;

		r = ws_finish_frame(p, msg);
		if (r == -1)
			goto fail;
		if (r == 1) {
			*used = i;
			return WS_MESSAGE;
		}
	}
	*used = i;
	return WS_NEED_MORE;

fail:
	*used = i;
	return WS_FAIL;
}

size_t
ws_frame_header(unsigned char hdr[10], int opcode, uint64_t len)
{
	int	i;

	hdr[0] = 0x80 | (opcode & 0x0f);
	if (len < 126) {
		hdr[1] = (unsigned char)len;
		return 2;
	}
	if (len <= 0xffff) {
		hdr[1] = 126;
		hdr[2] = (unsigned char)(len >> 8);
		hdr[3] = (unsigned char)len;
		return 4;
	}
	hdr[1] = 127;
	for (i = 0; i < 8; i++)
		hdr[2 + i] = (unsigned char)(len >> (56 - 8 * i));
	return 10;
}

size_t
ws_close_payload(unsigned char out[125], uint16_t code, const char *reason)
{
	size_t	rlen;

	if (code == WS_CLOSE_NO_STATUS)
		return 0;
	out[0] = (unsigned char)(code >> 8);
	out[1] = (unsigned char)code;
	if (reason == NULL)
		return 2;
	rlen = strnlen(reason, WS_MAX_CONTROL - 1);
	if (rlen > WS_MAX_CONTROL - 2) {
		/* cut to 123 bytes, backing off to a sequence boundary */
		rlen = WS_MAX_CONTROL - 2;
		while (rlen > 0 &&
		    ((unsigned char)reason[rlen] & 0xc0) == 0x80)
			rlen--;
	}
	memcpy(out + 2, reason, rlen);
	return 2 + rlen;
}

/*
 * RFC 6455 WebSocket framing, server side: handshake accept key, an
 * incremental parser for (masked) client frames that assembles
 * fragmented messages, and encoders for server frames.  No I/O here.
 */
#ifndef PARLEY_WS_H
#define PARLEY_WS_H

#include <stddef.h>
#include <stdint.h>

#include "parley/utf8.h"

enum {
	WS_OP_CONT = 0x0, WS_OP_TEXT = 0x1, WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8, WS_OP_PING = 0x9, WS_OP_PONG = 0xA
};

enum {
	WS_CLOSE_NORMAL = 1000, WS_CLOSE_GOING_AWAY = 1001,
	WS_CLOSE_PROTOCOL = 1002, WS_CLOSE_UNSUPPORTED = 1003,
	WS_CLOSE_NO_STATUS = 1005, WS_CLOSE_ABNORMAL = 1006,
	WS_CLOSE_INVALID_DATA = 1007, WS_CLOSE_POLICY = 1008,
	WS_CLOSE_TOO_BIG = 1009, WS_CLOSE_INTERNAL = 1011,
	WS_CLOSE_SERVICE_RESTART = 1012
};

#define WS_ACCEPT_LEN		28	/* base64 of a SHA-1 digest */
#define WS_MAX_HEADER		14	/* 2 + 8 (length) + 4 (mask) */
#define WS_MAX_CONTROL		125

/*
 * Sec-WebSocket-Accept for a client's Sec-WebSocket-Key: out gets 28
 * chars + NUL.  Returns 0, or -1 if the key is not the (canonical) base64
 * encoding of exactly 16 bytes; the handshake must then be refused with
 * 400.  The key must already be stripped of surrounding whitespace.
 */
int	ws_accept_key(const char *client_key, char out[29]);

/* All fields private; declared here so the parser can be embedded. */
struct ws_parser {
	size_t			 max_frame;
	size_t			 max_message;
	int			 state;
	uint16_t		 close_code;
	const char		*error;

	/* current frame */
	unsigned char		 hdr[WS_MAX_HEADER];
	size_t			 hdr_len;
	size_t			 hdr_need;
	int			 fin;
	int			 opcode;
	uint64_t		 frame_len;
	uint64_t		 frame_pos;

	/* data message being assembled (msg_opcode 0 = none) */
	int			 msg_opcode;
	int			 msg_delivered;
	unsigned char		*msg;
	size_t			 msg_len;
	size_t			 msg_cap;
	struct utf8_state	 utf8;

	/* control frames are bounded, so they get a fixed buffer */
	unsigned char		 ctrl[WS_MAX_CONTROL];
	size_t			 ctrl_len;
};

/*
 * max_frame bounds one data frame's payload, max_message an assembled
 * data message; control frames are bounded by 125 bytes instead.
 */
void	ws_parser_init(struct ws_parser *, size_t max_frame, size_t max_message);
/* Frees the message buffer; the parser may be initialised again. */
void	ws_parser_free(struct ws_parser *);

enum ws_status { WS_NEED_MORE, WS_MESSAGE, WS_FAIL };

struct ws_message {
	int			 opcode;	/* TEXT, BINARY, CLOSE, PING or PONG */
	const unsigned char	*data;		/* unmasked payload, never NULL; */
	size_t			 len;		/* valid until next ws_parse */
	uint16_t		 close_code;	/* CLOSE: peer's code or 1005 */
	const char		*close_reason;	/* CLOSE: not NUL-terminated */
	size_t			 close_reason_len;
};

/*
 * Consumes bytes of buf[0..len) and sets *used to the number consumed.
 * WS_MESSAGE as soon as one complete message (a data message after its
 * last fragment, or one control frame, which may arrive between
 * fragments) is in *msg: call again with buf + *used.  WS_NEED_MORE when
 * all bytes were consumed without completing a message.  WS_FAIL on a
 * protocol violation: see ws_parser_close_code() and ws_parser_error().
 * After WS_FAIL the parser stays failed (and consumes nothing).
 */
enum ws_status	ws_parse(struct ws_parser *, const unsigned char *buf,
		    size_t len, size_t *used, struct ws_message *msg);
/* After WS_FAIL: 1002, 1007, 1009 (or 1011 when out of memory). */
uint16_t	ws_parser_close_code(const struct ws_parser *);
/* After WS_FAIL: short human reason, e.g. "unmasked client frame". */
const char	*ws_parser_error(const struct ws_parser *);

/*
 * Server->client frames are unmasked with FIN=1.  Writes the frame
 * header for a payload of len bytes into hdr and returns its length
 * (2, 4 or 10).
 */
size_t	ws_frame_header(unsigned char hdr[10], int opcode, uint64_t len);

/*
 * Builds a close payload into out: the 2-byte code and reason (may be
 * NULL) truncated on a UTF-8 boundary to fit 125 bytes.  Returns the
 * payload length; 0 for code 1005, which must not be sent on the wire.
 */
size_t	ws_close_payload(unsigned char out[125], uint16_t code,
	    const char *reason);

#endif

/*
 * Store interface: argument checks shared by every backend (ids, the
 * fencing rule, record bounds) and dispatch through struct store_ops, so
 * a backend only sees well-formed requests.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parley/store.h"

static const struct store_ops *const store_backends[] = {
	&store_local_ops,
	&store_redis_ops,
	&store_sentinel_ops,
	&store_cluster_ops,
};

int
store_valid_id(const char *id)
{
	size_t	 i;
	char	 c;

	if (id == NULL || id[0] == '\0' || id[0] == '.')
		return 0;
	for (i = 0; id[i] != '\0'; i++) {
		if (i >= STORE_ID_MAX)
			return 0;
		c = id[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '.' || c == '_' ||
		    c == ':' || c == '-'))
			return 0;
	}
	return 1;
}

int
store_retained(const char *id)
{
	return strncmp(id, "kg:", 3) == 0;
}

struct store *
store_open(const char *url, const char *state_dir, enum store_fsync fs,
    char *err, size_t errlen)
{
	const struct store_ops	*ops;
	struct store		*st;
	size_t			 i, n;
	char			 dummy[1];

	if (err == NULL || errlen == 0) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	if (url == NULL || state_dir == NULL || (fs != STORE_FSYNC_ALWAYS &&
	    fs != STORE_FSYNC_BATCH && fs != STORE_FSYNC_NO)) {
		snprintf(err, errlen, "store: bad arguments");
		errno = EINVAL;
		return NULL;
	}
	for (i = 0; i < sizeof(store_backends) / sizeof(store_backends[0]);
	    i++) {
		ops = store_backends[i];
		n = strlen(ops->scheme);
		if (strncmp(url, ops->scheme, n) != 0 ||
		    (url[n] != '\0' && url[n] != ':'))
			continue;
		if ((st = ops->open(url, state_dir, fs, err, errlen)) == NULL)
			return NULL;
		st->ops = ops;
		st->fsync = fs;
		LIST_INIT(&st->sessions);
		return st;
	}
	snprintf(err, errlen, "store: unknown store \"%.64s\"", url);
	errno = EINVAL;
	return NULL;
}

void
store_close(struct store *st)
{
	struct store_sess	*s;

	if (st == NULL)
		return;
	while ((s = LIST_FIRST(&st->sessions)) != NULL)
		store_sess_close(s);
	st->ops->close(st);
}

int
store_sess_fds(const struct store *st)
{
	/* The local store holds a session's log open. */
	return st->ops == &store_local_ops ? 1 : 0;
}

int
store_exists(struct store *st, const char *id)
{
	if (!store_valid_id(id))
		return 0;
	return st->ops->exists(st, id);
}

struct store_sess *
store_sess_find(struct store *st, const char *id)
{
	struct store_sess	*s;

	LIST_FOREACH(s, &st->sessions, entry)
		if (strcmp(s->id, id) == 0)
			return s;
	return NULL;
}

int
store_sess_open(struct store *st, const char *id, int create,
    struct store_sess **out)
{
	struct store_sess	*s;

	*out = NULL;
	if (!store_valid_id(id)) {
		errno = EINVAL;
		return -1;
	}
	/* Two handles on one log would each believe they own last_seq. */
	if (store_sess_find(st, id) != NULL) {
		errno = EBUSY;
		return -1;
	}
	if (st->ops->sess_open(st, id, create, &s) == -1)
		return -1;
	s->store = st;
	memcpy(s->id, id, strlen(id) + 1);	/* valid ids fit */
	LIST_INSERT_HEAD(&st->sessions, s, entry);
	*out = s;
	return 0;
}

void
store_sess_close(struct store_sess *s)
{
	if (s == NULL)
		return;
	LIST_REMOVE(s, entry);
	s->store->ops->sess_close(s);
}

const char *
store_sess_id(const struct store_sess *s)
{
	return s->id;
}

uint64_t
store_last_seq(const struct store_sess *s)
{
	return s->last_seq;
}

uint64_t
store_first_seq(const struct store_sess *s)
{
	return s->first_seq;
}

/* The fencing rule and record bounds every append obeys; 0 or -1/errno. */
static int
record_check(const struct store_sess *s, uint64_t seq, const char *json,
    size_t len)
{
	size_t	 i;

	if (s->last_seq == UINT64_MAX || seq != s->last_seq + 1) {
		errno = EINVAL;
		return -1;
	}
	if (len > STORE_JSON_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (json == NULL || len == 0) {
		errno = EINVAL;
		return -1;
	}
	/* One record per line, and replay hands json out NUL-terminated. */
	for (i = 0; i < len; i++) {
		if (json[i] == '\n' || json[i] == '\r' || json[i] == '\0') {
			errno = EINVAL;
			return -1;
		}
	}
	return 0;
}

int
store_append(struct store_sess *s, uint64_t seq, uint64_t ts_ms,
    const char *json, size_t len)
{
	if (record_check(s, seq, json, len) == -1)
		return -1;
	if (s->store->ops->append == NULL) {
		errno = ENOTSUP;
		return -1;
	}
	return s->store->ops->append(s, seq, ts_ms, json, len);
}

int
store_range(struct store_sess *s, uint64_t after, size_t limit,
    store_range_cb cb, void *arg)
{
	if (cb == NULL) {
		errno = EINVAL;
		return -1;
	}
	if (after >= s->last_seq)
		return 0;
	return s->store->ops->range(s, after, limit, cb, arg);
}

int
store_meta_write(struct store_sess *s, const char *json, size_t len)
{
	if (len > STORE_META_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (json == NULL || memchr(json, '\0', len) != NULL) {
		errno = EINVAL;
		return -1;
	}
	return s->store->ops->meta_write(s, json, len);
}

char *
store_meta_read(struct store_sess *s)
{
	return s->store->ops->meta_read(s);
}

char *
store_meta_peek(struct store *st, const char *id)
{
	if (!store_valid_id(id)) {
		errno = EINVAL;
		return NULL;
	}
	return st->ops->meta_peek(st, id);
}

void
store_sync(struct store *st)
{
	st->ops->sync(st);
}

int
store_trim(struct store_sess *s, uint64_t cutoff_ms)
{
	if (store_retained(s->id))
		return 0;
	return s->store->ops->trim(s, cutoff_ms);
}

int
store_expire(struct store *st, uint64_t cutoff_ms)
{
	return st->ops->expire(st, cutoff_ms);
}

/* --- asynchronous use --- */

void
store_sess_link(struct store *st, struct store_sess *s)
{
	s->store = st;
	LIST_INSERT_HEAD(&st->sessions, s, entry);
}

int
store_attach(struct store *st, const struct store_params *p, char *err,
    size_t errlen)
{
	if (p == NULL || p->ev == NULL) {
		snprintf(err, errlen, "store: bad arguments");
		return -1;
	}
	st->params = *p;
	st->attached = 1;
	return st->ops->attach ? st->ops->attach(st, err, errlen) : 0;
}

int
store_healthy(struct store *st)
{
	return st->ops->healthy ? st->ops->healthy(st) : 1;
}

int
store_ping(struct store *st, unsigned timeout_ms, char *err, size_t errlen)
{
	return st->ops->ping ? st->ops->ping(st, timeout_ms, err, errlen) : 0;
}

enum store_role
store_role(const struct store_sess *s)
{
	return s->role ? s->role : STORE_OWNER;
}

int
store_run_begin(struct store *st, char *err, size_t errlen)
{
	return st->ops->run_begin != NULL ? st->ops->run_begin(st, err,
	    errlen) : 0;
}

int
store_run_end(struct store *st)
{
	return st->ops->run_end != NULL ? st->ops->run_end(st) : 0;
}

const char *
store_epochs(const struct store_sess *s)
{
	return s->store->ops->epochs != NULL ? s->store->ops->epochs(s) : "";
}

void
store_resync(struct store_sess *s)
{
	if (s->store->ops->resync != NULL)
		s->store->ops->resync(s);
}

int
store_congested(const struct store_sess *s)
{
	return s->store->ops->congested != NULL &&
	    s->store->ops->congested(s);
}

uint64_t
store_durable_seq(const struct store_sess *s)
{
	return s->store->ops->append_async ? s->durable_seq : s->last_seq;
}

void
store_open_async(struct store *st, const char *id, int create, size_t tail,
    store_open_cb cb, void *arg)
{
	struct store_sess	*s;

	if (!store_valid_id(id)) {
		cb(arg, EINVAL, NULL, 0);
		return;
	}
	if (store_sess_find(st, id) != NULL) {
		cb(arg, EBUSY, NULL, 0);
		return;
	}
	if (st->ops->open_async != NULL) {
		st->ops->open_async(st, id, create, tail, cb, arg);
		return;
	}
	if (store_sess_open(st, id, create, &s) == -1) {
		cb(arg, errno, NULL, 0);
		return;
	}
	s->role = STORE_OWNER;
	cb(arg, 0, s, STORE_OWNER);
}

int
store_append_async(struct store_sess *s, uint64_t seq, uint64_t ts_ms,
    const char *json, size_t len)
{
	const struct store_ops *ops = s->store->ops;

	if (ops->append_async == NULL) {
		if (store_append(s, seq, ts_ms, json, len) == -1)
			return -1;
		s->durable_seq = seq;
		if (s->store->params.ev && s->store->params.ev->durable)
			s->store->params.ev->durable(s->store->params.arg, s,
			    seq);
		return 0;
	}
	if (store_role(s) != STORE_OWNER) {
		errno = EPERM;
		return -1;
	}
	if (record_check(s, seq, json, len) == -1)
		return -1;
	return ops->append_async(s, seq, ts_ms, json, len);
}

int
store_meta_write_async(struct store_sess *s, const char *json, size_t len)
{
	if (s->store->ops->meta_write_async == NULL)
		return store_meta_write(s, json, len);
	if (store_role(s) != STORE_OWNER) {
		errno = EPERM;
		return -1;
	}
	if (len > STORE_META_MAX) {
		errno = EMSGSIZE;
		return -1;
	}
	if (json == NULL || memchr(json, '\0', len) != NULL) {
		errno = EINVAL;
		return -1;
	}
	return s->store->ops->meta_write_async(s, json, len);
}

struct store_req *
store_range_async(struct store_sess *s, uint64_t after, size_t limit,
    store_range_cb cb, store_done_cb done, void *arg)
{
	ssize_t n;

	if (s->store->ops->range_async != NULL && after < s->last_seq)
		return s->store->ops->range_async(s, after, limit, cb, done,
		    arg);
	n = store_range(s, after, limit, cb, arg);
	done(arg, n);
	return NULL;
}

struct store_req *
store_preload_async(struct store_sess *s, uint64_t after,
    store_done_cb done, void *arg)
{
	if (s->store->ops->preload_async != NULL && after < s->last_seq)
		return s->store->ops->preload_async(s, after, done, arg);
	done(arg, 0);
	return NULL;
}

void
store_req_cancel(struct store_req *r)
{
	struct store *st;

	if (r == NULL)
		return;
	/* Only async backends hand out requests. */
	st = *(struct store **)(void *)r;
	st->ops->req_cancel(r);
}

struct store_req *
store_post(struct store_sess *s, const char *json, size_t len,
    store_done_cb done, void *arg)
{
	if (s->store->ops->post == NULL || store_role(s) != STORE_FOLLOWER ||
	    json == NULL || len == 0 || len > STORE_JSON_MAX ||
	    memchr(json, '\0', len) != NULL) {
		errno = s->store->ops->post == NULL ? ENOTSUP : EINVAL;
		done(arg, -1);
		return NULL;
	}
	return s->store->ops->post(s, json, len, done, arg);
}

struct store_req *
store_promote(struct store_sess *s, store_done_cb done, void *arg)
{
	if (s->store->ops->promote == NULL ||
	    store_role(s) != STORE_FOLLOWER) {
		errno = s->store->ops->promote == NULL ? ENOTSUP : EINVAL;
		done(arg, -1);
		return NULL;
	}
	return s->store->ops->promote(s, done, arg);
}

/* --- documents --- */

/* What every document call checks; 0, or -1 with errno. */
static int
doc_check(const struct store_sess *s, const char *name)
{
	if (store_role(s) != STORE_OWNER) {
		errno = EPERM;
		return -1;
	}
	if (!store_valid_id(name)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

/* Completes a request at once: done with n (errno kept), NULL. */
static struct store_req *
doc_done(store_done_cb done, void *arg, ssize_t n)
{
	done(arg, n);
	return NULL;
}

struct store_req *
store_doc_put(struct store_sess *s, const char *name, const char *json,
    size_t len, store_done_cb done, void *arg)
{
	const struct store_ops *ops = s->store->ops;

	if (doc_check(s, name) == -1)
		return doc_done(done, arg, -1);
	if (len > STORE_DOC_MAX) {
		errno = EMSGSIZE;
		return doc_done(done, arg, -1);
	}
	if (json == NULL || len == 0 || memchr(json, '\0', len) != NULL) {
		errno = EINVAL;
		return doc_done(done, arg, -1);
	}
	if (ops->doc_put_async != NULL)
		return ops->doc_put_async(s, name, json, len, done, arg);
	if (ops->doc_put == NULL) {
		errno = ENOTSUP;
		return doc_done(done, arg, -1);
	}
	return doc_done(done, arg, ops->doc_put(s, name, json, len) == -1 ?
	    -1 : 0);
}

struct store_req *
store_doc_del(struct store_sess *s, const char *name, store_done_cb done,
    void *arg)
{
	const struct store_ops *ops = s->store->ops;

	if (doc_check(s, name) == -1)
		return doc_done(done, arg, -1);
	if (ops->doc_del_async != NULL)
		return ops->doc_del_async(s, name, done, arg);
	if (ops->doc_del == NULL) {
		errno = ENOTSUP;
		return doc_done(done, arg, -1);
	}
	return doc_done(done, arg, ops->doc_del(s, name));
}

struct store_req *
store_doc_all(struct store_sess *s, store_doc_cb cb, store_done_cb done,
    void *arg)
{
	const struct store_ops *ops = s->store->ops;

	/* Reading is a follower's too: it answers kb_search and kb_list
	 * itself (workers/kb.c); writes stay the owner's. */
	if (store_role(s) != STORE_OWNER && store_role(s) != STORE_FOLLOWER) {
		errno = EPERM;
		return doc_done(done, arg, -1);
	}
	if (cb == NULL) {
		errno = EINVAL;
		return doc_done(done, arg, -1);
	}
	if (ops->doc_all_async != NULL)
		return ops->doc_all_async(s, cb, done, arg);
	if (ops->doc_all == NULL) {
		errno = ENOTSUP;
		return doc_done(done, arg, -1);
	}
	return doc_done(done, arg, ops->doc_all(s, cb, arg));
}

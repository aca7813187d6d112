/*
 * A session's meta document in memory (sess_meta.c).  Included by sess.h,
 * where struct sess is whole: the accessors read its fields.
 */
#ifndef PARLEY_WORKERS_SESS_META_H
#define PARLEY_WORKERS_SESS_META_H

/*
 * The session's meta tree (NULL when it has none: still loading or
 * released), parsed from its frozen text first when need be.  A tree
 * returned stays valid until control returns to the event loop: only
 * the worker's freeze timer (sess_meta_sweep) frees it, and only for a
 * session that is not busy.  Logically const: s only changes form.
 */
cJSON		*sess_meta_thaw(const struct sess *);
static inline cJSON *
sess_meta(const struct sess *s)
{
	return s->mtxt == NULL ? s->mtree : sess_meta_thaw(s);
}
/* Whether s has meta, tree or text, without thawing it. */
static inline int
sess_has_meta(const struct sess *s)
{
	return s->mtree != NULL || s->mtxt != NULL;
}
/* Replaces s's meta (tree or text) by m (owned; NULL: none). */
void		 sess_meta_set(struct sess *, cJSON *);
/* Shares the known keys of m's members, at every depth; returns m. */
cJSON		*sess_meta_share_keys(cJSON *);
/* Freezes the meta of the sessions thawed a while ago that are idle. */
void		 sess_meta_sweep(struct wk *);
/* Writes meta to the store (an owner's, while it is not broken). */
void		 sess_meta_save(struct sess *);
/*
 * Whether meta may take item (borrowed), times copies, and stay within
 * three quarters of the store's bound (STORE_META_MAX): what a client
 * adds to it (thoughts, pending actions) must leave room for the turns'
 * history.  0 with r filled (RATE_LIMITED) when it may not.
 */
int		 sess_meta_room(struct sess *, const cJSON *item,
		    unsigned copies, struct sess_result *r);

#endif

/*
 * A libcurl multi handle driven by a libevent loop through
 * curl_multi_socket_action (one event per socket, one timer), so no
 * transfer ever blocks the loop.  Shared by llm_http.c and mcp*.c.
 *
 * Each finished transfer is handed to the done callback after
 * curl_multi_socket_action has returned, so that callback may remove,
 * free and add handles; it must not free the curlev itself.
 */
#ifndef PARLEY_CURLEV_H
#define PARLEY_CURLEV_H

#include <curl/curl.h>

struct event_base;
struct curlev;

/* A transfer is over: owner is its easy's CURLOPT_PRIVATE (easies
 * without one are not reported); the easy is still in the multi. */
typedef void	(*curlev_done_cb)(void *owner, CURLcode rc);
/* libcurl has returned from a socket action, before any done call:
 * the place to free what was cancelled from inside libcurl. */
typedef void	(*curlev_after_cb)(void *arg);

/* curl_global_init, once per process; 0, or -1 when it failed. */
int		 curlev_global_init(void);
/* A multi on base; after (may be NULL) is called with arg.  NULL on
 * failure. */
struct curlev	*curlev_new(struct event_base *base, curlev_done_cb done,
		    curlev_after_cb after, void *arg);
/* Frees the multi; handles still added are left to their owners. */
void		 curlev_free(struct curlev *);
/* 0, or -1 when the multi would not take easy. */
int		 curlev_add(struct curlev *, CURL *easy);
/* Takes easy out of the multi; not from inside a libcurl callback. */
void		 curlev_remove(struct curlev *, CURL *easy);
/* Non-zero inside curl_multi_socket_action, i.e. in libcurl's
 * callbacks, where handles must not be removed. */
int		 curlev_busy(const struct curlev *);

#endif

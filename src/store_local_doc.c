/*
 * Local store, a session's documents (store_doc_put and friends): one
 * file each under STATE_DIR/sessions/<id>/kb/ (the format is in
 * store_local.c's header comment).
 */
#include <sys/stat.h>
#include <sys/types.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parley/log.h"
#include "parley/store.h"
#include "store_local.h"

/* --- documents --- */

/*
 * The session's kb directory (mk: created if missing, durable as a new
 * session directory is): a descriptor, or -1 with errno (ENOENT: none).
 */
static int
local_kb_open(struct local_sess *ls, int mk)
{
	struct store	*st = ls->base.store;
	int		 fd, made = 0;

	if (local_dir_open(ls) == -1)
		return -1;
	if (mk) {
		if (mkdirat(ls->dirfd, "kb", 0750) == 0)
			made = 1;
		else if (errno != EEXIST)
			goto fail;
	}
	fd = openat(ls->dirfd, "kb", O_RDONLY | O_DIRECTORY | O_CLOEXEC |
	    O_NOFOLLOW);
	if (fd == -1)
		goto fail;
	if (made && local_async(st))
		local_sync_soon((struct local_store *)st);
	else if (made && !local_nosync(st) && fsync(ls->dirfd) == -1) {
		close(fd);
		goto fail;
	}
	local_dir_close(ls);
	return fd;
fail:
	local_dir_close(ls);
	return -1;
}

/* The temporary of a document: a leading '.', so never a valid name. */
static void
local_doc_tmp(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, ".%.*s.tmp", STORE_ID_MAX, name);
}

/* Once the kb directory changed: durable as a meta write is. */
static int
local_kb_synced(struct store *st, int kfd)
{
	if (local_async(st)) {
		local_sync_soon((struct local_store *)st);
		return 0;
	}
	if (!local_nosync(st) && fsync(kfd) == -1)
		return -1;
	return 0;
}

int
local_doc_put(struct store_sess *s, const char *name, const char *json,
    size_t len)
{
	char	 tmp[STORE_ID_MAX + 8];
	int	 kfd, r, save;

	if ((kfd = local_kb_open((struct local_sess *)s, 1)) == -1)
		return -1;
	local_doc_tmp(tmp, sizeof(tmp), name);
	/* BATCH in a worker: the sync thread makes it durable. */
	r = local_replace(kfd, tmp, name, json, len,
	    local_nosync(s->store) || local_async(s->store));
	if (r == 0 && local_async(s->store))
		local_sync_soon((struct local_store *)s->store);
	save = errno;
	close(kfd);
	errno = save;
	return r;
}

int
local_doc_del(struct store_sess *s, const char *name)
{
	int	 kfd, r, save;

	if ((kfd = local_kb_open((struct local_sess *)s, 0)) == -1)
		return errno == ENOENT ? 0 : -1;
	if (unlinkat(kfd, name, 0) == -1)
		r = errno == ENOENT ? 0 : -1;
	else
		r = local_kb_synced(s->store, kfd) == -1 ? -1 : 1;
	save = errno;
	close(kfd);
	errno = save;
	return r;
}

/* 1 if a directory entry is a document's leftover temporary. */
static int
local_doc_is_tmp(const char *n)
{
	size_t	 len = strlen(n);

	return n[0] == '.' && len > 5 && strcmp(n + len - 4, ".tmp") == 0;
}

ssize_t
local_doc_all(struct store_sess *s, store_doc_cb cb, void *arg)
{
	struct dirent	*de;
	DIR		*d;
	char		*json;
	size_t		 len;
	ssize_t		 n = 0;
	int		 kfd, save, stop = 0;

	if ((kfd = local_kb_open((struct local_sess *)s, 0)) == -1)
		return errno == ENOENT ? 0 : -1;
	if ((d = fdopendir(kfd)) == NULL) {
		save = errno;
		close(kfd);
		errno = save;
		return -1;
	}
	while (!stop && (de = readdir(d)) != NULL) {
		/* A write that died before its rename (the session is ours:
		 * nobody else is writing it). */
		if (local_doc_is_tmp(de->d_name)) {
			if (unlinkat(kfd, de->d_name, 0) == -1 &&
			    errno != ENOENT)
				log_warn("store: session %s: kb/%s", s->id,
				    de->d_name);
			continue;
		}
		if (!store_valid_id(de->d_name))
			continue;
		json = local_read_file(kfd, de->d_name, STORE_DOC_MAX, &len);
		if (json == NULL) {
			if (errno == ENOENT)
				continue;
			if (errno != EFBIG && errno != EINVAL)
				goto fail;
		}
		/* Never written by local_doc_put: left alone, and said. */
		if (json == NULL || len == 0 || memchr(json, '\0', len)) {
			log_warnx("store: session %s: kb/%s is not a document "
			    "(not a file, empty, over %u bytes or with a NUL); "
			    "skipped: remove it", s->id, de->d_name,
			    STORE_DOC_MAX);
			free(json);
			continue;
		}
		n++;
		stop = cb(arg, de->d_name, json, len) != 0;
		free(json);
	}
	closedir(d);
	return n;
fail:
	save = errno;
	closedir(d);
	errno = save;
	return -1;
}

/*
 * Removes an expiring session's kb directory and its documents.  An
 * unlink during readdir may hide an entry, so it looks again (a bounded
 * number of times) while the directory is not empty.
 */
void
local_kb_remove(struct local_store *lst, const char *id)
{
	char		 path[STORE_ID_MAX + 16];
	struct dirent	*de;
	DIR		*d;
	int		 fd, pass;

	local_path(path, sizeof(path), id, "kb");
	for (pass = 0; pass < 3; pass++) {
		fd = openat(lst->sessfd, path, O_RDONLY | O_DIRECTORY |
		    O_CLOEXEC | O_NOFOLLOW);
		if (fd == -1) {
			if (errno != ENOENT)
				log_warn("store: expire %s", path);
			return;
		}
		if ((d = fdopendir(fd)) == NULL) {
			log_warn("store: expire %s", path);
			close(fd);
			return;
		}
		while ((de = readdir(d)) != NULL) {
			if (strcmp(de->d_name, ".") == 0 ||
			    strcmp(de->d_name, "..") == 0)
				continue;
			/* (an empty directory someone made there too) */
			if (unlinkat(fd, de->d_name, 0) == -1 &&
			    (errno != EISDIR || unlinkat(fd, de->d_name,
			    AT_REMOVEDIR) == -1) && errno != ENOENT)
				log_warn("store: expire %s/%s", path,
				    de->d_name);
		}
		closedir(d);
		if (unlinkat(lst->sessfd, path, AT_REMOVEDIR) == 0 ||
		    errno == ENOENT)
			return;
		if (errno != ENOTEMPTY && errno != EEXIST)
			break;
	}
	log_warn("store: expire %s", path);
}


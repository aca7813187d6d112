/*
 * A file's hash as the host's directory index holds it (index.h's
 * index_file_hash, for the staleness of knowledge: kgstale.c).
 *
 * A path is relative to an index root, or absolute.  The segment names
 * its documents by real path, so a relative path is joined to the real
 * path of each index-root in parleyd.conf's order and the first one the
 * segment holds wins: roots nested or sharing a relative path resolve
 * the same way every time.  A path the segment does not hold is
 * "removed" only when it would lie inside a directory the index holds
 * (status.json's sources) and nothing is there on disk any more; any
 * other path (outside every source, excluded, too large, binary, not
 * indexed yet) is not judged.
 */
#include <sys/types.h>
#include <sys/stat.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "parley/kbseg.h"
#include "index_int.h"

int
index_path_ok(const char *path)
{
	const char *p = path, *e;
	size_t n;

	if (path[0] == '\0' || strlen(path) >= PATH_MAX)
		return 0;
	if (*p == '/')
		p++;
	for (;;) {
		e = strchr(p, '/');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		/* Empty, "." and ".." segments: the segment's names have
		 * none, and ".." could name a file outside the roots. */
		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return 0;
		if (e == NULL)
			return 1;
		p = e + 1;
	}
}

/* The sha256 of document name in seg: 1 (hex), 0 not held or binary. */
static int
doc_hash(const struct kbs *seg, const char *name, char hex[65])
{
	const char *dname, *meta, *s;
	uint32_t first, n;
	cJSON *o;
	int i, rc = 0;

	if (seg == NULL || (i = kbs_doc_find(seg, name)) < 0 ||
	    kbs_doc_get(seg, (size_t)i, &dname, &meta, &first, &n) == -1 ||
	    (o = cJSON_Parse(meta)) == NULL)
		return 0;
	s = cJSON_GetStringValue(cJSON_GetObjectItem(o, "sha256"));
	if (s != NULL && strlen(s) == 64) {
		memcpy(hex, s, 65);
		rc = 1;
	}
	cJSON_Delete(o);
	return rc;
}

/* Name in no source: -1; in one: 1 when nothing is there on disk. */
static int
gone(const struct index_src *srcs, size_t nsrcs, const char *name)
{
	struct stat st;
	size_t i;

	for (i = 0; i < nsrcs; i++)
		if (index_under(srcs[i].path, name))
			break;
	if (i == nsrcs)
		return -1;
	return lstat(name, &st) == -1 && (errno == ENOENT ||
	    errno == ENOTDIR);
}

int
index_seg_hash(const struct kbs *seg, const char *const *roots,
    size_t nroots, const struct index_src *srcs, size_t nsrcs,
    const char *path, char hex[65])
{
	char full[PATH_MAX];
	size_t i;
	int len, g;

	hex[0] = '\0';
	if (!index_path_ok(path))
		return 0;
	if (path[0] == '/') {
		if (doc_hash(seg, path, hex))
			return 1;
		return gone(srcs, nsrcs, path) == 1 ? -1 : 0;
	}
	for (i = 0; i < nroots; i++) {
		len = snprintf(full, sizeof(full), "%s%s%s", roots[i],
		    strcmp(roots[i], "/") == 0 ? "" : "/", path);
		if (len > 0 && (size_t)len < sizeof(full) &&
		    doc_hash(seg, full, hex))
			return 1;
	}
	/* Removed or not: the first root whose join a source holds says. */
	for (i = 0; i < nroots; i++) {
		len = snprintf(full, sizeof(full), "%s%s%s", roots[i],
		    strcmp(roots[i], "/") == 0 ? "" : "/", path);
		if (len <= 0 || (size_t)len >= sizeof(full) ||
		    (g = gone(srcs, nsrcs, full)) == -1)
			continue;
		return g == 1 ? -1 : 0;
	}
	return 0;
}

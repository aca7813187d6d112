/*
 * Local store, a session's meta: two alternating checksummed slots,
 * sessions/<id>/meta.0 and meta.1 (layout in store_seg.c), each rewritten
 * in place.  The reader takes the valid slot with the highest generation,
 * so a write torn by a crash leaves the other, older one.  Rewriting in
 * place costs no inode per write, where tmp + rename made and dropped one
 * each time (a busy worker's meta writes churned the inode tables).
 *
 * Which slot a write goes to: never the newest (a write torn by a crash
 * would leave the one before it, and that one may have been overwritten
 * too: two generations lost, one of them acknowledged), and never the
 * newest slot known to be on disk (a power failure would leave nothing
 * whole).  With fsync ALWAYS or NO, or once the sync thread is past the
 * newest (BATCH), those are the same slot and writes alternate between
 * meta.0 and meta.1; while the newest is unsynced under BATCH, the third
 * slot, meta.2, takes the write.  So a crash leaves the newest
 * acknowledged meta or the one being written, and a power failure at
 * least the newest synced one.
 *
 * The v1 "meta" file (tmp + rename) is read when no slot is there: an
 * upgraded state directory.  It is removed once a slot is on disk.
 */
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parley/log.h"
#include "parley/store.h"
#include "store_local.h"
#include "store_seg.h"

static const char *const slot_name[LOCAL_META_SLOTS] = { "meta.0",
    "meta.1", "meta.2" };

/* What a look at both slots found. */
struct meta_view {
	char		*text;		/* malloc'd, NUL-terminated, or NULL */
	size_t		 len;
	uint64_t	 gen;		/* of the newest valid slot */
	int		 slot;		/* it, or -1 */
	int		 legacy;	/* a v1 "meta" file is there */
	int		 exists[LOCAL_META_SLOTS];
	size_t		 size[LOCAL_META_SLOTS];
};

/*
 * Reads slot i of id's meta (id NULL: atfd is the session's directory)
 * into mv if valid and newer.  0, or -1 with errno for an I/O error or a
 * slot of an unknown version (refused: a newer parleyd wrote it).
 */
static int
meta_slot_read(int atfd, const char *id, int i, struct meta_view *mv)
{
	char		 path[STORE_ID_MAX + 16], *buf;
	const char	*json;
	size_t		 size, len;
	uint64_t	 gen;
	uint32_t	 version;

	if (id != NULL)
		local_path(path, sizeof(path), id, slot_name[i]);
	else
		snprintf(path, sizeof(path), "%s", slot_name[i]);
	buf = local_read_file(atfd, path, STORE_META_MAX + SEG_META_HDR,
	    &size);
	if (buf == NULL) {
		if (errno == ENOENT)
			return 0;
		if (errno != EFBIG && errno != EINVAL)
			return -1;
		mv->exists[i] = 1;	/* not a slot this code wrote */
		return 0;
	}
	mv->exists[i] = 1;
	mv->size[i] = size;
	if (seg_meta_decode((unsigned char *)buf, size, &gen, &json, &len,
	    &version) == -1) {
		if (errno == EPROTONOSUPPORT) {
			log_warnx("store: session %s: %s is in meta format "
			    "version %u, this parleyd knows %u: refusing it "
			    "(run the parleyd that wrote it)", id ? id : "?",
			    slot_name[i], version, SEG_VERSION);
			free(buf);
			errno = EPROTONOSUPPORT;
			return -1;
		}
		free(buf);		/* torn: the other slot answers */
		return 0;
	}
	if (mv->slot == -1 || gen > mv->gen) {
		free(mv->text);
		memmove(buf, json, len);
		buf[len] = '\0';
		mv->text = buf;
		mv->len = len;
		mv->gen = gen;
		mv->slot = i;
	} else
		free(buf);
	return 0;
}

/*
 * Looks at every slot and the v1 file (id as in meta_slot_read).  0 with
 * mv filled (mv->text NULL: no meta at all), or -1 with errno.
 */
static int
meta_load(int atfd, const char *id, struct meta_view *mv)
{
	char		 path[STORE_ID_MAX + 16];
	struct stat	 sb;
	int		 i;

	memset(mv, 0, sizeof(*mv));
	mv->slot = -1;
	for (i = 0; i < LOCAL_META_SLOTS; i++)
		if (meta_slot_read(atfd, id, i, mv) == -1) {
			free(mv->text);
			mv->text = NULL;
			return -1;
		}
	if (id != NULL)
		local_path(path, sizeof(path), id, "meta");
	else
		snprintf(path, sizeof(path), "meta");
	mv->legacy = fstatat(atfd, path, &sb, AT_SYMLINK_NOFOLLOW) == 0;
	if (mv->slot != -1 || !mv->legacy) {
		if (mv->slot == -1 && (mv->exists[0] || mv->exists[1] ||
		    mv->exists[2]))
			log_warnx("store: session %s: no meta slot is whole "
			    "(torn or corrupt): the session has no meta",
			    id ? id : "?");
		return 0;
	}
	if ((mv->text = local_read_file(atfd, path, STORE_META_MAX,
	    &mv->len)) == NULL && errno != ENOENT)
		return -1;
	return 0;
}

/* Loads the slots' state into the session (it holds the lock). */
static int
meta_state(struct local_sess *ls, struct meta_view *mv)
{
	int	 i;

	if (meta_load(ls->dirfd, NULL, mv) == -1)
		return -1;
	ls->meta_loaded = 1;
	ls->meta_slot = mv->slot;
	ls->meta_gen = mv->gen;
	ls->meta_legacy = mv->legacy;
	ls->meta_synced = 1;		/* read back from the file system */
	ls->meta_dslot = mv->slot;
	for (i = 0; i < LOCAL_META_SLOTS; i++) {
		ls->meta_exists[i] = mv->exists[i];
		ls->meta_size[i] = mv->size[i];
	}
	return 0;
}

char *
local_meta_read(struct store_sess *s)
{
	struct local_sess	*ls = (struct local_sess *)s;
	struct meta_view	 mv;
	int			 r, save;

	if (local_dir_open(ls) == -1)
		return NULL;
	r = meta_state(ls, &mv);
	save = errno;
	local_dir_close(ls);
	if (r == -1) {
		errno = save;
		return NULL;
	}
	if (mv.text == NULL)
		errno = ENOENT;
	return mv.text;
}

char *
local_meta_peek(struct store *st, const char *id)
{
	struct meta_view	 mv;

	if (meta_load(((struct local_store *)st)->sessfd, id, &mv) == -1)
		return NULL;
	if (mv.text == NULL)
		errno = ENOENT;
	return mv.text;
}

/* pwritev() of the whole of iov at offset 0; 0 or -1 with errno. */
static int
meta_pwrite(int fd, struct iovec *iov, int n)
{
	off_t	 off = 0;
	ssize_t	 r;

	while (n > 0) {
		r = pwritev(fd, iov, n, off);
		if (r == -1) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = ENOSPC;
			return -1;
		}
		off += r;
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

/* Writes json into a slot; the session's directory is open. */
static int
meta_put(struct local_sess *ls, const char *json, size_t len)
{
	struct local_store	*lst = (struct local_store *)ls->base.store;
	struct store		*st = &lst->base;
	struct meta_view	 mv;
	unsigned char		 hdr[SEG_META_HDR];
	struct iovec		 iov[2];
	size_t			 size = SEG_META_HDR + len;
	int			 fd, slot, made, save;
	int			 nosync = local_nosync(st), async = local_async(st);

	if (!ls->meta_loaded) {
		if (meta_state(ls, &mv) == -1)
			return -1;
		free(mv.text);
	}
	/* Neither the newest nor the newest on disk (see above). */
	if (ls->meta_slot != -1 && (!async || ls->meta_synced ||
	    local_synced(lst, ls->meta_ticket)))
		ls->meta_dslot = ls->meta_slot;
	for (slot = 0; slot == ls->meta_slot || slot == ls->meta_dslot;
	    slot++)
		;
	made = !ls->meta_exists[slot];
	fd = openat(ls->dirfd, slot_name[slot], O_RDWR | O_CREAT | O_CLOEXEC |
	    O_NOFOLLOW, 0640);
	if (fd == -1)
		return -1;
	seg_meta_encode(hdr, ls->meta_gen + 1, json, len);
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(hdr);
	iov[1].iov_base = (void *)(uintptr_t)json;
	iov[1].iov_len = len;
	if (meta_pwrite(fd, iov, len > 0 ? 2 : 1) == -1 ||
	    (ls->meta_size[slot] > size && ftruncate(fd, (off_t)size) == -1) ||
	    (!nosync && !async && fdatasync(fd) == -1)) {
		save = errno;
		close(fd);
		/* That slot may be torn now: look again next time. */
		ls->meta_loaded = 0;
		errno = save;
		return -1;
	}
	close(fd);
	if (made && !nosync && !async && fsync(ls->dirfd) == -1)
		return -1;
	ls->meta_exists[slot] = 1;
	ls->meta_size[slot] = size;
	ls->meta_slot = slot;
	ls->meta_gen++;
	if (async) {
		ls->meta_synced = 0;
		ls->meta_ticket = local_ticket(lst);
		local_sync_soon(lst);
	} else {
		ls->meta_synced = 1;
		ls->meta_dslot = slot;
	}
	/* The v1 file goes once a slot is on disk (NO: at once). */
	if (ls->meta_legacy && (nosync || ls->meta_synced ||
	    local_synced(lst, ls->meta_ticket))) {
		if (unlinkat(ls->dirfd, "meta", 0) == -1 && errno != ENOENT)
			log_warn("store: session %s: meta", ls->base.id);
		else
			ls->meta_legacy = 0;
	}
	return 0;
}

int
local_meta_write(struct store_sess *s, const char *json, size_t len)
{
	struct local_sess	*ls = (struct local_sess *)s;
	int			 r;

	if (local_dir_open(ls) == -1)
		return -1;
	r = meta_put(ls, json, len);
	local_dir_close(ls);
	return r;
}

// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * data.c - file contents: read, write, truncate, fsync, fallocate, lseek and
 * copy_file_range over the compressed block store, the store's writeback
 * callback, and the writeback thread.
 *
 * A regular file's data is its backing file overlaid with the blocks of its
 * struct zr_file: a block in the store is authoritative; a block not there
 * is read from the backing file (zeros past its end) and inserted clean.
 * Writes store whole blocks (read-modify-write for partial ones) as dirty;
 * the cached size (zr_inode.size) grows, the backing file is not touched
 * until writeback. Invariant: the backing file is never longer than the
 * cached size, so a block beyond the backing end reads as zeros.
 *
 * zr_inode.lock serialises the writers of one file (and truncate) and
 * guards size/gen; readers do not take it except to insert a clean block,
 * which they skip when `gen` moved while they read the backing file (a
 * writer got there first). So every change of the data (a write, a
 * truncate, a punch) bumps gen before it lets go of the lock, whether it
 * succeeded or not: one that failed halfway may have changed the backing
 * file, or dropped blocks from the tier, already (data_changed()). The
 * writeback callback takes no inode lock: it reads the size atomically and
 * the mtime under attr_lock.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/openat2.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

static pthread_key_t blk_key;
static pthread_once_t blk_once = PTHREAD_ONCE_INIT;

static void blk_key_init(void)
{
	pthread_key_create(&blk_key, free);
}

/* A per-thread scratch block of ZR_BLOCK_MAX bytes, or NULL. */
static char *scratch_block(void)
{
	char *b;

	pthread_once(&blk_once, blk_key_init);
	b = pthread_getspecific(blk_key);
	if (!b) {
		b = malloc(ZR_BLOCK_MAX);
		if (b)
			pthread_setspecific(blk_key, b);
	}
	return b;
}

static uint64_t load_size(struct zr_inode *ino)
{
	return __atomic_load_n(&ino->size, __ATOMIC_ACQUIRE);
}

static void store_size(struct zr_inode *ino, uint64_t size)
{
	__atomic_store_n(&ino->size, size, __ATOMIC_RELEASE);
}

/*
 * Grow the cached size to @size (writers holding the lock shared race).
 * @return the size it replaced, or @size when it was @size or more already.
 */
static uint64_t grow_size(struct zr_inode *ino, uint64_t size)
{
	uint64_t cur = load_size(ino);

	while (cur < size) {
		if (__atomic_compare_exchange_n(&ino->size, &cur, size, false,
						__ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
			return cur;
	}
	return size;
}

/* The backing file now holds the file's bytes up to @end (ino->disk_end). */
static void disk_end_raise(struct zr_inode *ino, uint64_t end)
{
	uint64_t cur = __atomic_load_n(&ino->disk_end, __ATOMIC_RELAXED);

	while (cur < end && !__atomic_compare_exchange_n(&ino->disk_end, &cur, end, true,
							 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

/* pread that retries short reads; @return bytes read (short only at EOF) or -errno. */
static ssize_t full_pread(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/*
 * Write @len bytes of @buf at @off of @fd, retrying short writes (a
 * filesystem that fills up writes what fits, then fails the rest).
 * @return 0 or -errno; *@done is the bytes written: @len after success,
 * after an error those before it (they are in the file).
 */
static int pwrite_counted(int fd, const void *buf, size_t len, off_t off, size_t *done)
{
	*done = 0;
	while (*done < len) {
		ssize_t n = pwrite(fd, (const char *)buf + *done, len - *done,
				   off + (off_t)*done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EBADF ? -EROFS : -errno;
		}
		*done += (size_t)n;
	}
	return 0;
}

/* @return 0 or -errno; never a short write. */
static int full_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	size_t done;

	return pwrite_counted(fd, buf, len, off, &done);
}

/**
 * zr_data_attach() - make @ino (a regular file whose fd is @fd) ready for
 * data operations: its block map and its cached size. @created: the daemon
 * has just created the backing file (O_EXCL): empty, with no capabilities.
 * @return 0 or -errno.
 */
int zr_data_attach(struct zr_fs *fs, struct zr_inode *ino, int fd, bool created)
{
	struct stat st;
	ssize_t n;
	int rc = 0;

	if (!S_ISREG(ino->type))
		return 0;
	pthread_rwlock_wrlock(&ino->lock);
	if (!ino->size_valid) {
		/* with KILLPRIV_V2 we drop file capabilities on write
		 * (session.c); a file just created is empty and has none */
		uint64_t size = 0;
		bool caps = false;

		if (!created) {
			if (fstat(fd, &st) < 0) {
				rc = -errno;
				goto out;
			}
			size = (uint64_t)st.st_size;
			/* unknown (an error other than "none") counts as
			 * present: the first write then tries to remove it */
			n = fgetxattr(fd, ZR_XATTR_CAPS, NULL, 0);
			caps = n > 0 || (n < 0 && errno != ENODATA && errno != ENOTSUP);
		}
		store_size(ino, size);
		__atomic_store_n(&ino->disk_end, size, __ATOMIC_RELAXED);
		ino->size_valid = true;
		__atomic_store_n(&ino->has_caps, caps, __ATOMIC_RELAXED);
	}
	if (fs->store && !ino->blocks) {
		zr_inode_take_handle(fs, ino, fd);
		rc = zr_file_create(fs->store, ino, &ino->blocks);
	}
out:
	pthread_rwlock_unlock(&ino->lock);
	return rc;
}

/* Whether @ino must be attached before its data is used: its size read
 * and its tier file made. (Read without ino->lock: zr_data_attach()
 * decides under it.) */
static bool attach_needed(struct zr_fs *fs, struct zr_inode *ino)
{
	return !ino->size_valid || (fs->store && !ino->blocks);
}

/* Attach through the fd cache. */
static int attach_cached(struct zr_fs *fs, struct zr_inode *ino)
{
	int fd, rc;

	if (!attach_needed(fs, ino))
		return 0;
	fd = zr_fd_get(fs, ino);
	if (fd < 0)
		return fd;
	rc = zr_data_attach(fs, ino, fd, false);
	zr_fd_put(fs, ino);
	return rc;
}

/*
 * The store's may_expire callback: a file reached only by its orphan's
 * name (deleted while open) is not written back by age; its data goes at
 * the last close, and reclaim still writes it when the tier needs room.
 * (Relaxed reads: a stale answer costs one writeback, or one period.)
 */
bool zr_data_may_expire_cb(void *ctx, void *owner)
{
	struct zr_inode *ino = owner;

	(void)ctx;
	return !(__atomic_load_n(&ino->orphaned, __ATOMIC_RELAXED) &&
		 __atomic_load_n(&ino->unlinked, __ATOMIC_RELAXED));
}

/* The store's space callback: the filesystem holding the backing file.
 * (Relaxed read without ns_lock: a file the key of which changes meanwhile
 * may be counted on the wrong filesystem for one reclaim pass.) */
uint64_t zr_data_space_cb(void *ctx, void *owner)
{
	struct zr_inode *ino = owner;

	(void)ctx;
	return (uint64_t)__atomic_load_n(&ino->key.dev, __ATOMIC_RELAXED);
}

/**
 * zr_data_fix_stat() - merge what only the daemon knows into a backing stat:
 * the cached size and mtime of a file with data not yet written back, the
 * link count of an orphaned one.
 */
void zr_data_fix_stat(struct zr_fs *fs, struct zr_inode *ino, struct stat *st)
{
	uint64_t size, blocks;

	/* the name in the orphan directory is not one of the file's links */
	if (__atomic_load_n(&ino->orphaned, __ATOMIC_RELAXED) && st->st_nlink > 0)
		st->st_nlink--;
	if (!S_ISREG(ino->type) || !ino->size_valid)
		return;
	size = load_size(ino);
	if ((uint64_t)st->st_size != size) {
		st->st_size = (off_t)size;
	}
	if (ino->blocks && zr_file_dirty(ino->blocks)) {
		/* blocks not yet written back will occupy space once they
		 * are: count them, bounded by the size. Not the clean ones:
		 * the backing file has them already (counted twice, a file
		 * with holes punched showed more than tmpfs; a rewrite of
		 * data on disk still does, within the size) */
		blocks = (uint64_t)st->st_blocks +
			 zr_file_ndirty(ino->blocks) * (fs->bs / 512);
		blocks = ZR_MIN(blocks, (size + 511) / 512);
		if ((uint64_t)st->st_blocks < blocks)
			st->st_blocks = (blkcnt_t)blocks;
	}
	pthread_mutex_lock(&fs->attr_lock);
	if (ino->times_dirty)
		st->st_mtim = ino->mtime;
	pthread_mutex_unlock(&fs->attr_lock);
}

/* Whether @len bytes at @p are all zero. */
static bool all_zero(const char *p, size_t len)
{
	static const char zero[16];

	if (len < 16)
		return memcmp(p, zero, len) == 0;
	return memcmp(p, zero, 16) == 0 && memcmp(p, p + 16, len - 16) == 0;
}

#define ZR_LOST_LOGS 8	/* files logged by backing_fd(), then only counted */

/*
 * Whether backing_fd() should log an event of a file: the first time for
 * the file (*@logged, one of its zr_inode flags), and for the first
 * ZR_LOST_LOGS files (*@count, a counter of zr_fs); the next one logs
 * @more, why it stops.
 */
static bool log_capped(bool *logged, uint64_t *count, const char *more)
{
	uint64_t n;

	if (__atomic_exchange_n(logged, true, __ATOMIC_RELAXED))
		return false;
	n = __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
	if (n == ZR_LOST_LOGS)
		zr_log(ZR_LOG_WARNING, "%s", more);
	return n < ZR_LOST_LOGS;
}

/* Whether backing_fd() should log @ino, @removed or renamed behind our back. */
static bool lost_log(struct zr_fs *fs, struct zr_inode *ino, bool removed)
{
	return log_capped(&ino->lost_logged, &fs->lost_logs[removed], removed ?
			  "more files removed behind zramfs's back: counted in removed_dropped of .zramfs/stats, no longer logged" :
			  "more files renamed behind zramfs's back: counted in handle_opens of .zramfs/stats, no longer logged");
}

/* Whether backing_fd() should log that @ino cannot be opened: once until
 * it opens again (writeback retries it; open_err_clear()). */
static bool open_err_log(struct zr_fs *fs, struct zr_inode *ino)
{
	return log_capped(&ino->open_err_logged, &fs->open_err_logs,
			  "more files whose backing file cannot be opened to write their data back: counted in writeback_errors of .zramfs/stats, no longer logged");
}

/* @ino's backing file opened: a later failure is logged again. */
static void open_err_clear(struct zr_inode *ino)
{
	if (__atomic_load_n(&ino->open_err_logged, __ATOMIC_RELAXED))
		__atomic_store_n(&ino->open_err_logged, false, __ATOMIC_RELAXED);
}

/*
 * The fd that writeback and fsync write @ino through, pinned until
 * zr_fd_put(): the cached one, or, when none of the file's names reaches it
 * any more (it, or a parent, was renamed or removed in the backing
 * directory behind zramfs's back, or its name now holds a symlink or a
 * directory), one opened through its file handle.
 * *@fdp is -1 when the backing filesystem says the file is gone: its data
 * has no home, and its @len bytes go as an unlink's would (logged for the
 * first files, counted), unless an unlink or rename of ours holds the
 * inode's lock across its backing call: it drops the blocks itself.
 * @wb: for a writeback, whose failure to open the file is logged (the
 * first time for a file until it opens again, for the first ZR_LOST_LOGS
 * times); an fsync returns its error instead.
 * @return 0, or -errno: the handle's, or the names' when there is no
 * handle (an open by handle that fails for lack of memory says ENOMEM, not
 * the ENOENT of a name that was renamed away).
 */
static int backing_fd(struct zr_fs *fs, struct zr_inode *ino, uint64_t len, bool wb,
		      int *fdp)
{
	int fd, hfd = -1;
	bool gone;

	/* with a handle to settle it, a missing name is not waited for (a
	 * rename of ours in flight ends up at the same file) */
	fd = __atomic_load_n(&ino->handle, __ATOMIC_ACQUIRE) ? zr_fd_get_nowait(fs, ino)
							     : zr_fd_get(fs, ino);

	*fdp = fd;
	if (fd >= 0) {
		struct stat st;

		/* a cached fd of a file removed behind our back still takes
		 * writes, into an inode that nobody sees again (where the
		 * backing filesystem's link count can be believed); but one
		 * unlinked through the mount while open, whose orphan's name
		 * could not be made (ENOSPC, EDQUOT), is held by its pinned
		 * fd, and read back through it */
		if (!fs->links_trusted || ino->key.dev != fs->backing_dev ||
		    fstat(fd, &st) != 0 || st.st_nlink > 0 || zr_fd_is_pinned(fs, ino)) {
			open_err_clear(ino);
			return 0;
		}
		zr_fd_put(fs, ino);
		gone = true;
	} else {
		/* whatever the names say (gone, another file, a symlink or
		 * a directory there now, EIO), the handle decides, and its
		 * failure is the error */
		hfd = zr_fd_get_by_handle(fs, ino, &gone);
	}
	if (gone) {
		*fdp = -1;
		/* (a trylock never waits: no lock order to keep) */
		if (pthread_rwlock_tryrdlock(&ino->lock) != 0)
			return 0;	/* ours, or cannot tell: no word */
		pthread_rwlock_unlock(&ino->lock);
		zr_stat_add(&fs->removed_dropped, len);
		if (lost_log(fs, ino, true))
			zr_log(ZR_LOG_WARNING, "inode %llu was removed from the backing directory behind zramfs's back: the data not yet written back is dropped, as an unlink drops it",
			       (unsigned long long)ino->key.ino);
		return 0;
	}
	if (hfd < 0) {
		if (wb && open_err_log(fs, ino))
			zr_log(ZR_LOG_ERR, "cannot open the backing file of inode %llu to write its data back (kept in RAM, retried): %s%s%s%s",
			       (unsigned long long)ino->key.ino,
			       fd == -ESTALE ? "none of its names reaches it (renamed behind zramfs's back?)"
					     : strerror(-fd),
			       hfd == -ENOTSUP ? "" : " (through its file handle: ",
			       hfd == -ENOTSUP ? "" : strerror(-hfd), hfd == -ENOTSUP ? "" : ")");
		return hfd == -ENOTSUP ? fd : hfd;
	}
	open_err_clear(ino);
	if (lost_log(fs, ino, false))
		zr_log(ZR_LOG_WARNING, "no name zramfs knows reached inode %llu in the backing directory (renamed behind its back, or a rename through the mount was under way): written back through its file handle",
		       (unsigned long long)ino->key.ino);
	*fdp = hfd;
	return 0;
}

/*
 * Log a failed writeback of @len bytes at @start of @ino (@rc: -errno): at
 * most one line a second, saying how many were left out since the last
 * one (a full disk fails every run of every dirty file, from several
 * threads). Threads race for the line: at worst two come in one second.
 */
static void log_wb_error(const struct zr_inode *ino, uint64_t start, uint64_t len, int rc)
{
	static uint64_t last_ms, quiet;
	uint64_t now = zr_now_ms(), last = __atomic_load_n(&last_ms, __ATOMIC_RELAXED), n;
	char more[96] = "";

	if (last && now - last < 1000) {
		__atomic_add_fetch(&quiet, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_store_n(&last_ms, now, __ATOMIC_RELAXED);
	n = __atomic_exchange_n(&quiet, 0, __ATOMIC_RELAXED);
	if (n)
		snprintf(more, sizeof(more), " (and %llu more since the last such line)",
			 (unsigned long long)n);
	zr_log(ZR_LOG_ERR, "writeback of %llu bytes at offset %llu of inode %llu failed: %s%s",
	       (unsigned long long)len, (unsigned long long)start,
	       (unsigned long long)ino->key.ino, strerror(-rc), more);
}

/*
 * Put the mtime the file showed (noted by touch_data()) back on its backing
 * file @fd, whose own writes moved it: after a writeback, and after a
 * change made to the backing file at once (a write through, a stream, a
 * truncate, a punched hole; helper-68's fuzzer found the backing file a
 * few ms later than the mount after those, as no writeback came to stamp
 * it). Nothing when no time is noted. Under the file's stamp lock: a
 * SETATTR of the mtime, which notes it too, comes wholly before or after,
 * not between our read of the time and our stamp, which would put the
 * older time back on the backing file (helper-61). Best effort.
 */
static void stamp_mtime(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	struct timespec ts[2];
	bool stamp;

	pthread_mutex_lock(zr_stamp_lock(fs, ino));
	pthread_mutex_lock(&fs->attr_lock);
	stamp = ino->times_dirty;
	ts[1] = ino->mtime;
	pthread_mutex_unlock(&fs->attr_lock);
	if (stamp) {
		ts[0].tv_sec = 0;
		ts[0].tv_nsec = UTIME_OMIT;
		(void)futimens(fd, ts);
	}
	pthread_mutex_unlock(zr_stamp_lock(fs, ino));
}

/*
 * The store's writeback callback: write @nblocks blocks of file @owner from
 * @buf, clipped to the cached size, then stamp the cached mtime so that make
 * and friends see the time of the write, not of the writeback.
 * Runs under the file's io mutex; takes no inode lock.
 * @return 0 or -errno.
 */
int zr_data_writeback_cb(void *ctx, void *owner, uint64_t index,
			 unsigned nblocks, const void *buf)
{
	struct zr_fs *fs = ctx;
	struct zr_inode *ino = owner;
	uint64_t start = index * fs->bs, size = load_size(ino), len;
	int fd, rc;

	/* a dirty block written here may leave the tier as clean before a
	 * stream's install_written() of an older copy: it must see this
	 * write (helper-36's review) */
	ino->tb_seq++;
	zr_stat_add(&fs->wb_writes, 1);	/* (before it: zr_data_syncfs()) */
	if (start >= size)
		return 0;	/* past the end: truncated meanwhile */
	len = ZR_MIN((uint64_t)nblocks * fs->bs, size - start);
	rc = backing_fd(fs, ino, len, true, &fd);
	if (rc)
		return rc;
	if (fd < 0)
		return 0;	/* removed behind our back: nowhere to go */
	/* (read-only when the file was not writable at the reopen: the
	 * owner's 0444, for an unprivileged daemon; a failure stays EBADF) */
	(void)zr_fd_make_writable(fs, ino, fd);
	{
		struct stat st;

		/* zeros at or past the backing end: extend the file (a hole)
		 * instead of writing them */
		if (all_zero(buf, len) && fstat(fd, &st) == 0 &&
		    (uint64_t)st.st_size <= start) {
			rc = ftruncate(fd, (off_t)(start + len)) < 0 ? -errno : 0;
			len = 0;
		} else {
			rc = full_pwrite(fd, buf, len, (off_t)start);
		}
	}
	if (rc == 0) {
		zr_stat_add(&fs->bytes_written_backing, len);
		disk_end_raise(ino, start + ZR_MIN((uint64_t)nblocks * fs->bs, size - start));
		stamp_mtime(fs, ino, fd);
	} else {
		log_wb_error(ino, start, len, rc);
	}
	zr_fd_put(fs, ino);
	return rc;
}

/* Whether the tier holds more than @sixteenths / 16 of its low watermark.
 * Lock-free. */
static bool tier_above(struct zr_fs *fs, unsigned sixteenths)
{
	uint64_t budget = __atomic_load_n(&fs->opt->store.budget, __ATOMIC_RELAXED);

	return zr_store_mem_used(fs->store) >
	       budget / 1600 * fs->opt->store.low_wm * sixteenths;
}

/* Whether the tier is above its low watermark. */
static bool tier_tight(struct zr_fs *fs)
{
	return tier_above(fs, 16);
}

/*
 * Whether the tier is full: above a sixteenth below its low watermark
 * (75% of the budget with low_wm=80). Reclaim stops at the low watermark,
 * so a tier that has had to make room sits just under it, and stays full
 * while it churns.
 */
static bool tier_full(struct zr_fs *fs)
{
	return tier_above(fs, 15);
}

/*
 * The doorkeeper of a full tier (tier_full(); TinyLFU's): a block the tier
 * does not hold comes in only at its second recent miss, by a read or by a
 * write of part of it. The first miss leaves a tag in a table with two
 * slots for every block of the budget (the tier holds about that many
 * compressed blocks), which a later miss hashed to the same slot
 * overwrites. Filling a full tier costs a compression and reclaim's room
 * (often a writeback) at every miss, and a block touched once at random is
 * seldom touched again before reclaim takes it back out; a block that is
 * comes in, and pushes out what is worth less. While the tier has room
 * everything comes in.
 * @return whether block @idx of @ino missed recently (and forget it), else
 * note it. Lock-free; two racing misses may both be refused or both
 * admitted (a hint).
 */
static bool ghost_seen(struct zr_fs *fs, struct zr_inode *ino, uint64_t idx)
{
	uint64_t h = ((uint64_t)ino->key.ino * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)ino->key.dev << 32) ^ (idx * 0xc2b2ae3d27d4eb4full);
	uint32_t *slot, tag;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	slot = &fs->ghost[h & fs->ghost_mask];
	tag = (uint32_t)(h >> 32) | 1;	/* 0: an empty slot */
	if (__atomic_load_n(slot, __ATOMIC_RELAXED) == tag) {
		__atomic_store_n(slot, 0, __ATOMIC_RELAXED);
		return true;
	}
	__atomic_store_n(slot, tag, __ATOMIC_RELAXED);
	return false;
}

/* Whether block @idx of @ino, just read from the backing file, may go into
 * the tier (ghost_seen()). */
static bool read_admit(struct zr_fs *fs, struct zr_inode *ino, uint64_t idx)
{
	if (!fs->ghost || !tier_full(fs) || ghost_seen(fs, ino, idx))
		return true;
	zr_stat_add(&fs->misses_not_kept, 1);
	return false;
}

/* The doorkeeper's table: 2 slots per block of the budget, a power of two,
 * 4096 at least and 4 Mi at most (16 MiB, for a budget of 128 GiB in 64
 * KiB blocks). It keeps the size of the budget at mount. */
#define ZR_GHOST_MIN 4096ull
#define ZR_GHOST_MAX (4ull << 20)

int zr_data_ghost_init(struct zr_fs *fs, uint64_t budget)
{
	uint64_t want = budget / fs->bs * 2, n = ZR_GHOST_MIN;

	while (n < want && n < ZR_GHOST_MAX)
		n <<= 1;
	fs->ghost = calloc(n, sizeof(*fs->ghost));
	if (!fs->ghost)
		return -ENOMEM;
	fs->ghost_mask = n - 1;
	return 0;
}

void zr_data_ghost_free(struct zr_fs *fs)
{
	free(fs->ghost);
	fs->ghost = NULL;
}

/*
 * Bring block @idx of @ino into @blk: from the store, else from the backing
 * file (zeros past its end), inserting it clean unless @no_insert.
 * @for_read: serving a READ, which hands the busy-poll leader's role on
 * before it waits on the backing disk (session.c; the read-modify-write of
 * a new file's block must not: its pread is past the backing file's end).
 * @return 0 or -errno.
 */
static int load_block(struct zr_fs *fs, struct zr_inode *ino, int fd, uint64_t idx,
		      char *blk, bool no_insert, bool for_read)
{
	uint64_t gen = __atomic_load_n(&ino->gen, __ATOMIC_ACQUIRE);
	ssize_t n;
	int rc;

	rc = zr_file_read(ino->blocks, idx, blk);
	if (rc == 1)
		return 0;
	if (rc < 0)
		return rc;
	if (for_read)
		zr_session_blocking();
	n = full_pread(fd, blk, fs->bs, (off_t)(idx * fs->bs));
	if (n < 0)
		return (int)n;
	zr_stat_add(&fs->bytes_read_backing, (uint64_t)n);
	if ((size_t)n < fs->bs)
		memset(blk + n, 0, fs->bs - (size_t)n);
	if (no_insert || !read_admit(fs, ino, idx))
		return 0;
	if (zr_store_make_room_once(fs->store, fs->bs) == 0 &&
	    __atomic_load_n(&ino->gen, __ATOMIC_ACQUIRE) == gen) {
		pthread_rwlock_wrlock(&ino->lock);
		if (ino->gen == gen)
			(void)zr_file_write(ino->blocks, idx, blk, ZR_WRITE_CLEAN);
		pthread_rwlock_unlock(&ino->lock);
	}
	return 0;
}

/*
 * Whether an access at @off of @len is part of a sequential stream longer
 * than seq_cutoff (bcache's sequential cutoff): such a stream goes to the
 * backing file as it arrives, so that streaming a file larger than the
 * budget costs no more than the disk alone and fsync has little left to do.
 * While the tier has room, a written block also keeps a clean compressed
 * copy, so a stream that fits is read back from RAM; once the tier is above
 * its low watermark the stream stops taking RAM.
 *
 * A stream is found when accesses that each start where one of the file's
 * last ZR_SEQ_ENDS accesses ended add up to more than seq_cutoff, with no
 * other access in between. Its requests then reach us out of order from
 * several kernel and daemon threads (a 2 GiB stream of 1 MiB writes: 27%
 * continued none of the last 8, up to 6 in a row, some 16 requests late),
 * so a stream lasts while it has credit: an access that continues another
 * and moves the stream's front on earns one (up to ZR_SEQ_CREDIT), an
 * access that continues none costs one, and until the credit is spent an
 * access a little ahead of the front or not far behind it is taken as part
 * of the stream too. A file that turns to random I/O after a stream stops
 * bypassing within ZR_SEQ_CREDIT accesses; the kernel's pieces of one large
 * random request continue each other but do not move the front on, nor add
 * up to a stream unless the request alone is longer than seq_cutoff.
 * Nearness alone is not a stream: the kernel writes scattered dirty pages
 * back in ascending order, and random I/O over a file smaller than the
 * window is near at every access (fio randrw over 128 MiB that all fit in
 * the budget, 1 GiB of I/O: 399 MB written to the backing file and 1.8 GB
 * read back from it, where nothing needed to be). Racy by design: a hint,
 * not a promise.
 */
#define ZR_SEQ_WINDOW (16ull << 20)	/* ahead of the front */
#define ZR_SEQ_BEHIND (256ull << 20)	/* behind it: kernel writeback reorders */
#define ZR_SEQ_CREDIT 32		/* a stream's credit of accesses */
/*
 * Incompressible data (zswap rejects it): raw blocks are kept while the tier
 * has room (they are the first to go), but once it is above its low
 * watermark, after ZR_RAW_RUN blocks of a file in a row did not compress,
 * its full-block writes go to the backing file at once instead of taking RAM
 * only to be written back right away; one block in ZR_RAW_PROBE still goes
 * through the codec, to notice when that changes.
 */
#define ZR_RAW_RUN 16
#define ZR_RAW_PROBE 64
/*
 * Write-around: while the tier is full (tier_full()), a write of part of a
 * block that the tier does not hold, that the backing file holds already
 * (below the file's disk_end), and that was not touched recently
 * (ghost_seen()), goes to the backing file as it is. Taking it into the
 * tier would cost a read of the whole block from the backing file, a
 * compression, room made by reclaim (often a writeback), and later a
 * writeback of the whole block; the write-around costs the bytes written.
 * The tier keeps what it holds: a write to a block it holds stays there,
 * and a block written or read again comes in. Whole blocks, data that
 * never reached the backing file (a temporary file's must not), and
 * everything while the tier has room still go to the tier. zswap rejects
 * pages on the same ground: a full cache can cost more to fill than it
 * saves.
 */

/* Copies wait until no stream has queued any, and nothing was read, for
 * this long (ms); blocks stored to be compressed later, until no request
 * came for as long (settle_time()). */
#define ZR_FILL_PAUSE_MS 50

/* The fill thread's wait when it has nothing to do (ms). */
#define ZR_FILL_IDLE_MS 1000

/* Idle recompression goes on past its pass only after this long without a
 * request (ms). */
#define ZR_QUIET_MS 250

/* Whether nothing was read, and no copy queued, for ZR_FILL_PAUSE_MS. */
static bool fill_paused(struct zr_fs *fs)
{
	return zr_now_ms() - __atomic_load_n(&fs->fg_last_ms, __ATOMIC_RELAXED) >=
		ZR_FILL_PAUSE_MS;
}

/* Note foreground I/O (a queued copy) for fill_paused(). */
static void fill_note_io(struct zr_fs *fs)
{
	zr_note_ms(&fs->fg_last_ms, zr_now_ms());
}

/* Note a read for fill_paused() and fill_reading(). */
static void fill_note_read(struct zr_fs *fs)
{
	uint64_t now = zr_now_ms();

	zr_note_ms(&fs->fg_last_ms, now);
	zr_note_ms(&fs->read_last_ms, now);
}

/* Whether something was read in the last ZR_FILL_PAUSE_MS. */
static bool fill_reading(struct zr_fs *fs)
{
	return zr_now_ms() - __atomic_load_n(&fs->read_last_ms, __ATOMIC_RELAXED) <
		ZR_FILL_PAUSE_MS;
}

static bool seq_bypass(struct zr_fs *fs, struct zr_inode *ino, uint64_t off, size_t len)
{
	uint64_t cutoff = fs->opt->seq_cutoff, end = off + len, run, front;
	bool adjacent = false, near, bypass;
	unsigned slot;
	int credit;

	if (cutoff == 0)
		return false;
	run = __atomic_load_n(&ino->seq_bytes, __ATOMIC_RELAXED);
	front = __atomic_load_n(&ino->seq_front, __ATOMIC_RELAXED);
	credit = __atomic_load_n(&ino->seq_credit, __ATOMIC_RELAXED);
	/* (no read-modify-write on every request: two racing accesses may
	 * take one slot, and one end is lost) */
	slot = __atomic_load_n(&ino->seq_slot, __ATOMIC_RELAXED);
	__atomic_store_n(&ino->seq_slot, slot + 1, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < ZR_SEQ_ENDS && !adjacent; i++)
		adjacent = __atomic_load_n(&ino->seq_ends[i], __ATOMIC_RELAXED) == off;
	__atomic_store_n(&ino->seq_ends[slot % ZR_SEQ_ENDS], end, __ATOMIC_RELAXED);
	near = off + ZR_SEQ_BEHIND >= front && off <= front + ZR_SEQ_WINDOW;
	if (run > cutoff) {
		/* a stream: it earns credit only by moving on */
		if (!adjacent)
			credit--;
		else if (end > front)
			credit = ZR_MIN(credit + 1, ZR_SEQ_CREDIT);
		bypass = credit > 0 && (adjacent || near);
		if (credit <= 0)
			run = 0, credit = 0;	/* the stream is over */
	} else {
		run = adjacent ? run + len : 0;
		bypass = run > cutoff;
		credit = ZR_SEQ_CREDIT;
	}
	if (!near || end > front)
		__atomic_store_n(&ino->seq_front, end, __ATOMIC_RELAXED);
	__atomic_store_n(&ino->seq_credit, credit, __ATOMIC_RELAXED);
	__atomic_store_n(&ino->seq_bytes, run, __ATOMIC_RELAXED);
	return bypass;
}

/*
 * Read the whole blocks [@idx, @idx + @n) of @ino, part of a bypassed
 * stream, into @dst: what the tier holds from there, the rest from the
 * backing file (@fd), each run of missing blocks in one pread. A stream
 * read soon after it was written misses in long runs (its copies into the
 * tier wait for a pause), and a pread a block cost a syscall a block.
 * Nothing read is inserted. @done: set to the number of leading blocks in
 * @dst (all @n on success). @return 0 or -errno.
 */
static int read_blocks_bypass(struct zr_fs *fs, struct zr_inode *ino, int fd,
			      uint64_t idx, uint64_t n, char *dst, uint64_t *done)
{
	uint64_t bs = fs->bs, i = 0, run, len;
	ssize_t got;
	int rc;

	*done = 0;
	while (i < n) {
		*done = i;	/* the blocks before i are in dst */
		rc = zr_file_read(ino->blocks, idx + i, dst + i * bs);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			i++;
			continue;
		}
		/* a miss: the run goes on up to the next hit (read already) */
		for (run = 1; i + run < n; run++) {
			rc = zr_file_read(ino->blocks, idx + i + run, dst + (i + run) * bs);
			if (rc < 0)
				return rc;
			if (rc == 1)
				break;
		}
		len = run * bs;
		zr_session_blocking();
		got = full_pread(fd, dst + i * bs, len, (off_t)((idx + i) * bs));
		if (got < 0)
			return (int)got;
		zr_stat_add(&fs->bytes_read_backing, (uint64_t)got);
		if ((uint64_t)got < len)
			memset(dst + i * bs + got, 0, len - (uint64_t)got);
		i += run < n - i ? run + 1 : run;
	}
	*done = n;
	return 0;
}

/* Read @size bytes at @off of @ino into @out. @return bytes (short only at
 * the end of the file) or -errno, also when some of it was read. */
static ssize_t data_read(struct zr_fs *fs, struct zr_inode *ino, char *out,
			 size_t size, uint64_t off)
{
	uint64_t fsize, end, pos, bs = fs->bs;
	bool bypass;
	char *blk;
	int fd, rc = 0;

	fill_note_read(fs);	/* queued stream copies wait while reads go on */
	if (attach_needed(fs, ino))
		zr_session_blocking();	/* the attach opens the file, and locks */
	rc = attach_cached(fs, ino);
	if (rc)
		return rc;
	fd = zr_fd_get_cached(fs, ino);
	if (fd < 0) {
		zr_session_blocking();	/* the file must be opened again */
		fd = zr_fd_get_waiting(fs, ino);	/* (during a rename: after it) */
	}
	if (fd < 0)
		return fd;
	if (!fs->store) {
		ssize_t n;

		zr_session_blocking();
		n = full_pread(fd, out, size, (off_t)off);

		if (n > 0)
			zr_stat_add(&fs->bytes_read_backing, (uint64_t)n);
		zr_fd_put(fs, ino);
		return n;
	}
	fsize = load_size(ino);
	if (off >= fsize) {
		zr_fd_put(fs, ino);
		return 0;
	}
	end = ZR_MIN(off + size, fsize);
	bypass = seq_bypass(fs, ino, off, (size_t)(end - off));
	blk = scratch_block();
	if (!blk) {
		zr_fd_put(fs, ino);
		return -ENOMEM;
	}
	for (pos = off; pos < end;) {
		uint64_t idx = pos / bs, boff = pos % bs;
		size_t n = (size_t)ZR_MIN(bs - boff, end - pos);
		char *dst = out + (pos - off);

		if (boff == 0 && n == bs && bypass) {
			/* every whole block left, misses read in runs */
			uint64_t done;

			rc = read_blocks_bypass(fs, ino, fd, idx, (end - pos) / bs, dst, &done);
			n = (size_t)(done * bs);
			if (rc) {
				pos += n;	/* what was read before the error */
				break;
			}
		} else if (boff == 0 && n == bs) {
			rc = load_block(fs, ino, fd, idx, dst, bypass, true);
		} else {
			rc = load_block(fs, ino, fd, idx, blk, bypass, true);
			if (rc == 0)
				memcpy(dst, blk + boff, n);
		}
		if (rc)
			break;
		pos += n;
	}
	zr_fd_put(fs, ino);
	/* no short count on an error: the kernel takes a short READ for the
	 * end of the file (a hole, with its writeback cache) and would cache
	 * zeros for the rest of the range, zeros a later write puts on disk */
	if (rc)
		return rc;
	return (ssize_t)(pos - off);
}

void zr_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	char *buf = zr_session_reply_buf(size ? size : 1);
	ssize_t n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	n = data_read(fs, zr_inode_from_ino(fs, ino), buf, size, (uint64_t)off);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
}

/* The data of @ino may have changed (see the top of the file). Caller
 * holds ino->lock, and calls this before it lets go, also after a failure. */
static void data_changed(struct zr_inode *ino)
{
	__atomic_add_fetch(&ino->gen, 1, __ATOMIC_RELEASE);
}

/*
 * Note a change of the data for the times. Caller holds ino->lock and
 * calls data_changed() too; @fd is the file's fd.
 * @now: stamp mtime with the current time. Writes pass false when the
 * kernel has its writeback cache (fs->kernel_times): the kernel owns mtime
 * then and sends it in a SETATTR of its own; we only remember the time the
 * file showed, so that the writeback (whose pwrite moves the backing mtime)
 * puts it back.
 */
static void touch_data(struct zr_fs *fs, struct zr_inode *ino, int fd, bool now)
{
	struct stat st;
	bool have = false;

	if (!now) {
		pthread_mutex_lock(&fs->attr_lock);
		have = ino->times_dirty;
		pthread_mutex_unlock(&fs->attr_lock);
		if (have)
			return;
		if (fd < 0 || fstat(fd, &st) < 0)
			now = true;
	}
	pthread_mutex_lock(&fs->attr_lock);
	if (now)
		clock_gettime(CLOCK_REALTIME, &ino->mtime);
	else if (!ino->times_dirty)
		ino->mtime = st.st_mtim;
	ino->times_dirty = true;
	pthread_mutex_unlock(&fs->attr_lock);
}

/* Count incompressible full blocks in a row (ZR_RAW_RUN). */
static void note_raw(struct zr_inode *ino, bool raw)
{
	if (raw)
		__atomic_add_fetch(&ino->seq_raw, 1, __ATOMIC_RELAXED);
	else
		__atomic_store_n(&ino->seq_raw, 0, __ATOMIC_RELAXED);
}

/* Blocks per queued run of fill_enqueue(); runs looked at for a merge. */
#define ZR_FILL_RUN 256
#define ZR_FILL_MERGE 8

/*
 * Queue block @idx of @ino, just written to the backing file by a bypassed
 * stream, for a clean copy in the tier. The writeback thread makes it
 * (fill_drain), so the writer does not wait for the compressor. It is only
 * a cache: when the queue is full the block is not copied. Caller holds
 * ino->lock (shared or exclusive).
 */
static void fill_enqueue(struct zr_fs *fs, struct zr_inode *ino, uint64_t idx)
{
	struct zr_fill *last;
	bool wake = false;
	unsigned k;

	pthread_mutex_lock(&fs->fill_lock);
	/* the kernel's writeback threads and ours deliver a stream a little
	 * out of order: a block may continue any of the last few runs */
	for (k = 1; k <= ZR_MIN(fs->fill_len, ZR_FILL_MERGE); k++) {
		last = &fs->fill_q[(fs->fill_head + fs->fill_len - k) % ZR_FILL_QLEN];
		if (last->ino != ino)
			continue;
		if (idx >= last->idx && idx < last->idx + last->n)
			goto out;	/* queued already (a block written in two parts) */
		if (last->idx + last->n == idx && last->n < ZR_FILL_RUN) {
			last->n++;
			goto out;
		}
	}
	if (fs->fill_len == ZR_FILL_QLEN) {
		zr_stat_add(&fs->fill_dropped, 1);
		goto out;
	}
	zr_inode_ref(fs, ino);
	fs->fill_q[(fs->fill_head + fs->fill_len) % ZR_FILL_QLEN] =
		(struct zr_fill){ .ino = ino, .idx = idx, .n = 1 };
	wake = fs->fill_len++ == 0;
out:
	if (wake)
		pthread_cond_signal(&fs->fill_cond);
	pthread_mutex_unlock(&fs->fill_lock);
	fill_note_io(fs);
	if (wake && fs->fill_threads == 0) {
		/* no fill thread: the writeback thread drains, in pauses */
		pthread_mutex_lock(&fs->wb_lock);
		pthread_cond_broadcast(&fs->wb_cond);
		pthread_mutex_unlock(&fs->wb_lock);
	}
}

/*
 * Blocks pending compression take less than this share of the budget
 * (1/ZR_FILL_LATER_SHARE); a whole block is compressed at once every
 * ZR_FILL_PROBE-th block of a file (compress_later()).
 */
#define ZR_FILL_LATER_SHARE 8
#define ZR_FILL_PROBE 16

/*
 * Whether block @idx of @ino (@whole: all of it) goes into the tier as it
 * is, for the fill thread to compress once requests pause
 * (zr_store_settle()), rather than compressed now. For the fill thread's
 * copies of a stream: lz4 takes a core about as long as the stream takes
 * to write the same bytes through FUSE, so a copy compressed at once fell
 * behind the stream on two cores, and a read right after a `dd bs=1M
 * conv=fdatasync` found a third of it missing; a memcpy keeps up. For a
 * writer's blocks: with the kernel's writeback cache, a WRITE comes from
 * the close() or fsync() of the program that wrote, and an untar of 10k
 * files of /usr/include and /usr/share/doc (15 KB each) spent lz4's 20-25
 * us in every close. While pending blocks take less than their share of
 * the budget; a whole block is compressed at once every ZR_FILL_PROBE-th
 * block, and after one that did not compress until one does, so that a
 * file that does not compress is still found (note_raw()).
 */
static bool compress_later(struct zr_fs *fs, struct zr_inode *ino, uint64_t idx, bool whole)
{
	if (fs->fill_threads == 0 || fs->opt->store.comp == ZR_CODEC_NONE)
		return false;	/* nothing would compress it */
	if (whole && (idx % ZR_FILL_PROBE == ZR_FILL_PROBE - 1 ||
		      __atomic_load_n(&ino->seq_raw, __ATOMIC_RELAXED)))
		return false;
	return zr_store_pending_bytes(fs->store) <
	       __atomic_load_n(&fs->opt->store.budget, __ATOMIC_RELAXED) / ZR_FILL_LATER_SHARE;
}

/* A writer stored a block to be compressed later: wake the fill thread if
 * it waits its idle second, so that settling starts 50 ms after the writes
 * pause, not up to a second. (Under fill_lock: it sets fill_idle under it
 * until its wait releases it, so the signal is not lost.) */
static void fill_wake_idle(struct zr_fs *fs)
{
	/* (the fence pairs with fill_main()'s: the pending block is counted
	 * before fill_idle is read, and fill_idle set before the count is) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&fs->fill_idle, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&fs->fill_lock);
	if (fs->fill_idle) {
		__atomic_store_n(&fs->fill_idle, false, __ATOMIC_RELAXED);
		pthread_cond_signal(&fs->fill_cond);
	}
	pthread_mutex_unlock(&fs->fill_lock);
}

/*
 * Copy blocks [@idx, @idx + @n) of @ino from the backing file into the tier
 * as clean blocks. As a read that misses does (load_block()), each block is
 * read and compressed without ino->lock, and goes in under it only if no
 * writer changed the file meanwhile (ino->gen) and the tier still has no
 * copy (newer, maybe dirty): so every block copied is the file's data, and
 * the fill thread, which runs at the lowest priority, holds the lock only
 * for the install. A block the tier holds is skipped before the read: a
 * dirty one could be written back and dropped after it (no writer, so no
 * new gen), and the older bytes read would go in as clean.
 * Stops when the tier gets tight. @blk: a block-sized buffer.
 */
static void fill_run(struct zr_fs *fs, struct zr_inode *ino, uint64_t idx,
		     uint32_t n, char *blk, bool thread)
{
	uint64_t bs = fs->bs, gen;
	struct zr_prepared p;
	bool later;
	ssize_t got;
	int fd, rc;

	for (; n > 0; n--, idx++) {
		/* (unlinked is read without ns_lock: a stale answer costs a
		 * copy that goes with the inode). A copy never makes room:
		 * it only takes what is free below the low watermark, so
		 * the fill thread never reclaims at its low priority with
		 * reclaim_lock held. */
		if (__atomic_load_n(&ino->unlinked, __ATOMIC_RELAXED) || tier_tight(fs) ||
		    (thread && __atomic_load_n(&fs->fill_stop, __ATOMIC_RELAXED)))
			return;
		gen = __atomic_load_n(&ino->gen, __ATOMIC_ACQUIRE);
		if (!ino->blocks || idx * bs >= load_size(ino) || zr_file_has(ino->blocks, idx))
			continue;
		fd = zr_fd_get(fs, ino);
		if (fd < 0)
			return;
		got = full_pread(fd, blk, bs, (off_t)(idx * bs));
		zr_fd_put(fs, ino);
		if (got < 0)
			continue;
		zr_stat_add(&fs->bytes_read_backing, (uint64_t)got);
		if ((uint64_t)got < bs)
			memset(blk + got, 0, bs - (uint64_t)got);
		later = thread && compress_later(fs, ino, idx, true);
		rc = later ? zr_file_prepare_later(ino->blocks, blk, &p)
			   : zr_file_prepare(ino->blocks, blk, &p);
		if (rc != 0)
			return;		/* no memory in the pool */
		pthread_rwlock_wrlock(&ino->lock);
		if (ino->gen == gen &&
		    zr_file_install(ino->blocks, idx, &p, ZR_WRITE_CLEAN) == 0) {
			zr_stat_add(&fs->stream_copies, 1);
			if (thread)
				zr_stat_add(&fs->fill_thread_copies, 1);
			if ((uint64_t)got == bs && !later)
				note_raw(ino, zr_prepared_incompressible(&p));
		}
		pthread_rwlock_unlock(&ino->lock);
		zr_file_unprepare(ino->blocks, &p);	/* (no-op once installed) */
	}
}

/* Take the oldest queued run into @e; caller holds fill_lock. @return false
 * when the queue is empty. */
static bool fill_pop_locked(struct zr_fs *fs, struct zr_fill *e)
{
	if (fs->fill_len == 0)
		return false;
	*e = fs->fill_q[fs->fill_head];
	fs->fill_head = (fs->fill_head + 1) % ZR_FILL_QLEN;
	fs->fill_len--;
	return true;
}

/* fill_pop_locked() taking fill_lock. */
static bool fill_pop(struct zr_fs *fs, struct zr_fill *e)
{
	bool got;

	pthread_mutex_lock(&fs->fill_lock);
	got = fill_pop_locked(fs, e);
	pthread_mutex_unlock(&fs->fill_lock);
	return got;
}

/*
 * Make the clean copies queued by fill_enqueue(), until the queue is empty
 * or @max_ms have passed (what is left waits for the next call). They wait
 * for a pause in streams and reads: while those go on, both cores are busy
 * with them (and a read that misses inserts its own copy). Runs in the
 * writeback thread. @return whether copies are still queued.
 */
static bool fill_drain(struct zr_fs *fs, uint64_t max_ms)
{
	uint64_t deadline = zr_now_ms() + max_ms;
	char *blk = scratch_block();
	struct zr_fill e;
	unsigned left;

	if (!blk)
		return false;
	while (zr_now_ms() < deadline && fill_paused(fs) && fill_pop(fs, &e)) {
		fill_run(fs, e.ino, e.idx, e.n, blk, false);
		zr_inode_unref(fs, e.ino);
	}
	pthread_mutex_lock(&fs->fill_lock);
	left = fs->fill_len;
	pthread_mutex_unlock(&fs->fill_lock);
	return left != 0;
}

/*
 * Whether the fill thread may compress the blocks stored to be compressed
 * later (zr_store_settle()): once no request came for ZR_FILL_PAUSE_MS. A
 * block not compressed yet is read with a memcpy, and one a file's
 * removal drops is never compressed. Settling beside the requests cost
 * more than it saved, though it runs at nice 19: an untar of 10k files
 * took 1.32-1.54 s with it against 1.20-1.24 s, and the `rm -rf` after it
 * 0.53-0.77 s against 0.47-0.49 (it takes the locks of the pool and the
 * file list, which the foreground waits for while a preempted nice-19
 * thread holds them).
 */
static bool settle_time(struct zr_fs *fs)
{
	return zr_now_ms() - __atomic_load_n(&fs->req_last_ms, __ATOMIC_RELAXED) >=
		ZR_FILL_PAUSE_MS;
}

/*
 * When requests never pause for ZR_FILL_PAUSE_MS (a monitor that reads
 * .zramfs/stats every 20 ms is enough), pending blocks would wait for the
 * idle pass, which takes them only after two sweeps and with the cold
 * codec, and meanwhile a full share sends writers back to compressing in
 * their own requests. So once they take more than half their share, the
 * writeback thread settles anyway, for ZR_SETTLE_SLICE_MS once every
 * ZR_SETTLE_FORCE_MS (settle_forced()): at most 2% of a core, until none
 * is left (a slice cut short by preemption used to leave the rest below
 * half the share, pending until a pause or the idle pass). Not the fill
 * thread: at nice 19, beside busy requests, it would be preempted holding
 * the locks it takes (see settle_time()).
 */
#define ZR_SETTLE_FORCE_MS 1000
#define ZR_SETTLE_SLICE_MS 20

/* Whether a forced slice is due. Called by the writeback thread only. */
static bool settle_overdue(struct zr_fs *fs)
{
	uint64_t share = __atomic_load_n(&fs->opt->store.budget, __ATOMIC_RELAXED) /
			 ZR_FILL_LATER_SHARE;
	uint64_t pending = zr_store_pending_bytes(fs->store);
	bool forcing = __atomic_load_n(&fs->settle_forcing, __ATOMIC_RELAXED);

	if (forcing && pending == 0)
		__atomic_store_n(&fs->settle_forcing, forcing = false, __ATOMIC_RELAXED);
	if (zr_now_ms() - __atomic_load_n(&fs->settle_last_ms, __ATOMIC_RELAXED) <
	    ZR_SETTLE_FORCE_MS)
		return false;
	if (pending > share / 2)
		__atomic_store_n(&fs->settle_forcing, forcing = true, __ATOMIC_RELAXED);
	return forcing && pending > 0;
}

/* One settle pass: how long it may go on. */
struct settle_run {
	struct zr_fs *fs;
	uint64_t until_ms;	/* a forced slice's end; 0: until a request comes */
};

/* zr_store_settle()'s stop: at unmount, and as soon as a request comes or
 * a forced slice ends. */
static bool settle_stop(void *arg)
{
	const struct settle_run *r = arg;

	if (__atomic_load_n(&r->fs->fill_stop, __ATOMIC_RELAXED))
		return true;
	return r->until_ms ? zr_now_ms() >= r->until_ms : !settle_time(r->fs);
}

/*
 * The fill thread: makes the queued copies with the CPU time that nothing
 * else wants (nice 19), so that a stream written to the backing file is in
 * the tier by the time it ends: during a `dd bs=1M conv=fdatasync` through
 * zramfs 40% of two cores' time was idle, enough for memcpy but not for lz4
 * (compress_later()). Once no request came for ZR_FILL_PAUSE_MS, it
 * compresses the copies it stored as they were, and the blocks writers
 * stored so (zr_store_settle(), settle_time()). Not SCHED_IDLE: the thread
 * takes locks others wait for (the pool's, the fd cache's, ino->lock for
 * an install), and a SCHED_IDLE thread preempted while it holds one gets
 * 0.3% of a CPU under load, nice 19 about 1.5%; it holds none while it
 * reads and compresses (fill_run()). It pauses while reads go on (the
 * writeback thread's drain does too): its reads of the backing file would
 * compete with theirs.
 */
static void *fill_main(void *arg)
{
	struct zr_fs *fs = arg;
	char *blk = scratch_block();
	struct zr_fill e;

	/* (Linux: a thread's own nice value) */
	if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19) != 0)
		zr_log(ZR_LOG_WARNING, "fill thread: cannot lower its priority: %s",
		       strerror(errno));
	pthread_mutex_lock(&fs->fill_lock);
	while (!fs->fill_stop) {
		if (!blk || fill_reading(fs) || !fill_pop_locked(fs, &e)) {
			struct timespec ts;
			uint64_t wait_ms;

			if (blk && fs->fill_len == 0 && settle_time(fs) &&
			    zr_store_pending_bytes(fs->store)) {
				struct settle_run r = { .fs = fs, .until_ms = 0 };
				uint64_t done;

				pthread_mutex_unlock(&fs->fill_lock);
				zr_note_ms(&fs->settle_last_ms, zr_now_ms());
				done = zr_store_settle(fs->store, settle_stop, &r);
				pthread_mutex_lock(&fs->fill_lock);
				if (done)
					continue;	/* (else: wait, not spin) */
			}
			/* with nothing queued or pending, a look each second
			 * (a queued copy or a writer's pending block wakes it:
			 * fill_wake_idle()): an idle mount is not woken 20
			 * times a second */
			wait_ms = ZR_FILL_PAUSE_MS;
			if (fs->fill_len == 0) {
				__atomic_store_n(&fs->fill_idle, true, __ATOMIC_RELAXED);
				__atomic_thread_fence(__ATOMIC_SEQ_CST);
				if (zr_store_pending_bytes(fs->store))
					__atomic_store_n(&fs->fill_idle, false,
							 __ATOMIC_RELAXED);
				else
					wait_ms = ZR_FILL_IDLE_MS;
			}
			zr_deadline(&ts, CLOCK_MONOTONIC, wait_ms * 1000000ull);
			pthread_cond_timedwait(&fs->fill_cond, &fs->fill_lock, &ts);
			__atomic_store_n(&fs->fill_idle, false, __ATOMIC_RELAXED);
			continue;
		}
		pthread_mutex_unlock(&fs->fill_lock);
		fill_run(fs, e.ino, e.idx, e.n, blk, true);
		zr_inode_unref(fs, e.ino);
		pthread_mutex_lock(&fs->fill_lock);
	}
	pthread_mutex_unlock(&fs->fill_lock);
	return NULL;
}

/* Forget the queue (at unmount), dropping its inode references. */
static void fill_discard(struct zr_fs *fs)
{
	struct zr_fill e;

	while (fill_pop(fs, &e))
		zr_inode_unref(fs, e.ino);
}

/*
 * Whether a block of @ino's stream, just written to the backing file,
 * should get a clean copy in the tier: while the tier has room and the file
 * compresses (one block in ZR_RAW_PROBE still goes, to notice a change).
 */
static bool stream_copy_wanted(struct zr_fs *fs, struct zr_inode *ino)
{
	return !tier_tight(fs) &&
	       (__atomic_load_n(&ino->seq_raw, __ATOMIC_RELAXED) < ZR_RAW_RUN ||
		__atomic_add_fetch(&ino->raw_probe, 1, __ATOMIC_RELAXED) % ZR_RAW_PROBE == 0);
}

/* The backing file's writeback is started every this many bytes of a
 * stream: not at once, so that a scratch file that is deleted soon may
 * never reach the disk (the backing page cache holds it). */
#define ZR_KICK_BYTES (64ull << 20)

/*
 * What goes to the backing file as it arrives (a stream past seq_cutoff,
 * incompressible blocks, cache=writethrough) has the backing filesystem's
 * writeback started every ZR_KICK_BYTES, so that the disk writes while the
 * data still arrives rather than all at the writer's fsync (or when the
 * kernel's dirty limits are reached). Called by data_write() once it has
 * let go of ino->lock: sync_file_range() submits the I/O and may wait for
 * the device's queue. Best effort: a failed write shows at the next fsync
 * of the backing file, whose error state this does not clear.
 */
static void kick_writeback(struct zr_inode *ino, int fd)
{
	if (__atomic_load_n(&ino->unkicked, __ATOMIC_RELAXED) < ZR_KICK_BYTES ||
	    __atomic_exchange_n(&ino->unkicked, 0, __ATOMIC_RELAXED) < ZR_KICK_BYTES)
		return;
	(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/*
 * A write to the backing file @fd of @ino that failed partway (ENOSPC) may
 * have left its first bytes past the cached size, where they would show if
 * the file grew later: cut them. Caller holds the file's I/O mutex, under
 * which nothing else leaves the backing file longer than the cached size.
 * Best effort: the writer gets the write's error either way.
 */
static void trim_past_size(struct zr_inode *ino, int fd)
{
	uint64_t size = load_size(ino);
	struct stat st;

	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > size)
		(void)ftruncate(fd, (off_t)size);
}

/* O_DIRECT writes here have their offset, length and memory aligned to
 * this: the largest logical block size of common disks. A backing file
 * that wants more is written through the page cache. */
#define ZR_DIRECT_ALIGN 4096

/* Descriptors open at once for O_DIRECT writes, at most: they come out of
 * the few that main.c keeps beyond max_fds for such passing uses. */
#define ZR_DIRECT_FDS 8

/*
 * Whether a stream's bytes should go to the backing file around its page
 * cache (O_DIRECT): when the tier will not keep a copy of them, because it
 * is tight or the file does not compress. The kernel holds those bytes in
 * our mount's page cache already; a second copy in the backing file's page
 * cache is RAM spent twice, and a copy more for the daemon to make. A copy
 * the tier keeps is read back from the backing file (fill_drain), so those
 * streams stay in its page cache.
 */
static bool direct_wanted(struct zr_fs *fs, struct zr_inode *ino)
{
	return !fs->opt->no_stream_direct &&
	       __atomic_load_n(&ino->direct, __ATOMIC_RELAXED) >= 0 &&
	       (tier_tight(fs) ||
		__atomic_load_n(&ino->seq_raw, __ATOMIC_RELAXED) >= ZR_RAW_RUN);
}

/* @ino's backing file is written through the page cache from now on
 * (@why); the first time for the mount, the log says so. */
static void direct_no(struct zr_fs *fs, struct zr_inode *ino, const char *why)
{
	__atomic_store_n(&ino->direct, -1, __ATOMIC_RELAXED);
	if (!__atomic_exchange_n(&fs->direct_said, true, __ATOMIC_RELAXED))
		zr_log(ZR_LOG_INFO, "streams go to backing files like inode %llu through their page cache: %s",
		       (unsigned long long)ino->key.ino, why);
}

/*
 * Whether @ino's backing file @fd does direct I/O, asked once per file:
 * statx() tells its alignment. A filesystem that takes O_DIRECT but caches
 * all the same (tmpfs), or has no such thing (NFS and FUSE, where the close
 * of a second descriptor may flush the file), gives none; so does an ext4
 * file with journalled data or encryption. @return true when it does.
 */
static bool direct_probe(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	int8_t ok = __atomic_load_n(&ino->direct, __ATOMIC_RELAXED);
#ifdef STATX_DIOALIGN
	struct statx stx;

	if (ok)
		return ok > 0;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) < 0)
		return false;	/* asked again next time */
	if (!(stx.stx_mask & STATX_DIOALIGN) || !stx.stx_dio_offset_align) {
		direct_no(fs, ino, "their filesystem does no direct I/O");
		return false;
	}
	if (stx.stx_dio_offset_align > ZR_DIRECT_ALIGN ||
	    stx.stx_dio_mem_align > ZR_DIRECT_ALIGN) {
		direct_no(fs, ino, "their filesystem wants direct I/O aligned to more than 4 KiB");
		return false;
	}
	ok = 0;
	__atomic_compare_exchange_n(&ino->direct, &ok, 1, false,
				    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	return ok == 0;	/* (else it was just set to -1) */
#else
	if (!ok)
		direct_no(fs, ino, "this build cannot ask (no STATX_DIOALIGN)");
	return false;
#endif
}

/*
 * Write @len bytes from @src at @off to @ino's backing file @fd around its
 * page cache: through a second open file description of it with O_DIRECT
 * (@fd's status flags are shared by every thread that uses it). Waits for
 * the disk, so the session is told first. @return 0 written, 1 when it
 * cannot be done (not aligned, the file does no direct I/O or cannot be
 * opened again, too many such writes at once: the caller writes through
 * the page cache, over whatever this wrote), or -errno of the write, with
 * *@done the bytes written before the error.
 */
static int direct_pwrite(struct zr_fs *fs, struct zr_inode *ino, int fd,
			 const char *src, size_t len, uint64_t off, size_t *done)
{
	char path[32];
	int dfd, rc;

	*done = 0;

	if (((uintptr_t)src | off | len) % ZR_DIRECT_ALIGN || !direct_probe(fs, ino, fd))
		return 1;
	if (__atomic_add_fetch(&fs->direct_fds, 1, __ATOMIC_RELAXED) > ZR_DIRECT_FDS) {
		__atomic_sub_fetch(&fs->direct_fds, 1, __ATOMIC_RELAXED);
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	dfd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (dfd < 0) {
		rc = errno;
		__atomic_sub_fetch(&fs->direct_fds, 1, __ATOMIC_RELAXED);
		if (rc != EMFILE && rc != ENFILE && rc != ENOMEM)
			direct_no(fs, ino, rc == EINVAL ? "their filesystem refuses O_DIRECT" :
				  "they cannot be opened again through /proc/self/fd");
		return 1;
	}
	zr_session_blocking();
	rc = pwrite_counted(dfd, src, len, (off_t)off, done);
	close(dfd);
	__atomic_sub_fetch(&fs->direct_fds, 1, __ATOMIC_RELAXED);
	if (rc == -EINVAL) {
		/* refused (a short write leaves the rest unaligned): all of it
		 * goes again through the page cache */
		if (*done == 0)
			direct_no(fs, ino, "their filesystem refused an O_DIRECT write");
		return 1;
	}
	return rc;
}

/*
 * Keep @src, block @idx that to_backing() write number @seq just put in
 * the backing file, as its clean copy in the tier, unless another write
 * reached the backing file since: whole-block writers hold ino->lock
 * shared, so two writes of one block may run side by side, and the first
 * one's copy, installed after the second one's write, would read its old
 * data over the new data on disk (and go back over it should a failed
 * syncfs make every block dirty again; helper-35's review). The writeback
 * callback counts too: a dirty block of another writer, written back and
 * dropped meanwhile, leaves no copy to refuse this one. Checked and
 * installed under the I/O mutex, as to_backing() drops copies. The caller
 * made room (reclaim may take the I/O mutexes). *@raw: as
 * zr_file_write_raw(). @return 0, -EAGAIN when another write came, or the
 * error of zr_file_prepare() or zr_file_install().
 */
static int install_written(struct zr_inode *ino, uint64_t idx, const char *src,
			   uint64_t seq, bool *raw)
{
	struct zr_prepared p;
	int rc;

	*raw = false;
	if (zr_file_has(ino->blocks, idx))
		return 0;	/* (a clean copy never replaces a block) */
	rc = zr_file_prepare(ino->blocks, src, &p);	/* (compressed outside the mutex) */
	if (rc)
		return rc;
	*raw = zr_prepared_incompressible(&p);
	zr_file_io_lock(ino->blocks);
	rc = ino->tb_seq == seq ? zr_file_install(ino->blocks, idx, &p, ZR_WRITE_CLEAN) : -EAGAIN;
	zr_file_io_unlock(ino->blocks);
	zr_file_unprepare(ino->blocks, &p);	/* (when not installed) */
	return rc;
}

/*
 * Keep a clean copy of block @idx of @ino's stream, just written to the
 * backing file, that stream_copy_wanted() asked for. The fill thread makes
 * it from the backing file's page cache; a block that went there with
 * O_DIRECT is not in that cache, so it is compressed now from @src (its
 * whole block in memory; NULL: a part only, no copy). Such a block is the
 * one in ZR_RAW_PROBE of a file that does not compress (one block in 64
 * costs the writer a compression), or one of a run written while the tier
 * was tight that finds it with room again.
 */
static void stream_copy(struct zr_fs *fs, struct zr_inode *ino, uint64_t idx,
			bool direct, const char *src, uint64_t seq)
{
	bool raw = false;

	if (!direct) {
		fill_enqueue(fs, ino, idx);
		return;
	}
	if (src && zr_store_make_room_once(fs->store, fs->bs) == 0 &&
	    install_written(ino, idx, src, seq, &raw) == 0) {
		zr_stat_add(&fs->stream_copies, 1);
		note_raw(ino, raw);
	}
}

/* How to_backing() writes. */
enum zr_to_backing {
	ZR_TB_STREAM,	/* a stream's bytes (or an incompressible file's): they
			 * count for kick_writeback(), and go around the page
			 * cache when direct_wanted() */
	ZR_TB_AROUND,	/* a write-around's: neither (its rewrites the backing
			 * page cache may absorb) */
	ZR_TB_THROUGH,	/* writethrough's: they count, but go through the page
			 * cache (the tier keeps a copy) */
};

/*
 * Write @len bytes from @src at @off of @ino, in blocks [@idx, @idx +
 * @nblk), to the backing file @fd and drop the tier's copies of those
 * blocks, under the file's I/O mutex: it keeps a writeback of an older copy
 * from landing after our pwrite. @how: see enum zr_to_backing.
 * *@direct: whether it went with O_DIRECT (when it returns 0); *@seq: the
 * number of this write (ino->tb_seq) for install_written().
 * @return 0 or -errno.
 */
static int to_backing(struct zr_fs *fs, struct zr_inode *ino, int fd,
		      const char *src, uint64_t off, uint64_t len,
		      uint64_t idx, uint64_t nblk, enum zr_to_backing how,
		      bool *direct, uint64_t *seq)
{
	size_t done = 0;
	int rc = 1;

	/* (read-only when reopened so while the writer held the file open:
	 * made 0444 meanwhile, for an unprivileged daemon; helper-34's
	 * review) */
	(void)zr_fd_make_writable(fs, ino, fd);
	zr_stat_add(&fs->tb_writes, 1);	/* (before it: zr_data_syncfs()) */
	zr_file_io_lock(ino->blocks);
	if (how == ZR_TB_STREAM && direct_wanted(fs, ino))
		rc = direct_pwrite(fs, ino, fd, src, len, off, &done);
	*direct = rc == 0;
	if (rc == 1) {
		size_t ddone = done;	/* (a refused direct write may have begun) */

		rc = pwrite_counted(fd, src, len, (off_t)off, &done);
		done = ZR_MAX(done, ddone);
	}
	*seq = ++ino->tb_seq;	/* (also after a failure: it may have written) */
	if (rc == 0) {
		zr_file_drop(ino->blocks, idx, nblk);
		/* before the mutex goes, so that the backing file is never
		 * longer than the cached size where it is held */
		grow_size(ino, off + len);
	} else {
		trim_past_size(ino, fd);
		/* a write that failed part way changed the disk under the
		 * copies the tier may hold of the blocks it reached: made
		 * dirty, they go back over it, so that the file does not
		 * read one way while they are held and another after
		 * (helper-35's review; the punch does the same) */
		if (done > 0)
			(void)zr_file_redirty_range(ino->blocks, idx,
						    (off + done - 1) / fs->bs - idx + 1);
	}
	zr_file_io_unlock(ino->blocks);
	if (rc == 0) {
		zr_stat_add(&fs->bytes_written_backing, len);
		disk_end_raise(ino, off + len);
		if (*direct) {
			zr_stat_add(&fs->bytes_written_direct, len);
			zr_stat_add(&fs->writes_direct, 1);
		} else if (how != ZR_TB_AROUND) {
			__atomic_add_fetch(&ino->unkicked, len, __ATOMIC_RELAXED);
		}
	}
	return rc;
}

/*
 * Write @len bytes from @data at @off. Caller holds ino->lock: shared when
 * @off and @len are whole blocks, else exclusive; @fd is the file's fd.
 * @data, when it lies in this thread's request buffer, may be moved within
 * it for O_DIRECT (zr_session_align); the caller does not read it after.
 * @writepage: the kernel flushes its writeback cache; it ignores a short
 * count there, so the error that stopped the write is returned instead
 * (the kernel then fails the writer's fsync and close with it).
 * @return bytes written (short only when an error stopped a write that is
 * not @writepage) or -errno.
 */
static ssize_t data_write_locked(struct zr_fs *fs, struct zr_inode *ino, int fd,
				 char *data, size_t len, uint64_t off,
				 bool writepage)
{
	uint64_t bs = fs->bs, pos = off, end = off + len, fsize = load_size(ino);
	bool bypass, no_run = false, wt = fs->opt->cache == ZR_CACHE_WRITETHROUGH;
	bool excl = off % bs != 0 || len % bs != 0;	/* how the caller holds ino->lock */
	bool to_disk = false;	/* some of it went to the backing file at once */
	char *blk = scratch_block();
	int rc = 0;

	if (!blk)
		return -ENOMEM;
	/* the time the file shows, taken before a write to the backing file
	 * below moves it there (cache=writethrough, streams). With the
	 * kernel's writeback cache, for every write: the kernel times a
	 * direct write, a write through and a copy_file_range too, and sends
	 * its time in a SETATTR when it moves it; a time of ours would stay
	 * on the backing file when it does not (the write comes in the clock
	 * tick of the last time it sent: a copy_file_range right after a
	 * punched hole, helper-70's fuzzer) */
	if (writepage || fs->kernel_times)
		touch_data(fs, ino, fd, false);
	bypass = seq_bypass(fs, ino, off, len);
	if (bypass && !wt && len >= bs && direct_wanted(fs, ino)) {
		/* the stream's 4 KiB-aligned pieces may go with O_DIRECT: put
		 * the payload where a block's start is aligned in memory too */
		char *moved = zr_session_align(data, len, (uintptr_t)off, ZR_DIRECT_ALIGN);

		if (moved)
			data = moved;
	}
	if (ZR_UNLIKELY(__atomic_load_n(&ino->has_caps, __ATOMIC_RELAXED) &&
			!__atomic_load_n(&ino->caps_kill_failed, __ATOMIC_RELAXED))) {
		/* when it cannot go (a daemon without CAP_SETFCAP), it stays
		 * known to be there, and is not tried at every write */
		if (fremovexattr(fd, ZR_XATTR_CAPS) == 0 || errno == ENODATA)
			__atomic_store_n(&ino->has_caps, false, __ATOMIC_RELAXED);
		else
			__atomic_store_n(&ino->caps_kill_failed, true, __ATOMIC_RELAXED);
	}
	while (pos < end) {
		uint64_t idx = pos / bs, boff = pos % bs;
		size_t n = (size_t)ZR_MIN(bs - boff, end - pos);
		const char *src = data + (pos - off);
		bool bypass_this, around = false;	/* @run below is a write-around */
		bool direct = false;	/* to_backing() wrote with O_DIRECT */
		uint64_t seq = 0;	/* its number (install_written()) */
		bool later = false;	/* the dirty block goes in uncompressed */
		int zero = -1;	/* whether src's block is all zeros; -1: not looked */

		/* a stream's bytes that go to the backing file as they are:
		 * @run bytes from @pos, in @nrun blocks from @idx */
		uint64_t run = 0, nrun = 0, i;

		if (bypass && !wt && !no_run) {
			/* non-zero blocks from here, whole or partial: one
			 * pwrite. The kernel's writeback cuts a stream into
			 * WRITEs at any page, often mid-block, so a WRITE is
			 * mostly a partial block, whole ones, a partial one.
			 * A partial block goes as it is when the tier does
			 * not hold it: the rest of it is in the backing file
			 * (or past its end), and a read-modify-write would
			 * read the block back and write it twice. Our
			 * exclusive ino->lock keeps it out of the tier. One
			 * that starts past the end (not reached by the run
			 * before it) would leave a gap: the read-modify-write
			 * below fills that with zeros. A piece that O_DIRECT
			 * cannot take (@odd) goes alone. */
			while (pos + run < end) {
				uint64_t p = pos + run, m = ZR_MIN(bs - p % bs, end - p);
				bool odd = (p | (p + m)) % ZR_DIRECT_ALIGN != 0;

				if (all_zero(src + run, (size_t)m))
					break;
				if (m != bs && ((run == 0 && p > fsize) ||
						zr_file_has(ino->blocks, p / bs)))
					break;
				if (odd && run > 0)
					break;
				run += m;
				nrun++;
				if (odd)
					break;
			}
			if (run == 0 && n == bs)
				zero = 1;
		} else if (!wt && !no_run && (boff != 0 || n != bs) && fs->ghost &&
			   (idx + 1) * bs <= ZR_MIN(fsize, __atomic_load_n(&ino->disk_end,
									   __ATOMIC_RELAXED)) &&
			   tier_full(fs) && !zr_file_has(ino->blocks, idx) &&
			   !ghost_seen(fs, ino, idx)) {
			/* write-around (see its comment above ZR_FILL_PAUSE_MS) */
			around = true;
			nrun = 1;
			run = n;
		}
		if (run > 0) {
			rc = to_backing(fs, ino, fd, src, pos, run, idx, nrun,
					around ? ZR_TB_AROUND : ZR_TB_STREAM, &direct, &seq);
			to_disk |= rc == 0;
			if (rc == 0 && around) {
				zr_stat_add(&fs->written_around, run);
				pos += run;
				continue;
			}
			if (rc == 0) {
				/* copies of blocks that are whole now, or hold
				 * the end of the file; a block this run wrote
				 * in part is not in memory whole (NULL) */
				for (i = 0; i < nrun; i++) {
					uint64_t b0 = (idx + i) * bs;

					if ((b0 + bs > pos + run && pos + run < fsize) ||
					    !stream_copy_wanted(fs, ino))
						continue;
					stream_copy(fs, ino, idx + i, direct,
						    b0 >= pos && b0 + bs <= pos + run ?
						    src + (b0 - pos) : NULL, seq);
				}
				pos += run;
				fsize = ZR_MAX(fsize, pos);	/* to_backing() grew the cached size */
				continue;
			}
			/* refused (full, EIO): block by block below, where a
			 * block the backing refuses stays dirty */
			no_run = true;
			rc = 0;
		}
		if (boff != 0 || n != bs) {
			/* partial block: read-modify-write; nothing past the
			 * old size may show through */
			if (idx * bs >= fsize) {
				memset(blk, 0, bs);
			} else {
				rc = load_block(fs, ino, fd, idx, blk, true, false);
				if (rc)
					break;
				if (fsize < idx * bs + bs)
					memset(blk + (fsize - idx * bs), 0,
					       (size_t)(idx * bs + bs - fsize));
			}
			memcpy(blk + boff, src, n);
			src = blk;
		}
		if (bypass && (zero < 0 ? (zero = all_zero(src, bs)) : zero))
			bypass_this = false;	/* zeros cost nothing in RAM */
		else
			bypass_this = bypass;
		if (!bypass_this && boff == 0 && n == bs &&
		    __atomic_load_n(&ino->seq_raw, __ATOMIC_RELAXED) >= ZR_RAW_RUN &&
		    tier_tight(fs) &&
		    __atomic_add_fetch(&ino->raw_probe, 1, __ATOMIC_RELAXED) % ZR_RAW_PROBE != 0 &&
		    !(zero < 0 ? (zero = all_zero(src, bs)) : zero))
			bypass_this = true;	/* incompressible file: to disk */
		rc = -EAGAIN;
		if (bypass_this || wt) {
			/* streaming past seq_cutoff, or writethrough: to disk now */
			uint64_t wlen = ZR_MIN(bs, ZR_MAX(end, fsize) - idx * bs);

			rc = to_backing(fs, ino, fd, src, idx * bs, wlen, idx, 1,
					wt ? ZR_TB_THROUGH : ZR_TB_STREAM, &direct, &seq);
			to_disk |= rc == 0;
			if (rc == 0) {
				/* keep a clean copy: writethrough at once,
				 * when the tier has room or makes it (as the
				 * dirty path below, under the same locks); a
				 * stream while the tier has room and the data
				 * compresses, made later by the fill thread
				 * (stream_copy) */
				if (wt) {
					bool raw = false;

					if (zr_store_make_room_once(fs->store, bs) == 0 &&
					    install_written(ino, idx, src, seq, &raw) == 0 &&
					    boff == 0 && n == bs)
						note_raw(ino, raw);
				} else if (stream_copy_wanted(fs, ino)) {
					stream_copy(fs, ino, idx, direct, src, seq);
				}
			}
			/* else the backing refused (full, EIO): keep the
			 * block in RAM as dirty rather than lose it */
		}
		if (rc) {
			uint64_t was = fsize;
			struct zr_prepared p;

			/* compressed and in the pool before the size grows: a
			 * refusal (the usual failure) leaves the file as it
			 * was, under either lock */
			rc = zr_store_make_room(fs->store, bs);
			if (rc == 0) {
				later = compress_later(fs, ino, idx, boff == 0 && n == bs);
				rc = later ? zr_file_prepare_later(ino->blocks, src, &p)
					   : zr_file_prepare(ino->blocks, src, &p);
			}
			if (rc == 0) {
				/* the size before the block: a writeback that
				 * found a dirty block past it would take it for
				 * truncated and call it written */
				if (pos + n > fsize)
					was = grow_size(ino, pos + n);
				rc = zr_file_install(ino->blocks, idx, &p, ZR_WRITE_DIRTY);
				/* not installed (no memory for the block map):
				 * the file does not grow. Only with the lock
				 * exclusive: a writer holding it shared may have
				 * grown the size to the same end */
				if (rc && excl && was < pos + n) {
					uint64_t ours = pos + n;

					__atomic_compare_exchange_n(&ino->size, &ours, was, false,
								    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
				}
			}
			/* a partial block, padded with old data or zeros, says
			 * nothing about the file's data (p.fl outlives the
			 * install) */
			if (rc == 0 && boff == 0 && n == bs && !later)
				note_raw(ino, zr_prepared_incompressible(&p));
			if (rc == 0 && later)
				fill_wake_idle(fs);
			if (rc) {
				if (rc == -ENOMEM)
					rc = -ENOSPC;
				break;
			}
		}
		/* the cached size grew already: in to_backing(), or before
		 * the dirty block went into the tier */
		pos += n;
		fsize = ZR_MAX(fsize, pos);
	}
	data_changed(ino);
	if (pos > off && !writepage && !fs->kernel_times)	/* (else noted at the top) */
		touch_data(fs, ino, fd, true);
	if (to_disk)
		stamp_mtime(fs, ino, fd);
	if (rc && (pos == off || writepage))
		return rc;
	return (ssize_t)(pos - off);
}

/*
 * Write @len bytes at @off of @ino (@writepage: see data_write_locked()).
 * @return bytes written (short when an error stopped the write, or at the
 * backing filesystem's largest file size) or -errno.
 */
static ssize_t data_write(struct zr_fs *fs, struct zr_inode *ino, char *data,
			  size_t len, uint64_t off, bool writepage)
{
	bool too_big = false;
	ssize_t n;
	int fd, rc;

	rc = attach_cached(fs, ino);
	if (rc)
		return rc;
	fd = zr_fd_get_waiting(fs, ino);	/* (during a rename: after it) */
	if (fd < 0)
		return fd;
	if (!fs->store) {
		(void)zr_fd_make_writable(fs, ino, fd);	/* (as to_backing()) */
		zr_stat_add(&fs->tb_writes, 1);	/* (zr_data_syncfs()) */
		/* shared, with the size grown before it is let go: a
		 * fallocate, a punch or a truncate (which hold it for
		 * writing) that cuts the backing file to a size it has
		 * just read (a failed fallocate's give_back(), fstat then
		 * ftruncate) or to the cached size must not cut an
		 * extension written meanwhile, whose WRITE was answered
		 * (the kernel does not wait for a flush of its cache
		 * before those) */
		pthread_rwlock_rdlock(&ino->lock);
		/* with the kernel's writeback cache the kernel owns the
		 * mtime and sends it in a SETATTR after its WRITEs, but
		 * does not wait for the ones it sent in the background: a
		 * WRITE served after that SETATTR moved the backing mtime
		 * for good (helper-81's fuzzer, cache=none). So the time is
		 * noted and put back, as the tier's writeback does */
		if (fs->kernel_times)
			touch_data(fs, ino, fd, false);
		rc = full_pwrite(fd, data, len, (off_t)off);
		if (rc == 0) {
			(void)grow_size(ino, off + len);
			stamp_mtime(fs, ino, fd);
		}
		pthread_rwlock_unlock(&ino->lock);
		zr_fd_put(fs, ino);
		if (rc)
			return rc;
		zr_stat_add(&fs->bytes_written_backing, len);
		return (ssize_t)len;
	}
	/* past the largest file the backing filesystem takes: refused now,
	 * as it would refuse it (a short write, then EFBIG), since the tier
	 * could never write it back; a flush of the kernel's cache cannot be
	 * short, so it stores what fits and fails */
	if (ino->key.dev == fs->backing_dev && off + len > fs->max_file_size) {
		if (off >= fs->max_file_size) {
			zr_fd_put(fs, ino);
			return -EFBIG;
		}
		len = (size_t)(fs->max_file_size - off);
		too_big = writepage;
	}
	/* whole aligned blocks only: no read-modify-write, the lock can be
	 * shared and blocks compress in parallel */
	if (off % fs->bs == 0 && len % fs->bs == 0)
		pthread_rwlock_rdlock(&ino->lock);
	else
		pthread_rwlock_wrlock(&ino->lock);
	n = data_write_locked(fs, ino, fd, data, len, off, writepage);
	pthread_rwlock_unlock(&ino->lock);
	kick_writeback(ino, fd);
	zr_fd_put(fs, ino);
	return too_big && n >= 0 ? -EFBIG : n;
}

static void refused_queue(struct zr_fs *fs, fuse_ino_t ino, uint64_t off, uint64_t end);

void zr_op_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *bufv,
		     off_t off, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	size_t len = fuse_buf_size(bufv);
	struct zr_inode *in;
	char *data;
	char *copy = NULL;
	ssize_t n;

	if (zr_is_ctl(ino)) {
		/* control files: gather and hand over */
		copy = malloc(len + 1);
		if (!copy) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);

		dst.buf[0].mem = copy;
		n = fuse_buf_copy(&dst, bufv, 0);
		zr_ctl_write(req, fs, ino, copy, n < 0 ? 0 : (size_t)n, fi);
		free(copy);
		return;
	}
	if (bufv->count == 1 && !(bufv->buf[0].flags & FUSE_BUF_IS_FD)) {
		data = (char *)bufv->buf[0].mem + bufv->off;
	} else {
		struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);

		copy = malloc(len ? len : 1);
		if (!copy) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		dst.buf[0].mem = copy;
		n = fuse_buf_copy(&dst, bufv, 0);
		if (n < 0) {
			free(copy);
			fuse_reply_err(req, (int)-n);
			return;
		}
		len = (size_t)n;
		data = copy;
	}
	in = zr_inode_from_ino(fs, ino);
	n = data_write(fs, in, data, len, (uint64_t)off, fi && fi->writepage);
	free(copy);
	if (n < 0 || (size_t)n < len) {
		__atomic_store_n(&in->write_refused, true, __ATOMIC_RELAXED);
		if (fi && fi->writepage)
			refused_queue(fs, ino, (uint64_t)off + (n > 0 ? (uint64_t)n : 0),
				      (uint64_t)off + len);
	}
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/**
 * zr_data_truncate() - set the size of @ino to @size: the backing file is
 * truncated at once, blocks past the end are dropped and the tail of the
 * last block is zeroed. @fd may be -1 (taken from the cache). @open_trunc:
 * an open with O_TRUNC, which marks the mtime even when the size does not
 * change (POSIX); a SETATTR changes nothing then. With the writeback cache
 * the kernel keeps a regular file's mtime itself and sends it with a
 * truncate that changes the size, not with one that does not: ours, and
 * the backing file's, which ftruncate(2) moves on ext4 even so, then read
 * another time than the mount showed, once remounted (helper-67).
 * @return 0 or -errno; with an error the file reads as it was, its size
 * included (when the pool refused the last block, the backing file may
 * hold that block's part before @size already: the file's data, within
 * its size, as a writeback would have put there). A last block that is
 * corrupt in the tier stays so (EIO), its bytes past @size too.
 */
int zr_data_truncate(struct zr_fs *fs, struct zr_inode *ino, int fd, uint64_t size,
		     bool open_trunc)
{
	uint64_t bs = fs->bs, idx = size / bs;
	bool own = fd < 0, tail = false, head_out = false, same;
	struct zr_prepared p = { 0 };	/* (holds nothing) */
	struct stat st;
	char *blk;
	int rc = 0;

	rc = attach_cached(fs, ino);
	if (rc)
		return rc;
	if (own) {
		fd = zr_fd_get(fs, ino);
		if (fd < 0)
			return fd;
	}
	/* a truncate by name needs no open: the cached fd may be the
	 * read-only one of a file made writable since (ftruncate said
	 * EINVAL; helper-33's review) */
	rc = zr_fd_make_writable(fs, ino, fd);
	if (rc) {
		if (own)
			zr_fd_put(fs, ino);
		return rc == -EBADF ? -EROFS : rc;
	}
	pthread_rwlock_wrlock(&ino->lock);
	if (ino->blocks)
		zr_file_io_lock(ino->blocks);
	/* the same size: nothing to drop or zero, and the backing file is
	 * left alone unless it is longer (it never should be) */
	same = size == load_size(ino) && fstat(fd, &st) == 0 && (uint64_t)st.st_size <= size;
	if (same)
		goto done;
	/*
	 * A shrink leaves the last block with bytes past the end, which must
	 * read as zeros when the file grows again. Its zeroed copy is made
	 * ready before anything changes: when the pool cannot take it, the
	 * part before the end goes to the backing file instead (its data:
	 * the backing file stays within the cached size) and the block
	 * leaves the tier. Writeback is held off (the I/O mutex) throughout,
	 * so a dirty block stays. (A grow finds zeros there already.)
	 */
	if (ino->blocks && size % bs && size < load_size(ino)) {
		blk = scratch_block();
		rc = blk ? zr_file_read(ino->blocks, idx, blk) : -ENOMEM;
		tail = rc == 1;
		rc = rc == -ENOMEM ? rc : 0;	/* (-EIO: stays corrupt) */
		if (tail) {
			memset(blk + size % bs, 0, bs - size % bs);
			if (zr_file_prepare(ino->blocks, blk, &p) != 0) {
				zr_stat_add(&fs->tb_writes, 1);	/* (zr_data_syncfs()) */
				rc = full_pwrite(fd, blk, size % bs, (off_t)(idx * bs));
				if (rc == 0)
					zr_stat_add(&fs->bytes_written_backing, size % bs);
				head_out = true;
			}
		}
	}
	if (rc == 0)
		rc = ftruncate(fd, (off_t)size) < 0 ? -errno : 0;
	if (rc == 0 && __atomic_load_n(&ino->disk_end, __ATOMIC_RELAXED) > size)
		__atomic_store_n(&ino->disk_end, size, __ATOMIC_RELAXED);
	if (rc == -EBADF)
		rc = -EROFS;
	if (rc == 0 && ino->blocks) {
		zr_file_drop(ino->blocks, (size + bs - 1) / bs, UINT64_MAX);
		/* (the install only allocates when the block left the tier
		 * meanwhile: clean, then, and on disk as it is now) */
		if (tail && !head_out)
			(void)zr_file_install(ino->blocks, idx, &p, ZR_WRITE_DIRTY);
		else if (head_out)
			zr_file_drop(ino->blocks, idx, 1);
	}
	if (ino->blocks)
		zr_file_unprepare(ino->blocks, &p);	/* (not installed) */
	/* the size before the mutex goes: a writeback of the last block
	 * in between would write it to the old size */
	if (rc == 0)
		store_size(ino, size);
done:
	if (ino->blocks)
		zr_file_io_unlock(ino->blocks);
	if (!same)
		data_changed(ino);
	if (rc == 0 && (!same || open_trunc)) {
		touch_data(fs, ino, fd, true);
		stamp_mtime(fs, ino, fd);	/* (ftruncate(2) moved it) */
	}
	pthread_rwlock_unlock(&ino->lock);
	if (own)
		zr_fd_put(fs, ino);
	return rc;
}

/* Counts for zr_data_syncfs(): writes to the backing file so far (*@w:
 * writebacks, and writes that went straight there, counted before they
 * begin) and what left RAM (*@r: blocks out of the store, and again the
 * writes that went straight to the backing file). */
static void sync_counts(struct zr_fs *fs, uint64_t *w, uint64_t *r)
{
	uint64_t tb = zr_stat_read(&fs->tb_writes);

	*w = zr_stat_read(&fs->wb_writes) + tb;
	*r = (fs->store ? zr_store_removed(fs->store) : 0) + tb;
}

/*
 * The mount point of the mount whose ID is @mnt_id, from
 * /proc/self/mountinfo (its fifth field, with the octal escapes of
 * spaces, tabs, newlines and backslashes undone), into @path of @size.
 * @return 0, -ENOENT when there is no such mount, -ENAMETOOLONG when its
 * path does not fit, or -errno of the open.
 */
static int mount_point_of(uint64_t mnt_id, char *path, size_t size)
{
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;
	FILE *f = fopen("/proc/self/mountinfo", "re");

	if (!f)
		return -errno;
	while (rc == -ENOENT && getline(&line, &cap, f) > 0) {
		char *p = line, *end;
		size_t n = 0;
		int field;

		if (strtoull(line, &end, 10) != mnt_id || end == line || *end != ' ')
			continue;
		for (field = 1; field < 5 && p; field++) {	/* to the fifth */
			p = strchr(p, ' ');
			p = p ? p + 1 : NULL;
		}
		if (!p)
			continue;
		for (; *p && *p != ' ' && *p != '\n' && n + 1 < size; n++) {
			if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' &&
			    p[2] >= '0' && p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {
				path[n] = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
				p += 4;
			} else {
				path[n] = *p++;
			}
		}
		path[n] = '\0';
		rc = *p && *p != ' ' && *p != '\n' ? -ENAMETOOLONG : 0;
	}
	free(line);
	fclose(f);
	return rc;
}

/** zr_data_mount_id() - the ID of @fd's mount (statx), or 0 when it cannot
 * be told. */
uint64_t zr_data_mount_id(int fd)
{
#ifdef STATX_MNT_ID
	struct statx stx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) == 0 &&
	    (stx.stx_mask & STATX_MNT_ID))
		return stx.stx_mnt_id;
#else
	(void)fd;
#endif
	return 0;
}

/*
 * A descriptor of the filesystem that @fd (a backing file) is on, to
 * syncfs(2) it with: the root of @fd's mount (ID @mnt_id, when known), so
 * that no file is kept open, reached from the backing root's fd and
 * beneath it only (its absolute path may lead through zramfs's own mount,
 * over the backing directory or above it: the daemon would ask itself, and
 * wait for ever; helper-89); or else a duplicate of @fd, which keeps its
 * file open. Called without locks of the daemon's own but the caller's.
 * @return the new descriptor, or -errno.
 */
static int subfs_open(struct zr_fs *fs, int fd, uint64_t mnt_id)
{
	const char *base = fs->opt->backing_real, *rel = NULL;
	char path[PATH_MAX];
	size_t blen = base ? strlen(base) : 0;
	int sfd;

	if (mnt_id && base && mount_point_of(mnt_id, path, sizeof(path)) == 0) {
		if (strcmp(base, "/") == 0 && path[0] == '/')
			rel = path + 1;
		else if (strncmp(path, base, blen) == 0 && path[blen] == '/')
			rel = path + blen + 1;
	}
	if (rel && *rel) {
		struct open_how how = {
			.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
		};

		sfd = (int)syscall(SYS_openat2, fs->root_fd, rel, &how, sizeof(how));
		if (sfd >= 0 && zr_data_mount_id(sfd) == mnt_id)
			return sfd;
		if (sfd >= 0)
			close(sfd);	/* (another mount on top of it now) */
	}
	sfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	return sfd < 0 ? -errno : sfd;
}

/* The index of the entry of zr_fs.subfs for mount @id (device @dev when
 * the ID is not known), or -1. Caller holds subfs_lock. */
static int subfs_find(struct zr_fs *fs, uint64_t id, dev_t dev)
{
	for (unsigned i = 0; i < fs->n_subfs; i++) {
		if (id ? fs->subfs[i].mnt_id == id : fs->subfs[i].dev == dev)
			return (int)i;
	}
	return -1;
}

/**
 * zr_data_note_subfs() - before a write to @ino's backing file @fd: when it
 * is on another mount than the backing root's (a filesystem mounted inside
 * the backing directory; not a btrfs subvolume, whose device number only
 * differs), make sure zr_data_syncfs() syncs that one too (zr_fs.subfs,
 * one entry per mount, or per device where mount IDs cannot be had). Once
 * per inode; past ZR_SUBFS_MAX such mounts, the log says that the others
 * are not synced, and so it does when no descriptor can be had (tried
 * again at the next write).
 */
void zr_data_note_subfs(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	dev_t dev = ino->key.dev;
	uint64_t id;
	bool known, full, said;
	int sfd;

	if (dev == fs->backing_dev || __atomic_load_n(&ino->subfs_noted, __ATOMIC_RELAXED))
		return;
	id = zr_data_mount_id(fd);
	if (id && id == fs->root_mnt_id) {
		__atomic_store_n(&ino->subfs_noted, true, __ATOMIC_RELAXED);
		return;	/* the root's syncfs covers it */
	}
	pthread_mutex_lock(&fs->subfs_lock);
	known = subfs_find(fs, id, dev) >= 0;
	full = fs->n_subfs == ZR_SUBFS_MAX;
	pthread_mutex_unlock(&fs->subfs_lock);
	/* (the descriptor is opened outside subfs_lock, which syncfs takes) */
	sfd = known || full ? -1 : subfs_open(fs, fd, id);
	pthread_mutex_lock(&fs->subfs_lock);
	known = subfs_find(fs, id, dev) >= 0;
	if (!known && sfd >= 0 && fs->n_subfs < ZR_SUBFS_MAX) {
		fs->subfs[fs->n_subfs++] = (struct zr_subfs){
			.mnt_id = id, .dev = dev, .fd = sfd };
		sfd = -1;
		known = true;
	}
	full = !known && fs->n_subfs == ZR_SUBFS_MAX;
	said = fs->subfs_said;
	if (!known)
		fs->subfs_said = true;
	pthread_mutex_unlock(&fs->subfs_lock);
	if (sfd >= 0)
		close(sfd);	/* (another thread added that mount meanwhile) */
	if (known || full)
		__atomic_store_n(&ino->subfs_noted, true, __ATOMIC_RELAXED);
	if (said || known)
		return;
	if (full)
		zr_log(ZR_LOG_WARNING, "more than %d filesystems are mounted inside the backing directory: a failed sync of the others (inode %llu's, ...) is not seen",
		       ZR_SUBFS_MAX, (unsigned long long)ino->key.ino);
	else
		zr_log(ZR_LOG_WARNING, "cannot keep a descriptor of the filesystem of inode %llu (%s): a failed sync of it is not seen (tried again at its next write)",
		       (unsigned long long)ino->key.ino, strerror(-sfd));
}

/**
 * zr_data_syncfs() - syncfs(2) of the backing filesystem through the
 * daemon's root fd, and of the filesystems mounted inside it that files
 * were written on (zr_data_note_subfs()). Each error of a filesystem is
 * reported once per open file (errseq), so every syncfs of those fds goes
 * through here: a failure seen and dropped by one caller would let the
 * next one find nothing (helper-38's review: the low-memory shrink
 * ignored it, and the final writeback then took the data for safe). A
 * failure of any of them means the kernel may
 * have given up pages it could not write: the blocks the tier holds are
 * marked dirty (those being written back too), to be written again. Data
 * written to the backing file since the last syncfs that succeeded and no
 * longer in RAM cannot be, and may be lost: when both counts moved (a
 * write, and a block out of RAM, since then), the log says so (@who asked)
 * and fs->sync_lost makes the exit status 1. The counts are taken before
 * the syncfs and the removals again after the blocks are marked, so that
 * nothing that went in between is missed (helper-39's review).
 * @return 0 or -errno of syncfs.
 */
int zr_data_syncfs(struct zr_fs *fs, const char *who)
{
	uint64_t w, r, r_after;
	int rc, sub[ZR_SUBFS_MAX];
	unsigned i, n;

	pthread_mutex_lock(&fs->sync_lock);
	sync_counts(fs, &w, &r);
	rc = syncfs(fs->root_fd) < 0 ? -errno : 0;
	/* the filesystems mounted inside it too: each one's errors are
	 * seen by its own descriptor only (helper-88) */
	pthread_mutex_lock(&fs->subfs_lock);
	n = fs->n_subfs;
	for (i = 0; i < n; i++)
		sub[i] = fs->subfs[i].fd;
	pthread_mutex_unlock(&fs->subfs_lock);
	for (i = 0; i < n; i++) {
		if (syncfs(sub[i]) < 0 && rc == 0)
			rc = -errno;
	}
	if (rc == 0) {
		fs->sync_w = w;
		fs->sync_r = r;
	} else {
		if (fs->store)
			zr_store_redirty_all(fs->store);
		sync_counts(fs, &w, &r_after);
		if (w != fs->sync_w && r_after != fs->sync_r && !fs->sync_lost) {
			__atomic_store_n(&fs->sync_lost, true, __ATOMIC_RELAXED);
			zr_log(ZR_LOG_ERR, "%s: syncfs of the backing filesystem (or of one mounted inside it) failed (%s): data written back and no longer in RAM may be lost; what RAM holds is written again",
			       who, strerror(-rc));
		}
	}
	pthread_mutex_unlock(&fs->sync_lock);
	return rc;
}

/**
 * zr_data_drop_inode() - the file's last name went and nobody has it open:
 * its blocks go, dirty ones included (a temporary file never reaches the
 * disk). Caller holds ino->lock.
 */
void zr_data_drop_inode(struct zr_fs *fs, struct zr_inode *ino)
{
	if (!ino->blocks)
		return;
	zr_file_io_lock(ino->blocks);
	zr_file_drop(ino->blocks, 0, UINT64_MAX);
	zr_file_io_unlock(ino->blocks);
	pthread_mutex_lock(&fs->attr_lock);
	ino->times_dirty = false;
	pthread_mutex_unlock(&fs->attr_lock);
}

/**
 * zr_data_writeback_inode() - write back every dirty block of @ino, leaving
 * a recorded writeback error for the file's next fsync/close.
 * @return 0 or -errno (this writeback's error).
 */
int zr_data_writeback_inode(struct zr_fs *fs, struct zr_inode *ino)
{
	(void)fs;
	return ino->blocks ? zr_file_writeback(ino->blocks) : 0;
}

/**
 * zr_data_flush_inode() - write back every dirty block of @ino. @writer:
 * for a handle that may write, which also takes the error recorded by an
 * earlier writeback; a reader's fsync leaves it for the writer's fsync or
 * close (as zr_op_flush()), and reports only the error of this writeback,
 * which tries again every block that failed before.
 * @return 0 or -errno (the first writeback error, sticky ones included for
 * @writer).
 */
int zr_data_flush_inode(struct zr_fs *fs, struct zr_inode *ino, bool writer)
{
	int rc, err = 0;

	if (!ino->blocks)
		return 0;
	rc = zr_data_writeback_inode(fs, ino);
	if (writer)
		err = zr_file_take_error(ino->blocks);
	return rc ? rc : err;
}

void zr_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		 struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in = zr_inode_from_ino(fs, ino);
	bool writer;
	int fd, rc;

	if (zr_is_ctl(ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	writer = fi && (fi->fh & ZR_FH_WRITER);
	rc = zr_data_flush_inode(fs, in, writer);
	if (rc == 0)
		rc = backing_fd(fs, in, 0, false, &fd);
	if (rc == 0) {
		if (fd >= 0) {	/* (-1: removed behind our back, nothing to sync) */
			if ((datasync ? fdatasync(fd) : fsync(fd)) < 0) {
				rc = -errno;
				/* the kernel may have given up pages it could
				 * not write: what the tier still holds of the
				 * file goes out again at the next writeback,
				 * so that a retried fsync that succeeds means
				 * those blocks are on disk (not those that
				 * left the tier or bypassed it) */
				if (in->blocks)
					(void)zr_file_redirty(in->blocks);
				/* the error was the backing fd's, which the
				 * writers' handles share (errseq: this call
				 * took it from them): a reader's fsync leaves
				 * it for them too (helper-89) */
				if (in->blocks && !writer)
					zr_file_note_error(in->blocks, rc);
			}
			zr_fd_put(fs, in);
		}
	}
	fuse_reply_err(req, -rc);
}

/*
 * close(): report a writeback error of this file (it does not force
 * writeback) to a handle that may write: the kernel sends FLUSH at every
 * close, and a reader's close took the error its writer's close was to
 * report (helper-52, as beb1973 for lseek).
 */
void zr_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	int rc = 0;

	if (!zr_is_ctl(ino) && (fi->fh & ZR_FH_WRITER)) {
		in = zr_inode_from_ino(fs, ino);
		if (in->blocks)
			rc = zr_file_take_error(in->blocks);
	}
	fuse_reply_err(req, -rc);
}

/* Zero the part of @blk (the block at @bstart, @bs bytes) that [@off, @end) covers. */
static void zero_part(char *blk, uint64_t bstart, uint64_t bs, uint64_t off, uint64_t end)
{
	uint64_t zs = ZR_MAX(off, bstart), ze = ZR_MIN(end, bstart + bs);

	memset(blk + (zs - bstart), 0, (size_t)(ze - zs));
}

/*
 * Zero bytes [@a, @b) of backing file @fd up to @held (its size before
 * the punch: past it, it reads as zeros already), for a punch where the
 * backing filesystem has no holes, in writes of 64 KiB. Written straight
 * to the file: kept in the tier as dirty zero blocks, a large punch cost a
 * slot per block of map with no room made for it (1 GiB in 4 KiB blocks:
 * 6 MiB over a 1 MiB budget).
 * @return 0 or -errno; *@done is where the zeros on disk end, to the byte
 * (the bytes of a short write count): @b after success, less after an
 * error, then [@a, *@done) reads as zeros and [*@done, @b) as before. It
 * may end inside a block (any block size, a short write; a block larger
 * than 64 KiB, a failed write).
 */
static int zero_backing(int fd, uint64_t a, uint64_t b, uint64_t held, uint64_t *done)
{
	static const char zeros[64 * 1024];
	int rc = 0;

	held = ZR_MIN(b, held);
	while (a < held && rc == 0) {
		size_t n = (size_t)ZR_MIN(held - a, (uint64_t)sizeof(zeros)), w;

		rc = pwrite_counted(fd, zeros, n, (off_t)a, &w);
		a += w;
	}
	*done = rc ? a : b;
	return rc;
}

/*
 * Zero [off, off+len) of @ino in the store and the backing file (punch).
 * The file's I/O mutex is held throughout, so that no writeback of an
 * older block lands after the hole is made. The blocks the hole cuts into
 * (at most two: the edges) are zeroed in part and made ready in the pool
 * before anything changes, so that a pool that cannot take them leaves the
 * file as it was (-ENOSPC). When the backing filesystem cannot punch
 * holes, the whole blocks are zeroed in the backing file (zero_backing())
 * and dropped from the tier, and the edges become dirty blocks. Caller
 * holds ino->lock exclusive.
 * @return 0 or -errno; the file is unchanged after an error, but for a
 * failed write of zeros in a backing filesystem without holes: then the
 * whole blocks zeroed before it read as zeros, and the block it stopped
 * in, when the tier holds that block, reads as before (its copy is made
 * dirty, to be written over the zeros); when the tier does not hold it,
 * the block reads as it is on disk: zeros up to where the write failed,
 * the old data after.
 */
static int punch_range(struct zr_fs *fs, struct zr_inode *ino, int fd,
		       uint64_t off, uint64_t len)
{
	uint64_t bs = fs->bs, size = load_size(ino);
	uint64_t end = ZR_MIN(off + len, size);	/* nothing to zero past the end */
	uint64_t first = (off + bs - 1) / bs, last = end / bs;	/* whole blocks */
	struct zr_prepared edge[2] = { 0 };	/* (hold nothing) */
	uint64_t eidx[2] = { off / bs, end > 0 ? (end - 1) / bs : 0 };
	bool want[2] = { false, false }, cached[2] = { false, false }, punched;
	uint64_t zeroed;	/* (no holes) where zero_backing()'s zeros end */
	uint64_t held = 0;	/* the backing file's size before the punch */
	char *blk = scratch_block();
	int rc = 0;

	if (!blk)
		return -ENOMEM;
	if (ino->blocks && off < end) {
		want[0] = off % bs != 0 || (eidx[0] == eidx[1] && end % bs != 0);
		want[1] = end % bs != 0 && eidx[1] != eidx[0];
		if (first > last)	/* the range is inside one block */
			first = last = 0;
	} else {
		first = last = 0;
	}
	if (ino->blocks)
		zr_file_io_lock(ino->blocks);
	/* the edges the tier holds (the backing punch zeroes the others) */
	for (int i = 0; i < 2; i++) {
		uint64_t bstart = eidx[i] * bs;
		int got;

		if (!want[i])
			continue;
		/* (an edge the tier holds and cannot read, for want of
		 * memory or corrupt, fails the punch before anything
		 * changed: passed over, it would read its old bytes after
		 * the punch, and be written back over the hole) */
		got = zr_file_read(ino->blocks, eidx[i], blk);
		if (got < 0) {
			rc = got;
			goto out;
		}
		if (got == 0)
			continue;
		cached[i] = true;
		zero_part(blk, bstart, bs, off, end);
		if (zr_file_prepare(ino->blocks, blk, &edge[i]) != 0) {
			rc = -ENOSPC;
			goto out;
		}
	}
	if (end > off) {
		/* whole dirty blocks past the backing file's end are the
		 * only record of the file's size there: dropped, they would
		 * never extend it, and the file would come back shorter. So
		 * the backing file first reaches the punched end (a hole,
		 * or zeros where there are none), where a failure changes
		 * nothing (it stays within the file's size) */
		struct stat st;

		if (fstat(fd, &st) < 0 ||
		    ((uint64_t)st.st_size < end && ftruncate(fd, (off_t)end) < 0)) {
			rc = errno == EBADF ? -EROFS : -errno;
			goto out;
		}
		held = (uint64_t)st.st_size;
	}
	punched = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			    (off_t)off, (off_t)len) == 0;
	if (!punched && errno != EOPNOTSUPP) {
		rc = errno == EBADF ? -EROFS : -errno;
		goto out;
	}
	if (!ino->blocks) {
		rc = punched ? 0 : -EOPNOTSUPP;
		goto out;
	}
	if (!punched) {
		/* no holes: the edges the tier does not hold are read in */
		for (int i = 0; i < 2; i++) {
			uint64_t bstart = eidx[i] * bs;

			if (!want[i] || cached[i])
				continue;
			rc = load_block(fs, ino, fd, eidx[i], blk, true, false);
			if (rc)
				goto out;
			zero_part(blk, bstart, bs, off, end);
			if (zr_file_prepare(ino->blocks, blk, &edge[i]) != 0) {
				rc = -ENOSPC;
				goto out;
			}
		}
		/* what is zeros on disk leaves the tier, also after an
		 * error (a clean block there would read the old data until
		 * it were dropped) */
		zr_stat_add(&fs->tb_writes, 1);	/* (zr_data_syncfs()) */
		rc = zero_backing(fd, first * bs, last * bs, held, &zeroed);
		if (zeroed / bs > first)
			zr_file_drop(ino->blocks, first, zeroed / bs - first);
		/* the block a failed write stopped in is zeros on disk up to
		 * @zeroed, the old data after: a clean copy in the tier would
		 * read the old data until reclaim dropped it, and then half
		 * zeros. Made dirty, the copy goes over the zeros at its next
		 * writeback (under the I/O mutex: none is in flight now, so
		 * it is marked) */
		if (rc && zeroed % bs)
			(void)zr_file_redirty_range(ino->blocks, zeroed / bs, 1);
		for (int i = 0; i < 2 && rc == 0; i++)
			if (want[i])
				rc = zr_file_install(ino->blocks, eidx[i], &edge[i],
						     ZR_WRITE_DIRTY);
	} else {
		if (last > first)
			zr_file_drop(ino->blocks, first, last - first);
		/* (an install only allocates when the block left the tier
		 * meanwhile: clean, then, and zeroed on disk by the punch) */
		for (int i = 0; i < 2; i++)
			if (cached[i])
				(void)zr_file_install(ino->blocks, eidx[i], &edge[i],
						      ZR_WRITE_DIRTY);
	}
out:
	if (ino->blocks) {
		for (int i = 0; i < 2; i++)
			zr_file_unprepare(ino->blocks, &edge[i]);	/* (not installed) */
		zr_file_io_unlock(ino->blocks);
	}
	return rc;
}

/*
 * Have the kernel drop its cached pages of @ino from @off for @len bytes
 * (0: to the end). It writes dirty ones back first and waits for their
 * WRITEs, which other threads serve: so not once main.c's end_loop() is
 * about to end the session (fs->ending), after which nobody would read
 * them and the calling thread would wait, unkillable, for ever (the loop
 * joining it: helper-47's item). end_loop() waits for the calls under way
 * (fs->invalidating). @return 0, -ESHUTDOWN when the session is ending, or
 * the error of fuse_lowlevel_notify_inval_inode().
 */
static int inval_inode(struct zr_fs *fs, fuse_ino_t ino, off_t off, off_t len)
{
	int rc = -ESHUTDOWN;

	__atomic_add_fetch(&fs->invalidating, 1, __ATOMIC_SEQ_CST);
	if (!__atomic_load_n(&fs->ending, __ATOMIC_SEQ_CST))
		rc = fuse_lowlevel_notify_inval_inode(fs->se, ino, off, len);
	__atomic_sub_fetch(&fs->invalidating, 1, __ATOMIC_SEQ_CST);
	return rc;
}

/*
 * Refused writeback. A WRITE of the kernel's writeback that we refuse or
 * cut short (ENOSPC: the tier and the backing disk full) ends those pages'
 * writeback with the error, which the writer's close() or fsync()
 * reports; but the kernel keeps the pages, clean, and reads show data
 * zramfs does not have until the pages are evicted, when it is gone. So
 * the range is queued, and the refusal thread has the kernel drop those
 * pages; reads then agree with what is stored, as after a remount. Not
 * from the WRITE's thread: dropping a page waits for its writeback, which
 * our reply ends (from 6.16; before, the kernel wrote a copy), and the
 * range's dirty pages are written back first, WRITEs that thread would
 * wait for. Not from the writeback thread: those WRITEs may wait for it
 * to make room.
 * Best effort: with the queue full a range is left as it was (logged
 * once); the file's next lseek drops its cache all the same
 * (write_refused).
 */

/* refused_queue() - queue [@off, @end) of @ino for the refusal thread. */
static void refused_queue(struct zr_fs *fs, fuse_ino_t ino, uint64_t off, uint64_t end)
{
	unsigned i;

	if (end <= off)
		return;
	pthread_mutex_lock(&fs->ref_lock);
	if (!fs->ref_running || fs->ref_stop) {
		pthread_mutex_unlock(&fs->ref_lock);
		return;
	}
	for (i = 0; i < fs->ref_len && fs->ref_q[i].ino != ino; i++)
		;
	if (i < fs->ref_len) {
		if (off < fs->ref_q[i].off)
			fs->ref_q[i].off = off;
		if (end > fs->ref_q[i].end)
			fs->ref_q[i].end = end;
	} else if (i < ZR_REFUSED_QLEN) {
		fs->ref_q[i] = (struct zr_refused){ .ino = ino, .off = off, .end = end };
		fs->ref_len++;
	} else if (!fs->ref_full_said) {
		fs->ref_full_said = true;
		zr_log(ZR_LOG_WARNING, "refused writeback: more than %u files wait for the kernel to drop their pages; reads of the others show the refused data until an lseek of theirs or an eviction",
		       ZR_REFUSED_QLEN);
	}
	pthread_cond_signal(&fs->ref_cond);
	pthread_mutex_unlock(&fs->ref_lock);
}

/* The refusal thread: drops the queued ranges from the kernel's cache. */
static void *refused_main(void *arg)
{
	struct zr_fs *fs = arg;
	struct zr_refused r;
	int rc;

	pthread_mutex_lock(&fs->ref_lock);
	while (!fs->ref_stop) {
		if (!fs->ref_len) {
			pthread_cond_wait(&fs->ref_cond, &fs->ref_lock);
			continue;
		}
		r = fs->ref_q[0];
		fs->ref_len--;
		memmove(&fs->ref_q[0], &fs->ref_q[1], fs->ref_len * sizeof(r));
		pthread_mutex_unlock(&fs->ref_lock);
		/* (-ENOENT: the kernel has forgotten the inode, and its pages) */
		rc = inval_inode(fs, r.ino, (off_t)r.off, (off_t)(r.end - r.off));
		if (rc < 0 && rc != -ENOENT && rc != -ESHUTDOWN)
			zr_log(ZR_LOG_DEBUG, "refused writeback: inode %llu: cannot drop the kernel's pages: %s",
			       (unsigned long long)r.ino, strerror(-rc));
		pthread_mutex_lock(&fs->ref_lock);
	}
	pthread_mutex_unlock(&fs->ref_lock);
	return NULL;
}

/*
 * A fallocate of the backing file failed (ENOSPC, a quota): what it took
 * before it failed stays allocated there (ext4, xfs), and, as zramfs asks
 * with FALLOC_FL_KEEP_SIZE, past the backing file's end, where nothing
 * shows it: the size stays, the space is gone, and the next writes fail
 * for want of it. tmpfs gives such space back; so does this, with a
 * truncate of the backing file to its own size, which frees what lies
 * past its end (ext4, xfs; a punch there does nothing on ext4). No data
 * lies there: the tier's blocks past it are in RAM. Under the I/O mutex,
 * as zr_data_truncate(), and ino->lock, which the caller holds for
 * writing (a cache=none WRITE holds it shared): a writeback or a WRITE
 * that extends the file meanwhile would be cut back. Space reserved past
 * the end by an earlier
 * FALLOC_FL_KEEP_SIZE goes too. @st: the backing file before the call.
 */
static void give_back(struct zr_inode *ino, int fd, const struct stat *st)
{
	struct stat now;

	if (ino->blocks)
		zr_file_io_lock(ino->blocks);
	if (fstat(fd, &now) == 0 && now.st_blocks > st->st_blocks &&
	    ftruncate(fd, now.st_size) < 0)
		zr_log(ZR_LOG_WARNING, "fallocate: cannot give back the space a failed fallocate took past the end of a backing file: %s",
		       strerror(errno));
	if (ino->blocks)
		zr_file_io_unlock(ino->blocks);
}

void zr_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off,
		     off_t len, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in = zr_inode_from_ino(fs, ino);
	uint64_t end = (uint64_t)off + (uint64_t)len;
	int fd, rc;

	if (zr_is_ctl(ino)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	rc = attach_cached(fs, in);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fd = zr_fd_get(fs, in);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	/* (the cached fd may have been reopened read-only while the caller
	 * held the file open for writing: made 0444 meanwhile) */
	rc = zr_fd_make_writable(fs, in, fd);
	if (rc) {
		zr_fd_put(fs, in);
		fuse_reply_err(req, rc == -EBADF ? EROFS : -rc);
		return;
	}
	pthread_rwlock_wrlock(&in->lock);
	/* The kernel keeps the mtime it shows through a punch or a
	 * KEEP_SIZE fallocate (it moves it, and sends it, only for one that
	 * grows the file), and ignores ours while it caches the file: the
	 * backing file, which fallocate(2) moves, gets that time back, else
	 * it read otherwise after a remount (helper-68's fuzzer) */
	touch_data(fs, in, fd, false);
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		rc = punch_range(fs, in, fd, (uint64_t)off, (uint64_t)len);
		data_changed(in);
	} else {
		/* reserve the space on the backing filesystem; the size grows
		 * unless KEEP_SIZE (the backing file never outgrows it) */
		struct stat st;
		bool had = fstat(fd, &st) == 0;

		rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, off, len) < 0 ? -errno : 0;
		if (rc == -EBADF)
			rc = -EROFS;
		if (rc && rc != -EROFS && had)
			give_back(in, fd, &st);
		if (rc == 0 && !(mode & FALLOC_FL_KEEP_SIZE) && end > load_size(in)) {
			/* under the I/O mutex, as truncate: a writeback that
			 * extends the backing file over a zero block past its
			 * end (fstat, then ftruncate) would cut it back */
			if (in->blocks)
				zr_file_io_lock(in->blocks);
			if (ftruncate(fd, (off_t)end) < 0)
				rc = -errno;
			else
				store_size(in, end);
			if (in->blocks)
				zr_file_io_unlock(in->blocks);
		}
	}
	stamp_mtime(fs, in, fd);
	pthread_rwlock_unlock(&in->lock);
	zr_fd_put(fs, in);
	/* the kernel drops its pages of the range after a punch that worked
	 * only; one that failed may have zeroed part of it (no holes), and
	 * the pages read the old data there until evicted. (Dirty pages of a
	 * mapping are written back first, served by the other threads:
	 * single-threaded, that could deadlock) */
	if (rc && (mode & FALLOC_FL_PUNCH_HOLE) && !fs->opt->singlethread &&
	    zr_uring_may_wait())
		(void)inval_inode(fs, ino, off, len);
	fuse_reply_err(req, -rc);
}

/*
 * Whether an invalidation of the kernel's cache waits for the WRITEs of
 * the pages it was writing back. Before Linux 6.16, FUSE copied a page to
 * a temporary one to write it back and ended the page's writeback at once:
 * the invalidation then drops the page while its WRITE may still wait in
 * the kernel's queue, and an lseek answered from our blocks would report a
 * hole over that data (helper-37). There, the kernel answers instead, from
 * its size: all data, no hole. Says so in the log once.
 */
static bool seek_sees_writeback(void)
{
	static int waits = -1;	/* relaxed atomic: -1 not asked yet */
	int w = __atomic_load_n(&waits, __ATOMIC_RELAXED), unknown = -1;

	if (w < 0) {
		w = zr_kernel_at_least(6, 16);
		if (__atomic_compare_exchange_n(&waits, &unknown, w, false, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED) && !w)
			zr_log(ZR_LOG_INFO, "lseek: on this kernel (before 6.16) FUSE ends a page's writeback before zramfs has its data: SEEK_DATA and SEEK_HOLE are left to the kernel, which sees no holes");
	}
	return w > 0;
}

/*
 * SEEK_DATA/SEEK_HOLE: make the kernel write back what it holds, write our
 * dirty blocks back, then ask the backing file (exact holes).
 */
void zr_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		 struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in = zr_inode_from_ino(fs, ino);
	off_t res;
	int fd, rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (zr_is_ctl(ino)) {
		/* (their size is 0: no data, no hole at any offset; @in is
		 * no inode, and reading it crashed the daemon, helper-37) */
		fuse_reply_err(req, ENXIO);
		return;
	}
	if (__atomic_load_n(&in->write_count, __ATOMIC_RELAXED) > 0 ||
	    __atomic_exchange_n(&in->write_refused, false, __ATOMIC_RELAXED)) {
		/*
		 * The kernel may hold dirty pages of this file in its
		 * writeback cache that we have never seen, and it does not
		 * write them back before asking. Invalidating its cache makes
		 * it launder (write back) them first; the WRITEs are served by
		 * the other threads. (Only while a handle open for writing
		 * lasts: the kernel dirties pages only through one, by
		 * write(2) or a shared writable mapping, which keeps its
		 * handle, and writes them all back before it sends that
		 * handle's RELEASE, fuse_release(). Without one it holds
		 * none, and its clean pages stay: a `cp` of a sparse file
		 * asks, and used to read it all through the daemon again.
		 * Or after a WRITE we refused, ENOSPC say: the kernel keeps
		 * its pages, clean, and reads show that data, which we do
		 * not have; the invalidation drops them, so that reads and
		 * the holes reported agree, helper-83.)
		 * Single-threaded, the invalidation would deadlock:
		 * then let the kernel answer from its size (all data); so
		 * would a ring thread whose queue has no other thread free
		 * and cannot grow (zr_uring_may_wait()). So also on a kernel
		 * that copies pages to write them back (seek_sees_writeback()).
		 */
		if (fs->opt->singlethread || !seek_sees_writeback() || !zr_uring_may_wait() ||
		    inval_inode(fs, ino, 0, 0) < 0) {
			fuse_reply_err(req, ENOSYS);
			return;
		}
	}
	/* (the file's stored writeback error stays for its writer's
	 * close() or fsync(): a reader's lseek must not take it) */
	rc = zr_data_writeback_inode(fs, in);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fd = zr_fd_get(fs, in);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	res = lseek(fd, off, whence);
	rc = res < 0 ? errno : 0;
	zr_fd_put(fs, in);
	if (rc)
		fuse_reply_err(req, rc);
	else
		fuse_reply_lseek(req, res);
}

void zr_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out,
			   off_t off_out, struct fuse_file_info *fi_out,
			   size_t len, int flags)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *src = zr_inode_from_ino(fs, ino_in);
	struct zr_inode *dst = zr_inode_from_ino(fs, ino_out);
	size_t chunk = 1024 * 1024, done = 0;
	char *buf;
	ssize_t n = 0;

	if (zr_is_ctl(ino_in) || zr_is_ctl(ino_out) || flags) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	/* the reply's count is 32 bits: a kernel that does not cap @len
	 * itself would see a copy of 4 GiB or more cut modulo 4 GiB (0 for
	 * exactly 4 GiB, taken for the end of the file; helper-40); a
	 * short count makes the caller go on */
	len = ZR_MIN(len, (size_t)(UINT32_MAX & ~(uint32_t)4095));
	buf = zr_session_reply_buf(chunk);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	while (done < len) {
		size_t want = ZR_MIN(chunk, len - done);

		n = data_read(fs, src, buf, want, (uint64_t)off_in + done);
		if (n <= 0)
			break;
		n = data_write(fs, dst, buf, (size_t)n, (uint64_t)off_out + done, false);
		if (n <= 0)
			break;
		done += (size_t)n;
	}
	if (done == 0 && n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, done);
}

/* ---- the writeback thread ---- */

/*
 * System memory pressure (PSI): the "some avg10" share of time in which a
 * task waited for memory, in percent, or -1 when PSI is not available.
 */
static double psi_memory_some(void)
{
	FILE *f = fopen("/proc/pressure/memory", "r");
	double avg10 = -1;

	if (!f)
		return -1;
	if (fscanf(f, "some avg10=%lf", &avg10) != 1)
		avg10 = -1;
	fclose(f);
	return avg10;
}

/*
 * The shrink both memory triggers make: the tier down to @target bytes,
 * by writeback and drops, and the backing filesystem synced after (what
 * was written back is dirty page cache until then, and a memory cgroup
 * full of it meets the OOM killer before reclaim cleans it; @who for the
 * log). On a backing filesystem in RAM (tmpfs, ramfs) a writeback would
 * turn compressed bytes into uncompressed ones that cannot be reclaimed
 * either: there every clean block goes instead, and nothing is written
 * back. Then the pool is compacted: freed blocks leave holes in spans,
 * and whole pages go back to the kernel.
 */
static void shrink_tier(struct zr_fs *fs, uint64_t target, const char *who)
{
	int64_t n;

	if (fs->backing_in_ram) {
		n = (int64_t)zr_store_drop_clean(fs->store);
	} else {
		n = zr_store_reclaim(fs->store, target, UINT64_MAX);
		if (n > 0)
			(void)zr_data_syncfs(fs, who);
	}
	if (n > 0)
		(void)zr_store_compact(fs->store);
}

/*
 * Under memory pressure the tier shrinks toward the disk before the kernel
 * starts evicting the working set of the programs (the zswap lesson): when
 * tasks stall on memory more than ZR_PSI_HIGH percent of the time, give back
 * a quarter of what the tier holds, down to ZR_PSI_FLOOR_PCT of the budget
 * (shrink_tier()). At most once per ZR_PSI_EVERY_MS: avg10 goes on showing
 * the stalls of the last 10 s after a shrink, and a shrink at each turn of
 * the thread took the tier to its floor (helper-53).
 */
#define ZR_PSI_HIGH 10.0
#define ZR_PSI_FLOOR_PCT 10
#define ZR_PSI_EVERY_MS 10000

static void psi_shrink(struct zr_fs *fs)
{
	/* the writeback thread's own: when it last shrank */
	static uint64_t last_ms;
	struct zr_stats s;
	uint64_t target, floor, now;
	double some = psi_memory_some();

	if (some < ZR_PSI_HIGH)
		return;
	now = zr_now_ms();
	if (last_ms && now - last_ms < ZR_PSI_EVERY_MS)
		return;
	zr_store_get_stats(fs->store, &s);
	floor = s.budget / 100 * ZR_PSI_FLOOR_PCT;
	if (s.mem_used_total <= floor)
		return;
	last_ms = now;
	target = ZR_MAX(s.mem_used_total / 4 * 3, floor);
	zr_log(ZR_LOG_INFO, "memory pressure %.1f%%: shrinking the tier to %llu bytes%s",
	       some, (unsigned long long)target,
	       fs->backing_in_ram ? " (clean blocks only: the backing directory is in RAM)" : "");
	shrink_tier(fs, target, "the memory-pressure shrink");
	zr_stat_add(&fs->psi_shrinks, 1);
}

/*
 * Without swap, PSI stays low until the OOM killer is close: anonymous
 * memory (the tier is some) cannot be reclaimed, so tasks hardly stall on
 * it. The second trigger is headroom (zr_mem_headroom): the mark is 1/16
 * of RAM, or of the limit of the memory cgroup with the least headroom,
 * between ZR_LOWMEM_MIN and ZR_LOWMEM_MAX. Under two marks the tier gives
 * back what brings headroom to four marks, down to ZR_PSI_FLOOR_PCT of
 * the budget (shrink_tier()). The thread looks every 100 ms while headroom
 * is under four marks, or would be within a second at the rate it has
 * been falling (otherwise once a second). @return whether the thread
 * should look again soon (above).
 */
#define ZR_LOWMEM_MIN (32ull << 20)
#define ZR_LOWMEM_MAX (1ull << 30)

static bool lowmem_shrink(struct zr_fs *fs)
{
	/* the writeback thread's own: the last log line, the last look */
	static uint64_t last_log_ms, last_headroom, last_ms;
	struct zr_stats s;
	uint64_t headroom, scale, mark, need, target, floor, now, fall;

	if (zr_mem_headroom(&headroom, &scale))
		return false;
	mark = ZR_MIN(ZR_MAX(scale / 16, ZR_LOWMEM_MIN), ZR_LOWMEM_MAX);
	/* at the rate it fell since the last look, would headroom be under
	 * four marks a second from now? then look again soon, not in a
	 * second (a process growing by 80 MB/s in a 512 MiB cgroup crosses
	 * the two marks between two looks a second apart) */
	now = zr_now_ms();
	fall = 0;
	if (last_ms && now > last_ms && last_headroom > headroom)
		fall = (last_headroom - headroom) * 1000 / (now - last_ms);
	last_headroom = headroom;
	last_ms = now;
	if (headroom >= 2 * mark)
		return headroom < 4 * mark + fall;
	zr_store_get_stats(fs->store, &s);
	floor = s.budget / 100 * ZR_PSI_FLOOR_PCT;
	if (s.mem_used_total <= floor)
		return true;
	need = 4 * mark - headroom;
	target = s.mem_used_total > floor + need ? s.mem_used_total - need : floor;
	zr_log(now - last_log_ms >= 10000 ? ZR_LOG_INFO : ZR_LOG_DEBUG,
	       "memory low (%llu MiB left, mark %llu MiB): shrinking the tier to %llu bytes%s",
	       (unsigned long long)(headroom >> 20), (unsigned long long)(mark >> 20),
	       (unsigned long long)target, fs->backing_in_ram ? " (clean blocks only: the backing directory is in RAM)" : "");
	if (now - last_log_ms >= 10000)
		last_log_ms = now;
	shrink_tier(fs, target, "the low-memory shrink");
	zr_stat_add(&fs->lowmem_shrinks, 1);
	return true;
}

/* The writeback thread's forced settle slice, when one is due
 * (settle_overdue()). */
static void settle_forced(struct zr_fs *fs)
{
	struct settle_run r = { .fs = fs };

	if (settle_time(fs) || !settle_overdue(fs))
		return;		/* (in a pause, the fill thread settles) */
	zr_note_ms(&fs->settle_last_ms, zr_now_ms());
	r.until_ms = zr_now_ms() + ZR_SETTLE_SLICE_MS;
	(void)zr_store_settle(fs->store, settle_stop, &r);
}

/*
 * Idle recompression runs while the CPUs have time to spare. Recompressing
 * a kernel tree copied in took the writeback thread 0.8-1.1 CPU-s of the
 * build that followed, time taken from the compilers, which kept both
 * CPUs busy. So while the CPUs the daemon may run on are busy (a look at
 * /proc/stat, at most every ZR_RECOMP_LOOK_MS, finds less than
 * ZR_RECOMP_STOP_PCT of their time idle since the last one, until one
 * finds ZR_RECOMP_RESUME_PCT again), the 5 s pass stops after
 * ZR_RECOMP_BUSY_MS (64 blocks at least) and the slices between passes
 * wait; a full tier (tier_full()) and low memory recompress as before, as
 * RAM is short then. The thread's own time counts as spare up to
 * ZR_RECOMP_CREDIT_PCT (its slices would otherwise stop themselves on one
 * CPU), no more, so that it cannot keep itself going on CPUs that other
 * work needs.
 */
#define ZR_RECOMP_LOOK_MS 500
#define ZR_RECOMP_STOP_PCT 20
#define ZR_RECOMP_RESUME_PCT 30
#define ZR_RECOMP_CREDIT_PCT 10
#define ZR_RECOMP_BUSY_MS 50

/* The writeback thread's look at the CPUs for idle recompression (that
 * thread's own). */
struct recomp_look {
	struct zr_cpu_look cpu;	/* fd -1: the CPUs count as free */
	long hz;		/* /proc/stat's ticks a second */
	uint64_t look_ms;	/* zr_now_ms() of the last look */
	uint64_t idle0, total0;	/* ticks at the last look (total0 0: none) */
	uint64_t own0;		/* the thread's CPU time then (ns) */
	bool busy;		/* the last look's verdict */
};

/* Open what recomp_busy() reads; without it the CPUs always count as
 * free (the log says so). */
static void recomp_look_open(struct recomp_look *l)
{
	cpu_set_t cpus;
	int err;

	memset(l, 0, sizeof(*l));
	l->cpu.fd = -1;
	l->hz = sysconf(_SC_CLK_TCK);
	(void)zr_daemon_cpus(&cpus);
	if (l->hz <= 0)
		zr_log(ZR_LOG_INFO, "idle recompression: no clock tick rate to read /proc/stat with: it runs whatever the CPUs do");
	else if ((err = zr_cpu_look_open(&l->cpu, &cpus)) < 0)
		zr_log(ZR_LOG_INFO, "idle recompression: cannot look at the CPUs' time in /proc/stat (%s): it runs whatever the CPUs do",
		       strerror(-err));
}

/* The calling thread's CPU time (ns); 0 if it cannot be read. */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * Whether the CPUs the daemon may run on are busy for idle recompression:
 * the verdict of a look at most ZR_RECOMP_LOOK_MS old, or of a new one,
 * over the time since the last (see above). The first look, one after no
 * tick went by, and one that cannot read /proc/stat find them free, or
 * keep the last verdict. Called by the writeback thread only.
 */
static bool recomp_busy(struct recomp_look *l)
{
	uint64_t now = zr_now_ms(), idle, total, own, spare, all;

	if (l->cpu.fd < 0 || now - l->look_ms < ZR_RECOMP_LOOK_MS)
		return l->busy;
	l->look_ms = now;
	own = thread_cpu_ns();
	if (zr_cpu_ticks(&l->cpu, &idle, &total) < 0) {
		l->total0 = 0;
		l->busy = false;
		return false;
	}
	if (l->total0 && total > l->total0) {
		all = total - l->total0;
		/* (iowait may go back: clamped) */
		spare = (idle > l->idle0 ? idle - l->idle0 : 0) * 100;
		if (own > l->own0)
			spare += ZR_MIN((own - l->own0) / 1000000u * (uint64_t)l->hz / 1000u * 100,
					ZR_RECOMP_CREDIT_PCT * all);
		l->busy = spare < (l->busy ? ZR_RECOMP_RESUME_PCT : ZR_RECOMP_STOP_PCT) * all;
	}
	l->idle0 = idle;
	l->total0 = total;
	l->own0 = own;
	return l->busy;
}

static void *wb_main(void *arg)
{
	struct zr_fs *fs = arg;
	uint64_t last_sweep = zr_now_ms(), last_expire = 0;
	bool more_fill = false, recomp_fast = false, lowmem = false, busy;
	struct recomp_look look;

	recomp_look_open(&look);
	pthread_mutex_lock(&fs->wb_lock);
	while (!fs->wb_stop) {
		struct timespec ts;
		uint64_t expire = __atomic_load_n(&fs->dirty_expire_ms, __ATOMIC_RELAXED);
		uint64_t scan = ZR_MAX(ZR_MIN(expire / 4, 1000), 50), period = scan;

		if (more_fill || recomp_fast)
			period = 20;	/* copies or recompression left: go on soon */
		else if (lowmem)
			period = ZR_MIN(period, 100);	/* memory is short */

		zr_deadline(&ts, CLOCK_MONOTONIC, period * 1000000ull);
		pthread_cond_timedwait(&fs->wb_cond, &fs->wb_lock, &ts);
		if (fs->wb_stop)
			break;
		pthread_mutex_unlock(&fs->wb_lock);

		/* the scan for expired data: every `scan` ms (or at once
		 * when dirty_expire changed), not at every turn for copies or
		 * recompression */
		if (__atomic_exchange_n(&fs->expire_now, false, __ATOMIC_RELAXED) ||
		    zr_now_ms() - last_expire >= scan) {
			(void)zr_store_writeback_expired(fs->store, expire ? expire : 1);
			last_expire = zr_now_ms();
		}
		/* (a look each turn while slices may run and in the turns
		 * before a pass, so that a pass is judged by the last second
		 * or so, not by the 5 s since the last pass) */
		busy = false;
		if ((recomp_fast || zr_store_recompress_pending(fs->store) ||
		     zr_now_ms() - last_sweep > 3500) && !lowmem && !tier_full(fs))
			busy = recomp_busy(&look);
		settle_forced(fs);
		more_fill = fill_drain(fs, 200);
		psi_shrink(fs);
		lowmem = lowmem_shrink(fs);
		if (zr_store_above_high(fs->store)) {
			struct zr_stats s;

			zr_store_get_stats(fs->store, &s);
			(void)zr_store_reclaim(fs->store,
					       s.budget / 100 * fs->opt->store.low_wm,
					       UINT64_MAX);
		}
		if (zr_now_ms() - last_sweep > 5000) {
			struct zr_stats s;

			zr_fs_sweep(fs);
			/* data untouched since the last pass goes to the
			 * strong codec, for at most 1 s a pass (50 ms while
			 * the CPUs are busy, the tier is not full and memory
			 * is not low: @busy) ... */
			if (busy) {
				zr_stat_add(&fs->recompress_busy, 1);
				(void)zr_store_recompress_idle(fs->store, UINT64_MAX,
							       ZR_RECOMP_BUSY_MS);
			} else {
				(void)zr_store_recompress_idle(fs->store, UINT64_MAX, 1000);
			}
			recomp_fast = zr_store_recompress_pending(fs->store);
			/* churn leaves partly used spans: compact when they
			 * cost more than 5% of the compressed data */
			zr_store_get_stats(fs->store, &s);
			if (s.compr_data_size &&
			    s.mem_used_total - s.meta_bytes > s.compr_data_size / 20 * 21)
				(void)zr_store_compact(fs->store);
			last_sweep = zr_now_ms();
		} else if (!lowmem && zr_store_recompress_pending(fs->store)) {
			bool ran = false;

			/* ... and the rest in slices of 100 ms, 20 ms apart,
			 * while no block is read or written and no request
			 * came for ZR_QUIET_MS (a stream that bypasses the
			 * tier moves no block) and not @busy; otherwise a
			 * look each `scan` ms (a kernel tree copied in: all
			 * cold 9 s after the copy, not 20) */
			if (zr_now_ms() - __atomic_load_n(&fs->req_last_ms, __ATOMIC_RELAXED) >=
			    ZR_QUIET_MS && !busy)
				(void)zr_store_recompress_more(fs->store, 100, &ran);
			recomp_fast = ran && zr_store_recompress_pending(fs->store);
		}
		pthread_mutex_lock(&fs->wb_lock);
	}
	pthread_mutex_unlock(&fs->wb_lock);
	zr_cpu_look_close(&look.cpu);
	return NULL;
}

/** Start the writeback thread. @return 0 or -errno. */
int zr_wb_start(struct zr_fs *fs)
{
	int rc;

	if (!fs->store)
		return 0;
	rc = pthread_create(&fs->wb_thread, NULL, wb_main, fs);
	if (rc)
		return -rc;
	pthread_setname_np(fs->wb_thread, "zramfs-wb");	/* for top -H, ps -L */
	fs->wb_running = true;
	/* without it the kernel keeps refused pages until an lseek */
	pthread_mutex_lock(&fs->ref_lock);
	fs->ref_stop = false;
	fs->ref_running = pthread_create(&fs->ref_thread, NULL, refused_main, fs) == 0;
	pthread_mutex_unlock(&fs->ref_lock);
	if (fs->ref_running)
		pthread_setname_np(fs->ref_thread, "zramfs-refused");
	else
		zr_log(ZR_LOG_WARNING, "cannot start the refusal thread: pages of refused WRITEs stay in the kernel's cache until an lseek");
	/* without them the writeback thread still makes the copies, in pauses */
	while (fs->fill_threads < ZR_FILL_THREADS &&
	       pthread_create(&fs->fill_thread[fs->fill_threads], NULL, fill_main, fs) == 0)
		pthread_setname_np(fs->fill_thread[fs->fill_threads++], "zramfs-fill");
	if (fs->fill_threads < ZR_FILL_THREADS)
		zr_log(ZR_LOG_WARNING, "cannot start a fill thread: %u of %u run",
		       fs->fill_threads, ZR_FILL_THREADS);
	return 0;
}

/** Stop the writeback thread (idempotent). */
void zr_wb_stop(struct zr_fs *fs)
{
	if (!fs->wb_running)
		return;
	/* the fill threads first: they look at fill_stop at every block */
	pthread_mutex_lock(&fs->fill_lock);
	__atomic_store_n(&fs->fill_stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&fs->fill_cond);
	pthread_mutex_unlock(&fs->fill_lock);
	pthread_mutex_lock(&fs->wb_lock);
	fs->wb_stop = true;
	pthread_cond_broadcast(&fs->wb_cond);
	pthread_mutex_unlock(&fs->wb_lock);
	pthread_join(fs->wb_thread, NULL);
	fs->wb_running = false;
	pthread_mutex_lock(&fs->ref_lock);
	fs->ref_stop = true;
	fs->ref_len = 0;
	pthread_cond_broadcast(&fs->ref_cond);
	pthread_mutex_unlock(&fs->ref_lock);
	if (fs->ref_running)
		pthread_join(fs->ref_thread, NULL);
	pthread_mutex_lock(&fs->ref_lock);
	fs->ref_running = false;
	pthread_mutex_unlock(&fs->ref_lock);
	while (fs->fill_threads > 0)
		pthread_join(fs->fill_thread[--fs->fill_threads], NULL);
	fill_discard(fs);
}

// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inode.c - inodes of the backing tree, their names, and the bounded cache
 * of file descriptors.
 *
 * An inode is keyed by its backing identity (st_dev, st_ino), so hard links
 * share one inode and one block cache. The FUSE node id is the address of
 * the struct (the root is FUSE_ROOT_ID). Nothing holds an fd per inode:
 * every inode knows its names (parent inode + name, one per hard link, kept
 * up to date across rename and unlink), and an fd is opened on demand with
 * openat() relative to the parent's fd, one component at a time, so paths
 * of any length work and nothing follows a symlink out of the tree. Opened
 * fds live in an LRU cache of at most max_fds entries; an fd in use is
 * pinned (fd_users) and never closed under its user. An unlinked file that
 * is still open has no name left, so its fd is pinned until the last close.
 *
 * Lock order: see fs.h. References: `refs` counts the kernel's lookups (as
 * one), each child alias, and each internal user; the inode is freed when it
 * drops to zero and it holds no cached data.
 */
#include "config.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

static void inode_free(struct zr_fs *fs, struct zr_inode *ino);
static void lru_unlink(struct zr_fs *fs, struct zr_inode *ino);

/*
 * The largest file the backing filesystem takes (ext4 with 4 KiB blocks:
 * 16 TiB - 4 KiB), so that data past it is refused when written rather than
 * kept in the tier, from where it could never be written back. Found by
 * growing an unnamed temporary file with ftruncate(2), which checks the
 * same limit as write(2): a binary search, no data written.
 * Without O_TMPFILE (vfat, NFS) a named file would do, but vfat has no
 * holes: each step of the search would write zeros up to its size. Its
 * limit, 4 GiB - 1, is known instead (helper-30's review: files past it
 * were taken into the tier, and their writeback failed with EFBIG for
 * ever).
 * @return the size, or UINT64_MAX when there is no limit below the VFS's or
 * it cannot be probed (no O_TMPFILE, a read-only backing directory).
 */
static uint64_t probe_max_file_size(int dirfd)
{
	uint64_t lo = 0, hi = INT64_MAX;	/* lo is taken, hi is refused */
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	struct statfs sfs;

	if (fd < 0) {
		if (fstatfs(dirfd, &sfs) == 0 && (long)sfs.f_type == MSDOS_SUPER_MAGIC)
			return 0xffffffffull;
		return UINT64_MAX;
	}
	if (ftruncate(fd, (off_t)hi) == 0) {
		close(fd);
		return UINT64_MAX;
	}
	while (hi - lo > 1) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (ftruncate(fd, (off_t)mid) == 0) {
			lo = mid;
		} else if (errno == EFBIG || errno == EINVAL) {
			hi = mid;
		} else {
			lo = UINT64_MAX;
			break;
		}
	}
	close(fd);
	return lo;
}

/* ---- file handles (see zr_inode.handle) ---- */

/*
 * A regular file's handle (name_to_handle_at(2)) is taken when its data is
 * first attached, so that writeback still reaches the file when none of its
 * names does: the file or a parent was renamed in the backing directory
 * behind zramfs's back, or removed there, which the handle tells apart
 * (zr_fd_get_by_handle()). Opening by handle needs CAP_DAC_READ_SEARCH and
 * a filesystem whose answers can be trusted: tried once at mount.
 */
union zr_handle_buf {
	struct file_handle fh;
	char space[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

/*
 * Whether the backing filesystem's answers can be trusted: when it says a
 * handle is stale (or the file has no link), the file is gone. On these
 * local filesystems a handle only goes stale when its inode is freed; on
 * NFS a change of the server's exports makes live files stale, and on FUSE
 * any inode the kernel has evicted from its cache is.
 */
static bool handles_trusted(long f_type)
{
	return f_type == EXT4_SUPER_MAGIC || f_type == XFS_SUPER_MAGIC ||
	       f_type == BTRFS_SUPER_MAGIC || f_type == TMPFS_MAGIC;
}

/* Set fs->no_handles unless a regular file of the backing root's
 * filesystem opens O_RDWR by handle (an unnamed O_TMPFILE one). */
static void handles_probe(struct zr_fs *fs)
{
	union zr_handle_buf h;
	struct statfs sfs;
	const char *why = NULL;
	int mnt, fd = -1, hfd = -1;

	fs->no_handles = true;
	fs->links_trusted = fstatfs(fs->root_fd, &sfs) == 0 && handles_trusted((long)sfs.f_type);
	if (!fs->links_trusted) {
		why = "a stale handle may not mean a removed file here";
	} else {
		fd = openat(fs->root_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		h.fh.handle_bytes = MAX_HANDLE_SZ;
		if (fd < 0 || name_to_handle_at(fd, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0 ||
		    (hfd = open_by_handle_at(fs->root_fd, &h.fh, O_RDWR | O_CLOEXEC)) < 0)
			why = strerror(errno);
		if (hfd >= 0)
			close(hfd);
		if (fd >= 0)
			close(fd);
	}
	if (why) {
		zr_log(ZR_LOG_INFO, "files are not opened by handle on this backing filesystem (%s): data of a file renamed in the backing directory behind zramfs's back is kept in RAM, and the final writeback waits for the name",
		       why);
		return;
	}
	fs->no_handles = false;
}

/**
 * zr_inode_take_handle() - record the handle of @ino, a regular file whose
 * backing fd is @fd, unless it has one. Only for the backing root's
 * filesystem (the handle is opened relative to the root's fd). A failure
 * leaves no handle: writeback then knows the file by its names only.
 * Caller holds ino->lock for writing.
 */
void zr_inode_take_handle(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	union zr_handle_buf h;
	struct file_handle *copy;
	size_t len;
	int mnt;

	if (fs->no_handles || ino->handle || ino->key.dev != fs->backing_dev)
		return;
	h.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(fd, "", &h.fh, &mnt, AT_EMPTY_PATH) < 0)
		return;
	len = sizeof(struct file_handle) + h.fh.handle_bytes;
	copy = malloc(len);
	if (!copy)
		return;
	memcpy(copy, &h.fh, len);
	__atomic_store_n(&ino->handle, copy, __ATOMIC_RELEASE);
}

static int fd_cache_install(struct zr_fs *fs, struct zr_inode *ino, int fd);

/* how long an open by handle that says ENOMEM is tried again (from 100 µs
 * apart, doubling), and for how long after that lasted it is not */
#define ZR_HANDLE_BUSY_US 50000
#define ZR_HANDLE_QUIET_MS 1000

/**
 * zr_fd_get_by_handle() - like zr_fd_get(), for when no name of @ino
 * reaches its backing file any more: the fd is opened through the file's
 * handle and cached (pinned until zr_fd_put()). *@gone tells that the
 * backing filesystem says the file no longer exists (its handle is stale,
 * or it has no link left).
 * @return the fd, or -errno (-ENOTSUP: no handle); -ENOENT when *@gone.
 */
int zr_fd_get_by_handle(struct zr_fs *fs, struct zr_inode *ino, bool *gone)
{
	struct file_handle *h = __atomic_load_n(&ino->handle, __ATOMIC_ACQUIRE);
	uint64_t busy = __atomic_load_n(&ino->handle_busy_ms, __ATOMIC_RELAXED);
	bool quiet = busy && zr_now_ms() - busy < ZR_HANDLE_QUIET_MS;
	struct stat st;
	int fd;

	*gone = false;
	if (!h)
		return -ENOTSUP;
	/*
	 * ENOMEM is what ext4 (ext4_iget(), iget_locked()) says while a new
	 * file is being created with the inode number of ours, which was
	 * freed: the number is reused at once, by anyone on that filesystem.
	 * It is over in microseconds, and the handle is then stale (the
	 * generation differs). Asked again for up to ZR_HANDLE_BUSY_US, so
	 * that a removed file is not taken for one we cannot reach for now
	 * (kept dirty, the final writeback retried). A real shortage of
	 * memory still fails, and then the next ZR_HANDLE_QUIET_MS of calls
	 * for this file do not wait: writeback calls once per run of dirty
	 * blocks, holding the file's I/O mutex (and reclaim its lock).
	 */
	for (unsigned waited = 0, wait_us = 100;; waited += wait_us, wait_us *= 2) {
		fd = open_by_handle_at(fs->root_fd, h, O_RDWR | O_CLOEXEC);
		if (fd >= 0 || errno != ENOMEM || quiet)
			break;
		if (waited + wait_us > ZR_HANDLE_BUSY_US) {
			__atomic_store_n(&ino->handle_busy_ms, zr_now_ms(), __ATOMIC_RELAXED);
			errno = ENOMEM;
			break;
		}
		usleep(wait_us);
	}
	if (fd < 0) {
		*gone = errno == ESTALE;
		return *gone ? -ENOENT : -errno;
	}
	if (fstat(fd, &st) < 0 || st.st_ino != ino->key.ino || st.st_dev != ino->key.dev) {
		close(fd);
		return -ESTALE;
	}
	if (st.st_nlink == 0) {
		close(fd);
		*gone = true;
		return -ENOENT;
	}
	zr_stat_add(&fs->fd_opens, 1);
	zr_stat_add(&fs->handle_opens, 1);
	return fd_cache_install(fs, ino, fd);
}

/* ---- the orphan directory (see zr_fs.orphans) ---- */

static int alias_add_locked(struct zr_fs *fs, struct zr_inode *ino,
			    struct zr_inode *parent, const char *name);

#define ZR_ORPHAN_DIR "unlinked"	/* in ZR_CTL_DIRNAME of the backing root */

/* Remove the orphans ("zr-*") in @dfd that a daemon which ended before
 * their last close left behind, or that this one leaves at unmount. */
static void orphans_clean(int dfd)
{
	bool removed = true;

	/* removing while reading may skip names: go again while it removes */
	for (int pass = 0; removed && pass < 8; pass++) {
		int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;

		if (!d) {
			if (fd >= 0)
				close(fd);
			return;
		}
		removed = false;
		while ((de = readdir(d)))
			if (strncmp(de->d_name, "zr-", 3) == 0 &&
			    unlinkat(dfd, de->d_name, 0) == 0)
				removed = true;
		closedir(d);
	}
}

/*
 * Whether the directory @fd (.zramfs, or the orphan directory in it when
 * @inner) is the daemon's own: owned by its user, and nobody else may
 * write in it (nor, for the orphan directory, look in it); one of its own
 * that others may write or read is made so. A backing directory such as
 * /tmp's is writable by every user, who could make .zramfs/unlinked
 * before the daemon does: it would then link files unlinked while open
 * where that user can keep them, read them (when their mode allows it,
 * as files in a 0700 directory often do) or remove them, which drops the
 * data of a file still open (helper-66). @return 0, -EPERM (another
 * user's, or its mode cannot be changed), or -errno of fstat().
 */
static int orphans_owned(int fd, bool inner)
{
	mode_t others = inner ? 077 : 022;
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_uid != geteuid())
		return -EPERM;
	if ((st.st_mode & others) && fchmod(fd, st.st_mode & 07777 & ~others) < 0)
		return -EPERM;
	return 0;
}

/*
 * Open the orphan directory into fs->orphans.fd, emptied of what an earlier
 * daemon left; with @create, make it first. Caller holds orphan_lock, or is
 * zr_fs_init(). @return 0 or -errno (a read-only mount, a backing
 * filesystem that refuses, .zramfs not a directory of ours: -EPERM when it
 * or the orphan directory is another user's, orphans_owned()).
 */
static int orphans_open(struct zr_fs *fs, bool create)
{
	struct stat st;
	int zfd, dfd, rc;

	if (fs->opt->read_only)
		return -EROFS;
	if (create && mkdirat(fs->root_fd, ZR_CTL_DIRNAME, 0700) < 0 && errno != EEXIST)
		return -errno;
	zfd = openat(fs->root_fd, ZR_CTL_DIRNAME,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (zfd < 0)
		return -errno;
	rc = orphans_owned(zfd, false);
	if (rc == 0 && create && mkdirat(zfd, ZR_ORPHAN_DIR, 0700) < 0 && errno != EEXIST)
		rc = -errno;
	if (rc) {
		close(zfd);
		return rc;
	}
	dfd = openat(zfd, ZR_ORPHAN_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	rc = -errno;
	close(zfd);
	if (dfd < 0)
		return rc;
	/* a link cannot cross filesystems */
	rc = fstat(dfd, &st) < 0 ? -errno : st.st_dev != fs->backing_dev ? -EXDEV : 0;
	if (rc == 0)
		rc = orphans_owned(dfd, true);
	if (rc) {
		close(dfd);
		return rc;
	}
	orphans_clean(dfd);
	fs->orphans.key.dev = st.st_dev;
	fs->orphans.key.ino = st.st_ino;
	pthread_mutex_lock(&fs->fd_lock);
	__atomic_store_n(&fs->orphans.fd, dfd, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&fs->fd_lock);
	return 0;
}

/* At unmount: empty the orphan directory and remove it (and .zramfs) when
 * nothing else is there, so that the backing tree is left as it was. */
static void orphans_close(struct zr_fs *fs)
{
	int zfd;

	if (fs->orphans.fd < 0)
		return;
	orphans_clean(fs->orphans.fd);
	close(fs->orphans.fd);
	fs->orphans.fd = -1;
	zfd = openat(fs->root_fd, ZR_CTL_DIRNAME,
		     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (zfd < 0)
		return;
	if (unlinkat(zfd, ZR_ORPHAN_DIR, AT_REMOVEDIR) == 0)
		(void)unlinkat(fs->root_fd, ZR_CTL_DIRNAME, AT_REMOVEDIR);
	close(zfd);
}

/*
 * Make sure the orphan directory is open, making it on first use; a
 * directory that cannot be had (another user's, a read-only or linkless
 * backing filesystem) is not tried again. @return 0 or -errno.
 */
static int orphans_ready(struct zr_fs *fs)
{
	int rc = 0;

	pthread_mutex_lock(&fs->orphan_lock);
	if (fs->orphans.fd < 0 && !fs->no_orphans) {
		rc = orphans_open(fs, true);
		/* out of space, fds or memory may pass; the others stay */
		if (rc == -EPERM) {
			fs->no_orphans = true;
			zr_log(ZR_LOG_WARNING, "%s or %s/%s in the backing directory is another user's, or others may write in it: not used for files unlinked while open, which hold an fd each instead; remove it (after the unmount)",
			       ZR_CTL_DIRNAME, ZR_CTL_DIRNAME, ZR_ORPHAN_DIR);
		} else if (rc && rc != -ENOSPC && rc != -EDQUOT && rc != -EMFILE &&
			   rc != -ENFILE && rc != -ENOMEM) {
			fs->no_orphans = true;
			zr_log(ZR_LOG_INFO, "no orphan directory %s/%s in the backing directory (%s): an unlinked file that is open holds an fd",
			       ZR_CTL_DIRNAME, ZR_ORPHAN_DIR, strerror(-rc));
		}
	}
	if (fs->orphans.fd < 0 && !rc)
		rc = -ENOENT;
	pthread_mutex_unlock(&fs->orphan_lock);
	return rc;
}

/* A new name for inode number @ino in the orphan directory, into @oname. */
static void orphan_name(struct zr_fs *fs, uint64_t ino, char oname[NAME_MAX + 1])
{
	snprintf(oname, NAME_MAX + 1, "zr-%llu-%llu", (unsigned long long)ino,
		 (unsigned long long)__atomic_add_fetch(&fs->orphan_seq, 1, __ATOMIC_RELAXED));
}

/**
 * zr_orphan_link() - give @ino, a regular file whose name (@pfd, @name) is
 * about to go while it is open, a second name in the orphan directory,
 * made on first use. The name goes to @oname. @return 0, or -errno (the
 * directory cannot be made, the backing filesystem has no hard links): the
 * caller then pins the file's fd instead.
 */
int zr_orphan_link(struct zr_fs *fs, struct zr_inode *ino, int pfd, const char *name,
		   char oname[NAME_MAX + 1])
{
	int rc;

	*oname = '\0';
	rc = orphans_ready(fs);
	if (rc)
		return rc;
	orphan_name(fs, ino->key.ino, oname);
	if (linkat(pfd, name, fs->orphans.fd, oname, 0) < 0) {
		rc = -errno;
		*oname = '\0';
		return rc;
	}
	/* the name is known before the user's goes: nothing to fail after */
	rc = zr_alias_add(fs, ino, &fs->orphans, oname);
	if (rc) {
		zr_orphan_unlink(fs, ino, oname);
		*oname = '\0';
	}
	return rc;
}

/**
 * zr_orphan_tmpfile() - give @fd, a file just made with O_TMPFILE (no
 * name, no link), a name in the orphan directory, made on first use: the
 * name zramfs reaches it by, as a file unlinked while open, until its
 * last close or a link(2) that gives it a name of the user's. The name
 * goes to @oname. @return 0, or -errno: out of space, quota, fds or memory
 * as such, any other failure as -EOPNOTSUPP (no orphan directory here, a
 * directory on another filesystem than the backing root, no hard links,
 * no /proc: the caller's O_TMPFILE then fails as on a filesystem without
 * it, which callers such as glibc's tmpfile() know to fall back from).
 */
int zr_orphan_tmpfile(struct zr_fs *fs, int fd, char oname[NAME_MAX + 1])
{
	char path[32];
	struct stat st;
	int rc;

	*oname = '\0';
	rc = orphans_ready(fs);
	if (rc == 0)
		rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (rc == 0) {
		orphan_name(fs, st.st_ino, oname);
		/* (by the fd needs CAP_DAC_READ_SEARCH; through /proc, not) */
		if (linkat(fd, "", fs->orphans.fd, oname, AT_EMPTY_PATH) == 0)
			return 0;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		if (linkat(AT_FDCWD, path, fs->orphans.fd, oname, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		rc = -errno;
		*oname = '\0';
	}
	return rc == -ENOSPC || rc == -EDQUOT || rc == -EMFILE || rc == -ENFILE ||
	       rc == -ENOMEM ? rc : -EOPNOTSUPP;
}

/* Remove @oname from the orphan directory; when unlinkat fails it is
 * logged, and the next mount removes it. */
static void orphan_name_unlink(struct zr_fs *fs, const char *oname)
{
	if (unlinkat(fs->orphans.fd, oname, 0) < 0)
		zr_log(ZR_LOG_WARNING, "cannot remove orphan %s/%s/%s: %s (it goes at the next mount)",
		       ZR_CTL_DIRNAME, ZR_ORPHAN_DIR, oname, strerror(errno));
}

/* Remove @oname from the orphan directory (orphan_name_unlink()) and from
 * @ino's names. @return whether @ino has no name left. */
static bool orphan_name_remove(struct zr_fs *fs, struct zr_inode *ino, const char *oname)
{
	orphan_name_unlink(fs, oname);
	return zr_alias_remove(fs, ino, &fs->orphans, oname);
}

/** zr_orphan_unlink() - undo zr_orphan_link(): the user's name did not go
 * after all. The orphan's name goes from the backing directory and from
 * @ino's names (when unlinkat fails it is logged; the next mount removes it). */
void zr_orphan_unlink(struct zr_fs *fs, struct zr_inode *ino, const char *oname)
{
	(void)orphan_name_remove(fs, ino, oname);
}

/**
 * zr_orphan_linked() - orphaned @ino was just given a name of the user's
 * by a LINK that zramfs made and knows (a file made with O_TMPFILE, then
 * linkat(2)): that name reaches it now, and the orphan's goes, so that the
 * usual create-then-link of a file leaves nothing in the orphan directory
 * (helper-72: each kept its orphan's name until the kernel forgot it, and
 * was written back by age into it once unlinked again). When unlinkat
 * fails it is logged, and the next mount removes the name. Caller holds
 * ino->lock for writing.
 */
void zr_orphan_linked(struct zr_fs *fs, struct zr_inode *ino)
{
	char name[NAME_MAX + 1] = "";
	struct zr_alias *a;
	bool known = false;

	pthread_rwlock_rdlock(&fs->ns_lock);
	if (__atomic_load_n(&ino->orphaned, __ATOMIC_RELAXED))
		for (a = ino->aliases; a; a = a->next) {
			if (a->parent == &fs->orphans)
				snprintf(name, sizeof(name), "%s", a->name);
			else
				known = true;
		}
	pthread_rwlock_unlock(&fs->ns_lock);
	if (!*name || !known)
		return;
	(void)orphan_name_remove(fs, ino, name);
	pthread_rwlock_wrlock(&fs->ns_lock);
	__atomic_store_n(&ino->orphaned, false, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&fs->ns_lock);
	__atomic_sub_fetch(&fs->norphans, 1, __ATOMIC_RELAXED);
}

/**
 * zr_orphan_attach() - the user's last name of @ino went; its name in the
 * orphan directory (from zr_orphan_link()) is now the one it is reached
 * by, and does not count as a link (zr_data_fix_stat()). The file counts
 * as unlinked unless a link to it was made meanwhile, or it has links we
 * never looked up (@linked: its link count was above 1 before the unlink);
 * those are written back as any file's (zr_data_may_expire_cb()).
 * Caller holds ino->lock for writing.
 */
void zr_orphan_attach(struct zr_fs *fs, struct zr_inode *ino, bool linked)
{
	pthread_rwlock_wrlock(&fs->ns_lock);
	__atomic_store_n(&ino->orphaned, true, __ATOMIC_RELAXED);
	ino->unlinked = !linked &&
			(!ino->aliases || (ino->aliases->parent == &fs->orphans &&
					   !ino->aliases->next));
	pthread_rwlock_unlock(&fs->ns_lock);
	__atomic_add_fetch(&fs->norphans, 1, __ATOMIC_RELAXED);
}

/**
 * zr_orphan_remove() - the last close of an orphaned @ino: remove its name
 * in the orphan directory (when unlinkat fails, it is forgotten all the
 * same and logged: the next mount removes it). A file with links we never
 * looked up has its dirty blocks written back first, while the orphan's
 * name still reaches it: they are those links' data. When that fails
 * (a full disk) the orphan stays as it is, its blocks dirty, written back
 * as any file's; its name goes with the inode once they have left the tier
 * (inode_free()), or at the unmount. Caller holds ino->lock for writing.
 * @return whether the file's data stays: it has other names we know (a
 * link made while its last name went), or its writeback failed.
 */
bool zr_orphan_remove(struct zr_fs *fs, struct zr_inode *ino)
{
	char name[NAME_MAX + 1] = "";
	struct zr_alias *a;
	struct stat st;
	bool none, early, linked;
	int rc;

	pthread_rwlock_rdlock(&fs->ns_lock);
	for (a = ino->aliases; a; a = a->next)
		if (a->parent == &fs->orphans)
			snprintf(name, sizeof(name), "%s", a->name);
	pthread_rwlock_unlock(&fs->ns_lock);
	if (!*name)
		return true;	/* cannot be (orphaned goes with the name): keep the data */
	/* (an orphan's name removed behind our back reaches nothing: its
	 * data goes; another error keeps it) */
	if (fstatat(fs->orphans.fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		if (rc != -ENOENT) {
			zr_log(ZR_LOG_WARNING, "inode %llu, unlinked while open, keeps its orphan's name %s/%s/%s and its data: its link count cannot be read (%s)",
			       (unsigned long long)ino->key.ino, ZR_CTL_DIRNAME, ZR_ORPHAN_DIR,
			       name, strerror(-rc));
			return true;
		}
		linked = false;
	} else {
		linked = st.st_nlink > 1;
	}
	if (linked) {
		rc = zr_data_writeback_inode(fs, ino);
		if (rc) {
			zr_log(ZR_LOG_WARNING, "inode %llu, unlinked while open, keeps its orphan's name %s/%s/%s: the data for its other links could not be written back (%s); it is kept, and written back as any file's",
			       (unsigned long long)ino->key.ino, ZR_CTL_DIRNAME, ZR_ORPHAN_DIR,
			       name, strerror(-rc));
			return true;
		}
	}
	/* its last link: the number is free once the name goes */
	early = !linked && zr_alias_is_last(fs, ino, &fs->orphans, name) &&
		zr_inode_removing(fs, ino);
	none = orphan_name_remove(fs, ino, name);
	pthread_rwlock_wrlock(&fs->ns_lock);
	__atomic_store_n(&ino->orphaned, false, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&fs->ns_lock);
	__atomic_sub_fetch(&fs->norphans, 1, __ATOMIC_RELAXED);
	/* (with other links the file stays in the table, findable by their
	 * lookups, as finish_unlink() leaves one: unhashed, a lookup racing
	 * with this one would add a name to an inode on its way out, and
	 * what was written through it would be freed with it; helper-49) */
	if (early)
		zr_inode_removed(fs, ino, none);
	else if (none && !linked)
		zr_inode_unhash(fs, ino);	/* gone from the backing tree */
	return !none;
}

/* Whether orphaned @ino has no link but its orphan's name (caller holds no
 * lock; for zr_fs_drop_orphans(), when no request runs). */
static bool orphan_only(struct zr_fs *fs, struct zr_inode *ino)
{
	const struct zr_alias *a = ino->aliases;
	struct stat st;

	if (!ino->orphaned || !a || a->next || a->parent != &fs->orphans)
		return false;
	return fstatat(fs->orphans.fd, a->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_nlink == 1;
}

/* Whether @ino, a file unlinked while open that kept a pinned fd instead
 * of an orphan's name (none could be made: a full disk, no hard links),
 * has no link left on disk (caller holds no lock; for
 * zr_fs_drop_orphans(), when no request runs). */
static bool pinned_only(struct zr_fs *fs, struct zr_inode *ino)
{
	struct stat st;
	bool r = false;
	int fd;

	if (ino->orphaned || !ino->unlinked || !ino->fd_pinned || !S_ISREG(ino->type))
		return false;
	fd = zr_fd_get_cached(fs, ino);
	if (fd < 0)
		return false;
	r = fstat(fd, &st) == 0 && st.st_nlink == 0;
	zr_fd_put(fs, ino);
	return r;
}

/**
 * zr_fs_drop_orphans() - the session is over (no request runs any more):
 * files still orphaned, or unlinked and kept by a pinned fd, were open
 * when the connection ended. Nobody can reach them again, so their dirty
 * blocks are dropped rather than written into names that the unmount
 * removes or into no name at all (and kept waiting for room on a full
 * disk, before the files that matter; helper-38's review for the pinned
 * ones). A file linked elsewhere meanwhile keeps them.
 */
void zr_fs_drop_orphans(struct zr_fs *fs)
{
	struct zr_inode *ino, *tmp, **v;
	size_t n = 0, cap;

	pthread_mutex_lock(&fs->itable_lock);
	/* (counted first: a table of every inode could be large) */
	cap = 0;
	HASH_ITER(hh, fs->inodes, ino, tmp)
		cap += ino->orphaned || ino->fd_pinned;
	HASH_ITER(hh, fs->dead, ino, tmp)
		cap += ino->orphaned || ino->fd_pinned;
	v = cap ? calloc(cap, sizeof(*v)) : NULL;
	if (v) {
		HASH_ITER(hh, fs->inodes, ino, tmp)
			if ((ino->orphaned || ino->fd_pinned) && n < cap) {
				ino->refs++;
				v[n++] = ino;
			}
		HASH_ITER(hh, fs->dead, ino, tmp)
			if ((ino->orphaned || ino->fd_pinned) && n < cap) {
				ino->refs++;
				v[n++] = ino;
			}
	}
	pthread_mutex_unlock(&fs->itable_lock);
	for (size_t i = 0; i < n; i++) {
		pthread_rwlock_wrlock(&v[i]->lock);
		if (orphan_only(fs, v[i]) || pinned_only(fs, v[i]))
			zr_data_drop_inode(fs, v[i]);
		pthread_rwlock_unlock(&v[i]->lock);
		zr_inode_unref(fs, v[i]);
	}
	free(v);
}

/** Whether the kernel holds a lookup of @ino (it may still open it). */
bool zr_inode_looked_up(struct zr_fs *fs, struct zr_inode *ino)
{
	bool r;

	pthread_mutex_lock(&fs->itable_lock);
	r = ino->nlookup > 0;
	pthread_mutex_unlock(&fs->itable_lock);
	return r;
}

/**
 * zr_orphan_reap() - an orphaned @ino whose last handle closed, or that the
 * kernel forgot: once both are true nothing can reach it again, so its
 * orphan's name goes, and its data unless it was linked again meanwhile.
 * Takes ino->lock.
 */
void zr_orphan_reap(struct zr_fs *fs, struct zr_inode *ino)
{
	pthread_rwlock_wrlock(&ino->lock);
	if (ino->orphaned && ino->open_count == 0 && !zr_inode_looked_up(fs, ino) &&
	    !zr_orphan_remove(fs, ino))
		zr_data_drop_inode(fs, ino);
	pthread_rwlock_unlock(&ino->lock);
}

/**
 * zr_dir_unpin() - a removed directory whose fd prepare_unlink() pinned
 * lost a holder (its last RELEASEDIR, or the kernel's FORGET): once it has
 * neither, nothing reaches it again and the pin goes. Takes ino->lock.
 */
void zr_dir_unpin(struct zr_fs *fs, struct zr_inode *ino)
{
	bool unpin;

	pthread_rwlock_wrlock(&ino->lock);
	unpin = ino->fd_pinned && ino->open_count == 0 && !zr_inode_looked_up(fs, ino);
	if (unpin)
		ino->fd_pinned = false;
	pthread_rwlock_unlock(&ino->lock);
	if (unpin) {
		__atomic_sub_fetch(&fs->dir_pins, 1, __ATOMIC_RELAXED);
		zr_fd_unpin(fs, ino);
	}
}

int zr_fs_init(struct zr_fs *fs, struct zr_options *opt, int root_fd)
{
	struct statfs sfs;
	struct stat st;

	memset(fs, 0, sizeof(*fs));
	fs->opt = opt;
	fs->root_fd = root_fd;
	fs->root_mnt_id = zr_data_mount_id(root_fd);
	if (fstat(root_fd, &st) < 0)
		return -errno;
	fs->backing_dev = st.st_dev;
	/* a backing filesystem without xattrs: getxattr always asks it */
	if (fgetxattr(root_fd, ZR_XATTR_CAPS, NULL, 0) < 0 && errno == ENOTSUP)
		fs->xattr_enotsup = true;
	fs->max_file_size = probe_max_file_size(root_fd);
	if (fstatfs(root_fd, &sfs) == 0)
		fs->backing_in_ram = sfs.f_type == TMPFS_MAGIC || sfs.f_type == RAMFS_MAGIC;
	pthread_mutex_init(&fs->itable_lock, NULL);
	pthread_rwlock_init(&fs->ns_lock, NULL);
	pthread_mutex_init(&fs->rename_lock, NULL);
	pthread_cond_init(&fs->rename_cond, NULL);
	pthread_mutex_init(&fs->attr_lock, NULL);
	for (unsigned i = 0; i < ZR_STAMP_LOCKS; i++)
		pthread_mutex_init(&fs->stamp_locks[i], NULL);
	pthread_mutex_init(&fs->mode_lock, NULL);
	pthread_mutex_init(&fs->sync_lock, NULL);
	pthread_mutex_init(&fs->subfs_lock, NULL);
	pthread_mutex_init(&fs->fd_lock, NULL);
	pthread_mutex_init(&fs->dirh_lock, NULL);
	pthread_mutex_init(&fs->wb_lock, NULL);
	pthread_mutex_init(&fs->fill_lock, NULL);
	/* (timed waits: on CLOCK_MONOTONIC, so that a step of the system
	 * clock backwards does not hold the writeback for as long; helper-88) */
	zr_cond_init_monotonic(&fs->fill_cond);
	zr_cond_init_monotonic(&fs->wb_cond);
	pthread_mutex_init(&fs->ref_lock, NULL);
	pthread_cond_init(&fs->ref_cond, NULL);
	fs->root.key.dev = st.st_dev;
	fs->root.key.ino = st.st_ino;
	fs->root.type = S_IFDIR;
	fs->root.refs = 1;
	fs->root.nlookup = 1;
	fs->root.fd = root_fd;
	fs->root.fd_flags = O_RDONLY;
	fs->root.pins = 1;
	pthread_rwlock_init(&fs->root.lock, NULL);
	fs->orphans.type = S_IFDIR;
	fs->orphans.refs = 1;
	fs->orphans.fd = -1;
	fs->orphans.fd_flags = O_RDONLY;
	fs->orphans.pins = 1;
	pthread_rwlock_init(&fs->orphans.lock, NULL);
	pthread_mutex_init(&fs->orphan_lock, NULL);
	orphans_open(fs, false);
	fs->no_handles = true;	/* (nothing to write back) */
	if (!opt->read_only && opt->cache != ZR_CACHE_NONE)
		handles_probe(fs);
	fs->dirty_expire_ms = opt->dirty_expire_ms;
	fs->timeout_s = 86400;
	return 0;
}

void zr_fs_destroy(struct zr_fs *fs)
{
	struct zr_inode *ino, *tmp;

	/* Unmount: the kernel may not forget everything; free what is left.
	 * Names first (they reference parents), then the inodes. */
	HASH_ITER(hh, fs->inodes, ino, tmp) {
		struct zr_alias *a, *next;

		for (a = ino->aliases; a; a = next) {
			next = a->next;
			free(a);
		}
		ino->aliases = NULL;
	}
	HASH_ITER(hh, fs->dead, ino, tmp) {
		struct zr_alias *a, *next;

		for (a = ino->aliases; a; a = next) {
			next = a->next;
			free(a);
		}
		ino->aliases = NULL;
	}
	HASH_ITER(hh, fs->inodes, ino, tmp) {
		HASH_DEL(fs->inodes, ino);
		inode_free(fs, ino);
	}
	HASH_ITER(hh, fs->dead, ino, tmp) {
		HASH_DEL(fs->dead, ino);
		inode_free(fs, ino);
	}
	orphans_close(fs);
	for (unsigned i = 0; i < fs->n_subfs; i++)
		close(fs->subfs[i].fd);
	fs->n_subfs = 0;
}

struct zr_inode *zr_inode_from_ino(struct zr_fs *fs, fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return &fs->root;
	return (struct zr_inode *)(uintptr_t)ino;
}

void zr_inode_ref(struct zr_fs *fs, struct zr_inode *ino)
{
	pthread_mutex_lock(&fs->itable_lock);
	ino->refs++;
	pthread_mutex_unlock(&fs->itable_lock);
}

/*
 * Free the names, fd and blocks of an inode no longer in the table. Its
 * blocks go, dirty ones included: an inode freed with dirty blocks is
 * mostly one whose file left the backing tree (unhashed), where they have
 * no home; any other is logged. The store may still hold the file (a
 * writeback of every file, the expiry walk, reclaim): zr_file_detach()
 * waits for a writeback of it in flight, so that none uses @ino once it is
 * freed. Caller holds no lock a writeback callback takes (fd_lock,
 * ns_lock, attr_lock, itable_lock).
 */
static void inode_free(struct zr_fs *fs, struct zr_inode *ino)
{
	struct zr_alias *a, *next;

	if (ino->blocks) {
		if (!ino->unhashed && zr_file_dirty(ino->blocks))
			zr_log(ZR_LOG_WARNING, "inode %llu is freed with data not written back (%llu blocks in the tier)",
			       (unsigned long long)ino->key.ino,
			       (unsigned long long)zr_file_nblocks(ino->blocks));
		zr_file_detach(ino->blocks);
	}
	/* an orphan kept when its removal could not write its data back
	 * (zr_orphan_remove()), whose blocks left the tier since, written
	 * back: its name goes now, and it stops counting (helper-49) */
	if (ino->orphaned) {
		for (a = ino->aliases; a; a = a->next)
			if (a->parent == &fs->orphans)
				orphan_name_unlink(fs, a->name);
		__atomic_sub_fetch(&fs->norphans, 1, __ATOMIC_RELAXED);
	}
	for (a = ino->aliases; a; a = next) {
		next = a->next;
		if (a->parent)
			zr_inode_unref(fs, a->parent);
		free(a);
	}
	ino->aliases = NULL;
	/* a pin kept by a failed writeback at the last close
	 * (release_pinned()) goes with the inode */
	if (ino->fd_pinned)
		__atomic_sub_fetch(S_ISDIR(ino->type) ? &fs->dir_pins : &fs->file_pins, 1,
				   __ATOMIC_RELAXED);
	pthread_mutex_lock(&fs->fd_lock);
	if (ino->fd >= 0) {
		assert(ino->fd_users == 0);
		lru_unlink(fs, ino);
		close(ino->fd);
		ino->fd = -1;
		fs->nfds--;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	if (ino->blocks)
		zr_file_put(ino->blocks);
	free(ino->gone_st);
	free(ino->handle);
	pthread_rwlock_destroy(&ino->lock);
	free(ino);
}

/*
 * Whether an inode without references must stay: one with blocks in the
 * store (dirty ones not yet written back, or clean ones worth keeping after
 * the kernel forgot the inode, e.g. after drop_caches) stays in the table,
 * findable by the next lookup, until the policy has demoted its blocks and
 * the sweep frees it. Caller holds itable_lock.
 */
static bool inode_keep(struct zr_inode *ino)
{
	return !ino->unhashed && ino->blocks && zr_file_nblocks(ino->blocks) > 0;
}

/* Put @ino on the list of inodes kept for their blocks (zr_fs_sweep());
 * caller holds itable_lock. */
static void kept_add(struct zr_fs *fs, struct zr_inode *ino)
{
	if (ino->kept)
		return;
	ino->kept_prev = NULL;
	ino->kept_next = fs->kept;
	if (fs->kept)
		fs->kept->kept_prev = ino;
	fs->kept = ino;
	ino->kept = true;
}

/* Take @ino off that list; caller holds itable_lock. */
static void kept_del(struct zr_fs *fs, struct zr_inode *ino)
{
	if (!ino->kept)
		return;
	if (ino->kept_prev)
		ino->kept_prev->kept_next = ino->kept_next;
	else
		fs->kept = ino->kept_next;
	if (ino->kept_next)
		ino->kept_next->kept_prev = ino->kept_prev;
	ino->kept_prev = ino->kept_next = NULL;
	ino->kept = false;
}

/* zr_inode_unhash() with itable_lock held. */
static bool unhash_locked(struct zr_fs *fs, struct zr_inode *ino)
{
	if (ino->unhashed)
		return false;
	HASH_DEL(fs->inodes, ino);
	HASH_ADD(hh, fs->dead, key, sizeof(ino->key), ino);
	ino->unhashed = true;
	return true;
}

/**
 * zr_inode_unhash() - @ino leaves the backing tree (its last link goes):
 * take it out of the table so that a new file that reuses its st_ino gets a
 * fresh inode; it lives on, unhashed, while referenced.
 * @return whether it was in the table (false: it was taken out before, or
 * is the root or the orphan directory, which stay).
 */
bool zr_inode_unhash(struct zr_fs *fs, struct zr_inode *ino)
{
	bool done;

	if (ino == &fs->root || ino == &fs->orphans)
		return false;
	pthread_mutex_lock(&fs->itable_lock);
	done = unhash_locked(fs, ino);
	pthread_mutex_unlock(&fs->itable_lock);
	return done;
}

/**
 * zr_inode_removing() - a backing call that may free @ino's inode number is
 * about to be made: the unlink or rename of its last name, the removal of
 * its orphan's name. The caller holds ino->lock for writing until
 * zr_inode_removed(). @ino leaves the table now, not after the call: ext4
 * gives a freed number at once to the next new file, in any directory
 * (which the kernel does not hold locked), and that file's lookup must not
 * find @ino. Until zr_inode_removed(), a lookup of the number waits for
 * ino->lock (zr_inode_lookup()), then finds @ino back in the table if the
 * call failed (a LOOKUP that revalidates the name takes no directory lock),
 * else makes a fresh inode.
 * @return whether @ino was in the table (false: the root, the orphan
 * directory, or unhashed before); only then must zr_inode_removed() follow.
 */
bool zr_inode_removing(struct zr_fs *fs, struct zr_inode *ino)
{
	bool done;

	if (ino == &fs->root || ino == &fs->orphans)
		return false;
	pthread_mutex_lock(&fs->itable_lock);
	done = unhash_locked(fs, ino);
	if (done) {
		ino->removing_next = fs->removing;
		fs->removing = ino;
	}
	pthread_mutex_unlock(&fs->itable_lock);
	return done;
}

/**
 * zr_inode_removed() - the call that zr_inode_removing() announced is done;
 * @gone: the file left the backing tree. If it did not, @ino goes back into
 * the table. (Nothing else can have taken its key meanwhile: lookups of it
 * waited. Should something have, @ino stays out and lives on while
 * referenced, as an unlinked file does; that is logged.)
 */
void zr_inode_removed(struct zr_fs *fs, struct zr_inode *ino, bool gone)
{
	struct zr_inode **pp, *other = NULL;

	pthread_mutex_lock(&fs->itable_lock);
	for (pp = &fs->removing; *pp; pp = &(*pp)->removing_next) {
		if (*pp == ino) {
			*pp = ino->removing_next;
			break;
		}
	}
	ino->removing_next = NULL;
	if (!gone && ino->unhashed) {
		HASH_FIND(hh, fs->inodes, &ino->key, sizeof(ino->key), other);
		if (!other) {
			HASH_DEL(fs->dead, ino);
			HASH_ADD(hh, fs->inodes, key, sizeof(ino->key), ino);
			ino->unhashed = false;
		}
	}
	pthread_mutex_unlock(&fs->itable_lock);
	if (other)
		zr_log(ZR_LOG_WARNING, "inode %llu: its removal failed, and another inode took its number meanwhile",
		       (unsigned long long)ino->key.ino);
}

/* The inode unhashed for a removal in flight whose key is @key, or NULL.
 * Caller holds itable_lock. */
static struct zr_inode *removing_find(struct zr_fs *fs, const struct zr_inode_key *key)
{
	struct zr_inode *ino;

	for (ino = fs->removing; ino; ino = ino->removing_next)
		if (memcmp(&ino->key, key, sizeof(*key)) == 0)
			return ino;
	return NULL;
}

void zr_inode_unref(struct zr_fs *fs, struct zr_inode *ino)
{
	bool do_free = false;

	if (ino == &fs->root || ino == &fs->orphans)
		return;
	pthread_mutex_lock(&fs->itable_lock);
	assert(ino->refs > 0);
	if (--ino->refs == 0 && !inode_keep(ino)) {
		if (ino->unhashed)
			HASH_DEL(fs->dead, ino);
		else
			HASH_DEL(fs->inodes, ino);
		kept_del(fs, ino);
		do_free = true;
	} else if (ino->refs == 0) {
		kept_add(fs, ino);	/* for the sweep, once its blocks leave */
	}
	pthread_mutex_unlock(&fs->itable_lock);
	if (do_free)
		inode_free(fs, ino);
}

/**
 * zr_alias_new() - a name, @name, for zr_alias_rename(), made before the
 * backing call so that nothing can fail after it. @return it, or NULL (out
 * of memory); one not given to zr_alias_rename() goes with free().
 */
struct zr_alias *zr_alias_new(const char *name)
{
	size_t len = strlen(name);
	struct zr_alias *a = malloc(sizeof(*a) + len + 1);

	if (a) {
		memcpy(a->name, name, len + 1);
		a->parent = NULL;
		a->next = NULL;
	}
	return a;
}

/* Whether (@parent, @name) is one of @ino's names. Caller holds ns_lock. */
static bool alias_has(const struct zr_inode *ino, const struct zr_inode *parent,
		      const char *name)
{
	for (const struct zr_alias *a = ino->aliases; a; a = a->next)
		if (a->parent == parent && strcmp(a->name, name) == 0)
			return true;
	return false;
}

/* Add @a, from zr_alias_new(), as a name of @ino in @parent, which is not
 * one of its names yet. Caller holds ns_lock for writing. */
static void alias_insert_locked(struct zr_fs *fs, struct zr_inode *ino,
				struct zr_inode *parent, struct zr_alias *a)
{
	a->parent = parent;
	zr_inode_ref(fs, parent);
	if (S_ISDIR(ino->type) && ino->aliases) {
		/* a directory has one name: replace the stale one */
		struct zr_alias *old = ino->aliases;

		a->next = old->next;
		ino->aliases = a;
		zr_inode_unref(fs, old->parent);
		free(old);
	} else {
		a->next = ino->aliases;
		ino->aliases = a;
	}
	ino->unlinked = false;
}

/* Caller holds ns_lock for writing. @return 0 or -ENOMEM. */
static int alias_add_locked(struct zr_fs *fs, struct zr_inode *ino,
			    struct zr_inode *parent, const char *name)
{
	struct zr_alias *a;

	if (alias_has(ino, parent, name))
		return 0;
	a = zr_alias_new(name);
	if (!a)
		return -ENOMEM;
	alias_insert_locked(fs, ino, parent, a);
	return 0;
}

int zr_alias_add(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *parent,
		 const char *name)
{
	int rc;

	if (ino == &fs->root)
		return 0;
	pthread_rwlock_wrlock(&fs->ns_lock);
	rc = alias_add_locked(fs, ino, parent, name);
	pthread_rwlock_unlock(&fs->ns_lock);
	return rc;
}

/* Whether (@dirfd, @name), not followed, is the file @key names now. */
bool zr_name_reaches(int dirfd, const char *name, const struct zr_inode_key *key)
{
	struct stat st;

	return fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       st.st_dev == key->dev && st.st_ino == key->ino;
}

/*
 * zr_alias_add() for a lookup of (@pfd, @name), whose stat found @ino: a
 * name @ino has not got yet, while it has others, is checked to still
 * reach it, under ns_lock. The kernel revalidates a cached name without
 * the directory's lock, so the stat may be older than a rename of the
 * file that another thread made meanwhile; the name it found is stale,
 * and for a directory it would replace the one name the rename gave it
 * (helper-63). A rename changes our names under ns_lock after the backing
 * rename: so either the check sees the name gone, or the rename moves the
 * name after us. @return 0, -EAGAIN (the name no longer reaches @ino: stat
 * it again) or -ENOMEM.
 */
static int alias_add_looked_up(struct zr_fs *fs, struct zr_inode *ino,
			       struct zr_inode *parent, int pfd, const char *name)
{
	int rc = 0;

	if (ino == &fs->root)
		return 0;
	pthread_rwlock_wrlock(&fs->ns_lock);
	if (pfd >= 0 && ino->aliases && !alias_has(ino, parent, name) &&
	    !zr_name_reaches(pfd, name, &ino->key))
		rc = -EAGAIN;
	if (rc == 0)
		rc = alias_add_locked(fs, ino, parent, name);
	pthread_rwlock_unlock(&fs->ns_lock);
	return rc;
}

/* Remove (parent, name) from the names of @ino. @return whether no name is left. */
bool zr_alias_remove(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *parent,
		     const char *name)
{
	struct zr_alias **pp, *a, *gone = NULL;
	bool none;

	pthread_rwlock_wrlock(&fs->ns_lock);
	for (pp = &ino->aliases; (a = *pp); pp = &a->next) {
		if (a->parent == parent && strcmp(a->name, name) == 0) {
			*pp = a->next;
			gone = a;
			break;
		}
	}
	none = ino->aliases == NULL;
	if (none)
		ino->unlinked = true;
	pthread_rwlock_unlock(&fs->ns_lock);
	if (gone) {
		zr_inode_unref(fs, gone->parent);
		free(gone);
	}
	return none;
}

/* Whether (@parent, @name) is the only name of @ino we know of (or none is). */
bool zr_alias_is_last(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *parent,
		      const char *name)
{
	const struct zr_alias *a;
	bool last;

	pthread_rwlock_rdlock(&fs->ns_lock);
	a = ino->aliases;
	last = !a || (!a->next && a->parent == parent && strcmp(a->name, name) == 0);
	pthread_rwlock_unlock(&fs->ns_lock);
	return last;
}

/**
 * zr_alias_rename() - @ino's name (@oldp, @oldname) is now (@newp,
 * @fresh->name): @fresh, from zr_alias_new(), is taken (added, or freed
 * when @ino has that name already). Cannot fail.
 */
void zr_alias_rename(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode *oldp,
		     const char *oldname, struct zr_inode *newp, struct zr_alias *fresh)
{
	struct zr_alias **pp, *a, *old = NULL;

	pthread_rwlock_wrlock(&fs->ns_lock);
	for (pp = &ino->aliases; (a = *pp); pp = &a->next) {
		if (a->parent == oldp && strcmp(a->name, oldname) == 0) {
			*pp = a->next;
			old = a;
			break;
		}
	}
	if (alias_has(ino, newp, fresh->name))
		free(fresh);
	else
		alias_insert_locked(fs, ino, newp, fresh);
	pthread_rwlock_unlock(&fs->ns_lock);
	if (old) {
		zr_inode_unref(fs, old->parent);
		free(old);
	}
}

/*
 * Renames in flight. A rename of ours changes the backing names first
 * (renameat2()), then its record of them (zr_alias_rename(), under
 * ns_lock): in between, a name of the inode reaches another file, or
 * nothing, and a reader of it must not take that for the file gone or
 * replaced behind our back, however long the rename's thread is held up
 * (a fixed number of tries failed GETATTR with ESTALE under CPU load:
 * rename_estale.sh). So each rename counts its begin on the inodes it
 * moves before the backing call and its end after their names are
 * changed (zr_inode.rename_begun, rename_ended). A reader takes
 * zr_rename_mark() before it reads a name; when the name disappoints it,
 * zr_rename_wait() tells whether a rename of that inode began since the
 * mark (or was in flight at it): if none did, the names it read were
 * the inode's and the answer stands; else it waits for one to end and
 * the reader reads the names again. The common path (the name reaches
 * the file) costs one atomic load; a rename two atomic increments per
 * inode, and a lock only when someone waits.
 */

/** zr_rename_mark() - the renames of @ino that ended, before a name of it
 * is read (see zr_rename_wait()). */
unsigned zr_rename_mark(struct zr_inode *ino)
{
	return __atomic_load_n(&ino->rename_ended, __ATOMIC_SEQ_CST);
}

/** zr_rename_begin() - a rename of @ino begins: before its backing call,
 * followed by zr_rename_end() whatever happens. */
void zr_rename_begin(struct zr_inode *ino)
{
	__atomic_add_fetch(&ino->rename_begun, 1, __ATOMIC_SEQ_CST);
}

/** zr_rename_end() - a rename of @ino ended: after its names were changed
 * (or the backing call failed). Wakes the threads in zr_rename_wait(). */
void zr_rename_end(struct zr_fs *fs, struct zr_inode *ino)
{
	__atomic_add_fetch(&ino->rename_ended, 1, __ATOMIC_SEQ_CST);
	/* (seq_cst both: either the waiter sees the end, or this sees it) */
	if (__atomic_load_n(&fs->rename_waiters, __ATOMIC_SEQ_CST) == 0)
		return;
	pthread_mutex_lock(&fs->rename_lock);
	pthread_cond_broadcast(&fs->rename_cond);
	pthread_mutex_unlock(&fs->rename_lock);
}

/**
 * zr_rename_wait() - a name of @ino, read after zr_rename_mark() gave
 * @mark, reached another file or nothing: whether a rename of ours may be
 * why. When one began since @mark (or was in flight then), wait until one
 * ends. The caller holds no lock and no pinned fd: a rename may need
 * them before its end.
 * @return true: read the names again; false: no rename of @ino ran since
 * the mark, the name was one of its names then, so what it reached
 * stands (removed or replaced behind our back).
 */
bool zr_rename_wait(struct zr_fs *fs, struct zr_inode *ino, unsigned mark)
{
	/* begun >= ended >= mark: equal means that none began since the
	 * mark, and none was in flight at it */
	if (__atomic_load_n(&ino->rename_begun, __ATOMIC_SEQ_CST) == mark)
		return false;
	__atomic_add_fetch(&fs->rename_waiters, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&fs->rename_lock);
	while (__atomic_load_n(&ino->rename_ended, __ATOMIC_SEQ_CST) == mark)
		pthread_cond_wait(&fs->rename_cond, &fs->rename_lock);
	pthread_mutex_unlock(&fs->rename_lock);
	__atomic_sub_fetch(&fs->rename_waiters, 1, __ATOMIC_SEQ_CST);
	return true;
}

/**
 * zr_inode_lookup() - the inode of the backing file that @st describes,
 * found in the table or made, with a lookup reference (and name (@parent,
 * @name) when @parent is not NULL; @pfd: @parent's fd, or -1). A lookup of
 * the number of a file whose removal is in flight (zr_inode_removing())
 * waits for the removal's lock to be dropped: the caller must hold no
 * inode's lock. @confirmed: @st was taken again after this returned
 * -ESTALE for it.
 * @return 0, -EAGAIN after such a wait (stat the name again and retry:
 * the file may be gone and its number a new file's) or when the name no
 * longer reaches the file (alias_add_looked_up()), -ESTALE when the
 * table holds another kind of file under @st's number and @st is not
 * @confirmed (stat the name again and retry, @confirmed), or -ENOMEM.
 */
int zr_inode_lookup(struct zr_fs *fs, struct zr_inode *parent, int pfd, const char *name,
		    const struct stat *st, bool confirmed, struct zr_inode **out)
{
	struct zr_inode_key key = { .dev = st->st_dev, .ino = st->st_ino };
	struct zr_inode *ino, *fresh = NULL, *busy;
	int rc;

	if (key.dev == fs->root.key.dev && key.ino == fs->root.key.ino) {
		*out = &fs->root;
		return 0;
	}
	for (;;) {
		pthread_mutex_lock(&fs->itable_lock);
		HASH_FIND(hh, fs->inodes, &key, sizeof(key), ino);
		if (ino && ino->type != (st->st_mode & S_IFMT)) {
			/* its number now another kind of file's: it was
			 * removed behind our back (as zr_inode_unhash()).
			 * Or @st is stale: the kernel revalidates a cached
			 * name without the directory's lock, so its LOOKUP
			 * may race with a removal of that name and a create
			 * that got the number, and unhashing the new file
			 * would lose its dirty blocks at its forget
			 * (helper-63). The caller stats the name again */
			if (!confirmed) {
				pthread_mutex_unlock(&fs->itable_lock);
				rc = -ESTALE;
				goto out;
			}
			zr_log(ZR_LOG_DEBUG, "inode %llu: a %o now, was a %o: removed behind zramfs's back",
			       (unsigned long long)key.ino, (unsigned)(st->st_mode & S_IFMT),
			       (unsigned)ino->type);
			unhash_locked(fs, ino);
			ino = NULL;
		}
		if (!ino && (busy = removing_find(fs, &key))) {
			/* its removal holds its lock: wait for it, and have
			 * the caller stat the name again (the file @st is of
			 * may be gone, and its number a new file's) */
			int rc2;

			busy->refs++;
			pthread_mutex_unlock(&fs->itable_lock);
			rc2 = pthread_rwlock_rdlock(&busy->lock);
			assert(rc2 == 0);	/* (not the remover's own thread) */
			if (rc2 == 0)
				pthread_rwlock_unlock(&busy->lock);
			zr_inode_unref(fs, busy);
			rc = -EAGAIN;
			goto out;
		}
		if (!ino && fresh) {
			ino = fresh;
			fresh = NULL;
			HASH_ADD(hh, fs->inodes, key, sizeof(ino->key), ino);
		}
		if (ino) {
			ino->refs++;
			ino->nlookup++;
			pthread_mutex_unlock(&fs->itable_lock);
			break;
		}
		pthread_mutex_unlock(&fs->itable_lock);
		fresh = calloc(1, sizeof(*fresh));
		if (!fresh)
			return -ENOMEM;
		fresh->key = key;
		fresh->type = st->st_mode & S_IFMT;
		fresh->fd = -1;
		pthread_rwlock_init(&fresh->lock, NULL);
	}
	rc = 0;
out:
	if (fresh) {
		pthread_rwlock_destroy(&fresh->lock);
		free(fresh);
	}
	if (rc)
		return rc;
	if (parent) {
		rc = alias_add_looked_up(fs, ino, parent, pfd, name);
		if (rc) {
			zr_inode_forget(fs, ino, 1);
			return rc;
		}
	}
	*out = ino;
	return 0;
}

void zr_inode_forget(struct zr_fs *fs, struct zr_inode *ino, uint64_t n)
{
	bool forgotten;

	if (ino == &fs->root)
		return;
	pthread_mutex_lock(&fs->itable_lock);
	assert(ino->nlookup >= n);
	ino->nlookup -= n;
	forgotten = ino->nlookup == 0;
	/* every lookup also took a reference (one is kept until below) */
	assert(ino->refs >= n);
	ino->refs -= n - 1;
	pthread_mutex_unlock(&fs->itable_lock);
	if (forgotten && __atomic_load_n(&ino->orphaned, __ATOMIC_RELAXED))
		zr_orphan_reap(fs, ino);
	/* (fd_pinned read without the lock: only a pinned one needs it) */
	if (forgotten && S_ISDIR(ino->type) && __atomic_load_n(&ino->fd_pinned, __ATOMIC_RELAXED))
		zr_dir_unpin(fs, ino);
	zr_inode_unref(fs, ino);
}

/*
 * Free inodes that nobody references and whose blocks left the tier
 * meanwhile (they were kept only for their blocks). Walks only the inodes
 * kept so (zr_fs.kept), not the table: with 300k files the kernel still
 * knew, every sweep walked all of them holding itable_lock, which every
 * lookup and forget waits for. Those referenced again leave the list.
 */
void zr_fs_sweep(struct zr_fs *fs)
{
	struct zr_inode *ino, *next, *freelist = NULL;

	pthread_mutex_lock(&fs->itable_lock);
	for (ino = fs->kept; ino; ino = next) {
		next = ino->kept_next;
		if (ino->refs > 0) {
			kept_del(fs, ino);
		} else if (!inode_keep(ino)) {
			/* (unhashed too: a lookup found its number reused
			 * by another kind of file; inode_free() drops its
			 * blocks once no writeback uses them) */
			kept_del(fs, ino);
			if (ino->unhashed)
				HASH_DEL(fs->dead, ino);
			else
				HASH_DEL(fs->inodes, ino);
			ino->hh.next = freelist;	/* hh is free after HASH_DEL */
			freelist = ino;
		}
	}
	pthread_mutex_unlock(&fs->itable_lock);
	while (freelist) {
		ino = freelist;
		freelist = ino->hh.next;
		inode_free(fs, ino);
	}
}

/* ---- the fd cache ---- */

static void lru_unlink(struct zr_fs *fs, struct zr_inode *ino)
{
	if (ino->lru_prev)
		ino->lru_prev->lru_next = ino->lru_next;
	else if (fs->lru_head == ino)
		fs->lru_head = ino->lru_next;
	else
		return;	/* not on the list */
	if (ino->lru_next)
		ino->lru_next->lru_prev = ino->lru_prev;
	else
		fs->lru_tail = ino->lru_prev;
	ino->lru_prev = ino->lru_next = NULL;
}

static void lru_push(struct zr_fs *fs, struct zr_inode *ino)
{
	ino->lru_prev = NULL;
	ino->lru_next = fs->lru_head;
	if (fs->lru_head)
		fs->lru_head->lru_prev = ino;
	fs->lru_head = ino;
	if (!fs->lru_tail)
		fs->lru_tail = ino;
}

/* Close idle fds beyond the limit. Caller holds fd_lock. */
static void fd_trim(struct zr_fs *fs)
{
	while (fs->nfds > fs->opt->max_fds && fs->lru_tail) {
		struct zr_inode *victim = fs->lru_tail;

		lru_unlink(fs, victim);
		close(victim->fd);
		victim->fd = -1;
		fs->nfds--;
	}
}

/*
 * Open flags for an inode's cached fd: regular files O_RDWR (O_RDONLY when
 * the backing refuses: read-only filesystem, immutable file), directories
 * O_RDONLY|O_DIRECTORY, anything else O_PATH (never followed).
 */
static int fd_open_flags(struct zr_fs *fs, struct zr_inode *ino)
{
	if (S_ISDIR(ino->type))
		return O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
	if (S_ISREG(ino->type))
		return (fs->read_only ? O_RDONLY : O_RDWR) | O_NOFOLLOW;
	return O_PATH | O_NOFOLLOW;
}

/* Copy the @n-th name of @ino (see zr_inode_name()). @return 0, or -ESTALE
 * when it has fewer names. */
static int inode_name_nth(struct zr_fs *fs, struct zr_inode *ino, unsigned n,
			  struct zr_inode **parent, char name[NAME_MAX + 1])
{
	struct zr_alias *a;

	pthread_rwlock_rdlock(&fs->ns_lock);
	for (a = ino->aliases; a && n > 0; a = a->next)
		n--;
	if (!a) {
		pthread_rwlock_unlock(&fs->ns_lock);
		return -ESTALE;
	}
	*parent = a->parent;
	snprintf(name, NAME_MAX + 1, "%s", a->name);
	zr_inode_ref(fs, *parent);
	pthread_rwlock_unlock(&fs->ns_lock);
	return 0;
}

/**
 * zr_inode_name() - copy one name of @ino: its parent (with a reference the
 * caller drops with zr_inode_unref()) and the name.
 * @return 0, or -ESTALE when the inode has no name (unlinked, or the root).
 */
int zr_inode_name(struct zr_fs *fs, struct zr_inode *ino, struct zr_inode **parent,
		  char name[NAME_MAX + 1])
{
	return inode_name_nth(fs, ino, 0, parent, name);
}

/* Set by zr_fd_get_nowait() around its zr_fd_get(): inode_reopen() (its
 * parents' too) does not wait for a rename to end. */
static __thread bool reopen_nowait;

/* Set by zr_fd_reopen_waits(): inode_reopen() (its parents' too) waits
 * for a rename of ours of the inode it reopens to end, however long
 * (zr_rename_wait()), before it tries for a while. */
static __thread bool reopen_waits;

/**
 * zr_inode_same_file() - whether (@dirfd, @name; @flags as for
 * name_to_handle_at(2)) is the backing file whose handle @ino took, and not
 * a new file that was given the same inode number after that one was
 * removed behind zramfs's back (ext4 reuses numbers at once; the handle's
 * generation tells them apart). True when @ino took no handle, or the
 * handle cannot be had now.
 */
bool zr_inode_same_file(struct zr_inode *ino, int dirfd, const char *name, int flags)
{
	struct file_handle *h = __atomic_load_n(&ino->handle, __ATOMIC_ACQUIRE);
	union zr_handle_buf now;
	int mnt;

	if (!h)
		return true;
	now.fh.handle_bytes = MAX_HANDLE_SZ;
	if (name_to_handle_at(dirfd, name, &now.fh, &mnt, flags) < 0)
		return true;
	return now.fh.handle_type == h->handle_type && now.fh.handle_bytes == h->handle_bytes &&
	       memcmp(now.fh.f_handle, h->f_handle, h->handle_bytes) == 0;
}

/* What inode_open_name() tried. */
enum zr_name_try { ZR_NAME_TRIED, ZR_NAME_NONE, ZR_NAME_PARENT, ZR_NAME_OTHER };

/*
 * Open the file that @fd holds (any fd of it, O_PATH too) with @flags,
 * through /proc/self/fd, for a daemon not run by root whose user owns the
 * file but took away some of the permission @bits (S_IRUSR, S_IWUSR) that
 * the open needs: git creates its objects 0444 through a writable fd, and
 * `install -m 444` chmods its copies, so once the fd from the create had
 * left the cache the reopen for writing got EACCES, and every writeback
 * failed (EBADF, reported as EROFS), the unmount's for ever (helper-24's
 * review); a file made 000 or 0200 gave no fd at all (stop 43's note). The
 * missing bits are added for the open, and the mode put back unless it
 * changed meanwhile, all under mode_lock (a chmod, chown or access ACL
 * change through the mount takes it too, so that neither undoes the other
 * and a chown's clearing of set-id bits does not leave the added bits on). For that moment a GETATTR
 * may see the bits, and the ctime changes: only such files pay it, once
 * per reopen that needs it (helper-26's review of a version that did it at
 * every reopen, even to read a 0444 file, which needs no change).
 * @return an fd the caller owns, or -EACCES (not a regular file the
 * daemon's user owns, a root daemon, a read-only mount).
 */
static int owner_reopen(struct zr_fs *fs, int fd, mode_t bits, int flags)
{
	char path[32];
	struct stat st, now;
	mode_t mode;
	int nfd = -1;

	if (geteuid() == 0 || fs->read_only)
		return -EACCES;	/* (root needs no such help) */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	pthread_mutex_lock(&fs->mode_lock);
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    (st.st_mode & bits) != bits) {
		mode = st.st_mode & 07777;
		if (chmod(path, mode | bits) == 0) {
			nfd = open(path, flags | O_CLOEXEC);
			if (fstat(fd, &now) == 0 && (now.st_mode & 07777) == (mode | bits) &&
			    chmod(path, mode) < 0)
				zr_log(ZR_LOG_WARNING, "cannot put the mode of inode %llu back after opening it for its owner: %s",
				       (unsigned long long)st.st_ino, strerror(errno));
		}
	}
	pthread_mutex_unlock(&fs->mode_lock);
	return nfd >= 0 ? nfd : -EACCES;
}

/* Open (@pfd, @name) read-only when its owner, the daemon's user, took
 * its read permission away (owner_reopen()). @return an fd or -EACCES. */
static int owner_open(struct zr_fs *fs, int pfd, const char *name)
{
	int pathfd, fd;

	pathfd = openat(pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (pathfd < 0)
		return -EACCES;
	fd = owner_reopen(fs, pathfd, S_IRUSR, O_RDONLY);
	close(pathfd);
	return fd;
}

/*
 * Open @ino through its @n-th name, relative to the parent's (cached) fd.
 * *@what says whether the name was tried, there is no such name, the
 * parent's fd could not be had, or the name reaches another file: another
 * inode, or the same inode number reused by a new file since the handle was
 * taken (a file removed and another made behind zramfs's back; ext4 reuses
 * numbers at once), which the handle's generation tells.
 * @return an fd (the caller owns it), -ESTALE for another file, or -errno
 * (-ENOENT: the name is gone) of the open or the parent's.
 */
static int inode_open_name(struct zr_fs *fs, struct zr_inode *ino, unsigned n, int flags,
			   enum zr_name_try *what)
{
	struct zr_inode *parent;
	char name[NAME_MAX + 1];
	struct stat st;
	int pfd, fd, rc;

	*what = ZR_NAME_NONE;
	if (inode_name_nth(fs, ino, n, &parent, name) != 0)
		return -ESTALE;
	*what = ZR_NAME_PARENT;
	pfd = zr_fd_get(fs, parent);
	if (pfd < 0) {
		zr_inode_unref(fs, parent);
		return pfd;
	}
	*what = ZR_NAME_TRIED;
	fd = openat(pfd, name, flags | O_CLOEXEC);
	if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM ||
		       errno == ETXTBSY) &&
	    (flags & O_ACCMODE) == O_RDWR)
		fd = openat(pfd, name, (flags & ~O_ACCMODE) | O_RDONLY | O_CLOEXEC);
	rc = -errno;
	if (fd < 0 && rc == -EACCES && !(flags & O_PATH) &&
	    !(flags & O_DIRECTORY)) {
		fd = owner_open(fs, pfd, name);
		rc = fd < 0 ? fd : 0;
	}
	zr_fd_put(fs, parent);
	zr_inode_unref(fs, parent);
	if (fd < 0)
		return rc;
	zr_stat_add(&fs->fd_opens, 1);
	if (fstat(fd, &st) == 0 && st.st_ino == ino->key.ino && st.st_dev == ino->key.dev &&
	    zr_inode_same_file(ino, fd, "", AT_EMPTY_PATH))
		return fd;
	close(fd);
	*what = ZR_NAME_OTHER;
	return -ESTALE;
}

/*
 * Open @ino afresh through one of its names, each tried in turn (a hard
 * link's other name may still reach it). A rename racing with us is
 * caught by checking the identity, and retried: a name that is gone
 * (ENOENT) or reaches another file was renamed on the backing filesystem,
 * and the renaming thread updates the names it knows right after; with
 * renames of the parents in a loop, eight quick retries were not always
 * enough, so the later ones give it time (46 ms in all; a name left to
 * another file behind our back costs that too before -ESTALE). A parent
 * that cannot be opened has been retried already (its own reopen): its
 * error is not.
 * @return an fd (the caller owns it) or -errno: -ESTALE when the inode has
 * no name, or none reaches it.
 */
#define ZR_REOPEN_TRIES 32
static int inode_reopen(struct zr_fs *fs, struct zr_inode *ino, int flags)
{
	for (int attempt = 0; attempt < ZR_REOPEN_TRIES; attempt++) {
		bool missing = false, other = false;
		unsigned mark = zr_rename_mark(ino);
		enum zr_name_try what;
		int fd, err = 0;

		for (unsigned n = 0;; n++) {
			fd = inode_open_name(fs, ino, n, flags, &what);
			if (what == ZR_NAME_NONE)
				break;
			if (fd >= 0)
				return fd;
			if (what == ZR_NAME_TRIED && fd == -ENOENT)
				missing = true;
			else if (what == ZR_NAME_OTHER)
				other = true;
			else if (!err)
				err = fd;
		}
		if (err)
			return err;	/* as for one name: not retried */
		if (!missing && !other)
			return -ESTALE;	/* no name */
		/* no rename of ours can be running, or the caller does not
		 * wait for one (zr_fd_get_nowait()) */
		if (__atomic_load_n(&fs->quiesced, __ATOMIC_RELAXED) || reopen_nowait)
			return missing ? -ENOENT : -ESTALE;
		/* a rename of ours of it (a directory of the caller's file,
		 * say) under way: again once it ended, counting no try */
		if (reopen_waits && zr_rename_wait(fs, ino, mark)) {
			attempt = -1;
			continue;
		}
		/* renamed under us: a name went, or reaches another file (a
		 * RENAME_EXCHANGE whose names are not updated yet: retried
		 * at once, 32 tries could pass within it; helper-48) */
		if (attempt >= 2)
			usleep(100u * (unsigned)(attempt - 1));
	}
	return -ESTALE;
}

/**
 * zr_fd_get_cached() - like zr_fd_get(), but only when the cache holds an
 * fd of @ino already: never opens.
 * @return the fd, pinned until zr_fd_put(), or -ENOENT.
 */
int zr_fd_get_cached(struct zr_fs *fs, struct zr_inode *ino)
{
	int fd = -ENOENT;

	if (ino == &fs->root)
		return fs->root_fd;
	pthread_mutex_lock(&fs->fd_lock);
	if (ino->fd >= 0) {
		if (ino->fd_users++ == 0)
			lru_unlink(fs, ino);
		fd = ino->fd;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	return fd;
}

/**
 * zr_fd_get() - the cached fd of @ino (see fd_open_flags()), pinned until
 * zr_fd_put(). The root's fd is permanent.
 * @return the fd or -errno.
 */
int zr_fd_get(struct zr_fs *fs, struct zr_inode *ino)
{
	int fd;

	if (ino == &fs->root)
		return fs->root_fd;
	fd = zr_fd_get_cached(fs, ino);
	if (fd >= 0)
		return fd;

	fd = inode_reopen(fs, ino, fd_open_flags(fs, ino));
	if (fd < 0)
		return fd;
	return fd_cache_install(fs, ino, fd);
}

/**
 * zr_fd_get_nowait() - zr_fd_get() that does not wait for a rename of ours
 * to end when a name of @ino (or of a parent) is missing: -ENOENT at once.
 * For callers that can settle it otherwise (the file's handle).
 * @return the fd, pinned until zr_fd_put(), or -errno.
 */
int zr_fd_get_nowait(struct zr_fs *fs, struct zr_inode *ino)
{
	bool was = reopen_nowait;
	int fd;

	reopen_nowait = true;
	fd = zr_fd_get(fs, ino);
	reopen_nowait = was;
	return fd;
}

/**
 * zr_fd_reopen_waits() - while @on, the reopens by name of this thread
 * (zr_fd_get()), its parents' included, wait for a rename of ours of the
 * inode they reopen to end, however long, when its name reaches nothing
 * or another file (zr_rename_wait()): a rename of a directory changes no
 * name of the files in it, but reaches them through its own. Only for a
 * caller that holds no lock and no pinned fd, as zr_rename_wait() wants.
 * @return the setting before.
 */
bool zr_fd_reopen_waits(bool on)
{
	bool was = reopen_waits;

	reopen_waits = on;
	return was;
}

/**
 * zr_fd_get_waiting() - zr_fd_get() for a caller that holds no lock that
 * a rename needs and no pinned fd (an OPEN, a READ or WRITE, a LOOKUP in
 * @ino, a READDIR of it under its handle's lock only): a reopen by name
 * during a rename of ours of @ino, or of a directory above it, waits for
 * it to end (zr_fd_reopen_waits()).
 * @return the fd, pinned until zr_fd_put(), or -errno.
 */
int zr_fd_get_waiting(struct zr_fs *fs, struct zr_inode *ino)
{
	bool was = zr_fd_reopen_waits(true);
	int fd;

	fd = zr_fd_get(fs, ino);
	zr_fd_reopen_waits(was);
	return fd;
}

/* Give @fd, just opened for @ino, to the cache (closed if another thread
 * installed one meanwhile). @return the cached fd, pinned until zr_fd_put(). */
static int fd_cache_install(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	pthread_mutex_lock(&fs->fd_lock);
	if (ino->fd >= 0) {
		close(fd);	/* another thread installed one meanwhile */
	} else {
		int fl = fcntl(fd, F_GETFL);

		ino->fd = fd;
		ino->fd_flags = (fl >= 0 && !(fl & O_PATH)) ? (fl & O_ACCMODE) : O_RDONLY;
		fs->nfds++;
	}
	if (ino->fd_users++ == 0)
		lru_unlink(fs, ino);
	fd = ino->fd;
	fd_trim(fs);
	pthread_mutex_unlock(&fs->fd_lock);
	return fd;
}

/**
 * zr_fd_make_writable() - @fd, @ino's cached fd (pinned by the caller), may
 * have been opened read-only, the file not being writable then (0444 for an
 * unprivileged daemon, an immutable file): open it for writing again, for
 * an OPEN for writing (a chmod u+w or chattr -i since then lets a writer's
 * open succeed on a local filesystem; helper-32's review: the fd stayed
 * read-only, and such opens got EACCES until it left the cache) and for a
 * writeback (an unprivileged daemon's writeback of a file its user made
 * read-only, with the owner's permission added for the open:
 * owner_reopen()). The file reached through /proc/self/fd/N is the same;
 * the fd number stays and its file becomes the read-write one (dup3), so
 * the fd's other users go on. Also called before the writes that go
 * straight to the backing file (streams, cache=none, truncate, fallocate).
 * @return 0 when @fd is writable now, -EROFS on a read-only mount, or
 * -errno of the open.
 */
int zr_fd_make_writable(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	char path[32];
	int wfd, rc = 0;

	if (fs->read_only)
		return -EROFS;	/* (a remount rw does not make zramfs writable) */
	zr_data_note_subfs(fs, ino, fd);	/* (before the first write there) */
	pthread_mutex_lock(&fs->fd_lock);
	if (ino->fd != fd || ino->fd_flags != O_RDONLY) {
		rc = ino->fd == fd ? 0 : -EBADF;	/* (cannot be: @fd is pinned) */
		pthread_mutex_unlock(&fs->fd_lock);
		return rc;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	wfd = open(path, O_RDWR | O_CLOEXEC);
	if (wfd < 0 && errno == EACCES)
		wfd = owner_reopen(fs, fd, S_IRUSR | S_IWUSR, O_RDWR);
	else if (wfd < 0)
		wfd = -errno;
	if (wfd < 0)
		return wfd;
	pthread_mutex_lock(&fs->fd_lock);
	if (ino->fd == fd && ino->fd_flags == O_RDONLY) {
		if (dup3(wfd, fd, O_CLOEXEC) < 0)
			rc = -errno;
		else
			ino->fd_flags = O_RDWR;
	}
	pthread_mutex_unlock(&fs->fd_lock);
	close(wfd);
	return rc;
}

/**
 * zr_fd_install() - hand an fd of @ino that the caller just opened O_RDWR
 * (create) to the cache, which owns it from now on (closes it if the inode
 * has one already).
 */
void zr_fd_install(struct zr_fs *fs, struct zr_inode *ino, int fd)
{
	pthread_mutex_lock(&fs->fd_lock);
	if (ino->fd >= 0 || ino == &fs->root || !S_ISREG(ino->type)) {
		pthread_mutex_unlock(&fs->fd_lock);
		close(fd);
		return;
	}
	ino->fd = fd;
	ino->fd_flags = O_RDWR;
	fs->nfds++;
	if (ino->fd_users == 0 && ino->pins == 0)
		lru_push(fs, ino);
	fd_trim(fs);
	pthread_mutex_unlock(&fs->fd_lock);
}

/** Drop the pin taken by zr_fd_get(). */
void zr_fd_put(struct zr_fs *fs, struct zr_inode *ino)
{
	if (ino == &fs->root)
		return;
	pthread_mutex_lock(&fs->fd_lock);
	assert(ino->fd_users > 0);
	if (--ino->fd_users == 0 && ino->pins == 0) {
		lru_push(fs, ino);
		fd_trim(fs);
	}
	pthread_mutex_unlock(&fs->fd_lock);
}

/** Keep the cached fd open (an unlinked, open file). Caller holds a zr_fd_get() pin. */
void zr_fd_pin(struct zr_fs *fs, struct zr_inode *ino)
{
	pthread_mutex_lock(&fs->fd_lock);
	ino->pins++;
	pthread_mutex_unlock(&fs->fd_lock);
}

/** Whether zr_fd_pin() holds @ino's fd: it still reaches a file that no
 * name does (unlinked through the mount while open, without an orphan's
 * name). Takes fs->fd_lock. */
bool zr_fd_is_pinned(struct zr_fs *fs, struct zr_inode *ino)
{
	bool pinned;

	pthread_mutex_lock(&fs->fd_lock);
	pinned = ino->pins > 0;
	pthread_mutex_unlock(&fs->fd_lock);
	return pinned;
}

void zr_fd_unpin(struct zr_fs *fs, struct zr_inode *ino)
{
	pthread_mutex_lock(&fs->fd_lock);
	assert(ino->pins > 0);
	if (--ino->pins == 0 && ino->fd_users == 0 && ino->fd >= 0) {
		lru_push(fs, ino);
		fd_trim(fs);
	}
	pthread_mutex_unlock(&fs->fd_lock);
}


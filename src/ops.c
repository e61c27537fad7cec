// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ops.c - FUSE operations on names and metadata, passed through to the
 * backing directory with *at() calls relative to cached fds.
 *
 * Every handler has the same shape: resolve the inode(s), do the backing
 * call, release what was taken, then reply — never replying with a lock
 * held. New files, directories, nodes and symlinks are created by the daemon
 * and then given to the caller's uid/gid (the parent's group in a setgid
 * directory), so ownership is what a local filesystem would give.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

#define TRACE(fs, ...) do { if ((fs)->opt->debug) zr_log(ZR_LOG_DEBUG, __VA_ARGS__); } while (0)

/* Where an inode is reached by *at() calls: (dirfd, name, flags). */
struct zr_at {
	int dirfd;
	const char *name;	/* "" for the inode's own fd (root, unlinked) */
	int at_flags;		/* AT_SYMLINK_NOFOLLOW or AT_EMPTY_PATH */
	bool opath;		/* dirfd is an O_PATH fd of the inode that
				 * at_entry_fd() opened, closed by at_put() */
	struct zr_inode *pinned;	/* whose fd is pinned */
	struct zr_inode *parent;	/* reference to drop, or NULL */
	char namebuf[NAME_MAX + 1];
};

/* @return 0 with @at filled (release with at_put()), or -errno. */
static int at_get(struct zr_fs *fs, struct zr_inode *ino, struct zr_at *at)
{
	int rc, fd;

	memset(at, 0, sizeof(*at));
	if (ino == &fs->root) {
		at->dirfd = fs->root_fd;
		at->name = "";
		at->at_flags = AT_EMPTY_PATH;
		return 0;
	}
	rc = zr_inode_name(fs, ino, &at->parent, at->namebuf);
	if (rc == 0) {
		fd = zr_fd_get(fs, at->parent);
		if (fd < 0) {
			zr_inode_unref(fs, at->parent);
			return fd;
		}
		at->dirfd = fd;
		at->pinned = at->parent;
		at->name = at->namebuf;
		at->at_flags = AT_SYMLINK_NOFOLLOW;
		return 0;
	}
	/* no name left: an unlinked file still open has a pinned fd */
	at->parent = NULL;
	fd = zr_fd_get(fs, ino);
	if (fd < 0)
		return fd;
	at->dirfd = fd;
	at->pinned = ino;
	at->name = "";
	at->at_flags = AT_EMPTY_PATH;
	return 0;
}

/*
 * Like at_get(), but reach a regular file or directory through its own
 * cached fd when it has one ("" + AT_EMPTY_PATH): no name lookup in the
 * backing filesystem. For getattr, setattr and xattrs, not for link.
 */
static int at_get_fast(struct zr_fs *fs, struct zr_inode *ino, struct zr_at *at)
{
	int fd;

	if (ino != &fs->root && (S_ISREG(ino->type) || S_ISDIR(ino->type)) &&
	    (fd = zr_fd_get_cached(fs, ino)) >= 0) {
		memset(at, 0, sizeof(*at));
		at->dirfd = fd;
		at->pinned = ino;
		at->name = "";
		at->at_flags = AT_EMPTY_PATH;
		return 0;
	}
	return at_get(fs, ino, at);
}

static void at_put(struct zr_fs *fs, struct zr_at *at)
{
	if (at->opath)
		close(at->dirfd);
	if (at->pinned)
		zr_fd_put(fs, at->pinned);
	if (at->parent)
		zr_inode_unref(fs, at->parent);
}

/* A path for the *xattr() calls: @follow tells whether to use the
 * following variant (the path ends in a /proc fd link). */
static void at_path(const struct zr_at *at, char *buf, size_t len, bool *follow)
{
	if (at->name[0]) {
		snprintf(buf, len, "/proc/self/fd/%d/%s", at->dirfd, at->name);
		*follow = false;
	} else {
		snprintf(buf, len, "/proc/self/fd/%d", at->dirfd);
		*follow = true;
	}
}

static int at_stat(const struct zr_at *at, struct stat *st)
{
	return fstatat(at->dirfd, at->name, st, at->at_flags) < 0 ? -errno : 0;
}

/*
 * Whether nothing but the kernel holds @ino, whose last name went: no
 * handle, no pinned fd, no orphan name. A removed directory may be open
 * without a pinned fd (past pins_max()): it counts too, since nothing
 * but its kept attributes can answer for it. Caller holds ino->lock.
 */
static bool gone_only(struct zr_inode *ino)
{
	return ino->gone_st && !ino->fd_pinned &&
	       (ino->open_count == 0 || S_ISDIR(ino->type)) &&
	       !__atomic_load_n(&ino->orphaned, __ATOMIC_RELAXED);
}

/*
 * The attributes kept for @ino when its last name went (finish_unlink(),
 * release_pinned()), into @st, when nothing but the kernel holds it any
 * more. The kernel still asks about such an inode: the SETATTR of its
 * times when it writes the inode back after an unlink, a GETATTR through
 * an O_PATH descriptor or of a removed working directory. A local
 * filesystem answers those with the file's last attributes and a link
 * count of 0; so does zramfs, rather than fail them with ESTALE (a failed
 * SETATTR there made the next syncfs(2) of the mount fail), and rather
 * than ask a cached fd of the deleted backing file, which may go from the
 * fd cache at any time. Takes ino->lock. @return whether @st was filled.
 */
static bool gone_stat(struct zr_inode *ino, struct stat *st)
{
	bool got;

	if (!__atomic_load_n(&ino->gone_st, __ATOMIC_RELAXED))
		return false;
	pthread_rwlock_rdlock(&ino->lock);
	got = gone_only(ino);
	if (got)
		*st = *ino->gone_st;
	pthread_rwlock_unlock(&ino->lock);
	return got;
}

/* Keep @st (taken of the file just now) as @ino's attributes for
 * gone_stat(), with a link count of 0. Caller holds ino->lock for writing. */
static void gone_keep(struct zr_fs *fs, struct zr_inode *ino, const struct stat *st)
{
	struct stat *g = ino->gone_st;

	if (!g) {
		g = malloc(sizeof(*g));
		if (!g)
			return;	/* the kernel's later requests get ESTALE */
	}
	*g = *st;
	zr_data_fix_stat(fs, ino, g);
	g->st_nlink = 0;
	__atomic_store_n(&ino->gone_st, g, __ATOMIC_RELEASE);
}

/*
 * The backing file's attributes of @ino into @st. Through a name (no fd
 * cached), the name may reach another file, or nothing, for a moment: a
 * rename or removal of it is under way in another thread (backing call
 * done, our names not yet changed), and the kernel would keep that file's
 * attributes for the attribute timeout, or, of another kind (an exchange
 * of a directory and a symlink), take the inode for bad (helper-63). So
 * the names are read again once such a change ends, as long as one began
 * since they were read (zr_rename_wait(): not a number of tries, which
 * failed with ESTALE when the rename's thread was held up longer under
 * CPU load; rename_estale.sh); -ESTALE (-ENOENT) when none did: the file
 * was replaced (removed) behind our back. @return 0 or -errno.
 */
static int inode_stat(struct zr_fs *fs, struct zr_inode *ino, struct stat *st)
{
	struct zr_at at;
	unsigned mark;
	bool named, waits;
	int rc;

	if (gone_stat(ino, st))
		return 0;
	for (;;) {
		mark = zr_rename_mark(ino);
		/* (a parent's reopen waits for its rename too) */
		waits = zr_fd_reopen_waits(true);
		rc = at_get_fast(fs, ino, &at);
		zr_fd_reopen_waits(waits);
		if (rc == 0) {
			rc = at_stat(&at, st);
			named = at.name[0] != '\0';
			at_put(fs, &at);
			if (rc == 0 && named &&
			    (st->st_dev != ino->key.dev || st->st_ino != ino->key.ino))
				rc = -ESTALE;	/* another file */
		}
		/* (no lock or fd held here, as zr_rename_wait() wants) */
		if ((rc != -ESTALE && rc != -ENOENT) || !zr_rename_wait(fs, ino, mark))
			break;
		/* its names changed meanwhile: it may have none now, and
		 * attributes kept by the removal */
		if (gone_stat(ino, st))
			return 0;
	}
	if (rc == 0)
		zr_data_fix_stat(fs, ino, st);
	/* the backing .zramfs (the orphan directory's parent) is hidden */
	if (rc == 0 && ino == &fs->root && st->st_nlink > 2 &&
	    __atomic_load_n(&fs->orphans.fd, __ATOMIC_RELAXED) >= 0)
		st->st_nlink--;
	return rc;
}

static void fill_entry(struct zr_fs *fs, struct fuse_entry_param *e,
		       struct zr_inode *ino, const struct stat *st)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino == &fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)ino;
	e->attr = *st;
	e->attr_timeout = (double)fs->timeout_s;
	e->entry_timeout = (double)fs->timeout_s;
}

/*
 * zr_inode_lookup() of (@pfd, @name), whose stat is *@st when @have, else
 * taken here; stat again when the lookup waited for a removal of that
 * number (-EAGAIN), or found another kind of file under it (-ESTALE: once,
 * then the table's is taken for removed behind our back). @return 0 or
 * -errno.
 */
static int inode_lookup_stat(struct zr_fs *fs, struct zr_inode *parent, int pfd,
			     const char *name, struct stat *st, bool have,
			     struct zr_inode **ino)
{
	bool confirmed = false;
	int rc;

	for (;;) {
		if (!have && fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		rc = zr_inode_lookup(fs, parent, pfd, name, st, confirmed, ino);
		if (rc == -ESTALE && !confirmed)
			confirmed = true;
		else if (rc != -EAGAIN)
			return rc;
		have = false;
	}
}

/*
 * Look @name up in @parent (whose fd is @pfd) and fill @e, taking a lookup
 * reference. @known: the entry's stat when the caller has just taken it,
 * else NULL. @return 0 or -errno.
 */
static int do_lookup_stat(struct zr_fs *fs, struct zr_inode *parent, int pfd,
			  const char *name, const struct stat *known,
			  struct fuse_entry_param *e)
{
	struct zr_inode *ino;
	struct stat st;
	int rc;

	if (known)
		st = *known;
again:
	rc = inode_lookup_stat(fs, parent, pfd, name, &st, known != NULL, &ino);
	if (rc)
		return rc;
	if (S_ISREG(st.st_mode) && !zr_inode_same_file(ino, pfd, name, 0)) {
		if (!zr_name_reaches(pfd, name, &ino->key)) {
			/* the name is another file now (a removal and a
			 * create raced with this lookup, which the kernel
			 * may send without the directory's lock): @ino may
			 * be live, a new file that got the number; look the
			 * name up again (helper-63) */
			zr_alias_remove(fs, ino, parent, name);
			zr_inode_forget(fs, ino, 1);
			known = NULL;
			goto again;
		}
		/* the number of a file removed behind our back, now another
		 * file's: the old inode (its data has no home) leaves the
		 * table, and the new file gets its own */
		zr_alias_remove(fs, ino, parent, name);
		zr_inode_unhash(fs, ino);
		zr_inode_forget(fs, ino, 1);
		rc = inode_lookup_stat(fs, parent, pfd, name, &st, true, &ino);
		if (rc)
			return rc;
	}
	zr_data_fix_stat(fs, ino, &st);
	fill_entry(fs, e, ino, &st);
	return 0;
}

static int do_lookup(struct zr_fs *fs, struct zr_inode *parent, int pfd,
		     const char *name, struct fuse_entry_param *e)
{
	return do_lookup_stat(fs, parent, pfd, name, NULL, e);
}

static void zr_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct zr_fs *fs = userdata;

	if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		fs->kernel_times = true;
	}
	if (conn->capable & FUSE_CAP_READDIRPLUS) {
		conn->want |= FUSE_CAP_READDIRPLUS;
		conn->want &= ~FUSE_CAP_READDIRPLUS_AUTO;
	}
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (conn->capable & FUSE_CAP_CACHE_SYMLINKS)
		conn->want |= FUSE_CAP_CACHE_SYMLINKS;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	/* acl=on: the kernel checks ACLs (fetching and caching them with
	 * GETXATTR) and leaves the umask to us (new_mode()); the backing
	 * filesystem keeps them, applies default ACLs to new nodes and keeps
	 * the mode and the access ACL in step */
	if (fs->opt->acl) {
		if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK)) {
			conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
			fs->acl_on = true;
		} else {
			zr_log(ZR_LOG_WARNING, "acl=on: this kernel offers FUSE no POSIX ACLs: they are kept, but only the mode bits are checked");
		}
	}
	/* no POSIX/flock lock handlers: the kernel keeps locks locally, as a
	 * local filesystem does */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_write = 1024 * 1024;
	/*
	 * READs of at most max_read (512k): the kernel sends a read-ahead
	 * window of 1 MiB as two READs at once, which two threads decompress
	 * side by side. As one 1 MiB READ, one thread decompressed it while
	 * the other CPU waited (docs/DESIGN-NOTES.md, "READ size"). libfuse
	 * wants the value it gave the mount again here.
	 */
	conn->max_read = fs->opt->max_read;
	conn->max_readahead = 1024 * 1024;
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	conn->time_gran = 1;
}

static void zr_op_destroy(void *userdata)
{
	struct zr_fs *fs = userdata;

	zr_wb_stop(fs);
}

static void zr_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *p = zr_inode_from_ino(fs, parent);
	struct fuse_entry_param e;
	int pfd, rc;

	TRACE(fs, "lookup %lu %s", (unsigned long)parent, name);
	if (zr_is_ctl(parent) || (parent == FUSE_ROOT_ID && strcmp(name, ZR_CTL_DIRNAME) == 0)) {
		rc = zr_ctl_lookup(fs, parent, name, &e);
		if (rc)
			fuse_reply_err(req, -rc);
		else
			fuse_reply_entry(req, &e);
		return;
	}
	pfd = zr_fd_get_waiting(fs, p);	/* (during a rename of p: after it) */
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	rc = do_lookup(fs, p, pfd, name, &e);
	zr_fd_put(fs, p);
	if (rc == -ENOENT) {
		/* negative entry, cached: the tree changes only through us */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = (double)fs->timeout_s;
		fuse_reply_entry(req, &e);
		return;
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void zr_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct zr_fs *fs = zr_fs_of(req);

	if (!zr_is_ctl(ino))
		zr_inode_forget(fs, zr_inode_from_ino(fs, ino), nlookup);
	fuse_reply_none(req);
}

static void zr_op_forget_multi(fuse_req_t req, size_t count,
			       struct fuse_forget_data *forgets)
{
	struct zr_fs *fs = zr_fs_of(req);

	for (size_t i = 0; i < count; i++)
		if (!zr_is_ctl(forgets[i].ino))
			zr_inode_forget(fs, zr_inode_from_ino(fs, forgets[i].ino),
					forgets[i].nlookup);
	fuse_reply_none(req);
}

static void zr_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct stat st;
	int rc;

	if (zr_is_ctl(ino)) {
		zr_ctl_stat(fs, ino, &st);
		fuse_reply_attr(req, &st, 1.0);
		return;
	}
	rc = inode_stat(fs, zr_inode_from_ino(fs, ino), &st);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, (double)fs->timeout_s);
}

/*
 * A SETATTR of a file that only the kernel holds (see gone_stat()): the
 * change goes to the kept attributes only, into @st. Takes ino->lock.
 * @return 1 when done, 0 when the file is not such a one, or -errno.
 */
static int gone_setattr(struct zr_inode *ino, const struct stat *attr, int valid,
			struct stat *st)
{
	struct timespec now;
	struct stat *g;
	int rc = 0;

	if (!__atomic_load_n(&ino->gone_st, __ATOMIC_RELAXED))
		return 0;
	clock_gettime(CLOCK_REALTIME, &now);
	pthread_rwlock_wrlock(&ino->lock);
	if (!gone_only(ino))
		goto out;
	g = ino->gone_st;
	if ((valid & FUSE_SET_ATTR_SIZE) && !S_ISREG(g->st_mode)) {
		rc = S_ISDIR(g->st_mode) ? -EISDIR : -EINVAL;
		goto out;
	}
	if (valid & FUSE_SET_ATTR_MODE)
		g->st_mode = (g->st_mode & S_IFMT) | (attr->st_mode & 07777);
	if (valid & FUSE_SET_ATTR_UID)
		g->st_uid = attr->st_uid;
	if (valid & FUSE_SET_ATTR_GID)
		g->st_gid = attr->st_gid;
	if (valid & FUSE_SET_ATTR_SIZE) {
		g->st_size = attr->st_size;
		g->st_blocks = ZR_MIN(g->st_blocks, (blkcnt_t)((attr->st_size + 511) / 512));
	}
	if (valid & FUSE_SET_ATTR_ATIME)
		g->st_atim = (valid & FUSE_SET_ATTR_ATIME_NOW) ? now : attr->st_atim;
	if (valid & FUSE_SET_ATTR_MTIME)
		g->st_mtim = (valid & FUSE_SET_ATTR_MTIME_NOW) ? now : attr->st_mtim;
	if (valid & FUSE_SET_ATTR_CTIME)
		g->st_ctim = attr->st_ctim;
	else
		g->st_ctim = now;
	*st = *g;
	rc = 1;
out:
	pthread_rwlock_unlock(&ino->lock);
	return rc;
}

/*
 * Open entry @name of @dirfd O_PATH without following it, and check that
 * it still is the file @dev/@ino. A change made by name follows a symlink
 * (fchmodat) or reaches whatever file is under the name now (fchownat,
 * utimensat, even with AT_SYMLINK_NOFOLLOW): one put in the backing
 * directory behind zramfs's back, where a FIFO or a file whose fd left the
 * cache was, would have a daemon running as root change another file
 * (helper-24's review, stop 43's for chmod). The change goes through this
 * fd instead. @return the fd (the caller closes it), or -errno: -ESTALE
 * when the name holds another file now.
 */
static int entry_open(int dirfd, const char *name, dev_t dev, ino_t ino)
{
	struct stat st;
	int fd, rc;

	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (st.st_dev != dev || st.st_ino != ino) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

/* chmod of the file that O_PATH fd @fd holds (not a symlink: Linux
 * changes no symlink's mode). @return 0 or -errno. */
static int chmod_opath(int fd, mode_t mode)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return chmod(path, mode) < 0 ? -errno : 0;
}

/*
 * Make @at, which reaches @ino by a name in its parent, reach it by an
 * O_PATH fd of the entry checked to be @ino's file (entry_open()), for the
 * changes setattr and the xattr calls make. An @at that has the inode's
 * own fd already is left as it is. @return 0 or -errno (-ESTALE: the name
 * holds another file now).
 */
static int at_entry_fd(struct zr_at *at, const struct zr_inode *ino)
{
	int fd;

	if (!at->name[0])
		return 0;
	fd = entry_open(at->dirfd, at->name, ino->key.dev, ino->key.ino);
	if (fd < 0)
		return fd;
	at->dirfd = fd;
	at->name = "";
	at->at_flags = AT_EMPTY_PATH;
	at->opath = true;
	return 0;
}

/*
 * at_get_fast(), then at_entry_fd(): @ino reached by its own fd or by a
 * checked O_PATH fd of its entry, for a change. A name that reaches
 * another file, or nothing, because a rename or removal of @ino is under
 * way is read again once it ended, as in inode_stat() (zr_rename_wait():
 * the caller holds no lock). @return 0 with @at filled (release with
 * at_put()), or -errno (-ESTALE: the name holds another file, and no
 * rename of ours explains it).
 */
static int at_get_entry(struct zr_fs *fs, struct zr_inode *ino, struct zr_at *at)
{
	unsigned mark;
	bool waits;
	int rc;

	for (;;) {
		mark = zr_rename_mark(ino);
		waits = zr_fd_reopen_waits(true);	/* (a parent's too) */
		rc = at_get_fast(fs, ino, at);
		zr_fd_reopen_waits(waits);
		if (rc == 0) {
			rc = at_entry_fd(at, ino);
			if (rc == 0)
				return 0;
			at_put(fs, at);
		}
		if ((rc != -ESTALE && rc != -ENOENT) || !zr_rename_wait(fs, ino, mark))
			return rc;
	}
}

/* utimensat of what @at reaches: its own fd (futimens), or an O_PATH fd
 * through /proc/self/fd (utimensat with AT_EMPTY_PATH is Linux 5.8's), the
 * link itself for a symlink. @return 0, or -1 with errno set. */
static int set_times(const struct zr_at *at, const struct timespec ts[2])
{
	char path[32];

	if (!at->opath)
		return futimens(at->dirfd, ts);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", at->dirfd);
	return utimensat(AT_FDCWD, path, ts, 0);
}

static void zr_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
			  int valid, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in = zr_inode_from_ino(fs, ino);
	struct zr_at at;
	struct stat st;
	bool stamp;
	int rc;

	if (zr_is_ctl(ino)) {
		/* a new owner or mode is refused; a size (O_TRUNC) or the
		 * times are taken and change nothing: with the writeback
		 * cache the kernel sends the times it keeps itself (after a
		 * fallocate, say), and a refusal made the close fail with
		 * EIO (ctl_misuse.sh) */
		if (valid & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
			fuse_reply_err(req, EPERM);
		} else {
			zr_ctl_stat(fs, ino, &st);
			fuse_reply_attr(req, &st, 1.0);
		}
		return;
	}
	rc = gone_setattr(in, attr, valid, &st);
	if (rc) {
		rc = rc < 0 ? rc : 0;
		goto out;
	}
	if (valid & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
		     FUSE_SET_ATTR_CTIME | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))
		rc = at_get_entry(fs, in, &at);
	else
		rc = at_get_fast(fs, in, &at);
	if (rc)
		goto out;
	if (valid & FUSE_SET_ATTR_MODE) {
		if (S_ISLNK(in->type)) {
			rc = -EOPNOTSUPP;
		} else {
			/* (not between an owner's temporary u+r or u+w and
			 * its undoing, which would undo this chmod) */
			pthread_mutex_lock(&fs->mode_lock);
			if (at.opath)
				rc = chmod_opath(at.dirfd, attr->st_mode & 07777);
			else
				rc = fchmod(at.dirfd, attr->st_mode & 07777) < 0 ? -errno : 0;
			pthread_mutex_unlock(&fs->mode_lock);
		}
		if (rc < 0)
			goto out_at;
	}
	if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
		uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

		/* (it clears set-id bits: under mode_lock, as chmod) */
		pthread_mutex_lock(&fs->mode_lock);
		rc = fchownat(at.dirfd, at.name, uid, gid, at.at_flags) < 0 ? -errno : 0;
		pthread_mutex_unlock(&fs->mode_lock);
		if (rc < 0)
			goto out_at;
	}
	if (!(valid & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
		       FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		/* chown(f, -1, -1), which comes with the ctime for a regular
		 * file and with nothing for another node (a FIFO: helper-70's
		 * fuzzer): the backing filesystem updates ctime and clears
		 * set-id bits of an executable file, as Linux does */
		pthread_mutex_lock(&fs->mode_lock);
		rc = fchownat(at.dirfd, at.name, (uid_t)-1, (gid_t)-1, at.at_flags) < 0 ? -errno : 0;
		pthread_mutex_unlock(&fs->mode_lock);
		if (rc < 0)
			goto out_at;
	}
	if (valid & FUSE_SET_ATTR_SIZE) {
		if (!S_ISREG(in->type)) {
			rc = S_ISDIR(in->type) ? -EISDIR : -EINVAL;
			goto out_at;
		}
		rc = zr_data_truncate(fs, in, -1, (uint64_t)attr->st_size, false);
		if (rc)
			goto out_at;
	}
	if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
		struct timespec ts[2];

		ts[0].tv_sec = 0;
		ts[0].tv_nsec = UTIME_OMIT;
		ts[1] = ts[0];
		if (valid & FUSE_SET_ATTR_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_ATIME)
			ts[0] = attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (valid & FUSE_SET_ATTR_MTIME)
			ts[1] = attr->st_mtim;
		/* a file's mtime is set and noted for its writebacks under
		 * its stamp lock, which a writeback holds while it stamps
		 * the time it noted (data.c): else that stamp could come
		 * after ours with the older time (helper-61) */
		stamp = S_ISREG(in->type) && (valid & FUSE_SET_ATTR_MTIME);
		if (stamp)
			pthread_mutex_lock(zr_stamp_lock(fs, in));
		rc = set_times(&at, ts) < 0 ? -errno : 0;
		if (rc == 0 && stamp) {
			/* the mtime just set is the one a writeback must put back */
			rc = at_stat(&at, &st);
			pthread_mutex_lock(&fs->attr_lock);
			if (rc == 0 && in->times_dirty)
				in->mtime = st.st_mtim;
			pthread_mutex_unlock(&fs->attr_lock);
		}
		if (stamp)
			pthread_mutex_unlock(zr_stamp_lock(fs, in));
		if (rc)
			goto out_at;
	}
	rc = at_stat(&at, &st);
	if (rc == 0)
		zr_data_fix_stat(fs, in, &st);
out_at:
	at_put(fs, &at);
out:
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_attr(req, &st, (double)fs->timeout_s);
}

/*
 * access(2), chdir(2): the kernel asks only without default_permissions
 * (-o no_default_permissions: the daemon runs as root and only root can
 * use the mount, main.c); the backing filesystem answers for root, as the
 * local filesystem would (read and write granted, execute when an x bit
 * is set). Real and effective uid are both 0 (main.c), so plain access
 * semantics are root's: an object reached by its own fd (the root, an
 * unlinked open file) goes through access(2) on its /proc/self/fd link,
 * named ones through faccessat() without flags (AT_EMPTY_PATH or
 * AT_SYMLINK_NOFOLLOW need faccessat2, Linux 5.8), but for a symlink
 * itself, which only faccessat2 callers ask about.
 */
static void zr_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	struct zr_at at;
	int rc;

	if (zr_is_ctl(ino)) {
		struct stat st;

		zr_ctl_stat(fs, ino, &st);
		rc = (mask & X_OK) && !S_ISDIR(st.st_mode) && !(st.st_mode & 0111) ? EACCES : 0;
		fuse_reply_err(req, rc);
		return;
	}
	in = zr_inode_from_ino(fs, ino);
	rc = at_get(fs, in, &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (at.name[0]) {
		rc = faccessat(at.dirfd, at.name, mask,
			       S_ISLNK(in->type) ? AT_SYMLINK_NOFOLLOW : 0) < 0 ? errno : 0;
	} else {
		char path[64];

		snprintf(path, sizeof(path), "/proc/self/fd/%d", at.dirfd);
		rc = access(path, mask) < 0 ? errno : 0;
	}
	at_put(fs, &at);
	fuse_reply_err(req, rc);
}

static void zr_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct zr_fs *fs = zr_fs_of(req);
	char buf[PATH_MAX + 1];
	struct zr_at at;
	ssize_t n;
	int rc;

	if (zr_is_ctl(ino)) {
		fuse_reply_err(req, EINVAL);	/* (the kernel asks only of symlinks) */
		return;
	}
	/* a checked fd of the entry, not the name: during an exchange of
	 * two symlinks the name reaches the other one, whose target the
	 * kernel would keep as this one's (FUSE_CAP_CACHE_SYMLINKS) */
	rc = at_get_entry(fs, zr_inode_from_ino(fs, ino), &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	n = readlinkat(at.dirfd, at.name, buf, sizeof(buf) - 1);
	rc = n < 0 ? -errno : 0;
	at_put(fs, &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

/* Whether the caller of @req is in group @gid (primary or supplementary;
 * all of them, however many: a group whose ACL entry denies must be seen,
 * helper-72). Without memory for a long list, says no. */
static bool caller_in_group(fuse_req_t req, gid_t gid)
{
	gid_t some[64], *groups = some;
	int n, max = (int)ZR_ARRAY_SIZE(some);
	bool in = false;

	if (fuse_req_ctx(req)->gid == gid)
		return true;
	n = fuse_req_getgroups(req, max, groups);
	if (n > max) {
		max = n;
		groups = malloc(sizeof(*groups) * (size_t)max);
		n = groups ? fuse_req_getgroups(req, max, groups) : 0;
	}
	for (int i = 0; i < n && i < max && !in; i++)
		in = groups[i] == gid;
	if (groups != some)
		free(groups);
	return in;
}

/*
 * Give a new entry @name in @pfd to the caller of @req: uid, and gid (or the
 * parent's group when the parent directory is setgid). chown clears set-id
 * bits, so the mode the backing filesystem gave (with the setgid bit a
 * directory inherits) is put back, less a setgid bit on a file the caller
 * could not have set (not in the file's group), as a local filesystem does.
 * @out: when not NULL, receives the entry's stat if nothing changed it
 * (*@have tells), saving the caller a lookup. @fd_new: the new file's fd
 * (a CREATE), whose stat is taken instead of the name's, or -1; with
 * @name NULL, a file without a name (O_TMPFILE), changed through @fd_new.
 * @type: the S_IFMT of what the request made. @return 0 or -errno:
 * -ESTALE when the name holds another file than the one made (put there
 * behind zramfs's back), which is then not touched.
 */
static int give_to_caller(fuse_req_t req, int pfd, const char *name, int fd_new,
			  mode_t type, struct stat *out, bool *have)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat pst, st;
	gid_t gid = ctx->gid;
	mode_t mode;
	int fd, rc = 0;

	if (have)
		*have = false;
	if (geteuid() != 0)
		return 0;	/* an unprivileged daemon creates as itself */
	if (fstat(pfd, &pst) == 0 && (pst.st_mode & S_ISGID))
		gid = pst.st_gid;
	if ((fd_new >= 0 ? fstat(fd_new, &st) : fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW)) < 0)
		return -errno;
	/* a node is known by its name only: the one this request made is
	 * ours (the daemon's uid), of its type, with one link (helper-33's
	 * review: a file of another user's, set-user-ID, renamed over the
	 * name behind zramfs's back before this stat, was made root's with
	 * its set-id bits put back) */
	if (st.st_uid != geteuid() || (st.st_mode & S_IFMT) != (type & S_IFMT) ||
	    (!S_ISDIR(type) && st.st_nlink != (name ? 1u : 0u)))
		return -ESTALE;
	mode = st.st_mode & 07777;
	if (S_ISREG(st.st_mode) && (mode & S_ISGID) && ctx->uid != 0 &&
	    !caller_in_group(req, gid))
		mode &= ~(mode_t)S_ISGID;
	if (st.st_uid == ctx->uid && st.st_gid == gid && mode == (st.st_mode & 07777)) {
		if (out) {
			*out = st;
			*have = true;
		}
		return 0;
	}
	if (!name) {
		if (fchown(fd_new, ctx->uid, gid) < 0)
			rc = -errno;
		else if (st.st_mode & 07000)
			rc = fchmod(fd_new, mode) < 0 ? -errno : 0;
		return rc;
	}
	/* through the entry checked to be the one just looked at */
	fd = entry_open(pfd, name, st.st_dev, st.st_ino);
	if (fd < 0)
		return fd;
	if (fchownat(fd, "", ctx->uid, gid, AT_EMPTY_PATH) < 0)
		rc = -errno;
	else if (!S_ISLNK(type) && (st.st_mode & 07000))
		rc = chmod_opath(fd, mode);
	close(fd);
	return rc;
}

/*
 * CREATEs answered ESTALE because their name was taken (zr_op_create()),
 * so that the kernel's one walk again of the same open can be told from a
 * first meeting: a slot per parent and caller thread (FUSE sends the
 * thread's id), holding the name and when. create_retry_lock protects
 * every field of every slot, and create_retry_used (the slots in use,
 * parent != 0), which is also read without it (an atomic load) so that
 * an OPEN, or a CREATE that made its file, finds out in one load that
 * there is no note to forget or take. (A note is written before its
 * ESTALE reply, and the walk again comes after that reply, through the
 * kernel: its load sees the note.)
 */
#define ZR_CREATE_RETRY_SLOTS 16
#define ZR_CREATE_RETRY_MS 2000
static struct {
	fuse_ino_t parent;
	pid_t pid;
	uint64_t at_ms;
	char name[NAME_MAX + 1];
} create_retry[ZR_CREATE_RETRY_SLOTS];
static pthread_mutex_t create_retry_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int create_retry_used;

static unsigned int create_retry_slot(fuse_ino_t parent, pid_t pid)
{
	return (unsigned int)((parent * 31u + (unsigned int)pid) % ZR_CREATE_RETRY_SLOTS);
}

/* Note that thread @pid's CREATE of @name in @parent was answered ESTALE. */
static void create_retry_note(fuse_ino_t parent, pid_t pid, const char *name)
{
	unsigned int i = create_retry_slot(parent, pid);

	if (strlen(name) > NAME_MAX)
		return;
	pthread_mutex_lock(&create_retry_lock);
	if (!create_retry[i].parent)
		__atomic_add_fetch(&create_retry_used, 1, __ATOMIC_RELAXED);
	create_retry[i].parent = parent;
	create_retry[i].pid = pid;
	create_retry[i].at_ms = zr_now_ms();
	strcpy(create_retry[i].name, name);
	pthread_mutex_unlock(&create_retry_lock);
}

/* Whether thread @pid's CREATE of @name in @parent follows one of its own
 * that was answered ESTALE, less than ZR_CREATE_RETRY_MS ago: the kernel's
 * walk again. The note is used up. */
static bool create_retry_take(fuse_ino_t parent, pid_t pid, const char *name)
{
	unsigned int i = create_retry_slot(parent, pid);
	bool again;

	/* (every CREATE that makes its file asks: no lock when no note) */
	if (!__atomic_load_n(&create_retry_used, __ATOMIC_RELAXED))
		return false;
	pthread_mutex_lock(&create_retry_lock);
	again = create_retry[i].parent == parent && create_retry[i].pid == pid &&
		zr_now_ms() - create_retry[i].at_ms < ZR_CREATE_RETRY_MS &&
		strcmp(create_retry[i].name, name) == 0;
	if (again) {
		create_retry[i].parent = 0;
		__atomic_sub_fetch(&create_retry_used, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&create_retry_lock);
	return again;
}

/*
 * Forget thread @pid's notes, at its OPEN: the kernel's walk again found
 * the name and opens what is there, so the note was not needed; kept, it
 * would have the thread's next CREATE that meets a taken name within
 * ZR_CREATE_RETRY_MS opened as the caller instead of answered ESTALE.
 * Pid 0 (callers the daemon's pid namespace cannot see, all alike) forgets
 * none: it would forget the others' notes. Expired notes of any thread go
 * too. Costs an OPEN one atomic load when no note is kept.
 */
static void create_retry_forget(pid_t pid)
{
	uint64_t now;
	unsigned int i;

	if (!__atomic_load_n(&create_retry_used, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&create_retry_lock);
	/* (read under the lock: a note written meanwhile, after an earlier
	 * reading, would look 2^64 ms old, helper-82) */
	now = zr_now_ms();
	for (i = 0; i < ZR_CREATE_RETRY_SLOTS; i++) {
		if (create_retry[i].parent &&
		    ((pid != 0 && create_retry[i].pid == pid) ||
		     now - create_retry[i].at_ms >= ZR_CREATE_RETRY_MS)) {
			create_retry[i].parent = 0;
			__atomic_sub_fetch(&create_retry_used, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_unlock(&create_retry_lock);
}

/* The raw setgroups system call, which changes the calling thread only
 * (glibc's setgroups() changes every thread); the 32-bit gid one where a
 * 16-bit one has the plain name. @return 0 or -1 with errno. */
static int thread_setgroups(size_t n, const gid_t *groups)
{
#ifdef SYS_setgroups32
	return (int)syscall(SYS_setgroups32, n, groups);
#else
	return (int)syscall(SYS_setgroups, n, groups);
#endif
}

/*
 * Open @name of @pfd, a regular file already there, as the caller of @req
 * would: this thread takes the caller's fsuid, fsgid and groups for one
 * openat() with O_CREAT and the access the caller asked for (read and
 * write for O_TRUNC, as the kernel's open wants; O_APPEND kept, for an
 * append-only file), so that the backing filesystem makes the checks of
 * such an open: mode bits, ACLs, and fs.protected_regular in a sticky
 * directory. Capabilities are the root daemon's for a caller of uid 0 and
 * none otherwise. A daemon not run by root opens only for its own user.
 * A name gone by then is made by that open, as the caller's, which is
 * what the caller's open would have done. @flags: the caller's open
 * flags; @mode: the mode to make it with. @out: its stat. @rw_fd: an fd
 * of it opened O_RDWR by the daemon (through /proc/self/fd, so the same
 * file), or -1 when that open failed (ETXTBSY: the cache opens it
 * later). @return 0, or -errno: -ESTALE when the name holds something
 * else than a regular file (a FIFO, a symlink the kernel would follow),
 * which only the kernel can open, or when the daemon cannot take the
 * caller's credentials.
 */
static int open_as_caller(fuse_req_t req, int pfd, const char *name, int flags,
			  mode_t mode, struct stat *out, int *rw_fd)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t some[64], own_some[64], *groups = some, *own = own_some;
	int acc = flags & O_ACCMODE, n = 0, n_own = -1, fd = -1, rc = 0;
	bool switched = false;
	uid_t old_uid = 0;
	gid_t old_gid = 0;
	char path[32];
	struct stat st;

	*rw_fd = -1;
	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode))
		return -ESTALE;
	if ((acc == O_RDONLY && (flags & O_TRUNC)) || acc == O_ACCMODE)
		acc = O_RDWR;
	if (geteuid() != 0 && ctx->uid != geteuid())
		return -ESTALE;
	if (geteuid() == 0 && (ctx->uid != 0 || ctx->gid != 0)) {
		n = fuse_req_getgroups(req, (int)ZR_ARRAY_SIZE(some), some);
		if (n > (int)ZR_ARRAY_SIZE(some)) {
			int max = n;

			groups = malloc(sizeof(*groups) * (size_t)max);
			if (!groups)
				return -ENOMEM;
			n = fuse_req_getgroups(req, max, groups);
			if (n > max)
				n = max;
		}
		if (n < 0)
			n = 0;	/* the caller is gone: its primary group only */
		n_own = getgroups(0, NULL);
		if (n_own > (int)ZR_ARRAY_SIZE(own_some)) {
			own = malloc(sizeof(*own) * (size_t)n_own);
			if (!own) {
				rc = -ENOMEM;
				n_own = -1;
				goto out;
			}
		}
		if (n_own >= 0)
			n_own = getgroups(n_own, own);
		if (n_own < 0 || thread_setgroups((size_t)n, groups) < 0) {
			zr_log(ZR_LOG_WARNING, "cannot take a caller's groups to open '%s' for it: %s",
			       name, strerror(errno));
			rc = -ESTALE;
			n_own = -1;
			goto out;
		}
		old_gid = (gid_t)setfsgid(ctx->gid);
		old_uid = (uid_t)setfsuid(ctx->uid);
		switched = true;
		if ((uid_t)setfsuid((uid_t)-1) != ctx->uid ||
		    (gid_t)setfsgid((gid_t)-1) != ctx->gid) {
			zr_log(ZR_LOG_WARNING, "cannot take a caller's uid and gid to open '%s' for it",
			       name);
			rc = -ESTALE;
			goto out;
		}
	}
	fd = openat(pfd, name,
		    O_CREAT | acc | (flags & O_APPEND) | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
		    mode & 07777);
	if (fd < 0) {
		rc = errno == ELOOP || errno == ENXIO ? -ESTALE : -errno;
		goto out;
	}
	if (fstat(fd, out) < 0)
		rc = -errno;
	else if (!S_ISREG(out->st_mode))
		rc = -ESTALE;
out:
	if (switched) {
		setfsuid(old_uid);
		setfsgid(old_gid);
	}
	if (n_own >= 0 && thread_setgroups((size_t)n_own, own) < 0)
		zr_log(ZR_LOG_ERR, "could not give a thread its groups back: %s", strerror(errno));
	if (groups != some)
		free(groups);
	if (own != own_some)
		free(own);
	if (fd < 0)
		return rc;
	if (rc == 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		*rw_fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
	}
	close(fd);
	return rc;
}

/*
 * Take back entry @name of @pfd that this request made, when giving it to
 * the caller failed (fchownat: EDQUOT, EPERM on a filesystem without
 * owners): left behind, it would be root's. @fd: the created file's fd, to
 * check that the name still holds it, or -1 (a node; the kernel holds the
 * parent locked through the request, so only a change behind zramfs's back
 * could race). Best effort: the caller's error is what reaches the user.
 */
static void undo_create(int pfd, const char *name, bool is_dir, int fd)
{
	struct stat a, b;

	if (fd >= 0 && (fstat(fd, &a) < 0 || fstatat(pfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
			a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		return;
	if (unlinkat(pfd, name, is_dir ? AT_REMOVEDIR : 0) < 0)
		zr_log(ZR_LOG_WARNING, "could not remove '%s', created for a caller it could not be given to: %s",
		       name, strerror(errno));
}

/*
 * The mode to make a node with, from the one the kernel sent. With acl=on
 * the kernel leaves the caller's umask out (FUSE_DONT_MASK): a directory
 * @pfd with a default ACL gives the new node its ACL, which the backing
 * filesystem applies from the full mode (the umask has no say, POSIX.1e);
 * without one, the umask applies. The daemon's own umask is 0.
 * @return the mode.
 */
static mode_t new_mode(fuse_req_t req, int pfd, mode_t mode)
{
	if (!zr_fs_of(req)->acl_on)
		return mode;
	if (fgetxattr(pfd, "system.posix_acl_default", NULL, 0) > 0)
		return mode;
	return mode & ~fuse_req_ctx(req)->umask;
}

/* mknod/mkdir/symlink: create, give to the caller, look up, reply. */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, dev_t rdev, const char *link)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *p = zr_inode_from_ino(fs, parent);
	struct fuse_entry_param e;
	int pfd, rc;

	if (zr_is_ctl(parent) || (parent == FUSE_ROOT_ID && strcmp(name, ZR_CTL_DIRNAME) == 0)) {
		fuse_reply_err(req, zr_is_ctl(parent) ? EPERM : EEXIST);
		return;
	}
	pfd = zr_fd_get(fs, p);
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	if (!link)
		mode = new_mode(req, pfd, mode);
	if (link)
		rc = symlinkat(link, pfd, name);
	else if (S_ISDIR(mode))
		rc = mkdirat(pfd, name, mode & 07777);
	else
		rc = mknodat(pfd, name, mode, rdev);
	rc = rc < 0 ? -errno : 0;
	if (rc == 0) {
		rc = give_to_caller(req, pfd, name, -1, link ? S_IFLNK : mode, NULL, NULL);
		/* (ESTALE: the name holds another file now, not ours) */
		if (rc && rc != -ESTALE)
			undo_create(pfd, name, S_ISDIR(mode), -1);
	}
	if (rc == 0)
		rc = do_lookup(fs, p, pfd, name, &e);
	zr_fd_put(fs, p);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void zr_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode, dev_t rdev)
{
	make_node(req, parent, name, mode, rdev, NULL);
}

static void zr_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
			mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | mode, 0, NULL);
}

static void zr_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
			  const char *name)
{
	make_node(req, parent, name, S_IFLNK | 0777, 0, link);
}

/* The inode in our table for (@pfd, @name), with a reference, or NULL. */
static struct zr_inode *find_child(struct zr_fs *fs, int pfd, const char *name,
				   struct stat *st)
{
	struct zr_inode_key key;
	struct zr_inode *ino = NULL;

	if (fstatat(pfd, name, st, AT_SYMLINK_NOFOLLOW) < 0)
		return NULL;
	key.dev = st->st_dev;
	key.ino = st->st_ino;
	pthread_mutex_lock(&fs->itable_lock);
	HASH_FIND(hh, fs->inodes, &key, sizeof(key), ino);
	if (ino)
		ino->refs++;
	pthread_mutex_unlock(&fs->itable_lock);
	return ino;
}

/*
 * Removing a name. The caller holds victim->lock for writing from
 * prepare_unlink() through the backing unlink/rename to finish_unlink() (or
 * undo_pin()), so that two names of one file removed at once, through two
 * directories, are handled one after the other, each with the link count
 * read under the lock.
 *
 * prepare_unlink(): the name (@p, @name) of @victim, in the directory
 * @pfd, is going away. *@nlink holds the file's link count as last seen;
 * above 1 it is read again under the lock (another name may just have
 * gone; a count of 1 cannot drop before this unlink). When it is the last
 * name we know of the file, nothing will reach the file by name
 * afterwards:
 *  - one with other links (names never looked up) has its dirty blocks
 *    written back now, while this name still reaches it; they belong to
 *    those names (a writeback error stays for the file's fsync/close);
 *  - an open one gets a second name in the orphan directory (@oname;
 *    zr_orphan_link()), by which it stays readable and writable until the
 *    last close and the kernel's FORGET (zr_orphan_reap()) without holding
 *    an fd, with other links or not (what is written meanwhile is theirs:
 *    zr_orphan_remove() writes it back); so does one without other links
 *    that a rename replaces (@replace) while the kernel holds a lookup of
 *    it: a path resolved before the rename may still open it, as it could
 *    on a local filesystem. Where that cannot be (no orphan directory, no
 *    hard links, a full disk) an open one's fd is pinned (*@pinned: by
 *    this call), up to pins_max() of them: past that, -EBUSY;
 *  - a directory that is open or that the kernel holds (a working
 *    directory) keeps its fd pinned until its last RELEASEDIR and FORGET
 *    (zr_dir_unpin()), so that fstat and readdir still reach it.
 * @return 0, or -errno when that cannot be done: the name must then stay
 * (out of fds, or the backing filesystem refuses the writeback). Keeping
 * a removed directory is best effort: each one holds an fd, and a process
 * can hold thousands, by O_PATH descriptors (which send no OPENDIR) or
 * open ones (an open directory costs no fd until it is read), so past
 * pins_max() or out of fds it goes without: its listing is then empty
 * all the same (do_readdir()), and an fstat through it is answered from
 * the attributes kept at the removal (gone_stat()) (helper-48:
 * 20 processes holding 1000 open directories each, then removing them,
 * took every fd the daemon could open, and every WRITE failed).
 */
/* Removed directories that are open or only held by the kernel (working
 * directories, O_PATH descriptors) keep a pinned fd up to this many, and
 * so do files unlinked while open that could get no orphan's name (a full
 * disk, no hard links), each kind apart: a quarter of max_fds, at least
 * 16, so that they cannot take the daemon's fds. */
static unsigned pins_max(const struct zr_fs *fs)
{
	return ZR_MAX(fs->opt->max_fds / 4, 16u);
}

static int prepare_unlink(struct zr_fs *fs, struct zr_inode *victim, struct zr_inode *p,
			  int pfd, const char *name, bool replace, nlink_t *nlink,
			  bool *pinned, char oname[NAME_MAX + 1])
{
	struct stat st;
	int fd, rc;

	*pinned = false;
	*oname = '\0';
	if (S_ISREG(victim->type) && *nlink > 1) {
		if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		*nlink = st.st_nlink;
	}
	if (S_ISREG(victim->type) && *nlink > 1) {
		if (!zr_alias_is_last(fs, victim, p, name))
			return 0;
		rc = zr_data_writeback_inode(fs, victim);
		if (rc)
			return rc;
	}
	if (!S_ISREG(victim->type) && !S_ISDIR(victim->type))
		return 0;
	/* an open file keeps an orphan until its last close, also one with
	 * links we never looked up (it used to keep a pinned fd, one per
	 * such file); a file replaced by a rename may be opened by a path
	 * the kernel resolved before: it keeps one until the kernel forgets
	 * it */
	if (S_ISREG(victim->type) && !victim->fd_pinned &&
	    (victim->open_count > 0 ||
	     (replace && *nlink <= 1 && zr_inode_looked_up(fs, victim))) &&
	    zr_orphan_link(fs, victim, pfd, name, oname) == 0)
		return 0;
	/* a removed directory may stay some process's working directory,
	 * which the kernel holds by a lookup only: it keeps its fd until the
	 * FORGET as well (stat ., ls . then work, as on a local filesystem) */
	if (victim->fd_pinned ||
	    (victim->open_count == 0 &&
	     !(S_ISDIR(victim->type) && zr_inode_looked_up(fs, victim))))
		return 0;
	/* a directory is kept when it can be: at most pins_max() of
	 * them, and not when out of fds; its removal goes on as it used to */
	if (S_ISDIR(victim->type) &&
	    __atomic_load_n(&fs->dir_pins, __ATOMIC_RELAXED) >= pins_max(fs))
		return 0;
	/* an open file without an orphan's name needs its fd: past
	 * pins_max() of them its name stays */
	if (S_ISREG(victim->type) &&
	    __atomic_load_n(&fs->file_pins, __ATOMIC_RELAXED) >= pins_max(fs)) {
		if (!__atomic_exchange_n(&fs->file_pins_said, true, __ATOMIC_RELAXED))
			zr_log(ZR_LOG_WARNING, "%u files unlinked while open hold an fd each, as no orphan's name could be made for them: unlinking more open files fails with EBUSY until some are closed",
			       pins_max(fs));
		return -EBUSY;
	}
	fd = zr_fd_get(fs, victim);
	if (fd < 0)
		return victim->open_count == 0 || S_ISDIR(victim->type) ? 0 : fd;
	zr_fd_pin(fs, victim);
	zr_fd_put(fs, victim);
	victim->fd_pinned = true;
	__atomic_add_fetch(S_ISDIR(victim->type) ? &fs->dir_pins : &fs->file_pins, 1,
			   __ATOMIC_RELAXED);
	*pinned = true;
	return 0;
}

/* The backing call failed: drop the pin or the orphan's name that
 * prepare_unlink() took for it. */
static void undo_pin(struct zr_fs *fs, struct zr_inode *victim, bool pinned,
		     const char *oname)
{
	if (*oname)
		zr_orphan_unlink(fs, victim, oname);
	if (!pinned)
		return;
	victim->fd_pinned = false;
	__atomic_sub_fetch(S_ISDIR(victim->type) ? &fs->dir_pins : &fs->file_pins, 1,
			   __ATOMIC_RELAXED);
	zr_fd_unpin(fs, victim);
}

/*
 * Before the backing call that may remove @victim's last link, (@p, @name)
 * with link count @nlink (as finish_unlink() decides it): take @victim out
 * of the table (zr_inode_removing()). Without it, a file made in another
 * directory while the call freed the number found @victim under it and, a
 * file without a handle having nothing else to tell them apart by, showed
 * @victim's size and data and took its dirty blocks. Caller holds
 * victim->lock for writing.
 * @return whether it was taken out: the caller then calls
 * zr_inode_removed() once the call is done, before it unlocks.
 */
static bool unhash_early(struct zr_fs *fs, struct zr_inode *victim, struct zr_inode *p,
			 const char *name, nlink_t nlink)
{
	if (!(nlink <= 1 || S_ISDIR(victim->type)) || !zr_alias_is_last(fs, victim, p, name))
		return false;
	return zr_inode_removing(fs, victim);
}

/* After the backing unlink of (@p, @name), @victim's link count having
 * been @nlink: forget the name; an open file reached by its orphan's name
 * @oname from now on; drop the data of a file whose last link went and that
 * nobody has open. Caller holds victim->lock (see above). */
static void finish_unlink(struct zr_fs *fs, struct zr_inode *victim,
			  struct zr_inode *p, const char *name, nlink_t nlink,
			  const char *oname, const struct stat *st)
{
	bool none = zr_alias_remove(fs, victim, p, name);
	bool last = none && (nlink <= 1 || S_ISDIR(victim->type));

	if (last) {
		struct stat now = *st;

		zr_inode_unhash(fs, victim);
		/* its attributes, for the kernel's requests once nothing
		 * else holds it (gone_stat()); an unlink changes the ctime */
		clock_gettime(CLOCK_REALTIME, &now.st_ctim);
		gone_keep(fs, victim, &now);
	}
	if (*oname) {
		zr_orphan_attach(fs, victim, nlink > 1);
		/* (a FORGET cannot pass the RENAME whose target this is, but
		 * should the kernel hold nothing now, nothing will reap it) */
		if (victim->open_count == 0 && !zr_inode_looked_up(fs, victim) &&
		    !zr_orphan_remove(fs, victim))
			zr_data_drop_inode(fs, victim);
	} else if (last && S_ISREG(victim->type) && victim->open_count == 0) {
		zr_data_drop_inode(fs, victim);
	}
}

/* unlink (@at_flags 0) or rmdir (AT_REMOVEDIR) of (@parent, @name): the
 * backing call between prepare_unlink() and finish_unlink()/undo_pin().
 * @return 0 or -errno. */
static int remove_name(struct zr_fs *fs, struct zr_inode *p, const char *name,
		       int at_flags)
{
	struct zr_inode *victim;
	bool pinned = false, early = false, counted;
	char oname[NAME_MAX + 1] = "";
	struct stat st;
	nlink_t nlink;
	int pfd, rc = 0;

	pfd = zr_fd_get(fs, p);
	if (pfd < 0)
		return pfd;
	victim = find_child(fs, pfd, name, &st);
	nlink = victim ? st.st_nlink : 0;
	if (victim) {
		pthread_rwlock_wrlock(&victim->lock);
		rc = prepare_unlink(fs, victim, p, pfd, name, false, &nlink, &pinned, oname);
		if (rc == 0)
			early = unhash_early(fs, victim, p, name, nlink);
	}
	/* (a name that reaches nothing until our names change, as for a
	 * rename: zr_rename_wait()) */
	counted = victim && rc == 0;
	if (counted)
		zr_rename_begin(victim);
	if (rc == 0)
		rc = unlinkat(pfd, name, at_flags) < 0 ? -errno : 0;
	if (victim) {
		if (rc == 0)
			finish_unlink(fs, victim, p, name, nlink, oname, &st);
		else
			undo_pin(fs, victim, pinned, oname);	/* not empty, say */
		if (counted)
			zr_rename_end(fs, victim);
		if (early)
			zr_inode_removed(fs, victim, rc == 0);
		pthread_rwlock_unlock(&victim->lock);
		zr_inode_unref(fs, victim);
	}
	zr_fd_put(fs, p);
	return rc;
}

static void zr_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zr_fs *fs = zr_fs_of(req);

	if (zr_is_ctl(parent)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_err(req, -remove_name(fs, zr_inode_from_ino(fs, parent), name, 0));
}

static void zr_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct zr_fs *fs = zr_fs_of(req);

	if (zr_is_ctl(parent) || (parent == FUSE_ROOT_ID && strcmp(name, ZR_CTL_DIRNAME) == 0)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_err(req, -remove_name(fs, zr_inode_from_ino(fs, parent), name,
					 AT_REMOVEDIR));
}

static void zr_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
			 fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *op = zr_inode_from_ino(fs, parent);
	struct zr_inode *np = zr_inode_from_ino(fs, newparent);
	struct zr_inode *src = NULL, *dst = NULL;
	struct zr_alias *src_name = NULL, *dst_name = NULL;	/* their new names */
	struct stat sst, dst_st;
	bool pinned = false, early = false, counted;
	char oname[NAME_MAX + 1] = "";
	nlink_t nlink;
	int ofd, nfd, rc;

	if (zr_is_ctl(parent) || zr_is_ctl(newparent) ||
	    (parent == FUSE_ROOT_ID && strcmp(name, ZR_CTL_DIRNAME) == 0) ||
	    (newparent == FUSE_ROOT_ID && strcmp(newname, ZR_CTL_DIRNAME) == 0)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	ofd = zr_fd_get(fs, op);
	if (ofd < 0) {
		fuse_reply_err(req, -ofd);
		return;
	}
	nfd = zr_fd_get(fs, np);
	if (nfd < 0) {
		zr_fd_put(fs, op);
		fuse_reply_err(req, -nfd);
		return;
	}
	src = find_child(fs, ofd, name, &sst);
	dst = find_child(fs, nfd, newname, &dst_st);
	if (dst == src && src) {
		/* two names of one inode: rename(2) does nothing */
		zr_inode_unref(fs, dst);
		dst = NULL;
	}
	/* the names the inodes we know get, made first: nothing may fail
	 * after the backing rename (an inode left without its name could
	 * not be reached to write its data back) */
	rc = 0;
	if (src && !(src_name = zr_alias_new(newname)))
		rc = -ENOMEM;
	if (dst && (flags & RENAME_EXCHANGE) && !(dst_name = zr_alias_new(name)))
		rc = -ENOMEM;
	nlink = dst ? dst_st.st_nlink : 0;
	if (dst && !(flags & RENAME_EXCHANGE)) {
		pthread_rwlock_wrlock(&dst->lock);
		/* (RENAME_NOREPLACE: the kernel saw no target, so this one
		 * was made behind its back, and the call fails with EEXIST) */
		if (rc == 0 && !(flags & RENAME_NOREPLACE)) {
			rc = prepare_unlink(fs, dst, np, nfd, newname, true, &nlink,
					    &pinned, oname);
			if (rc == 0)
				early = unhash_early(fs, dst, np, newname, nlink);
		}
	}
	/* from the backing call to the change of our names, a name of src
	 * or dst reaches another file or nothing: readers of it wait
	 * (zr_rename_wait()) */
	counted = rc == 0;
	if (counted && src)
		zr_rename_begin(src);
	if (counted && dst)
		zr_rename_begin(dst);
	if (rc == 0)
		rc = renameat2(ofd, name, nfd, newname, flags) < 0 ? -errno : 0;
	if (rc == 0) {
		if (dst && (flags & RENAME_EXCHANGE))
			zr_alias_rename(fs, dst, np, newname, op, dst_name);
		else if (dst)
			finish_unlink(fs, dst, np, newname, nlink, oname, &dst_st);
		if (src)
			zr_alias_rename(fs, src, op, name, np, src_name);
	} else {
		free(src_name);
		free(dst_name);
		if (dst && !(flags & RENAME_EXCHANGE))
			undo_pin(fs, dst, pinned, oname);
	}
	if (counted && src)
		zr_rename_end(fs, src);
	if (counted && dst)
		zr_rename_end(fs, dst);
	if (early)
		zr_inode_removed(fs, dst, rc == 0);
	if (dst && !(flags & RENAME_EXCHANGE))
		pthread_rwlock_unlock(&dst->lock);
	if (src)
		zr_inode_unref(fs, src);
	if (dst)
		zr_inode_unref(fs, dst);
	zr_fd_put(fs, np);
	zr_fd_put(fs, op);
	fuse_reply_err(req, -rc);
}

static void zr_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		       const char *newname)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in = zr_inode_from_ino(fs, ino);
	struct zr_inode *np = zr_inode_from_ino(fs, newparent);
	struct fuse_entry_param e;
	struct zr_at at;
	int nfd, rc;

	if (zr_is_ctl(ino) || zr_is_ctl(newparent) ||
	    (newparent == FUSE_ROOT_ID && strcmp(newname, ZR_CTL_DIRNAME) == 0)) {
		fuse_reply_err(req, EPERM);
		return;
	}
	rc = at_get(fs, in, &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	nfd = zr_fd_get(fs, np);
	if (nfd < 0) {
		at_put(fs, &at);
		fuse_reply_err(req, -nfd);
		return;
	}
	rc = linkat(at.dirfd, at.name, nfd, newname,
		    at.name[0] ? 0 : AT_EMPTY_PATH) < 0 ? -errno : 0;
	if (rc == 0) {
		rc = do_lookup(fs, np, nfd, newname, &e);
		/* (out of memory) the link fails: the name it made goes, if
		 * it still holds the file, rather than stay unknown to the
		 * kernel and to us */
		if (rc && zr_name_reaches(nfd, newname, &in->key))
			(void)unlinkat(nfd, newname, 0);
	}
	zr_fd_put(fs, np);
	at_put(fs, &at);
	/* a file reached by an orphan's name (O_TMPFILE) has one of the
	 * user's now: the orphan's goes */
	if (rc == 0 && __atomic_load_n(&in->orphaned, __ATOMIC_RELAXED)) {
		pthread_rwlock_wrlock(&in->lock);
		zr_orphan_linked(fs, in);
		pthread_rwlock_unlock(&in->lock);
	}
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_entry(req, &e);
}

static void release_pinned(struct zr_fs *fs, struct zr_inode *in);

/*
 * An open file handle begins (OPEN, CREATE): it is counted first, before
 * the file's fd is looked for, so that a last RELEASE of another handle
 * running meanwhile keeps the file's orphan name, pinned fd and data for
 * this one. A regular file that has lost all of that already (its last name
 * went and its last handle closed between the kernel's lookup and this
 * open) cannot be given its data back: -ESTALE then, rather than a file
 * that reads what never reached the disk. @writer: the handle is opened
 * for writing (counted in write_count too). @return 0 (end the handle with
 * handle_end()) or -ESTALE.
 */
static int handle_begin(struct zr_inode *in, bool writer)
{
	int rc = 0;

	pthread_rwlock_wrlock(&in->lock);
	if (S_ISREG(in->type) && __atomic_load_n(&in->unlinked, __ATOMIC_RELAXED) &&
	    !in->orphaned && !in->fd_pinned && in->open_count == 0) {
		rc = -ESTALE;
	} else {
		in->open_count++;
		if (writer)
			__atomic_store_n(&in->write_count, in->write_count + 1, __ATOMIC_RELAXED);
	}
	pthread_rwlock_unlock(&in->lock);
	return rc;
}

/*
 * A file handle ends (RELEASE, or an OPEN/CREATE that failed after
 * handle_begin()). The last one of a file whose last name went cleans up:
 * its orphan's name goes, and its data unless it was linked again, once
 * the kernel has forgotten the inode too (zr_orphan_reap()); or its pinned
 * fd goes (release_pinned()). @writer: as given to handle_begin().
 */
static void handle_end(struct zr_fs *fs, struct zr_inode *in, bool writer)
{
	bool last, orphan;

	pthread_rwlock_wrlock(&in->lock);
	if (writer)
		__atomic_store_n(&in->write_count, in->write_count - 1, __ATOMIC_RELAXED);
	last = --in->open_count == 0 && in->fd_pinned;
	if (last)
		in->fd_pinned = false;	/* the pin is release_pinned()'s now */
	orphan = in->open_count == 0 && in->orphaned;
	pthread_rwlock_unlock(&in->lock);
	if (orphan)
		zr_orphan_reap(fs, in);	/* (or at the kernel's FORGET) */
	if (last)
		release_pinned(fs, in);
}

static void zr_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	unsigned mark;
	bool writer;
	int fd, rc;

	if (zr_is_ctl(ino)) {
		zr_ctl_open(req, fs, ino, fi);
		return;
	}
	create_retry_forget(fuse_req_ctx(req)->pid);
	in = zr_inode_from_ino(fs, ino);
	if (fs->read_only && (fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	writer = zr_fh_of(fi->flags) & ZR_FH_WRITER;
	rc = handle_begin(in, writer);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* a reopen by name during a rename of the file reached another file
	 * or nothing: again once it ended (zr_rename_wait(); no lock held) */
	do {
		mark = zr_rename_mark(in);
		fd = zr_fd_get_waiting(fs, in);	/* (its parents' reopens too) */
	} while ((fd == -ESTALE || fd == -ENOENT) && zr_rename_wait(fs, in, mark));
	if (fd < 0) {
		rc = fd;
	} else {
		/* (read-only when the file was not writable at the reopen) */
		if ((fi->flags & O_ACCMODE) != O_RDONLY && S_ISREG(in->type))
			rc = zr_fd_make_writable(fs, in, fd);
		if (rc == 0)
			rc = zr_data_attach(fs, in, fd, false);
		/* libfuse asks for atomic O_TRUNC: the kernel sends no truncate */
		if (rc == 0 && (fi->flags & O_TRUNC) && S_ISREG(in->type))
			rc = zr_data_truncate(fs, in, fd, 0, true);
		zr_fd_put(fs, in);
	}
	if (rc) {
		handle_end(fs, in, writer);
		fuse_reply_err(req, -rc);
		return;
	}
	zr_inode_ref(fs, in);
	fi->keep_cache = 1;
	/* O_DIRECT: no direct_io reply flag; the kernel's own O_DIRECT path
	 * first writes back a cached extension of the file */
	fi->fh = zr_fh_of(fi->flags);
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* the opener is gone (interrupted): no RELEASE will come */
		handle_end(fs, in, writer);
		zr_inode_unref(fs, in);
	}
}

/*
 * open(2) with O_TMPFILE (FUSE_TMPFILE, which zr_session_map_request()
 * hands to zr_op_create()): a file without a name in the directory @pfd,
 * given to the caller, reached by a name in the orphan directory
 * (zr_orphan_tmpfile()) and counted as unlinked while open; its last
 * close, once the kernel forgets it, removes it and its data, and a
 * link(2) of it gives it a name as any other file, and ends the orphan's
 * (zr_op_link(), zr_orphan_linked()).
 * @fdp receives the file's fd, installed as its cached fd; @e its entry,
 * with a link count of 0, as the kernel wants it. @return 0 or -errno
 * (-EOPNOTSUPP: the backing filesystem has no O_TMPFILE, or no orphan
 * directory can be made).
 */
static int make_tmpfile(fuse_req_t req, int pfd, mode_t mode, int *fdp,
			struct fuse_entry_param *e)
{
	struct zr_fs *fs = zr_fs_of(req);
	char oname[NAME_MAX + 1] = "";
	struct zr_inode *in;
	struct stat st;
	int fd, rc;

	fd = openat(pfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, mode & 07777);
	if (fd < 0)
		return errno == EISDIR ? -EOPNOTSUPP : -errno;	/* (EISDIR: no O_TMPFILE) */
	rc = give_to_caller(req, pfd, NULL, fd, S_IFREG, NULL, NULL);
	if (rc == 0)
		rc = zr_orphan_tmpfile(fs, fd, oname);
	if (rc == 0)
		rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (rc == 0)
		rc = do_lookup_stat(fs, &fs->orphans, fs->orphans.fd, oname, &st, e);
	if (rc) {
		if (*oname)
			(void)unlinkat(fs->orphans.fd, oname, 0);
		close(fd);
		return rc;
	}
	in = zr_inode_from_ino(fs, e->ino);
	zr_fd_install(fs, in, fd);
	pthread_rwlock_wrlock(&in->lock);
	zr_orphan_attach(fs, in, false);
	pthread_rwlock_unlock(&in->lock);
	e->attr.st_nlink = 0;
	*fdp = fd;
	return 0;
}

/*
 * Hand @fd, the file a CREATE made or opened (@st its stat), to the cache
 * as the fd of the inode its lookup @e found, or close it (@fd -1: none).
 * The lookup found the file the name holds by then: another one when the
 * name was removed or replaced behind zramfs's back since, and the fd
 * must not become that file's. @return 0, or -ESTALE after dropping the
 * lookup (the kernel then looks the name up again, once).
 */
static int install_created(struct zr_fs *fs, const struct fuse_entry_param *e,
			   const struct stat *st, int fd)
{
	struct zr_inode *in = zr_inode_from_ino(fs, e->ino);

	if (in->key.dev != st->st_dev || in->key.ino != st->st_ino) {
		if (fd >= 0)
			close(fd);
		zr_inode_forget(fs, in, 1);
		return -ESTALE;
	}
	if (fd >= 0)
		zr_fd_install(fs, in, fd);
	return 0;
}

static void zr_op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
			 mode_t mode, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *p = zr_inode_from_ino(fs, parent), *in;
	struct fuse_entry_param e;
	struct stat st;
	bool created, have_st, writer = zr_fh_of(fi->flags) & ZR_FH_WRITER;
	int pfd, fd, rc;

	if (zr_is_ctl(parent) || (parent == FUSE_ROOT_ID && strcmp(name, ZR_CTL_DIRNAME) == 0)) {
		fuse_reply_err(req, zr_is_ctl(parent) ? EPERM : EEXIST);
		return;
	}
	pfd = zr_fd_get(fs, p);
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	mode = new_mode(req, pfd, mode);
	if (strcmp(name, zr_tmpfile_name) == 0) {
		rc = make_tmpfile(req, pfd, mode, &fd, &e);
		zr_fd_put(fs, p);
		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
		created = true;
		in = zr_inode_from_ino(fs, e.ino);
		goto begin;
	}
	/* O_EXCL: the file is new (empty, without capabilities:
	 * zr_data_attach() need not look); one already there is for the
	 * kernel to open (below) */
	fd = openat(pfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC,
		    mode & 07777);
	created = fd >= 0;
	if (created)	/* (a note of this thread's, unused, is stale now) */
		create_retry_take(parent, fuse_req_ctx(req)->pid, name);
	if (fd < 0) {
		rc = errno;
		/*
		 * The name holds something the kernel did not know of: made
		 * in the backing directory while the kernel held a negative
		 * entry for it, since the kernel sends a CREATE only for a
		 * name it believes free, and serializes those of one
		 * directory. Without O_EXCL, ESTALE has the kernel walk the
		 * path again with LOOKUP_REVAL, which drops the negative
		 * entry, looks the name up and opens what it finds itself,
		 * with every check of an open: permissions and ACLs, and
		 * fs.protected_regular, protected_fifos and
		 * protected_symlinks for a name in a sticky directory (the
		 * daemon used to open the file itself, checking only its
		 * mode or ACL; opening as root it met those sysctls in the
		 * backing directory instead, against itself: the file's
		 * owner got EACCES; and a FIFO gave EIO).
		 */
		if (rc == EEXIST && !(fi->flags & O_EXCL) &&
		    create_retry_take(parent, fuse_req_ctx(req)->pid, name)) {
			/*
			 * The kernel's walk again after such an ESTALE, and
			 * the name was made again between its LOOKUP, which
			 * found it free, and this CREATE. The kernel walks
			 * again only once: another ESTALE would fail
			 * open(2), which it never does on a local
			 * filesystem. So open what is there as the caller
			 * would (helper-78's loop that makes and removes a
			 * name behind the mount's back).
			 */
			zr_stat_add(&fs->creates_as_caller, 1);
			rc = open_as_caller(req, pfd, name, fi->flags, mode, &st, &fd);
			if (rc == 0)
				rc = do_lookup_stat(fs, p, pfd, name, &st, &e);
			zr_fd_put(fs, p);
			if (rc == 0)
				rc = install_created(fs, &e, &st, fd);
			else if (fd >= 0)
				close(fd);
			if (rc) {
				fuse_reply_err(req, -rc);
				return;
			}
			created = false;
			in = zr_inode_from_ino(fs, e.ino);
			goto begin;
		}
		if (rc == EEXIST && !(fi->flags & O_EXCL)) {
			rc = ESTALE;
			zr_stat_add(&fs->creates_stale, 1);
			create_retry_note(parent, fuse_req_ctx(req)->pid, name);
		}
		zr_fd_put(fs, p);
		fuse_reply_err(req, rc);
		return;
	}
	have_st = false;
	rc = give_to_caller(req, pfd, name, fd, S_IFREG, &st, &have_st);
	if (rc)
		undo_create(pfd, name, false, fd);
	/* the file this fd holds, not whatever the name holds by now */
	if (rc == 0 && !have_st)
		rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (rc == 0)
		rc = do_lookup_stat(fs, p, pfd, name, &st, &e);
	zr_fd_put(fs, p);
	if (rc == 0)
		rc = install_created(fs, &e, &st, fd);
	else
		close(fd);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	in = zr_inode_from_ino(fs, e.ino);
begin:
	/* (the name may be gone already: another process that found it
	 * removed it; the handle then fails as an open would) */
	rc = handle_begin(in, writer);
	if (rc) {
		zr_inode_forget(fs, in, 1);
		fuse_reply_err(req, -rc);
		return;
	}
	fd = zr_fd_get(fs, in);
	if (fd < 0) {
		rc = fd;
	} else {
		rc = zr_data_attach(fs, in, fd, created);
		/* (a file just made is empty and has the times the kernel
		 * shows: a truncate would note a later one, helper-68) */
		if (rc == 0 && (fi->flags & O_TRUNC) && !created)
			rc = zr_data_truncate(fs, in, fd, 0, true);
		zr_fd_put(fs, in);
	}
	if (rc) {
		handle_end(fs, in, writer);
		zr_inode_forget(fs, in, 1);
		fuse_reply_err(req, -rc);
		return;
	}
	if (fi->flags & O_TRUNC) {
		e.attr.st_size = 0;
		e.attr.st_blocks = 0;
	}
	zr_inode_ref(fs, in);
	fi->keep_cache = 1;
	/* O_DIRECT: no direct_io reply flag; the kernel's own O_DIRECT path
	 * first writes back a cached extension of the file */
	fi->fh = zr_fh_of(fi->flags);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		/* the creator is gone: no RELEASE, and no FORGET for the
		 * lookup the reply carried */
		handle_end(fs, in, writer);
		zr_inode_unref(fs, in);
		zr_inode_forget(fs, in, 1);
	}
}

/*
 * The last close of a file whose last known name went while it was open
 * (prepare_unlink() pinned its fd); the caller has taken the pin over
 * (fd_pinned cleared under the lock). Without a link left, its data goes.
 * A file still linked under names we never looked up has what was written
 * since written back through the pinned fd. The pin stays when that fails,
 * or when the file was opened again meanwhile; else it is dropped.
 */
static void release_pinned(struct zr_fs *fs, struct zr_inode *in)
{
	struct stat st;
	bool have_st = false, linked = false, keep, unpin;
	int fd, rc = 0;

	fd = zr_fd_get_cached(fs, in);
	if (fd >= 0) {
		have_st = fstat(fd, &st) == 0;
		linked = have_st && st.st_nlink > 0;
		zr_fd_put(fs, in);
	}
	if (linked)
		rc = zr_data_writeback_inode(fs, in);
	pthread_rwlock_wrlock(&in->lock);
	keep = in->open_count > 0 || rc != 0;
	if (keep && !in->fd_pinned) {
		in->fd_pinned = true;	/* ours stays */
		unpin = false;
	} else {
		/* done, or pinned again meanwhile: ours is not needed */
		unpin = true;
	}
	if (!keep && !linked && in->unlinked) {
		/* what it was at its last close, for gone_stat() */
		if (have_st)
			gone_keep(fs, in, &st);
		zr_data_drop_inode(fs, in);
	}
	pthread_rwlock_unlock(&in->lock);
	if (unpin) {
		__atomic_sub_fetch(&fs->file_pins, 1, __ATOMIC_RELAXED);
		zr_fd_unpin(fs, in);
	}
}

static void zr_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;

	if (zr_is_ctl(ino)) {
		zr_ctl_release(fs, fi);
		fuse_reply_err(req, 0);
		return;
	}
	in = zr_inode_from_ino(fs, ino);
	handle_end(fs, in, fi->fh & ZR_FH_WRITER);
	zr_inode_unref(fs, in);
	fuse_reply_err(req, 0);
}

/*
 * Directory handles. A handle's stream (a DIR on a backing fd of its own) is
 * opened by its first READDIR, not by OPENDIR: programs hold directories
 * open by the thousand to use them with *at() calls, and never read most of
 * them. At most dirh_max() streams stay open: when another one is needed,
 * the least recently read is closed, its position kept, and it is opened
 * again and seekdir()ed there when it is read next; only on filesystems
 * whose directory offsets a new open file of the directory takes
 * (offsets_survive_reopen()): elsewhere a stream stays open.
 *
 * Locking: zr_dirh.lock serialises the use of one handle's stream (dp, pos,
 * pending). fs->dirh_lock protects the list of handles with a stream open
 * (dirh_head, dirh_tail, ndirh, and each handle's listed/prev/next), and
 * the list of every handle (dirh_all, all_prev/all_next); it is
 * taken alone or under one zr_dirh.lock, and under it the lock of another
 * handle is only try-locked.
 */
struct zr_dirh {
	pthread_mutex_t lock;
	DIR *dp;		/* lock: NULL while closed */
	off_t pos;		/* lock: offset of the next entry dp returns */
	struct dirent *pending;	/* lock: read but not yet replied */
	bool is_root;		/* immutable */
	bool evictable;		/* lock: offsets of its filesystem survive a reopen */
	bool listed;		/* dirh_lock: on the list (its stream is open) */
	struct zr_dirh *prev, *next;	/* dirh_lock: most recently read first */
	struct zr_dirh *all_prev, *all_next;	/* dirh_lock: fs->dirh_all */
};

/* Put @d on (@on) or take it off the list of every handle. */
static void dirh_all_set(struct zr_fs *fs, struct zr_dirh *d, bool on)
{
	pthread_mutex_lock(&fs->dirh_lock);
	if (on) {
		d->all_prev = NULL;
		d->all_next = fs->dirh_all;
		if (fs->dirh_all)
			fs->dirh_all->all_prev = d;
		fs->dirh_all = d;
	} else {
		if (d->all_prev)
			d->all_prev->all_next = d->all_next;
		else
			fs->dirh_all = d->all_next;
		if (d->all_next)
			d->all_next->all_prev = d->all_prev;
	}
	pthread_mutex_unlock(&fs->dirh_lock);
}

/**
 * zr_dirh_free_all() - at the exit, after the session: free the directory
 * handles whose RELEASEDIR never came (the kernel drops those it has not
 * sent when the mount goes; helper-87). Their inodes go with the table.
 */
void zr_dirh_free_all(struct zr_fs *fs)
{
	struct zr_dirh *d, *next;

	pthread_mutex_lock(&fs->dirh_lock);
	for (d = fs->dirh_all; d; d = next) {
		next = d->all_next;
		if (d->dp)
			closedir(d->dp);
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
	fs->dirh_all = NULL;
	fs->dirh_head = fs->dirh_tail = NULL;
	fs->ndirh = 0;
	pthread_mutex_unlock(&fs->dirh_lock);
}

/* Streams kept open at most: a quarter of the fd cache, 16 at least. */
static unsigned dirh_max(const struct zr_fs *fs)
{
	return fs->opt->max_fds / 4 < 16 ? 16 : fs->opt->max_fds / 4;
}

/* Take @d off the list. Caller holds dirh_lock. */
static void dirh_unlist(struct zr_fs *fs, struct zr_dirh *d)
{
	if (d->prev)
		d->prev->next = d->next;
	else
		fs->dirh_head = d->next;
	if (d->next)
		d->next->prev = d->prev;
	else
		fs->dirh_tail = d->prev;
	d->prev = d->next = NULL;
	d->listed = false;
	fs->ndirh--;
}

/*
 * @d (whose lock the caller holds, its stream open) is being read: put it
 * first, and close the streams of the least recently read handles beyond
 * dirh_max() (those not in use at this moment).
 */
static void dirh_touch(struct zr_fs *fs, struct zr_dirh *d)
{
	struct zr_dirh *v, *prev;

	pthread_mutex_lock(&fs->dirh_lock);
	if (d->listed)
		dirh_unlist(fs, d);
	d->next = fs->dirh_head;
	if (fs->dirh_head)
		fs->dirh_head->prev = d;
	else
		fs->dirh_tail = d;
	fs->dirh_head = d;
	d->listed = true;
	fs->ndirh++;
	for (v = fs->dirh_tail; v && fs->ndirh > dirh_max(fs); v = prev) {
		prev = v->prev;
		if (v == d || pthread_mutex_trylock(&v->lock) != 0)
			continue;
		if (!v->evictable) {
			pthread_mutex_unlock(&v->lock);
			continue;
		}
		dirh_unlist(fs, v);
		closedir(v->dp);
		v->dp = NULL;
		v->pending = NULL;
		pthread_mutex_unlock(&v->lock);
	}
	pthread_mutex_unlock(&fs->dirh_lock);
}

/*
 * Whether the directory offsets of the filesystem of @fd are cookies that a
 * new open file of the directory takes (hashes or indices: ext2/3/4, xfs,
 * btrfs, NFS, and tmpfs since Linux 6.6), so that its stream may be closed
 * and reopened at the same place. Elsewhere (positions: older tmpfs,
 * overlayfs, FUSE, CIFS...) a reopened listing could skip entries, so the
 * stream stays open for as long as the handle.
 */
static bool offsets_survive_reopen(int fd)
{
	static int tmpfs_ok = -1;	/* (a benign race: same answer) */
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case 0xEF53:		/* ext2, ext3, ext4 */
	case 0x58465342:	/* xfs */
	case 0x9123683E:	/* btrfs */
	case 0x6969:		/* nfs */
		return true;
	case 0x01021994:	/* tmpfs: stable offsets since 6.6 */
		if (tmpfs_ok < 0)
			tmpfs_ok = zr_kernel_at_least(6, 6);
		return tmpfs_ok;
	default:
		return false;
	}
}

/*
 * Open the stream of @d (lock held) on directory @dir, at d->pos.
 * @return 0 or -errno.
 */
static int dirh_open(struct zr_fs *fs, struct zr_dirh *d, struct zr_inode *dir)
{
	int fd, dfd, rc;

	/* (during a rename of it: after it; a rename needs no handle's lock) */
	fd = zr_fd_get_waiting(fs, dir);
	if (fd < 0)
		return fd;
	dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = dfd < 0 ? -errno : 0;
	zr_fd_put(fs, dir);
	if (rc)
		return rc;
	d->evictable = offsets_survive_reopen(dfd);
	d->dp = fdopendir(dfd);
	if (!d->dp) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	if (d->pos)
		seekdir(d->dp, d->pos);
	d->pending = NULL;
	return 0;
}

/*
 * OPENDIR: a handle, without a stream yet (do_readdir() opens it). The
 * directory counts its open handles, so that rmdir can keep an open one
 * reachable (prepare_unlink()); the handle holds an inode reference (a
 * FORGET may overtake the RELEASEDIR).
 */
static void zr_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	struct zr_dirh *d;

	if (zr_is_ctl(ino)) {
		fi->fh = 0;
		fuse_reply_open(req, fi);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	in = zr_inode_from_ino(fs, ino);
	if (in != &fs->root)
		zr_inode_ref(fs, in);
	pthread_rwlock_wrlock(&in->lock);
	in->open_count++;
	pthread_rwlock_unlock(&in->lock);
	pthread_mutex_init(&d->lock, NULL);
	d->is_root = ino == FUSE_ROOT_ID;
	dirh_all_set(fs, d, true);
	fi->fh = (uint64_t)(uintptr_t)d;
	fi->cache_readdir = 0;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		/* the opener is gone (interrupted): no RELEASEDIR will come */
		dirh_all_set(fs, d, false);
		pthread_rwlock_wrlock(&in->lock);
		in->open_count--;
		pthread_rwlock_unlock(&in->lock);
		zr_inode_unref(fs, in);
		pthread_mutex_destroy(&d->lock);
		free(d);
	}
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, int plus)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_dirh *d = (struct zr_dirh *)(uintptr_t)fi->fh;
	struct zr_inode *dir = zr_inode_from_ino(fs, ino);
	char *buf, *p;
	size_t rem = size;
	int err = 0;

	if (zr_is_ctl(ino)) {
		zr_ctl_readdir(req, fs, size, off, plus);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->lock);
	if (off != d->pos) {
		if (d->dp)
			seekdir(d->dp, off);
		d->pending = NULL;
		d->pos = off;
	}
	if (!d->dp) {
		int rc = dirh_open(fs, d, dir);

		if (rc) {
			pthread_mutex_unlock(&d->lock);
			free(buf);
			/* removed since it was opened: empty, as it is
			 * (unlinked read without ns_lock: a stale false
			 * only gives the error) */
			if ((rc == -ESTALE || rc == -ENOENT) &&
			    __atomic_load_n(&dir->unlinked, __ATOMIC_RELAXED))
				fuse_reply_buf(req, NULL, 0);
			else
				fuse_reply_err(req, -rc);
			return;
		}
	}
	dirh_touch(fs, d);
	p = buf;
	for (;;) {
		struct dirent *de = d->pending;
		struct fuse_entry_param e;
		size_t n;

		if (!de) {
			errno = 0;
			de = readdir(d->dp);
			if (!de) {
				err = errno;
				break;
			}
		}
		d->pending = de;
		if (d->is_root && strcmp(de->d_name, ZR_CTL_DIRNAME) == 0) {
			d->pending = NULL;
			d->pos = de->d_off;
			continue;	/* the control directory's name is reserved */
		}
		if (plus) {
			bool dots = strcmp(de->d_name, ".") == 0 ||
				    strcmp(de->d_name, "..") == 0;

			memset(&e, 0, sizeof(e));
			e.attr.st_ino = de->d_ino;
			e.attr.st_mode = (mode_t)de->d_type << 12;
			if (!dots) {
				int pfd = zr_fd_get_waiting(fs, dir);
				int rc = pfd < 0 ? pfd :
					do_lookup(fs, dir, pfd, de->d_name, &e);

				if (pfd >= 0)
					zr_fd_put(fs, dir);
				if (rc == -ENOENT) {
					/* vanished meanwhile: skip it */
					d->pending = NULL;
					d->pos = de->d_off;
					continue;
				}
				if (rc == -EMFILE || rc == -ENFILE || rc == -ENOMEM) {
					/* out of resources: no entry may go
					 * missing in silence; what is listed so
					 * far goes out, this entry is tried again
					 * by the next call, or the error is told */
					err = -rc;
					break;
				}
				if (rc) {
					/* this entry cannot be looked up (EACCES
					 * on another user's FUSE mount, EIO): its
					 * name without attributes, as a local
					 * filesystem lists it (no node id: the
					 * kernel links nothing) */
					memset(&e, 0, sizeof(e));
					e.attr.st_ino = de->d_ino;
					e.attr.st_mode = (mode_t)de->d_type << 12;
				}
			}
			n = fuse_add_direntry_plus(req, p, rem, de->d_name, &e, de->d_off);
			if (n > rem) {
				if (!dots && e.ino)
					zr_inode_forget(fs, zr_inode_from_ino(fs, e.ino), 1);
				break;
			}
		} else {
			struct stat st;

			memset(&st, 0, sizeof(st));
			st.st_ino = de->d_ino;
			st.st_mode = (mode_t)de->d_type << 12;
			n = fuse_add_direntry(req, p, rem, de->d_name, &st, de->d_off);
			if (n > rem)
				break;
		}
		p += n;
		rem -= n;
		d->pending = NULL;
		d->pos = de->d_off;
	}
	pthread_mutex_unlock(&d->lock);
	if (err && rem == size)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
}

static void zr_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 0);
}

static void zr_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			      off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, 1);
}

static void zr_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_dirh *d = (struct zr_dirh *)(uintptr_t)fi->fh;
	struct zr_inode *in;
	bool unpin;

	if (d) {
		pthread_mutex_lock(&fs->dirh_lock);
		if (d->listed)
			dirh_unlist(fs, d);
		pthread_mutex_unlock(&fs->dirh_lock);
		dirh_all_set(fs, d, false);
		if (d->dp)
			closedir(d->dp);
		pthread_mutex_destroy(&d->lock);
		free(d);
		in = zr_inode_from_ino(fs, ino);
		pthread_rwlock_wrlock(&in->lock);
		unpin = --in->open_count == 0 && in->fd_pinned;
		pthread_rwlock_unlock(&in->lock);
		if (unpin)
			zr_dir_unpin(fs, in);
		zr_inode_unref(fs, in);
	}
	fuse_reply_err(req, 0);
}

/* fsync of a directory, through its cached fd (O_RDONLY | O_DIRECTORY). */
static void zr_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			   struct fuse_file_info *fi)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	int fd, rc = 0;

	if (zr_is_ctl(ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	in = zr_inode_from_ino(fs, ino);
	fd = zr_fd_get(fs, in);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	if ((datasync ? fdatasync(fd) : fsync(fd)) < 0)
		rc = errno;
	zr_fd_put(fs, in);
	fuse_reply_err(req, rc);
}

/*
 * statfs(2): the backing filesystem's, less the room the dirty blocks in
 * RAM will take when they are written back (each counted as a whole
 * block of new space: an upper bound, as a block that rewrites data
 * already on disk takes none), so that df(1) and a program that checks
 * for room before it writes are not told of space that is spoken for.
 */
static void zr_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct statvfs sv;
	struct zr_stats s;
	uint64_t need;

	if (fstatvfs(fs->root_fd, &sv) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	if (fs->store && sv.f_frsize) {
		zr_store_get_stats(fs->store, &s);
		need = (s.blocks_dirty * fs->bs + sv.f_frsize - 1) / sv.f_frsize;
		sv.f_bfree = sv.f_bfree > need ? sv.f_bfree - need : 0;
		sv.f_bavail = sv.f_bavail > need ? sv.f_bavail - need : 0;
	}
	fuse_reply_statfs(req, &sv);
}

/*
 * Keep zr_inode.has_caps (the first write drops file capabilities, data.c)
 * true to the backing file when @name, just set (@set) or removed, is
 * security.capability. Only an attached file has it loaded.
 */
static void note_caps(struct zr_inode *ino, const char *name, bool set)
{
	if (!S_ISREG(ino->type) || strcmp(name, ZR_XATTR_CAPS) != 0)
		return;
	pthread_rwlock_wrlock(&ino->lock);
	if (ino->size_valid) {
		__atomic_store_n(&ino->has_caps, set, __ATOMIC_RELAXED);
		__atomic_store_n(&ino->caps_kill_failed, false, __ATOMIC_RELAXED);
	}
	pthread_rwlock_unlock(&ino->lock);
}

/*
 * Whether the f*xattr() calls can use @at's fd: the object's own fd, a real
 * one for regular files and directories (others are O_PATH and go through
 * /proc by path). It saves a path lookup through /proc per call: the
 * kernel asks for security.capability before the first write to a file and
 * at every chown, twice a file in an untar.
 */
static bool at_own_fd(const struct zr_at *at, const struct zr_inode *ino)
{
	return !at->name[0] && !at->opath && (S_ISREG(ino->type) || S_ISDIR(ino->type));
}

/*
 * xattr=off: ENOSYS, after which the kernel sends no request of that kind
 * again on this mount and fails the calls with EOPNOTSUPP itself (the
 * security.capability it asks before a file's first write and at every
 * chown included). @return whether @req was answered so.
 */
static bool no_xattr(fuse_req_t req)
{
	if (!zr_fs_of(req)->opt->no_xattr)
		return false;
	fuse_reply_err(req, ENOSYS);
	return true;
}

/* Whether setting or removing the attribute @name changes the file's mode
 * (an access ACL carries the permission bits): such a change takes
 * mode_lock, as chmod does, so that it does not meet an unprivileged
 * daemon's temporary u+r or u+w (inode.c: owner_reopen()), which would
 * stay on the file or undo it. */
static bool acl_sets_mode(const char *name)
{
	return strcmp(name, "system.posix_acl_access") == 0;
}

static void zr_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			   const char *value, size_t size, int flags)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	char path[PATH_MAX + 64];
	struct zr_at at;
	bool follow;
	int rc;

	if (no_xattr(req))
		return;
	if (zr_is_ctl(ino)) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	in = zr_inode_from_ino(fs, ino);
	if (S_ISREG(in->type) && strcmp(name, ZR_XATTR_CAPS) == 0) {
		struct zr_file *f;
		/*
		 * The backing filesystem drops file capabilities on a write:
		 * write back the dirty blocks we hold first, or their late
		 * writeback would drop what is set now. (Pages still dirty in
		 * the kernel's cache of a writer that keeps the file open
		 * arrive after this, as writes after setcap would, and drop
		 * it.) A writeback error stays for close/fsync to report.
		 */
		pthread_rwlock_rdlock(&in->lock);
		f = in->blocks;	/* set once, freed with the inode */
		pthread_rwlock_unlock(&in->lock);
		rc = f ? zr_file_writeback(f) : 0;
		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
	}
	rc = at_get_entry(fs, in, &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (acl_sets_mode(name))
		pthread_mutex_lock(&fs->mode_lock);
	if (at_own_fd(&at, in)) {
		rc = fsetxattr(at.dirfd, name, value, size, flags) < 0 ? errno : 0;
	} else {
		at_path(&at, path, sizeof(path), &follow);
		rc = (follow ? setxattr(path, name, value, size, flags) :
		      lsetxattr(path, name, value, size, flags)) < 0 ? errno : 0;
	}
	if (acl_sets_mode(name))
		pthread_mutex_unlock(&fs->mode_lock);
	at_put(fs, &at);
	if (rc == 0)
		note_caps(in, name, true);
	fuse_reply_err(req, rc);
}

/*
 * getxattr (@name) or listxattr (@name NULL): size 0 asks for the length,
 * otherwise reply with up to @size bytes.
 */
static void xattr_read(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in = zr_inode_from_ino(fs, ino);
	char path[PATH_MAX + 64];
	char *buf = NULL;
	struct zr_at at;
	bool follow;
	ssize_t n;
	int rc;

	/* (a checked fd of the entry: during a rename the name reaches
	 * another file, or nothing) */
	rc = at_get_entry(fs, in, &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (size && !(buf = malloc(size))) {
		at_put(fs, &at);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (at_own_fd(&at, in)) {
		n = name ? fgetxattr(at.dirfd, name, buf, size) : flistxattr(at.dirfd, buf, size);
	} else {
		at_path(&at, path, sizeof(path), &follow);
		if (name)
			n = follow ? getxattr(path, name, buf, size) : lgetxattr(path, name, buf, size);
		else
			n = follow ? listxattr(path, buf, size) : llistxattr(path, buf, size);
	}
	rc = n < 0 ? errno : 0;
	at_put(fs, &at);
	if (rc)
		fuse_reply_err(req, rc);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

/*
 * Whether regular file @in is known to have no security.capability: it is
 * attached (data.c), which loaded has_caps, and setxattr, removexattr and
 * the first write have kept it true to the backing file since.
 */
static bool caps_known_absent(struct zr_fs *fs, struct zr_inode *in)
{
	bool absent;

	/* (a filesystem mounted inside the backing tree was not probed) */
	if (!S_ISREG(in->type) || in->key.dev != fs->backing_dev || fs->xattr_enotsup)
		return false;
	pthread_rwlock_rdlock(&in->lock);
	absent = in->size_valid && !__atomic_load_n(&in->has_caps, __ATOMIC_RELAXED);
	pthread_rwlock_unlock(&in->lock);
	return absent;
}

static void zr_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			   size_t size)
{
	struct zr_fs *fs = zr_fs_of(req);

	if (no_xattr(req))
		return;
	/* the kernel asks before the first write to a file and at every
	 * chown, twice a file in an untar: answer without a syscall */
	if (zr_is_ctl(ino) ||
	    (strcmp(name, ZR_XATTR_CAPS) == 0 && caps_known_absent(fs, zr_inode_from_ino(fs, ino))))
		fuse_reply_err(req, ENODATA);
	else
		xattr_read(req, ino, name, size);
}

static void zr_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (no_xattr(req))
		return;
	if (!zr_is_ctl(ino))
		xattr_read(req, ino, NULL, size);
	else if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

static void zr_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct zr_fs *fs = zr_fs_of(req);
	struct zr_inode *in;
	char path[PATH_MAX + 64];
	struct zr_at at;
	bool follow;
	int rc;

	if (no_xattr(req))
		return;
	if (zr_is_ctl(ino)) {
		fuse_reply_err(req, ENODATA);
		return;
	}
	in = zr_inode_from_ino(fs, ino);
	rc = at_get_entry(fs, in, &at);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	if (acl_sets_mode(name))
		pthread_mutex_lock(&fs->mode_lock);
	if (at_own_fd(&at, in)) {
		rc = fremovexattr(at.dirfd, name) < 0 ? errno : 0;
	} else {
		at_path(&at, path, sizeof(path), &follow);
		rc = (follow ? removexattr(path, name) : lremovexattr(path, name)) < 0 ? errno : 0;
	}
	if (acl_sets_mode(name))
		pthread_mutex_unlock(&fs->mode_lock);
	at_put(fs, &at);
	if (rc == 0)
		note_caps(in, name, false);
	fuse_reply_err(req, rc);
}

static void zr_op_read_any(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi)
{
	if (zr_is_ctl(ino))
		zr_ctl_read(req, zr_fs_of(req), ino, size, off, fi);
	else
		zr_op_read(req, ino, size, off, fi);
}

const struct fuse_lowlevel_ops zr_ops = {
	.init = zr_op_init,
	.destroy = zr_op_destroy,
	.lookup = zr_op_lookup,
	.forget = zr_op_forget,
	.forget_multi = zr_op_forget_multi,
	.getattr = zr_op_getattr,
	.setattr = zr_op_setattr,
	.access = zr_op_access,
	.readlink = zr_op_readlink,
	.mknod = zr_op_mknod,
	.mkdir = zr_op_mkdir,
	.unlink = zr_op_unlink,
	.rmdir = zr_op_rmdir,
	.symlink = zr_op_symlink,
	.rename = zr_op_rename,
	.link = zr_op_link,
	.open = zr_op_open,
	.create = zr_op_create,
	.read = zr_op_read_any,
	.write_buf = zr_op_write_buf,
	.flush = zr_op_flush,
	.release = zr_op_release,
	.fsync = zr_op_fsync,
	.opendir = zr_op_opendir,
	.readdir = zr_op_readdir,
	.readdirplus = zr_op_readdirplus,
	.releasedir = zr_op_releasedir,
	.fsyncdir = zr_op_fsyncdir,
	.statfs = zr_op_statfs,
	.setxattr = zr_op_setxattr,
	.getxattr = zr_op_getxattr,
	.listxattr = zr_op_listxattr,
	.removexattr = zr_op_removexattr,
	.fallocate = zr_op_fallocate,
	.lseek = zr_op_lseek,
	.copy_file_range = zr_op_copy_file_range,
};

// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * zr_fault.so: a fault injector for the end-to-end tests, preloaded into
 * the daemon (LD_PRELOAD). While the file named by ZR_FAULT_ARMED exists,
 * every pread(2) of a file whose name (last path component) is
 * ZR_FAULT_NAME fails with EIO when the range it asks for covers byte
 * ZR_FAULT_READ_AT: one unreadable spot of a backing file, as a bad sector
 * makes. With ZR_FAULT_FSYNC=1 as well, fsync(2) and fdatasync(2) of that
 * file fail with EIO while armed, as when the device fails a write the
 * page cache took; with ZR_FAULT_SYNCFS=1, syncfs(2) of any file fails so
 * (the daemon's final sync at unmount), or only of a file on the device
 * whose number (stat -c %d) ZR_FAULT_SYNCFS_DEV gives when that is set.
 * With ZR_FAULT_FTRUNCATE_DELAY_MS=N, the first ftruncate(2) of that file while armed disarms (removes the
 * ZR_FAULT_ARMED file) and then sleeps N ms before it is done: a window in
 * which another request may run (races). Without the variables, or while
 * disarmed, the calls are passed through untouched. With
 * ZR_FAULT_HANDLE_ENOMEM=N, the first N open_by_handle_at(2) calls made
 * while armed fail with ENOMEM, as ext4 fails them while a new file is
 * being created with the inode number of the handle's freed file. With
 * ZR_FAULT_CHOWN=1, fchownat(2) of a name whose last component is
 * ZR_FAULT_NAME (or of such a file's fd, with AT_EMPTY_PATH) fails with
 * EDQUOT while armed, as when the new owner is over quota. With
 * ZR_FAULT_NOPUNCH=1, fallocate(2) with
 * FALLOC_FL_PUNCH_HOLE fails with EOPNOTSUPP on every file (armed or not),
 * as on a backing filesystem without holes (NFSv3, vfat; ext2 punches
 * holes on current kernels). With ZR_FAULT_FTRUNCATE_ERR=1, ftruncate(2)
 * of ZR_FAULT_NAME fails with ENOSPC while armed, as when extending a file
 * allocates on a full filesystem without holes. With
 * ZR_FAULT_PWRITE_AT=N, a pwrite(2) of ZR_FAULT_NAME while armed whose
 * range covers byte N writes the bytes before N and returns their count (a
 * short write), or fails with ENOSPC when it starts at N: a filesystem that
 * fills up at byte N of the file. (Built without _FILE_OFFSET_BITS=64,
 * which would make pread an alias of pread64 and pwrite of pwrite64: the
 * daemon, built with it, calls pread64 and pwrite64.) With
 * ZR_FAULT_CREATE_DELAY_MS=N, every openat(2) with O_CREAT|O_EXCL
 * while armed of a name whose last component is ZR_FAULT_NAME sleeps N ms
 * before the call and N ms after it: windows in which the name may be
 * made or removed behind the daemon's back around its create. With
 * ZR_FAULT_CREATE_SYNC=DIR as well, each of those two holds is a
 * handshake instead of a sleep: the hold makes DIR/held.K (K counts the
 * holds from 1) and waits until DIR/go.K exists (30 s at most), so that a
 * test can change the name at the moment it wants. With
 * ZR_FAULT_PWRITE_DELAY_MS=N, the first pwrite(2) of ZR_FAULT_NAME while
 * the file ZR_FAULT_PWRITE_ARMED names exists (an arming of its own)
 * removes that file and sleeps N ms before it is made: a write that
 * reaches the backing file late (races). With
 * ZR_FAULT_REMOVE_DELAY_MS=N, the first unlinkat(2) while armed of a name
 * whose last component is ZR_FAULT_NAME (or matches one of the fnmatch(3)
 * patterns, separated by '|', of ZR_FAULT_REMOVE_NAME when that is set)
 * disarms, makes the call, and then sleeps N ms before it returns: a
 * window after the backing filesystem freed the removed file's inode
 * number, in which a new file may get it. With ZR_FAULT_MAKE_DELAY_MS=N,
 * the first symlinkat(2) while armed of a name whose last component is
 * ZR_FAULT_NAME does the same: a window between the daemon's making of a
 * node and its giving it to the caller. With ZR_FAULT_UNAME=RELEASE,
 * uname(2) reports that kernel release (armed or not): what the daemon
 * does on an older kernel. With ZR_FAULT_UMOUNT=1, umount2(2) fails with
 * EPERM (armed or not), as for a daemon that is not root. With
 * ZR_FAULT_RENAME_DELAY_MS=N, every renameat2(2) while armed whose new
 * name's last component is ZR_FAULT_NAME (or matches one of the fnmatch(3)
 * patterns, separated by '|', of ZR_FAULT_RENAME_NAME when that is set)
 * sleeps N ms after the call: a
 * window in which the backing names have changed and the daemon's record
 * of them not yet. With ZR_FAULT_INVAL_DELAY_MS=N, the first writev(2)
 * while armed of a FUSE_NOTIFY_INVAL_INODE message disarms and sleeps N ms
 * before it is made: a notification that reaches the kernel late. With
 * ZR_FAULT_PSI=FILE, fopen(3) of /proc/pressure/memory opens FILE instead
 * (armed or not): the memory pressure the test writes there. With
 * ZR_FAULT_ZSTD=1, ZSTD_compress2() fails while armed as when zstd cannot
 * allocate its working memory (ZSTD_error_memory_allocation); with
 * ZR_FAULT_ZSTD_READ=1, ZSTD_decompressDCtx() fails while armed as on
 * corrupt data (ZSTD_error_corruption_detected). With
 * ZR_FAULT_FUTIMENS_DELAY_MS=N, the first futimens(3) while armed of the
 * file ZR_FAULT_NAME disarms, sleeps N ms, then makes the call: a window
 * between a writeback's choice of the mtime it stamps and its stamp. With
 * ZR_FAULT_THREAD_LEADER=1, pthread_create(3) fails with EAGAIN in a
 * process that leads its session (no armed file needed): a daemon that
 * went to the background cannot start its threads, as when the user's
 * process limit is reached. With ZR_FAULT_CLOCK_AHEAD_S=N,
 * clock_gettime(2) of CLOCK_REALTIME runs N seconds ahead of the kernel's
 * (armed or not): a daemon whose clock was stepped back by N s after it
 * read it, which waits on that clock would wait N s too long.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fuse.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zstd_errors.h>

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);

/* Whether the file @armed names exists and @fd is the file ZR_FAULT_NAME
 * names. */
static bool fault_file_armed(int fd, const char *armed)
{
	const char *name = getenv("ZR_FAULT_NAME");
	char link[64], path[PATH_MAX];
	const char *base;
	ssize_t n;

	if (!name || !armed || access(armed, F_OK) != 0)
		return false;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, sizeof(path) - 1);
	if (n < 0)
		return false;
	path[n] = '\0';
	base = strrchr(path, '/');
	return strcmp(base ? base + 1 : path, name) == 0;
}

/* Whether the fault is armed and @fd is the file ZR_FAULT_NAME names. */
static bool fault_file(int fd)
{
	return fault_file_armed(fd, getenv("ZR_FAULT_ARMED"));
}

/*
 * Whether an I/O of @len bytes at @off of @fd covers the byte the
 * environment variable @var names, on the armed file; *@at is that byte.
 */
static bool fault_covers(const char *var, int fd, size_t len, off_t off, long long *at)
{
	const char *at_s = getenv(var);

	if (!at_s)
		return false;
	*at = atoll(at_s);
	if (*at < (long long)off || *at >= (long long)off + (long long)len)
		return false;
	return fault_file(fd);
}

/* Whether a pread of @len bytes at @off of @fd must fail. */
static bool fault_hits(int fd, size_t len, off_t off)
{
	long long at;

	return fault_covers("ZR_FAULT_READ_AT", fd, len, off, &at);
}

/* fsync(2) or fdatasync(2) (@sym) of @fd, failing on the armed file. */
static int faulty_sync(const char *sym, int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, sym);
	const char *on = getenv("ZR_FAULT_FSYNC");

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (on && strcmp(on, "1") == 0 && fault_file(fd)) {
		errno = EIO;
		return -1;
	}
	return real(fd);
}

int fsync(int fd)
{
	return faulty_sync("fsync", fd);
}

int fdatasync(int fd)
{
	return faulty_sync("fdatasync", fd);
}

/* Whether the fault the environment variable @var turns on (=1) is armed
 * (the file ZR_FAULT_ARMED names exists). */
static bool armed_with(const char *var)
{
	const char *on = getenv(var);
	const char *armed = getenv("ZR_FAULT_ARMED");

	return on && strcmp(on, "1") == 0 && armed && access(armed, F_OK) == 0;
}

int syncfs(int fd)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "syncfs");

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (armed_with("ZR_FAULT_SYNCFS")) {
		const char *dev = getenv("ZR_FAULT_SYNCFS_DEV");
		struct stat st;

		if (!dev || (fstat(fd, &st) == 0 &&
			     (unsigned long long)st.st_dev == strtoull(dev, NULL, 10))) {
			errno = EIO;
			return -1;
		}
	}
	return real(fd);
}

static ssize_t faulty_pread(const char *sym, int fd, void *buf, size_t len, off_t off)
{
	pread_fn real = (pread_fn)dlsym(RTLD_NEXT, sym);

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (fault_hits(fd, len, off)) {
		errno = EIO;
		return -1;
	}
	return real(fd, buf, len, off);
}

ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	return faulty_pread("pread", fd, buf, len, off);
}

ssize_t pread64(int fd, void *buf, size_t len, off64_t off)
{
	return faulty_pread("pread64", fd, buf, len, off);
}

typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static void sleep_ms(long ms);

static ssize_t faulty_pwrite(const char *sym, int fd, const void *buf, size_t len, off_t off)
{
	pwrite_fn real = (pwrite_fn)dlsym(RTLD_NEXT, sym);
	long long at;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	/* (unlink() decides which of two racing calls is the first) */
	if (getenv("ZR_FAULT_PWRITE_DELAY_MS") &&
	    fault_file_armed(fd, getenv("ZR_FAULT_PWRITE_ARMED")) &&
	    unlink(getenv("ZR_FAULT_PWRITE_ARMED")) == 0)
		sleep_ms(atol(getenv("ZR_FAULT_PWRITE_DELAY_MS")));
	if (fault_covers("ZR_FAULT_PWRITE_AT", fd, len, off, &at)) {
		if (at == (long long)off) {
			errno = ENOSPC;
			return -1;
		}
		/* what fits before the full spot, as a filesystem writes */
		len = (size_t)(at - (long long)off);
	}
	return real(fd, buf, len, off);
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	return faulty_pwrite("pwrite", fd, buf, len, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	return faulty_pwrite("pwrite64", fd, buf, len, off);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

typedef int (*ftruncate_fn)(int, off_t);

static int faulty_ftruncate(const char *sym, int fd, off_t len)
{
	ftruncate_fn real = (ftruncate_fn)dlsym(RTLD_NEXT, sym);
	const char *ms_s = getenv("ZR_FAULT_FTRUNCATE_DELAY_MS");
	const char *err = getenv("ZR_FAULT_FTRUNCATE_ERR");

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (err && strcmp(err, "1") == 0 && fault_file(fd)) {
		errno = ENOSPC;
		return -1;
	}
	/* (unlink() decides which of two racing calls is the first) */
	if (ms_s && fault_file(fd) && unlink(getenv("ZR_FAULT_ARMED")) == 0)
		sleep_ms(atol(ms_s));
	return real(fd, len);
}

int ftruncate(int fd, off_t len)
{
	return faulty_ftruncate("ftruncate", fd, len);
}

int ftruncate64(int fd, off64_t len)
{
	return faulty_ftruncate("ftruncate64", fd, len);
}

typedef int (*open_by_handle_fn)(int, struct file_handle *, int);

int open_by_handle_at(int mount_fd, struct file_handle *h, int flags)
{
	open_by_handle_fn real = (open_by_handle_fn)dlsym(RTLD_NEXT, "open_by_handle_at");
	const char *n_s = getenv("ZR_FAULT_HANDLE_ENOMEM");
	const char *armed = getenv("ZR_FAULT_ARMED");
	static long failed;	/* calls failed so far (any thread) */

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (n_s && armed && access(armed, F_OK) == 0 &&
	    __atomic_fetch_add(&failed, 1, __ATOMIC_RELAXED) < atol(n_s)) {
		errno = ENOMEM;
		return -1;
	}
	return real(mount_fd, h, flags);
}

typedef int (*fchownat_fn)(int, const char *, uid_t, gid_t, int);

int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	fchownat_fn real = (fchownat_fn)dlsym(RTLD_NEXT, "fchownat");
	const char *on = getenv("ZR_FAULT_CHOWN");
	const char *name = getenv("ZR_FAULT_NAME");
	const char *armed = getenv("ZR_FAULT_ARMED");
	const char *base = strrchr(path, '/');

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (on && strcmp(on, "1") == 0 && name && armed && access(armed, F_OK) == 0 &&
	    ((!path[0] && (flags & AT_EMPTY_PATH)) ? fault_file(dirfd) :
	     strcmp(base ? base + 1 : path, name) == 0)) {
		errno = EDQUOT;
		return -1;
	}
	return real(dirfd, path, uid, gid, flags);
}

typedef int (*fallocate_fn)(int, int, off_t, off_t);

static int nopunch_fallocate(const char *sym, int fd, int mode, off_t off, off_t len)
{
	fallocate_fn real = (fallocate_fn)dlsym(RTLD_NEXT, sym);
	const char *on = getenv("ZR_FAULT_NOPUNCH");

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (on && strcmp(on, "1") == 0 && (mode & FALLOC_FL_PUNCH_HOLE)) {
		errno = EOPNOTSUPP;
		return -1;
	}
	return real(fd, mode, off, len);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	return nopunch_fallocate("fallocate", fd, mode, off, len);
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	return nopunch_fallocate("fallocate64", fd, mode, off, len);
}

/* @rc, a call's result, returned @ms ms later with the call's errno. */
static int held(int rc, long ms)
{
	int e = errno;

	sleep_ms(ms);
	errno = e;
	return rc;
}

/* Whether @base matches one of the '|'-separated fnmatch(3) @patterns. */
static bool name_matches(const char *patterns, const char *base)
{
	char pat[256];
	const char *p = patterns, *bar;
	size_t n;

	for (;;) {
		bar = strchr(p, '|');
		n = bar ? (size_t)(bar - p) : strlen(p);
		if (n < sizeof(pat)) {
			memcpy(pat, p, n);
			pat[n] = '\0';
			if (fnmatch(pat, base, 0) == 0)
				return true;
		}
		if (!bar)
			return false;
		p = bar + 1;
	}
}

/* Whether @path is ZR_FAULT_NAME (ZR_FAULT_REMOVE_NAME's) while armed with
 * ZR_FAULT_REMOVE_DELAY_MS, disarming if so: the first such call. */
static bool remove_delayed(const char *path, long *ms)
{
	const char *ms_s = getenv("ZR_FAULT_REMOVE_DELAY_MS");
	const char *name = getenv("ZR_FAULT_NAME");
	const char *names = getenv("ZR_FAULT_REMOVE_NAME");
	const char *armed = getenv("ZR_FAULT_ARMED");
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!ms_s || !armed)
		return false;
	if (names ? !name_matches(names, base) : (!name || strcmp(base, name) != 0))
		return false;
	/* (unlink() decides which of two racing calls is the first) */
	if (unlink(armed) != 0)
		return false;
	*ms = atol(ms_s);
	return true;
}

typedef int (*unlinkat_fn)(int, const char *, int);

int unlinkat(int dirfd, const char *path, int flags)
{
	unlinkat_fn real = (unlinkat_fn)dlsym(RTLD_NEXT, "unlinkat");
	long ms;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (!remove_delayed(path, &ms))
		return real(dirfd, path, flags);
	return held(real(dirfd, path, flags), ms);
}

/* Whether @path is ZR_FAULT_NAME while armed with ZR_FAULT_MAKE_DELAY_MS,
 * disarming if so: the first such call. */
static bool make_delayed(const char *path, long *ms)
{
	const char *ms_s = getenv("ZR_FAULT_MAKE_DELAY_MS");
	const char *name = getenv("ZR_FAULT_NAME");
	const char *armed = getenv("ZR_FAULT_ARMED");
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	if (!ms_s || !armed || !name || strcmp(base, name) != 0 || unlink(armed) != 0)
		return false;
	*ms = atol(ms_s);
	return true;
}

typedef int (*symlinkat_fn)(const char *, int, const char *);

int symlinkat(const char *target, int dirfd, const char *path)
{
	symlinkat_fn real = (symlinkat_fn)dlsym(RTLD_NEXT, "symlinkat");
	long ms;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (!make_delayed(path, &ms))
		return real(target, dirfd, path);
	return held(real(target, dirfd, path), ms);
}

typedef ssize_t (*writev_fn)(int, const struct iovec *, int);

ssize_t writev(int fd, const struct iovec *iov, int count)
{
	writev_fn real = (writev_fn)dlsym(RTLD_NEXT, "writev");
	const char *ms_s = getenv("ZR_FAULT_INVAL_DELAY_MS");
	const char *armed = getenv("ZR_FAULT_ARMED");

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (ms_s && armed && count > 0 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
		const struct fuse_out_header *h = iov[0].iov_base;

		/* (a notification: unique 0, its code in error) */
		if (h->unique == 0 && h->error == FUSE_NOTIFY_INVAL_INODE && unlink(armed) == 0)
			sleep_ms(atol(ms_s));
	}
	return real(fd, iov, count);
}

typedef int (*renameat2_fn)(int, const char *, int, const char *, unsigned int);

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
	      unsigned int flags)
{
	renameat2_fn real = (renameat2_fn)dlsym(RTLD_NEXT, "renameat2");
	const char *ms_s = getenv("ZR_FAULT_RENAME_DELAY_MS");
	const char *name = getenv("ZR_FAULT_NAME");
	const char *names = getenv("ZR_FAULT_RENAME_NAME");
	const char *armed = getenv("ZR_FAULT_ARMED");
	const char *base = strrchr(newpath, '/');
	int rc;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	rc = real(olddirfd, oldpath, newdirfd, newpath, flags);
	base = base ? base + 1 : newpath;
	if (ms_s && armed && (names ? name_matches(names, base) : name && strcmp(base, name) == 0) &&
	    access(armed, F_OK) == 0)
		return held(rc, atol(ms_s));
	return rc;
}

typedef int (*uname_fn)(struct utsname *);

int uname(struct utsname *u)
{
	uname_fn real = (uname_fn)dlsym(RTLD_NEXT, "uname");
	const char *rel = getenv("ZR_FAULT_UNAME");
	int rc = real(u);

	if (rc == 0 && rel && *rel)
		snprintf(u->release, sizeof(u->release), "%s", rel);
	return rc;
}

typedef int (*umount2_fn)(const char *, int);

int umount2(const char *target, int flags)
{
	const char *on = getenv("ZR_FAULT_UMOUNT");

	if (on && strcmp(on, "1") == 0) {
		errno = EPERM;
		return -1;
	}
	return ((umount2_fn)dlsym(RTLD_NEXT, "umount2"))(target, flags);
}

typedef FILE *(*fopen_fn)(const char *, const char *);

/* /proc/pressure/memory is read from ZR_FAULT_PSI instead, when set */
static FILE *psi_fopen(const char *sym, const char *path, const char *mode)
{
	fopen_fn real = (fopen_fn)dlsym(RTLD_NEXT, sym);
	const char *psi = getenv("ZR_FAULT_PSI");

	if (!real) {
		errno = ENOSYS;
		return NULL;
	}
	if (psi && *psi && strcmp(path, "/proc/pressure/memory") == 0)
		path = psi;
	return real(path, mode);
}

FILE *fopen(const char *path, const char *mode)
{
	return psi_fopen("fopen", path, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	return psi_fopen("fopen64", path, mode);
}

typedef size_t (*zstd_compress2_fn)(void *, void *, size_t, const void *, size_t);
size_t ZSTD_compress2(void *cctx, void *dst, size_t cap, const void *src, size_t len);

/* ZSTD_compress2(), out of memory while armed with ZR_FAULT_ZSTD=1 (the
 * context is declared void *: this file does not need zstd.h) */
size_t ZSTD_compress2(void *cctx, void *dst, size_t cap, const void *src, size_t len)
{
	zstd_compress2_fn real = (zstd_compress2_fn)dlsym(RTLD_NEXT, "ZSTD_compress2");

	if (!real || armed_with("ZR_FAULT_ZSTD"))
		return (size_t)-ZSTD_error_memory_allocation;
	return real(cctx, dst, cap, src, len);
}

typedef size_t (*zstd_decompress_fn)(void *, void *, size_t, const void *, size_t);
size_t ZSTD_decompressDCtx(void *dctx, void *dst, size_t cap, const void *src, size_t len);

/* ZSTD_decompressDCtx(), corrupt while armed with ZR_FAULT_ZSTD_READ=1 */
size_t ZSTD_decompressDCtx(void *dctx, void *dst, size_t cap, const void *src, size_t len)
{
	zstd_decompress_fn real = (zstd_decompress_fn)dlsym(RTLD_NEXT, "ZSTD_decompressDCtx");

	if (!real || armed_with("ZR_FAULT_ZSTD_READ"))
		return (size_t)-ZSTD_error_corruption_detected;
	return real(dctx, dst, cap, src, len);
}

typedef int (*futimens_fn)(int, const struct timespec *);

/* futimens(), late once while armed with ZR_FAULT_FUTIMENS_DELAY_MS */
int futimens(int fd, const struct timespec ts[2])
{
	futimens_fn real = (futimens_fn)dlsym(RTLD_NEXT, "futimens");
	const char *ms_s = getenv("ZR_FAULT_FUTIMENS_DELAY_MS");

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (ms_s && fault_file(fd) && unlink(getenv("ZR_FAULT_ARMED")) == 0)
		sleep_ms(atol(ms_s));
	return real(fd, ts);
}

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *,
				 void *(*)(void *), void *);

/* pthread_create(), refused in a session leader with ZR_FAULT_THREAD_LEADER=1 */
int pthread_create(pthread_t *t, const pthread_attr_t *attr,
		   void *(*fn)(void *), void *arg)
{
	pthread_create_fn real = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
	const char *on = getenv("ZR_FAULT_THREAD_LEADER");

	if (!real)
		return ENOSYS;
	if (on && strcmp(on, "1") == 0 && getsid(0) == getpid())
		return EAGAIN;
	return real(t, attr, fn, arg);
}

typedef int (*openat_fn)(int, const char *, int, ...);

/* One hold of ZR_FAULT_CREATE_DELAY_MS: a sleep of @ms_s ms, or with
 * ZR_FAULT_CREATE_SYNC the handshake its comment at the top describes. */
static void create_hold(const char *ms_s)
{
	static unsigned int holds;
	const char *dir = getenv("ZR_FAULT_CREATE_SYNC");
	char path[PATH_MAX];
	unsigned int k;
	int fd;

	if (!dir) {
		sleep_ms(atol(ms_s));
		return;
	}
	k = __atomic_add_fetch(&holds, 1, __ATOMIC_RELAXED);
	snprintf(path, sizeof(path), "%s/held.%u", dir, k);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0)
		close(fd);
	snprintf(path, sizeof(path), "%s/go.%u", dir, k);
	for (int i = 0; i < 30000 && access(path, F_OK) < 0; i++)
		sleep_ms(1);
}

static int held_openat(const char *sym, int dirfd, const char *path, int flags, mode_t mode)
{
	openat_fn real = (openat_fn)dlsym(RTLD_NEXT, sym);
	const char *ms_s = getenv("ZR_FAULT_CREATE_DELAY_MS");
	const char *name = getenv("ZR_FAULT_NAME");
	const char *armed = getenv("ZR_FAULT_ARMED");
	const char *base = strrchr(path, '/');
	bool hold;
	int rc, e;

	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	hold = ms_s && name && armed && (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL) &&
	       strcmp(base ? base + 1 : path, name) == 0 && access(armed, F_OK) == 0;
	if (hold)
		create_hold(ms_s);
	rc = real(dirfd, path, flags, mode);
	e = errno;
	if (hold)
		create_hold(ms_s);
	errno = e;
	return rc;
}

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;

	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return held_openat("openat", dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;

	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE) {
		va_list ap;

		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return held_openat("openat64", dirfd, path, flags, mode);
}

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

int clock_gettime(clockid_t clk, struct timespec *ts)
{
	static clock_gettime_fn real;
	static long ahead = -1;
	int rc;

	if (!real)
		real = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
	if (ahead < 0) {
		const char *v = getenv("ZR_FAULT_CLOCK_AHEAD_S");

		ahead = v ? atol(v) : 0;
	}
	rc = real(clk, ts);
	if (rc == 0 && clk == CLOCK_REALTIME)
		ts->tv_sec += ahead;
	return rc;
}

// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_difffuzz: a differential fuzzer: the same random operations on two trees, compared.
 *
 * Usage: zr_difffuzz run [-vt] [-s seed] [-n ops] [-p ms] [-c n] [-l off] [-B size]
 *                        [-M state] [-S snap] [-X op,...] A B
 *        zr_difffuzz compare [-v] [-M state] [-S snap] A B
 *
 * `run` performs random file-system operations in lockstep on directory A
 * (inside a zramfs mount) and directory B (on tmpfs, the reference), over a
 * small namespace (files f0..f3, directories d0..d2, symlinks s0, s1, FIFOs
 * p0, p1, two levels deep) so that names collide: open/create (O_CREAT,
 * O_EXCL, O_TRUNC, O_APPEND, O_NOFOLLOW, O_DIRECTORY, O_DIRECT), write and
 * pwrite of 1 B to 300 KiB of seeded data at offsets that favour block
 * boundaries and leave holes (on an O_DIRECT descriptor mostly 4 KiB
 * aligned, from aligned buffers), now and then as user 1000 (setfsuid:
 * without CAP_FSETID, so set-id bits are cleared), read and pread (the
 * bytes compared), lseek, truncate and ftruncate (grow, shrink, to the
 * same size; ftruncate also as user 1000), fallocate (mode 0, KEEP_SIZE,
 * PUNCH_HOLE), fsync/fdatasync, close, renameat2 (plain, RENAME_NOREPLACE,
 * RENAME_EXCHANGE, over existing files and directories), link, unlink (also
 * of open files, whose descriptors stay in use), mkdir, rmdir, symlink
 * (relative targets that never leave the tree) and readlink, chmod,
 * utimensat/futimens with explicit times, user.* xattrs (set with
 * XATTR_CREATE/REPLACE, get with short buffers, list, remove; by path, by
 * link and by descriptor), stat/lstat/fstat, readdir; mmap(MAP_SHARED)
 * inside the file's size with stores, loads (compared), pread/pwrite
 * through the descriptor and msync(MS_SYNC, MS_ASYNC) before the munmap;
 * copy_file_range between two descriptors or within one (apart, now and
 * then overlapping: EINVAL), from inside or past the end of the source;
 * chown, lchown and fchown to other users and groups, often after a chmod
 * with S_ISUID, S_ISGID (with or without group execute), S_ISVTX (the
 * set-id bits a chown clears, compared with a stat after it); FIFOs made
 * with mknodat, renamed (onto FIFO names only), unlinked, stat, chmod and
 * lchown (never opened: an open would block); open(2) with O_TMPFILE
 * (O_RDWR or O_WRONLY, now and then O_EXCL, O_APPEND, O_DIRECT) in a
 * directory (or through a symlink, or in a path that is none: the errno
 * compared), written, truncated, read and fstat at once (a link count of
 * 0), then closed without a name, linked, or kept open for the other
 * operations on descriptors; linkat(2) of an open descriptor ("flink":
 * of /proc/self/fd/N with AT_SYMLINK_FOLLOW, or AT_EMPTY_PATH), mostly of
 * a nameless one, which gets its first name (ENOENT if made with O_EXCL,
 * or unlinked since).  Each call must
 * return the same value (or the same errno) on both sides; data read, link
 * targets, xattr values, sorted xattr lists and sorted directory listings
 * must be equal; stat must agree on type, mode, uid, gid, nlink (of a
 * directory only where the filesystem counts subdirectories), size (not of
 * directories) and, for an inode whose mtime was set with utimensat and not
 * modified since (a write, ftruncate, fallocate, O_TRUNC, a truncate, an
 * entry made or removed in a directory), mtime to the nanosecond.  Not compared, because tmpfs and an ext4-backed FUSE
 * filesystem legitimately differ: st_dev, st_ino, st_blocks, atime, ctime,
 * the size of directories, directory offsets, xattr list order.  Every 500
 * operations (-c) and at the end the whole trees are compared as `compare`
 * does.
 *
 * `compare` walks both trees: names, types, modes, owners, sizes, contents,
 * link targets, user.* xattrs, link counts, which names share an inode and,
 * with -M, the mtimes the run set explicitly.
 *
 * -M FILE carries the explicitly set mtimes across runs and remounts: `run`
 * reads it at the start (if it exists) and writes it at the end (the paths
 * under B whose mtime is explicit), `compare` reads it.  -S FILE checks that
 * every mtime survives the writeback and the remount: `run` writes the
 * mtimes of A at the end, `compare` wants the same ones on A.  -t (strict)
 * checks what zramfs is known to do otherwise too: the mtime after a
 * truncate(2) to the same size (Linux 6.18's tmpfs moves it, zramfs keeps
 * it: with the writeback cache the kernel owns a cached file's mtime, and
 * moves it only when the size changes), and across the unmount the mtime
 * of a file that had one (the kernel then never sends the time an earlier
 * write still in its cache set, which the backing file therefore lacks:
 * it keeps the daemon's, up to a jiffy off).  (The mtimes of files fallocate
 * was called on, that an open with O_CREAT|O_TRUNC made, or written with
 * cache=writethrough, changed across the unmount until a fix made after
 * this fuzzer found them; -S checks them always.)
 * -p MS adds a pause of up to MS milliseconds now and then (lets
 * dirty_expire write back under open files); -l OFF lets files grow
 * larger; -B SIZE first writes a file "ballast" that no operation picks
 * (keeps a small budget full, so that the other files' blocks are demoted);
 * -X turns operations off (names as in the log); -v logs every operation,
 * with B's inode numbers (i123) to follow a file across renames.
 *
 * The operations depend only on the seed and the starting content of B:
 * the same command on the same trees repeats the same operations.  On the
 * first divergence `run` prints both results, the last 30 operations and
 * the command to repeat it, and exits 1 (tests/e2e/difffuzz.sh prints the
 * command that repeats the whole sequence of rounds).
 *
 * Exit status: 0 no divergence, 1 divergence, 2 usage or setup error.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "zr_cli.h"

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef SYS_renameat2
#define SYS_renameat2 __NR_renameat2
#endif

#define PATH_LEN 256		/* longest relative path kept */
#define MAX_DEPTH 8		/* the scan of B goes no deeper */
#define MAX_PATHS 512		/* entries of B remembered */
#define NSLOTS 6		/* descriptors open at once */
#define MAX_IO (300 << 10)	/* longest read or write */
#define MAX_OFF (2 << 20)	/* writes start below this offset (-l) */
#define LOG_KEEP 30		/* operations shown on a divergence */
#define LOG_LEN 512
#define MAX_EXPLICIT 1024	/* inodes with an explicit mtime */
#define MAX_LOOSE 1024		/* inodes whose mtime -S leaves out */
#define TREE_EVERY 500		/* whole-tree comparison period (-c) */
#define CHUNK (256 << 10)	/* read size of content comparisons */
#define MAX_REPORT 20		/* differences a comparison prints */
#define BALLAST "ballast"	/* -B: a file no operation picks */
#define BALLAST_CHUNK 65536
#define DIO_ALIGN 4096		/* O_DIRECT: buffers, offsets and lengths */
#define PAGE 4096		/* mmap offsets */
#define OTHER_ID 1000		/* the fsuid and fsgid of writes "as another user" */

enum df_op {
	OP_OPEN, OP_CLOSE, OP_WRITE, OP_PWRITE, OP_READ, OP_PREAD, OP_LSEEK,
	OP_TRUNCATE, OP_FTRUNCATE, OP_FALLOCATE, OP_FSYNC, OP_FSTAT, OP_STAT,
	OP_READFILE, OP_RENAME, OP_LINK, OP_UNLINK, OP_MKDIR, OP_RMDIR,
	OP_SYMLINK, OP_READLINK, OP_CHMOD, OP_UTIMENS, OP_SETXATTR,
	OP_GETXATTR, OP_LISTXATTR, OP_REMOVEXATTR, OP_FXATTR, OP_READDIR,
	OP_MMAP, OP_COPYRANGE, OP_CHOWN, OP_FIFO, OP_TMPFILE, OP_FLINK, OP_PAUSE, OP_NR
};

static const char *const op_names[OP_NR] = {
	"open", "close", "write", "pwrite", "read", "pread", "lseek",
	"truncate", "ftruncate", "fallocate", "fsync", "fstat", "stat",
	"readfile", "rename", "link", "unlink", "mkdir", "rmdir",
	"symlink", "readlink", "chmod", "utimens", "setxattr",
	"getxattr", "listxattr", "removexattr", "fxattr", "readdir",
	"mmap", "copyrange", "chown", "fifo", "tmpfile", "flink", "pause",
};

/* relative frequency of each operation */
static const unsigned op_weight[OP_NR] = {
	[OP_OPEN] = 10, [OP_CLOSE] = 5, [OP_WRITE] = 10, [OP_PWRITE] = 14,
	[OP_READ] = 5, [OP_PREAD] = 10, [OP_LSEEK] = 3, [OP_TRUNCATE] = 5,
	[OP_FTRUNCATE] = 4, [OP_FALLOCATE] = 5, [OP_FSYNC] = 2, [OP_FSTAT] = 4,
	[OP_STAT] = 6, [OP_READFILE] = 3, [OP_RENAME] = 7, [OP_LINK] = 3,
	[OP_UNLINK] = 5, [OP_MKDIR] = 4, [OP_RMDIR] = 3, [OP_SYMLINK] = 3,
	[OP_READLINK] = 2, [OP_CHMOD] = 3, [OP_UTIMENS] = 6, [OP_SETXATTR] = 4,
	[OP_GETXATTR] = 3, [OP_LISTXATTR] = 2, [OP_REMOVEXATTR] = 2,
	[OP_FXATTR] = 3, [OP_READDIR] = 4, [OP_MMAP] = 3, [OP_COPYRANGE] = 3,
	[OP_CHOWN] = 2, [OP_FIFO] = 2, [OP_TMPFILE] = 4, [OP_FLINK] = 2, [OP_PAUSE] = 1,
};

/* The outcome of one call on one side. */
struct res {
	long ret;		/* what the call returned */
	int err;		/* errno when ret < 0, else 0 */
};

/* One descriptor pair: the same open(2) on both sides. */
struct slot {
	bool used;
	int fd[2];		/* on A, on B */
	char path[PATH_LEN];	/* the name it was opened by (for the log), or
				 * the one it was linked to; while nameless,
				 * the directory it was made in */
	int flags;		/* its open flags */
	bool nameless;		/* made with O_TMPFILE and not linked (yet) */
	bool is_dir;		/* it is a directory (no lseek on it) */
	ino_t bino;		/* its inode on B */
};

/* One entry of B found by the last scan. */
struct ent {
	char path[PATH_LEN];
	char type;		/* 'f' file, 'd' directory, 'l' symlink, 'p' FIFO, 'o' other */
	int depth;		/* 0 for a name in the root */
};

/* An inode of B whose mtime was set explicitly and not modified since. */
struct explicit {
	ino_t ino;
	bool dir;
};

/* The state of the fuzzer (and of `compare`). */
struct fz {
	const char *root_path[2];	/* A, B */
	int root[2];			/* their directory descriptors */
	uint64_t seed, rng;		/* the seed; xorshift64* state */
	unsigned long nops;		/* operations to run */
	unsigned long n;		/* the current operation, from 1 */
	bool verbose;
	unsigned pause_ms;		/* -p */
	unsigned long tree_every;	/* -c: whole-tree comparison period */
	uint64_t max_off;		/* -l: writes start below this offset */
	uint64_t ballast;		/* -B: its size, 0 for none */
	bool strict;			/* -t: check the known divergences too */
	bool disabled[OP_NR];		/* -X */
	struct slot slots[NSLOTS];
	struct ent *ents;		/* the entries of B, sorted by path */
	unsigned nents;
	bool stale;			/* the namespace changed since the scan */
	struct explicit expl[MAX_EXPLICIT];
	unsigned nexpl;
	ino_t loose[MAX_LOOSE];		/* A's inodes -S leaves out (do_truncate()) */
	unsigned nloose;
	char log[LOG_KEEP][LOG_LEN];	/* ring of the last operations */
	unsigned long logged;
	unsigned char *rbuf[2];		/* read buffers, MAX_IO each */
	unsigned char *wbuf;		/* data to write, MAX_IO */
	unsigned long counts[OP_NR];	/* operations done, by kind */
	char cmdline[1024];		/* the command, for the log */
};

/* --- messages --------------------------------------------------------- */

/* errno's symbolic name (a static buffer for unknown ones) */
static const char *ename(int e)
{
	static char num[32];
	const char *s = strerrorname_np(e);

	if (s)
		return s;
	snprintf(num, sizeof(num), "errno %d", e);
	return num;
}

/* the current log entry */
static char *cur(struct fz *z)
{
	return z->log[(z->logged - 1) % LOG_KEEP];
}

/* Start the log entry of the current operation. */
__attribute__((format(printf, 2, 3)))
static void note(struct fz *z, const char *fmt, ...)
{
	char *e = z->log[z->logged++ % LOG_KEEP];
	int k = snprintf(e, LOG_LEN, "%6lu ", z->n);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e + k, LOG_LEN - (size_t)k, fmt, ap);
	va_end(ap);
}

/* Append to the log entry of the current operation. */
__attribute__((format(printf, 2, 3)))
static void append(struct fz *z, const char *fmt, ...)
{
	char *e = cur(z);
	size_t k = strlen(e);
	va_list ap;

	if (k + 1 >= LOG_LEN)
		return;
	va_start(ap, fmt);
	vsnprintf(e + k, LOG_LEN - k, fmt, ap);
	va_end(ap);
}

static void dump_log(struct fz *z)
{
	unsigned long i = z->logged > LOG_KEEP ? z->logged - LOG_KEEP : 0;

	fprintf(stderr, "last %lu operations (A = %s, B = %s):\n", z->logged - i,
		z->root_path[0], z->root_path[1]);
	for (; i < z->logged; i++)
		fprintf(stderr, "  %s\n", z->log[i % LOG_KEEP]);
}

/* A divergence: what differs, the log, how to repeat it; exit 1. */
__attribute__((format(printf, 2, 3), noreturn))
static void diverge(struct fz *z, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "zr_difffuzz: DIVERGENCE at operation %lu (seed %" PRIu64 "): ",
		z->n, z->seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_log(z);
	fprintf(stderr, "to repeat (from the same starting trees):%s\n", z->cmdline);
	exit(1);
}

/* A failure of the fuzzer itself (not of the trees): exit 2. */
__attribute__((format(printf, 1, 2), noreturn))
static void fatal(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "zr_difffuzz: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* calloc() or exit 2: @return zeroed memory, never NULL (free with free) */
static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p)
		fatal("out of memory");
	return p;
}

/* Zeroed memory aligned to DIO_ALIGN (for O_DIRECT), never NULL (free with free). */
static void *xmalloc_aligned(size_t n)
{
	void *p;

	if (posix_memalign(&p, DIO_ALIGN, n) != 0)
		fatal("out of memory");
	memset(p, 0, n);
	return p;
}

static void fmt_res(char *out, size_t n, const struct res *r)
{
	if (r->ret >= 0)
		snprintf(out, n, "%ld", r->ret);
	else
		snprintf(out, n, "-1 %s", ename(r->err));
}

/*
 * Compare the outcomes of one call on both sides: success or failure, the
 * errno, and with @value the return value too.  Appends the outcome to the
 * log; diverges when they differ.  @return true when both succeeded.
 */
static bool same(struct fz *z, const struct res r[2], bool value)
{
	char a[64], b[64];
	bool differ;

	fmt_res(a, sizeof(a), &r[0]);
	fmt_res(b, sizeof(b), &r[1]);
	differ = (r[0].ret < 0) != (r[1].ret < 0) ||
		 (r[0].ret < 0 && r[0].err != r[1].err) ||
		 (value && r[0].ret != r[1].ret);
	if (differ) {
		append(z, " -> A: %s, B: %s", a, b);
		diverge(z, "results differ: A returned %s, B returned %s", a, b);
	}
	if (r[0].ret < 0 || value)
		append(z, " -> %s", a);
	else
		append(z, " -> ok");
	return r[0].ret >= 0;
}

/* Run CALL on each side S (0 = A, 1 = B), the outcomes in r[S]. */
#define BOTH(r, CALL) do {						\
	for (int S = 0; S < 2; S++) {					\
		long v_;						\
		errno = 0;						\
		v_ = (long)(CALL);					\
		(r)[S].ret = v_;					\
		(r)[S].err = v_ < 0 ? errno : 0;			\
	}								\
} while (0)

/* --- random choices --------------------------------------------------- */

static uint64_t rnd(struct fz *z)
{
	z->rng ^= z->rng >> 12;
	z->rng ^= z->rng << 25;
	z->rng ^= z->rng >> 27;
	return z->rng * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, n); 0 when n is 0 */
static uint64_t below(struct fz *z, uint64_t n)
{
	return n ? rnd(z) % n : 0;
}

/* true with probability @pct percent */
static bool chance(struct fz *z, unsigned pct)
{
	return below(z, 100) < pct;
}

/* An offset for a write to a file of @size bytes: inside, at the end,
 * past it (a hole), or on and around block boundaries. */
static uint64_t pick_off(struct fz *z, uint64_t size)
{
	static const uint64_t units[] = { 4096, 65536, 131072 };
	uint64_t r = below(z, 100), u, o;

	if (r < 30) {
		o = below(z, size + 1);
	} else if (r < 50) {
		u = units[below(z, 3)];
		o = below(z, z->max_off / u) * u;
		if (chance(z, 50))
			o += below(z, 9) - 4;
	} else if (r < 65) {
		o = size;
	} else if (r < 80) {
		o = size + 1 + below(z, 256 << 10);
	} else {
		o = below(z, z->max_off);
	}
	return o > z->max_off ? z->max_off : o;
}

/* A length in [1, MAX_IO]: tiny, page and block multiples and neighbours, any. */
static uint64_t pick_len(struct fz *z)
{
	uint64_t r = below(z, 100);

	if (r < 25)
		return 1 + below(z, 64);
	if (r < 45)
		return 4096 * (1 + below(z, 32));
	if (r < 60)
		return (chance(z, 50) ? 65536 : 131072) + below(z, 5) - 2;
	return 1 + below(z, MAX_IO);
}

static const char *const kind_names[] = { "random", "zeros", "fill", "text", "pattern" };

/* Fill @len bytes of z->wbuf (for offset @off) with seeded data; @return its kind. */
static const char *gen_data(struct fz *z, uint64_t len, uint64_t off)
{
	unsigned char *p = z->wbuf;
	uint64_t i, r = below(z, 10);
	int kind = r < 4 ? 0 : r < 5 ? 1 : r < 6 ? 2 : r < 8 ? 3 : 4;

	switch (kind) {
	case 0:
		for (i = 0; i < len; i += 8) {
			uint64_t v = rnd(z);

			memcpy(p + i, &v, len - i < 8 ? len - i : 8);
		}
		break;
	case 1:
		memset(p, 0, len);
		break;
	case 2:
		memset(p, (int)(1 + below(z, 255)), len);
		break;
	case 3: {
		static const char words[] = "zramfs keeps this block compressed in ram, ";
		uint64_t s = below(z, sizeof(words) - 1);

		for (i = 0; i < len; i++)
			p[i] = (unsigned char)words[(s + i) % (sizeof(words) - 1)];
		break;
	}
	default: {
		unsigned char tag = (unsigned char)(z->n % 251);

		for (i = 0; i < len; i++)
			p[i] = (unsigned char)((((off + i) % 251) ^ tag) | 1);
	}
	}
	return kind_names[kind];
}

/* --- the namespace ------------------------------------------------------ */

static const char *const leaf_file[] = { "f0", "f1", "f2", "f3" };
static const char *const leaf_dir[] = { "d0", "d1", "d2" };
static const char *const leaf_link[] = { "s0", "s1" };
/* FIFOs have names of their own: no other operation opens them (an open
 * would block) or makes a file, directory or symlink by such a name */
static const char *const leaf_fifo[] = { "p0", "p1" };
/* parents made up (some do not exist, f0 is a file: ENOENT, ENOTDIR) */
static const char *const made_parent[] = {
	"", "", "d0", "d1", "d2", "d0/d1", "d1/d0", "d2/d2", "f0", "d0/f1",
};
#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Which kinds of entries a choice prefers: a mask of these. */
#define K_FILE 1
#define K_DIR 2
#define K_LINK 4
#define K_ANY (K_FILE | K_DIR | K_LINK)
#define K_FIFO 8		/* only when asked for: not in K_ANY */

static char type_of(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISFIFO(m) ? 'p' : 'o';
}

static unsigned kind_of(char type)
{
	return type == 'f' ? K_FILE : type == 'd' ? K_DIR : type == 'l' ? K_LINK :
	       type == 'p' ? K_FIFO : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void free_names(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/*
 * The names in directory @rel (relative to @root, "" for the root itself),
 * without "." and "..", sorted, in *@names (free with free_names) and
 * their number in *@n.  @return 0, or -errno of opening or reading it.
 */
static int list_names(int root, const char *rel, char ***names, size_t *n)
{
	int fd = openat(root, *rel ? rel : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t cap = 16, k = 0;
	char **v;
	struct dirent *d;
	DIR *dir;

	*names = NULL;
	*n = 0;
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		int e = errno;

		close(fd);
		return -e;
	}
	v = xmalloc(cap * sizeof(*v));
	errno = 0;
	while ((d = readdir(dir))) {
		if (strcmp(d->d_name, ".") == 0 || strcmp(d->d_name, "..") == 0)
			continue;
		if (k == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				fatal("out of memory");
		}
		v[k] = strdup(d->d_name);
		if (!v[k])
			fatal("out of memory");
		k++;
	}
	if (errno) {
		int e = errno;

		closedir(dir);
		free_names(v, k);
		return -e;
	}
	closedir(dir);
	qsort(v, k, sizeof(*v), cmp_str);
	*names = v;
	*n = k;
	return 0;
}

/* @rel joined with @name into @out (PATH_LEN); @return false if too long. */
static bool join(char *out, const char *rel, const char *name)
{
	int k = snprintf(out, PATH_LEN, "%s%s%s", rel, *rel ? "/" : "", name);

	return k > 0 && k < PATH_LEN;
}

static void scan_dir(struct fz *z, const char *rel, int depth)
{
	char **names, path[PATH_LEN];
	size_t n, i;
	struct stat st;

	if (list_names(z->root[1], rel, &names, &n) < 0)
		return;
	for (i = 0; i < n && z->nents < MAX_PATHS; i++) {
		if ((depth == 0 && strcmp(names[i], BALLAST) == 0) ||
		    !join(path, rel, names[i]) ||
		    fstatat(z->root[1], path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		strcpy(z->ents[z->nents].path, path);
		z->ents[z->nents].type = type_of(st.st_mode);
		z->ents[z->nents].depth = depth;
		z->nents++;
		if (S_ISDIR(st.st_mode) && depth < MAX_DEPTH)
			scan_dir(z, path, depth + 1);
	}
	free_names(names, n);
}

/* Refresh the list of B's entries if the namespace changed. */
static void scan(struct fz *z)
{
	if (!z->stale)
		return;
	z->nents = 0;
	scan_dir(z, "", 0);
	z->stale = false;
}

/* An existing entry of B of a kind in @mask into @out; @return false if none. */
static bool pick_existing(struct fz *z, unsigned mask, char *out)
{
	unsigned i, k = 0, pick;

	scan(z);
	for (i = 0; i < z->nents; i++)
		if (kind_of(z->ents[i].type) & mask)
			k++;
	if (k == 0)
		return false;
	pick = (unsigned)below(z, k);
	for (i = 0; i < z->nents; i++) {
		if (!(kind_of(z->ents[i].type) & mask))
			continue;
		if (pick-- == 0) {
			strcpy(out, z->ents[i].path);
			return true;
		}
	}
	return false;
}

/* An existing directory of B at most two levels deep (the tree stays
 * shallow, names collide) into @out; @return false if none. */
static bool pick_parent(struct fz *z, char *out)
{
	unsigned i, k = 0, pick;

	scan(z);
	for (i = 0; i < z->nents; i++)
		if (z->ents[i].type == 'd' && z->ents[i].depth < 2)
			k++;
	if (k == 0)
		return false;
	pick = (unsigned)below(z, k);
	for (i = 0; i < z->nents; i++) {
		if (z->ents[i].type == 'd' && z->ents[i].depth < 2 && pick-- == 0) {
			strcpy(out, z->ents[i].path);
			return true;
		}
	}
	return false;
}

static const char *leaf(struct fz *z, unsigned mask)
{
	unsigned pool[4], k = 0, which;

	if (mask & K_FILE)
		pool[k++] = K_FILE;
	if (mask & K_DIR)
		pool[k++] = K_DIR;
	if (mask & K_LINK)
		pool[k++] = K_LINK;
	if (mask & K_FIFO)
		pool[k++] = K_FIFO;
	which = k ? pool[below(z, k)] : K_FILE;
	if (which == K_DIR)
		return leaf_dir[below(z, NELEM(leaf_dir))];
	if (which == K_LINK)
		return leaf_link[below(z, NELEM(leaf_link))];
	if (which == K_FIFO)
		return leaf_fifo[below(z, NELEM(leaf_fifo))];
	return leaf_file[below(z, NELEM(leaf_file))];
}

/* A made-up path (it may exist or not) whose last name is of a kind in @mask. */
static void made_path(struct fz *z, unsigned mask, char *out)
{
	char parent[PATH_LEN];

	if (chance(z, 45) && pick_parent(z, parent))
		;	/* an existing directory */
	else if (chance(z, 35))
		parent[0] = '\0';
	else
		strcpy(parent, made_parent[below(z, NELEM(made_parent))]);
	if (!join(out, parent, leaf(z, chance(z, 15) ? K_ANY : mask)))
		strcpy(out, leaf(z, mask));
}

/* A path for an operation on entries of a kind in @mask: mostly an existing
 * one (now and then of any kind), else a made-up one. */
static void pick_path(struct fz *z, unsigned mask, char *out)
{
	if (chance(z, 70) && pick_existing(z, chance(z, 15) ? K_ANY : mask, out))
		return;
	made_path(z, mask, out);
}

/* the directory part of @path ("" for the root) into @out */
static void parent_of(const char *path, char *out)
{
	const char *s = strrchr(path, '/');
	size_t k = s ? (size_t)(s - path) : 0;

	memcpy(out, path, k);
	out[k] = '\0';
}

/* root-prefixed path of side @s into @out (PATH_MAX) */
static const char *full(struct fz *z, int s, const char *rel, char *out)
{
	snprintf(out, PATH_MAX, "%s/%s", z->root_path[s], rel);
	return out;
}

/* --- explicit mtimes ---------------------------------------------------- */

static int find_expl(struct fz *z, ino_t ino)
{
	for (unsigned i = 0; i < z->nexpl; i++)
		if (z->expl[i].ino == ino)
			return (int)i;
	return -1;
}

static bool is_explicit(struct fz *z, ino_t ino)
{
	return find_expl(z, ino) >= 0;
}

static void mark(struct fz *z, ino_t ino, bool dir)
{
	if (is_explicit(z, ino) || z->nexpl == MAX_EXPLICIT)
		return;
	z->expl[z->nexpl].ino = ino;
	z->expl[z->nexpl].dir = dir;
	z->nexpl++;
}

static void unmark(struct fz *z, ino_t ino)
{
	int i = find_expl(z, ino);

	if (i >= 0)
		z->expl[i] = z->expl[--z->nexpl];
}

/* No directory's mtime is known any more (a file made through a symlink). */
static void unmark_dirs(struct fz *z)
{
	for (unsigned i = 0; i < z->nexpl;) {
		if (z->expl[i].dir)
			z->expl[i] = z->expl[--z->nexpl];
		else
			i++;
	}
}

/* B's inode of @rel (following a final symlink with @follow); @return 0 if none. */
static ino_t b_ino(struct fz *z, const char *rel, bool follow)
{
	struct stat st;

	if (fstatat(z->root[1], *rel ? rel : ".", &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	return st.st_ino;
}

/* For the log: " i<B's inode of @rel>" (not following a final symlink). */
static void note_ino(struct fz *z, const char *rel)
{
	ino_t ino = b_ino(z, rel, false);

	if (ino)
		append(z, " i%lu", (unsigned long)ino);
}

/* The parent directory of @rel changes (an entry made or removed in it). */
static void unmark_parent(struct fz *z, const char *rel)
{
	char p[PATH_LEN];
	ino_t ino;

	parent_of(rel, p);
	ino = b_ino(z, p, true);
	if (ino)
		unmark(z, ino);
}

/*
 * Read the state file @path (a relative path of B a line) into the set of
 * explicit mtimes.  @return 0, or -errno if it exists and cannot be read.
 */
static int load_state(struct fz *z, const char *path)
{
	char line[PATH_LEN + 2];
	FILE *f = fopen(path, "r");
	struct stat st;

	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (*line && fstatat(z->root[1], line, &st, AT_SYMLINK_NOFOLLOW) == 0)
			mark(z, st.st_ino, S_ISDIR(st.st_mode));
	}
	fclose(f);
	return 0;
}

/* Write the paths of B with an explicit mtime to @path; @return 0 or -errno. */
static int save_state(struct fz *z, const char *path)
{
	FILE *f = fopen(path, "w");
	struct stat st;
	int rc = 0;

	if (!f)
		return -errno;
	z->stale = true;
	scan(z);
	for (unsigned i = 0; i < z->nents; i++)
		if (fstatat(z->root[1], z->ents[i].path, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    is_explicit(z, st.st_ino))
			fprintf(f, "%s\n", z->ents[i].path);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/*
 * -S: write "seconds nanoseconds path" of the mtime of every entry of A to
 * @path (the trees are alike when it is called).  @return 0 or -errno.
 */
static int save_snapshot(struct fz *z, const char *path)
{
	FILE *f = fopen(path, "w");
	struct stat st;
	int rc = 0;

	if (!f)
		return -errno;
	z->stale = true;
	scan(z);
	for (unsigned i = 0; i <= z->nents; i++) {
		const char *p = i < z->nents ? z->ents[i].path : BALLAST;

		bool loose = false;

		if (fstatat(z->root[0], p, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		for (unsigned j = 0; j < z->nloose && !loose; j++)
			loose = z->loose[j] == st.st_ino;
		if (!loose)
			fprintf(f, "%lld %ld %s\n", (long long)st.st_mtim.tv_sec,
				st.st_mtim.tv_nsec, p);
	}
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/*
 * -S: the mtimes of A must be those of the snapshot @path (made by `run`
 * before the unmount): every mtime, not only explicit ones, must survive
 * the writeback and the remount.  Prints the differences; @return their
 * number, or -errno if @path cannot be read.
 */
static int check_snapshot(struct fz *z, const char *path)
{
	char line[PATH_LEN + 64], p[PATH_LEN];
	FILE *f = fopen(path, "r");
	unsigned bad = 0;
	long long sec;
	long nsec;
	struct stat st;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lld %ld %255[^\n]", &sec, &nsec, p) != 3)
			continue;
		if (fstatat(z->root[0], p, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (bad++ < MAX_REPORT)
				fprintf(stderr, "  differs: %s: %s (it was there before the unmount)\n",
					p, strerror(errno));
		} else if (st.st_mtim.tv_sec != sec || st.st_mtim.tv_nsec != nsec) {
			if (bad++ < MAX_REPORT)
				fprintf(stderr, "  differs: %s: mtime %lld.%09ld on A, %lld.%09ld before the unmount\n",
					p, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec, sec, nsec);
		}
	}
	fclose(f);
	return (int)bad;
}

/* --- comparisons -------------------------------------------------------- */

/*
 * Compare what stat said on A (@a) and on B (@b); @return false (the fields
 * that differ in @why) when they differ.
 */
static bool same_stat(struct fz *z, const struct stat *a, const struct stat *b,
		      char *why, size_t n)
{
	size_t k = 0;

	why[0] = '\0';
#define WHY(...) (k += (size_t)snprintf(why + k, k < n ? n - k : 0, __VA_ARGS__), k = k < n ? k : n)
	if ((a->st_mode & S_IFMT) != (b->st_mode & S_IFMT))
		WHY(" type %c/%c", type_of(a->st_mode), type_of(b->st_mode));
	if ((a->st_mode & 07777) != (b->st_mode & 07777))
		WHY(" mode %04o/%04o", a->st_mode & 07777, b->st_mode & 07777);
	if (a->st_uid != b->st_uid || a->st_gid != b->st_gid)
		WHY(" owner %u:%u/%u:%u", a->st_uid, a->st_gid, b->st_uid, b->st_gid);
	/* (a directory's link count is 1 on filesystems that do not count) */
	if (a->st_nlink != b->st_nlink && !(S_ISDIR(a->st_mode) && a->st_nlink == 1))
		WHY(" nlink %lu/%lu", (unsigned long)a->st_nlink, (unsigned long)b->st_nlink);
	if (!S_ISDIR(b->st_mode) && a->st_size != b->st_size)
		WHY(" size %lld/%lld", (long long)a->st_size, (long long)b->st_size);
	if (is_explicit(z, b->st_ino) &&
	    (a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec))
		WHY(" mtime %lld.%09ld/%lld.%09ld (explicit)",
		    (long long)a->st_mtim.tv_sec, a->st_mtim.tv_nsec,
		    (long long)b->st_mtim.tv_sec, b->st_mtim.tv_nsec);
#undef WHY
	return why[0] == '\0';
}

/* Diverge if the stat results of an operation differ (A/B in that order). */
static void check_stat(struct fz *z, const struct stat st[2])
{
	char why[LOG_LEN];

	if (!same_stat(z, &st[0], &st[1], why, sizeof(why)))
		diverge(z, "stat differs (A/B):%s", why);
	append(z, " (%c %04o n%lu s%lld%s)", type_of(st[1].st_mode), st[1].st_mode & 07777,
	       (unsigned long)st[1].st_nlink, (long long)st[1].st_size,
	       is_explicit(z, st[1].st_ino) ? " mtime" : "");
}

/* Diverge if @len bytes read at @off differ. */
static void check_data(struct fz *z, const unsigned char *a, const unsigned char *b,
		       size_t len, uint64_t off)
{
	size_t i;

	if (memcmp(a, b, len) == 0)
		return;
	for (i = 0; i < len && a[i] == b[i]; i++)
		;
	diverge(z, "data read differs: first at offset %#" PRIx64 " (A %#04x, B %#04x) of %zu bytes read at %#" PRIx64,
		off + i, a[i], b[i], len, off);
}

/*
 * The user.* xattr names of @path (not following a final symlink), sorted,
 * in *@names (free with free_names), their number in *@n.  @return 0 or -errno.
 */
static int user_xattrs(const char *path, char ***names, size_t *n)
{
	char list[65536];
	ssize_t len = llistxattr(path, list, sizeof(list));
	size_t k = 0, cap = 8;
	char **v;

	*names = NULL;
	*n = 0;
	if (len < 0)
		return -errno;
	v = xmalloc(cap * sizeof(*v));
	for (char *p = list; p < list + len; p += strlen(p) + 1) {
		if (strncmp(p, "user.", 5) != 0)
			continue;
		if (k == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			if (!v)
				fatal("out of memory");
		}
		v[k] = strdup(p);
		if (!v[k])
			fatal("out of memory");
		k++;
	}
	qsort(v, k, sizeof(*v), cmp_str);
	*names = v;
	*n = k;
	return 0;
}

/* State of one whole-tree comparison. */
struct cmp {
	struct fz *z;
	unsigned diffs;			/* differences found */
	unsigned long entries;		/* entries compared */
	struct { ino_t ino; char path[PATH_LEN]; } *links[2];	/* first name of each linked inode */
	unsigned nlinks[2];
	unsigned char *buf[2];		/* CHUNK bytes each */
};

__attribute__((format(printf, 2, 3)))
static void differ(struct cmp *c, const char *fmt, ...)
{
	va_list ap;

	if (c->diffs++ >= MAX_REPORT)
		return;
	fprintf(stderr, "  differs: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* The first name seen of side @s's inode @ino (@path if it is new). */
static const char *first_name(struct cmp *c, int s, ino_t ino, const char *path)
{
	unsigned i;

	for (i = 0; i < c->nlinks[s]; i++)
		if (c->links[s][i].ino == ino)
			return c->links[s][i].path;
	if (i == MAX_PATHS)
		return path;
	c->links[s][i].ino = ino;
	strcpy(c->links[s][i].path, path);
	c->nlinks[s]++;
	return path;
}

/* Compare the contents of regular file @rel on both sides. */
static void cmp_content(struct cmp *c, const char *rel)
{
	int fd[2], s;
	uint64_t off = 0;

	for (s = 0; s < 2; s++) {
		fd[s] = openat(c->z->root[s], rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (fd[s] < 0) {
			differ(c, "%s: cannot open on %c: %s", rel, "AB"[s], strerror(errno));
			if (s == 1)
				close(fd[0]);
			return;
		}
	}
	for (;;) {
		ssize_t n[2];

		for (s = 0; s < 2; s++) {
			size_t got = 0;

			do {
				n[s] = pread(fd[s], c->buf[s] + got, CHUNK - got, (off_t)(off + got));
				if (n[s] > 0)
					got += (size_t)n[s];
			} while (n[s] > 0 && got < CHUNK);
			n[s] = n[s] < 0 ? -errno : (ssize_t)got;
		}
		if (n[0] < 0 || n[1] < 0 || n[0] != n[1]) {
			differ(c, "%s: reading at %#" PRIx64 ": A %zd, B %zd", rel, off, n[0], n[1]);
			break;
		}
		if (memcmp(c->buf[0], c->buf[1], (size_t)n[0]) != 0) {
			size_t i;

			for (i = 0; c->buf[0][i] == c->buf[1][i]; i++)
				;
			differ(c, "%s: content differs first at offset %#" PRIx64 " (A %#04x, B %#04x)",
			       rel, off + i, c->buf[0][i], c->buf[1][i]);
			break;
		}
		if (n[0] < CHUNK)
			break;
		off += CHUNK;
	}
	close(fd[0]);
	close(fd[1]);
}

/* Whether -X turned every xattr operation off. */
static bool xattrs_off(const struct fz *z)
{
	return z->disabled[OP_SETXATTR] && z->disabled[OP_GETXATTR] &&
	       z->disabled[OP_LISTXATTR] && z->disabled[OP_REMOVEXATTR] &&
	       z->disabled[OP_FXATTR];
}

/* Compare the user.* xattrs of @rel on both sides. */
static void cmp_xattrs(struct cmp *c, const char *rel)
{
	char p[2][PATH_MAX], **names[2];
	size_t n[2], i;
	int rc[2];

	for (int s = 0; s < 2; s++)
		rc[s] = user_xattrs(full(c->z, s, rel, p[s]), &names[s], &n[s]);
	if (rc[0] != rc[1]) {
		differ(c, "%s: listxattr: A %s, B %s", rel, rc[0] ? ename(-rc[0]) : "ok",
		       rc[1] ? ename(-rc[1]) : "ok");
	} else if (n[0] != n[1]) {
		differ(c, "%s: %zu user xattrs on A, %zu on B", rel, n[0], n[1]);
	} else {
		for (i = 0; i < n[0]; i++) {
			char v[2][4096];
			ssize_t len[2];

			if (strcmp(names[0][i], names[1][i]) != 0) {
				differ(c, "%s: xattr names differ: A %s, B %s", rel, names[0][i], names[1][i]);
				break;
			}
			for (int s = 0; s < 2; s++)
				len[s] = lgetxattr(p[s], names[s][i], v[s], sizeof(v[s]));
			if (len[0] != len[1] || (len[0] > 0 && memcmp(v[0], v[1], (size_t)len[0]) != 0))
				differ(c, "%s: xattr %s differs (%zd bytes on A, %zd on B)",
				       rel, names[0][i], len[0], len[1]);
		}
	}
	free_names(names[0], n[0]);
	free_names(names[1], n[1]);
}

static void cmp_dir(struct cmp *c, const char *rel, int depth);

/* Compare entry @rel (present on both sides). */
static void cmp_entry(struct cmp *c, const char *rel, int depth)
{
	struct stat st[2];
	char why[LOG_LEN];
	int s;

	c->entries++;
	for (s = 0; s < 2; s++) {
		if (fstatat(c->z->root[s], rel, &st[s], AT_SYMLINK_NOFOLLOW) < 0) {
			differ(c, "%s: lstat on %c: %s", rel, "AB"[s], strerror(errno));
			return;
		}
	}
	if (!same_stat(c->z, &st[0], &st[1], why, sizeof(why))) {
		differ(c, "%s: stat (A/B):%s", rel, why);
		if ((st[0].st_mode & S_IFMT) != (st[1].st_mode & S_IFMT))
			return;
	}
	if (S_ISREG(st[1].st_mode) && st[1].st_nlink > 1 && st[0].st_nlink > 1) {
		const char *fa = first_name(c, 0, st[0].st_ino, rel);
		const char *fb = first_name(c, 1, st[1].st_ino, rel);

		if (strcmp(fa, fb) != 0)
			differ(c, "%s: a hard link of %s on A, of %s on B", rel, fa, fb);
	}
	if (S_ISREG(st[1].st_mode) && st[0].st_size == st[1].st_size) {
		cmp_content(c, rel);
	} else if (S_ISLNK(st[1].st_mode)) {
		char t[2][PATH_MAX];
		ssize_t len[2];

		for (s = 0; s < 2; s++)
			len[s] = readlinkat(c->z->root[s], rel, t[s], sizeof(t[s]));
		if (len[0] != len[1] || len[0] < 0 || memcmp(t[0], t[1], (size_t)len[0]) != 0)
			differ(c, "%s: link targets differ: A '%.*s', B '%.*s'", rel,
			       (int)(len[0] > 0 ? len[0] : 0), t[0], (int)(len[1] > 0 ? len[1] : 0), t[1]);
	}
	/* (-X with every xattr operation: A may have no xattrs at all, as
	 * zramfs -o xattr=off, and nothing set one) */
	if (!S_ISLNK(st[1].st_mode) && !xattrs_off(c->z))
		cmp_xattrs(c, rel);
	if (S_ISDIR(st[1].st_mode) && depth < MAX_DEPTH)
		cmp_dir(c, rel, depth + 1);
}

/* Compare directory @rel: its names, then each entry. */
static void cmp_dir(struct cmp *c, const char *rel, int depth)
{
	char **names[2], path[PATH_LEN];
	size_t n[2], i = 0, j = 0;
	int rc[2];

	for (int s = 0; s < 2; s++)
		rc[s] = list_names(c->z->root[s], rel, &names[s], &n[s]);
	if (rc[0] || rc[1]) {
		differ(c, "%s/: readdir: A %s, B %s", rel, rc[0] ? ename(-rc[0]) : "ok",
		       rc[1] ? ename(-rc[1]) : "ok");
		free_names(names[0], n[0]);
		free_names(names[1], n[1]);
		return;
	}
	while (i < n[0] || j < n[1]) {
		int d = i == n[0] ? 1 : j == n[1] ? -1 : strcmp(names[0][i], names[1][j]);

		if (d < 0) {
			differ(c, "%s%s%s: only on A", rel, *rel ? "/" : "", names[0][i++]);
		} else if (d > 0) {
			differ(c, "%s%s%s: only on B", rel, *rel ? "/" : "", names[1][j++]);
		} else {
			if (join(path, rel, names[0][i]))
				cmp_entry(c, path, depth);
			i++;
			j++;
		}
	}
	free_names(names[0], n[0]);
	free_names(names[1], n[1]);
}

/* Compare the whole trees; prints the differences, @return their number. */
static unsigned cmp_trees(struct fz *z, unsigned long *entries)
{
	struct cmp c = { .z = z };

	for (int s = 0; s < 2; s++) {
		c.links[s] = xmalloc(MAX_PATHS * sizeof(*c.links[s]));
		c.buf[s] = xmalloc(CHUNK);
	}
	cmp_dir(&c, "", 0);
	if (c.diffs > MAX_REPORT)
		fprintf(stderr, "  (%u more differences not shown)\n", c.diffs - MAX_REPORT);
	for (int s = 0; s < 2; s++) {
		free(c.links[s]);
		free(c.buf[s]);
	}
	if (entries)
		*entries = c.entries;
	return c.diffs;
}

/* --- the operations ----------------------------------------------------- */

static const char *flag_str(int flags)
{
	static char s[128];
	int acc = flags & O_ACCMODE;

	bool tmp = (flags & O_TMPFILE) == O_TMPFILE;	/* (O_TMPFILE holds O_DIRECTORY) */

	snprintf(s, sizeof(s), "%s%s%s%s%s%s%s%s%s",
		 acc == O_RDONLY ? "O_RDONLY" : acc == O_WRONLY ? "O_WRONLY" :
		 acc == O_RDWR ? "O_RDWR" : "O_ACCMODE",
		 tmp ? "|O_TMPFILE" : "",
		 flags & O_CREAT ? "|O_CREAT" : "", flags & O_EXCL ? "|O_EXCL" : "",
		 flags & O_TRUNC ? "|O_TRUNC" : "", flags & O_APPEND ? "|O_APPEND" : "",
		 flags & O_NOFOLLOW ? "|O_NOFOLLOW" : "",
		 flags & O_DIRECTORY && !tmp ? "|O_DIRECTORY" : "",
		 flags & O_DIRECT ? "|O_DIRECT" : "");
	return s;
}

/* A used slot (a directory one only with @dirs_too); @return -1 if none. */
static int pick_slot(struct fz *z, bool dirs_too)
{
	int k = 0, i, pick;

	for (i = 0; i < NSLOTS; i++)
		if (z->slots[i].used && (dirs_too || !z->slots[i].is_dir))
			k++;
	if (k == 0)
		return -1;
	pick = (int)below(z, (uint64_t)k);
	for (i = 0; i < NSLOTS; i++)
		if (z->slots[i].used && (dirs_too || !z->slots[i].is_dir) && pick-- == 0)
			return i;
	return -1;
}

/* "fd3 (d0/f1 O_RDWR)" for the log */
static const char *slot_str(struct fz *z, int i)
{
	static char s[PATH_LEN + 160];

	snprintf(s, sizeof(s), "fd%d(%s%s %s i%lu)", i, z->slots[i].nameless ? "nameless in " : "",
		 z->slots[i].nameless && !*z->slots[i].path ? "." : z->slots[i].path,
		 flag_str(z->slots[i].flags), (unsigned long)z->slots[i].bino);
	return s;
}

static void do_close_slot(struct fz *z, int i)
{
	struct slot *sl = &z->slots[i];
	struct res r[2];

	note(z, "close %s", slot_str(z, i));
	BOTH(r, close(sl->fd[S]));
	sl->used = false;
	same(z, r, true);
}

/* A slot that is not in use, closing a random one when all are; @return it. */
static int free_slot(struct fz *z)
{
	int i;

	for (i = 0; i < NSLOTS && z->slots[i].used; i++)
		;
	if (i == NSLOTS) {
		do_close_slot(z, (int)below(z, NSLOTS));
		for (i = 0; i < NSLOTS && z->slots[i].used; i++)
			;
	}
	return i;
}

/*
 * Slot @i takes the descriptors an open on both sides gave (@r), opened
 * with @flags by @path (for a @nameless O_TMPFILE file, the directory it
 * was made in); B's stat goes to @st, and the log line gets " = fdI iN".
 */
static void slot_take(struct fz *z, int i, const struct res r[2], int flags, bool nameless,
		      const char *path, struct stat *st)
{
	struct slot *sl = &z->slots[i];

	sl->used = true;
	sl->fd[0] = (int)r[0].ret;
	sl->fd[1] = (int)r[1].ret;
	sl->flags = flags;
	sl->nameless = nameless;
	strcpy(sl->path, path);
	if (fstat(sl->fd[1], st) < 0)
		fatal("fstat of a descriptor of B: %s", strerror(errno));
	sl->is_dir = S_ISDIR(st->st_mode);
	sl->bino = st->st_ino;
	append(z, " = fd%d i%lu", i, (unsigned long)st->st_ino);
}

static void do_open(struct fz *z)
{
	static const unsigned masks[] = { K_FILE, K_FILE, K_FILE, K_FILE, K_FILE, K_FILE,
					  K_FILE, K_DIR, K_LINK, K_ANY };
	char path[PATH_LEN];
	int i, flags, acc = (int)below(z, 100);
	mode_t mode = (mode_t)(0600 | below(z, 0200));
	struct res r[2];
	struct stat st;
	bool existed, was_link;

	i = free_slot(z);
	pick_path(z, masks[below(z, NELEM(masks))], path);
	flags = acc < 15 ? O_RDONLY : acc < 30 ? O_WRONLY : O_RDWR;
	if (chance(z, 65)) {
		flags |= O_CREAT;
		if (chance(z, 25))
			flags |= O_EXCL;
	}
	if (chance(z, 15))
		flags |= O_TRUNC;
	if (chance(z, 15))
		flags |= O_APPEND;
	if (chance(z, 5))
		flags |= O_NOFOLLOW;
	if (chance(z, 4))
		flags |= O_DIRECTORY;
	if (chance(z, 6))
		flags |= O_DIRECT;
	existed = b_ino(z, path, true) != 0;
	was_link = fstatat(z->root[1], path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
	note(z, "open %s %s %04o", path, flag_str(flags), mode);
	BOTH(r, openat(z->root[S], path, flags | O_CLOEXEC, mode));
	if (!same(z, r, false))
		return;
	slot_take(z, i, r, flags, false, path, &st);
	if (flags & O_TRUNC)
		unmark(z, st.st_ino);
	if (!existed) {		/* made it */
		z->stale = true;
		unmark_parent(z, path);
		if (was_link)
			unmark_dirs(z);
	}
}

static void do_close(struct fz *z)
{
	int i = pick_slot(z, true);

	if (i >= 0)
		do_close_slot(z, i);
}

/*
 * An O_DIRECT descriptor: mostly an offset and a length that are multiples
 * of DIO_ALIGN (the buffers are aligned); now and then left as they are.
 */
static void dio_align(struct fz *z, uint64_t *off, uint64_t *len)
{
	if (chance(z, 10))
		return;
	*off &= ~(uint64_t)(DIO_ALIGN - 1);
	*len &= ~(uint64_t)(DIO_ALIGN - 1);
	if (*len == 0)
		*len = DIO_ALIGN;
}

/*
 * Make the calls that follow as user and group OTHER_ID (@on), or as root
 * again: a file-system uid other than 0 drops CAP_FSETID, so that a write
 * or a truncate clears the set-user-ID bit (and set-group-ID where the
 * kernel says so).  The descriptors stay open: no permission is checked.
 */
static void as_other(struct fz *z, bool on)
{
	if (on) {
		append(z, " as %d:%d", OTHER_ID, OTHER_ID);
		setfsgid(OTHER_ID);
		setfsuid(OTHER_ID);
		if ((int)setfsuid((uid_t)-1) != OTHER_ID)
			fatal("setfsuid(%d) did not take", OTHER_ID);
	} else {
		setfsuid(0);
		setfsgid(0);
		if (setfsuid((uid_t)-1) != 0)
			fatal("setfsuid(0) did not take");
	}
}

/* fstat slot @i on both sides and compare (in the current log entry). */
static void fstat_both(struct fz *z, int i)
{
	struct stat st[2];
	struct res r[2];

	append(z, "; fstat");
	BOTH(r, fstat(z->slots[i].fd[S], &st[S]));
	if (same(z, r, true))
		check_stat(z, st);
}

/* write or pwrite to slot @i, compared */
static void write_slot(struct fz *z, int i, bool positional)
{
	struct slot *sl = &z->slots[i];
	struct stat st;
	uint64_t off, len, size;
	struct res r[2];
	const char *kind;
	bool other;

	size = fstat(sl->fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	off = pick_off(z, size);
	len = pick_len(z);
	if (sl->flags & O_DIRECT)
		dio_align(z, &off, &len);
	other = chance(z, 8);
	kind = gen_data(z, len, off);
	if (positional)
		note(z, "pwrite %s off %#" PRIx64 " len %#" PRIx64 " %s", slot_str(z, i), off, len, kind);
	else
		note(z, "write %s len %#" PRIx64 " %s", slot_str(z, i), len, kind);
	if (other)
		as_other(z, true);
	if (positional)
		BOTH(r, pwrite(sl->fd[S], z->wbuf, len, (off_t)off));
	else
		BOTH(r, write(sl->fd[S], z->wbuf, len));
	if (other)
		as_other(z, false);
	unmark(z, sl->bino);
	if (same(z, r, true) && other)
		fstat_both(z, i);
}

static void do_write(struct fz *z, bool positional)
{
	int i = pick_slot(z, true);

	if (i >= 0)
		write_slot(z, i, positional);
}

/* read or pread from slot @i, the data compared */
static void read_slot(struct fz *z, int i, bool positional)
{
	struct slot *sl = &z->slots[i];
	struct stat st;
	uint64_t off, len, size;
	struct res r[2];

	size = fstat(sl->fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	off = chance(z, 80) ? below(z, size + 1) : pick_off(z, size);
	len = pick_len(z);
	if (sl->flags & O_DIRECT)
		dio_align(z, &off, &len);
	if (positional) {
		note(z, "pread %s off %#" PRIx64 " len %#" PRIx64, slot_str(z, i), off, len);
		BOTH(r, pread(sl->fd[S], z->rbuf[S], len, (off_t)off));
	} else {
		off = (uint64_t)lseek(sl->fd[1], 0, SEEK_CUR);
		note(z, "read %s len %#" PRIx64 " (B at %#" PRIx64 ")", slot_str(z, i), len, off);
		BOTH(r, read(sl->fd[S], z->rbuf[S], len));
	}
	if (same(z, r, true) && r[0].ret > 0)
		check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, off);
}

static void do_read(struct fz *z, bool positional)
{
	int i = pick_slot(z, true);

	if (i >= 0)
		read_slot(z, i, positional);
}

static void do_lseek(struct fz *z)
{
	static const char *const wn[] = { "SEEK_SET", "SEEK_CUR", "SEEK_END" };
	int i = pick_slot(z, false), whence = (int)below(z, 3);
	struct stat st;
	int64_t off, size;
	struct res r[2];

	if (i < 0)
		return;
	size = fstat(z->slots[i].fd[1], &st) == 0 ? st.st_size : 0;
	if (whence == SEEK_SET)
		off = (int64_t)pick_off(z, (uint64_t)size);
	else if (whence == SEEK_CUR)
		off = (int64_t)below(z, 131072) - 65536;
	else
		off = (int64_t)below(z, (uint64_t)size + 65536) - size;
	note(z, "lseek %s %" PRId64 " %s", slot_str(z, i), off, wn[whence]);
	BOTH(r, lseek(z->slots[i].fd[S], off, whence));
	same(z, r, true);
}

/* A new size for a file of @size bytes: the same, larger, smaller, zero, any. */
static uint64_t pick_size(struct fz *z, uint64_t size)
{
	uint64_t r = below(z, 100);

	if (r < 25)
		return size;
	if (r < 45)
		return size + 1 + below(z, chance(z, 50) ? 4096 : 300 << 10);
	if (r < 70)
		return size ? below(z, size) : 0;
	if (r < 80)
		return 0;
	return below(z, z->max_off);
}

static void do_truncate(struct fz *z)
{
	char path[PATH_LEN], p[2][PATH_MAX];
	struct stat st;
	uint64_t size = 0, to;
	ino_t ino;
	struct res r[2];

	pick_path(z, K_FILE, path);
	ino = fstatat(z->root[1], path, &st, 0) == 0 ? st.st_ino : 0;
	if (ino)
		size = (uint64_t)st.st_size;
	to = pick_size(z, size);
	for (int s = 0; s < 2; s++)
		full(z, s, path, p[s]);
	note(z, "truncate %s to %#" PRIx64 " (from %#" PRIx64 ")", path, to, size);
	note_ino(z, path);
	BOTH(r, truncate(p[S], (off_t)to));
	/* POSIX marks the mtime when the size changes; Linux 6.18's tmpfs and
	 * ext4 do for the same size too, zramfs does not: compared with -t */
	if (same(z, r, true) && (to != size || !z->strict))
		unmark(z, ino);
	/* and after such a truncate(2) the kernel never sends the mtime that
	 * an earlier write, still in its cache, set: the backing file keeps
	 * the daemon's, up to a jiffy off; -S checks it with -t only */
	if (same(z, r, true) && r[0].ret == 0 && to == size && !z->strict &&
	    z->nloose < MAX_LOOSE && fstatat(z->root[0], path, &st, 0) == 0)
		z->loose[z->nloose++] = st.st_ino;
}

/* ftruncate slot @i (now and then as another user), compared */
static void ftruncate_slot(struct fz *z, int i)
{
	struct stat st;
	uint64_t size, to;
	struct res r[2];
	bool other;

	size = fstat(z->slots[i].fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	to = pick_size(z, size);
	other = chance(z, 8);
	note(z, "ftruncate %s to %#" PRIx64 " (from %#" PRIx64 ")", slot_str(z, i), to, size);
	if (other)
		as_other(z, true);
	BOTH(r, ftruncate(z->slots[i].fd[S], (off_t)to));
	if (other)
		as_other(z, false);
	unmark(z, z->slots[i].bino);
	if (same(z, r, true) && other)
		fstat_both(z, i);
}

static void do_ftruncate(struct fz *z)
{
	int i = pick_slot(z, true);

	if (i >= 0)
		ftruncate_slot(z, i);
}

static void do_fallocate(struct fz *z)
{
	static const int modes[] = { 0, FALLOC_FL_KEEP_SIZE,
				     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE };
	static const char *const mn[] = { "0", "KEEP_SIZE", "PUNCH_HOLE|KEEP_SIZE",
					  "PUNCH_HOLE|KEEP_SIZE" };
	int i = pick_slot(z, true), m = (int)below(z, NELEM(modes));
	struct stat st;
	uint64_t size, off, len;
	struct res r[2];

	if (i < 0)
		return;
	size = fstat(z->slots[i].fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	off = chance(z, 60) ? below(z, size + 1) : pick_off(z, size);
	len = chance(z, 2) ? 0 : pick_len(z);
	note(z, "fallocate %s %s off %#" PRIx64 " len %#" PRIx64, slot_str(z, i), mn[m], off, len);
	BOTH(r, fallocate(z->slots[i].fd[S], modes[m], (off_t)off, (off_t)len));
	unmark(z, z->slots[i].bino);
	same(z, r, true);
}

static void do_fsync(struct fz *z)
{
	int i = pick_slot(z, true);
	bool data = chance(z, 30);
	struct res r[2];

	if (i < 0)
		return;
	note(z, "%s %s", data ? "fdatasync" : "fsync", slot_str(z, i));
	if (data)
		BOTH(r, fdatasync(z->slots[i].fd[S]));
	else
		BOTH(r, fsync(z->slots[i].fd[S]));
	same(z, r, true);
}

/* fstat slot @i, compared (a log entry of its own) */
static void fstat_slot(struct fz *z, int i)
{
	struct stat st[2];
	struct res r[2];

	note(z, "fstat %s", slot_str(z, i));
	BOTH(r, fstat(z->slots[i].fd[S], &st[S]));
	if (same(z, r, true))
		check_stat(z, st);
}

static void do_fstat(struct fz *z)
{
	int i = pick_slot(z, true);

	if (i >= 0)
		fstat_slot(z, i);
}

static void do_stat(struct fz *z)
{
	char path[PATH_LEN];
	bool follow = chance(z, 50);
	struct stat st[2];
	struct res r[2];

	pick_path(z, K_ANY, path);
	note(z, "%s %s", follow ? "stat" : "lstat", path);
	BOTH(r, fstatat(z->root[S], path, &st[S], follow ? 0 : AT_SYMLINK_NOFOLLOW));
	if (same(z, r, true))
		check_stat(z, st);
}

/* Open @path on both sides, read it whole in pieces and compare. */
static void do_readfile(struct fz *z)
{
	char path[PATH_LEN];
	struct res r[2], o[2];
	uint64_t off = 0;

	pick_path(z, K_FILE, path);
	note(z, "readfile %s", path);
	BOTH(o, openat(z->root[S], path, O_RDONLY | O_CLOEXEC));
	if (!same(z, o, false))
		return;
	for (;;) {
		BOTH(r, read((int)o[S].ret, z->rbuf[S], MAX_IO));
		if (!same(z, r, true) || r[0].ret == 0)
			break;
		check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, off);
		off += (uint64_t)r[0].ret;
	}
	append(z, " (%#" PRIx64 " bytes)", off);
	close((int)o[0].ret);
	close((int)o[1].ret);
}

/*
 * renameat2(@src, @dst) on both sides with flags @f (0: none, 1:
 * RENAME_NOREPLACE, 2: RENAME_EXCHANGE), compared; on success the names
 * are rescanned and the mtimes the rename may move (both parents, both
 * inodes: a directory moved gets a new "..") are no longer explicit.
 */
static void rename_both(struct fz *z, const char *src, const char *dst, unsigned f)
{
	static const char *const fn[] = { "", " RENAME_NOREPLACE", " RENAME_EXCHANGE" };
	unsigned flags = f == 0 ? 0 : f == 1 ? RENAME_NOREPLACE : RENAME_EXCHANGE;
	ino_t ino[2];
	struct res res[2];

	ino[0] = b_ino(z, src, false);
	ino[1] = b_ino(z, dst, false);
	note(z, "rename %s -> %s%s", src, dst, fn[f]);
	note_ino(z, src);
	BOTH(res, syscall(SYS_renameat2, z->root[S], src, z->root[S], dst, flags));
	if (!same(z, res, true))
		return;
	z->stale = true;
	unmark_parent(z, src);
	unmark_parent(z, dst);
	if (ino[0])
		unmark(z, ino[0]);
	if (ino[1])
		unmark(z, ino[1]);
}

static void do_rename(struct fz *z)
{
	char src[PATH_LEN], dst[PATH_LEN];
	unsigned r = (unsigned)below(z, 100), f = r < 65 ? 0 : r < 82 ? 1 : 2;
	unsigned mask = K_ANY;
	struct stat st;

	if (!(chance(z, 85) && pick_existing(z, K_ANY, src)))
		made_path(z, K_ANY, src);
	if (fstatat(z->root[1], src, &st, AT_SYMLINK_NOFOLLOW) == 0)
		mask = kind_of(type_of(st.st_mode));
	if (chance(z, 45) && pick_existing(z, chance(z, 70) ? mask : K_ANY, dst))
		;
	else
		made_path(z, mask ? mask : K_ANY, dst);
	rename_both(z, src, dst, f);
}

static void do_link(struct fz *z)
{
	char old[PATH_LEN], path[PATH_LEN];
	bool follow = chance(z, 20);
	struct res r[2];

	pick_path(z, K_FILE | K_LINK, old);
	made_path(z, chance(z, 80) ? K_FILE : K_ANY, path);
	note(z, "link %s -> %s%s", old, path, follow ? " AT_SYMLINK_FOLLOW" : "");
	note_ino(z, old);
	BOTH(r, linkat(z->root[S], old, z->root[S], path, follow ? AT_SYMLINK_FOLLOW : 0));
	if (same(z, r, true)) {
		z->stale = true;
		unmark_parent(z, path);
	}
}

static void do_unlink(struct fz *z)
{
	char path[PATH_LEN];
	int i = pick_slot(z, false);
	struct res r[2];

	if (i >= 0 && !z->slots[i].nameless && chance(z, 30))
		strcpy(path, z->slots[i].path);		/* an open file */
	else
		pick_path(z, K_FILE | K_LINK, path);
	note(z, "unlink %s", path);
	note_ino(z, path);
	BOTH(r, unlinkat(z->root[S], path, 0));
	if (same(z, r, true)) {
		z->stale = true;
		unmark_parent(z, path);
	}
}

static void do_mkdir(struct fz *z)
{
	char path[PATH_LEN];
	mode_t mode = (mode_t)(0700 | below(z, 0100));
	struct res r[2];

	if (chance(z, 5))
		mode |= S_ISVTX;
	made_path(z, K_DIR, path);
	note(z, "mkdir %s %04o", path, mode);
	BOTH(r, mkdirat(z->root[S], path, mode));
	if (same(z, r, true)) {
		z->stale = true;
		unmark_parent(z, path);
	}
}

static void do_rmdir(struct fz *z)
{
	char path[PATH_LEN];
	struct res r[2];

	pick_path(z, K_DIR, path);
	note(z, "rmdir %s", path);
	BOTH(r, unlinkat(z->root[S], path, AT_REMOVEDIR));
	if (same(z, r, true)) {
		z->stale = true;
		unmark_parent(z, path);
	}
}

static void do_symlink(struct fz *z)
{
	char path[PATH_LEN], target[PATH_LEN];
	uint64_t r = below(z, 100);
	struct res res[2];

	made_path(z, chance(z, 80) ? K_LINK : K_ANY, path);
	/* relative, without "..": it stays in the tree wherever it moves */
	if (r < 50)
		strcpy(target, leaf(z, K_ANY));
	else if (r < 75)
		snprintf(target, sizeof(target), "%s/%s", leaf_dir[below(z, NELEM(leaf_dir))],
			 leaf(z, K_ANY));
	else if (r < 85)
		strcpy(target, strrchr(path, '/') ? strrchr(path, '/') + 1 : path);	/* a loop */
	else if (r < 90)
		strcpy(target, ".");
	else
		strcpy(target, "no_such_name_with_a_longer_target");
	note(z, "symlink %s -> %s", path, target);
	BOTH(res, symlinkat(target, z->root[S], path));
	if (same(z, res, true)) {
		z->stale = true;
		unmark_parent(z, path);
	}
}

static void do_readlink(struct fz *z)
{
	char path[PATH_LEN];
	size_t size = chance(z, 25) ? 1 + below(z, 6) : PATH_MAX;
	struct res r[2];

	pick_path(z, K_LINK, path);
	note(z, "readlink %s size %zu", path, size);
	BOTH(r, readlinkat(z->root[S], path, (char *)z->rbuf[S], size));
	if (same(z, r, true) && r[0].ret > 0)
		check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, 0);
}

static void do_chmod(struct fz *z)
{
	char path[PATH_LEN];
	int i = pick_slot(z, true);
	bool by_fd = i >= 0 && chance(z, 20);
	struct stat st;
	bool dir;
	mode_t mode;
	struct res r[2];

	if (by_fd) {
		dir = z->slots[i].is_dir;
	} else {
		pick_path(z, K_ANY, path);
		dir = fstatat(z->root[1], path, &st, 0) == 0 && S_ISDIR(st.st_mode);
	}
	/* the owner keeps what the fuzzer and the cleanup need */
	mode = (mode_t)(dir ? 0700 | below(z, 0100) : 0600 | below(z, 0200));
	if (chance(z, 8))
		mode |= dir ? S_ISVTX : S_ISUID;
	if (chance(z, 5))
		mode |= S_ISGID;
	if (by_fd) {
		note(z, "fchmod %s %04o", slot_str(z, i), mode);
		BOTH(r, fchmod(z->slots[i].fd[S], mode));
	} else {
		note(z, "chmod %s %04o", path, mode);
		BOTH(r, fchmodat(z->root[S], path, mode, 0));
	}
	same(z, r, true);
}

/* A time for utimensat: explicit (with nanoseconds), now or omitted. */
static void pick_time(struct fz *z, struct timespec *t, unsigned explicit_pct)
{
	uint64_t r = below(z, 100);

	if (r < explicit_pct) {
		t->tv_sec = (time_t)(1000000000 + below(z, 900000000));
		t->tv_nsec = chance(z, 20) ? 0 : (long)below(z, 1000000000);
	} else if (r < explicit_pct + (100 - explicit_pct) / 2) {
		t->tv_sec = 0;
		t->tv_nsec = UTIME_OMIT;
	} else {
		t->tv_sec = 0;
		t->tv_nsec = UTIME_NOW;
	}
}

static const char *time_str(const struct timespec *t)
{
	static char s[2][40];
	static int k;

	k ^= 1;
	if (t->tv_nsec == UTIME_OMIT)
		return "OMIT";
	if (t->tv_nsec == UTIME_NOW)
		return "NOW";
	snprintf(s[k], sizeof(s[k]), "%lld.%09ld", (long long)t->tv_sec, t->tv_nsec);
	return s[k];
}

static void do_utimens(struct fz *z)
{
	char path[PATH_LEN];
	struct timespec ts[2];
	int i = pick_slot(z, true), flags = chance(z, 30) ? AT_SYMLINK_NOFOLLOW : 0;
	bool by_fd = i >= 0 && chance(z, 20);
	struct stat st;
	ino_t ino = 0;
	bool dir = false;
	struct res r[2];

	pick_time(z, &ts[0], 60);
	pick_time(z, &ts[1], 84);
	if (by_fd) {
		note(z, "futimens %s atime %s mtime %s", slot_str(z, i), time_str(&ts[0]),
		     time_str(&ts[1]));
		BOTH(r, futimens(z->slots[i].fd[S], ts));
		ino = z->slots[i].bino;
		dir = z->slots[i].is_dir;
	} else {
		pick_path(z, K_ANY, path);
		note(z, "utimensat %s atime %s mtime %s%s", path, time_str(&ts[0]),
		     time_str(&ts[1]), flags ? " AT_SYMLINK_NOFOLLOW" : "");
		note_ino(z, path);
		BOTH(r, utimensat(z->root[S], path, ts, flags));
		if (fstatat(z->root[1], path, &st, flags) == 0) {
			ino = st.st_ino;
			dir = S_ISDIR(st.st_mode);
		}
	}
	if (!same(z, r, true) || !ino)
		return;
	if (ts[1].tv_nsec == UTIME_NOW)
		unmark(z, ino);
	else if (ts[1].tv_nsec != UTIME_OMIT)
		mark(z, ino, dir);
}

static const char *const xattr_names[] = {
	"user.a", "user.b", "user.zramfs.difffuzz.a.longer.attribute.name",
};

/* a value of 0..255 bytes for an xattr into z->wbuf; @return its length */
static size_t xattr_value(struct fz *z)
{
	size_t len = chance(z, 10) ? 0 : 1 + below(z, 255);

	gen_data(z, len, 0);
	return len;
}

/* Which xattr call a path xattr operation makes: by name or not following a link. */
static void xattr_path(struct fz *z, char *path, bool *nofollow)
{
	pick_path(z, chance(z, 80) ? K_FILE | K_DIR : K_ANY, path);
	*nofollow = chance(z, 20);
}

static void do_setxattr(struct fz *z)
{
	static const char *const fn[] = { "", " XATTR_CREATE", " XATTR_REPLACE" };
	char path[PATH_LEN], p[2][PATH_MAX];
	const char *name = xattr_names[below(z, NELEM(xattr_names))];
	unsigned f = (unsigned)below(z, 3);
	int flags = f == 0 ? 0 : f == 1 ? XATTR_CREATE : XATTR_REPLACE;
	bool nofollow;
	size_t len;
	struct res r[2];

	xattr_path(z, path, &nofollow);
	len = xattr_value(z);
	note(z, "%s %s %s len %zu%s", nofollow ? "lsetxattr" : "setxattr", path, name, len, fn[f]);
	if (nofollow)
		BOTH(r, lsetxattr(full(z, S, path, p[S]), name, z->wbuf, len, flags));
	else
		BOTH(r, setxattr(full(z, S, path, p[S]), name, z->wbuf, len, flags));
	same(z, r, true);
}

/* A buffer size for getxattr: 0 (asks the size), short, or ample. */
static size_t xattr_size(struct fz *z)
{
	uint64_t r = below(z, 100);

	return r < 10 ? 0 : r < 25 ? below(z, 200) : 4096;
}

static void do_getxattr(struct fz *z)
{
	char path[PATH_LEN], p[2][PATH_MAX];
	const char *name = xattr_names[below(z, NELEM(xattr_names))];
	size_t size = xattr_size(z);
	bool nofollow;
	struct res r[2];

	xattr_path(z, path, &nofollow);
	note(z, "%s %s %s size %zu", nofollow ? "lgetxattr" : "getxattr", path, name, size);
	if (nofollow)
		BOTH(r, lgetxattr(full(z, S, path, p[S]), name, z->rbuf[S], size));
	else
		BOTH(r, getxattr(full(z, S, path, p[S]), name, z->rbuf[S], size));
	if (same(z, r, true) && size && r[0].ret > 0)
		check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, 0);
}

/* Compare two listxattr results (@len bytes each in z->rbuf) as sorted sets of user.* names. */
static void check_list(struct fz *z, const struct res r[2])
{
	char *v[2][64];
	size_t n[2] = { 0, 0 };

	for (int s = 0; s < 2; s++) {
		char *p = (char *)z->rbuf[s], *end = p + r[s].ret;

		for (; p < end && n[s] < 64; p += strlen(p) + 1)
			if (strncmp(p, "user.", 5) == 0)
				v[s][n[s]++] = p;
		qsort(v[s], n[s], sizeof(v[s][0]), cmp_str);
	}
	if (n[0] != n[1])
		diverge(z, "listxattr: %zu user.* names on A, %zu on B", n[0], n[1]);
	for (size_t i = 0; i < n[0]; i++)
		if (strcmp(v[0][i], v[1][i]) != 0)
			diverge(z, "listxattr: the names differ: A has %s where B has %s",
				v[0][i], v[1][i]);
	append(z, " (%zu names)", n[0]);
}

static void do_listxattr(struct fz *z)
{
	char path[PATH_LEN], p[2][PATH_MAX];
	size_t size = chance(z, 10) ? 0 : 4096;
	bool nofollow;
	struct res r[2];

	xattr_path(z, path, &nofollow);
	note(z, "%s %s size %zu", nofollow ? "llistxattr" : "listxattr", path, size);
	if (nofollow)
		BOTH(r, llistxattr(full(z, S, path, p[S]), (char *)z->rbuf[S], size));
	else
		BOTH(r, listxattr(full(z, S, path, p[S]), (char *)z->rbuf[S], size));
	/* (the length counts other namespaces too: not compared) */
	if (same(z, r, false) && size)
		check_list(z, r);
}

static void do_removexattr(struct fz *z)
{
	char path[PATH_LEN], p[2][PATH_MAX];
	const char *name = xattr_names[below(z, NELEM(xattr_names))];
	bool nofollow;
	struct res r[2];

	xattr_path(z, path, &nofollow);
	note(z, "%s %s %s", nofollow ? "lremovexattr" : "removexattr", path, name);
	if (nofollow)
		BOTH(r, lremovexattr(full(z, S, path, p[S]), name));
	else
		BOTH(r, removexattr(full(z, S, path, p[S]), name));
	same(z, r, true);
}

/* xattr calls on an open descriptor */
static void do_fxattr(struct fz *z)
{
	int i = pick_slot(z, true), fd0, fd1;
	const char *name = xattr_names[below(z, NELEM(xattr_names))];
	uint64_t what = below(z, 4);
	struct res r[2];
	size_t len;

	if (i < 0)
		return;
	fd0 = z->slots[i].fd[0];
	fd1 = z->slots[i].fd[1];
	if (what == 0) {
		int flags = chance(z, 20) ? XATTR_CREATE : 0;

		len = xattr_value(z);
		note(z, "fsetxattr %s %s len %zu%s", slot_str(z, i), name, len,
		     flags ? " XATTR_CREATE" : "");
		BOTH(r, fsetxattr(S ? fd1 : fd0, name, z->wbuf, len, flags));
		same(z, r, true);
	} else if (what == 1) {
		len = xattr_size(z);
		note(z, "fgetxattr %s %s size %zu", slot_str(z, i), name, len);
		BOTH(r, fgetxattr(S ? fd1 : fd0, name, z->rbuf[S], len));
		if (same(z, r, true) && len && r[0].ret > 0)
			check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, 0);
	} else if (what == 2) {
		note(z, "flistxattr %s", slot_str(z, i));
		BOTH(r, flistxattr(S ? fd1 : fd0, (char *)z->rbuf[S], 4096));
		if (same(z, r, false))
			check_list(z, r);
	} else {
		note(z, "fremovexattr %s %s", slot_str(z, i), name);
		BOTH(r, fremovexattr(S ? fd1 : fd0, name));
		same(z, r, true);
	}
}

static void do_readdir(struct fz *z)
{
	char path[PATH_LEN], **names[2];
	size_t n[2];
	struct res r[2];

	if (chance(z, 15))
		path[0] = '\0';
	else
		pick_path(z, K_DIR, path);
	note(z, "readdir %s", *path ? path : ".");
	BOTH(r, list_names(z->root[S], path, &names[S], &n[S]));
	if (r[0].ret < 0)
		r[0].err = (int)-r[0].ret, r[0].ret = -1;
	if (r[1].ret < 0)
		r[1].err = (int)-r[1].ret, r[1].ret = -1;
	if (same(z, r, true)) {
		if (n[0] != n[1])
			diverge(z, "readdir: %zu names on A, %zu on B", n[0], n[1]);
		for (size_t i = 0; i < n[0]; i++)
			if (strcmp(names[0][i], names[1][i]) != 0)
				diverge(z, "readdir: the names differ: A has '%s' where B has '%s'",
					names[0][i], names[1][i]);
		append(z, " (%zu names)", n[0]);
	}
	free_names(names[0], n[0]);
	free_names(names[1], n[1]);
}

/* --- mmap --------------------------------------------------------------- */

/* A SIGBUS (a store or load past the end of a file, or an I/O error of
 * the mapping) jumps back here instead of killing the fuzzer. */
static sigjmp_buf bus_jmp;
static volatile sig_atomic_t bus_armed;

static void on_sigbus(int sig)
{
	(void)sig;
	if (bus_armed)
		siglongjmp(bus_jmp, 1);
	signal(SIGBUS, SIG_DFL);
	raise(SIGBUS);
}

/* Copy @len bytes from @src to @dst, one of them in a mapping; @return
 * false on a SIGBUS. */
static bool map_copy(void *dst, const void *src, size_t len)
{
	if (sigsetjmp(bus_jmp, 1)) {
		bus_armed = 0;
		return false;
	}
	bus_armed = 1;
	memcpy(dst, src, len);
	bus_armed = 0;
	return true;
}

/* Both map_copy() calls of a step: diverge if either side took a SIGBUS. */
static void map_copy_both(struct fz *z, void *dst[2], const void *src[2], size_t len,
			  const char *what)
{
	bool ok[2];

	for (int s = 0; s < 2; s++)
		ok[s] = map_copy(dst[s], src[s], len);
	if (!ok[0] || !ok[1])
		diverge(z, "mmap: SIGBUS on %s during a %s of %zu bytes inside the file's size",
			!ok[0] && !ok[1] ? "both sides" : !ok[0] ? "A" : "B", what, len);
}

/* An offset and a length inside [0, @mlen): its bytes are in the file. */
static void map_range(struct fz *z, uint64_t mlen, uint64_t *o, uint64_t *l)
{
	*o = chance(z, 30) ? below(z, mlen / PAGE + 1) * PAGE : below(z, mlen);
	if (*o >= mlen)
		*o = mlen - 1;
	*l = pick_len(z);
	if (*l > mlen - *o)
		*l = mlen - *o;
}

/*
 * mmap(MAP_SHARED) of a descriptor, at a page inside the file, for a length
 * that ends inside it (no SIGBUS: nothing past the size is touched), then
 * 1-5 steps: stores into the mapping, loads from it (compared), pread and
 * pwrite through the descriptor inside the size (the mapping sees them),
 * msync(MS_SYNC or MS_ASYNC); munmap; now and then a pread of the mapped
 * range after the munmap.  A file of size 0 is mapped and not touched.
 */
static void do_mmap(struct fz *z)
{
	int i = pick_slot(z, false), prot = chance(z, 75) ? PROT_READ | PROT_WRITE : PROT_READ;
	struct slot *sl;
	struct stat st;
	uint64_t size, off, mlen, steps, o, l;
	unsigned char *map[2];
	struct res r[2];

	if (i < 0)
		return;
	sl = &z->slots[i];
	size = fstat(sl->fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	off = below(z, size / PAGE + (size % PAGE ? 1 : 0)) * PAGE;
	mlen = size > off ? size - off : PAGE;
	if (mlen > 2 * (uint64_t)MAX_IO)
		mlen = chance(z, 50) ? 2 * (uint64_t)MAX_IO : 1 + below(z, 2 * (uint64_t)MAX_IO);
	note(z, "mmap %s off %#" PRIx64 " len %#" PRIx64 " %s MAP_SHARED (size %#" PRIx64 ")",
	     slot_str(z, i), off, mlen, prot & PROT_WRITE ? "PROT_READ|PROT_WRITE" : "PROT_READ",
	     size);
	for (int s = 0; s < 2; s++) {
		errno = 0;
		map[s] = mmap(NULL, mlen, prot, MAP_SHARED, sl->fd[s], (off_t)off);
		r[s].ret = map[s] == MAP_FAILED ? -1 : 0;
		r[s].err = map[s] == MAP_FAILED ? errno : 0;
	}
	if (!same(z, r, true)) {
		for (int s = 0; s < 2; s++)
			if (map[s] != MAP_FAILED)
				munmap(map[s], mlen);
		return;
	}
	if (z->verbose)
		printf("%s\n", cur(z));
	steps = size > off ? 1 + below(z, 5) : 0;
	while (steps--) {
		uint64_t what = below(z, 100);

		map_range(z, mlen, &o, &l);
		if (what < 40 && (prot & PROT_WRITE)) {
			const char *kind = gen_data(z, l, off + o);
			void *dst[2] = { map[0] + o, map[1] + o };
			const void *src[2] = { z->wbuf, z->wbuf };

			note(z, "  store into the mapping at %#" PRIx64 " len %#" PRIx64 " %s",
			     off + o, l, kind);
			map_copy_both(z, dst, src, l, "store");
			unmark(z, sl->bino);
			append(z, " -> ok");
		} else if (what < 65) {
			void *dst[2] = { z->rbuf[0], z->rbuf[1] };
			const void *src[2] = { map[0] + o, map[1] + o };

			note(z, "  load from the mapping at %#" PRIx64 " len %#" PRIx64, off + o, l);
			map_copy_both(z, dst, src, l, "load");
			check_data(z, z->rbuf[0], z->rbuf[1], l, off + o);
			append(z, " -> ok");
		} else if (what < 75) {
			note(z, "  pread %s off %#" PRIx64 " len %#" PRIx64, slot_str(z, i), off + o, l);
			BOTH(r, pread(sl->fd[S], z->rbuf[S], l, (off_t)(off + o)));
			if (same(z, r, true) && r[0].ret > 0)
				check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, off + o);
		} else if (what < 85) {
			const char *kind = gen_data(z, l, off + o);

			note(z, "  pwrite %s off %#" PRIx64 " len %#" PRIx64 " %s (mapped)",
			     slot_str(z, i), off + o, l, kind);
			BOTH(r, pwrite(sl->fd[S], z->wbuf, l, (off_t)(off + o)));
			unmark(z, sl->bino);
			same(z, r, true);
		} else {
			int flags = chance(z, 80) ? MS_SYNC : MS_ASYNC;

			note(z, "  msync %s", flags == MS_SYNC ? "MS_SYNC" : "MS_ASYNC");
			BOTH(r, msync(map[S], mlen, flags));
			same(z, r, true);
		}
		if (z->verbose)
			printf("%s\n", cur(z));
	}
	note(z, "  munmap");
	BOTH(r, munmap(map[S], mlen));
	same(z, r, true);
	if (size > off && chance(z, 40)) {
		l = mlen > MAX_IO ? MAX_IO : mlen;
		append(z, "; pread off %#" PRIx64 " len %#" PRIx64, off, l);
		BOTH(r, pread(sl->fd[S], z->rbuf[S], l, (off_t)off));
		if (same(z, r, true) && r[0].ret > 0)
			check_data(z, z->rbuf[0], z->rbuf[1], (size_t)r[0].ret, off);
	}
}

/* --- copy_file_range ------------------------------------------------------ */

/*
 * copy_file_range(2) between two descriptors, or within one (mostly to a
 * range that does not overlap: an overlap is EINVAL), from inside the
 * source, at its end or past it, to an offset as writes pick them; now and
 * then at the descriptors' positions (NULL offsets).
 */
static void do_copy_range(struct fz *z)
{
	int i = pick_slot(z, false), j = chance(z, 25) ? i : pick_slot(z, false);
	bool at_pos = chance(z, 12);
	struct stat st;
	uint64_t size_in, size_out, off_in, off_out, len;
	loff_t oi[2], oo[2];
	struct res r[2];
	char src[PATH_LEN + 160];

	if (i < 0 || j < 0)
		return;
	/* (slot_str() has one buffer) */
	snprintf(src, sizeof(src), "%s", slot_str(z, i));
	size_in = fstat(z->slots[i].fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	size_out = fstat(z->slots[j].fd[1], &st) == 0 ? (uint64_t)st.st_size : 0;
	off_in = chance(z, 75) ? below(z, size_in + 1) : pick_off(z, size_in);
	len = chance(z, 3) ? 0 : pick_len(z);
	off_out = pick_off(z, size_out);
	if (z->slots[i].bino == z->slots[j].bino && chance(z, 85) &&
	    off_out < off_in + len && off_in < off_out + len) {
		/* apart: after the source range, or before it */
		if (off_in >= len && chance(z, 50))
			off_out = below(z, off_in - len + 1);
		else
			off_out = off_in + len + below(z, 8192);
	}
	if (at_pos) {
		off_in = (uint64_t)lseek(z->slots[i].fd[1], 0, SEEK_CUR);
		off_out = (uint64_t)lseek(z->slots[j].fd[1], 0, SEEK_CUR);
		note(z, "copy_file_range %s (at %#" PRIx64 ") -> %s (at %#" PRIx64 ") len %#" PRIx64
		     " (sizes %#" PRIx64 ", %#" PRIx64 ")", src, off_in, slot_str(z, j),
		     off_out, len, size_in, size_out);
		BOTH(r, copy_file_range(z->slots[i].fd[S], NULL, z->slots[j].fd[S], NULL, len, 0));
	} else {
		note(z, "copy_file_range %s off %#" PRIx64 " -> %s off %#" PRIx64 " len %#" PRIx64
		     " (sizes %#" PRIx64 ", %#" PRIx64 ")", src, off_in, slot_str(z, j),
		     off_out, len, size_in, size_out);
		for (int s = 0; s < 2; s++) {
			oi[s] = (loff_t)off_in;
			oo[s] = (loff_t)off_out;
		}
		BOTH(r, copy_file_range(z->slots[i].fd[S], &oi[S], z->slots[j].fd[S], &oo[S], len, 0));
	}
	if (same(z, r, true) && r[0].ret > 0)
		unmark(z, z->slots[j].bino);
	if (!at_pos && r[0].ret >= 0 && (oi[0] != oi[1] || oo[0] != oo[1]))
		diverge(z, "copy_file_range: the offsets moved to %#llx, %#llx on A, %#llx, %#llx on B",
			(unsigned long long)oi[0], (unsigned long long)oo[0],
			(unsigned long long)oi[1], (unsigned long long)oo[1]);
}

/* --- chown and set-id bits ----------------------------------------------- */

static const int owner_ids[] = { -1, 0, OTHER_ID, OTHER_ID + 1, 65534 };

/*
 * chown, lchown (fchownat with AT_SYMLINK_NOFOLLOW) or fchown to root or to
 * other users and groups (-1: unchanged), now and then after a chmod that
 * sets S_ISUID, S_ISGID (with or without group execute) or S_ISVTX, so that
 * the clearing of set-id bits a chown makes is compared; then stat.
 */
static void do_chown(struct fz *z)
{
	char path[PATH_LEN];
	int i = pick_slot(z, true), flags = chance(z, 30) ? AT_SYMLINK_NOFOLLOW : 0;
	bool by_fd = i >= 0 && chance(z, 25);
	int uid = owner_ids[below(z, NELEM(owner_ids))];
	int gid = owner_ids[below(z, NELEM(owner_ids))];
	struct stat st[2];
	struct res r[2];

	if (!by_fd)
		pick_path(z, chance(z, 10) ? K_ANY | K_FIFO : K_ANY, path);
	if (chance(z, 45)) {
		bool dir;
		mode_t mode;

		if (by_fd)
			dir = z->slots[i].is_dir;
		else
			dir = fstatat(z->root[1], path, &st[1], 0) == 0 && S_ISDIR(st[1].st_mode);
		mode = (mode_t)(dir ? 0700 | below(z, 0100) : 0600 | below(z, 0200));
		if (chance(z, 60))
			mode |= S_ISUID;
		if (chance(z, 50))
			mode |= S_ISGID;
		if (chance(z, 50))
			mode |= S_IXGRP;
		if (chance(z, 15))
			mode |= S_ISVTX;
		if (by_fd) {
			note(z, "fchmod %s %04o", slot_str(z, i), mode);
			BOTH(r, fchmod(z->slots[i].fd[S], mode));
		} else {
			note(z, "chmod %s %04o", path, mode);
			BOTH(r, fchmodat(z->root[S], path, mode, 0));
		}
		same(z, r, true);
		if (z->verbose)
			printf("%s\n", cur(z));
	}
	if (by_fd) {
		note(z, "fchown %s %d:%d", slot_str(z, i), uid, gid);
		BOTH(r, fchown(z->slots[i].fd[S], (uid_t)uid, (gid_t)gid));
		if (same(z, r, true)) {
			append(z, "; fstat");
			BOTH(r, fstat(z->slots[i].fd[S], &st[S]));
			if (same(z, r, true))
				check_stat(z, st);
		}
		return;
	}
	note(z, "%s %s %d:%d", flags ? "lchown" : "chown", path, uid, gid);
	note_ino(z, path);
	BOTH(r, fchownat(z->root[S], path, (uid_t)uid, (gid_t)gid, flags));
	if (same(z, r, true)) {
		append(z, "; %s", flags ? "lstat" : "stat");
		BOTH(r, fstatat(z->root[S], path, &st[S], flags));
		if (same(z, r, true))
			check_stat(z, st);
	}
}

/* --- FIFOs ----------------------------------------------------------------- */

/*
 * FIFOs (named p0, p1): mknodat(S_IFIFO) with set-id bits now and then,
 * unlink, renameat2 (plain, RENAME_NOREPLACE, RENAME_EXCHANGE) onto
 * another FIFO name, stat and lstat, chmod, lchown.  Never opened.
 */
/* A made-up path whose last name is a FIFO name (p0, p1). */
static void fifo_path(struct fz *z, char *out)
{
	const char *name;

	made_path(z, K_FIFO, out);
	name = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
	if (name[0] != 'p') {
		/* made_path() picks any kind now and then: the name of a FIFO instead */
		char parent[PATH_LEN];

		parent_of(out, parent);
		if (!join(out, parent, leaf(z, K_FIFO)))
			strcpy(out, leaf(z, K_FIFO));
	}
}

static void do_fifo(struct fz *z)
{
	char path[PATH_LEN], dst[PATH_LEN];
	uint64_t what = below(z, 100);
	struct stat st[2];
	struct res r[2];

	if (what < 35) {
		mode_t mode = (mode_t)(0600 | below(z, 0200));

		if (chance(z, 10))
			mode |= S_ISUID | S_ISGID;
		fifo_path(z, path);
		note(z, "mknod %s S_IFIFO|%04o", path, mode);
		BOTH(r, mknodat(z->root[S], path, S_IFIFO | mode, 0));
		if (same(z, r, true)) {
			z->stale = true;
			unmark_parent(z, path);
			append(z, "; lstat");
			BOTH(r, fstatat(z->root[S], path, &st[S], AT_SYMLINK_NOFOLLOW));
			if (same(z, r, true))
				check_stat(z, st);
		}
		return;
	}
	if (!(chance(z, 85) && pick_existing(z, K_FIFO, path)))
		fifo_path(z, path);
	if (what < 50) {
		note(z, "unlink %s", path);
		note_ino(z, path);
		BOTH(r, unlinkat(z->root[S], path, 0));
		if (same(z, r, true)) {
			z->stale = true;
			unmark_parent(z, path);
		}
	} else if (what < 70) {
		unsigned f = (unsigned)below(z, 3);

		if (!(chance(z, 40) && pick_existing(z, K_FIFO, dst)))
			fifo_path(z, dst);
		rename_both(z, path, dst, f);
	} else if (what < 88) {
		bool follow = chance(z, 50);

		note(z, "%s %s", follow ? "stat" : "lstat", path);
		BOTH(r, fstatat(z->root[S], path, &st[S], follow ? 0 : AT_SYMLINK_NOFOLLOW));
		if (same(z, r, true))
			check_stat(z, st);
	} else if (what < 94) {
		mode_t mode = (mode_t)(0600 | below(z, 0200));

		if (chance(z, 30))
			mode |= S_ISUID | S_ISGID;
		note(z, "chmod %s %04o", path, mode);
		BOTH(r, fchmodat(z->root[S], path, mode, 0));
		if (same(z, r, true)) {
			append(z, "; lstat");
			BOTH(r, fstatat(z->root[S], path, &st[S], AT_SYMLINK_NOFOLLOW));
			if (same(z, r, true))
				check_stat(z, st);
		}
	} else {
		int uid = owner_ids[below(z, NELEM(owner_ids))];
		int gid = owner_ids[below(z, NELEM(owner_ids))];

		note(z, "lchown %s %d:%d", path, uid, gid);
		BOTH(r, fchownat(z->root[S], path, (uid_t)uid, (gid_t)gid, AT_SYMLINK_NOFOLLOW));
		if (same(z, r, true)) {
			append(z, "; lstat");
			BOTH(r, fstatat(z->root[S], path, &st[S], AT_SYMLINK_NOFOLLOW));
			if (same(z, r, true))
				check_stat(z, st);
		}
	}
}

/* --- O_TMPFILE and linkat of a descriptor ------------------------------- */

/*
 * linkat(2) of slot @i's descriptor to a made-up name: of /proc/self/fd/N
 * with AT_SYMLINK_FOLLOW, or of the descriptor itself with AT_EMPTY_PATH
 * (which takes CAP_DAC_READ_SEARCH: the fuzzer runs as root).  A file made
 * with O_TMPFILE gets its first name (unless it was made with O_EXCL:
 * ENOENT); any other file opened by name one more; a file unlinked while
 * open, or one made with O_TMPFILE whose name has gone again: ENOENT; a
 * directory: EPERM.  Then fstat (the link count).  A nameless slot that
 * got a name is known by it from then on (unlink picks it).
 */
static void link_slot(struct fz *z, int i)
{
	char path[PATH_LEN], proc[2][32];
	bool empty = chance(z, 40);
	struct slot *sl = &z->slots[i];
	struct res r[2];

	made_path(z, chance(z, 85) ? K_FILE : K_ANY, path);
	note(z, "flink %s -> %s%s", slot_str(z, i), path,
	     empty ? " (the fd, AT_EMPTY_PATH)" : " (/proc/self/fd, AT_SYMLINK_FOLLOW)");
	if (empty) {
		BOTH(r, linkat(sl->fd[S], "", z->root[S], path, AT_EMPTY_PATH));
	} else {
		for (int s = 0; s < 2; s++)
			snprintf(proc[s], sizeof(proc[s]), "/proc/self/fd/%d", sl->fd[s]);
		BOTH(r, linkat(AT_FDCWD, proc[S], z->root[S], path, AT_SYMLINK_FOLLOW));
	}
	if (!same(z, r, true))
		return;
	z->stale = true;
	unmark_parent(z, path);
	if (sl->nameless) {
		sl->nameless = false;
		strcpy(sl->path, path);
	}
	fstat_both(z, i);
}

/* A slot to link: mostly a nameless one if there is one; @return -1 if none is open. */
static int pick_link_slot(struct fz *z)
{
	int i = pick_slot(z, true), k = 0, pick;

	for (int j = 0; j < NSLOTS; j++)
		if (z->slots[j].used && z->slots[j].nameless)
			k++;
	if (i < 0 || k == 0 || chance(z, 25))
		return i;
	pick = (int)below(z, (uint64_t)k);
	for (int j = 0; j < NSLOTS; j++)
		if (z->slots[j].used && z->slots[j].nameless && pick-- == 0)
			return j;
	return i;
}

static void do_flink(struct fz *z)
{
	int i = pick_link_slot(z);

	if (i >= 0)
		link_slot(z, i);
}

/*
 * open(2) with O_TMPFILE|O_RDWR (or O_WRONLY; now and then O_EXCL,
 * O_APPEND, O_DIRECT, or O_RDONLY: EINVAL) in an existing directory, the
 * root, through a symlink, or in a made-up path (ENOENT, ENOTDIR); then
 * 0-4 of write, pwrite, ftruncate, pread and fstat on it (compared: the
 * data, a link count of 0, the mode less the umask, the size); then one
 * of: close it without a name (its data must go nowhere: the trees are
 * compared), link it to a made-up name (link_slot()), or leave it open
 * in a slot as do_open() does, for the other operations on descriptors
 * and a later "flink" (after writebacks and renames) to use.  Neither the
 * directory's mtime nor its listing changes until a link.
 */
static void do_tmpfile(struct fz *z)
{
	char dir[PATH_LEN];
	int i, flags, acc = (int)below(z, 100);
	mode_t mode = (mode_t)(0600 | below(z, 0200));
	uint64_t where = below(z, 100), steps, end;
	struct res r[2];
	struct stat st;

	i = free_slot(z);
	if (where < 60 && pick_parent(z, dir))
		;	/* an existing directory */
	else if (where < 80)
		dir[0] = '\0';
	else if (where < 88 && pick_existing(z, K_LINK, dir))
		;	/* a symlink: to a directory, a file, or nowhere */
	else
		strcpy(dir, made_parent[below(z, NELEM(made_parent))]);
	flags = O_TMPFILE | (acc < 3 ? O_RDONLY : acc < 20 ? O_WRONLY : O_RDWR);
	if (chance(z, 25))
		flags |= O_EXCL;
	if (chance(z, 8))
		flags |= O_APPEND;
	if (chance(z, 5))
		flags |= O_DIRECT;
	note(z, "open %s %s %04o", *dir ? dir : ".", flag_str(flags), mode);
	BOTH(r, openat(z->root[S], *dir ? dir : ".", flags | O_CLOEXEC, mode));
	if (!same(z, r, false))
		return;
	slot_take(z, i, r, flags, true, dir, &st);
	if (z->verbose)
		printf("%s\n", cur(z));
	for (steps = below(z, 5); steps; steps--) {
		uint64_t what = below(z, 100);

		if (what < 25)
			write_slot(z, i, false);
		else if (what < 55)
			write_slot(z, i, true);
		else if (what < 65)
			ftruncate_slot(z, i);
		else if (what < 85)
			read_slot(z, i, true);
		else
			fstat_slot(z, i);
		if (z->verbose)
			printf("%s\n", cur(z));
	}
	end = below(z, 100);
	if (end < 30) {
		do_close_slot(z, i);
	} else if (end < 65) {
		link_slot(z, i);
	} else {
		note(z, "keep %s open", slot_str(z, i));
	}
}

static void do_pause(struct fz *z)
{
	unsigned ms = (unsigned)below(z, z->pause_ms + 1);

	note(z, "pause %u ms", ms);
	usleep(ms * 1000U);
}

/*
 * -B: (re)write the file "ballast" of z->ballast bytes of random data on
 * both sides, in 64 KiB pieces in random order (no sequential stream that
 * would bypass the tier): it keeps a small budget full, so that blocks of
 * the other files are demoted and written back while they are in use.  No
 * operation picks it; the tree comparisons read it.
 */
static void write_ballast(struct fz *z)
{
	uint64_t n = (z->ballast + BALLAST_CHUNK - 1) / BALLAST_CHUNK, i, j, t, *order;
	struct res o[2], r[2];

	note(z, "write %s: %#" PRIx64 " bytes in %" PRIu64 " pieces in random order",
	     BALLAST, z->ballast, n);
	BOTH(o, openat(z->root[S], BALLAST, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	if (!same(z, o, false))
		return;
	order = xmalloc(n * sizeof(*order));
	for (i = 0; i < n; i++)
		order[i] = i;
	for (i = n; i > 1; i--) {
		j = below(z, i);
		t = order[i - 1];
		order[i - 1] = order[j];
		order[j] = t;
	}
	for (i = 0; i < n; i++) {
		uint64_t off = order[i] * BALLAST_CHUNK;
		uint64_t len = z->ballast - off < BALLAST_CHUNK ? z->ballast - off : BALLAST_CHUNK;

		/* text with a random byte in every 16: compresses about 2:1 */
		for (j = 0; j < len; j++)
			z->wbuf[j] = j % 16 ? (unsigned char)"ballast of zramfs difffuzz "[j % 27]
					    : (unsigned char)rnd(z);
		BOTH(r, pwrite((int)o[S].ret, z->wbuf, len, (off_t)off));
		same(z, r, true);
		/* (now, or the kernel's writeback sends it in order: a stream) */
		BOTH(r, sync_file_range((int)o[S].ret, (off_t)off, (off_t)len,
					SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
					SYNC_FILE_RANGE_WAIT_AFTER));
		same(z, r, true);
	}
	BOTH(r, ftruncate((int)o[S].ret, (off_t)z->ballast));
	same(z, r, true);
	BOTH(r, close((int)o[S].ret));
	same(z, r, true);
	free(order);
	if (z->verbose)
		printf("%s\n", cur(z));
}

/* Compare the whole trees now; diverge if they differ. */
static void tree_check(struct fz *z, const char *when)
{
	unsigned long entries;
	unsigned d;

	note(z, "compare the trees (%s)", when);
	d = cmp_trees(z, &entries);
	if (d)
		diverge(z, "the trees differ in %u places (listed above)", d);
	append(z, " -> %lu entries identical", entries);
}

static enum df_op pick_op(struct fz *z)
{
	unsigned total = 0, r, i;

	for (i = 0; i < OP_NR; i++)
		if (!z->disabled[i])
			total += op_weight[i];
	r = (unsigned)below(z, total);
	for (i = 0; i < OP_NR; i++) {
		if (z->disabled[i])
			continue;
		if (r < op_weight[i])
			break;
		r -= op_weight[i];
	}
	return (enum df_op)i;
}

static bool needs_slot(enum df_op op)
{
	switch (op) {
	case OP_CLOSE: case OP_WRITE: case OP_PWRITE: case OP_READ: case OP_PREAD:
	case OP_LSEEK: case OP_FTRUNCATE: case OP_FALLOCATE: case OP_FSYNC:
	case OP_FSTAT: case OP_FXATTR: case OP_MMAP: case OP_COPYRANGE: case OP_FLINK:
		return true;
	default:
		return false;
	}
}

static void run_op(struct fz *z, enum df_op op)
{
	switch (op) {
	case OP_OPEN: do_open(z); break;
	case OP_CLOSE: do_close(z); break;
	case OP_WRITE: do_write(z, false); break;
	case OP_PWRITE: do_write(z, true); break;
	case OP_READ: do_read(z, false); break;
	case OP_PREAD: do_read(z, true); break;
	case OP_LSEEK: do_lseek(z); break;
	case OP_TRUNCATE: do_truncate(z); break;
	case OP_FTRUNCATE: do_ftruncate(z); break;
	case OP_FALLOCATE: do_fallocate(z); break;
	case OP_FSYNC: do_fsync(z); break;
	case OP_FSTAT: do_fstat(z); break;
	case OP_STAT: do_stat(z); break;
	case OP_READFILE: do_readfile(z); break;
	case OP_RENAME: do_rename(z); break;
	case OP_LINK: do_link(z); break;
	case OP_UNLINK: do_unlink(z); break;
	case OP_MKDIR: do_mkdir(z); break;
	case OP_RMDIR: do_rmdir(z); break;
	case OP_SYMLINK: do_symlink(z); break;
	case OP_READLINK: do_readlink(z); break;
	case OP_CHMOD: do_chmod(z); break;
	case OP_UTIMENS: do_utimens(z); break;
	case OP_SETXATTR: do_setxattr(z); break;
	case OP_GETXATTR: do_getxattr(z); break;
	case OP_LISTXATTR: do_listxattr(z); break;
	case OP_REMOVEXATTR: do_removexattr(z); break;
	case OP_FXATTR: do_fxattr(z); break;
	case OP_READDIR: do_readdir(z); break;
	case OP_MMAP: do_mmap(z); break;
	case OP_COPYRANGE: do_copy_range(z); break;
	case OP_CHOWN: do_chown(z); break;
	case OP_FIFO: do_fifo(z); break;
	case OP_TMPFILE: do_tmpfile(z); break;
	case OP_FLINK: do_flink(z); break;
	case OP_PAUSE: do_pause(z); break;
	default: break;
	}
}

/* The `run` command; @return 0 (divergences exit 1). */
static int run(struct fz *z, const char *state, const char *snap)
{
	unsigned long before;
	int rc;

	z->ents = xmalloc(MAX_PATHS * sizeof(*z->ents));
	/* (aligned for O_DIRECT) */
	z->rbuf[0] = xmalloc_aligned(MAX_IO + 1);
	z->rbuf[1] = xmalloc_aligned(MAX_IO + 1);
	z->wbuf = xmalloc_aligned(MAX_IO + 8);
	z->stale = true;
	{
		struct sigaction sa = { .sa_handler = on_sigbus };

		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGBUS, &sa, NULL) < 0)
			fatal("sigaction: %s", strerror(errno));
	}
	if (state && (rc = load_state(z, state)) < 0)
		fatal("cannot read %s: %s", state, strerror(-rc));
	printf("zr_difffuzz: run seed %" PRIu64 " ops %lu A %s B %s (%u explicit mtimes)\n",
	       z->seed, z->nops, z->root_path[0], z->root_path[1], z->nexpl);
	if (z->ballast)
		write_ballast(z);
	for (z->n = 1; z->n <= z->nops; z->n++) {
		enum df_op op = pick_op(z);

		/* an operation on a descriptor when none is open opens one */
		if (needs_slot(op) && pick_slot(z, true) < 0 && !z->disabled[OP_OPEN])
			op = OP_OPEN;
		before = z->logged;
		run_op(z, op);
		if (z->logged != before) {
			z->counts[op]++;
			if (z->verbose)
				printf("%s\n", cur(z));
		}
		if (z->tree_every && z->n % z->tree_every == 0) {
			tree_check(z, "periodic");
			if (z->verbose)
				printf("%s\n", cur(z));
		}
	}
	z->n = z->nops;
	for (int i = 0; i < NSLOTS; i++)
		if (z->slots[i].used)
			do_close_slot(z, i);
	tree_check(z, "at the end");
	if (z->verbose) {
		printf("%s\n", cur(z));
		for (int i = 0; i < OP_NR; i++)
			printf("  %-12s %lu\n", op_names[i], z->counts[i]);
	}
	if (state && (rc = save_state(z, state)) < 0)
		fatal("cannot write %s: %s", state, strerror(-rc));
	if (snap && (rc = save_snapshot(z, snap)) < 0)
		fatal("cannot write %s: %s", snap, strerror(-rc));
	printf("zr_difffuzz: seed %" PRIu64 ": %lu operations, no divergence; %u explicit mtimes\n",
	       z->seed, z->nops, z->nexpl);
	free(z->ents);
	free(z->rbuf[0]);
	free(z->rbuf[1]);
	free(z->wbuf);
	return 0;
}

/* The `compare` command; @return 0 if the trees are alike, else 1. */
static int compare(struct fz *z, const char *state, const char *snap)
{
	unsigned long entries;
	unsigned d;
	int rc;

	z->ents = xmalloc(MAX_PATHS * sizeof(*z->ents));
	if (state && (rc = load_state(z, state)) < 0)
		fatal("cannot read %s: %s", state, strerror(-rc));
	d = cmp_trees(z, &entries);
	if (snap && (rc = check_snapshot(z, snap)) < 0)
		fatal("cannot read %s: %s", snap, strerror(-rc));
	else if (snap)
		d += (unsigned)rc;
	free(z->ents);
	if (d) {
		fprintf(stderr, "zr_difffuzz: compare %s %s: %u differences\n",
			z->root_path[0], z->root_path[1], d);
		return 1;
	}
	printf("zr_difffuzz: compare %s %s: %lu entries identical (%u explicit mtimes)\n",
	       z->root_path[0], z->root_path[1], entries, z->nexpl);
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: zr_difffuzz run [-vt] [-s seed] [-n ops] [-p ms] [-c n] [-l off] [-B size] [-M state] [-S snap]\n"
		"                       [-X op,...] A B\n"
		"       zr_difffuzz compare [-v] [-M state] [-S snap] A B\n"
		"  -s seed     random seed (1)\n"
		"  -n ops      operations to run (2000)\n"
		"  -p ms       pause up to ms milliseconds now and then (0: never)\n"
		"  -c n        compare the whole trees every n operations (500; 0: at the end only)\n"
		"  -l off      writes start below off (2097152; k/m suffixes)\n"
		"  -B size     first write a file 'ballast' of size bytes (k/m), compressible 2:1\n"
		"  -t          strict: check the known divergences too (the mtime after a\n"
		"              truncate(2) to the same size; set-id bits of a FIFO after\n"
		"              a chown(-1, -1))\n"
		"  -M state    file of the paths whose mtime was set explicitly (read, then written)\n"
		"  -S snap     run: write the mtimes of A at the end; compare: A must have them\n"
		"  -X op,...   turn operations off\n"
		"  -v          print every operation and its outcome\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct fz z = { .seed = 1, .nops = 2000, .tree_every = TREE_EVERY, .max_off = MAX_OFF };
	const char *state = NULL, *snap = NULL, *cmd;
	bool is_run;
	int c;

	if (argc < 2)
		usage();
	cmd = argv[1];
	if (strcmp(cmd, "run") == 0)
		is_run = true;
	else if (strcmp(cmd, "compare") == 0)
		is_run = false;
	else
		usage();
	optind = 2;
	while ((c = getopt(argc, argv, "vs:n:p:c:l:B:tM:S:X:")) != -1) {
		switch (c) {
		case 'v': z.verbose = true; break;
		case 's': z.seed = zr_cli_num("zr_difffuzz", optarg); break;
		case 'n': z.nops = (unsigned long)zr_cli_num("zr_difffuzz", optarg); break;
		case 'p': z.pause_ms = (unsigned)zr_cli_num("zr_difffuzz", optarg); break;
		case 'c': z.tree_every = (unsigned long)zr_cli_num("zr_difffuzz", optarg); break;
		case 't': z.strict = true; break;
		case 'l': z.max_off = zr_cli_num("zr_difffuzz", optarg); break;
		case 'B': z.ballast = zr_cli_num("zr_difffuzz", optarg); break;
		case 'M': state = optarg; break;
		case 'S': snap = optarg; break;
		case 'X': zr_cli_disable("zr_difffuzz", optarg, op_names, OP_NR, z.disabled); break;
		default: usage();
		}
	}
	if (optind != argc - 2 || z.max_off == 0)
		usage();
	if (!z.pause_ms)
		z.disabled[OP_PAUSE] = true;
	for (int i = 0; i < argc; i++) {
		size_t k = strlen(z.cmdline);

		snprintf(z.cmdline + k, sizeof(z.cmdline) - k, " %s", argv[i]);
	}
	z.root_path[0] = argv[optind];
	z.root_path[1] = argv[optind + 1];
	for (int s = 0; s < 2; s++) {
		z.root[s] = open(z.root_path[s], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (z.root[s] < 0)
			fatal("%s: %s", z.root_path[s], strerror(errno));
	}
	z.rng = z.seed * 0x9E3779B97F4A7C15ULL + 0x5DEECE66DULL;
	if (!z.rng)
		z.rng = 1;
	umask(022);
	setvbuf(stdout, NULL, _IOLBF, 0);
	return is_run ? run(&z, state, snap) : compare(&z, state, snap);
}

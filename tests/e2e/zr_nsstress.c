// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_nsstress: namespace operations of several processes racing the daemon's
 * writeback and reclaim, on files whose every block says what it must hold.
 *
 * Usage: zr_nsstress run [-P nproc] [-S seed] [-T secs] [-N ops] [-f files]
 *                        [-l blocks] [-B blocks] [-X op,...] [-K] [-p] -M MANIFESTS ROOT
 *        zr_nsstress verify -M MANIFESTS ROOT
 *
 * run: -P worker processes (default 4) work at once under ROOT, in shared
 * directories d0..d3, their subdirectories d<i>/s<j> (any worker makes and
 * removes those, so one worker's mkdir, rmdir and renames into them race
 * another's) and two private directories per worker, which it moves from
 * one d<i> to another under a new name while its files in them have dirty
 * blocks.  Worker w names its files w<w>.<n> and only ever touches its own
 * files: the content of each is known to it alone.  Every 4 KiB block of a
 * file is either zeros (a hole, a region a truncate or a write past the end
 * left, or zeros written) or a 64-byte header -- magic, file id, generation,
 * block index, checksum of the rest -- followed by a body generated from
 * those three numbers (random, text-like or nearly same-filled, so that
 * the daemon stores it raw or compressed); a truncate into a block keeps a
 * prefix of it.  The worker keeps, for each block, the generation it wrote
 * last.  Operations: create (holes, zero blocks, a partial last block),
 * rewrite blocks (through a kept fd or a fresh open of any name, past the
 * end too), read and check (after fdatasync + POSIX_FADV_DONTNEED at times,
 * so that the read reaches the daemon), truncate down and up (by path or
 * fd), rename to a new name in the same or another directory (with and
 * without RENAME_NOREPLACE), rename over another of its files (also two
 * links of one file: nothing happens), RENAME_EXCHANGE of two of its files,
 * a second hard link in another directory, unlink of one name of two,
 * unlink of the last name (with the file open or not) and I/O through the fd
 * afterwards, keep and close fds, mkdir/rmdir of the shared subdirectories,
 * move a private directory, fsync/fdatasync, stat every name (size, link
 * count, one inode number), readdir (the worker's names in a directory
 * are the model's), and O_TMPFILE: a file made without a name in one of
 * the directories, written (at times more than the daemon's budget, so
 * that its blocks go back to the disk while it has no name) and read,
 * then closed without a name (it goes), or given one by linkat(2) of
 * /proc/self/fd/N (at times over a name that is there first: EEXIST),
 * written after, at times linked again, renamed or unlinked while still
 * open, then closed or kept open; with O_EXCL, or once its names went
 * again, its link fails with ENOENT; one kept open without a name may be
 * linked in a later tmpfile operation.
 * Every read is checked block by block: a wrong block is
 * described by its header (another file's, another block's, an older
 * generation: stale data).  At the end each worker checks all its files,
 * closes its fds and writes MANIFESTS/w<w>.manifest: its private
 * directories and, for each file, its names, inode number, size and the
 * generation of each block.  -T stops after that many seconds (default
 * 20; 0: no limit), -N after that many operations per worker (default 0: no
 * limit; one of them must be set); -f files
 * per worker at most (16), -l blocks per file at most (64), -B blocks of
 * the big O_TMPFILE files (one in 16) at most (640: 2.5 MiB); -X turns
 * operations off by name; -p prints progress.  Link counts are checked
 * with statx(AT_STATX_FORCE_SYNC), and a file's attributes are refreshed
 * so before each link(2): the kernel's cached link count can lag (see
 * stat_sync()); -K checks the cached one instead and skips the refresh.
 *
 * verify: checks ROOT against the manifests -- every name there, the names
 * of a file on one inode, with the right link count, size and content, and
 * nothing else (no name that should have gone, no unknown directory; an
 * inode number other than the one the mount showed is only noted).  Use it
 * on the backing directory after an unmount and through a new mount.
 *
 * Each worker i runs with seed+i: the same command repeats each worker's
 * choices, though not their interleaving with the other workers and the
 * daemon (nor, where another worker's rmdir made one fail, what follows).
 * On the first mismatch or unexpected error the worker prints its seed, its
 * last 30 operations (with CLOCK_MONOTONIC times, to set beside a daemon
 * log), the earlier ones on the file at fault and that file's model, and
 * the run exits 1 (the other workers are stopped).
 *
 * Exit status: 0 all checks passed, 1 mismatch or error, 2 usage.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zr_cli.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define BLK 4096u		/* the unit the model tracks */
#define HDR 64u			/* header at the start of each block */
#define NTOP 4			/* shared directories d0..d3, never removed */
#define NSUB 3			/* shared subdirectories d<i>/s0..s2 of each */
#define NPRIV 2			/* private directories of each worker */
#define NDIR (NTOP + NTOP * NSUB + NPRIV)
#define MAXF_LIMIT 64
#define MAXB_LIMIT 1024
#define KEEP_FDS 6		/* fds a worker keeps open at most */
#define LOG_KEEP 30		/* operations printed on a failure */
#define LOG_RING 2048		/* kept, for the history of the failing file */
#define LOG_LEN 200
#define PATH_LEN 192

static const char magic[8] = "ZRNSBLK1";

/* operations */
enum ns_op {
	OP_CREATE, OP_WRITE, OP_READ, OP_TRUNC, OP_RENAME, OP_RENAME_OVER,
	OP_EXCHANGE, OP_LINK, OP_UNLINK, OP_UNLINK_OPEN, OP_CLOSE, OP_KEEP,
	OP_MKDIR, OP_RMDIR, OP_MOVE_DIR, OP_FSYNC, OP_STAT, OP_LIST, OP_TMPFILE, OP_NR
};

static const char *const op_names[OP_NR] = {
	"create", "write", "read", "truncate", "rename", "rename_over",
	"exchange", "link", "unlink", "unlink_open", "close", "keep",
	"mkdir", "rmdir", "move_dir", "fsync", "stat", "list", "tmpfile",
};

/* relative frequency of each operation */
static const unsigned op_weight[OP_NR] = {
	[OP_CREATE] = 8, [OP_WRITE] = 22, [OP_READ] = 14, [OP_TRUNC] = 6,
	[OP_RENAME] = 9, [OP_RENAME_OVER] = 4, [OP_EXCHANGE] = 4, [OP_LINK] = 5,
	[OP_UNLINK] = 3, [OP_UNLINK_OPEN] = 3, [OP_CLOSE] = 3, [OP_KEEP] = 3,
	[OP_MKDIR] = 3, [OP_RMDIR] = 3, [OP_MOVE_DIR] = 2, [OP_FSYNC] = 3,
	[OP_STAT] = 5, [OP_LIST] = 3, [OP_TMPFILE] = 3,
};

enum dkind { D_TOP, D_SUB, D_PRIV };

/* A directory a worker puts names in (path relative to ROOT). */
struct ns_dir {
	enum dkind kind;	/* D_SUB ones may be absent: any worker removes them */
	char path[PATH_LEN];
};

/* A name of a file: a directory of the worker's table and a leaf. */
struct ns_name {
	int dir;		/* index in ns_worker.dirs */
	char leaf[48];
};

/* What a file must hold: enough to rebuild each block. */
struct ns_model {
	uint32_t id;		/* (worker + 1) << 24 | number: unique in the run */
	uint64_t size;		/* its size in bytes */
	uint32_t *gen;		/* per block: generation written last, 0 = zeros */
	uint16_t *keep;		/* per block: bytes of the pattern kept (a
				 * truncate into the block zeroes the rest) */
};

/* A file of a worker, named, or open only (unlinked while open). */
struct ns_file {
	bool live;		/* exists: has names or the worker's fd */
	struct ns_model m;
	uint32_t wgen;		/* last generation written to any block */
	uint64_t ino;		/* inode number seen at its creation */
	int nnames;		/* 0..2 */
	struct ns_name names[2];
	int fd;			/* kept open O_RDWR, or -1 */
	bool linkable;		/* made with O_TMPFILE without O_EXCL, never
				 * linked: linkat(2) of its fd may name it */
};

/* The state of one worker process (or of `verify`, with w == -1). */
struct ns_worker {
	int w;			/* worker number, -1 for verify */
	char tag[16];		/* "[w<w>]" or "verify:", before its messages */
	uint64_t seed, rng;
	int root;		/* fd of ROOT */
	const char *rootpath;	/* ROOT */
	unsigned long n;	/* operations done */
	unsigned long nops;	/* 0: until the deadline */
	struct timespec deadline;
	unsigned maxf, maxb;	/* files, blocks per file at most (but for the
				 * big O_TMPFILE ones) */
	unsigned bigb;		/* blocks of a big O_TMPFILE file at most */
	unsigned capb;		/* blocks a model holds: maxb or bigb */
	unsigned long seq;	/* for new names */
	uint32_t next_id;
	int kept;		/* fds kept open */
	bool disabled[OP_NR];
	bool no_exchange;	/* RENAME_EXCHANGE refused with EINVAL */
	bool no_tmpfile;	/* O_TMPFILE refused with EOPNOTSUPP */
	struct ns_dir dirs[NDIR];
	struct ns_file files[MAXF_LIMIT];
	unsigned long done[OP_NR];	/* operations done, by kind */
	unsigned long refused[OP_NR];	/* of which failed as they may: the
					 * directory gone, or already there */
	unsigned long tmp_big, tmp_excl, tmp_linked, tmp_later, tmp_eexist, tmp_link2,
		      tmp_renamed, tmp_unlinked, tmp_nameless;	/* what the tmpfile ops did */
	char log[LOG_RING][LOG_LEN];
	uint32_t focus;		/* file the failure is about, or 0 */
	unsigned long logged;
	unsigned char *buf;	/* capb blocks */
	unsigned char want[BLK];
};

/* --- random numbers (splitmix64) ---------------------------------------- */

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rnd(struct ns_worker *wk)
{
	wk->rng += 0x9e3779b97f4a7c15ULL;
	return mix64(wk->rng);
}

/* uniform in [0, n); 0 when n is 0 */
static uint64_t rnd_below(struct ns_worker *wk, uint64_t n)
{
	return n ? rnd(wk) % n : 0;
}

/* --- failing ------------------------------------------------------------ */

/* Record what the current operation is about to do (printed on a failure:
 * the last LOG_KEEP, and earlier ones about the file the failure is
 * about), with the time (CLOCK_MONOTONIC, to compare with the daemon's). */
__attribute__((format(printf, 2, 3)))
static void logf_op(struct ns_worker *wk, const char *fmt, ...)
{
	char *e = wk->log[wk->logged++ % LOG_RING];
	struct timespec now;
	va_list ap;
	int k;

	clock_gettime(CLOCK_MONOTONIC, &now);
	k = snprintf(e, LOG_LEN, "%6lu %ld.%03ld ", wk->n, (long)now.tv_sec,
		     now.tv_nsec / 1000000);
	va_start(ap, fmt);
	vsnprintf(e + k, LOG_LEN - (size_t)k, fmt, ap);
	va_end(ap);
}

static void dump_log(struct ns_worker *wk)
{
	unsigned long start = wk->logged > LOG_KEEP ? wk->logged - LOG_KEEP : 0;
	unsigned long first = wk->logged > LOG_RING ? wk->logged - LOG_RING : 0, i;
	char id[16];

	if (wk->w < 0)
		return;
	if (wk->focus) {
		snprintf(id, sizeof(id), "%08x", wk->focus);
		fprintf(stderr, "[w%d] earlier operations on file %s:\n", wk->w, id);
		for (i = first; i < start; i++)
			if (strstr(wk->log[i % LOG_RING], id))
				fprintf(stderr, "[w%d]   %s\n", wk->w, wk->log[i % LOG_RING]);
	}
	fprintf(stderr, "[w%d] last %lu operations of worker %d (seed %" PRIu64 "):\n",
		wk->w, wk->logged - start, wk->w, wk->seed);
	for (i = start; i < wk->logged; i++)
		fprintf(stderr, "[w%d]   %s\n", wk->w, wk->log[i % LOG_RING]);
}

static void dump_model(struct ns_worker *wk, const struct ns_model *m)
{
	uint64_t b, nb = (m->size + BLK - 1) / BLK;

	fprintf(stderr, "%s model of file %08x: size %" PRIu64 ", blocks (generation/bytes kept):",
		wk->tag, m->id, m->size);
	for (b = 0; b < nb; b++)
		fprintf(stderr, "%s %u/%u", b % 12 ? "" : "\n    ", m->gen[b], m->keep[b]);
	fputc('\n', stderr);
}

/* A mismatch or an unexpected error: the log, then exit 1. */
__attribute__((format(printf, 2, 3), noreturn))
static void die(struct ns_worker *wk, const char *fmt, ...)
{
	va_list ap;

	if (wk->w >= 0)
		fprintf(stderr, "[w%d] FAIL at operation %lu of worker %d (seed %" PRIu64 "): ",
			wk->w, wk->n, wk->w, wk->seed);
	else
		fprintf(stderr, "verify: FAIL: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_log(wk);
	exit(1);
}

/* --- blocks ------------------------------------------------------------- */

static uint64_t fnv64(const unsigned char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* Block @idx of file @id as generation @gen writes it: header and body. */
static void make_block(unsigned char *p, uint32_t id, uint32_t gen, uint64_t idx)
{
	static const char words[] = "zramfs renames a file while its blocks go back to the disk; ";
	uint64_t s = mix64(((uint64_t)id << 32 | gen) ^ mix64(idx + 0x51ed));
	uint64_t r = s, v, sum;
	unsigned i;

	switch (s % 4) {
	case 0: case 1:		/* random: stored raw */
		for (i = HDR; i < BLK; i += 8) {
			r += 0x9e3779b97f4a7c15ULL;
			v = mix64(r);
			memcpy(p + i, &v, 8);
		}
		break;
	case 2:			/* text: compresses well */
		for (i = HDR; i < BLK; i++)
			p[i] = (unsigned char)words[(s / 4 + i) % (sizeof(words) - 1)];
		break;
	default:		/* one byte but for a tag every 512 bytes */
		memset(p + HDR, (int)((s >> 8) & 0xff) | 1, BLK - HDR);
		for (i = 512; i < BLK; i += 512)
			memcpy(p + i, &gen, sizeof(gen));
	}
	memset(p, 0, HDR);
	memcpy(p, magic, 8);
	memcpy(p + 8, &id, 4);
	memcpy(p + 12, &gen, 4);
	memcpy(p + 16, &idx, 8);
	sum = fnv64(p + HDR, BLK - HDR);
	memcpy(p + 24, &sum, 8);
	snprintf((char *)p + 32, HDR - 32, "f%08x g%u b%" PRIu64, id, gen, idx);
}

/* What block @b of @m must hold, into @p (BLK bytes). */
static void expected_block(const struct ns_model *m, uint64_t b, unsigned char *p)
{
	if (m->gen[b] == 0) {
		memset(p, 0, BLK);
		return;
	}
	make_block(p, m->id, m->gen[b], b);
	memset(p + m->keep[b], 0, BLK - m->keep[b]);
}

/* Say what the @len bytes @got of a block look like (for a failure). */
static void describe(const unsigned char *got, size_t len, char *out, size_t outlen)
{
	uint32_t id, gen;
	uint64_t idx, sum;
	size_t i;

	for (i = 0; i < len && !got[i]; i++)
		;
	if (i == len) {
		snprintf(out, outlen, "zeros");
		return;
	}
	if (len < HDR || memcmp(got, magic, 8) != 0) {
		snprintf(out, outlen, "no header (first nonzero byte at %zu; bytes %02x %02x %02x %02x)",
			 i, got[0], len > 1 ? got[1] : 0, len > 2 ? got[2] : 0, len > 3 ? got[3] : 0);
		return;
	}
	memcpy(&id, got + 8, 4);
	memcpy(&gen, got + 12, 4);
	memcpy(&idx, got + 16, 8);
	memcpy(&sum, got + 24, 8);
	snprintf(out, outlen, "the header of file %08x generation %u block %" PRIu64 "%s",
		 id, gen, idx, len < BLK ? "" : fnv64(got + HDR, BLK - HDR) == sum ?
		 ", checksum right" : ", checksum WRONG (torn or mixed block)");
}

/*
 * Compare the @len bytes @got, read at the start of block @b of the file of
 * @m, with what it must hold; on a difference describe both and die.
 */
static void check_block(struct ns_worker *wk, const struct ns_model *m, uint64_t b,
			const unsigned char *got, size_t len, const char *how)
{
	char d_got[160], d_want[160];
	size_t i;

	expected_block(m, b, wk->want);
	if (memcmp(got, wk->want, len) == 0)
		return;
	wk->focus = m->id;
	for (i = 0; i < len && got[i] == wk->want[i]; i++)
		;
	describe(got, len, d_got, sizeof(d_got));
	describe(wk->want, len, d_want, sizeof(d_want));
	fprintf(stderr, "%s %s: file %08x block %" PRIu64 " (offset %#" PRIx64 ", %zu bytes) differs from byte %zu on\n"
		"%s   expected: %s (generation %u, %u bytes kept)\n%s   got:      %s\n",
		wk->tag, how, m->id, b, b * BLK, len, i, wk->tag, d_want, m->gen[b], m->keep[b],
		wk->tag, d_got);
	if (len >= HDR && memcmp(got, magic, 8) == 0) {
		uint32_t id, gen;

		memcpy(&id, got + 8, 4);
		memcpy(&gen, got + 12, 4);
		if (id == m->id && gen < m->gen[b])
			fprintf(stderr, "%s   STALE: an older generation of this block came back\n", wk->tag);
		else if (id != m->id)
			fprintf(stderr, "%s   FOREIGN: a block of another file\n", wk->tag);
	}
	dump_model(wk, m);
	die(wk, "data mismatch (%s)", how);
}

/* --- system calls that must work ---------------------------------------- */

/* (A function that cannot go on after a failure calls die(), which exits
 * 1; one that returns a status says so with @return.) */

/* pwrite all @len bytes at @off (dies on a failure or a short write). */
static void xpwrite(struct ns_worker *wk, int fd, const void *p, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = pwrite(fd, (const char *)p + done, len - done, (off_t)(off + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			die(wk, "pwrite of %zu bytes at %#" PRIx64 ": %s", len - done,
			    off + done, k < 0 ? strerror(errno) : "wrote 0");
		done += (size_t)k;
	}
}

/* pread until @len bytes or the end; @return the bytes read. */
static size_t xpread(struct ns_worker *wk, int fd, void *p, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = pread(fd, (char *)p + done, len - done, (off_t)(off + done));

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die(wk, "pread of %zu bytes at %#" PRIx64 ": %s", len - done,
			    off + done, strerror(errno));
		if (k == 0)
			break;
		done += (size_t)k;
	}
	return done;
}

/*
 * Read all of the file open as @fd and check it against @m: its size by
 * fstat, each block, and nothing past the end. @how names the check.
 */
static void check_whole(struct ns_worker *wk, const struct ns_model *m, int fd,
			const char *how)
{
	uint64_t b, nb = (m->size + BLK - 1) / BLK;
	struct stat st;
	size_t got;

	wk->focus = m->id;
	if (fstat(fd, &st) < 0)
		die(wk, "fstat (%s): %s", how, strerror(errno));
	if ((uint64_t)st.st_size != m->size) {
		dump_model(wk, m);
		die(wk, "%s: file %08x has size %" PRIu64 ", expected %" PRIu64, how, m->id,
		    (uint64_t)st.st_size, m->size);
	}
	got = xpread(wk, fd, wk->buf, nb * BLK, 0);
	if (got != m->size) {
		dump_model(wk, m);
		die(wk, "%s: reading file %08x returned %zu bytes, expected %" PRIu64, how,
		    m->id, got, m->size);
	}
	for (b = 0; b < nb; b++) {
		uint64_t len = m->size - b * BLK < BLK ? m->size - b * BLK : BLK;

		check_block(wk, m, b, wk->buf + b * BLK, (size_t)len, how);
	}
	if (xpread(wk, fd, wk->buf, 16, m->size) != 0)
		die(wk, "%s: file %08x reads data past its end %" PRIu64, how, m->id, m->size);
}

/* --- the model ---------------------------------------------------------- */

static void name_path(const struct ns_worker *wk, const struct ns_name *nm, char *out)
{
	snprintf(out, PATH_LEN, "%s/%s", wk->dirs[nm->dir].path, nm->leaf);
}

/* A new leaf, unique in the run: w<w>.<n>. */
static void new_leaf(struct ns_worker *wk, char *out, size_t len)
{
	snprintf(out, len, "w%d.%lu", wk->w, wk->seq++);
}

/* @m after a truncate to @size. */
static void model_truncate(struct ns_model *m, uint64_t size)
{
	uint64_t b, nb = (m->size + BLK - 1) / BLK;

	if (size < m->size) {
		for (b = (size + BLK - 1) / BLK; b < nb; b++) {
			m->gen[b] = 0;
			m->keep[b] = 0;
		}
		b = size / BLK;
		if (size % BLK && m->gen[b] && m->keep[b] > size % BLK)
			m->keep[b] = (uint16_t)(size % BLK);
	}
	m->size = size;
}

/* Blocks @f may grow to: maxb, or more for a big O_TMPFILE file. */
static unsigned file_limit(const struct ns_worker *wk, const struct ns_file *f)
{
	uint64_t nb = (f->m.size + BLK - 1) / BLK;

	return nb > wk->maxb ? (unsigned)nb : wk->maxb;
}

/* A file at the end of its life: its fd is closed already. */
static void file_gone(struct ns_worker *wk, struct ns_file *f)
{
	f->live = false;
	f->linkable = false;
	f->nnames = 0;
	f->fd = -1;
	f->m.size = 0;
	memset(f->m.gen, 0, wk->capb * sizeof(*f->m.gen));
	memset(f->m.keep, 0, wk->capb * sizeof(*f->m.keep));
}

/* Name @i of @f went (unlink, or a rename over it): with no name and no
 * fd left the file is gone. */
static void name_drop(struct ns_worker *wk, struct ns_file *f, int i)
{
	if (i == 0 && f->nnames == 2)
		f->names[0] = f->names[1];
	f->nnames--;
	if (f->nnames == 0 && f->fd < 0)
		file_gone(wk, f);
}

/*
 * A random live file of the worker with @min_names..@max_names names; with
 * @need_fd > 0 one with a kept fd, < 0 one without; never @not.
 * @return it, or NULL if there is none.
 */
static struct ns_file *pick_file(struct ns_worker *wk, int min_names, int max_names,
				 int need_fd, const struct ns_file *not)
{
	unsigned start = (unsigned)rnd_below(wk, wk->maxf), i;

	for (i = 0; i < wk->maxf; i++) {
		struct ns_file *f = &wk->files[(start + i) % wk->maxf];

		if (!f->live || f == not || f->nnames < min_names || f->nnames > max_names ||
		    (need_fd > 0 && f->fd < 0) || (need_fd < 0 && f->fd >= 0))
			continue;
		wk->focus = f->m.id;
		return f;
	}
	return NULL;
}

/* A random directory of the worker's table (index). */
static int pick_dir(struct ns_worker *wk)
{
	return (int)rnd_below(wk, NDIR);
}

static bool cached_stat;	/* -K: trust the kernel's cache after all */

/*
 * stat (@path relative to @dfd; "" with AT_EMPTY_PATH in @flags: @dfd
 * itself) that asks the filesystem, not the kernel's attribute cache: the
 * kernel's cached link count of a file can lag behind link(2), unlink(2)
 * and rename(2) racing other requests (seen on Linux 6.18 with libfuse's
 * passthrough_ll too), and the checks are about what the daemon says.
 * @return 0 or -1 (errno set).
 */
static int stat_sync(int dfd, const char *path, int flags, struct stat *st)
{
	struct statx sx;

	if (cached_stat)
		return fstatat(dfd, path, st, flags | AT_SYMLINK_NOFOLLOW);
	if (statx(dfd, path, flags | AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC,
		  STATX_BASIC_STATS, &sx) < 0)
		return -1;
	memset(st, 0, sizeof(*st));
	st->st_mode = sx.stx_mode;
	st->st_ino = (ino_t)sx.stx_ino;
	st->st_nlink = (nlink_t)sx.stx_nlink;
	st->st_size = (off_t)sx.stx_size;
	return 0;
}

/* After an unexpected error on @path: print whether each of its
 * components can be looked up now, and as what (for the failure report).
 * Keeps errno. */
static void explain_path(const struct ns_worker *wk, const char *path)
{
	char part[PATH_LEN];
	struct stat st;
	int err = errno;
	size_t i;

	for (i = 0; ; i++) {
		if (path[i] != '/' && path[i] != '\0')
			continue;
		snprintf(part, sizeof(part), "%.*s", (int)i, path);
		if (fstatat(wk->root, part, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			fprintf(stderr, "[w%d]   now: %s: %s\n", wk->w, part, strerror(errno));
		} else {
			fprintf(stderr, "[w%d]   now: %s: %s, inode %" PRIu64 ", %lu links (cached)", wk->w,
				part, S_ISDIR(st.st_mode) ? "directory" : S_ISREG(st.st_mode) ? "file" : "other",
				(uint64_t)st.st_ino, (unsigned long)st.st_nlink);
			if (stat_sync(wk->root, part, 0, &st) == 0)
				fprintf(stderr, ", %lu (the daemon's)", (unsigned long)st.st_nlink);
			fputc('\n', stderr);
		}
		if (!path[i])
			break;
	}
	errno = err;
}

/* An fd for I/O on @f: its kept one, or a new open of one of its names,
 * which the caller closes with fd_done() (@opened set). @return the fd
 * (dies when the open fails). */
static int file_fd(struct ns_worker *wk, struct ns_file *f, bool *opened)
{
	char path[PATH_LEN];
	int fd;

	*opened = false;
	if (f->fd >= 0)
		return f->fd;
	name_path(wk, &f->names[rnd_below(wk, (uint64_t)f->nnames)], path);
	fd = openat(wk->root, path, O_RDWR);
	if (fd < 0) {
		explain_path(wk, path);
		die(wk, "open %s (file %08x): %s", path, f->m.id, strerror(errno));
	}
	*opened = true;
	return fd;
}

/* Close @fd if file_fd() opened it (dies if the close fails). */
static void fd_done(struct ns_worker *wk, int fd, bool opened)
{
	if (opened && close(fd) < 0)
		die(wk, "close: %s", strerror(errno));
}

/*
 * A name could not be made in directory @d: acceptable only when @err is
 * ENOENT and @d is a shared subdirectory (another worker removed it).
 * @return true if so.
 */
static bool dir_gone(const struct ns_worker *wk, int d, int err)
{
	return err == ENOENT && wk->dirs[d].kind == D_SUB;
}

/* The name @path must still be there after an operation on it failed with
 * a reason that said nothing about it. */
static void still_there(struct ns_worker *wk, const struct ns_file *f, const char *path)
{
	struct stat st;

	if (fstatat(wk->root, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
		die(wk, "%s (file %08x) is gone after a failed operation: %s", path,
		    f->m.id, strerror(errno));
	if ((uint64_t)st.st_ino != f->ino)
		die(wk, "%s has inode %" PRIu64 ", expected %" PRIu64 " (file %08x)", path,
		    (uint64_t)st.st_ino, f->ino, f->m.id);
}

/*
 * Write blocks @b0..@b0+@nb-1 of @f through @fd, each a new generation
 * (or zeros, by chance), in one pwrite; the model follows.
 */
static void write_blocks(struct ns_worker *wk, struct ns_file *f, int fd, uint64_t b0,
			 uint64_t nb)
{
	uint64_t b;

	for (b = b0; b < b0 + nb; b++) {
		if (rnd_below(wk, 12) == 0) {
			f->m.gen[b] = 0;
			f->m.keep[b] = 0;
		} else {
			f->m.gen[b] = ++f->wgen;
			f->m.keep[b] = BLK;
		}
		expected_block(&f->m, b, wk->buf + (b - b0) * BLK);
	}
	xpwrite(wk, fd, wk->buf, nb * BLK, b0 * BLK);
	if ((b0 + nb) * BLK > f->m.size)
		f->m.size = (b0 + nb) * BLK;
}

/* truncate(2) of @path relative to ROOT. @return 0 or -1 (errno set). */
static int truncate_at(const struct ns_worker *wk, const char *path, uint64_t size)
{
	char full[PATH_MAX];

	if (snprintf(full, sizeof(full), "%s/%s", wk->rootpath, path) >= (int)sizeof(full)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return truncate(full, (off_t)size);
}

/* --- operations: each @return false when it could not be tried (nothing
 * to do it on), true when done or refused as expected ------------------ */

static bool op_create(struct ns_worker *wk)
{
	struct ns_file *f = NULL;
	char path[PATH_LEN];
	unsigned i;
	uint64_t nb, b, run, size;
	struct stat st;
	int d = pick_dir(wk), fd;

	for (i = 0; i < wk->maxf && !f; i++)
		if (!wk->files[i].live)
			f = &wk->files[i];
	if (!f)
		return false;
	f->m.id = (uint32_t)(wk->w + 1) << 24 | wk->next_id++;
	f->wgen = 0;
	f->names[0].dir = d;
	new_leaf(wk, f->names[0].leaf, sizeof(f->names[0].leaf));
	name_path(wk, &f->names[0], path);
	nb = 1 + rnd_below(wk, wk->maxb);
	logf_op(wk, "create %s file %08x, %" PRIu64 " blocks", path, f->m.id, nb);
	fd = openat(wk->root, path, O_RDWR | O_CREAT | O_EXCL, 0644);
	if (fd < 0) {
		if (dir_gone(wk, d, errno)) {
			wk->refused[OP_CREATE]++;
			return true;
		}
		die(wk, "create %s: %s", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0)
		die(wk, "fstat %s: %s", path, strerror(errno));
	f->live = true;
	f->linkable = false;
	f->nnames = 1;
	f->fd = -1;
	f->ino = (uint64_t)st.st_ino;
	f->m.size = 0;
	/* runs of written blocks between holes */
	for (b = 0; b < nb; b += run) {
		run = 1 + rnd_below(wk, nb - b);
		if (rnd_below(wk, 5) == 0)
			continue;	/* a hole */
		write_blocks(wk, f, fd, b, run);
	}
	size = nb * BLK;
	if (rnd_below(wk, 3) == 0)
		size -= 1 + rnd_below(wk, BLK - 1);	/* a partial last block */
	if (size != f->m.size) {
		if (ftruncate(fd, (off_t)size) < 0)
			die(wk, "ftruncate %s to %" PRIu64 ": %s", path, size, strerror(errno));
		model_truncate(&f->m, size);
	}
	if (rnd_below(wk, 4) == 0 && fsync(fd) < 0)
		die(wk, "fsync %s: %s", path, strerror(errno));
	if (wk->kept < KEEP_FDS && rnd_below(wk, 4) == 0) {
		f->fd = fd;
		wk->kept++;
	} else if (close(fd) < 0) {
		die(wk, "close %s: %s", path, strerror(errno));
	}
	return true;
}

static bool op_write(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 0, 2, 0, NULL);
	uint64_t end, b0, nb;
	bool opened;
	int fd;

	if (!f)
		return false;
	end = (f->m.size + BLK - 1) / BLK;
	/* mostly inside the file, at times past its end (a hole between) */
	b0 = rnd_below(wk, end + 3);
	if (b0 >= file_limit(wk, f))
		b0 = file_limit(wk, f) - 1;
	nb = 1 + rnd_below(wk, 4);
	if (b0 + nb > file_limit(wk, f))
		nb = file_limit(wk, f) - b0;
	fd = file_fd(wk, f, &opened);
	logf_op(wk, "write file %08x blocks %" PRIu64 "..%" PRIu64 " (size %" PRIu64 ") via %s, generation %u+",
		f->m.id, b0, b0 + nb - 1, f->m.size, opened ? "a new open" :
		f->nnames ? "the kept fd" : "the fd of the unlinked file", f->wgen + 1);
	write_blocks(wk, f, fd, b0, nb);
	if (rnd_below(wk, 10) == 0 && fdatasync(fd) < 0)
		die(wk, "fdatasync file %08x: %s", f->m.id, strerror(errno));
	fd_done(wk, fd, opened);
	return true;
}

static bool op_read(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 0, 2, 0, NULL);
	uint64_t nb, b0, cnt, b, len;
	bool opened, drop;
	size_t got, want;
	int fd;

	if (!f)
		return false;
	fd = file_fd(wk, f, &opened);
	drop = rnd_below(wk, 3) == 0;
	logf_op(wk, "read file %08x (size %" PRIu64 ")%s", f->m.id, f->m.size,
		drop ? " after dropping its page cache" : "");
	if (drop) {
		/* so that the read reaches the daemon, not the page cache */
		if (fdatasync(fd) < 0)
			die(wk, "fdatasync file %08x: %s", f->m.id, strerror(errno));
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	if (rnd_below(wk, 2) == 0) {
		check_whole(wk, &f->m, fd, "read of the whole file");
	} else {
		nb = (f->m.size + BLK - 1) / BLK;
		if (nb == 0) {
			fd_done(wk, fd, opened);
			return true;
		}
		b0 = rnd_below(wk, nb);
		cnt = 1 + rnd_below(wk, nb - b0);
		want = (size_t)((b0 + cnt) * BLK < f->m.size ? cnt * BLK : f->m.size - b0 * BLK);
		got = xpread(wk, fd, wk->buf, cnt * BLK, b0 * BLK);
		if (got != want)
			die(wk, "read of blocks %" PRIu64 "..%" PRIu64 " of file %08x returned %zu bytes, expected %zu",
			    b0, b0 + cnt - 1, f->m.id, got, want);
		for (b = b0; b < b0 + cnt; b++) {
			len = f->m.size - b * BLK < BLK ? f->m.size - b * BLK : BLK;
			check_block(wk, &f->m, b, wk->buf + (b - b0) * BLK, (size_t)len,
				    "read of some blocks");
		}
	}
	fd_done(wk, fd, opened);
	return true;
}

static bool op_truncate(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 0, 2, 0, NULL);
	uint64_t size, max;
	char path[PATH_LEN];
	bool opened, bypath;
	int fd;

	if (!f)
		return false;
	max = (uint64_t)file_limit(wk, f) * BLK;
	switch (rnd_below(wk, 4)) {
	case 0:			/* down, within a block */
		size = rnd_below(wk, f->m.size + 1);
		break;
	case 1:			/* down, to a block boundary */
		size = rnd_below(wk, f->m.size / BLK + 1) * BLK;
		break;
	default:		/* up: zeros after the end */
		size = f->m.size + 1 + rnd_below(wk, 6 * BLK);
		if (size > max)
			size = max;
	}
	bypath = f->nnames > 0 && rnd_below(wk, 2) == 0;
	if (bypath) {
		name_path(wk, &f->names[rnd_below(wk, (uint64_t)f->nnames)], path);
		logf_op(wk, "truncate %s (file %08x) %" PRIu64 " -> %" PRIu64, path, f->m.id,
			f->m.size, size);
		if (truncate_at(wk, path, size) < 0)
			die(wk, "truncate %s to %" PRIu64 ": %s", path, size, strerror(errno));
	} else {
		fd = file_fd(wk, f, &opened);
		logf_op(wk, "ftruncate file %08x %" PRIu64 " -> %" PRIu64, f->m.id, f->m.size, size);
		if (ftruncate(fd, (off_t)size) < 0)
			die(wk, "ftruncate file %08x to %" PRIu64 ": %s", f->m.id, size, strerror(errno));
		fd_done(wk, fd, opened);
	}
	model_truncate(&f->m, size);
	return true;
}

static bool op_rename(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 1, 2, 0, NULL);
	char from[PATH_LEN], to_path[PATH_LEN];
	struct ns_name to;
	unsigned flags;
	int i;

	if (!f)
		return false;
	i = (int)rnd_below(wk, (uint64_t)f->nnames);
	/* a third within the directory, the rest anywhere */
	to.dir = rnd_below(wk, 3) == 0 ? f->names[i].dir : pick_dir(wk);
	new_leaf(wk, to.leaf, sizeof(to.leaf));
	name_path(wk, &f->names[i], from);
	name_path(wk, &to, to_path);
	flags = rnd_below(wk, 2) ? RENAME_NOREPLACE : 0;
	logf_op(wk, "rename%s %s -> %s (file %08x, size %" PRIu64 ")",
		flags ? "(NOREPLACE)" : "", from, to_path, f->m.id, f->m.size);
	if (renameat2(wk->root, from, wk->root, to_path, flags) < 0) {
		if (dir_gone(wk, to.dir, errno)) {
			still_there(wk, f, from);
			wk->refused[OP_RENAME]++;
			return true;
		}
		explain_path(wk, from);
		explain_path(wk, to_path);
		die(wk, "rename %s -> %s: %s", from, to_path, strerror(errno));
	}
	f->names[i] = to;
	return true;
}

static bool op_rename_over(struct ns_worker *wk)
{
	struct ns_file *a = pick_file(wk, 1, 2, 0, NULL), *b;
	char from[PATH_LEN], to[PATH_LEN];
	struct ns_name victim;
	int i, j;

	if (!a)
		return false;
	if (a->nnames == 2 && rnd_below(wk, 6) == 0) {
		/* two names of one file: rename(2) does nothing */
		b = a;
		i = (int)rnd_below(wk, 2);
		j = !i;
	} else {
		b = pick_file(wk, 1, 2, 0, a);
		if (!b)
			return false;
		i = (int)rnd_below(wk, (uint64_t)a->nnames);
		j = (int)rnd_below(wk, (uint64_t)b->nnames);
	}
	victim = b->names[j];
	name_path(wk, &a->names[i], from);
	name_path(wk, &victim, to);
	logf_op(wk, "rename %s (file %08x, size %" PRIu64 ") over %s (file %08x, %d names%s)",
		from, a->m.id, a->m.size, to, b->m.id, b->nnames, b->fd >= 0 ? ", open" : "");
	if (renameat(wk->root, from, wk->root, to) < 0) {
		explain_path(wk, from);
		explain_path(wk, to);
		die(wk, "rename %s over %s: %s", from, to, strerror(errno));
	}
	if (a == b) {
		still_there(wk, a, from);
		still_there(wk, a, to);
		return true;
	}
	name_drop(wk, b, j);
	a->names[i] = victim;
	return true;
}

static bool op_exchange(struct ns_worker *wk)
{
	struct ns_file *a = pick_file(wk, 1, 2, 0, NULL), *b;
	char pa[PATH_LEN], pb[PATH_LEN];
	struct ns_name t;
	int i, j;

	if (!a || wk->no_exchange || !(b = pick_file(wk, 1, 2, 0, a)))
		return false;
	i = (int)rnd_below(wk, (uint64_t)a->nnames);
	j = (int)rnd_below(wk, (uint64_t)b->nnames);
	name_path(wk, &a->names[i], pa);
	name_path(wk, &b->names[j], pb);
	logf_op(wk, "exchange %s (file %08x) <-> %s (file %08x)", pa, a->m.id, pb, b->m.id);
	if (renameat2(wk->root, pa, wk->root, pb, RENAME_EXCHANGE) < 0) {
		if (errno == EINVAL || errno == ENOSYS) {
			fprintf(stderr, "[w%d] RENAME_EXCHANGE is refused (%s): no more exchanges\n",
				wk->w, strerror(errno));
			wk->no_exchange = true;
			still_there(wk, a, pa);
			still_there(wk, b, pb);
			wk->refused[OP_EXCHANGE]++;
			return true;
		}
		explain_path(wk, pa);
		explain_path(wk, pb);
		die(wk, "exchange %s <-> %s: %s", pa, pb, strerror(errno));
	}
	t = a->names[i];
	a->names[i] = b->names[j];
	b->names[j] = t;
	return true;
}

static bool op_link(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 1, 1, 0, NULL);
	char from[PATH_LEN], to_path[PATH_LEN];
	struct ns_name to;
	struct stat st;

	if (!f)
		return false;
	to.dir = pick_dir(wk);
	if (to.dir == f->names[0].dir)
		to.dir = (to.dir + 1) % NDIR;	/* another directory */
	new_leaf(wk, to.leaf, sizeof(to.leaf));
	name_path(wk, &f->names[0], from);
	name_path(wk, &to, to_path);
	logf_op(wk, "link %s -> %s (file %08x)", from, to_path, f->m.id);
	/* (link(2) fails with ENOENT when the kernel's cached link count is
	 * 0, and that cache can lag (stat_sync()): refresh it, so that a
	 * failure here is the daemon's) */
	if (stat_sync(wk->root, from, 0, &st) < 0)
		die(wk, "stat %s (file %08x): %s", from, f->m.id, strerror(errno));
	if (linkat(wk->root, from, wk->root, to_path, 0) < 0) {
		if (dir_gone(wk, to.dir, errno)) {
			still_there(wk, f, from);
			wk->refused[OP_LINK]++;
			return true;
		}
		explain_path(wk, from);
		explain_path(wk, to_path);
		die(wk, "link %s -> %s: %s", from, to_path, strerror(errno));
	}
	f->names[1] = to;
	f->nnames = 2;
	return true;
}

static bool op_unlink(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 1, 2, 0, NULL);
	char path[PATH_LEN];
	int i;

	if (!f)
		return false;
	i = (int)rnd_below(wk, (uint64_t)f->nnames);
	name_path(wk, &f->names[i], path);
	logf_op(wk, "unlink %s (file %08x, %d names%s)", path, f->m.id, f->nnames,
		f->fd >= 0 ? ", open" : "");
	if (unlinkat(wk->root, path, 0) < 0) {
		explain_path(wk, path);
		die(wk, "unlink %s: %s", path, strerror(errno));
	}
	name_drop(wk, f, i);
	return true;
}

/* Keep an fd of @f open (by a random name of it; dies when the open fails). */
static void keep_fd(struct ns_worker *wk, struct ns_file *f)
{
	char path[PATH_LEN];

	name_path(wk, &f->names[rnd_below(wk, (uint64_t)f->nnames)], path);
	f->fd = openat(wk->root, path, O_RDWR);
	if (f->fd < 0)
		die(wk, "open %s (file %08x): %s", path, f->m.id, strerror(errno));
	wk->kept++;
}

/* All the names of a file go while it is open; I/O goes on through the fd. */
static bool op_unlink_open(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 1, 2, 0, NULL);
	char path[PATH_LEN];

	if (!f || (f->fd < 0 && wk->kept >= KEEP_FDS))
		return false;
	logf_op(wk, "unlink all %d names of file %08x while open (size %" PRIu64 ")",
		f->nnames, f->m.id, f->m.size);
	if (f->fd < 0)
		keep_fd(wk, f);
	while (f->nnames) {
		name_path(wk, &f->names[0], path);
		if (unlinkat(wk->root, path, 0) < 0)
			die(wk, "unlink %s: %s", path, strerror(errno));
		name_drop(wk, f, 0);
	}
	return true;
}

static bool op_close(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 0, 2, 1, NULL);

	if (!f)
		return false;
	logf_op(wk, "close the fd of file %08x (%d names)", f->m.id, f->nnames);
	if (f->nnames == 0)	/* its last chance to be checked */
		check_whole(wk, &f->m, f->fd, "read of an unlinked file before its close");
	if (close(f->fd) < 0)
		die(wk, "close file %08x: %s", f->m.id, strerror(errno));
	f->fd = -1;
	wk->kept--;
	if (f->nnames == 0)
		file_gone(wk, f);
	return true;
}

static bool op_keep(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 1, 2, -1, NULL);

	if (!f || wk->kept >= KEEP_FDS)
		return false;
	logf_op(wk, "keep an fd of file %08x", f->m.id);
	keep_fd(wk, f);
	return true;
}

/* Names of the worker in directory @d. */
static int names_in(const struct ns_worker *wk, int d)
{
	int k = 0, i;
	unsigned j;

	for (j = 0; j < wk->maxf; j++)
		for (i = 0; wk->files[j].live && i < wk->files[j].nnames; i++)
			k += wk->files[j].names[i].dir == d;
	return k;
}

static bool op_mkdir(struct ns_worker *wk)
{
	int d = NTOP + (int)rnd_below(wk, NTOP * NSUB);

	logf_op(wk, "mkdir %s", wk->dirs[d].path);
	if (mkdirat(wk->root, wk->dirs[d].path, 0755) < 0) {
		if (errno != EEXIST)
			die(wk, "mkdir %s: %s", wk->dirs[d].path, strerror(errno));
		wk->refused[OP_MKDIR]++;
	}
	return true;
}

static bool op_rmdir(struct ns_worker *wk)
{
	int d = NTOP + (int)rnd_below(wk, NTOP * NSUB), mine = names_in(wk, d);

	logf_op(wk, "rmdir %s (%d names of this worker in it)", wk->dirs[d].path, mine);
	if (unlinkat(wk->root, wk->dirs[d].path, AT_REMOVEDIR) == 0) {
		if (mine)
			die(wk, "rmdir %s succeeded, but %d names of this worker are in it",
			    wk->dirs[d].path, mine);
		return true;
	}
	if (errno == ENOENT && mine)
		die(wk, "%s is gone, but %d names of this worker are in it", wk->dirs[d].path, mine);
	if (errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
		die(wk, "rmdir %s: %s", wk->dirs[d].path, strerror(errno));
	wk->refused[OP_RMDIR]++;
	return true;
}

/* A private directory moves to another shared directory, under a new name,
 * with its files (their data may be dirty, their fds open). */
static bool op_move_dir(struct ns_worker *wk)
{
	int d = NTOP + NTOP * NSUB + (int)rnd_below(wk, NPRIV);
	char to[PATH_LEN];
	unsigned flags = rnd_below(wk, 2) ? RENAME_NOREPLACE : 0;

	snprintf(to, sizeof(to), "d%u/w%dp%d.%lu", (unsigned)rnd_below(wk, NTOP), wk->w,
		 d - NTOP - NTOP * NSUB, wk->seq++);
	logf_op(wk, "rename%s directory %s -> %s (%d names in it)", flags ? "(NOREPLACE)" : "",
		wk->dirs[d].path, to, names_in(wk, d));
	if (renameat2(wk->root, wk->dirs[d].path, wk->root, to, flags) < 0)
		die(wk, "rename %s -> %s: %s", wk->dirs[d].path, to, strerror(errno));
	snprintf(wk->dirs[d].path, PATH_LEN, "%s", to);
	return true;
}

static bool op_fsync(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 0, 2, 0, NULL);
	bool opened, data = rnd_below(wk, 2);
	int fd;

	if (!f)
		return false;
	fd = file_fd(wk, f, &opened);
	logf_op(wk, "%s file %08x", data ? "fdatasync" : "fsync", f->m.id);
	if ((data ? fdatasync(fd) : fsync(fd)) < 0)
		die(wk, "fsync file %08x: %s", f->m.id, strerror(errno));
	fd_done(wk, fd, opened);
	return true;
}

/* The attributes of @f by each of its names and by its fd. */
static void check_stat(struct ns_worker *wk, const struct ns_file *f)
{
	char path[PATH_LEN];
	struct stat st;
	int i;

	wk->focus = f->m.id;
	for (i = 0; i < f->nnames; i++) {
		name_path(wk, &f->names[i], path);
		if (stat_sync(wk->root, path, 0, &st) < 0)
			die(wk, "stat %s (file %08x): %s", path, f->m.id, strerror(errno));
		if (!S_ISREG(st.st_mode) || (uint64_t)st.st_ino != f->ino ||
		    (uint64_t)st.st_size != f->m.size || st.st_nlink != (nlink_t)f->nnames)
			die(wk, "stat %s: mode %o inode %" PRIu64 " size %" PRIu64 " links %lu, expected a file, inode %" PRIu64 " size %" PRIu64 " links %d (file %08x)",
			    path, (unsigned)st.st_mode, (uint64_t)st.st_ino, (uint64_t)st.st_size,
			    (unsigned long)st.st_nlink, f->ino, f->m.size, f->nnames, f->m.id);
	}
	if (f->fd < 0)
		return;
	if (stat_sync(f->fd, "", AT_EMPTY_PATH, &st) < 0)
		die(wk, "fstat file %08x: %s", f->m.id, strerror(errno));
	if ((uint64_t)st.st_ino != f->ino || (uint64_t)st.st_size != f->m.size ||
	    st.st_nlink != (nlink_t)f->nnames)
		die(wk, "fstat of the kept fd: inode %" PRIu64 " size %" PRIu64 " links %lu, expected inode %" PRIu64 " size %" PRIu64 " links %d (file %08x)",
		    (uint64_t)st.st_ino, (uint64_t)st.st_size, (unsigned long)st.st_nlink,
		    f->ino, f->m.size, f->nnames, f->m.id);
}

static bool op_stat(struct ns_worker *wk)
{
	struct ns_file *f = pick_file(wk, 0, 2, 0, NULL);

	if (!f)
		return false;
	logf_op(wk, "stat file %08x (%d names%s)", f->m.id, f->nnames, f->fd >= 0 ? ", open" : "");
	check_stat(wk, f);
	return true;
}

/*
 * Directory @d must list exactly the names the model puts in it (the
 * worker's own: w<w>.*; the other workers' come and go meanwhile).
 */
static void check_list(struct ns_worker *wk, int d)
{
	char prefix[16], seen[2 * MAXF_LIMIT][48];
	int nseen = 0, want = names_in(wk, d), i, k;
	struct dirent *de;
	unsigned j;
	DIR *dir;
	int fd;

	snprintf(prefix, sizeof(prefix), "w%d.", wk->w);
	fd = openat(wk->root, wk->dirs[d].path, O_RDONLY | O_DIRECTORY);
	if (fd < 0) {
		if (errno == ENOENT && wk->dirs[d].kind == D_SUB && want == 0)
			return;
		die(wk, "open directory %s (%d names of this worker in it): %s",
		    wk->dirs[d].path, want, strerror(errno));
	}
	dir = fdopendir(fd);
	if (!dir)
		die(wk, "fdopendir %s: %s", wk->dirs[d].path, strerror(errno));
	while ((errno = 0, de = readdir(dir))) {
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
			continue;
		if (nseen == 2 * MAXF_LIMIT || strlen(de->d_name) >= sizeof(seen[0]))
			die(wk, "directory %s lists a name %s/%s this worker never kept",
			    wk->dirs[d].path, wk->dirs[d].path, de->d_name);
		for (i = 0; i < nseen; i++)
			if (strcmp(seen[i], de->d_name) == 0)
				die(wk, "directory %s lists %s twice", wk->dirs[d].path, de->d_name);
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", de->d_name);
	}
	if (errno)
		die(wk, "readdir %s: %s", wk->dirs[d].path, strerror(errno));
	closedir(dir);
	for (i = 0; i < nseen; i++) {
		bool found = false;

		for (j = 0; j < wk->maxf && !found; j++)
			for (k = 0; wk->files[j].live && k < wk->files[j].nnames; k++)
				if (wk->files[j].names[k].dir == d &&
				    strcmp(wk->files[j].names[k].leaf, seen[i]) == 0)
					found = true;
		if (!found)
			die(wk, "directory %s lists %s, a name of this worker that should not be there",
			    wk->dirs[d].path, seen[i]);
	}
	if (nseen != want)
		die(wk, "directory %s lists %d names of this worker, expected %d",
		    wk->dirs[d].path, nseen, want);
}

static bool op_list(struct ns_worker *wk)
{
	int d = pick_dir(wk);

	logf_op(wk, "list %s (%d names of this worker in it)", wk->dirs[d].path, names_in(wk, d));
	check_list(wk, d);
	return true;
}

/*
 * Give @f, made with O_TMPFILE and open as @fd, one more name with
 * linkat(2) of /proc/self/fd/<fd>, AT_SYMLINK_FOLLOW: first, at times,
 * over a name of another of the worker's files (EEXIST; that file must
 * keep it). @return false when the directory chosen was removed by
 * another worker (nothing happened).
 */
static bool tmpfile_link(struct ns_worker *wk, struct ns_file *f, int fd)
{
	char proc[32], to_path[PATH_LEN];
	struct ns_file *v;
	struct ns_name to;
	struct stat st;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (rnd_below(wk, 4) == 0 && (v = pick_file(wk, 1, 2, 0, f))) {
		name_path(wk, &v->names[rnd_below(wk, (uint64_t)v->nnames)], to_path);
		logf_op(wk, "link %s (file %08x, %d names) -> %s (file %08x): must fail, EEXIST",
			proc, f->m.id, f->nnames, to_path, v->m.id);
		if (linkat(AT_FDCWD, proc, wk->root, to_path, AT_SYMLINK_FOLLOW) == 0)
			die(wk, "link of file %08x over %s (file %08x) succeeded", f->m.id,
			    to_path, v->m.id);
		wk->tmp_eexist++;
		if (errno != EEXIST) {
			explain_path(wk, to_path);
			die(wk, "link of file %08x over %s (file %08x): %s, expected EEXIST",
			    f->m.id, to_path, v->m.id, strerror(errno));
		}
		still_there(wk, v, to_path);
		wk->focus = f->m.id;
	}
	to.dir = pick_dir(wk);
	new_leaf(wk, to.leaf, sizeof(to.leaf));
	name_path(wk, &to, to_path);
	logf_op(wk, "link %s (file %08x, %d names, size %" PRIu64 ") -> %s", proc, f->m.id,
		f->nnames, f->m.size, to_path);
	/* (a file with a name already: refresh the kernel's link count, as
	 * op_link() does; a nameless one is linkable at 0) */
	if (f->nnames && stat_sync(fd, "", AT_EMPTY_PATH, &st) < 0)
		die(wk, "fstat file %08x: %s", f->m.id, strerror(errno));
	if (linkat(AT_FDCWD, proc, wk->root, to_path, AT_SYMLINK_FOLLOW) < 0) {
		if (dir_gone(wk, to.dir, errno))
			return false;
		explain_path(wk, to_path);
		die(wk, "link %s (file %08x, %d names) -> %s: %s", proc, f->m.id, f->nnames,
		    to_path, strerror(errno));
	}
	f->names[f->nnames++] = to;
	f->linkable = false;
	return true;
}

/* linkat(2) of @f, open as @fd, must fail with ENOENT: made with
 * O_TMPFILE | O_EXCL, or all its names went after it had one. */
static void tmpfile_no_link(struct ns_worker *wk, struct ns_file *f, int fd, const char *why)
{
	char proc[32], to_path[PATH_LEN];
	struct ns_name to;
	struct stat st;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	to.dir = pick_dir(wk);
	new_leaf(wk, to.leaf, sizeof(to.leaf));
	name_path(wk, &to, to_path);
	logf_op(wk, "link %s (file %08x, %s) -> %s: must fail, ENOENT", proc, f->m.id, why,
		to_path);
	/* (the kernel decides by its cached link count: the daemon's) */
	if (stat_sync(fd, "", AT_EMPTY_PATH, &st) < 0)
		die(wk, "fstat file %08x: %s", f->m.id, strerror(errno));
	if (linkat(AT_FDCWD, proc, wk->root, to_path, AT_SYMLINK_FOLLOW) == 0)
		die(wk, "file %08x (%s) was linked as %s", f->m.id, why, to_path);
	if (errno != ENOENT)
		die(wk, "link of file %08x (%s) as %s: %s, expected ENOENT", f->m.id, why,
		    to_path, strerror(errno));
	if (faccessat(wk->root, to_path, F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		die(wk, "%s is there after a link of file %08x that failed", to_path, f->m.id);
}

/* Write 1..4 runs of blocks of @f through @fd (to its end at most, or a
 * few blocks past it). */
static void tmpfile_write_more(struct ns_worker *wk, struct ns_file *f, int fd)
{
	uint64_t n = 1 + rnd_below(wk, 4), b0, nb;

	while (n--) {
		b0 = rnd_below(wk, (f->m.size + BLK - 1) / BLK + 2);
		if (b0 >= file_limit(wk, f))
			b0 = file_limit(wk, f) - 1;
		nb = 1 + rnd_below(wk, 4);
		if (b0 + nb > file_limit(wk, f))
			nb = file_limit(wk, f) - b0;
		logf_op(wk, "write file %08x blocks %" PRIu64 "..%" PRIu64 " (size %" PRIu64 ", %d names) via its O_TMPFILE fd, generation %u+",
			f->m.id, b0, b0 + nb - 1, f->m.size, f->nnames, f->wgen + 1);
		write_blocks(wk, f, fd, b0, nb);
	}
}

/* A file of the worker made with O_TMPFILE that it keeps open without a
 * name and has never linked. @return it, or NULL if there is none. */
static struct ns_file *pick_linkable(struct ns_worker *wk)
{
	unsigned start = (unsigned)rnd_below(wk, wk->maxf), i;

	for (i = 0; i < wk->maxf; i++) {
		struct ns_file *f = &wk->files[(start + i) % wk->maxf];

		if (f->live && f->linkable && f->fd >= 0 && f->nnames == 0) {
			wk->focus = f->m.id;
			return f;
		}
	}
	return NULL;
}

/*
 * @f, made with O_TMPFILE by an earlier tmpfile operation and kept open
 * without a name since (its blocks written back, its fd closed by the
 * daemon meanwhile), gets a name now; written, then kept or closed.
 * @return true.
 */
static bool tmpfile_link_later(struct ns_worker *wk, struct ns_file *f)
{
	logf_op(wk, "link the O_TMPFILE file %08x kept open without a name (size %" PRIu64 ")",
		f->m.id, f->m.size);
	if (rnd_below(wk, 3) == 0)
		check_whole(wk, &f->m, f->fd, "read of a kept O_TMPFILE file before its link");
	if (!tmpfile_link(wk, f, f->fd)) {
		wk->refused[OP_TMPFILE]++;
		return true;
	}
	wk->tmp_linked++;
	wk->tmp_later++;
	if (rnd_below(wk, 2) == 0)
		tmpfile_write_more(wk, f, f->fd);
	check_stat(wk, f);
	if (rnd_below(wk, 2) == 0) {
		logf_op(wk, "close O_TMPFILE file %08x (%d names)", f->m.id, f->nnames);
		if (close(f->fd) < 0)
			die(wk, "close O_TMPFILE file %08x: %s", f->m.id, strerror(errno));
		f->fd = -1;
		wk->kept--;
	}
	return true;
}

/*
 * A file made with open(2) of a directory with O_TMPFILE (at times with
 * O_EXCL too): no name, link count 0; blocks written (at times more than
 * a 2 MiB budget, -B) and read back, after its page cache is dropped at
 * times. Then, but for an O_EXCL one (whose link fails with ENOENT), it
 * stays without a name, or linkat(2) of /proc/self/fd gives it one
 * (tmpfile_link()), and blocks are written after it; at times it gets a
 * second name, one of its names is renamed, or removed (all of them: then
 * a link must fail with ENOENT again). At the end the worker keeps its fd
 * (as a file unlinked while open, when it has no name) or closes it (one
 * without a name then goes: the manifest has only the named ones).
 */
static bool op_tmpfile(struct ns_worker *wk)
{
	struct ns_file *f = NULL;
	char path[PATH_LEN], to_path[PATH_LEN];
	uint64_t nb, b, run, size;
	struct ns_name to;
	struct stat st;
	bool excl, big, linked = false;
	unsigned i;
	int d = pick_dir(wk), fd, k;

	if (wk->no_tmpfile)
		return false;
	if (rnd_below(wk, 3) == 0 && (f = pick_linkable(wk)))
		return tmpfile_link_later(wk, f);
	for (i = 0; i < wk->maxf && !f; i++)
		if (!wk->files[i].live)
			f = &wk->files[i];
	if (!f)
		return false;
	excl = rnd_below(wk, 6) == 0;
	big = wk->bigb > wk->maxb && rnd_below(wk, 16) == 0;
	nb = big ? wk->bigb - rnd_below(wk, wk->bigb / 8) : 1 + rnd_below(wk, wk->maxb);
	f->m.id = (uint32_t)(wk->w + 1) << 24 | wk->next_id++;
	f->wgen = 0;
	wk->focus = f->m.id;
	logf_op(wk, "open %s O_TMPFILE%s: file %08x, %" PRIu64 " blocks", wk->dirs[d].path,
		excl ? " | O_EXCL" : "", f->m.id, nb);
	fd = openat(wk->root, wk->dirs[d].path, O_TMPFILE | O_RDWR | (excl ? O_EXCL : 0), 0644);
	if (fd < 0) {
		/* (in a directory removed after the lookup: ext4 says EPERM,
		 * to the mount's O_TMPFILE too, as no file can be made in it) */
		if (dir_gone(wk, d, errno) || (errno == EPERM && wk->dirs[d].kind == D_SUB)) {
			wk->refused[OP_TMPFILE]++;
			return true;
		}
		if (errno == EOPNOTSUPP || errno == EISDIR) {
			fprintf(stderr, "[w%d] O_TMPFILE is refused (%s): no more tmpfile operations\n",
				wk->w, strerror(errno));
			wk->no_tmpfile = true;
			wk->refused[OP_TMPFILE]++;
			return true;
		}
		die(wk, "open %s O_TMPFILE: %s", wk->dirs[d].path, strerror(errno));
	}
	if (fstat(fd, &st) < 0)
		die(wk, "fstat of the O_TMPFILE file %08x: %s", f->m.id, strerror(errno));
	wk->tmp_big += big;
	wk->tmp_excl += excl;
	f->live = true;
	f->linkable = !excl;
	f->nnames = 0;
	f->fd = fd;
	f->ino = (uint64_t)st.st_ino;
	f->m.size = 0;
	check_stat(wk, f);
	for (b = 0; b < nb; b += run) {
		run = 1 + rnd_below(wk, nb - b);
		if (rnd_below(wk, 5) == 0)
			continue;	/* a hole */
		write_blocks(wk, f, fd, b, run);
	}
	size = nb * BLK;
	if (rnd_below(wk, 3) == 0)
		size -= 1 + rnd_below(wk, BLK - 1);
	if (size != f->m.size) {
		if (ftruncate(fd, (off_t)size) < 0)
			die(wk, "ftruncate O_TMPFILE file %08x to %" PRIu64 ": %s", f->m.id, size,
			    strerror(errno));
		model_truncate(&f->m, size);
	}
	if (rnd_below(wk, 3) == 0) {
		/* so that the read reaches the daemon, not the page cache */
		logf_op(wk, "fdatasync O_TMPFILE file %08x, drop its page cache", f->m.id);
		if (fdatasync(fd) < 0)
			die(wk, "fdatasync O_TMPFILE file %08x: %s", f->m.id, strerror(errno));
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	}
	logf_op(wk, "read O_TMPFILE file %08x (size %" PRIu64 ")", f->m.id, f->m.size);
	check_whole(wk, &f->m, fd, "read of an O_TMPFILE file without a name");
	check_stat(wk, f);

	if (excl) {
		tmpfile_no_link(wk, f, fd, "O_TMPFILE | O_EXCL");
	} else if (rnd_below(wk, 4) != 0) {
		linked = tmpfile_link(wk, f, fd);
		if (!linked)
			wk->refused[OP_TMPFILE]++;	/* (the directory went) */
		wk->tmp_linked += linked;
	}
	if (linked) {
		tmpfile_write_more(wk, f, fd);
		if (rnd_below(wk, 3) == 0)
			wk->tmp_link2 += tmpfile_link(wk, f, fd);
		if (rnd_below(wk, 3) == 0) {
			k = (int)rnd_below(wk, (uint64_t)f->nnames);
			to.dir = rnd_below(wk, 3) == 0 ? f->names[k].dir : pick_dir(wk);
			new_leaf(wk, to.leaf, sizeof(to.leaf));
			name_path(wk, &f->names[k], path);
			name_path(wk, &to, to_path);
			logf_op(wk, "rename %s -> %s (O_TMPFILE file %08x, open)", path, to_path,
				f->m.id);
			if (renameat(wk->root, path, wk->root, to_path) == 0) {
				f->names[k] = to;
				wk->tmp_renamed++;
			} else if (dir_gone(wk, to.dir, errno)) {
				still_there(wk, f, path);
			} else {
				explain_path(wk, path);
				explain_path(wk, to_path);
				die(wk, "rename %s -> %s: %s", path, to_path, strerror(errno));
			}
		}
		if (rnd_below(wk, 3) == 0)
			tmpfile_write_more(wk, f, fd);
		if (rnd_below(wk, 4) == 0) {
			/* one of its names, or all of them */
			bool all = rnd_below(wk, 2) == 0;

			while (f->nnames) {
				k = (int)rnd_below(wk, (uint64_t)f->nnames);
				name_path(wk, &f->names[k], path);
				logf_op(wk, "unlink %s (O_TMPFILE file %08x, %d names, open)", path,
					f->m.id, f->nnames);
				if (unlinkat(wk->root, path, 0) < 0) {
					explain_path(wk, path);
					die(wk, "unlink %s: %s", path, strerror(errno));
				}
				name_drop(wk, f, k);
				wk->tmp_unlinked++;
				if (!all)
					break;
			}
			if (f->nnames == 0)
				tmpfile_no_link(wk, f, fd, "linked, then all its names removed");
			tmpfile_write_more(wk, f, fd);
		}
		if (rnd_below(wk, 2) == 0) {
			logf_op(wk, "read O_TMPFILE file %08x (size %" PRIu64 ", %d names)",
				f->m.id, f->m.size, f->nnames);
			check_whole(wk, &f->m, fd, "read of an O_TMPFILE file after its link");
		}
		check_stat(wk, f);
	}
	if (wk->kept < KEEP_FDS && rnd_below(wk, 3) == 0) {
		logf_op(wk, "keep the fd of O_TMPFILE file %08x (%d names)", f->m.id, f->nnames);
		wk->kept++;
		return true;
	}
	logf_op(wk, "close O_TMPFILE file %08x (%d names)", f->m.id, f->nnames);
	if (f->nnames == 0) {
		check_whole(wk, &f->m, fd, "read of an O_TMPFILE file before its close");
		wk->tmp_nameless++;
	}
	if (close(fd) < 0)
		die(wk, "close O_TMPFILE file %08x: %s", f->m.id, strerror(errno));
	f->fd = -1;
	if (f->nnames == 0)
		file_gone(wk, f);
	return true;
}

static bool run_op(struct ns_worker *wk, enum ns_op op)
{
	switch (op) {
	case OP_CREATE: return op_create(wk);
	case OP_WRITE: return op_write(wk);
	case OP_READ: return op_read(wk);
	case OP_TRUNC: return op_truncate(wk);
	case OP_RENAME: return op_rename(wk);
	case OP_RENAME_OVER: return op_rename_over(wk);
	case OP_EXCHANGE: return op_exchange(wk);
	case OP_LINK: return op_link(wk);
	case OP_UNLINK: return op_unlink(wk);
	case OP_UNLINK_OPEN: return op_unlink_open(wk);
	case OP_CLOSE: return op_close(wk);
	case OP_KEEP: return op_keep(wk);
	case OP_MKDIR: return op_mkdir(wk);
	case OP_RMDIR: return op_rmdir(wk);
	case OP_MOVE_DIR: return op_move_dir(wk);
	case OP_FSYNC: return op_fsync(wk);
	case OP_STAT: return op_stat(wk);
	case OP_LIST: return op_list(wk);
	case OP_TMPFILE: return op_tmpfile(wk);
	case OP_NR: break;
	}
	return false;
}

/* --- a worker ----------------------------------------------------------- */

/* Whether the time @t (CLOCK_MONOTONIC) has come. */
static bool past(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* Check every file of the worker by every name and its fd, and every
 * directory's listing; close the fds (files without a name go). */
static void final_check(struct ns_worker *wk)
{
	char path[PATH_LEN];
	unsigned j;
	int i, d, fd;

	wk->n++;
	logf_op(wk, "final check");
	for (j = 0; j < wk->maxf; j++) {
		struct ns_file *f = &wk->files[j];

		if (!f->live)
			continue;
		check_stat(wk, f);
		if (f->fd >= 0)
			check_whole(wk, &f->m, f->fd, "final read through the kept fd");
		for (i = 0; i < f->nnames; i++) {
			name_path(wk, &f->names[i], path);
			fd = openat(wk->root, path, O_RDONLY);
			if (fd < 0)
				die(wk, "open %s (file %08x): %s", path, f->m.id, strerror(errno));
			if (i == 0)
				(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			check_whole(wk, &f->m, fd, "final read by name");
			close(fd);
		}
		if (f->fd >= 0) {
			if (close(f->fd) < 0)
				die(wk, "close file %08x: %s", f->m.id, strerror(errno));
			f->fd = -1;
			wk->kept--;
			if (f->nnames == 0)
				file_gone(wk, f);
		}
	}
	for (d = 0; d < NDIR; d++)
		check_list(wk, d);
}

/* Write MANIFESTS/w<w>.manifest (through a temporary name; dies when it
 * cannot). */
static void write_manifest(struct ns_worker *wk, const char *mdir)
{
	char tmp[PATH_MAX], final[PATH_MAX], path[PATH_LEN];
	uint64_t b, nb;
	unsigned j;
	FILE *out;
	int i;

	snprintf(final, sizeof(final), "%s/w%d.manifest", mdir, wk->w);
	snprintf(tmp, sizeof(tmp), "%s/.w%d.manifest.tmp", mdir, wk->w);
	out = fopen(tmp, "w");
	if (!out)
		die(wk, "cannot write %s: %s", tmp, strerror(errno));
	fprintf(out, "# zr_nsstress manifest of worker %d, seed %" PRIu64 ", %lu operations\n",
		wk->w, wk->seed, wk->n);
	for (i = NTOP + NTOP * NSUB; i < NDIR; i++)
		fprintf(out, "dir %s\n", wk->dirs[i].path);
	for (j = 0; j < wk->maxf; j++) {
		const struct ns_file *f = &wk->files[j];

		if (!f->live)
			continue;
		fprintf(out, "file %08x %" PRIu64 " %" PRIu64 " %d", f->m.id, f->ino, f->m.size,
			f->nnames);
		for (i = 0; i < f->nnames; i++) {
			name_path(wk, &f->names[i], path);
			fprintf(out, " %s", path);
		}
		fprintf(out, " blocks");
		nb = (f->m.size + BLK - 1) / BLK;
		for (b = 0; b < nb; b++)
			fprintf(out, " %u/%u", f->m.gen[b], f->m.keep[b]);
		fputc('\n', out);
	}
	if (fflush(out) != 0 || ferror(out) || fclose(out) != 0)
		die(wk, "cannot write %s", tmp);
	if (rename(tmp, final) < 0)
		die(wk, "rename %s -> %s: %s", tmp, final, strerror(errno));
}

/* Memory for the models and the buffer of a worker of @maxf files of
 * @maxb blocks, or @bigb for a big O_TMPFILE one; exits on failure. */
static void worker_alloc(struct ns_worker *wk)
{
	unsigned j;

	wk->capb = wk->bigb > wk->maxb ? wk->bigb : wk->maxb;
	wk->buf = aligned_alloc(4096, (size_t)wk->capb * BLK);
	if (!wk->buf)
		die(wk, "out of memory");
	for (j = 0; j < MAXF_LIMIT; j++) {
		wk->files[j].fd = -1;
		wk->files[j].m.gen = calloc(wk->capb, sizeof(uint32_t));
		wk->files[j].m.keep = calloc(wk->capb, sizeof(uint16_t));
		if (!wk->files[j].m.gen || !wk->files[j].m.keep)
			die(wk, "out of memory");
	}
}

/* Worker @wk->w: set up its directories, run, check, write its manifest.
 * @return the exit status of its process (it exits 1 itself on a failure). */
static int worker_main(struct ns_worker *wk, const char *mdir, bool progress)
{
	unsigned total = 0, i, k, r;
	int d;

	snprintf(wk->tag, sizeof(wk->tag), "[w%d]", wk->w);
	worker_alloc(wk);
	wk->rng = mix64(wk->seed);
	for (d = 0; d < NTOP; d++) {
		wk->dirs[d].kind = D_TOP;
		snprintf(wk->dirs[d].path, PATH_LEN, "d%d", d);
	}
	for (d = 0; d < NTOP * NSUB; d++) {
		wk->dirs[NTOP + d].kind = D_SUB;
		snprintf(wk->dirs[NTOP + d].path, PATH_LEN, "d%d/s%d", d / NSUB, d % NSUB);
	}
	for (d = 0; d < NPRIV; d++) {
		struct ns_dir *pd = &wk->dirs[NTOP + NTOP * NSUB + d];

		pd->kind = D_PRIV;
		snprintf(pd->path, PATH_LEN, "d%u/w%dp%d.%lu", (unsigned)rnd_below(wk, NTOP),
			 wk->w, d, wk->seq++);
		if (mkdirat(wk->root, pd->path, 0755) < 0)
			die(wk, "mkdir %s: %s (ROOT must not hold an earlier run)", pd->path,
			    strerror(errno));
	}
	for (i = 0; i < OP_NR; i++)
		total += wk->disabled[i] ? 0 : op_weight[i];
	if (total == 0)
		die(wk, "every operation is turned off");
	for (k = 0; !(wk->nops && wk->n >= wk->nops); k++) {
		if (k % 8 == 0 && wk->deadline.tv_sec && past(&wk->deadline))
			break;
		r = (unsigned)rnd_below(wk, total);
		for (i = 0; i < OP_NR; i++) {
			if (wk->disabled[i])
				continue;
			if (r < op_weight[i])
				break;
			r -= op_weight[i];
		}
		if (run_op(wk, (enum ns_op)i)) {
			wk->n++;
			wk->done[i]++;
			if (progress && wk->n % 2000 == 0)
				fprintf(stderr, "[w%d] %lu operations\n", wk->w, wk->n);
		}
	}
	final_check(wk);
	write_manifest(wk, mdir);
	printf("[w%d] seed %" PRIu64 ": %lu operations:", wk->w, wk->seed, wk->n);
	for (i = 0; i < OP_NR; i++) {
		if (!wk->done[i])
			continue;
		printf(" %s %lu", op_names[i], wk->done[i]);
		if (wk->refused[i])
			printf(" (%lu refused)", wk->refused[i]);
	}
	if (wk->done[OP_TMPFILE])
		printf("; O_TMPFILE: %lu big, %lu with O_EXCL, %lu closed without a name, %lu linked (%lu in a later operation; %lu over a name first: EEXIST), %lu linked again, %lu renamed, %lu names removed while open",
		       wk->tmp_big, wk->tmp_excl, wk->tmp_nameless, wk->tmp_linked, wk->tmp_later,
		       wk->tmp_eexist, wk->tmp_link2, wk->tmp_renamed, wk->tmp_unlinked);
	printf("\n");
	fflush(stdout);
	return 0;
}

/* --- verify ------------------------------------------------------------- */

/* A file as a manifest describes it. */
struct vfile {
	struct ns_model m;
	uint64_t ino;
	int nnames;
	char *paths[2];
};

/* Everything the manifests say (verify's state). */
struct vstate {
	struct vfile *files;
	size_t nfiles, cap;
	char **names;		/* every file's names, sorted */
	size_t nnames;
	char **dirs;		/* the private directories, sorted */
	size_t ndirs;
	size_t names_seen;	/* by the walk */
};

/* qsort/bsearch order of two char pointers. */
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether @s is in the sorted @set of @n strings. */
static bool in_set(char **set, size_t n, const char *s)
{
	return n && bsearch(&s, set, n, sizeof(*set), cmp_str) != NULL;
}

/* strdup; @return the copy (dies when out of memory). */
static char *xstrdup(struct ns_worker *wk, const char *s)
{
	char *p = strdup(s);

	if (!p)
		die(wk, "out of memory");
	return p;
}

/* realloc; @return the block (dies when out of memory). */
static void *xrealloc(struct ns_worker *wk, void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die(wk, "out of memory");
	return p;
}

/* Parse one "file ..." line of manifest @mpath into @vs (dies when it is
 * malformed). */
static void parse_file_line(struct ns_worker *wk, struct vstate *vs, char *line,
			    const char *mpath)
{
	char *save = NULL, *tok, *end;
	struct vfile *vf;
	uint64_t nb, b = 0;
	unsigned g, k;
	int i;

	if (vs->nfiles == vs->cap) {
		vs->cap = vs->cap ? 2 * vs->cap : 64;
		vs->files = xrealloc(wk, vs->files, vs->cap * sizeof(*vs->files));
	}
	vf = &vs->files[vs->nfiles];
	memset(vf, 0, sizeof(*vf));
	strtok_r(line, " \n", &save);	/* "file" */
	tok = strtok_r(NULL, " \n", &save);
	if (!tok)
		goto bad;
	vf->m.id = (uint32_t)strtoul(tok, &end, 16);
	if (*end || !(tok = strtok_r(NULL, " \n", &save)))
		goto bad;
	vf->ino = strtoull(tok, &end, 10);
	if (*end || !(tok = strtok_r(NULL, " \n", &save)))
		goto bad;
	vf->m.size = strtoull(tok, &end, 10);
	if (*end || !(tok = strtok_r(NULL, " \n", &save)))
		goto bad;
	vf->nnames = atoi(tok);
	if (vf->nnames < 1 || vf->nnames > 2)
		goto bad;
	for (i = 0; i < vf->nnames; i++) {
		if (!(tok = strtok_r(NULL, " \n", &save)))
			goto bad;
		vf->paths[i] = xstrdup(wk, tok);
		vs->names = xrealloc(wk, vs->names, (vs->nnames + 1) * sizeof(*vs->names));
		vs->names[vs->nnames++] = vf->paths[i];
	}
	tok = strtok_r(NULL, " \n", &save);
	if (!tok || strcmp(tok, "blocks") != 0)
		goto bad;
	nb = (vf->m.size + BLK - 1) / BLK;
	vf->m.gen = calloc(nb + 1, sizeof(uint32_t));
	vf->m.keep = calloc(nb + 1, sizeof(uint16_t));
	if (!vf->m.gen || !vf->m.keep)
		die(wk, "out of memory");
	for (b = 0; (tok = strtok_r(NULL, " \n", &save)); b++) {
		if (b >= nb || sscanf(tok, "%u/%u", &g, &k) != 2 || k > BLK)
			goto bad;
		vf->m.gen[b] = g;
		vf->m.keep[b] = (uint16_t)k;
	}
	if (b != nb)
		goto bad;
	vs->nfiles++;
	return;
bad:
	die(wk, "%s: malformed line (file %08x, block %" PRIu64 ")", mpath, vf->m.id, b);
}

/* Read every MANIFESTS/w*.manifest into @vs (dies when one cannot be read
 * or there is none). */
static void load_manifests(struct ns_worker *wk, struct vstate *vs, const char *mdir)
{
	char mpath[PATH_MAX], *line = NULL;
	struct dirent *de;
	size_t cap = 0, nman = 0;
	DIR *dir = opendir(mdir);
	FILE *in;

	if (!dir)
		die(wk, "cannot open %s: %s", mdir, strerror(errno));
	while ((de = readdir(dir))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] != 'w' || len < 10 || strcmp(de->d_name + len - 9, ".manifest"))
			continue;
		snprintf(mpath, sizeof(mpath), "%s/%s", mdir, de->d_name);
		in = fopen(mpath, "r");
		if (!in)
			die(wk, "cannot open %s: %s", mpath, strerror(errno));
		nman++;
		while (getline(&line, &cap, in) > 0) {
			if (strncmp(line, "dir ", 4) == 0) {
				line[strcspn(line, "\n")] = '\0';
				vs->dirs = xrealloc(wk, vs->dirs, (vs->ndirs + 1) * sizeof(*vs->dirs));
				vs->dirs[vs->ndirs++] = xstrdup(wk, line + 4);
			} else if (strncmp(line, "file ", 5) == 0) {
				parse_file_line(wk, vs, line, mpath);
			} else if (line[0] != '#') {
				die(wk, "%s: malformed line: %s", mpath, line);
			}
		}
		fclose(in);
	}
	closedir(dir);
	free(line);
	if (nman == 0)
		die(wk, "no manifest (w*.manifest) in %s", mdir);
	qsort(vs->names, vs->nnames, sizeof(*vs->names), cmp_str);
	qsort(vs->dirs, vs->ndirs, sizeof(*vs->dirs), cmp_str);
	printf("verify: %zu manifests, %zu files, %zu names, %zu private directories\n",
	       nman, vs->nfiles, vs->nnames, vs->ndirs);
}

/* Free what load_manifests() allocated in @vs (the names in vs->names
 * are the files' paths, freed with them). */
static void vstate_free(struct vstate *vs)
{
	size_t j;
	int i;

	for (j = 0; j < vs->nfiles; j++) {
		for (i = 0; i < vs->files[j].nnames; i++)
			free(vs->files[j].paths[i]);
		free(vs->files[j].m.gen);
		free(vs->files[j].m.keep);
	}
	for (j = 0; j < vs->ndirs; j++)
		free(vs->dirs[j]);
	free(vs->files);
	free(vs->names);
	free(vs->dirs);
	memset(vs, 0, sizeof(*vs));
}

/*
 * Walk directory @rel (relative to ROOT) at @depth: ROOT holds only
 * d0..d3, those hold s0..s2 and the private directories of the manifests,
 * and those only the files of the manifests. Every file name found counts
 * in vs->names_seen.
 */
static void walk(struct ns_worker *wk, struct vstate *vs, const char *rel, int depth)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	DIR *dir;
	int fd;

	fd = openat(wk->root, rel, O_RDONLY | O_DIRECTORY);
	if (fd < 0 || !(dir = fdopendir(fd)))
		die(wk, "cannot open directory %s: %s", rel, strerror(errno));
	while ((errno = 0, de = readdir(dir))) {
		unsigned i;
		char c;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (depth == 0)
			snprintf(path, sizeof(path), "%s", de->d_name);
		else
			snprintf(path, sizeof(path), "%s/%s", rel, de->d_name);
		if (fstatat(wk->root, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			die(wk, "stat %s: %s", path, strerror(errno));
		if (S_ISDIR(st.st_mode)) {
			if ((depth == 0 && sscanf(de->d_name, "d%u%c", &i, &c) == 1 && i < NTOP) ||
			    (depth == 1 && sscanf(de->d_name, "s%u%c", &i, &c) == 1 && i < NSUB) ||
			    (depth == 1 && in_set(vs->dirs, vs->ndirs, path))) {
				walk(wk, vs, path, depth + 1);
				continue;
			}
			die(wk, "unexpected directory %s", path);
		}
		if (!S_ISREG(st.st_mode) || depth == 0)
			die(wk, "unexpected %s %s", S_ISREG(st.st_mode) ? "file" : "entry", path);
		if (!in_set(vs->names, vs->nnames, path))
			die(wk, "%s is in no manifest (a name that should have gone?)", path);
		vs->names_seen++;
	}
	if (errno)
		die(wk, "readdir %s: %s", rel, strerror(errno));
	closedir(dir);
}

/* verify: ROOT must be what the manifests in @mdir say. @return 0 (it
 * exits 1 on the first difference). */
static int verify_main(struct ns_worker *wk, const char *mdir)
{
	struct vstate vs = { 0 };
	struct stat st, st0;
	uint64_t blocks = 0;
	size_t j;
	int i, fd;

	load_manifests(wk, &vs, mdir);
	for (j = 0; j < vs.ndirs; j++)
		if (fstatat(wk->root, vs.dirs[j], &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			die(wk, "private directory %s: %s", vs.dirs[j],
			    errno ? strerror(errno) : "not a directory");
	for (j = 0; j < vs.nfiles; j++) {
		struct vfile *vf = &vs.files[j];

		for (i = 0; i < vf->nnames; i++) {
			if (fstatat(wk->root, vf->paths[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
				die(wk, "%s (file %08x): %s", vf->paths[i], vf->m.id, strerror(errno));
			if (i == 0)
				st0 = st;
			if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != vf->m.size ||
			    st.st_nlink != (nlink_t)vf->nnames || st.st_ino != st0.st_ino)
				die(wk, "%s (file %08x): mode %o size %" PRIu64 " links %lu inode %" PRIu64 ", expected a file of size %" PRIu64 " with %d links%s",
				    vf->paths[i], vf->m.id, (unsigned)st.st_mode, (uint64_t)st.st_size,
				    (unsigned long)st.st_nlink, (uint64_t)st.st_ino, vf->m.size,
				    vf->nnames, i ? ", one inode with the first name" : "");
			if ((uint64_t)st.st_ino != vf->ino)
				printf("verify: note: %s has inode %" PRIu64 ", the mount showed %" PRIu64 "\n",
				       vf->paths[i], (uint64_t)st.st_ino, vf->ino);
		}
		fd = openat(wk->root, vf->paths[0], O_RDONLY);
		if (fd < 0)
			die(wk, "open %s: %s", vf->paths[0], strerror(errno));
		if ((vf->m.size + BLK - 1) / BLK > wk->maxb) {
			wk->maxb = (unsigned)((vf->m.size + BLK - 1) / BLK);
			free(wk->buf);
			wk->buf = aligned_alloc(4096, (size_t)wk->maxb * BLK);
			if (!wk->buf)
				die(wk, "out of memory");
		}
		check_whole(wk, &vf->m, fd, vf->paths[0]);
		close(fd);
		blocks += (vf->m.size + BLK - 1) / BLK;
	}
	walk(wk, &vs, ".", 0);
	if (vs.names_seen != vs.nnames)
		die(wk, "%zu names found, the manifests have %zu", vs.names_seen, vs.nnames);
	printf("verify: ok: %zu files, %zu names, %" PRIu64 " blocks as the manifests say\n",
	       vs.nfiles, vs.nnames, blocks);
	vstate_free(&vs);
	return 0;
}

/* --- main --------------------------------------------------------------- */

__attribute__((noreturn))
static void usage(void)
{
	fprintf(stderr,
		"usage: zr_nsstress run [-P nproc] [-S seed] [-T secs] [-N ops] [-f files]\n"
		"                       [-l blocks] [-B blocks] [-X op,...] [-K] [-p] -M MANIFESTS ROOT\n"
		"       zr_nsstress verify -M MANIFESTS ROOT\n");
	exit(2);
}

/* mkdir that may find the directory there. @return 0 or -1 (errno set). */
static int mkdir_maybe(int at, const char *path)
{
	return mkdirat(at, path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* run: make the shared directories, start the workers, wait for them; a
 * failed one stops the others. @return the exit status. */
static int run_main(struct ns_worker *tmpl, unsigned nproc, const char *mdir, bool progress)
{
	pid_t pids[64];
	unsigned i, j, failed = 0;
	char path[32];
	int status;

	for (i = 0; i < NTOP; i++) {
		snprintf(path, sizeof(path), "d%u", i);
		if (mkdir_maybe(tmpl->root, path) < 0)
			die(tmpl, "mkdir %s: %s", path, strerror(errno));
		for (j = 0; j < NSUB; j++) {
			snprintf(path, sizeof(path), "d%u/s%u", i, j);
			if (mkdir_maybe(tmpl->root, path) < 0)
				die(tmpl, "mkdir %s: %s", path, strerror(errno));
		}
	}
	fflush(stdout);
	for (i = 0; i < nproc; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("zr_nsstress: fork");
			for (j = 0; j < i; j++)
				kill(pids[j], SIGTERM);
			return 1;
		}
		if (pids[i] == 0) {
			tmpl->w = (int)i;
			tmpl->seed += i;
			exit(worker_main(tmpl, mdir, progress));
		}
	}
	for (i = 0; i < nproc; i++) {
		pid_t p = wait(&status);

		if (p < 0)
			break;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			continue;
		for (j = 0; j < nproc; j++)
			if (pids[j] == p)
				fprintf(stderr, "zr_nsstress: worker %u (seed %" PRIu64 ") %s %d\n", j,
					tmpl->seed + j, WIFEXITED(status) ? "exited with status" :
					"was killed by signal", WIFEXITED(status) ?
					WEXITSTATUS(status) : WTERMSIG(status));
		if (!failed++)		/* one failure is enough: stop the others */
			for (j = 0; j < nproc; j++)
				if (pids[j] != p)
					kill(pids[j], SIGTERM);
	}
	return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
	static struct ns_worker wk = {
		.w = -1, .tag = "verify:", .seed = 1, .maxf = 16, .maxb = 64, .bigb = 640,
	};
	const char *mdir = NULL;
	uint64_t secs = 20;
	unsigned nproc = 4;
	bool run, progress = false;
	int c;

	if (argc < 2)
		usage();
	if (strcmp(argv[1], "run") == 0)
		run = true;
	else if (strcmp(argv[1], "verify") == 0)
		run = false;
	else
		usage();
	argc--;
	argv++;
	while ((c = getopt(argc, argv, "P:S:T:N:f:l:B:X:KpM:")) != -1) {
		switch (c) {
		case 'P': nproc = (unsigned)zr_cli_num("zr_nsstress", optarg); break;
		case 'S': wk.seed = zr_cli_num("zr_nsstress", optarg); break;
		case 'T': secs = zr_cli_num("zr_nsstress", optarg); break;
		case 'N': wk.nops = (unsigned long)zr_cli_num("zr_nsstress", optarg); break;
		case 'f': wk.maxf = (unsigned)zr_cli_num("zr_nsstress", optarg); break;
		case 'l': wk.maxb = (unsigned)zr_cli_num("zr_nsstress", optarg); break;
		case 'B': wk.bigb = (unsigned)zr_cli_num("zr_nsstress", optarg); break;
		case 'X': zr_cli_disable("zr_nsstress", optarg, op_names, OP_NR, wk.disabled); break;
		case 'K': cached_stat = true; break;
		case 'p': progress = true; break;
		case 'M': mdir = optarg; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || !mdir || nproc < 1 || nproc > 64 || wk.maxf < 2 ||
	    wk.maxf > MAXF_LIMIT || wk.maxb < 2 || wk.maxb > MAXB_LIMIT || wk.bigb > MAXB_LIMIT ||
	    (run && secs == 0 && wk.nops == 0))
		usage();
	wk.rootpath = argv[optind];
	if (run && mkdir_maybe(AT_FDCWD, wk.rootpath) < 0) {
		fprintf(stderr, "zr_nsstress: mkdir %s: %s\n", wk.rootpath, strerror(errno));
		return 1;
	}
	wk.root = open(wk.rootpath, O_RDONLY | O_DIRECTORY);
	if (wk.root < 0) {
		fprintf(stderr, "zr_nsstress: cannot open %s: %s\n", wk.rootpath, strerror(errno));
		return 1;
	}
	if (!run) {
		wk.buf = aligned_alloc(4096, (size_t)wk.maxb * BLK);
		if (!wk.buf)
			die(&wk, "out of memory");
		return verify_main(&wk, mdir);
	}
	if (secs) {
		clock_gettime(CLOCK_MONOTONIC, &wk.deadline);
		wk.deadline.tv_sec += (time_t)secs;
	}
	return run_main(&wk, nproc, mdir, progress);
}

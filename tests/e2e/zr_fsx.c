// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_fsx: a file-system exerciser that checks one file against a model in memory.
 *
 * Usage: zr_fsx [-N ops] [-S seed] [-l maxlen] [-o maxop] [-b bs] [-m] [-c] [-d]
 *               [-p] [-D dumpfile] [-P nproc] [-X op,...] FILE
 *
 * In the spirit of fsx: the program keeps the expected content and size of
 * FILE in memory and performs random operations on it -- writes at random
 * offsets and lengths (unaligned, straddling blocks, past the end leaving
 * holes, of random, zero, same-filled and text-like data), reads compared
 * with the model, truncates up and down, fallocate (PUNCH_HOLE|KEEP_SIZE,
 * mode 0 and KEEP_SIZE), fsync, close and reopen, dropping the kernel's
 * page cache of the file (fsync + POSIX_FADV_DONTNEED, so that the next
 * read reaches the filesystem), SEEK_DATA/SEEK_HOLE consistency (every
 * non-zero byte of the model lies in a data segment), and with -m reads and
 * writes through a shared mapping (msync), with -c copy_file_range within
 * the file, with -d O_DIRECT reads and writes on a second descriptor
 * (4 KiB aligned).  Offsets and lengths favour multiples and neighbours of the
 * block size -b (default 16384) and of 4 KiB.
 *
 * The run depends only on the seed and the options: the same command repeats
 * the same operations.  On the first mismatch (data, size, an unexpected
 * error) it prints the last 30 operations with their offsets and lengths,
 * the first differing byte and the extent of the damage, and exits 1.  At
 * the end the whole file is verified; -D writes the model's final content
 * to a file (compare it with the file after a remount).
 *
 * -X turns the named operations off (to tell one bug from another).
 * -p prints a progress line every 2000 operations.  -P N runs N processes
 * concurrently, process i on FILE.i with seed+i (and dumpfile.i); the exit
 * status is 1 if any of them failed.
 *
 * Exit status: 0 the file always matched, 1 mismatch or error, 2 usage.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zr_cli.h"

#ifndef FALLOC_FL_KEEP_SIZE
#define FALLOC_FL_KEEP_SIZE 0x01
#endif
#ifndef FALLOC_FL_PUNCH_HOLE
#define FALLOC_FL_PUNCH_HOLE 0x02
#endif

/* operations */
enum fsx_op {
	OP_READ, OP_WRITE, OP_MAPREAD, OP_MAPWRITE, OP_TRUNCATE, OP_PUNCH,
	OP_FALLOC, OP_FALLOC_KEEP, OP_COPY, OP_FSYNC, OP_REOPEN, OP_DROPCACHE,
	OP_SEEK, OP_DREAD, OP_DWRITE, OP_NR
};

static const char *const op_names[OP_NR] = {
	"read", "write", "mapread", "mapwrite", "truncate", "punch",
	"falloc", "falloc_keep", "copy_range", "fsync", "reopen", "dropcache",
	"seek", "dread", "dwrite",
};

/* relative frequency of each operation */
static const unsigned op_weight[OP_NR] = {
	[OP_READ] = 20, [OP_WRITE] = 26, [OP_MAPREAD] = 7, [OP_MAPWRITE] = 7,
	[OP_TRUNCATE] = 6, [OP_PUNCH] = 6, [OP_FALLOC] = 3, [OP_FALLOC_KEEP] = 3,
	[OP_COPY] = 7, [OP_FSYNC] = 3, [OP_REOPEN] = 2, [OP_DROPCACHE] = 4,
	[OP_SEEK] = 3, [OP_DREAD] = 5, [OP_DWRITE] = 5,
};

#define LOG_KEEP 30

/* One logged operation. */
struct log_ent {
	unsigned long n;	/* operation number, from 1 */
	enum fsx_op op;
	uint64_t off;		/* offset (source offset for copy_range) */
	uint64_t len;		/* length, or new size for truncate */
	uint64_t dst;		/* destination offset (copy_range) */
	uint64_t size_before;	/* model size before the operation */
	uint64_t size_after;	/* model size after it */
	int kind;		/* data kind of a write, -1 otherwise */
};

/* The state of one exerciser. */
struct fsx {
	const char *path;	/* the file under test */
	int fd;			/* its descriptor (O_RDWR) */
	int dfd;		/* an O_DIRECT descriptor (-d), or -1 */
	unsigned char *dbuf;	/* page-aligned buffer of maxop bytes for it */
	unsigned char *model;	/* expected content, maxlen bytes */
	unsigned char *buf;	/* scratch of maxlen bytes */
	uint64_t size;		/* expected size */
	uint64_t maxlen;	/* the file never grows past this */
	uint64_t maxop;		/* longest single read/write */
	uint64_t bs;		/* block size to favour */
	uint64_t rng;		/* xorshift64* state */
	unsigned long nops;	/* operations to run */
	unsigned long n;	/* operations done */
	bool mmap_ops, copy_ops, dio_ops, progress;
	bool disabled[OP_NR];	/* turned off with -X */
	const char *prefix;	/* "" or "[proc i] " */
	struct log_ent log[LOG_KEEP];	/* ring of the last operations */
	unsigned long logged;
	long pagesize;
};

static const char *const kind_names[] = { "random", "zeros", "fill", "text", "pattern" };

static uint64_t rnd(struct fsx *x)
{
	x->rng ^= x->rng >> 12;
	x->rng ^= x->rng << 25;
	x->rng ^= x->rng >> 27;
	return x->rng * 0x2545F4914F6CDD1DULL;
}

/* uniform in [0, n); 0 when n is 0 */
static uint64_t rnd_below(struct fsx *x, uint64_t n)
{
	return n ? rnd(x) % n : 0;
}

static void log_op(struct fsx *x, enum fsx_op op, uint64_t off, uint64_t len,
		   uint64_t dst, uint64_t before, int kind)
{
	struct log_ent *e = &x->log[x->logged++ % LOG_KEEP];

	e->n = x->n;
	e->op = op;
	e->off = off;
	e->len = len;
	e->dst = dst;
	e->size_before = before;
	e->size_after = x->size;
	e->kind = kind;
}

static void dump_log(struct fsx *x)
{
	unsigned long i = x->logged > LOG_KEEP ? x->logged - LOG_KEEP : 0;

	fprintf(stderr, "%slast %lu operations (offsets, lengths in bytes; size before -> after):\n",
		x->prefix, x->logged - i);
	for (; i < x->logged; i++) {
		struct log_ent *e = &x->log[i % LOG_KEEP];

		fprintf(stderr, "%s  %6lu %-11s", x->prefix, e->n, op_names[e->op]);
		switch (e->op) {
		case OP_TRUNCATE:
			fprintf(stderr, " to %-24" PRIu64, e->len);
			break;
		case OP_COPY:
			fprintf(stderr, " %#" PRIx64 " len %#" PRIx64 " -> %#" PRIx64,
				e->off, e->len, e->dst);
			break;
		case OP_FSYNC: case OP_REOPEN: case OP_DROPCACHE: case OP_SEEK:
			fprintf(stderr, "%25s", "");
			break;
		default:
			fprintf(stderr, " %#9" PRIx64 " len %#7" PRIx64 " end %#9" PRIx64,
				e->off, e->len, e->off + e->len);
		}
		fprintf(stderr, "  size %#" PRIx64 " -> %#" PRIx64, e->size_before, e->size_after);
		if (e->kind >= 0)
			fprintf(stderr, " (%s)", kind_names[e->kind]);
		fputc('\n', stderr);
	}
}

/* A mismatch or an unexpected error: the log, then exit 1. */
__attribute__((format(printf, 2, 3), noreturn))
static void die(struct fsx *x, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%sFAIL at operation %lu of %s: ", x->prefix, x->n, x->path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	dump_log(x);
	exit(1);
}

/*
 * Compare @got (@len bytes read at @off) with the model; on a difference
 * describe the first differing byte and the damaged extent, and die.
 */
static void check_bytes(struct fsx *x, const unsigned char *got, uint64_t off,
			uint64_t len, const char *how)
{
	const unsigned char *want = x->model + off;
	uint64_t i, first, last, bad = 0;

	if (memcmp(got, want, len) == 0)
		return;
	for (i = 0; i < len && got[i] == want[i]; i++)
		;
	first = i;
	last = i;
	for (; i < len; i++) {
		if (got[i] != want[i]) {
			bad++;
			last = i;
		}
	}
	fprintf(stderr, "%s%s: %" PRIu64 " bytes differ in [%#" PRIx64 ", %#" PRIx64 "] of the read [%#" PRIx64 ", +%#" PRIx64 ")\n",
		x->prefix, how, bad, off + first, off + last, off, len);
	fprintf(stderr, "%sfirst differing byte at offset %#" PRIx64 " (%" PRIu64 "): expected %#04x, got %#04x\n",
		x->prefix, off + first, off + first, want[first], got[first]);
	fprintf(stderr, "%s  expected:", x->prefix);
	for (i = first; i < len && i < first + 16; i++)
		fprintf(stderr, " %02x", want[i]);
	fprintf(stderr, "\n%s  got:     ", x->prefix);
	for (i = first; i < len && i < first + 16; i++)
		fprintf(stderr, " %02x", got[i]);
	fputc('\n', stderr);
	die(x, "data mismatch (%s)", how);
}

/* An offset below @limit that favours block and page boundaries. */
static uint64_t pick_off(struct fsx *x, uint64_t limit)
{
	uint64_t r = rnd_below(x, 100), o, unit;

	if (limit == 0)
		return 0;
	if (r < 20) {			/* on a block or page boundary */
		unit = rnd_below(x, 2) ? x->bs : 4096;
		o = rnd_below(x, limit / unit + 1) * unit;
	} else if (r < 35) {		/* just before or after a block boundary */
		o = rnd_below(x, limit / x->bs + 1) * x->bs;
		o = o + rnd_below(x, 33) - 16;
	} else {
		o = rnd_below(x, limit);
	}
	return o < limit ? o : limit - 1;
}

/* A length in [1, @max] that favours block sizes, tiny and odd lengths. */
static uint64_t pick_len(struct fsx *x, uint64_t max)
{
	uint64_t r = rnd_below(x, 100), l;

	if (max == 0)
		return 0;
	if (r < 15)
		l = (1 + rnd_below(x, 4)) * x->bs;
	else if (r < 25)
		l = 4096 * (1 + rnd_below(x, 4));
	else if (r < 35)
		l = 1 + rnd_below(x, 16);
	else if (r < 40)
		l = x->bs + rnd_below(x, 3) - 1;
	else
		l = 1 + rnd_below(x, x->maxop);
	if (l > x->maxop)
		l = x->maxop;
	return l < max ? l : max;
}

/* Fill @len bytes at @p with data of a random kind; @return the kind. */
static int fill_data(struct fsx *x, unsigned char *p, uint64_t len, uint64_t off)
{
	int kind = (int)rnd_below(x, 10);
	uint64_t i;

	kind = kind < 4 ? 0 : kind < 5 ? 1 : kind < 6 ? 2 : kind < 8 ? 3 : 4;
	switch (kind) {
	case 0:
		for (i = 0; i < len; i += 8) {
			uint64_t v = rnd(x);

			memcpy(p + i, &v, len - i < 8 ? len - i : 8);
		}
		break;
	case 1:
		memset(p, 0, len);
		break;
	case 2:
		memset(p, (int)(1 + rnd_below(x, 255)), len);
		break;
	case 3: {
		static const char words[] = "the quick brown fox jumps over zramfs blocks ";
		uint64_t s = rnd_below(x, sizeof(words) - 1);

		for (i = 0; i < len; i++)
			p[i] = (unsigned char)words[(s + i) % (sizeof(words) - 1)];
		break;
	}
	default: {
		/* fsx's pattern: the offset and operation number, never all zero */
		unsigned char tag = (unsigned char)(x->n % 251 + 1);

		for (i = 0; i < len; i++)
			p[i] = (unsigned char)(((off + i) % 253) ^ tag) | 1;
	}
	}
	return kind;
}

static void xpwrite(struct fsx *x, const void *buf, uint64_t len, uint64_t off)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pwrite(x->fd, (const char *)buf + done, len - done,
				   (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(x, "pwrite of %#" PRIx64 " bytes at %#" PRIx64 ": %s",
			    len - done, off + done, n < 0 ? strerror(errno) : "wrote 0");
		done += (uint64_t)n;
	}
}

/* pread until @len bytes or EOF; @return bytes read. */
static uint64_t xpread(struct fsx *x, void *buf, uint64_t len, uint64_t off)
{
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pread(x->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(x, "pread of %#" PRIx64 " bytes at %#" PRIx64 ": %s",
			    len - done, off + done, strerror(errno));
		if (n == 0)
			break;
		done += (uint64_t)n;
	}
	return done;
}

/* The size the filesystem reports must be the model's. */
static void check_size(struct fsx *x, const char *when)
{
	struct stat st;

	if (fstat(x->fd, &st) < 0)
		die(x, "fstat: %s", strerror(errno));
	if ((uint64_t)st.st_size != x->size)
		die(x, "size is %#" PRIx64 ", expected %#" PRIx64 " (%s)",
		    (uint64_t)st.st_size, x->size, when);
}

/* Read the whole file and compare it with the model. */
static void check_all(struct fsx *x, const char *when)
{
	uint64_t n;

	check_size(x, when);
	n = xpread(x, x->buf, x->size + 1, 0);
	if (n != x->size)
		die(x, "whole-file read returned %#" PRIx64 " bytes, expected %#" PRIx64 " (%s)",
		    n, x->size, when);
	check_bytes(x, x->buf, 0, x->size, when);
}

static void do_read(struct fsx *x)
{
	uint64_t off, len, n, want;

	if (x->size == 0 || rnd_below(x, 20) == 0) {
		/* at or past the end: must read nothing */
		off = x->size + rnd_below(x, 3 * x->bs);
		n = xpread(x, x->buf, 100, off);
		log_op(x, OP_READ, off, 100, 0, x->size, -1);
		if (n)
			die(x, "read at %#" PRIx64 " past the end %#" PRIx64 " returned %" PRIu64 " bytes",
			    off, x->size, n);
		return;
	}
	off = pick_off(x, x->size);
	len = pick_len(x, x->maxlen - off);
	log_op(x, OP_READ, off, len, 0, x->size, -1);
	n = xpread(x, x->buf, len, off);
	want = off + len > x->size ? x->size - off : len;
	if (n != want)
		die(x, "read of %#" PRIx64 " at %#" PRIx64 " returned %#" PRIx64 " bytes, expected %#" PRIx64,
		    len, off, n, want);
	check_bytes(x, x->buf, off, n, "read");
}

static void do_write(struct fsx *x)
{
	uint64_t before = x->size, off, len;
	int kind;

	if (rnd_below(x, 8) == 0)
		off = x->size < x->maxlen ? x->size : pick_off(x, x->maxlen);	/* append */
	else
		off = pick_off(x, x->maxlen);
	len = pick_len(x, x->maxlen - off);
	kind = fill_data(x, x->buf, len, off);
	memcpy(x->model + off, x->buf, len);
	if (off + len > x->size)
		x->size = off + len;
	log_op(x, OP_WRITE, off, len, 0, before, kind);
	xpwrite(x, x->buf, len, off);
}

static void do_truncate(struct fsx *x)
{
	uint64_t before = x->size, r = rnd_below(x, 4), to;

	if (r == 0)
		to = rnd_below(x, x->maxlen + 1);
	else if (r == 1)
		to = pick_off(x, x->maxlen + 1);
	else if (r == 2 && x->size)
		to = x->size - 1 - rnd_below(x, x->size < x->bs ? x->size : x->bs);
	else
		to = x->size + rnd_below(x, 2 * x->bs);
	if (to > x->maxlen)
		to = x->maxlen;
	if (to < x->size)
		memset(x->model + to, 0, x->size - to);
	x->size = to;
	log_op(x, OP_TRUNCATE, 0, to, 0, before, -1);
	if (ftruncate(x->fd, (off_t)to) < 0)
		die(x, "ftruncate to %#" PRIx64 ": %s", to, strerror(errno));
}

static void do_falloc(struct fsx *x, enum fsx_op op)
{
	uint64_t before = x->size, off, len, end;
	int mode;

	off = pick_off(x, op == OP_PUNCH && x->size ? x->size : x->maxlen);
	len = pick_len(x, x->maxlen - off);
	end = off + len;
	if (op == OP_PUNCH) {
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		if (off < x->size)
			memset(x->model + off, 0, (end < x->size ? end : x->size) - off);
	} else if (op == OP_FALLOC_KEEP) {
		mode = FALLOC_FL_KEEP_SIZE;
	} else {
		mode = 0;
		if (end > x->size)
			x->size = end;
	}
	log_op(x, op, off, len, 0, before, -1);
	if (fallocate(x->fd, mode, (off_t)off, (off_t)len) < 0)
		die(x, "fallocate mode %#x at %#" PRIx64 " len %#" PRIx64 ": %s",
		    mode, off, len, strerror(errno));
}

/* Map [@off, @off + @len) of the file, page-aligned; *@delta is where @off lies. */
static unsigned char *map_range(struct fsx *x, uint64_t off, uint64_t len, int prot,
				uint64_t *delta, uint64_t *maplen)
{
	uint64_t pg = off & ~(uint64_t)(x->pagesize - 1);
	void *p;

	*delta = off - pg;
	*maplen = len + *delta;
	p = mmap(NULL, *maplen, prot, MAP_SHARED, x->fd, (off_t)pg);
	if (p == MAP_FAILED)
		die(x, "mmap of %#" PRIx64 " bytes at %#" PRIx64 ": %s", *maplen, pg, strerror(errno));
	return p;
}

static void do_mapread(struct fsx *x)
{
	uint64_t off, len, delta, maplen;
	unsigned char *p;

	if (x->size == 0) {
		log_op(x, OP_MAPREAD, 0, 0, 0, 0, -1);
		return;
	}
	off = pick_off(x, x->size);
	len = pick_len(x, x->size - off);
	log_op(x, OP_MAPREAD, off, len, 0, x->size, -1);
	p = map_range(x, off, len, PROT_READ, &delta, &maplen);
	memcpy(x->buf, p + delta, len);
	if (munmap(p, maplen) < 0)
		die(x, "munmap: %s", strerror(errno));
	check_bytes(x, x->buf, off, len, "mapread");
}

static void do_mapwrite(struct fsx *x)
{
	uint64_t before = x->size, off, len, delta, maplen;
	unsigned char *p;
	int kind;

	off = pick_off(x, x->maxlen);
	len = pick_len(x, x->maxlen - off);
	kind = fill_data(x, x->buf, len, off);
	memcpy(x->model + off, x->buf, len);
	if (off + len > x->size)
		x->size = off + len;
	log_op(x, OP_MAPWRITE, off, len, 0, before, kind);
	/* a mapping cannot extend the file: as fsx does, extend it first */
	if (off + len > before && ftruncate(x->fd, (off_t)(off + len)) < 0)
		die(x, "ftruncate to %#" PRIx64 " before mapwrite: %s", off + len, strerror(errno));
	p = map_range(x, off, len, PROT_READ | PROT_WRITE, &delta, &maplen);
	memcpy(p + delta, x->buf, len);
	if (msync(p, maplen, MS_SYNC) < 0)
		die(x, "msync: %s", strerror(errno));
	if (munmap(p, maplen) < 0)
		die(x, "munmap: %s", strerror(errno));
}

static void do_copy(struct fsx *x)
{
	uint64_t before = x->size, src, dst, len, copied = 0, n;

	if (x->size == 0) {
		log_op(x, OP_COPY, 0, 0, 0, 0, -1);
		return;
	}
	src = pick_off(x, x->size);
	len = pick_len(x, x->maxlen - src);
	dst = pick_off(x, x->maxlen - len + 1);
	/* the ranges of one file must not overlap (EINVAL): shift or give up */
	if (dst < src + len && src < dst + len) {
		if (src + len + (dst % x->bs) + len <= x->maxlen)
			dst = src + len + dst % x->bs;
		else if (src >= len)
			dst = rnd_below(x, src - len + 1);
		else
			len = 0;
	}
	/* the kernel copies up to the source's end */
	n = src + len > x->size ? x->size - src : len;
	log_op(x, OP_COPY, src, len, dst, before, -1);
	if (len == 0)
		return;
	memmove(x->model + dst, x->model + src, n);
	if (dst + n > x->size)
		x->size = dst + n;
	x->log[(x->logged - 1) % LOG_KEEP].size_after = x->size;
	while (copied < n) {
		loff_t in = (loff_t)(src + copied), out = (loff_t)(dst + copied);
		ssize_t r = copy_file_range(x->fd, &in, x->fd, &out, len - copied, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die(x, "copy_file_range %#" PRIx64 " -> %#" PRIx64 " len %#" PRIx64 ": %s",
			    src + copied, dst + copied, len - copied, strerror(errno));
		if (r == 0)
			break;
		copied += (uint64_t)r;
	}
	if (copied != n)
		die(x, "copy_file_range copied %#" PRIx64 " bytes, expected %#" PRIx64, copied, n);
}

/*
 * O_DIRECT reads and writes (-d) go through a second descriptor and bypass
 * the page cache: the filesystem must keep them coherent with cached I/O
 * and mappings of the file.  Offsets and lengths are multiples of 4 KiB,
 * which local filesystems require.
 */
#define DIO_ALIGN 4096

static void dio_open(struct fsx *x)
{
	x->dfd = open(x->path, O_RDWR | O_DIRECT);
	if (x->dfd < 0)
		die(x, "open with O_DIRECT: %s", strerror(errno));
}

static uint64_t dio_len(struct fsx *x, uint64_t room)
{
	uint64_t pages = room / DIO_ALIGN, maxp = x->maxop / DIO_ALIGN;

	if (maxp == 0)
		maxp = 1;
	if (pages > maxp)
		pages = maxp;
	return pages ? (1 + rnd_below(x, pages)) * DIO_ALIGN : 0;
}

static void do_dread(struct fsx *x)
{
	uint64_t off, len, want, done = 0;

	off = rnd_below(x, x->size / DIO_ALIGN + 1) * DIO_ALIGN;
	len = dio_len(x, x->maxlen - off);
	log_op(x, OP_DREAD, off, len, 0, x->size, -1);
	if (len == 0)
		return;
	while (done < len) {
		ssize_t n = pread(x->dfd, x->dbuf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			die(x, "O_DIRECT pread of %#" PRIx64 " at %#" PRIx64 ": %s",
			    len - done, off + done, strerror(errno));
		if (n == 0)
			break;
		done += (uint64_t)n;
	}
	want = off >= x->size ? 0 : off + len > x->size ? x->size - off : len;
	if (done != want)
		die(x, "O_DIRECT read of %#" PRIx64 " at %#" PRIx64 " returned %#" PRIx64 " bytes, expected %#" PRIx64,
		    len, off, done, want);
	check_bytes(x, x->dbuf, off, done, "dread");
}

static void do_dwrite(struct fsx *x)
{
	uint64_t before = x->size, off, len, done = 0;
	int kind;

	if (x->maxlen < DIO_ALIGN) {
		log_op(x, OP_DWRITE, 0, 0, 0, x->size, -1);
		return;
	}
	off = rnd_below(x, (x->maxlen - DIO_ALIGN) / DIO_ALIGN + 1) * DIO_ALIGN;
	len = dio_len(x, x->maxlen - off);
	kind = fill_data(x, x->dbuf, len, off);
	memcpy(x->model + off, x->dbuf, len);
	if (off + len > x->size)
		x->size = off + len;
	log_op(x, OP_DWRITE, off, len, 0, before, kind);
	while (done < len) {
		ssize_t n = pwrite(x->dfd, x->dbuf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die(x, "O_DIRECT pwrite of %#" PRIx64 " at %#" PRIx64 ": %s",
			    len - done, off + done, n < 0 ? strerror(errno) : "wrote 0");
		done += (uint64_t)n;
	}
}

static void do_reopen(struct fsx *x)
{
	log_op(x, OP_REOPEN, 0, 0, 0, x->size, -1);
	if (close(x->fd) < 0)
		die(x, "close: %s", strerror(errno));
	x->fd = open(x->path, O_RDWR);
	if (x->fd < 0)
		die(x, "reopen: %s", strerror(errno));
	if (x->dfd >= 0) {
		if (close(x->dfd) < 0)
			die(x, "close of the O_DIRECT descriptor: %s", strerror(errno));
		dio_open(x);
	}
	check_size(x, "after reopen");
}

static void do_dropcache(struct fsx *x)
{
	log_op(x, OP_DROPCACHE, 0, 0, 0, x->size, -1);
	if (fdatasync(x->fd) < 0)
		die(x, "fdatasync: %s", strerror(errno));
	(void)posix_fadvise(x->fd, 0, 0, POSIX_FADV_DONTNEED);
}

/*
 * SEEK_DATA/SEEK_HOLE: the segments must cover every non-zero byte of the
 * model, holes must lie inside the file, and SEEK_DATA at or past the end
 * is ENXIO.
 */
static void do_seek(struct fsx *x)
{
	uint64_t pos = 0, i;
	off_t data, hole;

	log_op(x, OP_SEEK, 0, 0, 0, x->size, -1);
	while (pos < x->size) {
		data = lseek(x->fd, (off_t)pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			data = (off_t)x->size;
		else if (data < 0)
			die(x, "SEEK_DATA from %#" PRIx64 ": %s", pos, strerror(errno));
		if ((uint64_t)data < pos || (uint64_t)data > x->size)
			die(x, "SEEK_DATA from %#" PRIx64 " returned %#llx (size %#" PRIx64 ")",
			    pos, (long long)data, x->size);
		for (i = pos; i < (uint64_t)data; i++)
			if (x->model[i])
				die(x, "SEEK_DATA from %#" PRIx64 " skipped to %#llx over non-zero data at %#" PRIx64,
				    pos, (long long)data, i);
		if ((uint64_t)data == x->size)
			break;
		hole = lseek(x->fd, data, SEEK_HOLE);
		if (hole < 0)
			die(x, "SEEK_HOLE from %#llx: %s", (long long)data, strerror(errno));
		if (hole == data) {
			/* ext4 reports an unwritten extent so at times: a hole
			 * of its own, then, which must hold a zero */
			if (x->model[data])
				die(x, "SEEK_HOLE from %#llx returned it, over non-zero data",
				    (long long)data);
			pos = (uint64_t)data + 1;
			continue;
		}
		if (hole < data || (uint64_t)hole > x->size)
			die(x, "SEEK_HOLE from %#llx returned %#llx (size %#" PRIx64 ")",
			    (long long)data, (long long)hole, x->size);
		pos = (uint64_t)hole;
	}
	data = lseek(x->fd, (off_t)x->size, SEEK_DATA);
	if (data >= 0 || errno != ENXIO)
		die(x, "SEEK_DATA at the end %#" PRIx64 " returned %lld (%s), expected ENXIO",
		    x->size, (long long)data, data < 0 ? strerror(errno) : "no error");
}

static bool op_enabled(struct fsx *x, enum fsx_op op)
{
	if (x->disabled[op])
		return false;
	switch (op) {
	case OP_MAPREAD: case OP_MAPWRITE:
		return x->mmap_ops;
	case OP_COPY:
		return x->copy_ops;
	case OP_DREAD: case OP_DWRITE:
		return x->dio_ops;
	default:
		return true;
	}
}

static enum fsx_op pick_op(struct fsx *x)
{
	unsigned total = 0, r, i;

	for (i = 0; i < OP_NR; i++)
		total += op_weight[i];
	for (;;) {
		r = (unsigned)rnd_below(x, total);
		for (i = 0; r >= op_weight[i]; i++)
			r -= op_weight[i];
		if (op_enabled(x, (enum fsx_op)i))
			return (enum fsx_op)i;
	}
}

/* Run the exerciser on x->path; @return 0 (mismatches exit(1)). */
static int run(struct fsx *x, const char *dump)
{
	x->model = calloc(1, x->maxlen + 1);
	x->buf = calloc(1, x->maxlen + x->maxop + 4096);
	if (!x->model || !x->buf) {
		fprintf(stderr, "zr_fsx: out of memory\n");
		exit(1);
	}
	x->fd = open(x->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (x->fd < 0) {
		fprintf(stderr, "%szr_fsx: %s: %s\n", x->prefix, x->path, strerror(errno));
		exit(1);
	}
	x->dfd = -1;
	if (x->dio_ops) {
		if (posix_memalign((void **)&x->dbuf, DIO_ALIGN,
				   x->maxop + DIO_ALIGN) != 0) {
			fprintf(stderr, "zr_fsx: out of memory\n");
			exit(1);
		}
		dio_open(x);
	}
	for (x->n = 1; x->n <= x->nops; x->n++) {
		enum fsx_op op = pick_op(x);

		switch (op) {
		case OP_READ: do_read(x); break;
		case OP_WRITE: do_write(x); break;
		case OP_MAPREAD: do_mapread(x); break;
		case OP_MAPWRITE: do_mapwrite(x); break;
		case OP_TRUNCATE: do_truncate(x); break;
		case OP_PUNCH: case OP_FALLOC: case OP_FALLOC_KEEP: do_falloc(x, op); break;
		case OP_COPY: do_copy(x); break;
		case OP_FSYNC:
			log_op(x, OP_FSYNC, 0, 0, 0, x->size, -1);
			if (fsync(x->fd) < 0)
				die(x, "fsync: %s", strerror(errno));
			break;
		case OP_REOPEN: do_reopen(x); break;
		case OP_DROPCACHE: do_dropcache(x); break;
		case OP_SEEK: do_seek(x); break;
		case OP_DREAD: do_dread(x); break;
		case OP_DWRITE: do_dwrite(x); break;
		default: break;
		}
		if (op != OP_READ && op != OP_MAPREAD && op != OP_SEEK && op != OP_DREAD)
			check_size(x, "after the operation");
		if (x->n % 1000 == 0)
			check_all(x, "periodic whole-file check");
		if (x->progress && x->n % 2000 == 0)
			printf("%s%s: %lu operations, size %" PRIu64 "\n", x->prefix, x->path,
			       x->n, x->size);
	}
	x->n = x->nops;
	if (fsync(x->fd) < 0)
		die(x, "final fsync: %s", strerror(errno));
	check_all(x, "final whole-file check");
	(void)posix_fadvise(x->fd, 0, 0, POSIX_FADV_DONTNEED);
	check_all(x, "final check after dropping the page cache");
	if (close(x->fd) < 0)
		die(x, "close: %s", strerror(errno));
	if (x->dfd >= 0 && close(x->dfd) < 0)
		die(x, "close of the O_DIRECT descriptor: %s", strerror(errno));
	if (dump) {
		FILE *f = fopen(dump, "w");

		if (!f || fwrite(x->model, 1, x->size, f) != x->size || fclose(f) != 0) {
			fprintf(stderr, "%szr_fsx: cannot write %s\n", x->prefix, dump);
			exit(1);
		}
	}
	printf("%s%s: %lu operations passed, final size %" PRIu64 "\n", x->prefix, x->path,
	       x->nops, x->size);
	free(x->model);
	free(x->buf);
	free(x->dbuf);
	x->model = NULL;
	x->buf = NULL;
	x->dbuf = NULL;
	return 0;
}

/* -X name,name...: turn those operations off (not read and write, which
 * check the data). */
static void disable_ops(struct fsx *x, char *list)
{
	zr_cli_disable("zr_fsx", list, op_names, OP_NR, x->disabled);
	if (x->disabled[OP_READ] || x->disabled[OP_WRITE]) {
		fprintf(stderr, "zr_fsx: -X: cannot turn off read or write\n");
		exit(2);
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: zr_fsx [-N ops] [-S seed] [-l maxlen] [-o maxop] [-b bs] [-m] [-c] [-d] [-p]\n"
		"              [-D dumpfile] [-P nproc] [-X op,...] FILE\n"
		"  -N ops      operations to run (10000)\n"
		"  -S seed     random seed (1)\n"
		"  -l maxlen   largest file size (256k; k/m suffixes)\n"
		"  -o maxop    longest read/write (64k)\n"
		"  -b bs       block size whose boundaries are favoured (16k)\n"
		"  -m          mmap reads and writes\n"
		"  -c          copy_file_range within the file\n"
		"  -d          O_DIRECT reads and writes (4 KiB aligned) on a second descriptor\n"
		"  -p          progress every 2000 operations\n"
		"  -D file     write the final expected content to file\n"
		"  -P n        n processes on FILE.0 .. FILE.n-1 (seeds seed..seed+n-1)\n"
		"  -X op,...   turn operations off (mapread, mapwrite, truncate, punch,\n"
		"              falloc, falloc_keep, copy_range, fsync, reopen, dropcache, seek,\n"
		"              dread, dwrite)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct fsx x = {
		.nops = 10000, .maxlen = 256 << 10, .maxop = 64 << 10, .bs = 16 << 10,
		.prefix = "",
	};
	const char *dump = NULL;
	uint64_t seed = 1;
	unsigned nproc = 0, i, failed = 0;
	int c;

	while ((c = getopt(argc, argv, "N:S:l:o:b:mcdpD:P:X:")) != -1) {
		switch (c) {
		case 'N': x.nops = (unsigned long)zr_cli_num("zr_fsx", optarg); break;
		case 'S': seed = zr_cli_num("zr_fsx", optarg); break;
		case 'l': x.maxlen = zr_cli_num("zr_fsx", optarg); break;
		case 'o': x.maxop = zr_cli_num("zr_fsx", optarg); break;
		case 'b': x.bs = zr_cli_num("zr_fsx", optarg); break;
		case 'm': x.mmap_ops = true; break;
		case 'c': x.copy_ops = true; break;
		case 'd': x.dio_ops = true; break;
		case 'p': x.progress = true; break;
		case 'D': dump = optarg; break;
		case 'P': nproc = (unsigned)zr_cli_num("zr_fsx", optarg); break;
		case 'X': disable_ops(&x, optarg); break;
		default: usage();
		}
	}
	if (optind != argc - 1 || x.maxlen == 0 || x.maxop == 0 || x.bs == 0 ||
	    x.maxop > x.maxlen)
		usage();
	x.pagesize = sysconf(_SC_PAGESIZE);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (nproc == 0) {
		x.path = argv[optind];
		x.rng = seed * 0x9E3779B97F4A7C15ULL + 0x1234567;
		printf("zr_fsx: %s seed %" PRIu64 " ops %lu maxlen %" PRIu64 " maxop %" PRIu64 "%s%s%s\n",
		       x.path, seed, x.nops, x.maxlen, x.maxop, x.mmap_ops ? " mmap" : "",
		       x.copy_ops ? " copy_range" : "", x.dio_ops ? " O_DIRECT" : "");
		return run(&x, dump);
	}
	for (i = 0; i < nproc; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("zr_fsx: fork");
			return 1;
		}
		if (pid == 0) {
			static char path[4096], dpath[4096], prefix[32];

			snprintf(path, sizeof(path), "%s.%u", argv[optind], i);
			snprintf(prefix, sizeof(prefix), "[proc %u] ", i);
			x.path = path;
			x.prefix = prefix;
			x.rng = (seed + i) * 0x9E3779B97F4A7C15ULL + 0x1234567;
			if (dump)
				snprintf(dpath, sizeof(dpath), "%s.%u", dump, i);
			printf("%szr_fsx: %s seed %" PRIu64 " ops %lu\n", prefix, path,
			       seed + i, x.nops);
			_exit(run(&x, dump ? dpath : NULL));
		}
	}
	for (i = 0; i < nproc; i++) {
		int status;

		if (wait(&status) < 0) {
			perror("zr_fsx: wait");
			return 1;
		}
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed++;
	}
	if (failed)
		fprintf(stderr, "zr_fsx: %u of %u processes failed\n", failed, nproc);
	return failed ? 1 : 0;
}

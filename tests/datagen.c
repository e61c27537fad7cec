// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * datagen.c - deterministic test data for the unit tests and benchmarks.
 *
 * Text blocks are built from a fixed vocabulary of C-like words arranged in
 * lines with tab indentation, punctuation, numbers and the odd comment, so
 * that lz4 finds the repeats a source tree has (ratio about 2-2.5x); 45% of
 * lines repeat one of the last 16, as statements do in real code. Binary
 * blocks are arrays of 32-byte records (a type tag, small counters, pointers
 * into a few regions, a length, an increasing id, a random word in one
 * record of four; one record of eight is a free, zeroed entry), about 1.7-1.8x
 * with lz4. The ratios were tuned by measurement with tests/check_codec's
 * ratio report (ZR_CODEC_RATIOS=1) and are checked there.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "datagen.h"

uint64_t zr_datagen_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

uint64_t zr_datagen_below(uint64_t *state, uint64_t n)
{
	if (n == 0)
		return 0;
	/* Multiply-shift: bias is below 2^-32 for the small n used here. */
	return (uint64_t)(((unsigned __int128)zr_datagen_next(state) * n) >> 64);
}

static const char *const kind_names[ZR_DATA_COUNT] = {
	[ZR_DATA_ZERO] = "zero",
	[ZR_DATA_SAME] = "same",
	[ZR_DATA_TEXT] = "text",
	[ZR_DATA_BINARY] = "binary",
	[ZR_DATA_RANDOM] = "random",
	[ZR_DATA_MIXED] = "mixed",
};

const char *zr_datagen_name(enum zr_datagen_kind kind)
{
	if ((unsigned)kind >= ZR_DATA_COUNT)
		return "?";
	return kind_names[kind];
}

int zr_datagen_by_name(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = 0; i < ZR_DATA_COUNT; i++)
		if (strcmp(name, kind_names[i]) == 0)
			return i;
	return -EINVAL;
}

/* Seeds are mixed with a per-purpose constant so that, e.g., the pattern
 * of a same-filled block is unrelated to the kind a mixed block picks. */
static uint64_t seed_for(uint64_t seed, uint64_t purpose)
{
	uint64_t s = seed ^ (purpose * 0xd1b54a32d192ed03ULL);

	return zr_datagen_next(&s);
}

enum zr_datagen_kind zr_datagen_mixed_kind(uint64_t seed)
{
	uint64_t s = seed_for(seed, 1);
	uint64_t r = zr_datagen_below(&s, 100);

	if (r < 10)
		return ZR_DATA_ZERO;
	if (r < 15)
		return ZR_DATA_SAME;
	if (r < 55)
		return ZR_DATA_TEXT;
	if (r < 85)
		return ZR_DATA_BINARY;
	return ZR_DATA_RANDOM;
}

uint64_t zr_datagen_same_pattern(uint64_t seed)
{
	uint64_t s = seed_for(seed, 2);
	uint64_t v;

	do
		v = zr_datagen_next(&s);
	while (v == 0);
	return v;
}

static void fill_random(uint64_t *state, unsigned char *p, size_t len)
{
	while (len >= 8) {
		uint64_t v = zr_datagen_next(state);

		memcpy(p, &v, 8);
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t v = zr_datagen_next(state);

		memcpy(p, &v, len);
	}
}

static void fill_same(uint64_t seed, unsigned char *p, size_t len)
{
	uint64_t v = zr_datagen_same_pattern(seed);
	size_t i;

	for (i = 0; i + 8 <= len; i += 8)
		memcpy(p + i, &v, 8);
	memcpy(p + i, &v, len - i);
}

/* --- text ---------------------------------------------------------------- */

static const char *const words[] = {
	"if", "else", "for", "while", "return", "int", "char", "void",
	"struct", "static", "const", "unsigned", "size_t", "uint64_t",
	"NULL", "sizeof", "break", "case", "switch", "goto", "out",
	"err", "ret", "len", "buf", "ctx", "node", "inode", "block",
	"slot", "handle", "flags", "data", "offset", "count", "next",
	"prev", "list", "entry", "lock", "unlock", "mutex", "state",
	"value", "key", "hash", "table", "free", "alloc", "malloc",
	"memcpy", "memset", "read", "write", "open", "close", "file",
	"path", "name", "size", "index", "error", "the", "a", "of",
	"to", "is", "in", "and", "that", "when", "this", "with",
	"zr_store_put", "zr_store_get", "zr_zpool_alloc", "zr_codec_compress",
	"pthread_mutex_lock", "pthread_mutex_unlock", "EINVAL", "ENOMEM",
};

#define NWORDS (sizeof(words) / sizeof(words[0]))

struct textbuf {
	unsigned char *p;	/* output */
	size_t len;		/* its size */
	size_t pos;		/* bytes written so far */
};

static void tput(struct textbuf *t, const char *s, size_t n)
{
	size_t room = t->len - t->pos;

	if (n > room)
		n = room;
	memcpy(t->p + t->pos, s, n);
	t->pos += n;
}

static void tputs(struct textbuf *t, const char *s)
{
	tput(t, s, strlen(s));
}

/* A word, skewed toward the start of the vocabulary (Zipf-like enough). */
static const char *pick_word(uint64_t *st)
{
	uint64_t a = zr_datagen_below(st, NWORDS);
	uint64_t b = zr_datagen_below(st, NWORDS);

	return words[a < b ? a : b];
}

static void text_number(struct textbuf *t, uint64_t *st)
{
	char num[24];
	uint64_t v = zr_datagen_next(st);
	int n;

	switch (v & 3) {
	case 0:
		n = snprintf(num, sizeof(num), "%u", (unsigned)(v >> 8) % 16);
		break;
	case 1:
		n = snprintf(num, sizeof(num), "%u", (unsigned)(v >> 8) % 4096);
		break;
	case 2:
		n = snprintf(num, sizeof(num), "0x%x", (unsigned)(v >> 8) & 0xffff);
		break;
	default:
		n = snprintf(num, sizeof(num), "%u", (unsigned)(v >> 8) % 1000000);
		break;
	}
	tput(t, num, (size_t)n);
}

static void text_line(struct textbuf *t, uint64_t *st, unsigned indent)
{
	static const char *const punct[] = {
		" ", " ", " ", " ", ", ", "(", ") ", "->", ".", " = ",
		" == ", " + ", "[", "] ", " < ", " & ", "_", " *",
	};
	unsigned nw, kind = (unsigned)zr_datagen_below(st, 16);

	for (unsigned i = 0; i < indent; i++)
		tput(t, "\t", 1);
	if (kind == 0) {
		tputs(t, "/* ");
		nw = 3 + (unsigned)zr_datagen_below(st, 8);
		for (unsigned i = 0; i < nw; i++) {
			tputs(t, pick_word(st));
			tput(t, " ", 1);
		}
		tputs(t, "*/\n");
		return;
	}
	if (kind == 1) {
		tputs(t, indent ? "}\n" : "\n");
		return;
	}
	nw = 1 + (unsigned)zr_datagen_below(st, 7);
	for (unsigned i = 0; i < nw; i++) {
		if (zr_datagen_below(st, 8) == 0)
			text_number(t, st);
		else
			tputs(t, pick_word(st));
		if (i + 1 < nw)
			tputs(t, punct[zr_datagen_below(st, sizeof(punct) /
							     sizeof(punct[0]))]);
	}
	tputs(t, kind < 5 ? ") {\n" : ";\n");
}

/* Lines remembered for repeating: code repeats whole statements. */
#define TEXT_HISTORY 16
#ifndef TEXT_REPEAT_PCT
#define TEXT_REPEAT_PCT 45	/* % of lines that repeat a recent one */
#endif

static void fill_text(uint64_t *st, unsigned char *p, size_t len)
{
	struct textbuf t = { .p = p, .len = len, .pos = 0 };
	size_t hist_off[TEXT_HISTORY], hist_len[TEXT_HISTORY];
	unsigned indent = 1, nhist = 0, nlines = 0;

	while (t.pos < t.len) {
		size_t start = t.pos;

		if (nhist && zr_datagen_below(st, 100) < TEXT_REPEAT_PCT) {
			unsigned h = (unsigned)zr_datagen_below(st, nhist);

			/* memmove: the copy stays inside one buffer */
			size_t n = hist_len[h];

			if (n > t.len - t.pos)
				n = t.len - t.pos;
			memmove(t.p + t.pos, t.p + hist_off[h], n);
			t.pos += n;
		} else {
			text_line(&t, st, indent);
			hist_off[nlines % TEXT_HISTORY] = start;
			hist_len[nlines % TEXT_HISTORY] = t.pos - start;
			nlines++;
			if (nhist < TEXT_HISTORY)
				nhist++;
		}
		switch (zr_datagen_below(st, 6)) {
		case 0:
			if (indent < 4)
				indent++;
			break;
		case 1:
			if (indent > 0)
				indent--;
			break;
		default:
			break;
		}
	}
}

/* --- binary -------------------------------------------------------------- */

/* One 32-byte record of a made-up on-disk or in-memory table. */
struct record {
	uint16_t type;		/* one of a few tags */
	uint16_t flags;		/* a few bits */
	uint32_t count;		/* small counter */
	uint64_t ptr;		/* into one of a few regions, 16-byte aligned */
	uint32_t len;		/* small length */
	uint32_t id;		/* increasing */
	uint64_t noise;		/* hash-like, partly random */
};

static void fill_binary(uint64_t *st, unsigned char *p, size_t len)
{
	static const uint64_t regions[] = {
		0x00007f3a12400000ULL, 0x00005581c0de0000ULL,
		0x00007ffd9a000000ULL, 0x00007f3a1f800000ULL,
	};
	uint32_t id = (uint32_t)zr_datagen_below(st, 100000);
	size_t pos = 0;

	while (pos < len) {
		struct record r;
		size_t n = sizeof(r);

		memset(&r, 0, sizeof(r));
		r.id = id++;
		if (zr_datagen_below(st, 8) == 0)
			goto emit;	/* a free entry: all zero but its id */
		r.type = (uint16_t)(1 + zr_datagen_below(st, 6));
		r.flags = (uint16_t)(zr_datagen_below(st, 4) << 4);
		r.count = (uint32_t)zr_datagen_below(st, 64);
		r.ptr = regions[zr_datagen_below(st, 4)] +
			(zr_datagen_below(st, 1024) << 4);
		r.len = (uint32_t)(zr_datagen_below(st, 3) == 0 ? 4096 :
				   zr_datagen_below(st, 1024));
		if (zr_datagen_below(st, 4) == 0)
			r.noise = zr_datagen_next(st);
emit:
		if (n > len - pos)
			n = len - pos;
		memcpy(p + pos, &r, n);
		pos += n;
	}
}

void zr_datagen_fill(enum zr_datagen_kind kind, uint64_t seed, void *buf,
		     size_t len)
{
	unsigned char *p = buf;
	uint64_t st = seed_for(seed, 3);

	if (kind == ZR_DATA_MIXED)
		kind = zr_datagen_mixed_kind(seed);
	switch (kind) {
	case ZR_DATA_ZERO:
		memset(p, 0, len);
		break;
	case ZR_DATA_SAME:
		fill_same(seed, p, len);
		break;
	case ZR_DATA_TEXT:
		fill_text(&st, p, len);
		break;
	case ZR_DATA_BINARY:
		fill_binary(&st, p, len);
		break;
	default:
		fill_random(&st, p, len);
		break;
	}
}

size_t zr_datagen_comp_size(uint64_t *state, size_t block_size)
{
	uint64_t r, lo, hi;

	if (block_size == 0)
		return 0;
	r = zr_datagen_below(state, 100);
	if (r < 10) {
		lo = 1;
		hi = 199;
	} else if (r < 70) {
		lo = block_size / 4;
		hi = block_size * 60 / 100;
	} else if (r < 90) {
		lo = block_size * 60 / 100;
		hi = block_size * 95 / 100;
	} else {
		return block_size;
	}
	if (hi > block_size)
		hi = block_size;
	if (lo < 1)
		lo = 1;
	if (hi < lo)
		hi = lo;
	return (size_t)(lo + zr_datagen_below(state, hi - lo + 1));
}

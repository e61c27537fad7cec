// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * check_codec.c - unit tests of the codecs (src/codec.c) and of the test
 * data generator (tests/datagen.c).
 *
 * Set ZR_CODEC_RATIOS=1 to print the compression ratio of every codec, level,
 * data kind and block size (64 blocks each) before the tests run.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "zr_codec.h"
#include "zr_util.h"

struct codec_level {
	enum zr_codec_id id;
	int level;
};

/* The level samples of the round-trip matrix. */
static const struct codec_level samples[] = {
	{ ZR_CODEC_LZ4, 0 },	/* acceleration 1 */
	{ ZR_CODEC_LZ4, -8 },	/* acceleration 8 */
	{ ZR_CODEC_LZ4HC, 1 },
	{ ZR_CODEC_LZ4HC, 9 },
	{ ZR_CODEC_LZ4HC, 12 },
	{ ZR_CODEC_ZSTD, -5 },
	{ ZR_CODEC_ZSTD, 1 },
	{ ZR_CODEC_ZSTD, 3 },
	{ ZR_CODEC_ZSTD, 19 },
	{ ZR_CODEC_NONE, 0 },
};

static const size_t block_sizes[] = {
	4096, 8192, 16384, 32768, 65536, 131072,
};

#define MAX_BLOCK 131072
#define GUARD 64		/* guard bytes after every output buffer */
#define GUARD_BYTE 0xa5

/* Whether we run under valgrind, where timing means nothing. */
static int under_valgrind(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload");
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	ck_assert_ptr_nonnull(p);
	return p;
}

static void check_guard(const unsigned char *p)
{
	for (size_t i = 0; i < GUARD; i++)
		ck_assert_uint_eq(p[i], GUARD_BYTE);
}

/* --- round trips ---------------------------------------------------------- */

/* Compress and decompress one block of every kind and size with sample @_i. */
START_TEST(test_roundtrip)
{
	const struct codec_level *s = &samples[_i];
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	size_t cap = zr_codec_bound(s->id, MAX_BLOCK);
	unsigned char *src = xmalloc(MAX_BLOCK);
	unsigned char *comp = xmalloc(cap + GUARD);
	unsigned char *out = xmalloc(MAX_BLOCK + GUARD);

	ck_assert_ptr_nonnull(ctx);
	for (int kind = 0; kind < ZR_DATA_COUNT; kind++) {
		for (size_t b = 0; b < ZR_ARRAY_SIZE(block_sizes); b++) {
			size_t len = block_sizes[b];
			size_t bound = zr_codec_bound(s->id, len);
			uint64_t seed = 1000 * (uint64_t)kind + b;
			ssize_t c, d;

			ck_assert_uint_ge(bound, len);
			ck_assert_uint_le(bound, cap);
			zr_datagen_fill(kind, seed, src, len);
			memset(comp + bound, GUARD_BYTE, GUARD);
			c = zr_codec_compress(ctx, s->id, s->level, src, len,
					      comp, bound);
			ck_assert_msg(c > 0 && (size_t)c <= bound,
				      "%s/%d %s %zu: compress gave %zd",
				      zr_codec_name(s->id), s->level,
				      zr_datagen_name(kind), len, c);
			check_guard(comp + bound);
			if (s->id == ZR_CODEC_NONE)
				ck_assert_int_eq(c, (ssize_t)len);
			else if (kind == ZR_DATA_ZERO || kind == ZR_DATA_SAME)
				ck_assert_int_lt(c, (ssize_t)(len / 20 + 64));

			memset(out, 0, len);
			memset(out + len, GUARD_BYTE, GUARD);
			d = zr_codec_decompress(ctx, s->id, comp, (size_t)c,
						out, len);
			ck_assert_int_eq(d, (ssize_t)len);
			ck_assert_mem_eq(out, src, len);
			check_guard(out + len);
		}
	}
	zr_codec_ctx_free(ctx);
	free(src);
	free(comp);
	free(out);
}
END_TEST

/* The zstd level cached in a context follows level changes: alternating
 * levels give the same bytes as a fresh context at each level. */
START_TEST(test_zstd_level_switch)
{
	static const int levels[] = { 1, 19, -5, 1, 3, 19 };
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	size_t len = 65536, cap = zr_codec_bound(ZR_CODEC_ZSTD, len);
	unsigned char *src = xmalloc(len);
	unsigned char *a = xmalloc(cap), *b = xmalloc(cap);

	ck_assert_ptr_nonnull(ctx);
	zr_datagen_fill(ZR_DATA_TEXT, 7, src, len);
	for (size_t i = 0; i < ZR_ARRAY_SIZE(levels); i++) {
		struct zr_codec_ctx *fresh = zr_codec_ctx_new();
		ssize_t na, nb;

		ck_assert_ptr_nonnull(fresh);
		na = zr_codec_compress(ctx, ZR_CODEC_ZSTD, levels[i], src, len,
				       a, cap);
		nb = zr_codec_compress(fresh, ZR_CODEC_ZSTD, levels[i], src,
				       len, b, cap);
		ck_assert_int_gt(na, 0);
		ck_assert_int_eq(na, nb);
		ck_assert_mem_eq(a, b, (size_t)na);
		zr_codec_ctx_free(fresh);
	}
	/* Level 19 must beat level -5 on text. */
	ck_assert_int_lt(zr_codec_compress(ctx, ZR_CODEC_ZSTD, 19, src, len, a, cap),
			 zr_codec_compress(ctx, ZR_CODEC_ZSTD, -5, src, len, a, cap));
	zr_codec_ctx_free(ctx);
	free(src);
	free(a);
	free(b);
}
END_TEST

/* Arguments the codecs must refuse. */
START_TEST(test_bad_args)
{
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	unsigned char src[64] = { 0 }, dst[256];

	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_LZ4, 0, src, 0, dst,
					   sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_compress(NULL, ZR_CODEC_LZ4, 0, src,
					   sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_COUNT, 0, src,
					   sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_LZ4, 1, src,
					   sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_LZ4HC, 13, src,
					   sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_ZSTD, 23, src,
					   sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_NONE, 1, src,
					   sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_decompress(ctx, ZR_CODEC_COUNT, src,
					     sizeof(src), dst, sizeof(dst)), -EINVAL);
	ck_assert_int_eq(zr_codec_decompress(ctx, (enum zr_codec_id)-1, src,
					     sizeof(src), dst, sizeof(dst)), -EINVAL);
	/* none: a short destination is -ENOSPC, a length mismatch -EIO. */
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_NONE, 0, src,
					   sizeof(src), dst, sizeof(src) - 1), -ENOSPC);
	ck_assert_int_eq(zr_codec_decompress(ctx, ZR_CODEC_NONE, src,
					     sizeof(src), dst, sizeof(src) + 1), -EIO);
	zr_codec_ctx_free(ctx);
	zr_codec_ctx_free(NULL);
}
END_TEST

/* --- early give-up -------------------------------------------------------- */

/* Random data with dst_cap = len - len/8 is -ENOSPC for every sample and
 * block size, and never writes past dst_cap. */
START_TEST(test_giveup)
{
	const struct codec_level *s = &samples[_i];
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	unsigned char *src = xmalloc(MAX_BLOCK);
	unsigned char *dst = xmalloc(MAX_BLOCK + GUARD);

	ck_assert_ptr_nonnull(ctx);
	for (size_t b = 0; b < ZR_ARRAY_SIZE(block_sizes); b++) {
		size_t len = block_sizes[b], cap = len - len / 8;

		zr_datagen_fill(ZR_DATA_RANDOM, 42 + b, src, len);
		memset(dst + cap, GUARD_BYTE, GUARD);
		ck_assert_int_eq(zr_codec_compress(ctx, s->id, s->level, src,
						   len, dst, cap), -ENOSPC);
		check_guard(dst + cap);
		/* The context still works after a failed call. */
		if (s->id != ZR_CODEC_NONE) {
			ssize_t c;

			zr_datagen_fill(ZR_DATA_BINARY, 42 + b, src, len);
			c = zr_codec_compress(ctx, s->id, s->level, src, len,
					      dst, cap);
			ck_assert_int_gt(c, 0);
			ck_assert_int_le(c, (ssize_t)cap);
		}
	}
	zr_codec_ctx_free(ctx);
	free(src);
	free(dst);
}
END_TEST

/* Giving up on a random 4 KiB block with lz4 is cheap (the store's budget is
 * 3 us for the whole raw store; here we allow slack for loaded machines). */
START_TEST(test_giveup_time)
{
	enum { N = 2000, LEN = 4096 };
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	unsigned char *src = xmalloc(LEN * 16);
	unsigned char dst[LEN];
	uint64_t t0, ns;

	ck_assert_ptr_nonnull(ctx);
	zr_datagen_fill(ZR_DATA_RANDOM, 5, src, LEN * 16);
	/* warm up: allocate the state, fault pages in */
	ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_LZ4, 0, src, LEN, dst,
					   LEN - LEN / 8), -ENOSPC);
	t0 = zr_now_ns();
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(zr_codec_compress(ctx, ZR_CODEC_LZ4, 0,
						   src + (i % 16) * LEN, LEN,
						   dst, LEN - LEN / 8), -ENOSPC);
	ns = (zr_now_ns() - t0) / N;
	fprintf(stderr, "codec: lz4 give-up on random 4 KiB: %llu ns/block\n",
		(unsigned long long)ns);
	if (!under_valgrind() && !getenv("ZR_NO_TIMING"))
		ck_assert_uint_le(ns, 20000);
	zr_codec_ctx_free(ctx);
	free(src);
}
END_TEST

/* --- corrupt input ---------------------------------------------------------- */

/* Decompress @len bytes of (possibly corrupt) @src into an exact buffer
 * followed by a guard; the result must be @dst_len or -EIO.
 * @return 1 if it was -EIO. */
static int try_decompress(struct zr_codec_ctx *ctx, enum zr_codec_id id,
			  const void *src, size_t len, unsigned char *out,
			  size_t dst_len)
{
	ssize_t d;

	memset(out + dst_len, GUARD_BYTE, GUARD);
	d = zr_codec_decompress(ctx, id, src, len, out, dst_len);
	ck_assert_msg(d == (ssize_t)dst_len || d == -EIO,
		      "%s: corrupt input gave %zd", zr_codec_name(id), d);
	check_guard(out + dst_len);
	return d == -EIO;
}

/* Flipped bytes, truncation, wrong lengths and garbage are -EIO (or decode
 * to a block of the right length, which a codec without checksum cannot
 * tell from the original), never a crash or a write out of bounds. */
START_TEST(test_corrupt)
{
	const struct codec_level *s = &samples[_i];
	static const size_t lens[] = { 4096, 65536 };
	static const int kinds[] = { ZR_DATA_TEXT, ZR_DATA_BINARY, ZR_DATA_ZERO };
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	size_t cap = zr_codec_bound(s->id, 65536);
	unsigned char *src = xmalloc(65536);
	unsigned char *comp = xmalloc(cap);
	unsigned char *bad = xmalloc(cap + 1);
	unsigned char *out = xmalloc(65536 + 1 + GUARD);
	uint64_t rng = 99 + (uint64_t)_i;

	ck_assert_ptr_nonnull(ctx);
	for (size_t l = 0; l < ZR_ARRAY_SIZE(lens); l++) {
		for (size_t k = 0; k < ZR_ARRAY_SIZE(kinds); k++) {
			size_t len = lens[l];
			ssize_t c;
			size_t clen;
			int eio;

			zr_datagen_fill(kinds[k], 11 * l + k, src, len);
			c = zr_codec_compress(ctx, s->id, s->level, src, len,
					      comp, cap);
			ck_assert_int_gt(c, 0);
			clen = (size_t)c;

			/* the intact block, into too short / too long buffers */
			ck_assert_int_eq(try_decompress(ctx, s->id, comp, clen,
							out, len - 1), 1);
			ck_assert_int_eq(try_decompress(ctx, s->id, comp, clen,
							out, len + 1), 1);

			/* truncated: always detected */
			for (int t = 0; t < 16; t++) {
				size_t n = (size_t)zr_datagen_below(&rng, clen);

				memcpy(bad, comp, n);
				ck_assert_int_eq(try_decompress(ctx, s->id,
								bad, n, out,
								len), 1);
			}
			/* one extra byte */
			memcpy(bad, comp, clen);
			bad[clen] = 0;
			if (s->id == ZR_CODEC_NONE)
				ck_assert_int_eq(try_decompress(ctx, s->id,
								bad, clen + 1,
								out, len), 1);
			else
				try_decompress(ctx, s->id, bad, clen + 1, out,
					       len);

			/* 1..8 flipped bytes */
			for (int t = 0; t < 64; t++) {
				int nflip = 1 + (int)zr_datagen_below(&rng, 8);

				memcpy(bad, comp, clen);
				for (int f = 0; f < nflip; f++)
					bad[zr_datagen_below(&rng, clen)] ^=
						(unsigned char)(1 + zr_datagen_below(&rng, 255));
				try_decompress(ctx, s->id, bad, clen, out, len);
			}

			/* garbage of every length up to the real one */
			eio = 0;
			for (int t = 0; t < 32; t++) {
				size_t n = 1 + (size_t)zr_datagen_below(&rng, clen);

				zr_datagen_fill(ZR_DATA_RANDOM, zr_datagen_next(&rng),
						bad, n);
				eio += try_decompress(ctx, s->id, bad, n, out,
						      len);
			}
			if (s->id != ZR_CODEC_NONE)
				ck_assert_int_ge(eio, 28);
		}
	}
	/* the context still decodes a good block afterwards */
	zr_datagen_fill(ZR_DATA_TEXT, 3, src, 4096);
	ck_assert_int_gt(zr_codec_compress(ctx, s->id, s->level, src, 4096,
					   comp, cap), 0);
	zr_codec_ctx_free(ctx);
	free(src);
	free(comp);
	free(bad);
	free(out);
}
END_TEST

/* --- names and levels ----------------------------------------------------- */

START_TEST(test_names)
{
	for (int i = 0; i < ZR_CODEC_COUNT; i++)
		ck_assert_int_eq(zr_codec_by_name(zr_codec_name(i)), i);
	ck_assert_int_eq(zr_codec_by_name("lz4"), ZR_CODEC_LZ4);
	ck_assert_int_eq(zr_codec_by_name("lz4hc"), ZR_CODEC_LZ4HC);
	ck_assert_int_eq(zr_codec_by_name("zstd"), ZR_CODEC_ZSTD);
	ck_assert_int_eq(zr_codec_by_name("none"), ZR_CODEC_NONE);
	ck_assert_int_eq(zr_codec_by_name("LZ4x"), -EINVAL);
	ck_assert_int_eq(zr_codec_by_name(""), -EINVAL);
	ck_assert_int_eq(zr_codec_by_name(NULL), -EINVAL);
	ck_assert_str_eq(zr_codec_name(ZR_CODEC_COUNT), "?");
	ck_assert_str_eq(zr_codec_name((enum zr_codec_id)-1), "?");

	for (int i = 0; i < ZR_DATA_COUNT; i++)
		ck_assert_int_eq(zr_datagen_by_name(zr_datagen_name(i)), i);
	ck_assert_int_eq(zr_datagen_by_name("text"), ZR_DATA_TEXT);
	ck_assert_int_eq(zr_datagen_by_name("nope"), -EINVAL);
	ck_assert_int_eq(zr_datagen_by_name(NULL), -EINVAL);
	ck_assert_str_eq(zr_datagen_name(ZR_DATA_COUNT), "?");
}
END_TEST

START_TEST(test_levels)
{
	int lo = 1234, hi = 1234;

	for (int i = 0; i < ZR_CODEC_COUNT; i++)
		ck_assert_int_eq(zr_codec_level_valid(i, zr_codec_default_level(i),
						      NULL, NULL), 0);
	ck_assert_int_eq(zr_codec_default_level(ZR_CODEC_LZ4), 0);
	ck_assert_int_eq(zr_codec_default_level(ZR_CODEC_LZ4HC), 9);
	ck_assert_int_eq(zr_codec_default_level(ZR_CODEC_ZSTD), 3);

	/* lz4: 0 down to minus the largest acceleration */
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4, -8, NULL, NULL), 0);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4, -65537, NULL, NULL), 0);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4, 1, &lo, &hi), -EINVAL);
	ck_assert_int_eq(lo, -65537);
	ck_assert_int_eq(hi, 0);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4, -65538, NULL, NULL),
			 -EINVAL);
	/* lz4hc: 1..12 */
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4HC, 1, NULL, NULL), 0);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4HC, 12, NULL, NULL), 0);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4HC, 0, &lo, &hi), -EINVAL);
	ck_assert_int_eq(lo, 1);
	ck_assert_int_eq(hi, 12);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4HC, 13, NULL, NULL),
			 -EINVAL);
	/* zstd: the library's range, which holds -7..19 */
	for (int l = -7; l <= 19; l++)
		ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_ZSTD, l, NULL, NULL), 0);
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_ZSTD, 23, &lo, &hi), -EINVAL);
	ck_assert_int_le(lo, -7);
	ck_assert_int_ge(hi, 19);
	/* none: 0 only */
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_NONE, 1, &lo, &hi), -EINVAL);
	ck_assert_int_eq(lo, 0);
	ck_assert_int_eq(hi, 0);
	/* a bad codec has no valid level */
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_COUNT, 0, &lo, &hi), -EINVAL);
	ck_assert_int_lt(hi, lo);
	/* a higher lz4 acceleration is allowed to lose ratio, never to fail */
	ck_assert_int_eq(zr_codec_level_valid(ZR_CODEC_LZ4, 0, NULL, NULL), 0);
}
END_TEST

/* --- per-thread contexts -------------------------------------------------- */

#define NTHREADS 4

static pthread_barrier_t barrier;

struct thread_arg {
	int index;			/* thread number */
	struct zr_codec_ctx *ctx;	/* its context, as seen while alive */
	int errors;			/* failed round trips and ctx changes */
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	size_t len = 16384, cap = zr_codec_bound(ZR_CODEC_ZSTD, len);
	unsigned char *src = malloc(len), *comp = malloc(cap), *out = malloc(len);

	a->ctx = zr_codec_ctx_thread();
	if (!src || !comp || !out || !a->ctx) {
		a->errors++;
		goto out;
	}
	for (int i = 0; i < 40; i++) {
		const struct codec_level *s = &samples[i % ZR_ARRAY_SIZE(samples)];
		struct zr_codec_ctx *ctx = zr_codec_ctx_thread();
		ssize_t c;

		if (s->id == ZR_CODEC_LZ4HC && s->level > 9)
			continue;	/* keep the test quick */
		if (ctx != a->ctx)
			a->errors++;
		zr_datagen_fill(ZR_DATA_MIXED, (uint64_t)a->index * 100 + i,
				src, len);
		c = zr_codec_compress(ctx, s->id, s->level, src, len, comp, cap);
		if (c <= 0 ||
		    zr_codec_decompress(ctx, s->id, comp, (size_t)c, out, len) !=
		    (ssize_t)len || memcmp(src, out, len) != 0)
			a->errors++;
	}
out:
	/* Stay alive until every thread has its context, so that no two
	 * threads can be handed the same (freed and reused) memory. */
	pthread_barrier_wait(&barrier);
	free(src);
	free(comp);
	free(out);
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t t[NTHREADS];
	struct thread_arg args[NTHREADS];
	struct zr_codec_ctx *mine = zr_codec_ctx_thread();

	ck_assert_ptr_nonnull(mine);
	ck_assert_ptr_eq(zr_codec_ctx_thread(), mine);
	ck_assert_int_eq(pthread_barrier_init(&barrier, NULL, NTHREADS), 0);
	for (int i = 0; i < NTHREADS; i++) {
		args[i] = (struct thread_arg){ .index = i };
		ck_assert_int_eq(pthread_create(&t[i], NULL, thread_main,
						&args[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		ck_assert_int_eq(pthread_join(t[i], NULL), 0);
	pthread_barrier_destroy(&barrier);
	for (int i = 0; i < NTHREADS; i++) {
		ck_assert_int_eq(args[i].errors, 0);
		ck_assert_ptr_nonnull(args[i].ctx);
		ck_assert_ptr_ne(args[i].ctx, mine);
		for (int j = 0; j < i; j++)
			ck_assert_ptr_ne(args[i].ctx, args[j].ctx);
	}
	/* The main thread frees its own; the next call makes a new one. */
	zr_codec_ctx_thread_free();
	zr_codec_ctx_thread_free();
	mine = zr_codec_ctx_thread();
	ck_assert_ptr_nonnull(mine);
	zr_codec_ctx_thread_free();
}
END_TEST

/* --- datagen -------------------------------------------------------------- */

START_TEST(test_datagen_deterministic)
{
	enum { LEN = 8192 };
	unsigned char *a = xmalloc(LEN), *b = xmalloc(LEN);

	for (int k = 0; k < ZR_DATA_COUNT; k++) {
		zr_datagen_fill(k, 123, a, LEN);
		zr_datagen_fill(k, 123, b, LEN);
		ck_assert_mem_eq(a, b, LEN);
		/* a shorter fill is a prefix of a longer one */
		memset(b, 0x5a, LEN);
		zr_datagen_fill(k, 123, b, 1000);
		ck_assert_mem_eq(a, b, 1000);
		ck_assert_uint_eq(b[1000], 0x5a);
	}
	for (int k = ZR_DATA_SAME; k <= ZR_DATA_RANDOM; k++) {
		zr_datagen_fill(k, 1, a, LEN);
		zr_datagen_fill(k, 2, b, LEN);
		ck_assert_msg(memcmp(a, b, LEN) != 0, "%s: seeds 1 and 2 agree",
			      zr_datagen_name(k));
	}
	/* zero, same */
	zr_datagen_fill(ZR_DATA_ZERO, 9, a, LEN);
	for (size_t i = 0; i < LEN; i++)
		ck_assert_uint_eq(a[i], 0);
	zr_datagen_fill(ZR_DATA_SAME, 9, a, LEN);
	for (size_t i = 0; i < LEN; i += 8) {
		uint64_t v;

		memcpy(&v, a + i, 8);
		ck_assert_uint_eq(v, zr_datagen_same_pattern(9));
	}
	ck_assert_uint_ne(zr_datagen_same_pattern(9), 0);
	/* mixed follows zr_datagen_mixed_kind() */
	for (uint64_t seed = 0; seed < 20; seed++) {
		zr_datagen_fill(ZR_DATA_MIXED, seed, a, LEN);
		zr_datagen_fill(zr_datagen_mixed_kind(seed), seed, b, LEN);
		ck_assert_mem_eq(a, b, LEN);
	}
	/* text is printable */
	zr_datagen_fill(ZR_DATA_TEXT, 4, a, LEN);
	for (size_t i = 0; i < LEN; i++)
		ck_assert(a[i] == '\n' || a[i] == '\t' ||
			  (a[i] >= 0x20 && a[i] < 0x7f));
	free(a);
	free(b);
}
END_TEST

START_TEST(test_datagen_mix)
{
	enum { N = 20000 };
	int kinds[ZR_DATA_COUNT] = { 0 };
	int tiny = 0, mid = 0, high = 0, raw = 0;
	uint64_t st = 77;

	for (uint64_t seed = 0; seed < N; seed++) {
		int k = zr_datagen_mixed_kind(seed);

		ck_assert_int_ge(k, 0);
		ck_assert_int_lt(k, ZR_DATA_MIXED);
		kinds[k]++;
	}
	/* 10/5/40/30/15 %, within 1.5 points */
	ck_assert_int_le(abs(kinds[ZR_DATA_ZERO] - N / 10), 300);
	ck_assert_int_le(abs(kinds[ZR_DATA_SAME] - N / 20), 300);
	ck_assert_int_le(abs(kinds[ZR_DATA_TEXT] - N * 4 / 10), 300);
	ck_assert_int_le(abs(kinds[ZR_DATA_BINARY] - N * 3 / 10), 300);
	ck_assert_int_le(abs(kinds[ZR_DATA_RANDOM] - N * 15 / 100), 300);

	for (int i = 0; i < N; i++) {
		size_t n = zr_datagen_comp_size(&st, 4096);

		ck_assert_uint_ge(n, 1);
		ck_assert_uint_le(n, 4096);
		if (n < 200)
			tiny++;
		else if (n == 4096)
			raw++;
		else if (n <= 4096 * 60 / 100)
			mid++;
		else
			high++;
		ck_assert_msg(n < 200 || n >= 1024, "size %zu in no bucket", n);
	}
	ck_assert_int_le(abs(tiny - N / 10), 300);
	ck_assert_int_le(abs(mid - N * 6 / 10), 300);
	ck_assert_int_le(abs(high - N * 2 / 10), 300);
	ck_assert_int_le(abs(raw - N / 10), 300);
	ck_assert_uint_eq(zr_datagen_comp_size(&st, 0), 0);
	ck_assert_uint_le(zr_datagen_comp_size(&st, 1), 1);
	for (int i = 0; i < 1000; i++)
		ck_assert_uint_lt(zr_datagen_below(&st, 7), 7);
	ck_assert_uint_eq(zr_datagen_below(&st, 0), 0);
}
END_TEST

/* Ratio (original/compressed) of 64 blocks of @kind at @len bytes; 0 on
 * any error. No ck_assert here: print_ratios() runs outside the tests. */
static double measure_ratio(struct zr_codec_ctx *ctx, enum zr_codec_id id,
			    int level, int kind, size_t len)
{
	size_t cap = zr_codec_bound(id, len), in = 0, out = 0;
	unsigned char *src = malloc(len), *dst = malloc(cap);

	for (uint64_t seed = 0; src && dst && ctx && seed < 64; seed++) {
		ssize_t c;

		zr_datagen_fill(kind, seed, src, len);
		c = zr_codec_compress(ctx, id, level, src, len, dst, cap);
		if (c <= 0) {
			out = 0;
			break;
		}
		in += len;
		out += (size_t)c;
	}
	free(src);
	free(dst);
	return out ? (double)in / (double)out : 0;
}

/* The text and binary generators compress about as documented. */
START_TEST(test_datagen_ratios)
{
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();
	double text, bin, rnd;

	ck_assert_ptr_nonnull(ctx);
	text = measure_ratio(ctx, ZR_CODEC_LZ4, 0, ZR_DATA_TEXT, 65536);
	bin = measure_ratio(ctx, ZR_CODEC_LZ4, 0, ZR_DATA_BINARY, 65536);
	rnd = measure_ratio(ctx, ZR_CODEC_LZ4, 0, ZR_DATA_RANDOM, 65536);

	ck_assert_msg(text >= 1.8 && text <= 3.5, "text lz4 ratio %.2f", text);
	ck_assert_msg(bin >= 1.4 && bin <= 2.8, "binary lz4 ratio %.2f", bin);
	ck_assert_msg(rnd > 0.9 && rnd < 1.0, "random lz4 ratio %.3f", rnd);
	zr_codec_ctx_free(ctx);
}
END_TEST

static void print_ratios(void)
{
	struct zr_codec_ctx *ctx = zr_codec_ctx_new();

	printf("%-6s %4s %-7s", "codec", "lvl", "kind");
	for (size_t b = 0; b < ZR_ARRAY_SIZE(block_sizes); b++)
		printf(" %7zuK", block_sizes[b] / 1024);
	printf("\n");
	for (size_t s = 0; s < ZR_ARRAY_SIZE(samples); s++) {
		if (samples[s].id == ZR_CODEC_NONE)
			continue;
		for (int k = 0; k < ZR_DATA_COUNT; k++) {
			printf("%-6s %4d %-7s", zr_codec_name(samples[s].id),
			       samples[s].level, zr_datagen_name(k));
			for (size_t b = 0; b < ZR_ARRAY_SIZE(block_sizes); b++)
				printf(" %8.3f", measure_ratio(ctx, samples[s].id,
							      samples[s].level, k,
							      block_sizes[b]));
			printf("\n");
		}
	}
	zr_codec_ctx_free(ctx);
}

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *tc;
	int n = (int)ZR_ARRAY_SIZE(samples);

	tc = tcase_create("roundtrip");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_roundtrip, 0, n);
	tcase_add_test(tc, test_zstd_level_switch);
	tcase_add_test(tc, test_bad_args);
	suite_add_tcase(s, tc);

	tc = tcase_create("giveup");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, test_giveup, 0, n);
	tcase_add_test(tc, test_giveup_time);
	suite_add_tcase(s, tc);

	tc = tcase_create("corrupt");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_corrupt, 0, n);
	suite_add_tcase(s, tc);

	tc = tcase_create("api");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_names);
	tcase_add_test(tc, test_levels);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);

	tc = tcase_create("datagen");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_datagen_deterministic);
	tcase_add_test(tc, test_datagen_mix);
	tcase_add_test(tc, test_datagen_ratios);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(codec_suite());
	int failed;

	if (getenv("ZR_CODEC_RATIOS"))
		print_ratios();
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

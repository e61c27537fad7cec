// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * check_store.c - unit tests of the block store (src/store.c): round trips,
 * same/raw storage, blocks kept without their zero tail, sparse maps, drops,
 * writeback runs and errors, budget, exact statistics, allocation failure
 * and corrupt data.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd_errors.h>

#include "datagen.h"
#include "zr_codec.h"
#include "zr_policy.h"
#include "zr_store.h"
#include "zr_util.h"
#include "zr_zpool.h"

#define MAX_CALLS 64

/* What the writeback callback saw, and what it should answer. */
struct rec {
	unsigned ncalls;
	struct { void *owner; uint64_t index; unsigned n; } call[MAX_CALLS];
	int fail;			/* returned by every call when non-zero ... */
	void *fail_owner;		/* ... or by the calls for this owner only */
	void *fail_owner2;		/* (or this one) */
	uint32_t bs;
	uint64_t bytes;
	/* Optional: rewrite this block of this file during the call. */
	struct zr_file *rewrite_file;
	uint64_t rewrite_index;
	const void *rewrite_data;
	/* Optional: check the data against datagen(kind, seed = index). */
	int verify_kind;
	/* Optional, instead: check every block against what this fills in. */
	void (*expect_fill)(uint64_t index, unsigned char *buf, uint32_t bs);
	unsigned bad;
	/* Optional: the owner whose file is not written back by age. */
	void *no_expire;
	/* Optional: the owners whose files are on filesystem 1 (the space
	 * callback), the others being on 0. */
	void *space1[2];
	/* Optional: write this file back (once) from inside the next call. */
	struct zr_file *wb_other;
	/* Optional: zr_file_redirty() this file (once) from inside the next
	 * call, as a failed syncfs does; what it returned. */
	struct zr_file *redirty_file;
	uint64_t redirtied;
	/* Optional (atomics): while hold is set, a call sets entered and
	 * waits; owner_alive is what *owner held when it returned. */
	int hold, entered, owner_alive;
};

static int rec_writeback(void *ctx, void *owner, uint64_t index,
			 unsigned nblocks, const void *buf)
{
	struct rec *r = ctx;

	if (r->ncalls < MAX_CALLS) {
		r->call[r->ncalls].owner = owner;
		r->call[r->ncalls].index = index;
		r->call[r->ncalls].n = nblocks;
	}
	r->ncalls++;
	if (__atomic_load_n(&r->hold, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&r->entered, 1, __ATOMIC_RELEASE);
		while (__atomic_load_n(&r->hold, __ATOMIC_ACQUIRE))
			usleep(1000);
		/* the owner must still be alive (a detach waits for us) */
		__atomic_store_n(&r->owner_alive, *(volatile int *)owner, __ATOMIC_RELEASE);
	}
	if (r->wb_other) {
		struct zr_file *o = r->wb_other;

		r->wb_other = NULL;
		ck_assert_int_eq(zr_file_writeback(o), 0);
	}
	if (r->redirty_file) {
		r->redirtied = zr_file_redirty(r->redirty_file);
		r->redirty_file = NULL;
	}
	if (r->rewrite_file) {
		ck_assert_int_eq(zr_file_write(r->rewrite_file, r->rewrite_index,
					       r->rewrite_data, ZR_WRITE_DIRTY), 0);
		r->rewrite_file = NULL;
	}
	if (r->verify_kind >= 0 || r->expect_fill) {
		unsigned char *exp = malloc(r->bs);

		ck_assert_ptr_nonnull(exp);
		for (unsigned i = 0; i < nblocks; i++) {
			if (r->expect_fill)
				r->expect_fill(index + i, exp, r->bs);
			else
				zr_datagen_fill(r->verify_kind, index + i, exp, r->bs);
			if (memcmp(exp, (const char *)buf + (size_t)i * r->bs, r->bs))
				r->bad++;
		}
		free(exp);
	}
	if (r->fail && (!r->fail_owner || owner == r->fail_owner ||
			(r->fail_owner2 && owner == r->fail_owner2)))
		return r->fail;
	r->bytes += (uint64_t)nblocks * r->bs;
	return 0;
}

static bool rec_may_expire(void *ctx, void *owner)
{
	struct rec *r = ctx;

	return !r->no_expire || owner != r->no_expire;
}

static uint64_t rec_space(void *ctx, void *owner)
{
	struct rec *r = ctx;

	return owner && (owner == r->space1[0] || owner == r->space1[1]);
}

static const struct zr_store_ops rec_ops = {
	.writeback = rec_writeback,
	.may_expire = rec_may_expire,
	.space = rec_space,
};

static struct zr_store *mkstore(uint32_t bs, uint64_t budget, struct rec *r)
{
	struct zr_store_config cfg;
	struct zr_store *st;

	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.budget = budget;
	if (r) {
		memset(r, 0, sizeof(*r));
		r->bs = bs;
		r->verify_kind = -1;
	}
	ck_assert_int_eq(zr_store_create(&cfg, r ? &rec_ops : NULL, r, &st), 0);
	return st;
}

/* Metadata of the store alone (nodes, file records), without the pool's. */
static uint64_t store_meta(struct zr_store *st)
{
	struct zr_zpool_stats ps;
	struct zr_stats s;

	zr_store_get_stats(st, &s);
	zr_zpool_get_stats(zr_store_test_pool(st), &ps);
	return s.meta_bytes - ps.meta_bytes;
}

/* Objects left in the pool. */
static uint64_t pool_objs(struct zr_store *st)
{
	struct zr_zpool_stats ps;

	zr_zpool_get_stats(zr_store_test_pool(st), &ps);
	return ps.obj_count;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	ck_assert_ptr_nonnull(p);
	return p;
}

/* Blocks [0, @n) of @f read back as zr_datagen_fill(ZR_DATA_TEXT, index). */
static void check_text_blocks(struct zr_file *f, unsigned n, uint32_t bs)
{
	unsigned char *exp = xmalloc(bs), *out = xmalloc(bs);

	for (unsigned i = 0; i < n; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, exp, bs);
		ck_assert_int_eq(zr_file_read(f, i, out), 1);
		ck_assert_mem_eq(exp, out, bs);
	}
	free(exp);
	free(out);
}

START_TEST(test_config)
{
	struct zr_store_config cfg;
	struct zr_store *st;

	zr_store_config_default(&cfg);
	ck_assert_uint_eq(cfg.block_size, 65536);
	ck_assert_uint_eq(cfg.min_saving, 8192);
	ck_assert_int_eq(cfg.comp, ZR_CODEC_LZ4);
	ck_assert_int_eq(cfg.cold_comp, ZR_CODEC_ZSTD);
	ck_assert_int_eq(cfg.policy, ZR_POLICY_ADAPTIVE);
	ck_assert_uint_eq(cfg.high_wm, 90);
	ck_assert_uint_eq(cfg.low_wm, 80);
	cfg.block_size = 3000;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), -EINVAL);
	zr_store_config_default(&cfg);
	cfg.min_saving = cfg.block_size;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), -EINVAL);
	zr_store_config_default(&cfg);
	cfg.low_wm = 95;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), -EINVAL);
	zr_store_config_default(&cfg);
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
	ck_assert_uint_eq(zr_store_block_size(st), 65536);
	ck_assert_int_eq(zr_store_set_budget(st, 0), -EINVAL);
	ck_assert_int_eq(zr_store_set_budget(st, 1 << 20), 0);
	zr_store_destroy(st);
	zr_store_destroy(NULL);
}
END_TEST

static const uint32_t sizes[] = { 4096, 16384, 65536, 131072 };

/* Every kind at every block size comes back byte for byte, also rewritten. */
START_TEST(test_roundtrip)
{
	uint32_t bs = sizes[_i];
	struct zr_store *st = mkstore(bs, 1ull << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_file *f;
	uint64_t idx;
	int k;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (k = 0; k < ZR_DATA_COUNT; k++) {
		for (idx = 0; idx < 4; idx++) {
			zr_datagen_fill(k, k * 100 + idx, in, bs);
			ck_assert_int_eq(zr_file_write(f, k * 10 + idx, in, ZR_WRITE_DIRTY), 0);
		}
	}
	for (k = 0; k < ZR_DATA_COUNT; k++) {
		for (idx = 0; idx < 4; idx++) {
			zr_datagen_fill(k, k * 100 + idx, in, bs);
			memset(out, 0x5a, bs);
			ck_assert_int_eq(zr_file_read(f, k * 10 + idx, out), 1);
			ck_assert_mem_eq(in, out, bs);
		}
	}
	/* Rewrite with another kind. */
	zr_datagen_fill(ZR_DATA_RANDOM, 77, in, bs);
	ck_assert_int_eq(zr_file_write(f, 20, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_read(f, 20, out), 1);
	ck_assert_mem_eq(in, out, bs);
	/* A clean fill does not replace present data. */
	zr_datagen_fill(ZR_DATA_TEXT, 78, out, bs);
	ck_assert_int_eq(zr_file_write(f, 20, out, ZR_WRITE_CLEAN), 0);
	ck_assert_int_eq(zr_file_read(f, 20, out), 1);
	ck_assert_mem_eq(in, out, bs);
	/* A miss leaves the buffer alone. */
	memset(out, 0x33, bs);
	ck_assert_int_eq(zr_file_read(f, 1000, out), 0);
	ck_assert_uint_eq(out[0], 0x33);
	ck_assert_uint_eq(zr_file_nblocks(f), ZR_DATA_COUNT * 4);
	zr_file_put(f);
	ck_assert_uint_eq(store_meta(st), 0);
	ck_assert_uint_eq(pool_objs(st), 0);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Zero and same-filled blocks cost no pool memory. */
START_TEST(test_same)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_zpool_stats ps;
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_ZERO, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 0, in, ZR_WRITE_DIRTY), 0);
	zr_datagen_fill(ZR_DATA_SAME, 2, in, bs);
	ck_assert_int_eq(zr_file_write(f, 1, in, ZR_WRITE_CLEAN), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 0) & ZR_SLOT_SAME, ZR_SLOT_SAME);
	ck_assert_int_eq(zr_file_test_flags(f, 1) & ZR_SLOT_SAME, ZR_SLOT_SAME);
	ck_assert_int_eq(zr_file_test_len(f, 1), 0);
	zr_zpool_get_stats(zr_store_test_pool(st), &ps);
	ck_assert_uint_eq(ps.obj_count, 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_zero, 2);
	ck_assert_uint_eq(s.compr_data_size, 0);
	ck_assert_uint_eq(s.orig_data_size, 2 * bs);
	ck_assert_uint_eq(s.blocks_dirty, 1);
	ck_assert_int_eq(zr_file_read(f, 1, out), 1);
	ck_assert_mem_eq(in, out, bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Kept lengths test_trim() stores, at block index 2 * i. */
static const uint32_t trim_keeps[] = { 1, 63, 64, 65, 5000, 65536 - 512, 65536 - 511, 65536 - 1 };

/* @bs bytes of text in [0, @keep), zeros after, the last kept byte not 0. */
static void fill_tail(unsigned char *buf, uint32_t bs, uint32_t keep, uint64_t seed)
{
	zr_datagen_fill(ZR_DATA_TEXT, seed, buf, bs);
	memset(buf + keep, 0, bs - keep);
	buf[keep - 1] = 'x';
}

/* rec.expect_fill of test_trim(): block 2 * i holds trim_keeps[i]. */
static void trim_expect(uint64_t index, unsigned char *buf, uint32_t bs)
{
	ck_assert_uint_eq(index % 2, 0);
	ck_assert_uint_lt(index / 2, ZR_ARRAY_SIZE(trim_keeps));
	fill_tail(buf, bs, trim_keeps[index / 2], index);
}

/*
 * A block that ends in 512 or more zero bytes is compressed without them
 * (ZR_SLOT_TRIM), smaller than compressed whole, and reads back, writes
 * back and recompresses to the whole block; a corrupt kept length is -EIO.
 */
START_TEST(test_trim)
{
	const uint32_t bs = 65536;
	const unsigned nk = (unsigned)ZR_ARRAY_SIZE(trim_keeps);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs), *c = xmalloc(2 * bs);
	struct zr_codec_ctx *ctx = zr_codec_ctx_thread();
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	struct zr_stats s;
	struct zr_file *f;
	unsigned i, ncold = 0;
	ssize_t whole;

	ck_assert_ptr_nonnull(ctx);
	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < nk; i++) {
		bool trim = bs - trim_keeps[i] >= 512;

		trim_expect(2 * i, in, bs);
		ck_assert_int_eq(zr_file_write(f, 2 * i, in, ZR_WRITE_DIRTY), 0);
		ck_assert_int_eq(!!(zr_file_test_flags(f, 2 * i) & ZR_SLOT_TRIM), trim);
		ck_assert_int_eq(zr_file_read(f, 2 * i, out), 1);
		ck_assert_mem_eq(in, out, bs);
		if (trim_keeps[i] == 5000) {
			whole = zr_codec_compress(ctx, ZR_CODEC_LZ4, 0, in, bs, c, 2 * bs);
			ck_assert_int_gt(whole, 0);
			ck_assert_int_lt(zr_file_test_len(f, 2 * i), whole);
		}
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_hot, nk);
	ck_assert_uint_eq(s.orig_data_size, (uint64_t)nk * bs);

	/* writeback hands out whole blocks, zero tail included */
	r.expect_fill = trim_expect;
	ck_assert_int_eq(zr_file_writeback(f), 0);
	ck_assert_uint_eq(r.ncalls, nk);
	ck_assert_uint_eq(r.bad, 0);
	ck_assert(!zr_file_dirty(f));

	/* the cold codec keeps them trimmed, and they read back whole */
	ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	ck_assert_uint_gt(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	for (i = 0; i < nk; i++) {
		int fl = zr_file_test_flags(f, 2 * i);

		trim_expect(2 * i, in, bs);
		ck_assert_int_eq(zr_file_read(f, 2 * i, out), 1);
		ck_assert_mem_eq(in, out, bs);
		if (fl & ZR_SLOT_COLD) {
			ncold++;
			ck_assert_int_eq(!!(fl & ZR_SLOT_TRIM), bs - trim_keeps[i] >= 512);
		}
	}
	ck_assert_uint_gt(ncold, 0);

	/* every byte of a kept length, flipped, is caught */
	fill_tail(in, bs, 5000, 99);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(zr_file_write(f, 101 + 2 * i, in, ZR_WRITE_CLEAN), 0);
		ck_assert(zr_file_test_flags(f, 101 + 2 * i) & ZR_SLOT_TRIM);
		ck_assert_int_eq(zr_file_test_corrupt(f, 101 + 2 * i, i, 0xff), 0);
		ck_assert_int_eq(zr_file_read(f, 101 + 2 * i, out), -EIO);
	}
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
	free(c);
}
END_TEST

/* Stop zr_store_settle() once *@arg blocks were looked at (counts down). */
static bool settle_stop_after(void *arg)
{
	unsigned *left = arg;

	if (*left == 0)
		return true;
	(*left)--;
	return false;
}

/* A zr_store_settle() stop that counts the times it is asked. */
static bool settle_count(void *arg)
{
	(*(unsigned *)arg)++;
	return false;
}

/* Put @kind's block @i in @f through zr_file_prepare_later(), clean. */
static void put_later(struct zr_file *f, uint64_t i, int kind, uint32_t bs)
{
	unsigned char *in = xmalloc(bs);
	struct zr_prepared p;

	zr_datagen_fill(kind, i, in, bs);
	ck_assert_int_eq(zr_file_prepare_later(f, in, &p), 0);
	ck_assert_int_eq(zr_file_install(f, i, &p, ZR_WRITE_CLEAN), 0);
	free(in);
}

/*
 * A block stored to be compressed later is kept as is, counted in
 * blocks_raw and blocks_pending, and reads back; zr_store_settle()
 * compresses it with the hot codec, or leaves it raw for good when it does
 * not compress, and stops when asked.
 */
START_TEST(test_prepare_later_settle)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *exp = xmalloc(bs), *out = xmalloc(bs);
	unsigned i, left;
	struct zr_stats s0, s1;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 6; i++)
		put_later(f, i, ZR_DATA_TEXT, bs);
	put_later(f, 6, ZR_DATA_RANDOM, bs);
	put_later(f, 7, ZR_DATA_ZERO, bs);
	for (i = 0; i < 7; i++)
		ck_assert_int_eq(zr_file_test_flags(f, i) & (ZR_SLOT_RAW | ZR_SLOT_PENDING),
				 ZR_SLOT_RAW | ZR_SLOT_PENDING);
	ck_assert(!(zr_file_test_flags(f, 7) & ZR_SLOT_PENDING));
	ck_assert(zr_file_test_flags(f, 7) & ZR_SLOT_SAME);
	zr_store_get_stats(st, &s0);
	ck_assert_uint_eq(s0.blocks_pending, 7);
	ck_assert_uint_eq(s0.blocks_raw, 7);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 7ull * bs);
	ck_assert_uint_eq(s0.compr_data_size, 7ull * bs);
	check_text_blocks(f, 6, bs);

	/* asked to stop after two blocks: five are left */
	left = 2;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 2);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 5ull * bs);
	left = 100;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 5);
	zr_store_get_stats(st, &s1);
	ck_assert_uint_eq(s1.blocks_pending, 0);
	ck_assert_uint_eq(s1.blocks_raw, 1);		/* the random block */
	ck_assert_uint_eq(s1.blocks_hot, 6);
	ck_assert_uint_eq(s1.blocks_zero, 1);
	for (i = 0; i < 6; i++) {
		ck_assert(!(zr_file_test_flags(f, i) & (ZR_SLOT_RAW | ZR_SLOT_PENDING)));
		ck_assert_int_lt(zr_file_test_len(f, i), (int)(bs - bs / 8));
	}
	ck_assert_int_eq(zr_file_test_flags(f, 6) & (ZR_SLOT_RAW | ZR_SLOT_PENDING),
			 ZR_SLOT_RAW);
	/* the random block as is, the text ones at least halved */
	ck_assert_uint_lt(s1.compr_data_size, bs + 6ull * bs / 2);
	check_text_blocks(f, 6, bs);
	zr_datagen_fill(ZR_DATA_RANDOM, 6, exp, bs);
	ck_assert_int_eq(zr_file_read(f, 6, out), 1);
	ck_assert_mem_eq(exp, out, bs);
	/* nothing pending: nothing looked at, and the stop is never asked */
	left = 0;
	ck_assert_uint_eq(zr_store_settle(st, settle_count, &left), 0);
	ck_assert_uint_eq(left, 0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(exp);
	free(out);
}
END_TEST

/*
 * A pending block is stored without its zero tail, and reads back with it;
 * settling compresses it, unless it compresses to no less than its stored
 * length (a short tail of random bytes), when it stays raw, as short.
 */
START_TEST(test_later_trimmed)
{
	uint32_t bs = 16384, lens[3] = { 3000, 100, 16384 };
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in[3], *out = xmalloc(bs);
	unsigned i, left = 100;
	struct zr_prepared p;
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 3; i++) {
		in[i] = xmalloc(bs);
		zr_datagen_fill(i == 1 ? ZR_DATA_RANDOM : ZR_DATA_TEXT, i, in[i], bs);
		memset(in[i] + lens[i], 0, bs - lens[i]);
		in[i][lens[i] - 1] = 'x';
		ck_assert_int_eq(zr_file_prepare_later(f, in[i], &p), 0);
		ck_assert_int_eq(zr_file_install(f, i, &p, ZR_WRITE_DIRTY), 0);
		ck_assert_int_eq(zr_file_test_len(f, i), (int)lens[i]);
		ck_assert_int_eq(zr_file_test_flags(f, i) & (ZR_SLOT_RAW | ZR_SLOT_PENDING),
				 ZR_SLOT_RAW | ZR_SLOT_PENDING);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.compr_data_size, 3000 + 100 + 16384);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 3000 + 100 + 16384);
	for (i = 0; i < 3; i++) {
		memset(out, 0xa5, bs);
		ck_assert_int_eq(zr_file_read(f, i, out), 1);
		ck_assert_mem_eq(out, in[i], bs);
	}
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 3);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 0);
	/* the text compressed below its stored length, the random bytes
	 * stay as they were; all three still dirty */
	ck_assert_int_eq(zr_file_test_flags(f, 0) & (ZR_SLOT_RAW | ZR_SLOT_PENDING), 0);
	ck_assert_int_lt(zr_file_test_len(f, 0), 3000);
	ck_assert_int_eq(zr_file_test_flags(f, 1) & (ZR_SLOT_RAW | ZR_SLOT_PENDING),
			 ZR_SLOT_RAW);
	ck_assert_int_eq(zr_file_test_len(f, 1), 100);
	ck_assert_int_lt(zr_file_test_len(f, 2), (int)(bs / 2));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 3);
	for (i = 0; i < 3; i++) {
		memset(out, 0xa5, bs);
		ck_assert_int_eq(zr_file_read(f, i, out), 1);
		ck_assert_mem_eq(out, in[i], bs);
		free(in[i]);
	}
	zr_file_put(f);
	zr_store_destroy(st);
	free(out);
}
END_TEST

/*
 * The file a settle pass stopped at goes (its last reference put), then the
 * one after it: the cursor moves on each time, and the next pass starts
 * from the head (helper-5's test; run under ASan by make check-sanitize).
 */
START_TEST(test_settle_cursor_put)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	struct zr_file *f[3];
	unsigned i, left;

	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(zr_file_create(st, NULL, &f[i]), 0);
		put_later(f[i], 0, ZR_DATA_TEXT, bs);
		put_later(f[i], 1, ZR_DATA_TEXT, bs);
	}
	left = 1;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 1);
	zr_file_put(f[0]);	/* the file the pass stopped in */
	left = 2;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 2);	/* f[1]'s */
	zr_file_put(f[2]);	/* the cursor's file (stopped before its block 0) */
	zr_file_put(f[1]);
	ck_assert_int_eq(zr_file_create(st, NULL, &f[0]), 0);
	put_later(f[0], 0, ZR_DATA_TEXT, bs);
	left = 100;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 1);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 0);
	check_text_blocks(f[0], 1, bs);
	zr_file_put(f[0]);
	zr_store_destroy(st);
}
END_TEST

/*
 * A settle pass goes on where the last one stopped, and wraps around to
 * what it passed by: a block made pending behind the stop is settled
 * after those in front of it, then by the same pass.
 */
START_TEST(test_settle_resumes)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	struct zr_file *f[2];
	unsigned i, left;

	for (i = 0; i < 2; i++)
		ck_assert_int_eq(zr_file_create(st, NULL, &f[i]), 0);
	for (i = 0; i < 4; i++) {
		put_later(f[0], i, ZR_DATA_TEXT, bs);
		put_later(f[1], i, ZR_DATA_TEXT, bs);
	}
	left = 2;	/* f[0]'s blocks 0 and 1 */
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 2);
	ck_assert(!(zr_file_test_flags(f[0], 1) & ZR_SLOT_PENDING));
	ck_assert(zr_file_test_flags(f[0], 2) & ZR_SLOT_PENDING);
	/* block 0 again, behind the stop */
	zr_file_drop(f[0], 0, 1);
	put_later(f[0], 0, ZR_DATA_TEXT, bs);
	left = 1;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 1);
	ck_assert(!(zr_file_test_flags(f[0], 2) & ZR_SLOT_PENDING));
	ck_assert(zr_file_test_flags(f[0], 0) & ZR_SLOT_PENDING);
	/* the rest: f[0]'s block 3, f[1], then block 0 on the wrap */
	left = 100;
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 6);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 0);
	for (i = 0; i < 2; i++) {
		check_text_blocks(f[i], 4, bs);
		zr_file_put(f[i]);
	}
	zr_store_destroy(st);
}
END_TEST

/*
 * Settling holds both copies of a block for a moment: on a tier too full
 * for that it leaves the blocks pending (and the tier within its budget),
 * and settles them once the budget has room.
 */
START_TEST(test_settle_full_tier)
{
	uint32_t bs = 16384;
	uint64_t budget = 64 * bs;
	struct zr_store *st = mkstore(bs, budget, NULL);
	struct zr_stats s0, s;
	struct zr_file *f;
	unsigned i = 0, left = 1000;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	while (zr_store_mem_used(st) + bs + 4096 <= budget)
		put_later(f, i++, ZR_DATA_TEXT, bs);
	ck_assert_uint_gt(i, 8);
	zr_store_get_stats(st, &s0);
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_pending, i);
	ck_assert_uint_eq(s.mem_used_max, s0.mem_used_max);
	ck_assert_int_eq(zr_store_set_budget(st, 4 * budget), 0);
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), i);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 0);
	check_text_blocks(f, i, bs);
	zr_file_put(f);
	zr_store_destroy(st);
}
END_TEST

/*
 * Compressing a file's only dirty block, pending, by settling or by the
 * idle pass, does not restart the file's dirty_expire clock: it is
 * written back by age as if nothing had changed it.
 */
START_TEST(test_settle_keeps_expiry)
{
	uint32_t bs = 16384;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_prepared p;
	struct zr_file *f[2];
	unsigned left = 100;
	int i;

	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(zr_file_create(st, &f[i], &f[i]), 0);
		ck_assert_int_eq(zr_file_prepare_later(f[i], in, &p), 0);
		ck_assert_int_eq(zr_file_install(f[i], 0, &p, ZR_WRITE_DIRTY), 0);
	}
	usleep(300 * 1000);
	/* settled: both written back by age; then the same by the idle pass */
	ck_assert_uint_eq(zr_store_settle(st, settle_stop_after, &left), 2);
	ck_assert_int_eq(zr_store_writeback_expired(st, 200), 0);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert(!zr_file_dirty(f[0]) && !zr_file_dirty(f[1]));
	for (i = 0; i < 2; i++) {
		ck_assert_int_eq(zr_file_prepare_later(f[i], in, &p), 0);
		ck_assert_int_eq(zr_file_install(f[i], 0, &p, ZR_WRITE_DIRTY), 0);
	}
	usleep(300 * 1000);
	ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);	/* marks */
	ck_assert_uint_gt(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 0);
	ck_assert_int_eq(zr_store_writeback_expired(st, 200), 0);
	ck_assert_uint_eq(r.ncalls, 4);
	for (i = 0; i < 2; i++)
		zr_file_put(f[i]);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* Install one dirty block of text at index 0 of @f. */
static void dirty_one(struct zr_file *f, const unsigned char *in)
{
	struct zr_prepared p;

	ck_assert_int_eq(zr_file_prepare(f, in, &p), 0);
	ck_assert_int_eq(zr_file_install(f, 0, &p, ZR_WRITE_DIRTY), 0);
}

/*
 * The expiry walk's cursor moves on when the file it stands at leaves the
 * list while a batch is written back (an fsync of that file): the walk
 * goes on to the end. A file whose dirty blocks a truncate dropped is left
 * listed, clean, and the next walk takes it off without writing it.
 */
START_TEST(test_expire_cursor)
{
	enum { N = 300 };
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_file **f = xmalloc(N * sizeof(*f));
	int i;

	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(zr_file_create(st, &f[i], &f[i]), 0);
		dirty_one(f[i], in);
	}
	r.wb_other = f[256];	/* where the cursor stands after 256 taken */
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(r.ncalls, N);
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 0);
	dirty_one(f[0], in);
	zr_file_drop(f[0], 0, UINT64_MAX);
	ck_assert(!zr_file_dirty(f[0]));
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 1);
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(r.ncalls, N);
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 0);
	ck_assert_uint_eq(zr_store_test_dirty_check(st), 0);
	for (i = 0; i < N; i++)
		zr_file_put(f[i]);
	zr_store_destroy(st);
	free(f);
	free(in);
}
END_TEST

/*
 * Writeback by age walks the dirty files oldest first and stops at the
 * first one not expired: a file cleaned and dirtied again goes behind those
 * dirtied meanwhile; a file whose writeback fails does not hide the expired
 * ones behind it (its only dirty block failed: its clock starts again); a
 * file recompressed keeps its place and its clock. Times in units of
 * 100 ms, expiry after 4: a late wake-up only makes the files older, and
 * those that must still be young have 1.4-2 units to spare.
 */
START_TEST(test_expire_order)
{
	const unsigned u = 100 * 1000, expire = 400;
	uint32_t bs = 16384;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_file *f[4];	/* a, b, c, bad */
	int i;

	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(zr_file_create(st, &f[i], &f[i]), 0);
	r.fail = -EIO;
	r.fail_owner = &f[3];
	dirty_one(f[3], in);	/* t = 0: bad, a, b */
	dirty_one(f[0], in);
	dirty_one(f[1], in);
	usleep(3 * u);
	ck_assert_int_eq(zr_file_writeback(f[0]), 0);
	ck_assert(!zr_file_dirty(f[0]));
	dirty_one(f[0], in);	/* t = 3: bad, b, a, c */
	dirty_one(f[2], in);
	r.ncalls = 0;
	usleep(2 * u);		/* t = 5: bad and b expired, a and c 2 old */
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), -EIO);
	ck_assert(zr_file_dirty(f[3]) && !zr_file_dirty(f[1]));
	ck_assert(zr_file_dirty(f[0]) && zr_file_dirty(f[2]));
	/* bad tried, then b: a and c are not looked at */
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert_ptr_eq(r.call[1].owner, &f[1]);
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 3);	/* (not b) */
	/* bad's clock restarted with its failure (a, c, bad); the blocks of
	 * a, c and bad recompressed (the idle pass) after b is dirtied again:
	 * they keep their clocks and their places (a, c, bad, b), else bad or
	 * b, 2.6 old at the next walk, would end it first */
	ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);	/* marks */
	dirty_one(f[1], in);
	usleep(u / 10);
	ck_assert_uint_ge(zr_store_recompress_idle(st, UINT64_MAX, 0), 3);
	usleep(5 * u / 2);	/* t >= 7.6: a and c 4.6 old */
	r.fail = 0;
	r.ncalls = 0;
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), 0);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert_ptr_eq(r.call[0].owner, &f[0]);
	ck_assert_ptr_eq(r.call[1].owner, &f[2]);
	ck_assert(zr_file_dirty(f[1]) && zr_file_dirty(f[3]));
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(r.ncalls, 4);
	for (i = 0; i < 4; i++)
		ck_assert(!zr_file_dirty(f[i]));
	/* the list is empty: nothing is written again; a file freed while
	 * dirty leaves it */
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 0);
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(r.ncalls, 4);
	dirty_one(f[3], in);
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 1);
	zr_file_put(f[3]);
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 0);
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(r.ncalls, 4);
	for (i = 0; i < 3; i++)
		zr_file_put(f[i]);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/*
 * A file rewritten more often than the expiry keeps the clock of its first
 * dirty block (as Linux keeps the time an inode was first dirtied): a log
 * appended to every 2 units, whose only block is rewritten each time, and
 * a file truncated and rewritten as often, are written back 4 units after
 * their first write, not never. A file written to while its writeback by
 * age runs is not written again at the next walk: its clock starts again
 * (Linux's redirty_tail()).
 */
START_TEST(test_expire_rewrite)
{
	const unsigned u = 100 * 1000, expire = 400;
	uint32_t bs = 16384;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs), *in2 = xmalloc(bs);
	struct zr_file *f[3];	/* rewritten, truncated and rewritten, busy */
	int i;

	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	zr_datagen_fill(ZR_DATA_TEXT, 1, in2, bs);
	for (i = 0; i < 3; i++)
		ck_assert_int_eq(zr_file_create(st, &f[i], &f[i]), 0);
	for (i = 0; i < 3; i++) {	/* t = 0, 2, 4 */
		in[i] ^= 1;
		dirty_one(f[0], in);
		zr_file_drop(f[1], 0, UINT64_MAX);
		dirty_one(f[1], in);
		if (i < 2)
			usleep(2 * u);
	}
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), 0);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert(!zr_file_dirty(f[0]) && !zr_file_dirty(f[1]));
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 0);

	dirty_one(f[2], in);
	usleep(expire * 1000);
	r.rewrite_file = f[2];
	r.rewrite_index = 0;
	r.rewrite_data = in2;
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), 0);
	ck_assert_uint_eq(r.ncalls, 3);
	ck_assert(zr_file_dirty(f[2]));		/* the rewrite */
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), 0);
	ck_assert_uint_eq(r.ncalls, 3);		/* a new clock */
	usleep(expire * 1000);
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), 0);
	ck_assert_uint_eq(r.ncalls, 4);
	ck_assert(!zr_file_dirty(f[2]));
	for (i = 0; i < 3; i++)
		zr_file_put(f[i]);
	zr_store_destroy(st);
	free(in2);
	free(in);
}
END_TEST

/*
 * More expired files than one batch of the walk takes, behind a file that
 * may not be written back by age (an orphan), with one whose writeback
 * fails with another dirty block left and one whose only dirty block
 * fails at the end of the first batch (both go to the tail with a new
 * clock): all the others are written, each once; those three stay dirty
 * and listed, and are not taken twice in one walk.
 */
START_TEST(test_expire_batches)
{
	enum { N = 700 };
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_prepared p;
	struct zr_file **f = xmalloc(N * sizeof(*f));
	int i;

	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	for (i = 0; i < N; i++) {
		ck_assert_int_eq(zr_file_create(st, &f[i], &f[i]), 0);
		dirty_one(f[i], in);
	}
	ck_assert_int_eq(zr_file_prepare(f[300], in, &p), 0);	/* a gap: two runs */
	ck_assert_int_eq(zr_file_install(f[300], 2, &p, ZR_WRITE_DIRTY), 0);
	r.no_expire = &f[0];
	r.fail = -EIO;
	r.fail_owner = &f[300];
	r.fail_owner2 = &f[256];	/* (in the second batch) */
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), -EIO);
	ck_assert_uint_eq(r.ncalls, N - 1 + 1);	/* f[300]: two runs */
	ck_assert(zr_file_dirty(f[0]) && zr_file_dirty(f[256]) && zr_file_dirty(f[300]));
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 3);
	for (i = 1; i < N; i++)
		if (i != 256 && i != 300)
			ck_assert(!zr_file_dirty(f[i]));
	r.fail = 0;
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(r.ncalls, N + 3);	/* f[256], f[300] (two runs) */
	ck_assert(zr_file_dirty(f[0]));
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 1);
	for (i = 0; i < N; i++)
		zr_file_put(f[i]);
	zr_store_destroy(st);
	free(f);
	free(in);
}
END_TEST

/*
 * A file the backing filesystem refuses, with more than one dirty block,
 * gets a new clock as one with a single block does: a walk soon after
 * leaves it alone, and one a period later tries it again (each walk
 * rewrote every run of such a file, and the daemon logged each; helper-53).
 */
START_TEST(test_expire_refused_waits)
{
	uint32_t bs = 4096;
	const unsigned expire = 200, u = 1000;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_prepared p;
	struct zr_file *f;

	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	ck_assert_int_eq(zr_file_create(st, &f, &f), 0);
	dirty_one(f, in);
	ck_assert_int_eq(zr_file_prepare(f, in, &p), 0);	/* a gap: two runs */
	ck_assert_int_eq(zr_file_install(f, 2, &p, ZR_WRITE_DIRTY), 0);
	r.fail = -ENOSPC;
	r.fail_owner = &f;
	usleep(3 * expire / 2 * u);
	r.ncalls = 0;
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), -ENOSPC);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), 0);
	ck_assert_uint_eq(r.ncalls, 2);		/* not tried again yet */
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 1);
	usleep(3 * expire / 2 * u);
	ck_assert_int_eq(zr_store_writeback_expired(st, expire), -ENOSPC);
	ck_assert_uint_eq(r.ncalls, 4);
	r.fail = 0;
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert(!zr_file_dirty(f));
	ck_assert_int_eq(zr_file_take_error(f), -ENOSPC);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/*
 * A pending block that is rewritten is an ordinary block; the idle pass
 * compresses pending blocks with the cold codec, also when the cold codec
 * is the hot one (no other block is recompressed then).
 */
START_TEST(test_pending_idle)
{
	uint32_t bs = 16384;
	struct zr_store_config cfg;
	unsigned char *in = xmalloc(bs);
	struct zr_store *st;
	struct zr_file *f;
	struct zr_stats s;
	unsigned i;

	for (int same = 0; same < 2; same++) {
		zr_store_config_default(&cfg);
		cfg.block_size = bs;
		cfg.min_saving = bs / 8;
		cfg.budget = 1 << 30;
		if (same) {
			cfg.cold_comp = cfg.comp;
			cfg.cold_level = cfg.comp_level;
		}
		ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
		ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
		for (i = 0; i < 4; i++)
			put_later(f, i, ZR_DATA_TEXT, bs);
		zr_datagen_fill(ZR_DATA_TEXT, 4, in, bs);
		ck_assert_int_eq(zr_file_write(f, 4, in, ZR_WRITE_CLEAN), 0);	/* hot */
		/* rewritten: compressed now, not pending */
		zr_datagen_fill(ZR_DATA_TEXT, 3, in, bs);
		ck_assert_int_eq(zr_file_write(f, 3, in, ZR_WRITE_DIRTY), 0);
		ck_assert(!(zr_file_test_flags(f, 3) & (ZR_SLOT_RAW | ZR_SLOT_PENDING)));
		zr_store_get_stats(st, &s);
		ck_assert_uint_eq(s.blocks_pending, 3);
		ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);	/* marks */
		ck_assert_uint_gt(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
		zr_store_get_stats(st, &s);
		ck_assert_uint_eq(s.blocks_pending, 0);
		ck_assert_uint_eq(s.blocks_raw, 0);
		/* the pending blocks, and with a cold codec of its own the
		 * two others, went cold */
		ck_assert_uint_eq(s.recompressions, same ? 3 : 5);
		for (i = 0; i < 3; i++)
			ck_assert(!(zr_file_test_flags(f, i) & (ZR_SLOT_RAW | ZR_SLOT_PENDING)));
		check_text_blocks(f, 5, bs);
		zr_file_put(f);
		zr_store_destroy(st);
	}
	free(in);
}
END_TEST

/*
 * Without memory, settling leaves blocks pending and says it did nothing
 * (the fill thread then waits instead of trying again at once); it goes on
 * once memory is back.
 */
START_TEST(test_settle_enomem)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	struct zr_file *f;
	unsigned i, asked = 0;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 4; i++)
		put_later(f, i, ZR_DATA_TEXT, bs);
	zr_zpool_fail_after(zr_store_test_pool(st), 0);
	ck_assert_uint_eq(zr_store_settle(st, settle_count, &asked), 0);
	ck_assert_uint_ge(asked, 4);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 4ull * bs);
	check_text_blocks(f, 4, bs);
	zr_zpool_fail_after(zr_store_test_pool(st), -1);
	ck_assert_uint_eq(zr_store_settle(st, settle_count, &asked), 4);
	ck_assert_uint_eq(zr_store_pending_bytes(st), 0);
	check_text_blocks(f, 4, bs);
	zr_file_put(f);
	zr_store_destroy(st);
}
END_TEST

/*
 * ZSTD_compress2(), wrapped (-Wl,--wrap): while zstd_fail is set it fails
 * as when zstd cannot allocate its working memory.
 */
size_t __real_ZSTD_compress2(void *cctx, void *dst, size_t cap, const void *src, size_t len);
size_t __wrap_ZSTD_compress2(void *cctx, void *dst, size_t cap, const void *src, size_t len);
static bool zstd_fail;

size_t __wrap_ZSTD_compress2(void *cctx, void *dst, size_t cap, const void *src, size_t len)
{
	if (__atomic_load_n(&zstd_fail, __ATOMIC_RELAXED))
		return (size_t)-ZSTD_error_memory_allocation;
	return __real_ZSTD_compress2(cctx, dst, cap, src, len);
}

/*
 * A codec that fails does not fail the write: the block is stored raw and
 * pending, and reads back. Neither settling nor the idle recompression
 * takes a failure as "does not compress" (raw for good, or NOCOLD): once
 * the codec works again, both compress (helper-56, helper-59). After a
 * failure no block is given to the codec until a wait passes: writes store
 * raw and pending without a try, settling and the idle pass do nothing
 * (they spun, helper-60).
 */
START_TEST(test_codec_error)
{
	uint32_t bs = 16384;
	struct zr_store_config cfg;
	struct zr_store *st;
	unsigned char *in = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;
	unsigned i, asked = 0;
	bool raw = true;

	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.budget = 1 << 30;
	cfg.comp = ZR_CODEC_ZSTD;
	cfg.cold_comp = ZR_CODEC_ZSTD;
	cfg.cold_level = 9;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	__atomic_store_n(&zstd_fail, true, __ATOMIC_RELAXED);
	for (i = 0; i < 4; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write_raw(f, i, in, ZR_WRITE_DIRTY, &raw), 0);
		ck_assert(!raw);	/* (not taken as a block that does not compress) */
		ck_assert_uint_eq(zr_file_test_flags(f, i) & (ZR_SLOT_RAW | ZR_SLOT_PENDING),
				  ZR_SLOT_RAW | ZR_SLOT_PENDING);
		if (i == 0)	/* (the wait the failure started, held) */
			zr_store_test_codec_wait(st, true);
	}
	/* (the first failed; the wait it started spared the codec the rest) */
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.codec_errors, 1);
	ck_assert_uint_eq(s.blocks_pending, 4);
	check_text_blocks(f, 4, bs);
	/* waiting: settling and the idle pass do not try */
	ck_assert_uint_eq(zr_store_settle(st, settle_count, &asked), 0);
	(void)zr_store_recompress_idle(st, UINT64_MAX, 0);	/* marks */
	ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.codec_errors, 1);
	/* the wait over, still failing: they leave them pending */
	zr_store_test_codec_wait(st, false);
	ck_assert_uint_eq(zr_store_settle(st, settle_count, &asked), 0);
	zr_store_test_codec_wait(st, false);
	ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_pending, 4);
	ck_assert_uint_eq(s.codec_errors, 3);
	/* back: the idle pass compresses two, settling the rest */
	__atomic_store_n(&zstd_fail, false, __ATOMIC_RELAXED);
	zr_store_test_codec_wait(st, false);
	ck_assert_uint_gt(zr_store_recompress_idle(st, 2, 0), 0);
	ck_assert_uint_eq(zr_store_settle(st, settle_count, &asked), 2);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_pending, 0);
	ck_assert_uint_eq(s.blocks_raw, 0);
	for (i = 0; i < 4; i++)
		ck_assert(!(zr_file_test_flags(f, i) & (ZR_SLOT_RAW | ZR_SLOT_NOCOLD)));
	check_text_blocks(f, 4, bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/*
 * Reclaim compresses pending blocks (they look the most expensive to the
 * policy) rather than dropping them, also when the cold codec is the hot
 * one, or none.
 */
START_TEST(test_reclaim_pending)
{
	uint32_t bs = 16384;
	struct zr_store_config cfg;
	struct zr_store *st;
	struct zr_file *f;
	struct zr_stats s;
	unsigned i;

	for (int k = 0; k < 3; k++) {
		zr_store_config_default(&cfg);
		cfg.block_size = bs;
		cfg.min_saving = bs / 8;
		cfg.budget = 1 << 30;
		if (k == 1) {
			cfg.cold_comp = cfg.comp;
			cfg.cold_level = cfg.comp_level;
		} else if (k == 2) {
			cfg.cold_comp = ZR_CODEC_NONE;
			cfg.cold_level = zr_codec_default_level(ZR_CODEC_NONE);
		}
		ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
		ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
		for (i = 0; i < 64; i++)
			put_later(f, i, ZR_DATA_TEXT, bs);
		ck_assert_int_ge(zr_store_reclaim(st, zr_store_mem_used(st) - 4 * bs,
						  UINT64_MAX), 4 * bs);
		zr_store_get_stats(st, &s);
		ck_assert_uint_eq(s.demotions, 0);
		ck_assert_uint_ge(s.recompressions, 4);
		ck_assert_uint_eq(s.blocks_pending + s.recompressions, 64);
		check_text_blocks(f, 64, bs);
		zr_file_put(f);
		zr_store_destroy(st);
	}
}
END_TEST

struct settle_race {
	struct zr_store *st;
	int stop;		/* atomic */
	uint64_t settled;
};

static bool settle_race_stop(void *arg)
{
	return __atomic_load_n(&((struct settle_race *)arg)->stop, __ATOMIC_ACQUIRE);
}

static void *settle_race_thread(void *arg)
{
	struct settle_race *r = arg;

	while (!settle_race_stop(r))
		r->settled += zr_store_settle(r->st, settle_race_stop, r);
	return NULL;
}

/*
 * zr_store_settle() racing with a block dropped and copied in again with
 * other bytes, over and over: it copies a block out, compresses it without
 * the lock, and must not put it back over the newer copy (a freed pool
 * handle is often given to the next copy, so only the bytes can tell).
 * Every copy must read back as itself.
 */
START_TEST(test_settle_race)
{
	uint32_t bs = 4096;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *exp = xmalloc(bs), *out = xmalloc(bs);
	struct settle_race r = { .st = st };
	uint64_t t0 = zr_now_ms(), bad = 0, n;
	struct zr_prepared p;
	struct zr_file *f;
	pthread_t th;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, settle_race_thread, &r), 0);
	for (n = 0; zr_now_ms() - t0 < 700; n++) {
		/* the same text three times in a row, each time longer (the
		 * rest zeros): a pending block stored without its zero tail
		 * is then a prefix of the next copy */
		zr_datagen_fill(ZR_DATA_TEXT, (n / 3) % 7, exp, bs);
		memset(exp + bs - (2 - n % 3) * 1024, 0, (2 - n % 3) * 1024);
		zr_file_drop(f, 0, 1);
		ck_assert_int_eq(zr_file_prepare_later(f, exp, &p), 0);
		ck_assert_int_eq(zr_file_install(f, 0, &p, ZR_WRITE_CLEAN), 0);
		for (int k = 0; k < 3; k++) {
			ck_assert_int_eq(zr_file_read(f, 0, out), 1);
			if (memcmp(out, exp, bs))
				bad++;
		}
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	ck_assert_uint_eq(bad, 0);
	ck_assert_uint_gt(r.settled, 0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(exp);
	free(out);
}
END_TEST

/* A reader of a file's counters without its lock (zr_file_nblocks(),
 * zr_file_dirty()) and what it saw while the file never lost its block,
 * nor (in phase 0) its dirty state. */
struct count_watch {
	struct zr_file *f;
	int phase;		/* atomic: 0 both must stay > 0, 1 nblocks only, 2 stop */
	int seen;		/* atomic: the phase of the reader's last look */
	uint64_t looks, no_blocks, not_dirty;
};

static void *count_watch_thread(void *arg)
{
	struct count_watch *w = arg;
	int ph;

	while ((ph = __atomic_load_n(&w->phase, __ATOMIC_ACQUIRE)) < 2) {
		__atomic_store_n(&w->seen, ph, __ATOMIC_RELEASE);
		w->looks++;
		if (zr_file_nblocks(w->f) == 0)
			w->no_blocks++;
		if (ph == 0 && !zr_file_dirty(w->f))
			w->not_dirty++;
	}
	return NULL;
}

static bool never_stop(void *arg)
{
	(void)arg;
	return false;
}

/*
 * A block that stays in its file while it changes (rewritten, compressed
 * later by settle, written back, dirtied again) never takes the file's
 * counters through zero: the sweep frees an inode whose zr_file_nblocks()
 * reads 0 (its dirty block with it), and fsync skips a file whose
 * zr_file_dirty() reads false.
 */
START_TEST(test_counts_steady)
{
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct count_watch w = { 0 };
	struct zr_prepared p;
	uint64_t t0, n = 0;
	pthread_t th;

	zr_datagen_fill(ZR_DATA_TEXT, 1, in, bs);
	ck_assert_int_eq(zr_file_create(st, NULL, &w.f), 0);
	ck_assert_int_eq(zr_file_write(w.f, 0, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(pthread_create(&th, NULL, count_watch_thread, &w), 0);
	for (int ph = 0; ph < 2; ph++) {
		__atomic_store_n(&w.phase, ph, __ATOMIC_RELEASE);
		/* (no writeback before the reader has left its phase-0 look) */
		while (__atomic_load_n(&w.seen, __ATOMIC_ACQUIRE) != ph)
			usleep(100);
		for (t0 = zr_now_ms(); zr_now_ms() - t0 < 400; n++) {
			in[n % bs]++;
			ck_assert_int_eq(zr_file_write(w.f, 0, in, ZR_WRITE_DIRTY), 0);
			ck_assert_int_eq(zr_file_prepare_later(w.f, in, &p), 0);
			ck_assert_int_eq(zr_file_install(w.f, 0, &p, ZR_WRITE_DIRTY), 0);
			(void)zr_store_settle(st, never_stop, NULL);
			if (ph == 1) {
				ck_assert_int_eq(zr_file_writeback(w.f), 0);
				(void)zr_file_redirty(w.f);
			}
		}
	}
	__atomic_store_n(&w.phase, 2, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	ck_assert_uint_gt(w.looks, 1000);
	ck_assert_uint_gt(r.ncalls, 0);
	ck_assert_uint_eq(w.no_blocks, 0);
	ck_assert_uint_eq(w.not_dirty, 0);
	ck_assert_uint_eq(zr_file_nblocks(w.f), 1);
	zr_file_put(w.f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* `writeback raw` takes incompressible dirty blocks, not pending ones made
 * dirty again (zr_file_redirty() after a failed fsync). */
START_TEST(test_writeback_raw_pending)
{
	uint32_t bs = 16384;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	put_later(f, 0, ZR_DATA_TEXT, bs);
	zr_datagen_fill(ZR_DATA_RANDOM, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 1, in, ZR_WRITE_DIRTY), 0);
	ck_assert_uint_eq(zr_file_redirty(f), 1);
	ck_assert_int_eq(zr_file_test_flags(f, 0) & (ZR_SLOT_DIRTY | ZR_SLOT_PENDING),
			 ZR_SLOT_DIRTY | ZR_SLOT_PENDING);
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_RAW), 0);
	ck_assert_uint_eq(r.ncalls, 1);
	ck_assert_uint_eq(r.call[0].index, 1);
	ck_assert_uint_eq(r.call[0].n, 1);
	ck_assert(zr_file_dirty(f));
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* Idle blocks are recompressed with the cold codec, blocks in use are not. */
START_TEST(test_recompress_idle)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s0, s1;
	struct zr_file *f;
	unsigned i;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 8; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
	/* the first pass only marks: nothing was idle before it */
	ck_assert_uint_eq(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	for (i = 0; i < 4; i++)
		ck_assert_int_eq(zr_file_read(f, i, out), 1);	/* in use */
	zr_store_get_stats(st, &s0);
	ck_assert_uint_gt(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	zr_store_get_stats(st, &s1);
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(!!(zr_file_test_flags(f, i) & ZR_SLOT_COLD), i >= 4);
	}
	ck_assert_uint_eq(s1.blocks_cold, 4);
	ck_assert_uint_eq(s1.recompressions - s0.recompressions, 4);
	ck_assert_uint_lt(s1.compr_data_size, s0.compr_data_size);
	check_text_blocks(f, 8, bs);	/* cold blocks read back intact */
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* A pass that stops early leaves the rest pending; zr_store_recompress_more()
 * finishes it with the same mark, but not in a slice after a block was used. */
START_TEST(test_recompress_more)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;
	unsigned i, n = 200;
	bool ran;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < n; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
	ck_assert(!zr_store_recompress_pending(st));
	ck_assert_uint_eq(zr_store_recompress_more(st, 1000, &ran), 0);	/* nothing pending */
	ck_assert(!ran);
	(void)zr_store_recompress_idle(st, UINT64_MAX, 0);		/* marks */
	ck_assert_uint_gt(zr_store_recompress_idle(st, 10, 0), 0);
	ck_assert(zr_store_recompress_pending(st));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_cold, 10);
	/* a block read since the pass: this slice waits for a quiet one */
	ck_assert_int_eq(zr_file_read(f, n - 1, out), 1);
	ck_assert_uint_eq(zr_store_recompress_more(st, 1000, &ran), 0);
	ck_assert(!ran);
	ck_assert(zr_store_recompress_pending(st));
	/* quiet now: the rest of the pass, except the block in use (in a
	 * slice that no slow machine or valgrind runs out of: 1 s was not
	 * enough for 199 blocks under valgrind) */
	ck_assert_uint_gt(zr_store_recompress_more(st, 600000, &ran), 0);
	ck_assert(ran);
	ck_assert(!zr_store_recompress_pending(st));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_cold, n - 1);
	ck_assert_int_eq(zr_file_test_flags(f, n - 1) & ZR_SLOT_COLD, 0);
	check_text_blocks(f, n, bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Blocks the cold codec does not shrink are tried once (NOCOLD), so a pass
 * ends: before, every slice retried the same blocks and never ended. */
START_TEST(test_recompress_nocold)
{
	uint32_t bs = 16384;
	struct zr_store_config cfg;
	struct zr_store *st;
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;
	unsigned i, n = 300, slices = 0;
	bool ran = true;

	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.budget = 1 << 30;
	cfg.comp = ZR_CODEC_ZSTD;	/* hot zstd -19: cold zstd -1 cannot beat it */
	cfg.comp_level = 19;
	cfg.cold_comp = ZR_CODEC_ZSTD;
	cfg.cold_level = 1;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < n; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
	(void)zr_store_recompress_idle(st, UINT64_MAX, 0);		/* marks */
	(void)zr_store_recompress_idle(st, 64, 0);
	ck_assert(zr_store_recompress_pending(st));
	while (zr_store_recompress_pending(st) && slices < 20) {
		(void)zr_store_recompress_more(st, 1, &ran);
		ck_assert(ran);
		slices++;
	}
	ck_assert_msg(!zr_store_recompress_pending(st), "still pending after %u slices", slices);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_cold + s.blocks_hot, n);
	ck_assert_uint_eq(s.recompressions, s.blocks_cold);
	/* a block tried in vain is skipped until it is rewritten */
	for (i = 0; i < n && (zr_file_test_flags(f, i) & ZR_SLOT_COLD); i++)
		;
	ck_assert_uint_lt(i, n);
	ck_assert(zr_file_test_flags(f, i) & ZR_SLOT_NOCOLD);
	zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
	ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	ck_assert(!(zr_file_test_flags(f, i) & ZR_SLOT_NOCOLD));
	check_text_blocks(f, n, bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Random data does not save min_saving: stored raw, whole block. */
START_TEST(test_raw)
{
	uint32_t bs = 65536;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_RANDOM, 5, in, bs);
	ck_assert_int_eq(zr_file_write(f, 3, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 3) & ZR_SLOT_RAW, ZR_SLOT_RAW);
	ck_assert_int_eq(zr_file_test_len(f, 3), (int)bs);
	/* Text shrinks and is stored compressed, below bs - min_saving. */
	zr_datagen_fill(ZR_DATA_TEXT, 6, in, bs);
	ck_assert_int_eq(zr_file_write(f, 4, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 4) & (ZR_SLOT_RAW | ZR_SLOT_SAME), 0);
	ck_assert_int_le(zr_file_test_len(f, 4), (int)(bs - bs / 8));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_raw, 1);
	ck_assert_uint_eq(s.blocks_hot, 1);
	ck_assert_uint_eq(s.compr_data_size, bs + (uint64_t)zr_file_test_len(f, 4));
	ck_assert_int_eq(zr_file_read(f, 4, out), 1);
	ck_assert_mem_eq(in, out, bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* A block at 2^40 costs a handful of nodes, and dropping it frees them. */
START_TEST(test_sparse)
{
	uint32_t bs = 4096;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	uint64_t far = 1ull << 40, idx, meta0;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	meta0 = store_meta(st);
	/* A file without blocks costs the budget nothing. */
	ck_assert_uint_eq(meta0, 0);
	zr_datagen_fill(ZR_DATA_TEXT, 9, in, bs);
	ck_assert_int_eq(zr_file_write(f, far, in, ZR_WRITE_DIRTY), 0);
	/* One leaf (16 slots) and six interior nodes of 64 pointers. */
	ck_assert_uint_le(zr_file_test_map_bytes(f), 8 * 600);
	ck_assert_uint_gt(zr_file_test_map_bytes(f), 0);
	ck_assert_uint_eq(store_meta(st) - meta0,
			  zr_file_test_map_bytes(f) + zr_file_test_record_bytes());
	ck_assert_int_eq(zr_file_next_present(f, 0, &idx), 1);
	ck_assert_uint_eq(idx, far);
	ck_assert_int_eq(zr_file_next_present(f, far + 1, &idx), 0);
	ck_assert_int_eq(zr_file_read(f, far, out), 1);
	ck_assert_mem_eq(in, out, bs);
	ck_assert_int_eq(zr_file_read(f, far - 1, out), 0);
	ck_assert(zr_file_has(f, far));
	ck_assert(!zr_file_has(f, far - 1));
	ck_assert(!zr_file_has(f, 0));
	ck_assert_uint_eq(zr_file_dirty_end(f), far + 1);
	/* Now a small block too: the tree keeps both. */
	ck_assert_int_eq(zr_file_write(f, 2, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_write(f, UINT64_MAX, in, ZR_WRITE_DIRTY), 0);
	ck_assert_uint_eq(zr_file_nblocks(f), 3);
	ck_assert_int_eq(zr_file_next_present(f, 3, &idx), 1);
	ck_assert_uint_eq(idx, far);
	ck_assert_int_eq(zr_file_next_present(f, far + 1, &idx), 1);
	ck_assert_uint_eq(idx, UINT64_MAX);
	ck_assert_int_eq(zr_file_read(f, UINT64_MAX, out), 1);
	zr_file_drop(f, 3, UINT64_MAX);
	ck_assert_uint_eq(zr_file_nblocks(f), 1);
	ck_assert(zr_file_has(f, 2));
	ck_assert(!zr_file_has(f, far));
	ck_assert(!zr_file_has(f, UINT64_MAX));
	/* Back to one leaf. */
	ck_assert_uint_le(zr_file_test_map_bytes(f), 400);
	zr_file_drop(f, 0, UINT64_MAX);
	ck_assert_uint_eq(zr_file_test_map_bytes(f), 0);
	ck_assert_uint_eq(store_meta(st), meta0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* A file whose only block is block 0 costs one slot of map; a second block
 * widens the root leaf, and dropping it narrows the leaf again. */
START_TEST(test_small_leaf)
{
	uint32_t bs = 4096;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *a = xmalloc(bs), *b = xmalloc(bs), *c = xmalloc(bs), *out = xmalloc(bs);
	struct zr_file *f, *g;
	uint64_t idx, one;

	zr_datagen_fill(ZR_DATA_TEXT, 1, a, bs);
	zr_datagen_fill(ZR_DATA_MIXED, 2, b, bs);
	zr_datagen_fill(ZR_DATA_BINARY, 3, c, bs);
	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	ck_assert_int_eq(zr_file_write(f, 0, a, ZR_WRITE_DIRTY), 0);
	one = zr_file_test_map_bytes(f);
	/* one 24-byte slot in a chunk of malloc's: 8 bytes of header, 16-byte
	 * rounding, 32 bytes at least */
	ck_assert_uint_eq(one, 32);
	ck_assert_int_eq(zr_file_read(f, 1, out), 0);
	ck_assert_int_eq(zr_file_next_present(f, 1, &idx), 0);
	/* a second block in the same leaf: widened, block 0 kept */
	ck_assert_int_eq(zr_file_write(f, 5, b, ZR_WRITE_DIRTY), 0);
	ck_assert_uint_eq(zr_file_test_map_bytes(f), 16 * 24 + 16);	/* 16 slots */
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_mem_eq(a, out, bs);
	ck_assert_int_eq(zr_file_read(f, 5, out), 1);
	ck_assert_mem_eq(b, out, bs);
	ck_assert_int_eq(zr_file_next_present(f, 1, &idx), 1);
	ck_assert_uint_eq(idx, 5);
	/* a third beyond the leaf: the tree grows over the full leaf */
	ck_assert_int_eq(zr_file_write(f, 40, c, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_mem_eq(a, out, bs);
	ck_assert_int_eq(zr_file_read(f, 40, out), 1);
	ck_assert_mem_eq(c, out, bs);
	ck_assert_uint_eq(zr_file_nblocks(f), 3);
	/* dropping the others lowers the tree and narrows the leaf */
	zr_file_drop(f, 1, UINT64_MAX);
	ck_assert_uint_eq(zr_file_nblocks(f), 1);
	ck_assert_uint_eq(zr_file_test_map_bytes(f), one);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_mem_eq(a, out, bs);
	/* overwriting block 0 keeps the small leaf */
	ck_assert_int_eq(zr_file_write(f, 0, b, ZR_WRITE_DIRTY), 0);
	ck_assert_uint_eq(zr_file_test_map_bytes(f), one);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_mem_eq(b, out, bs);
	/* a file starting past block 0 gets a full leaf at once */
	ck_assert_int_eq(zr_file_create(st, NULL, &g), 0);
	ck_assert_int_eq(zr_file_write(g, 3, c, ZR_WRITE_DIRTY), 0);
	ck_assert_uint_eq(zr_file_test_map_bytes(g), 16 * 24 + 16);
	ck_assert_int_eq(zr_file_read(g, 0, out), 0);
	ck_assert_int_eq(zr_file_write(g, 0, a, ZR_WRITE_DIRTY), 0);
	zr_file_drop(g, 3, 1);
	ck_assert_uint_eq(zr_file_test_map_bytes(g), one);
	ck_assert_int_eq(zr_file_read(g, 0, out), 1);
	ck_assert_mem_eq(a, out, bs);
	zr_file_put(g);
	zr_file_put(f);
	ck_assert_uint_eq(store_meta(st), 0);
	ck_assert_uint_eq(pool_objs(st), 0);
	zr_store_destroy(st);
	free(a);
	free(b);
	free(c);
	free(out);
}
END_TEST

/* Truncate and punch: exactly the asked range goes. */
START_TEST(test_drop)
{
	uint32_t bs = 4096;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;
	uint64_t i, idx;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 100; i++) {
		zr_datagen_fill(ZR_DATA_MIXED, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
	zr_file_drop(f, 10, 10);		/* punch [10, 20) */
	ck_assert_uint_eq(zr_file_nblocks(f), 90);
	ck_assert_int_eq(zr_file_read(f, 9, out), 1);
	ck_assert_int_eq(zr_file_read(f, 10, out), 0);
	ck_assert_int_eq(zr_file_read(f, 19, out), 0);
	ck_assert_int_eq(zr_file_read(f, 20, out), 1);
	zr_datagen_fill(ZR_DATA_MIXED, 20, in, bs);
	ck_assert_mem_eq(in, out, bs);
	ck_assert_int_eq(zr_file_next_present(f, 10, &idx), 1);
	ck_assert_uint_eq(idx, 20);
	zr_file_drop(f, 50, UINT64_MAX);	/* truncate to 50 blocks */
	ck_assert_uint_eq(zr_file_nblocks(f), 40);
	ck_assert_uint_eq(zr_file_dirty_end(f), 50);
	zr_file_drop(f, 0, 0);
	ck_assert_uint_eq(zr_file_nblocks(f), 40);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.orig_data_size, 40ull * bs);
	ck_assert_uint_eq(s.blocks_dirty, 40);
	ck_assert_uint_eq(s.blocks_zero + s.blocks_raw + s.blocks_hot + s.blocks_cold, 40);
	zr_file_put(f);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.orig_data_size, 0);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(s.files, 0);
	ck_assert_uint_eq(store_meta(st), 0);
	ck_assert_uint_eq(pool_objs(st), 0);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/*
 * zr_file_detach(): the owner of a file that a writeback of every file holds
 * is freed. Its blocks go, dirty ones too, and no callback gets the owner
 * again, though the file lives on; a writeback in flight is waited for.
 */
START_TEST(test_detach)
{
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	int *owner = xmalloc(sizeof(*owner)), *owner2 = xmalloc(sizeof(*owner2));
	struct zr_file *f, *g;
	struct zr_stats s;

	*owner = 1;
	*owner2 = 2;
	ck_assert_int_eq(zr_file_create(st, owner, &f), 0);
	ck_assert_int_eq(zr_file_create(st, owner2, &g), 0);
	for (uint64_t i = 0; i < 4; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
		ck_assert_int_eq(zr_file_write(g, i, in, ZR_WRITE_DIRTY), 0);
	}
	zr_file_get(f);			/* as file_iter() holds it */
	zr_file_detach(f);
	free(owner);			/* as inode_free() does next */
	ck_assert_uint_eq(zr_file_nblocks(f), 0);
	ck_assert(!zr_file_dirty(f));
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	ck_assert_uint_eq(r.ncalls, 1);	/* g's run, not f's */
	ck_assert_ptr_eq(r.call[0].owner, owner2);
	zr_file_put(f);
	zr_file_put(f);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(s.files, 1);
	zr_file_put(g);
	zr_store_destroy(st);
	free(owner2);
	free(in);
}
END_TEST

struct wb_all_arg {
	struct zr_store *st;
	int rc;
};

static void *wb_all_run(void *arg)
{
	struct wb_all_arg *a = arg;

	a->rc = zr_store_writeback_all(a->st, ZR_WB_ALL);
	return NULL;
}

struct detach_arg {
	struct zr_file *f;
	int done;
};

static void *detach_run(void *arg)
{
	struct detach_arg *a = arg;

	zr_file_detach(a->f);
	__atomic_store_n(&a->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A detach while the file's writeback callback runs returns only after it. */
START_TEST(test_detach_waits)
{
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	int *owner = xmalloc(sizeof(*owner));
	struct wb_all_arg wa = { .st = st };
	struct detach_arg da;
	pthread_t wt, dt;
	struct zr_file *f;

	*owner = 7;
	ck_assert_int_eq(zr_file_create(st, owner, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 0, in, bs);
	ck_assert_int_eq(zr_file_write(f, 0, in, ZR_WRITE_DIRTY), 0);
	__atomic_store_n(&r.hold, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_create(&wt, NULL, wb_all_run, &wa), 0);
	while (!__atomic_load_n(&r.entered, __ATOMIC_ACQUIRE))
		usleep(1000);
	da.f = f;
	da.done = 0;
	ck_assert_int_eq(pthread_create(&dt, NULL, detach_run, &da), 0);
	usleep(100 * 1000);
	ck_assert_int_eq(__atomic_load_n(&da.done, __ATOMIC_ACQUIRE), 0);
	__atomic_store_n(&r.hold, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_join(dt, NULL), 0);
	*owner = 0;			/* freed, as far as the callback knows */
	ck_assert_int_eq(pthread_join(wt, NULL), 0);
	ck_assert_int_eq(wa.rc, 0);
	ck_assert_int_eq(__atomic_load_n(&r.owner_alive, __ATOMIC_ACQUIRE), 7);
	ck_assert_uint_eq(r.ncalls, 1);
	ck_assert_uint_eq(zr_file_nblocks(f), 0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(owner);
	free(in);
}
END_TEST

/* Adjacent dirty blocks go out in one call, at most 1 MiB per call. */
START_TEST(test_writeback_runs)
{
	uint32_t bs = 65536;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	int owner;
	struct zr_stats s;
	struct zr_file *f;
	uint64_t i;

	r.verify_kind = ZR_DATA_TEXT;
	ck_assert_int_eq(zr_file_create(st, &owner, &f), 0);
	for (i = 0; i < 40; i++) {
		if (i == 3 || i == 4 || i == 7)
			continue;
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in,
					       i == 8 ? ZR_WRITE_CLEAN : ZR_WRITE_DIRTY), 0);
	}
	ck_assert(zr_file_dirty(f));
	ck_assert_int_eq(zr_file_writeback(f), 0);
	/* [0,3) [5,7) [9,25) [25,40): 16 blocks of 64 KiB = 1 MiB per run. */
	ck_assert_uint_eq(r.ncalls, 4);
	ck_assert_ptr_eq(r.call[0].owner, &owner);
	ck_assert_uint_eq(r.call[0].index, 0);
	ck_assert_uint_eq(r.call[0].n, 3);
	ck_assert_uint_eq(r.call[1].index, 5);
	ck_assert_uint_eq(r.call[1].n, 2);
	ck_assert_uint_eq(r.call[2].index, 9);
	ck_assert_uint_eq(r.call[2].n, 16);
	ck_assert_uint_eq(r.call[3].index, 25);
	ck_assert_uint_eq(r.call[3].n, 15);
	ck_assert_uint_eq(r.bad, 0);
	ck_assert(!zr_file_dirty(f));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.writebacks, 36);
	ck_assert_uint_eq(s.bytes_written_back, 36ull * bs);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(zr_file_dirty_end(f), 0);
	/* Nothing left to do. */
	ck_assert_int_eq(zr_file_writeback(f), 0);
	ck_assert_uint_eq(r.ncalls, 4);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* A failed writeback keeps the blocks dirty and sets the sticky error. */
START_TEST(test_writeback_error)
{
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_BINARY, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 0, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_write(f, 1, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_write(f, 5, in, ZR_WRITE_DIRTY), 0);
	r.fail = -ENOSPC;
	ck_assert_int_eq(zr_file_writeback(f), -ENOSPC);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert(zr_file_dirty(f));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 3);
	ck_assert_uint_eq(s.writeback_errors, 2);
	ck_assert_uint_eq(s.writebacks, 0);
	ck_assert_int_eq(zr_file_test_flags(f, 0) & (ZR_SLOT_DIRTY | ZR_SLOT_UNDER_WB),
			 ZR_SLOT_DIRTY);
	ck_assert_int_eq(zr_file_take_error(f), -ENOSPC);
	ck_assert_int_eq(zr_file_take_error(f), 0);
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), -ENOSPC);
	ck_assert_int_eq(zr_file_read(f, 5, out), 1);
	ck_assert_mem_eq(in, out, bs);
	r.fail = 0;
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert(!zr_file_dirty(f));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.writebacks, 3);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* A rewrite during the writeback call keeps the new data dirty. */
START_TEST(test_rewrite_under_writeback)
{
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *a = xmalloc(bs), *b = xmalloc(bs), *out = xmalloc(bs);
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 1, a, bs);
	zr_datagen_fill(ZR_DATA_TEXT, 2, b, bs);
	ck_assert_int_eq(zr_file_write(f, 0, a, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_write(f, 1, a, ZR_WRITE_DIRTY), 0);
	r.rewrite_file = f;
	r.rewrite_index = 1;
	r.rewrite_data = b;
	ck_assert_int_eq(zr_file_writeback(f), 0);
	ck_assert_uint_eq(r.ncalls, 1);
	ck_assert_int_eq(zr_file_test_flags(f, 0) & ZR_SLOT_DIRTY, 0);
	ck_assert_int_eq(zr_file_test_flags(f, 1) & (ZR_SLOT_DIRTY | ZR_SLOT_UNDER_WB),
			 ZR_SLOT_DIRTY);
	ck_assert_int_eq(zr_file_read(f, 1, out), 1);
	ck_assert_mem_eq(b, out, bs);
	ck_assert_int_eq(zr_file_writeback(f), 0);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert_uint_eq(r.call[1].index, 1);
	ck_assert(!zr_file_dirty(f));
	zr_file_put(f);
	zr_store_destroy(st);
	free(a);
	free(b);
	free(out);
}
END_TEST

/* ZR_WB_IDLE, ZR_WB_RAW, ZR_WB_DROP; expiry by age. */
START_TEST(test_writeback_flags)
{
	uint32_t bs = 4096;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;
	uint64_t freed;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 0, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_write(f, 2, in, ZR_WRITE_DIRTY), 0);
	zr_datagen_fill(ZR_DATA_RANDOM, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 4, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_store_writeback_all(st, 0), -EINVAL);
	/* Not expired yet. */
	ck_assert_int_eq(zr_store_writeback_expired(st, 3600 * 1000), 0);
	ck_assert_uint_eq(r.ncalls, 0);
	/* Raw ones only. */
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_RAW), 0);
	ck_assert_uint_eq(r.ncalls, 1);
	ck_assert_uint_eq(r.call[0].index, 4);
	/* First idle pass: nothing idle yet, everything becomes idle. */
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_IDLE), 0);
	ck_assert_uint_eq(r.ncalls, 1);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);	/* 0 is busy again */
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_IDLE | ZR_WB_DROP), 0);
	ck_assert_uint_eq(r.ncalls, 2);
	ck_assert_uint_eq(r.call[1].index, 2);
	/* Block 2 written and dropped, clean idle block 4 dropped, 0 kept. */
	ck_assert_uint_eq(zr_file_nblocks(f), 1);
	ck_assert_int_eq(zr_file_test_flags(f, 0) & ZR_SLOT_DIRTY, ZR_SLOT_DIRTY);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.demotions, 2);
	ck_assert_uint_eq(s.writebacks, 2);
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert(!zr_file_dirty(f));
	/* the last block takes the map and the file's record with it */
	freed = (uint64_t)zr_file_test_len(f, 0) + zr_file_test_map_bytes(f) +
		zr_file_test_record_bytes();
	ck_assert_uint_eq(zr_store_drop_clean(st), freed);
	ck_assert_uint_eq(store_meta(st), 0);
	ck_assert_uint_eq(zr_file_nblocks(f), 0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Every block dirty and writeback failing: -ENOSPC, nothing lost; then ok. */
START_TEST(test_make_room_enospc)
{
	uint32_t bs = 16384;
	uint64_t budget = 1 << 20, i, n;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	r.fail = -EIO;
	for (i = 0; zr_store_make_room(st, bs) == 0; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_lt(i, 1000);
	}
	n = i;
	ck_assert_uint_gt(n, 10);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.enospc, 1);
	ck_assert_uint_gt(s.writeback_errors, 0);
	ck_assert_uint_eq(s.demotions, 0);
	ck_assert_uint_le(s.mem_used_total, budget);
	ck_assert_uint_eq(zr_file_nblocks(f), n);
	ck_assert_int_eq(zr_store_reclaim(st, 0, 10), -ENOSPC);
	for (i = 0; i < n; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_file_read(f, i, out), 1);
		ck_assert_mem_eq(in, out, bs);
	}
	ck_assert_int_eq(zr_file_take_error(f), -EIO);
	r.fail = 0;
	r.verify_kind = ZR_DATA_RANDOM;
	ck_assert_int_eq(zr_store_make_room(st, bs), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_le(s.mem_used_total, budget * 80 / 100);
	ck_assert_uint_gt(s.writebacks, 0);
	ck_assert_uint_gt(s.demotions, 0);
	ck_assert_uint_eq(r.bad, 0);
	ck_assert_uint_eq(s.bytes_written_back, r.bytes);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Counters match a known sequence exactly. */
START_TEST(test_stats)
{
	uint32_t bs = 8192;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_zpool_stats ps;
	struct zr_stats s;
	struct zr_file *f, *g;
	uint64_t compr;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	ck_assert_int_eq(zr_file_create(st, NULL, &g), 0);
	zr_datagen_fill(ZR_DATA_ZERO, 0, in, bs);
	ck_assert_int_eq(zr_file_write(f, 0, in, ZR_WRITE_DIRTY), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 1, in, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_write(g, 1, in, ZR_WRITE_CLEAN), 0);
	zr_datagen_fill(ZR_DATA_RANDOM, 2, in, bs);
	ck_assert_int_eq(zr_file_write(f, 2, in, ZR_WRITE_CLEAN), 0);
	ck_assert_int_eq(zr_file_read(f, 1, out), 1);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_int_eq(zr_file_read(f, 9, out), 0);
	ck_assert_int_eq(zr_file_read(g, 0, out), 0);
	compr = (uint64_t)zr_file_test_len(f, 1) + zr_file_test_len(g, 1) + bs;
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.orig_data_size, 4ull * bs);
	ck_assert_uint_eq(s.compr_data_size, compr);
	ck_assert_uint_eq(s.blocks_zero, 1);
	ck_assert_uint_eq(s.blocks_hot, 2);
	ck_assert_uint_eq(s.blocks_raw, 1);
	ck_assert_uint_eq(s.blocks_cold, 0);
	ck_assert_uint_eq(s.blocks_dirty, 2);
	ck_assert_uint_eq(s.hits, 2);
	ck_assert_uint_eq(s.misses, 2);
	ck_assert_uint_eq(s.files, 2);
	ck_assert_uint_eq(s.budget, 1 << 30);
	zr_zpool_get_stats(zr_store_test_pool(st), &ps);
	ck_assert_uint_eq(ps.obj_bytes, compr);
	ck_assert_uint_eq(s.mem_used_total, zr_store_mem_used(st));
	ck_assert_uint_eq(s.mem_used_total, ps.mem_used + s.meta_bytes - ps.meta_bytes);
	ck_assert_uint_ge(s.mem_used_max, s.mem_used_total);
	ck_assert_uint_ge(s.meta_bytes, 2 * zr_file_test_map_bytes(f));
	/* Rewrite a hot block with a raw one: counters move, not add up. */
	ck_assert_int_eq(zr_file_write(g, 1, in, ZR_WRITE_DIRTY), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.orig_data_size, 4ull * bs);
	ck_assert_uint_eq(s.blocks_hot, 1);
	ck_assert_uint_eq(s.blocks_raw, 2);
	ck_assert_uint_eq(s.blocks_dirty, 3);
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(s.writebacks, 3);
	ck_assert_uint_eq(s.bytes_written_back, 3ull * bs);
	zr_file_put(g);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.files, 1);
	ck_assert_uint_eq(s.orig_data_size, 3ull * bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* Blocks 0..@n-1 of @f: text (seed = index) through @in, dirty. */
static void write_text_dirty(struct zr_file *f, unsigned n, unsigned char *in, uint32_t bs)
{
	for (unsigned i = 0; i < n; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
}

/* A failed backing fsync: the clean blocks the store holds are marked
 * dirty again and written again by the next writeback; a range marks only
 * its own. */
START_TEST(test_redirty)
{
	uint32_t bs = 16384;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	write_text_dirty(f, 4, in, bs);
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(s.writebacks, 4);
	ck_assert_uint_eq(zr_file_redirty(f), 4);
	ck_assert(zr_file_dirty(f));
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 4);
	ck_assert_uint_eq(zr_file_redirty(f), 0);	/* dirty already */
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(s.writebacks, 8);
	ck_assert_uint_eq(r.bytes, 8ull * bs);
	/* a range: only the clean blocks in it (the file holds 0..3) */
	ck_assert_uint_eq(zr_file_redirty_range(f, 1, 2), 2);
	ck_assert_uint_eq(zr_file_redirty_range(f, 0, 0), 0);
	ck_assert_uint_eq(zr_file_redirty_range(f, 4, UINT64_MAX), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 2);
	ck_assert_uint_eq(zr_file_redirty_range(f, 2, UINT64_MAX), 1);
	ck_assert_uint_eq(zr_file_redirty(f), 1);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* A redirty while the blocks are being written back (a syncfs failed
 * meanwhile: the kernel may give up those pages too) leaves them dirty
 * after that writeback; they were marked clean at its end (helper-39). */
START_TEST(test_redirty_in_flight)
{
	uint32_t bs = 16384;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	write_text_dirty(f, 4, in, bs);
	r.redirty_file = f;
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	ck_assert_uint_eq(r.redirtied, 4);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 4);
	ck_assert(zr_file_dirty(f));
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_uint_eq(r.bytes, 8ull * bs);	/* written twice */
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* mem_used_max is a high-water mark: never below a total reported before.
 * Recompression stores the strong copy before it frees the fast one, and
 * a new pool span for it can take the total above the last write's. */
START_TEST(test_max_monotonic)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *in = xmalloc(bs);
	struct zr_stats s0, s1, peak = { 0 };
	struct zr_file *f;
	unsigned i;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 64; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
	zr_store_get_stats(st, &s0);
	(void)zr_store_recompress_idle(st, UINT64_MAX, 0);	/* marks */
	/* recompress one block at a time, sampling the total after each */
	while (zr_store_recompress_idle(st, 1, 0) > 0) {
		zr_store_get_stats(st, &s1);
		if (s1.mem_used_total > peak.mem_used_total)
			peak = s1;
	}
	ck_assert_uint_gt(peak.mem_used_total, 0);
	zr_file_drop(f, 0, UINT64_MAX);
	zr_store_get_stats(st, &s1);
	ck_assert_uint_lt(s1.mem_used_total, s0.mem_used_total);
	ck_assert_uint_ge(s1.mem_used_max, s0.mem_used_total);
	ck_assert_uint_ge(s1.mem_used_max, peak.mem_used_total);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/* The pool refuses memory: -ENOMEM, and the old block is still there. */
START_TEST(test_enomem)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *a = xmalloc(bs), *b = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s0, s1;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 1, a, bs);
	zr_datagen_fill(ZR_DATA_BINARY, 2, b, bs);
	ck_assert_int_eq(zr_file_write(f, 0, a, ZR_WRITE_DIRTY), 0);
	zr_store_get_stats(st, &s0);
	zr_zpool_fail_after(zr_store_test_pool(st), 0);
	ck_assert_int_eq(zr_file_write(f, 0, b, ZR_WRITE_DIRTY), -ENOMEM);
	ck_assert_int_eq(zr_file_write(f, 1, b, ZR_WRITE_DIRTY), -ENOMEM);
	zr_datagen_fill(ZR_DATA_RANDOM, 2, b, bs);
	ck_assert_int_eq(zr_file_write(f, 1, b, ZR_WRITE_DIRTY), -ENOMEM);
	/* Same blocks need no allocation. */
	memset(b, 0, bs);
	ck_assert_int_eq(zr_file_write(f, 2, b, ZR_WRITE_DIRTY), 0);
	zr_file_drop(f, 2, 1);
	zr_store_get_stats(st, &s1);
	ck_assert_uint_eq(s1.orig_data_size, s0.orig_data_size);
	ck_assert_uint_eq(s1.compr_data_size, s0.compr_data_size);
	ck_assert_uint_eq(s1.meta_bytes, s0.meta_bytes);
	ck_assert_uint_eq(zr_file_nblocks(f), 1);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_mem_eq(a, out, bs);
	zr_zpool_fail_after(zr_store_test_pool(st), -1);
	zr_datagen_fill(ZR_DATA_BINARY, 2, b, bs);
	ck_assert_int_eq(zr_file_write(f, 0, b, ZR_WRITE_DIRTY), 0);
	ck_assert_int_eq(zr_file_read(f, 0, out), 1);
	ck_assert_mem_eq(b, out, bs);
	zr_file_put(f);
	zr_store_destroy(st);
	free(a);
	free(b);
	free(out);
}
END_TEST

/*
 * calloc() of the code under test, wrapped (-Wl,--wrap=calloc): while
 * calloc_fail_after is >= 0, that many calls on this thread succeed and
 * the next ones fail, as they would when memory runs out.
 */
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
static __thread long calloc_fail_after = -1;

void *__wrap_calloc(size_t n, size_t size)
{
	if (calloc_fail_after == 0)
		return NULL;
	if (calloc_fail_after > 0)
		calloc_fail_after--;
	return __real_calloc(n, size);
}

/*
 * The map cannot grow to take a prepared block: the install says -ENOMEM,
 * frees the block's pool object and whatever nodes it had added, and the
 * file's other blocks are untouched; each allocation of the map is failed
 * in turn, at an index that widens the root leaf and at ones that make
 * the tree taller.
 */
START_TEST(test_install_enomem)
{
	static const uint64_t idx[] = { 1, 17, 1ull << 20, 1ull << 40 };
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, 1 << 30, NULL);
	unsigned char *a = xmalloc(bs), *b = xmalloc(bs), *out = xmalloc(bs);
	struct zr_zpool_stats p0, p1;
	struct zr_stats s0, s1;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 1, a, bs);
	zr_datagen_fill(ZR_DATA_BINARY, 2, b, bs);
	ck_assert_int_eq(zr_file_write(f, 0, a, ZR_WRITE_DIRTY), 0);
	for (unsigned i = 0; i < sizeof(idx) / sizeof(idx[0]); i++) {
		int rc = -ENOMEM;
		long k;

		for (k = 0; rc == -ENOMEM; k++) {
			struct zr_prepared p;

			ck_assert_int_lt(k, 64);	/* a map is not that deep */
			ck_assert_int_eq(zr_file_prepare(f, b, &p), 0);
			zr_store_get_stats(st, &s0);
			zr_zpool_get_stats(zr_store_test_pool(st), &p0);
			calloc_fail_after = k;
			rc = zr_file_install(f, idx[i], &p, ZR_WRITE_DIRTY);
			calloc_fail_after = -1;
			ck_assert_uint_eq(p.handle, ZR_ZPOOL_NO_HANDLE);
			if (rc == 0)
				break;
			ck_assert_int_eq(rc, -ENOMEM);
			zr_store_get_stats(st, &s1);
			zr_zpool_get_stats(zr_store_test_pool(st), &p1);
			/* the prepared object is gone, no node is left over */
			ck_assert_uint_eq(p1.obj_count, p0.obj_count - 1);
			ck_assert_uint_eq(p1.obj_bytes, p0.obj_bytes - p.len);
			/* (the store's nodes: the pool's own metadata may shrink
			 * with the object freed) */
			ck_assert_uint_eq(s1.meta_bytes - p1.meta_bytes,
					  s0.meta_bytes - p0.meta_bytes);
			ck_assert_uint_eq(s1.orig_data_size, s0.orig_data_size);
			ck_assert_uint_eq(s1.compr_data_size, s0.compr_data_size);
			ck_assert_uint_eq(zr_file_nblocks(f), 1 + i);
			ck_assert_int_eq(zr_file_read(f, idx[i], out), 0);
		}
		ck_assert_int_eq(rc, 0);
		/* the first index widened the root leaf, the others made
		 * the tree taller: each had an allocation to fail */
		ck_assert_int_gt(k, 0);
		ck_assert_int_eq(zr_file_read(f, idx[i], out), 1);
		ck_assert_mem_eq(b, out, bs);
		ck_assert_int_eq(zr_file_read(f, 0, out), 1);
		ck_assert_mem_eq(a, out, bs);
	}
	ck_assert_uint_eq(zr_file_nblocks(f), 1 + sizeof(idx) / sizeof(idx[0]));
	zr_file_put(f);
	zr_store_destroy(st);
	free(a);
	free(b);
	free(out);
}
END_TEST

/* Corrupt compressed data reads as -EIO, never a crash. */
START_TEST(test_corrupt)
{
	uint32_t bs = 65536;
	struct rec r;
	struct zr_store *st = mkstore(bs, 1 << 30, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_file *f;
	int len, i;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 1, in, bs);
	ck_assert_int_eq(zr_file_write(f, 0, in, ZR_WRITE_DIRTY), 0);
	len = zr_file_test_len(f, 0);
	ck_assert_int_gt(len, 0);
	ck_assert_int_eq(zr_file_test_corrupt(f, 0, (uint32_t)len, 1), -EINVAL);
	ck_assert_int_eq(zr_file_test_corrupt(f, 7, 0, 1), -ENOENT);
	for (i = 0; i < len; i++)
		ck_assert_int_eq(zr_file_test_corrupt(f, 0, (uint32_t)i, 0xa5), 0);
	ck_assert_int_eq(zr_file_read(f, 0, out), -EIO);
	/* Its writeback fails too, and the block stays dirty. */
	ck_assert_int_eq(zr_file_writeback(f), -EIO);
	ck_assert_uint_eq(r.ncalls, 0);
	ck_assert(zr_file_dirty(f));
	ck_assert_int_eq(zr_file_take_error(f), -EIO);
	/* Truncated length: the last byte flipped. */
	ck_assert_int_eq(zr_file_write(f, 1, in, ZR_WRITE_DIRTY), 0);
	len = zr_file_test_len(f, 1);
	ck_assert_int_eq(zr_file_test_corrupt(f, 1, (uint32_t)len - 1, 0xff), 0);
	i = zr_file_read(f, 1, out);
	ck_assert(i == -EIO || i == 1);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* One writer calling make_room first never passes the budget by more than a block. */
/*
 * The pool's handle table never shrinks: a budget lowered below it plus a
 * few blocks is refused, else reclaim could never make room and every
 * write would fail with ENOSPC, even with the tier empty (helper-35's
 * review). At the smallest budget taken, an emptied tier takes a write.
 */
START_TEST(test_budget_min)
{
	uint32_t bs = 4096, n = 6000;
	uint64_t budget = 256ull << 20, min, i;
	struct zr_store *st = mkstore(bs, budget, NULL);
	unsigned char *in = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < n; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_CLEAN), 0);
	}
	min = zr_store_budget_min(st);
	/* (two leaves of 4096 handles, 8 bytes each, at least) */
	ck_assert_uint_ge(min, 2 * 4096 * 8 + 4 * (uint64_t)(bs + 4096));
	ck_assert_int_eq(zr_store_set_budget(st, min - 1), -ENOSPC);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.budget, budget);
	zr_file_put(f);
	ck_assert_uint_eq(zr_store_budget_min(st), min);	/* never shrinks */
	ck_assert_int_eq(zr_store_set_budget(st, min), 0);
	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 3; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_CLEAN), 0);
	}
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

START_TEST(test_budget)
{
	uint32_t bs = 16384;
	uint64_t budget = 2 << 20, i;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (i = 0; i < 1000; i++) {
		zr_datagen_fill(ZR_DATA_MIXED, i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_le(zr_store_mem_used(st), budget + bs + 1024);
		if (i % 7 == 0 && zr_file_read(f, i / 2, out) == 1) {
			zr_datagen_fill(ZR_DATA_MIXED, i / 2, in, bs);
			ck_assert_mem_eq(in, out, bs);
		}
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_le(s.mem_used_max, budget + bs + 1024);
	ck_assert_uint_gt(s.demotions, 0);
	ck_assert_uint_eq(s.enospc, 0);
	/* Nothing dirty was dropped: every block is in RAM or was written. */
	for (i = 0; i < 1000; i++) {
		int rc = zr_file_read(f, i, out);

		ck_assert_int_ge(rc, 0);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_ge(s.writebacks + zr_file_nblocks(f), 1000 - s.blocks_zero);
	ck_assert(!zr_store_above_high(st) || s.mem_used_total > budget / 100 * 90);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/*
 * Thousands of open files, most without a block, in a small budget: the
 * records of block-less files cost nothing, and a file whose blocks went to
 * the disk gives its map back, so writes keep finding room.
 */
START_TEST(test_many_files)
{
	uint32_t bs = 4096;
	uint64_t budget = 1 << 20;
	uint64_t held = 0;
	unsigned nfiles = 8000, i;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	struct zr_file **f = xmalloc(nfiles * sizeof(*f));
	struct zr_stats s;

	for (i = 0; i < nfiles; i++)
		ck_assert_int_eq(zr_file_create(st, NULL, &f[i]), 0);
	ck_assert_uint_eq(store_meta(st), 0);
	/* One block in each of the first 2000 files: far more maps and
	 * records than the budget holds, so reclaim must free them. */
	for (i = 0; i < 2000; i++) {
		zr_datagen_fill(ZR_DATA_MIXED, i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(f[i], 0, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_le(zr_store_mem_used(st), budget + bs + 1024);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.enospc, 0);
	ck_assert_uint_le(s.mem_used_max, budget + bs + 1024);
	ck_assert_uint_gt(s.writebacks, 0);
	/* Every block is in RAM or was written back. */
	for (i = 0; i < 2000; i++) {
		ck_assert_int_ge(zr_file_read(f[i], 0, out), 0);
		held += zr_file_nblocks(f[i]);
	}
	ck_assert_uint_ge(s.writebacks + held, 2000);
	ck_assert_uint_lt(held, 2000);
	for (i = 0; i < nfiles; i++)
		zr_file_put(f[i]);
	ck_assert_uint_eq(store_meta(st), 0);
	zr_store_destroy(st);
	free(f);
	free(in);
	free(out);
}
END_TEST

/* Errors one file's writeback may get (_i picks one): EIO from a bad spot,
 * and those that may refuse every file but can be one file's too. */
static const int one_file_errs[] = { -EIO, -EDQUOT, -EROFS, -ENOSPC };

/*
 * One file whose writeback keeps failing must not give the writers of
 * other files ENOSPC: its blocks, never written, keep the lowest scores
 * and are taken first by every pass, which used to stop writing back any
 * dirty block after four failures (EIO) or at once (ENOSPC, EDQUOT,
 * EROFS). When every file is refused (a full disk), make_room ends at once
 * after the second file's failed writeback.
 */
START_TEST(test_one_bad_file)
{
	uint32_t bs = 16384;
	uint64_t budget = 1 << 20, i;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	int bad_owner, good_owner;
	struct zr_file *bad, *good;
	struct zr_stats s;
	unsigned calls;

	ck_assert_int_eq(zr_file_create(st, &bad_owner, &bad), 0);
	ck_assert_int_eq(zr_file_create(st, &good_owner, &good), 0);
	r.fail = one_file_errs[_i];
	r.fail_owner = &bad_owner;
	for (i = 0; i < 8; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, 1000 + i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(bad, i, in, ZR_WRITE_DIRTY), 0);
	}
	for (i = 0; i < 400; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(good, i, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_le(zr_store_mem_used(st), budget + bs);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.enospc, 0);
	ck_assert_uint_gt(s.writeback_errors, 0);
	/* The bad file kept all its data; its error waits for fsync. */
	ck_assert_uint_eq(zr_file_nblocks(bad), 8);
	for (i = 0; i < 8; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, 1000 + i, in, bs);
		ck_assert_int_eq(zr_file_read(bad, i, out), 1);
		ck_assert_mem_eq(in, out, bs);
	}
	ck_assert_int_eq(zr_file_take_error(bad), one_file_errs[_i]);
	ck_assert_int_eq(zr_file_take_error(good), 0);
	/* A full backing filesystem refuses everyone: ENOSPC once a second
	 * file is refused, without more tries. */
	r.fail = -ENOSPC;
	r.fail_owner = NULL;
	while (zr_store_make_room(st, bs) == 0) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_file_write(good, i++, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_lt(i, 1000);
	}
	calls = r.ncalls;
	ck_assert_int_eq(zr_store_make_room(st, bs), -ENOSPC);
	ck_assert_uint_eq(r.ncalls - calls, 2);
	zr_file_put(bad);
	zr_file_put(good);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/*
 * A filesystem mounted inside the backing directory fills up: two files
 * there refused with ENOSPC make a pass take that filesystem for full, not
 * every one. Writers of a file on the backing directory's own filesystem
 * still get room, by the writeback of their own dirty blocks; they used to
 * get ENOSPC at once (helper-59). Once that one refuses too, make_room
 * ends.
 */
START_TEST(test_full_submount)
{
	uint32_t bs = 16384;
	uint64_t budget = 1 << 20, i;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs), *out = xmalloc(bs);
	int sub1_owner, sub2_owner, good_owner;
	struct zr_file *sub1, *sub2, *good;
	struct zr_stats s;

	ck_assert_int_eq(zr_file_create(st, &sub1_owner, &sub1), 0);
	ck_assert_int_eq(zr_file_create(st, &sub2_owner, &sub2), 0);
	ck_assert_int_eq(zr_file_create(st, &good_owner, &good), 0);
	r.space1[0] = &sub1_owner;
	r.space1[1] = &sub2_owner;
	r.fail = -ENOSPC;
	r.fail_owner = &sub1_owner;
	r.fail_owner2 = &sub2_owner;
	for (i = 0; i < 16; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, 1000 + i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(i % 2 ? sub2 : sub1, i / 2, in, ZR_WRITE_DIRTY), 0);
	}
	for (i = 0; i < 400; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(good, i, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_le(zr_store_mem_used(st), budget + bs);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.enospc, 0);
	/* the refused files kept all their data */
	for (i = 0; i < 16; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, 1000 + i, in, bs);
		ck_assert_int_eq(zr_file_read(i % 2 ? sub2 : sub1, i / 2, out), 1);
		ck_assert_mem_eq(in, out, bs);
	}
	ck_assert_int_eq(zr_file_take_error(good), 0);
	/* the backing directory's filesystem fills up too: ENOSPC */
	r.fail_owner = NULL;
	r.fail_owner2 = NULL;
	while (zr_store_make_room(st, bs) == 0) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, bs);
		ck_assert_int_eq(zr_file_write(good, i++, in, ZR_WRITE_DIRTY), 0);
		ck_assert_uint_lt(i, 1000);
	}
	zr_file_put(sub1);
	zr_file_put(sub2);
	zr_file_put(good);
	zr_store_destroy(st);
	free(in);
	free(out);
}
END_TEST

/* A writer thread of test_busy_file: @n blocks into a file, each after
 * zr_store_make_room(). */
struct busy_writer {
	struct zr_store *st;
	struct zr_file *f;
	uint64_t first, n;
	uint32_t bs;
	int rc;			/* the first failure, or 0 */
	bool started, done;	/* (atomic) */
};

static void *busy_writer_run(void *arg)
{
	struct busy_writer *w = arg;
	unsigned char *in = malloc(w->bs);

	__atomic_store_n(&w->started, true, __ATOMIC_RELEASE);
	w->rc = in ? 0 : -ENOMEM;
	for (uint64_t i = w->first; i < w->first + w->n && w->rc == 0; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, i, in, w->bs);
		w->rc = zr_store_make_room(w->st, w->bs);
		if (w->rc == 0)
			w->rc = zr_file_write(w->f, i, in, ZR_WRITE_DIRTY);
	}
	free(in);
	__atomic_store_n(&w->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * A file whose I/O mutex is held for long (an fsync, a truncate, a punch
 * writing 1 GiB of zeros) must not stall the writers of other files: its
 * dirty blocks, the oldest, are taken first by reclaim, which waited for
 * the mutex with reclaim_lock held. They are passed over while other
 * blocks can go, however many the busy file has (4000 here, more than the
 * tries a pass makes before it waits would look at, were the busy file
 * sampled); when only they can go, the writer waits for the mutex rather
 * than get ENOSPC.
 */
START_TEST(test_busy_file)
{
	uint32_t bs = 16384;
	uint64_t budget = 1 << 20, i, nbusy;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_file *busy, *other;
	struct busy_writer w = { .st = st, .bs = bs };
	struct timespec ts;
	pthread_t t;

	ck_assert_int_eq(zr_file_create(st, NULL, &busy), 0);
	ck_assert_int_eq(zr_file_create(st, NULL, &other), 0);
	for (i = 0; i < 8; i++) {
		zr_datagen_fill(ZR_DATA_RANDOM, 1000 + i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(busy, i, in, ZR_WRITE_DIRTY), 0);
	}
	zr_datagen_fill(ZR_DATA_SAME, 7, in, bs);	/* (no pool, a slot each) */
	for (; i < 4008; i++)
		ck_assert_int_eq(zr_file_write(busy, i, in, ZR_WRITE_DIRTY), 0);
	nbusy = zr_file_nblocks(busy);
	ck_assert_uint_eq(nbusy, 4008);
	/* the other file's writes go past the budget many times over */
	zr_file_io_lock(busy);
	w.f = other;
	w.n = 400;
	ck_assert_int_eq(pthread_create(&t, NULL, busy_writer_run, &w), 0);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	if (pthread_timedjoin_np(t, NULL, &ts) != 0) {
		zr_file_io_unlock(busy);
		pthread_join(t, NULL);
		ck_abort_msg("the writer of another file waited for the busy file's I/O mutex");
	}
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_eq(zr_file_nblocks(busy), nbusy);
	ck_assert_uint_gt(r.ncalls, 0);
	/* Only the busy file's blocks left: a writer waits for them. */
	zr_file_drop(other, 0, UINT64_MAX);
	while (zr_store_mem_used(st) + 2 * bs < budget) {
		zr_datagen_fill(ZR_DATA_RANDOM, 1000 + i, in, bs);
		ck_assert_int_eq(zr_file_write(busy, i++, in, ZR_WRITE_DIRTY), 0);
	}
	w = (struct busy_writer){ .st = st, .f = busy, .first = i, .n = 4, .bs = bs };
	ck_assert_int_eq(pthread_create(&t, NULL, busy_writer_run, &w), 0);
	while (!__atomic_load_n(&w.started, __ATOMIC_ACQUIRE))
		usleep(1000);
	usleep(500 * 1000);	/* longer than make_room's tries (0.2 s) */
	/* (it cannot be done: all it could demote is the busy file's) */
	ck_assert_msg(!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE),
		      "the writer did not wait for the busy file (rc %d)", w.rc);
	zr_file_io_unlock(busy);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.rc, 0);
	ck_assert_uint_le(zr_store_mem_used(st), budget + bs);
	zr_file_put(busy);
	zr_file_put(other);
	zr_store_destroy(st);
	free(in);
}
END_TEST

/*
 * Recompression must not take the tier past its budget: the cold copy
 * takes new pages before the hot object's hole gives its page back, which
 * only compaction does. Both the idle pass over a tier filled to 85% and
 * the reclaim of writers (which recompresses hot dirty blocks first) once
 * peaked a third above a 4 MiB budget.
 */
START_TEST(test_recompress_budget)
{
	uint32_t bs = 16384;
	uint64_t budget = 4 << 20, slack = 2 * bs, i, n;
	struct rec r;
	struct zr_store *st = mkstore(bs, budget, &r);
	unsigned char *in = xmalloc(bs);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	for (n = 0; zr_store_mem_used(st) < budget / 100 * 85; n++) {
		zr_datagen_fill(ZR_DATA_TEXT, n, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(f, n, in, ZR_WRITE_DIRTY), 0);
	}
	(void)zr_store_recompress_idle(st, UINT64_MAX, 0);	/* marks */
	ck_assert_uint_gt(zr_store_recompress_idle(st, UINT64_MAX, 0), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_gt(s.recompressions, n / 2);
	ck_assert_uint_le(s.mem_used_max, budget + slack);
	/* Writers past the budget, with reclaim recompressing as it goes. */
	for (i = n; i < n + 2000; i++) {
		zr_datagen_fill(ZR_DATA_TEXT, i, in, bs);
		ck_assert_int_eq(zr_store_make_room(st, bs), 0);
		ck_assert_int_eq(zr_file_write(f, i, in, ZR_WRITE_DIRTY), 0);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_gt(s.writebacks, 0);
	ck_assert_uint_le(s.mem_used_max, budget + slack);
	zr_file_put(f);
	zr_store_destroy(st);
	free(in);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_config);
	tcase_add_loop_test(tc, test_roundtrip, 0, (int)ZR_ARRAY_SIZE(sizes));
	tcase_add_test(tc, test_same);
	tcase_add_test(tc, test_trim);
	tcase_add_test(tc, test_raw);
	tcase_add_test(tc, test_sparse);
	tcase_add_test(tc, test_small_leaf);
	tcase_add_test(tc, test_drop);
	tcase_add_test(tc, test_stats);
	tcase_add_test(tc, test_max_monotonic);
	tcase_add_test(tc, test_redirty);
	tcase_add_test(tc, test_enomem);
	tcase_add_test(tc, test_install_enomem);
	tcase_add_test(tc, test_corrupt);
	suite_add_tcase(s, tc);

	tc = tcase_create("writeback");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, test_writeback_runs);
	tcase_add_test(tc, test_detach);
	tcase_add_test(tc, test_detach_waits);
	tcase_add_test(tc, test_writeback_error);
	tcase_add_test(tc, test_rewrite_under_writeback);
	tcase_add_test(tc, test_writeback_flags);
	tcase_add_test(tc, test_make_room_enospc);
	tcase_add_test(tc, test_budget);
	tcase_add_test(tc, test_budget_min);
	tcase_add_test(tc, test_redirty_in_flight);
	tcase_add_test(tc, test_many_files);
	tcase_add_loop_test(tc, test_one_bad_file, 0,
			    (int)(sizeof(one_file_errs) / sizeof(one_file_errs[0])));
	tcase_add_test(tc, test_full_submount);
	tcase_add_test(tc, test_busy_file);
	tcase_add_test(tc, test_recompress_budget);
	tcase_add_test(tc, test_recompress_idle);
	tcase_add_test(tc, test_prepare_later_settle);
	tcase_add_test(tc, test_pending_idle);
	tcase_add_test(tc, test_later_trimmed);
	tcase_add_test(tc, test_settle_keeps_expiry);
	tcase_add_test(tc, test_expire_order);
	tcase_add_test(tc, test_expire_rewrite);
	tcase_add_test(tc, test_expire_batches);
	tcase_add_test(tc, test_expire_refused_waits);
	tcase_add_test(tc, test_expire_cursor);
	tcase_add_test(tc, test_settle_full_tier);
	tcase_add_test(tc, test_settle_resumes);
	tcase_add_test(tc, test_settle_cursor_put);
	tcase_add_test(tc, test_settle_enomem);
	tcase_add_test(tc, test_codec_error);
	tcase_add_test(tc, test_reclaim_pending);
	tcase_add_test(tc, test_writeback_raw_pending);
	tcase_add_test(tc, test_settle_race);
	tcase_add_test(tc, test_counts_steady);
	tcase_add_test(tc, test_recompress_more);
	tcase_add_test(tc, test_recompress_nocold);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(store_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

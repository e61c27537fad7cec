// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * check_policy.c - unit tests of the demotion policies (src/policy.c) as
 * the store uses them: adaptive beats LRU on the synthetic mix trace, LRU
 * demotes in LRU order, cold recompression comes before demotion, and the
 * GDSF score moves the right way with size, cost, frequency and ageing.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "trace.h"
#include "zr_policy.h"
#include "zr_store.h"
#include "zr_util.h"

static struct zr_store *mkstore(uint32_t bs, enum zr_policy_kind kind)
{
	struct zr_store_config cfg;
	struct zr_store *st;

	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.budget = 1 << 30;
	cfg.policy = kind;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
	return st;
}

static void put_blocks(struct zr_file *f, int kind, unsigned n, uint32_t bs)
{
	unsigned char *buf = malloc(bs);
	unsigned i;

	ck_assert_ptr_nonnull(buf);
	for (i = 0; i < n; i++) {
		zr_datagen_fill(kind, i, buf, bs);
		ck_assert_int_eq(zr_file_write(f, i, buf, ZR_WRITE_CLEAN), 0);
	}
	free(buf);
}

static void touch(struct zr_file *f, uint64_t idx, uint32_t bs)
{
	unsigned char *buf = malloc(bs);

	ck_assert_int_eq(zr_file_read(f, idx, buf), 1);
	free(buf);
}

/* The adaptive policy reads back fewer bytes than LRU on the mix trace. */
START_TEST(test_adaptive_beats_lru)
{
	struct zr_trace_opts o = { .budget = 2u << 20, .block_size = 16384, .verify = true };
	struct zr_trace_result ad, lru;
	struct zr_trace t;

	zr_trace_init(&t);
	ck_assert_int_eq(zr_trace_synthetic(&t, "mix", o.block_size, o.budget, 1), 0);
	ck_assert_uint_gt(t.n, 1000);
	o.policy = ZR_POLICY_ADAPTIVE;
	ck_assert_int_eq(zr_trace_replay(&t, &o, &ad), 0);
	o.policy = ZR_POLICY_LRU;
	ck_assert_int_eq(zr_trace_replay(&t, &o, &lru), 0);
	printf("mix trace, budget 2 MiB, 16 KiB blocks, %zu events\n", t.n);
	zr_trace_print_header(stdout);
	zr_trace_print_row(stdout, "adaptive", &ad);
	zr_trace_print_row(stdout, "lru", &lru);
	ck_assert_uint_eq(ad.verify_errors, 0);
	ck_assert_uint_eq(lru.verify_errors, 0);
	ck_assert_uint_eq(ad.errors + lru.errors, 0);
	ck_assert_uint_eq(ad.reads, lru.reads);
	ck_assert_uint_gt(ad.demotions, 0);
	ck_assert_uint_lt(ad.bytes_read_back, lru.bytes_read_back);
	ck_assert_uint_gt(ad.hits, lru.hits);
	/* Every miss reads one block back. */
	ck_assert_uint_eq(ad.bytes_read_back, (ad.reads - ad.hits) * o.block_size);
	/* The budget holds, give or take one block. */
	ck_assert_uint_le(ad.mem_used_max, o.budget + o.block_size + 4096);
	ck_assert_uint_le(lru.mem_used_max, o.budget + o.block_size + 4096);
	zr_trace_free(&t);
}
END_TEST

/* LRU demotes the least recently used block first. */
START_TEST(test_lru_order)
{
	uint32_t bs = 4096;
	struct zr_store *st = mkstore(bs, ZR_POLICY_LRU);
	static const unsigned order[] = { 3, 4, 5, 6, 7, 0, 1, 2 };
	struct zr_file *f;
	unsigned i;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	/* Raw blocks: nothing to recompress, each reclaim step drops one. */
	put_blocks(f, ZR_DATA_RANDOM, 8, bs);
	for (i = 0; i < 8; i++)
		touch(f, i, bs);
	touch(f, 0, bs);
	touch(f, 1, bs);
	touch(f, 2, bs);
	for (i = 0; i < 8; i++) {
		ck_assert_int_eq(zr_file_test_flags(f, order[i]) & ZR_SLOT_PRESENT,
				 ZR_SLOT_PRESENT);
		ck_assert_int_gt(zr_store_reclaim(st, 0, 1), 0);
		ck_assert_int_eq(zr_file_test_flags(f, order[i]), -ENOENT);
		ck_assert_uint_eq(zr_file_nblocks(f), 7 - i);
	}
	ck_assert_int_eq(zr_store_reclaim(st, 0, 1), -ENOSPC);
	zr_file_put(f);
	zr_store_destroy(st);
}
END_TEST

/* LRU over compressible blocks: recompress the oldest, then drop it. */
START_TEST(test_lru_cold_then_drop)
{
	uint32_t bs = 16384;
	struct zr_store *st = mkstore(bs, ZR_POLICY_LRU);
	struct zr_stats s;
	struct zr_file *f;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	put_blocks(f, ZR_DATA_TEXT, 4, bs);
	touch(f, 0, bs);
	ck_assert_int_gt(zr_store_reclaim(st, 0, 1), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 1) & ZR_SLOT_COLD, ZR_SLOT_COLD);
	ck_assert_int_gt(zr_store_reclaim(st, 0, 1), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 1), -ENOENT);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.recompressions, 1);
	ck_assert_uint_eq(s.demotions, 1);
	ck_assert_uint_eq(s.blocks_cold, 0);
	ck_assert_uint_eq(s.blocks_hot, 3);
	zr_file_put(f);
	zr_store_destroy(st);
}
END_TEST

/* Adaptive: every hot block is recompressed before any block is dropped. */
START_TEST(test_cold_before_demotion)
{
	uint32_t bs = 65536;
	struct zr_store *st = mkstore(bs, ZR_POLICY_ADAPTIVE);
	unsigned char *buf = malloc(bs);
	int len[4], i;
	struct zr_stats s;
	struct zr_file *f;
	int64_t freed;

	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	put_blocks(f, ZR_DATA_TEXT, 4, bs);
	for (i = 0; i < 4; i++)
		len[i] = zr_file_test_len(f, i);
	freed = zr_store_reclaim(st, 0, 4);
	ck_assert_int_gt(freed, 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.recompressions, 4);
	ck_assert_uint_eq(s.demotions, 0);
	ck_assert_uint_eq(s.blocks_cold, 4);
	ck_assert_uint_eq(s.blocks_hot, 0);
	for (i = 0; i < 4; i++) {
		ck_assert_int_eq(zr_file_test_flags(f, i) & ZR_SLOT_COLD, ZR_SLOT_COLD);
		ck_assert_int_lt(zr_file_test_len(f, i), len[i]);
		freed -= len[i] - zr_file_test_len(f, i);
		/* Cold blocks read back intact. */
		ck_assert_int_eq(zr_file_read(f, i, buf), 1);
	}
	ck_assert_int_eq(freed, 0);
	{
		unsigned char *exp = malloc(bs);

		zr_datagen_fill(ZR_DATA_TEXT, 2, exp, bs);
		ck_assert_int_eq(zr_file_read(f, 2, buf), 1);
		ck_assert_mem_eq(exp, buf, bs);
		free(exp);
	}
	ck_assert_int_gt(zr_store_reclaim(st, 0, UINT64_MAX), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.demotions, 4);
	ck_assert_uint_eq(s.recompressions, 4);
	ck_assert_uint_eq(zr_file_nblocks(f), 0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(buf);
}
END_TEST

/* Adaptive: raw blocks go before compressed ones, clean before dirty. */
START_TEST(test_adaptive_prefers)
{
	uint32_t bs = 16384;
	struct zr_store_config cfg;
	struct zr_store *st;
	unsigned char *buf = malloc(bs);
	struct zr_file *f;

	zr_store_config_default(&cfg);
	cfg.block_size = bs;
	cfg.min_saving = bs / 8;
	cfg.cold_comp = cfg.comp;	/* no recompression: straight to demotion */
	cfg.cold_level = cfg.comp_level;
	ck_assert_int_eq(zr_store_create(&cfg, NULL, NULL, &st), 0);
	ck_assert_int_eq(zr_file_create(st, NULL, &f), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 0, buf, bs);
	ck_assert_int_eq(zr_file_write(f, 0, buf, ZR_WRITE_CLEAN), 0);
	zr_datagen_fill(ZR_DATA_RANDOM, 1, buf, bs);
	ck_assert_int_eq(zr_file_write(f, 1, buf, ZR_WRITE_CLEAN), 0);
	zr_datagen_fill(ZR_DATA_TEXT, 2, buf, bs);
	ck_assert_int_eq(zr_file_write(f, 2, buf, ZR_WRITE_CLEAN), 0);
	ck_assert_int_eq(zr_file_read(f, 2, buf), 1);	/* more frequent */
	ck_assert_int_eq(zr_file_read(f, 2, buf), 1);
	ck_assert_int_gt(zr_store_reclaim(st, 0, 1), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 1), -ENOENT);	/* raw first */
	ck_assert_int_gt(zr_store_reclaim(st, 0, 1), 0);
	ck_assert_int_eq(zr_file_test_flags(f, 0), -ENOENT);	/* then the rarer */
	ck_assert_int_ge(zr_file_test_flags(f, 2), 0);
	zr_file_put(f);
	zr_store_destroy(st);
	free(buf);
}
END_TEST

static bool accept_all(struct zr_file *f)
{
	return f != NULL;
}

static bool refuse_all(struct zr_file *f)
{
	return f == NULL;
}

/* The score itself: size, cost, frequency, inflation; LRU by clock. */
START_TEST(test_scores)
{
	struct zr_policy *pol, *lru;
	struct zr_policy_view a, b;
	struct zr_policy_cand c, out;
	int i;

	ck_assert_int_eq(zr_policy_create(7, 4096, &pol), -EINVAL);
	ck_assert_int_eq(zr_policy_create(ZR_POLICY_ADAPTIVE, 4096, &pol), 0);
	ck_assert_int_eq(zr_policy_create(ZR_POLICY_LRU, 4096, &lru), 0);
	memset(&a, 0, sizeof(a));
	zr_policy_init_slot(pol, &a.ps);
	b = a;
	a.ram_bytes = 4096;
	b.ram_bytes = 1024;
	ck_assert(zr_policy_score(pol, &b) > zr_policy_score(pol, &a));	/* smaller stays */
	b.ram_bytes = 4096;
	b.dirty = true;
	ck_assert(zr_policy_score(pol, &b) > zr_policy_score(pol, &a));	/* dirty stays */
	b.dirty = false;
	zr_policy_touch(pol, &b.ps);
	ck_assert_uint_eq(b.ps.freq, 2);
	ck_assert(zr_policy_score(pol, &b) > zr_policy_score(pol, &a));	/* frequent stays */
	for (i = 0; i < 1000; i++)
		zr_policy_touch(pol, &b.ps);
	ck_assert_uint_eq(b.ps.freq, ZR_POLICY_FREQ_MAX);		/* saturates */
	/* Ageing: after demotions raise L, a new block outranks an old one. */
	zr_policy_demoted(pol, zr_policy_score(pol, &a) + 10);
	zr_policy_demoted(pol, 1.0);					/* L never drops */
	memset(&c, 0, sizeof(c));
	{
		struct zr_policy_view n = a;

		zr_policy_init_slot(pol, &n.ps);
		ck_assert(zr_policy_score(pol, &n) > zr_policy_score(pol, &a) + 9);
	}
	/* Frequency halves per decay period. */
	zr_policy_set_decay(pol, 10);
	b.ps.freq = 64;
	b.ps.atime -= 20;
	zr_policy_touch(pol, &b.ps);
	ck_assert_uint_le(b.ps.freq, 17);
	/* LRU: older scores lower. */
	memset(&a, 0, sizeof(a));
	zr_policy_init_slot(lru, &a.ps);
	b = a;
	zr_policy_touch(lru, &b.ps);
	ck_assert(zr_policy_score(lru, &a) < zr_policy_score(lru, &b));
	zr_policy_demoted(lru, 5.0);
	/* The candidate pool keeps the lowest, replaces duplicates. */
	for (i = 0; i < 40; i++) {
		c.file = (struct zr_file *)(uintptr_t)(0x1000 + 16 * (i % 3));
		c.index = (uint64_t)i;
		c.score = (double)(100 - i);
		zr_policy_offer(pol, &c);
	}
	c.file = (struct zr_file *)(uintptr_t)0x1020;
	c.index = 38;
	c.score = 0.5;
	zr_policy_offer(pol, &c);
	zr_policy_forget_file(pol, (struct zr_file *)(uintptr_t)0x1000);
	ck_assert(zr_policy_take(pol, accept_all, &out));
	ck_assert_uint_eq(out.index, 38);
	ck_assert(zr_policy_take(pol, accept_all, &out));
	ck_assert_uint_eq(out.index, 37);
	ck_assert(zr_policy_take(pol, refuse_all, &out) == false);
	ck_assert(zr_policy_take(pol, accept_all, &out) == false);
	zr_policy_forget_all(pol);
	zr_policy_destroy(pol);
	zr_policy_destroy(lru);
	zr_policy_destroy(NULL);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("policy");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_scores);
	tcase_add_test(tc, test_lru_order);
	tcase_add_test(tc, test_lru_cold_then_drop);
	tcase_add_test(tc, test_cold_before_demotion);
	tcase_add_test(tc, test_adaptive_prefers);
	tcase_add_test(tc, test_adaptive_beats_lru);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(policy_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

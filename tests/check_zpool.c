// SPDX-License-Identifier: GPL-2.0-or-later
/* check_zpool.c - unit tests of the compressed-object allocator. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datagen.h"
#include "zr_util.h"
#include "zr_zpool.h"

/* ---- helpers ---- */

static uint64_t rnd(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t *st, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)rnd(st) * n) >> 64);
}

/* A plausible compressed size of a @block byte block (see datagen.h). */
static size_t comp_size(uint64_t *st, size_t block)
{
	return zr_datagen_comp_size(st, block);
}

/* Fill @p (@n bytes) with bytes derived from @h. */
static void pattern_fill(void *p, size_t n, uint32_t h)
{
	uint64_t st = h * 0x2545f4914f6cdd1dull + n, w;
	uint8_t *b = p;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		w = rnd(&st);
		memcpy(b + i, &w, 8);
	}
	w = rnd(&st);
	memcpy(b + i, &w, n - i);
}

static bool pattern_ok(const void *p, size_t n, uint32_t h)
{
	uint64_t st = h * 0x2545f4914f6cdd1dull + n, w;
	const uint8_t *b = p;
	size_t i;

	for (i = 0; i + 8 <= n; i += 8) {
		w = rnd(&st);
		if (memcmp(b + i, &w, 8))
			return false;
	}
	w = rnd(&st);
	return memcmp(b + i, &w, n - i) == 0;
}

static void stats(struct zr_zpool *pool, struct zr_zpool_stats *st)
{
	zr_zpool_get_stats(pool, st);
	ck_assert_uint_eq(st->mem_used, st->span_bytes + st->meta_bytes);
	ck_assert_uint_ge(st->mem_used_max, st->mem_used);
	ck_assert_uint_eq(zr_zpool_mem_used(pool), st->mem_used);
}

static void alloc_fill(struct zr_zpool *pool, size_t size, uint32_t *h)
{
	void *p;

	ck_assert_int_eq(zr_zpool_alloc(pool, size, h), 0);
	ck_assert_uint_ne(*h, ZR_ZPOOL_NO_HANDLE);
	ck_assert_uint_eq(zr_zpool_obj_size(pool, *h), size);
	p = zr_zpool_map(pool, *h);
	ck_assert_ptr_nonnull(p);
	pattern_fill(p, size, *h);
	zr_zpool_unmap(pool, *h);
}

static void verify(struct zr_zpool *pool, uint32_t h, size_t size)
{
	void *p = zr_zpool_map(pool, h);

	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(zr_zpool_obj_size(pool, h), size);
	ck_assert_msg(pattern_ok(p, size, h), "handle %u size %zu corrupted",
		      h, size);
	zr_zpool_unmap(pool, h);
}

/* ---- tests ---- */

START_TEST(test_roundtrip)
{
	static const size_t sizes[] = {
		1, 2, 15, 16, 17, 100, 1023, 1024, 1025, 1040, 1041, 2047,
		2048, 2049, 4095, 4096, 4097, 8192, 12345, 32768, 65535,
		65536, 65537, 100000, 131071, 131072
	};
	enum { ROUNDS = 5, N = ZR_ARRAY_SIZE(sizes) * ROUNDS };
	struct zr_zpool *pool;
	struct zr_zpool_stats st;
	uint32_t h[N];
	unsigned i, j;

	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	for (i = 0; i < N; i++)
		alloc_fill(pool, sizes[i % ZR_ARRAY_SIZE(sizes)], &h[i]);
	for (i = 0; i < N; i++)
		for (j = i + 1; j < N; j++)
			ck_assert_uint_ne(h[i], h[j]);
	stats(pool, &st);
	ck_assert_uint_eq(st.obj_count, N);
	for (i = 0; i < N; i++)
		verify(pool, h[i], sizes[i % ZR_ARRAY_SIZE(sizes)]);
	/* Nested maps of the same pool on one thread. */
	{
		uint8_t *a = zr_zpool_map(pool, h[0]);
		uint8_t *b = zr_zpool_map(pool, h[N - 1]);

		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(b);
		ck_assert_ptr_ne(a, b);
		/* Compaction from a thread holding a mapping does nothing. */
		ck_assert_uint_eq(zr_zpool_compact(pool), 0);
		zr_zpool_unmap(pool, h[N - 1]);
		zr_zpool_unmap(pool, h[0]);
	}
	for (i = 0; i < N; i++)
		zr_zpool_free(pool, h[i]);
	stats(pool, &st);
	ck_assert_uint_eq(st.obj_count, 0);
	ck_assert_uint_eq(st.obj_bytes, 0);
	ck_assert_uint_eq(st.span_bytes, 0);
	/* A freed handle is dead. */
	ck_assert_ptr_null(zr_zpool_map(pool, h[0]));
	ck_assert_uint_eq(zr_zpool_obj_size(pool, h[0]), 0);
	zr_zpool_free(pool, h[0]);	/* double free is ignored */
	zr_zpool_destroy(pool);
}
END_TEST

START_TEST(test_invalid)
{
	struct zr_zpool *pool;
	struct zr_zpool_stats a, b;
	uint32_t h = 123;

	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	stats(pool, &a);
	ck_assert_int_eq(zr_zpool_alloc(pool, 0, &h), -EINVAL);
	ck_assert_uint_eq(h, ZR_ZPOOL_NO_HANDLE);
	h = 7;
	ck_assert_int_eq(zr_zpool_alloc(pool, ZR_ZPOOL_MAX_OBJ + 1, &h), -EINVAL);
	ck_assert_uint_eq(h, ZR_ZPOOL_NO_HANDLE);
	ck_assert_int_eq(zr_zpool_alloc(pool, SIZE_MAX, &h), -EINVAL);
	zr_zpool_free(pool, ZR_ZPOOL_NO_HANDLE);
	zr_zpool_free(pool, 0xfffffff0u);	/* never allocated */
	ck_assert_ptr_null(zr_zpool_map(pool, ZR_ZPOOL_NO_HANDLE));
	ck_assert_ptr_null(zr_zpool_map(pool, 0xfffffff0u));
	ck_assert_uint_eq(zr_zpool_obj_size(pool, ZR_ZPOOL_NO_HANDLE), 0);
	stats(pool, &b);
	ck_assert_uint_eq(a.mem_used, b.mem_used);
	ck_assert_uint_eq(b.obj_count, 0);
	zr_zpool_destroy(pool);
	zr_zpool_destroy(NULL);
}
END_TEST

/* Alloc @n objects of assorted sizes, free them all. */
static void fill_and_empty(struct zr_zpool *pool, unsigned n, uint64_t seed)
{
	uint32_t *h = calloc(n, sizeof(*h));
	uint64_t st = seed;
	unsigned i;

	ck_assert_ptr_nonnull(h);
	for (i = 0; i < n; i++)
		ck_assert_int_eq(zr_zpool_alloc(pool, 1 + rnd_below(&st, ZR_ZPOOL_MAX_OBJ),
						&h[i]), 0);
	for (i = 0; i < n; i++) {	/* free in a scrambled order */
		unsigned j = (unsigned)rnd_below(&st, n - i) + i;
		uint32_t t = h[i];

		h[i] = h[j];
		h[j] = t;
		zr_zpool_free(pool, h[i]);
	}
	free(h);
}

START_TEST(test_accounting)
{
	struct zr_zpool *pool;
	struct zr_zpool_stats base, st, st2;

	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	stats(pool, &base);
	ck_assert_uint_eq(base.span_bytes, 0);
	ck_assert_uint_gt(base.meta_bytes, 0);
	ck_assert_uint_lt(base.mem_used, 256 * 1024); /* fixed metadata */

	fill_and_empty(pool, 3000, 1);
	stats(pool, &st);
	ck_assert_uint_eq(st.span_bytes, 0);
	ck_assert_uint_eq(st.obj_bytes, 0);
	ck_assert_uint_eq(st.obj_count, 0);
	/* Only the handle table and span table pieces stay. */
	ck_assert_uint_lt(st.mem_used - base.mem_used, 128 * 1024);
	ck_assert_uint_gt(st.mem_used_max, st.mem_used + 100 * 1024 * 1024);

	/* A second round reuses handles and ids: back to the same figure. */
	fill_and_empty(pool, 3000, 2);
	stats(pool, &st2);
	ck_assert_uint_eq(st2.mem_used, st.mem_used);
	ck_assert_uint_eq(zr_zpool_compact(pool), 0);
	stats(pool, &st2);
	ck_assert_uint_eq(st2.mem_used, st.mem_used);
	ck_assert_uint_eq(st2.compactions, 1);
	zr_zpool_destroy(pool);
}
END_TEST

START_TEST(test_fault_injection)
{
	struct zr_zpool *pool;
	struct zr_zpool_stats a, b;
	uint32_t h[8], bad = 99;
	unsigned i;

	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	alloc_fill(pool, 3000, &h[0]);
	stats(pool, &a);
	zr_zpool_fail_after(pool, 3);
	for (i = 1; i <= 3; i++)
		alloc_fill(pool, 5000 * i, &h[i]);
	stats(pool, &a);
	ck_assert_int_eq(zr_zpool_alloc(pool, 100, &bad), -ENOMEM);
	ck_assert_uint_eq(bad, ZR_ZPOOL_NO_HANDLE);
	ck_assert_int_eq(zr_zpool_alloc(pool, 70000, &bad), -ENOMEM);
	stats(pool, &b);
	ck_assert_mem_eq(&a, &b, sizeof(a));	/* nothing changed */
	zr_zpool_fail_after(pool, -1);
	alloc_fill(pool, 100, &h[4]);
	for (i = 0; i <= 4; i++)
		verify(pool, h[i], i == 0 ? 3000 : i == 4 ? 100 : 5000 * i);
	for (i = 0; i <= 4; i++)
		zr_zpool_free(pool, h[i]);
	stats(pool, &b);
	ck_assert_uint_eq(b.span_bytes, 0);
	ck_assert_uint_eq(b.obj_count, 0);
	zr_zpool_fail_after(pool, 0);
	ck_assert_int_eq(zr_zpool_alloc(pool, 1, &bad), -ENOMEM);
	zr_zpool_destroy(pool);
}
END_TEST

START_TEST(test_compact_verify)
{
	enum { N = 12000 };
	struct zr_zpool *pool;
	struct zr_zpool_stats before, after;
	uint32_t *h = calloc(N, sizeof(*h));
	size_t *sz = calloc(N, sizeof(*sz));
	uint64_t st = 42, given;
	unsigned i;

	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(sz);
	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	for (i = 0; i < N; i++) {
		sz[i] = comp_size(&st, i % 3 ? 4096 : 32768);
		alloc_fill(pool, sz[i], &h[i]);
	}
	for (i = 0; i < N; i++) {
		if (rnd_below(&st, 100) < 70) {
			zr_zpool_free(pool, h[i]);
			h[i] = 0;
		}
	}
	stats(pool, &before);
	given = zr_zpool_compact(pool);
	stats(pool, &after);
	ck_assert_uint_gt(given, 0);
	ck_assert_uint_eq(before.mem_used - after.mem_used, given);
	ck_assert_uint_eq(after.pages_compacted, given / 4096);
	ck_assert_uint_eq(after.obj_bytes, before.obj_bytes);
	printf("zpool compact: %" PRIu64 " -> %" PRIu64 " bytes for %" PRIu64
	       " bytes of objects\n", before.mem_used, after.mem_used,
	       after.obj_bytes);
	for (i = 0; i < N; i++)
		if (h[i])
			verify(pool, h[i], sz[i]);
	/* Compacting a compact pool moves nothing and keeps the bytes. */
	ck_assert_uint_eq(zr_zpool_compact(pool), 0);
	for (i = 0; i < N; i++)
		if (h[i])
			verify(pool, h[i], sz[i]);
	/* Objects still allocate and free normally afterwards. */
	for (i = 0; i < N; i++) {
		if (!h[i]) {
			sz[i] = comp_size(&st, 8192);
			alloc_fill(pool, sz[i], &h[i]);
		}
	}
	for (i = 0; i < N; i++)
		verify(pool, h[i], sz[i]);
	for (i = 0; i < N; i++)
		zr_zpool_free(pool, h[i]);
	stats(pool, &after);
	ck_assert_uint_eq(after.span_bytes, 0);
	zr_zpool_destroy(pool);
	free(h);
	free(sz);
}
END_TEST

/*
 * Fill a pool with @live_mb MiB of objects of @block byte blocks, churn
 * (free a random object, allocate a new one) three times over, compact.
 * @return overhead after compaction, (mem_used - obj_bytes) / obj_bytes.
 */
static double churn(size_t block, uint64_t live_mb, uint64_t seed, bool quiet)
{
	struct zr_zpool *pool;
	struct zr_zpool_stats st;
	uint64_t rs = seed, target = live_mb << 20, live = 0, ops, i;
	size_t cap = (size_t)(target / 64) + 16, n = 0;
	uint32_t *h = malloc(cap * sizeof(*h));
	double before, after;

	ck_assert_ptr_nonnull(h);
	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	while (live < target && n < cap) {
		size_t s = comp_size(&rs, block);

		ck_assert_int_eq(zr_zpool_alloc(pool, s, &h[n]), 0);
		live += s;
		n++;
	}
	ops = 3 * n;
	for (i = 0; i < ops; i++) {
		size_t j = (size_t)rnd_below(&rs, n);

		zr_zpool_free(pool, h[j]);
		ck_assert_int_eq(zr_zpool_alloc(pool, comp_size(&rs, block), &h[j]), 0);
	}
	stats(pool, &st);
	before = (double)(st.mem_used - st.obj_bytes) / (double)st.obj_bytes;
	zr_zpool_compact(pool);
	stats(pool, &st);
	after = (double)(st.mem_used - st.obj_bytes) / (double)st.obj_bytes;
	if (!quiet)
		printf("zpool churn: block %3zu KiB, %4" PRIu64 " MiB live, %7zu objects: "
		       "overhead %.2f%% before compaction, %.2f%% after (metadata %.2f%%)\n",
		       block / 1024, st.obj_bytes >> 20, n, before * 100, after * 100,
		       100.0 * (double)st.meta_bytes / (double)st.obj_bytes);
	fflush(stdout);
	for (i = 0; i < n; i++)
		zr_zpool_free(pool, h[i]);
	stats(pool, &st);
	ck_assert_uint_eq(st.span_bytes, 0);
	zr_zpool_destroy(pool);
	free(h);
	return after;
}

static uint64_t churn_mb(void)
{
	const char *e = getenv("ZR_ZPOOL_CHURN_MB");

	return e && atoi(e) > 0 ? (uint64_t)atoi(e) : 64;
}

START_TEST(test_churn_overhead)
{
	static const size_t blocks[] = { 4096, 8192, 16384, 32768, 65536, 131072 };
	unsigned i;

	for (i = 0; i < ZR_ARRAY_SIZE(blocks); i++) {
		double o = churn(blocks[i], churn_mb(), 7 + i, false);

		ck_assert_msg(o <= 0.05, "overhead %.2f%% > 5%% (block %zu)",
			      o * 100, blocks[i]);
	}
}
END_TEST

START_TEST(test_small_pool)
{
	static const size_t blocks[] = { 4096, 131072 };
	unsigned i;

	for (i = 0; i < ZR_ARRAY_SIZE(blocks); i++) {
		double o = churn(blocks[i], 4, 99 + i, false);

		ck_assert_msg(o <= 0.15, "small pool overhead %.2f%% (block %zu)",
			      o * 100, blocks[i]);
	}
}
END_TEST

/* ---- threads ---- */

struct worker {
	struct zr_zpool *pool;
	uint64_t seed;
	unsigned iters;
	unsigned errors;
};

static int stop_compactor;

static void *worker_main(void *arg)
{
	enum { KEEP = 128 };
	struct worker *w = arg;
	uint32_t h[KEEP] = { 0 };
	size_t sz[KEEP] = { 0 };
	uint64_t st = w->seed;
	unsigned i, k;

	for (i = 0; i < w->iters; i++) {
		k = (unsigned)rnd_below(&st, KEEP);
		if (h[k]) {
			unsigned k2 = (k + 1) % KEEP;
			uint8_t *p = zr_zpool_map(w->pool, h[k]);

			if (!p || !pattern_ok(p, sz[k], h[k]))
				w->errors++;
			if (h[k2]) {	/* a nested map of a second object */
				uint8_t *q = zr_zpool_map(w->pool, h[k2]);

				if (!q || !pattern_ok(q, sz[k2], h[k2]))
					w->errors++;
				zr_zpool_unmap(w->pool, h[k2]);
			}
			zr_zpool_unmap(w->pool, h[k]);
			zr_zpool_free(w->pool, h[k]);
			h[k] = 0;
		}
		sz[k] = comp_size(&st, (size_t)4096 << rnd_below(&st, 6));
		if (zr_zpool_alloc(w->pool, sz[k], &h[k])) {
			w->errors++;
			h[k] = 0;
			continue;
		}
		{
			uint8_t *p = zr_zpool_map(w->pool, h[k]);

			if (!p) {
				w->errors++;
				continue;
			}
			pattern_fill(p, sz[k], h[k]);
			zr_zpool_unmap(w->pool, h[k]);
		}
	}
	for (k = 0; k < KEEP; k++) {
		if (!h[k])
			continue;
		uint8_t *p = zr_zpool_map(w->pool, h[k]);

		if (!p || !pattern_ok(p, sz[k], h[k]))
			w->errors++;
		zr_zpool_unmap(w->pool, h[k]);
		zr_zpool_free(w->pool, h[k]);
	}
	return NULL;
}

static void *compactor_main(void *arg)
{
	struct zr_zpool *pool = arg;

	while (!__atomic_load_n(&stop_compactor, __ATOMIC_ACQUIRE))
		zr_zpool_compact(pool);
	return NULL;
}

START_TEST(test_threads)
{
	enum { NT = 6 };
	struct zr_zpool *pool;
	struct zr_zpool_stats st;
	struct worker w[NT];
	pthread_t t[NT], ct;
	unsigned i;

	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	__atomic_store_n(&stop_compactor, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(pthread_create(&ct, NULL, compactor_main, pool), 0);
	for (i = 0; i < NT; i++) {
		w[i] = (struct worker){ .pool = pool, .seed = 1000 + i,
					.iters = 6000 };
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	__atomic_store_n(&stop_compactor, 1, __ATOMIC_RELEASE);
	pthread_join(ct, NULL);
	for (i = 0; i < NT; i++)
		ck_assert_uint_eq(w[i].errors, 0);
	stats(pool, &st);
	printf("zpool threads: %d workers, %" PRIu64 " compactions gave back %"
	       PRIu64 " pages\n", NT, st.compactions, st.pages_compacted);
	fflush(stdout);
	ck_assert_uint_eq(st.obj_count, 0);
	ck_assert_uint_eq(st.obj_bytes, 0);
	ck_assert_uint_eq(st.span_bytes, 0);
	ck_assert_uint_gt(st.compactions, 0);
	zr_zpool_destroy(pool);
}
END_TEST

START_TEST(test_timing)
{
	enum { LIVE = 20000, OPS = 200000 };
	struct zr_zpool *pool;
	uint32_t *h = calloc(LIVE, sizeof(*h));
	size_t *sz = calloc(LIVE, sizeof(*sz));
	uint64_t st = 5, t0, t1, t2;
	unsigned i, fails = 0;
	void *p;

	ck_assert_ptr_nonnull(h);
	ck_assert_ptr_nonnull(sz);
	for (i = 0; i < LIVE; i++)
		sz[i] = comp_size(&st, 4096);
	ck_assert_int_eq(zr_zpool_create(&pool), 0);
	for (i = 0; i < LIVE; i++)
		ck_assert_int_eq(zr_zpool_alloc(pool, sz[i], &h[i]), 0);
	/* No ck_assert in the timed loops: each one costs a system call. */
	t0 = zr_now_ns();
	for (i = 0; i < OPS; i++) {
		unsigned j = i % LIVE;

		zr_zpool_free(pool, h[j]);
		fails += zr_zpool_alloc(pool, sz[(i * 7u) % LIVE], &h[j]) != 0;
	}
	t1 = zr_now_ns();
	for (i = 0; i < OPS; i++) {
		p = zr_zpool_map(pool, h[i % LIVE]);
		fails += p == NULL;
		zr_zpool_unmap(pool, h[i % LIVE]);
	}
	t2 = zr_now_ns();
	ck_assert_uint_eq(fails, 0);
	printf("zpool timing: free+alloc %.0f ns, map+unmap %.0f ns (4 KiB block sizes)\n",
	       (double)(t1 - t0) / OPS, (double)(t2 - t1) / OPS);
	fflush(stdout);
	zr_zpool_destroy(pool);
	free(h);
	free(sz);
}
END_TEST

static Suite *zpool_suite(void)
{
	Suite *s = suite_create("zpool");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_invalid);
	tcase_add_test(tc, test_accounting);
	tcase_add_test(tc, test_fault_injection);
	tcase_add_test(tc, test_compact_verify);
	tcase_add_test(tc, test_churn_overhead);
	tcase_add_test(tc, test_small_pool);
	tcase_add_test(tc, test_threads);
	tcase_add_test(tc, test_timing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(zpool_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * check_stress.c - concurrency test of the block store: 8 threads write,
 * read and punch blocks of their own files and of shared ones, verifying
 * every byte, while a reclaim thread keeps a small budget and a settle
 * thread compresses the copies stored as they are. A model "disk"
 * receives the writebacks; a miss is served from it, so a lost dirty block
 * shows up as a mismatch.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datagen.h"
#include "zr_policy.h"
#include "zr_store.h"
#include "zr_util.h"

#define BS 4096u
#define NTHREADS 8
#define NSHARED 2
#define NFILES (NTHREADS + NSHARED)
#define NBLOCKS 48		/* blocks per file */
#define OPS 2500		/* per thread */
#define BUDGET (640u * 1024u)

struct model_file {
	struct zr_file *f;
	pthread_mutex_t block_lock[NBLOCKS];	/* test-side: one op per block at a time */
	uint32_t version[NBLOCKS];		/* last written (0 = hole), under block_lock */
	pthread_mutex_t disk_lock;		/* protects disk */
	unsigned char disk[NBLOCKS][BS];	/* the "backing file" */
};

static struct model_file *mf;
static struct zr_store *st;
static volatile int stop;
static uint64_t bad, enospc, wb_calls;
static unsigned bad_list;	/* violations of the dirty list's invariants */

/* Contents of version @v of a block: mixed data, stamped with the version. */
static void make_block(unsigned file, unsigned block, uint32_t v, unsigned char *buf)
{
	uint64_t seed = ((uint64_t)file << 40) ^ ((uint64_t)block << 20) ^ v;
	enum zr_datagen_kind k = zr_datagen_mixed_kind(seed);

	if (v == 0) {
		memset(buf, 0, BS);
		return;
	}
	zr_datagen_fill(k, seed, buf, BS);
	if (k != ZR_DATA_ZERO && k != ZR_DATA_SAME)
		memcpy(buf, &v, sizeof(v));
}

static int model_writeback(void *ctx, void *owner, uint64_t index,
			   unsigned nblocks, const void *buf)
{
	struct model_file *m = owner;

	(void)ctx;
	__atomic_add_fetch(&wb_calls, 1, __ATOMIC_RELAXED);
	if (index + nblocks > NBLOCKS) {
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		return -EIO;
	}
	pthread_mutex_lock(&m->disk_lock);
	memcpy(m->disk[index], buf, (size_t)nblocks * BS);
	pthread_mutex_unlock(&m->disk_lock);
	return 0;
}

static const struct zr_store_ops model_ops = { .writeback = model_writeback };

/* Read block @b of file @i and check it; caller holds its block_lock. */
static void check_block(unsigned i, unsigned b, unsigned char *buf, unsigned char *exp)
{
	struct model_file *m = &mf[i];
	int rc = zr_file_read(m->f, b, buf);

	make_block(i, b, m->version[b], exp);
	if (rc == 1) {
		if (memcmp(buf, exp, BS))
			__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		return;
	}
	if (rc != 0) {
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		return;
	}
	/* A miss: the disk must have the latest version. */
	pthread_mutex_lock(&m->disk_lock);
	memcpy(buf, m->disk[b], BS);
	pthread_mutex_unlock(&m->disk_lock);
	if (memcmp(buf, exp, BS))
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
	if (zr_store_make_room(st, BS) != 0)
		return;
	if (b % 2) {
		/* a copy stored as is, for the settler to compress (as the
		 * filesystem's fill thread does with a stream's blocks) */
		struct zr_prepared p;

		if (zr_file_prepare_later(m->f, buf, &p) == 0)
			zr_file_install(m->f, b, &p, ZR_WRITE_CLEAN);
	} else {
		zr_file_write(m->f, b, buf, ZR_WRITE_CLEAN);
	}
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg, n;
	uint64_t rng = 0x9e3779b97f4a7c15ull * (id + 1);
	unsigned char *buf = malloc(BS), *exp = malloc(BS);

	for (n = 0; n < OPS; n++) {
		/* Three ops in four on the thread's own file. */
		unsigned i = zr_datagen_below(&rng, 4) ? id
						       : NTHREADS + (unsigned)zr_datagen_below(&rng, NSHARED);
		unsigned b = (unsigned)zr_datagen_below(&rng, NBLOCKS);
		unsigned op = (unsigned)zr_datagen_below(&rng, 10);
		struct model_file *m = &mf[i];

		pthread_mutex_lock(&m->block_lock[b]);
		if (op < 4) {				/* write */
			uint32_t v = m->version[b] + 1;

			make_block(i, b, v, buf);
			while (zr_store_make_room(st, BS) != 0) {
				__atomic_add_fetch(&enospc, 1, __ATOMIC_RELAXED);
				usleep(100);
			}
			if (zr_file_write(m->f, b, buf, ZR_WRITE_DIRTY) == 0)
				m->version[b] = v;
			else
				__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
		} else if (op < 9) {			/* read */
			check_block(i, b, buf, exp);
		} else {				/* punch, as the filesystem does */
			zr_file_io_lock(m->f);
			zr_file_drop(m->f, b, 1);
			pthread_mutex_lock(&m->disk_lock);
			memset(m->disk[b], 0, BS);
			pthread_mutex_unlock(&m->disk_lock);
			m->version[b] = 0;
			zr_file_io_unlock(m->f);
		}
		pthread_mutex_unlock(&m->block_lock[b]);
	}
	free(buf);
	free(exp);
	return NULL;
}

static void *reclaimer(void *arg)
{
	unsigned n = 0;

	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		if (zr_store_above_high(st))
			zr_store_reclaim(st, BUDGET / 100 * 80, 64);
		if (++n % 50 == 0)
			zr_store_writeback_expired(st, 1);
		if (n % 200 == 0)
			zr_store_compact(st);
		if (n % 300 == 0)
			zr_store_writeback_all(st, ZR_WB_IDLE);
		if (n % 100 == 0)
			__atomic_add_fetch(&bad_list, zr_store_test_dirty_check(st),
					   __ATOMIC_RELAXED);
		usleep(200);
	}
	return NULL;
}

static bool never_stop(void *arg)
{
	(void)arg;
	return false;
}

static bool settle_stop(void *arg)
{
	(void)arg;
	return __atomic_load_n(&stop, __ATOMIC_ACQUIRE);
}

/* Compresses pending copies while the workers write, punch and read them
 * (zr_store_settle() copies a block out, compresses it without the file's
 * lock and puts it back only if the block did not change). */
static void *settler(void *arg)
{
	uint64_t *settled = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		*settled += zr_store_settle(st, settle_stop, NULL);
		usleep(50);
	}
	return NULL;
}

START_TEST(test_stress)
{
	struct zr_store_config cfg;
	pthread_t th[NTHREADS], rt, sett;
	uint64_t settled = 0;
	unsigned char *buf = malloc(BS), *exp = malloc(BS);
	struct zr_stats s;
	uint64_t blocks = 0;
	unsigned ndirty;
	unsigned i, b;

	zr_store_config_default(&cfg);
	cfg.block_size = BS;
	cfg.min_saving = BS / 8;
	cfg.budget = BUDGET;
	cfg.policy = _i ? ZR_POLICY_LRU : ZR_POLICY_ADAPTIVE;
	ck_assert_int_eq(zr_store_create(&cfg, &model_ops, NULL, &st), 0);
	mf = calloc(NFILES, sizeof(*mf));
	ck_assert_ptr_nonnull(mf);
	for (i = 0; i < NFILES; i++) {
		for (b = 0; b < NBLOCKS; b++)
			pthread_mutex_init(&mf[i].block_lock[b], NULL);
		pthread_mutex_init(&mf[i].disk_lock, NULL);
		ck_assert_int_eq(zr_file_create(st, &mf[i], &mf[i].f), 0);
	}
	bad = enospc = wb_calls = 0;
	stop = 0;
	ck_assert_int_eq(pthread_create(&rt, NULL, reclaimer, NULL), 0);
	ck_assert_int_eq(pthread_create(&sett, NULL, settler, &settled), 0);
	for (i = 0; i < NTHREADS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i), 0);
	for (i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(rt, NULL);
	pthread_join(sett, NULL);

	ck_assert_uint_eq(bad, 0);
	zr_store_get_stats(st, &s);
	printf("stress (%s): %llu demotions, %llu writebacks in %llu calls, %llu recompressions, "
	       "max %llu of %u bytes, %llu make_room retries, %llu copies settled, %llu pending\n",
	       _i ? "lru" : "adaptive",
	       (unsigned long long)s.demotions, (unsigned long long)s.writebacks,
	       (unsigned long long)wb_calls, (unsigned long long)s.recompressions,
	       (unsigned long long)s.mem_used_max, BUDGET, (unsigned long long)enospc,
	       (unsigned long long)settled, (unsigned long long)s.blocks_pending);
	ck_assert_uint_gt(settled, 0);
	ck_assert_uint_gt(s.demotions, 0);
	ck_assert_uint_gt(s.writebacks, 0);
	ck_assert_uint_eq(s.writeback_errors, 0);
	/* One block per writer past the budget at most, give or take the
	 * pool's page granularity and a map leaf each. */
	ck_assert_uint_le(s.mem_used_max, BUDGET + NTHREADS * (BS + 4096 + 512) + 16384);
	/* Every block reads back as last written, from RAM or from "disk". */
	for (i = 0; i < NFILES; i++) {
		for (b = 0; b < NBLOCKS; b++)
			check_block(i, b, buf, exp);
	}
	for (i = 0; i < NFILES; i++)
		blocks += zr_file_nblocks(mf[i].f);
	ck_assert_uint_eq(bad, 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.orig_data_size, blocks * BS);
	ck_assert_uint_eq(s.blocks_zero + s.blocks_raw + s.blocks_hot + s.blocks_cold, blocks);
	ck_assert_uint_le(s.blocks_pending, s.blocks_raw);
	/* the list of dirty files holds the dirty files (and files whose
	 * dirty blocks a punch dropped, until the expiry walk takes them off) */
	for (i = 0, ndirty = 0; i < NFILES; i++)
		ndirty += zr_file_dirty(mf[i].f);
	ck_assert_uint_ge(zr_store_test_dirty_listed(st), ndirty);
	ck_assert_uint_eq(zr_store_test_dirty_check(st), 0);
	ck_assert_uint_eq(bad_list, 0);	/* (also while the threads ran) */
	/* what is still pending settles once there is room for it (a full
	 * tier leaves them to reclaim), and reads back the same */
	(void)zr_store_reclaim(st, BUDGET / 2, UINT64_MAX);
	(void)zr_store_settle(st, never_stop, NULL);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_pending, 0);
	for (i = 0; i < NFILES; i++) {
		for (b = 0; b < NBLOCKS; b++)
			check_block(i, b, buf, exp);
	}
	ck_assert_uint_eq(bad, 0);
	ck_assert_int_eq(zr_store_writeback_all(st, ZR_WB_ALL), 0);
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.blocks_dirty, 0);
	ck_assert_int_eq(zr_store_writeback_expired(st, 0), 0);
	ck_assert_uint_eq(zr_store_test_dirty_listed(st), 0);
	ck_assert_uint_eq(s.writebacks * BS, s.bytes_written_back);
	/* The disk now has everything. */
	for (i = 0; i < NFILES; i++) {
		for (b = 0; b < NBLOCKS; b++) {
			make_block(i, b, mf[i].version[b], exp);
			ck_assert_mem_eq(mf[i].disk[b], exp, BS);
		}
		zr_file_put(mf[i].f);
	}
	zr_store_get_stats(st, &s);
	ck_assert_uint_eq(s.files, 0);
	ck_assert_uint_eq(s.orig_data_size, 0);
	ck_assert_uint_eq(s.compr_data_size, 0);
	ck_assert_uint_eq(s.blocks_zero + s.blocks_raw + s.blocks_hot + s.blocks_cold, 0);
	zr_store_destroy(st);
	for (i = 0; i < NFILES; i++) {
		for (b = 0; b < NBLOCKS; b++)
			pthread_mutex_destroy(&mf[i].block_lock[b]);
		pthread_mutex_destroy(&mf[i].disk_lock);
	}
	free(mf);
	free(buf);
	free(exp);
}
END_TEST

static Suite *stress_suite(void)
{
	Suite *s = suite_create("stress");
	TCase *tc = tcase_create("threads");

	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_stress, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(stress_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

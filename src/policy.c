// SPDX-License-Identifier: GPL-2.0-or-later
/* policy.c - demotion policies: adaptive (GreedyDual-Size-Frequency) and LRU. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "zr_policy.h"
#include "zr_util.h"

/*
 * Which block leaves RAM next
 * ---------------------------
 *
 * A perfect LRU or GDSF would keep every block in a global order (a list or
 * a heap) and touch that order on every read: a shared structure with a lock
 * taken by every reader of every file, plus two pointers per block. We do
 * what redis does for maxmemory eviction instead: approximate the order by
 * sampling, in constant memory.
 *
 * The store walks its files round-robin with a cursor (file, block index),
 * a few dozen slots per pick, and offers each sampled slot to a pool of the
 * ZR_POLICY_POOL lowest-scored candidates seen so far. The victim is the
 * lowest entry of the pool. Entries go stale: the block may have been read
 * (its atime changed), rewritten or dropped since it was sampled, so the
 * store revalidates the victim under its file lock and skips it when it was
 * touched; it will be sampled again, with its new score, on the next lap.
 * Because the cursor keeps moving, every block is looked at once per lap,
 * and the pool remembers the worst blocks of the recent past, which gives
 * an order close to the exact one at a fixed cost per demotion.
 *
 * The score is the value of keeping the block in RAM:
 *
 *   LRU:       the last-access clock. Old blocks go first, whatever their
 *              size or frequency. Kept so the adaptive policy is always
 *              measured against the classic one.
 *
 *   ADAPTIVE:  GreedyDual-Size-Frequency, H = L + freq * cost / size.
 *              - size is the RAM the block holds (its compressed length;
 *                raw blocks are the largest, so they go first: they are
 *                what zswap refuses to store at all). Zero/same blocks hold
 *                no pool memory and score as if they held a whole block
 *                times a large factor: they are dropped only when nothing
 *                else is left, to free the map's metadata.
 *              - cost is what bringing it back costs: one read for a clean
 *                block, a write plus a read for a dirty one. Dirty blocks of
 *                short-lived temporary files therefore tend to stay until
 *                the file is unlinked, and never reach the disk.
 *              - freq counts accesses. It saturates, and it is halved once
 *                per decay period of the access clock, so that a block that
 *                was hot an hour ago does not stay forever.
 *              - L, the inflation value, is raised to the H of each block
 *                demoted. A block's H is computed from the L of its last
 *                access, so blocks that are not touched fall behind newer
 *                ones as L rises: this is the ageing of GreedyDual, and it
 *                is what lets a one-time scan of large blocks pass through
 *                without pushing out a small, often-read working set.
 *
 * Scores are doubles computed on demand; the slot keeps only the clock, L
 * at the last access (a float) and the frequency (struct zr_pstate).
 *
 * Locking: the candidate pool has its own mutex, the innermost lock of the
 * store (taken under a file lock when sampling). Clock, L and the decay
 * period are relaxed atomics.
 */

/* Zero/same blocks score as a block this many times the block size. */
#define SAME_FACTOR 1024.0

struct zr_policy {
	enum zr_policy_kind kind;	/* immutable */
	uint32_t block_size;		/* immutable */
	uint32_t clock;			/* access clock, atomic */
	uint32_t decay_ticks;		/* freq halves every this many ticks, atomic */
	uint64_t inflation;		/* L as the bits of a double, atomic */
	pthread_mutex_t lock;		/* protects cand[] */
	struct zr_policy_cand cand[ZR_POLICY_POOL]; /* sorted by score, empty ones last */
	unsigned ncand;			/* entries used, under lock */
};

int zr_policy_create(enum zr_policy_kind kind, uint32_t block_size,
		     struct zr_policy **out)
{
	struct zr_policy *pol;

	if (kind != ZR_POLICY_ADAPTIVE && kind != ZR_POLICY_LRU)
		return -EINVAL;
	pol = calloc(1, sizeof(*pol));
	if (!pol)
		return -ENOMEM;
	pol->kind = kind;
	pol->block_size = block_size;
	pol->decay_ticks = 1u << 16;
	pthread_mutex_init(&pol->lock, NULL);
	*out = pol;
	return 0;
}

void zr_policy_destroy(struct zr_policy *pol)
{
	if (!pol)
		return;
	pthread_mutex_destroy(&pol->lock);
	free(pol);
}

enum zr_policy_kind zr_policy_kind(const struct zr_policy *pol)
{
	return pol->kind;
}

static double get_inflation(struct zr_policy *pol)
{
	uint64_t bits = __atomic_load_n(&pol->inflation, __ATOMIC_RELAXED);
	double d;

	memcpy(&d, &bits, sizeof(d));
	return d;
}

void zr_policy_demoted(struct zr_policy *pol, double score)
{
	uint64_t old = __atomic_load_n(&pol->inflation, __ATOMIC_RELAXED), nw;
	double cur;

	if (pol->kind != ZR_POLICY_ADAPTIVE)
		return;
	do {
		memcpy(&cur, &old, sizeof(cur));
		if (!(score > cur))
			return;		/* L never goes down */
		memcpy(&nw, &score, sizeof(nw));
	} while (!__atomic_compare_exchange_n(&pol->inflation, &old, nw, false,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
}

void zr_policy_set_decay(struct zr_policy *pol, uint32_t ticks)
{
	zr_stat_set(&pol->decay_ticks, ticks ? ticks : 1);
}

/* Frequency of @ps as of clock @now, after halving once per decay period. */
static uint32_t decayed_freq(struct zr_policy *pol, const struct zr_pstate *ps,
			     uint32_t now)
{
	uint32_t periods = (now - ps->atime) / zr_stat_read(&pol->decay_ticks);

	return periods >= 16 ? 0 : (uint32_t)ps->freq >> periods;
}

uint32_t zr_policy_clock(struct zr_policy *pol)
{
	return zr_stat_read(&pol->clock);
}

void zr_policy_init_slot(struct zr_policy *pol, struct zr_pstate *ps)
{
	ps->atime = zr_stat_add(&pol->clock, 1);
	ps->base = (float)get_inflation(pol);
	ps->freq = 1;
}

void zr_policy_touch(struct zr_policy *pol, struct zr_pstate *ps)
{
	uint32_t now = zr_stat_add(&pol->clock, 1);
	uint32_t f = decayed_freq(pol, ps, now) + 1;

	ps->freq = (uint16_t)ZR_MIN(f, ZR_POLICY_FREQ_MAX);
	ps->atime = now;
	ps->base = (float)get_inflation(pol);
}

double zr_policy_score(struct zr_policy *pol, const struct zr_policy_view *v)
{
	uint32_t now = zr_stat_read(&pol->clock);
	double size, cost, freq;

	if (pol->kind == ZR_POLICY_LRU)
		return -(double)(uint32_t)(now - v->ps.atime);
	/* In units of block_size, so a raw clean block read once scores L + 1. */
	size = v->ram_bytes ? (double)v->ram_bytes / pol->block_size
			    : 1.0 / SAME_FACTOR;
	cost = v->dirty ? 2.0 : 1.0;
	freq = (double)decayed_freq(pol, &v->ps, now);
	if (freq < 1.0)
		freq = 0.5;	/* fully aged: still worth more than nothing */
	return (double)v->ps.base + freq * cost / size;
}

void zr_policy_offer(struct zr_policy *pol, const struct zr_policy_cand *c)
{
	unsigned i, pos;

	pthread_mutex_lock(&pol->lock);
	/* Replace an entry of the same block. */
	for (i = 0; i < pol->ncand; i++) {
		if (pol->cand[i].file == c->file && pol->cand[i].index == c->index) {
			memmove(&pol->cand[i], &pol->cand[i + 1],
				(pol->ncand - i - 1) * sizeof(pol->cand[0]));
			pol->ncand--;
			break;
		}
	}
	for (pos = 0; pos < pol->ncand && pol->cand[pos].score <= c->score; pos++)
		;
	if (pos == ZR_POLICY_POOL)
		goto out;	/* worse than every candidate of a full pool */
	if (pol->ncand == ZR_POLICY_POOL)
		pol->ncand--;	/* the best-scored candidate falls out */
	memmove(&pol->cand[pos + 1], &pol->cand[pos],
		(pol->ncand - pos) * sizeof(pol->cand[0]));
	pol->cand[pos] = *c;
	pol->ncand++;
out:
	pthread_mutex_unlock(&pol->lock);
}

bool zr_policy_take(struct zr_policy *pol, bool (*try_get)(struct zr_file *),
		    struct zr_policy_cand *out)
{
	bool found = false;

	pthread_mutex_lock(&pol->lock);
	while (pol->ncand && !found) {
		struct zr_policy_cand c = pol->cand[0];

		memmove(&pol->cand[0], &pol->cand[1],
			(pol->ncand - 1) * sizeof(pol->cand[0]));
		pol->ncand--;
		if (try_get(c.file)) {
			*out = c;
			found = true;
		}
	}
	pthread_mutex_unlock(&pol->lock);
	return found;
}

void zr_policy_forget_file(struct zr_policy *pol, struct zr_file *f)
{
	unsigned i, j;

	pthread_mutex_lock(&pol->lock);
	for (i = j = 0; i < pol->ncand; i++)
		if (pol->cand[i].file != f)
			pol->cand[j++] = pol->cand[i];
	pol->ncand = j;
	pthread_mutex_unlock(&pol->lock);
}

void zr_policy_forget_all(struct zr_policy *pol)
{
	pthread_mutex_lock(&pol->lock);
	pol->ncand = 0;
	pthread_mutex_unlock(&pol->lock);
}

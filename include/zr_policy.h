/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zr_policy.h - demotion policies of the block store (internal interface).
 *
 * The store keeps a few bytes of policy state in every slot (struct
 * zr_pstate) and asks the policy two things: how much a block is worth
 * keeping (a score; the lowest goes first) and which sampled block is the
 * best victim (a small candidate pool, constant memory). The tree walk that
 * feeds the pool lives in store.c, which knows the block maps; the scoring
 * and the pool live in policy.c. See the essay at the top of policy.c.
 *
 * The second half of this header declares store hooks meant for tests
 * only (fault injection, corrupting a slot); the daemon never calls them.
 */
#ifndef ZR_POLICY_H
#define ZR_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "zr_store.h"

/* Per-slot policy state: 12 bytes, embedded in every slot. */
struct zr_pstate {
	uint32_t atime;		/* policy clock at the last access (LRU order, decay) */
	float base;		/* inflation value L at the last access (GDSF) */
	uint16_t freq;		/* accesses, saturating at ZR_POLICY_FREQ_MAX, halved as it ages */
};

#define ZR_POLICY_FREQ_MAX 255u
#define ZR_POLICY_POOL 16u	/* candidates kept in the pool */
#define ZR_POLICY_SAMPLES 32u	/* slots sampled per pick */

/* What the policy needs to know about one block to score it. */
struct zr_policy_view {
	struct zr_pstate ps;	/* copy of the slot's state */
	uint32_t ram_bytes;	/* pool bytes it holds (0 for zero/same blocks) */
	bool dirty;		/* must be written before it is dropped */
};

/* One sampled victim; @file is a struct zr_file the pool does not own. */
struct zr_policy_cand {
	struct zr_file *file;	/* NULL for an empty entry */
	uint64_t index;		/* block index in the file */
	uint32_t atime;		/* slot's atime when sampled: changed = touched since */
	double score;		/* lower = demote first */
};

struct zr_policy;

/**
 * zr_policy_create() - a policy of @kind for blocks of @block_size bytes;
 * free it with zr_policy_destroy().
 * @return 0, -EINVAL for an unknown kind, -ENOMEM.
 */
int zr_policy_create(enum zr_policy_kind kind, uint32_t block_size,
		     struct zr_policy **out);

/** Free a policy; NULL is accepted. */
void zr_policy_destroy(struct zr_policy *pol);

enum zr_policy_kind zr_policy_kind(const struct zr_policy *pol);

/**
 * zr_policy_init_slot() - state of a block just stored (counts as one
 * access). Lock-free; the caller holds the slot's file lock.
 */
void zr_policy_init_slot(struct zr_policy *pol, struct zr_pstate *ps);

/** zr_policy_touch() - record an access (read hit or rewrite). */
void zr_policy_touch(struct zr_policy *pol, struct zr_pstate *ps);

/** zr_policy_score() - value of keeping a block in RAM; lower goes first. */
double zr_policy_score(struct zr_policy *pol, const struct zr_policy_view *v);

/**
 * zr_policy_demoted() - a block of @score left RAM: raise the inflation
 * value L to it (GDSF ageing; a no-op for LRU).
 */
void zr_policy_demoted(struct zr_policy *pol, double score);

/** zr_policy_clock() - the access clock now (it moves by one per access). */
uint32_t zr_policy_clock(struct zr_policy *pol);

/** zr_policy_set_decay() - halve frequencies every @ticks accesses (>= 1). */
void zr_policy_set_decay(struct zr_policy *pol, uint32_t ticks);

/**
 * zr_policy_offer() - put a sampled block into the candidate pool when it
 * is among the ZR_POLICY_POOL lowest (an entry for the same block is
 * replaced). Takes the pool lock; callers may hold a file lock.
 */
void zr_policy_offer(struct zr_policy *pol, const struct zr_policy_cand *c);

/**
 * zr_policy_take() - remove the lowest-scored candidate whose file @try_get
 * accepts (it takes a reference; false for a file being freed: that entry
 * is discarded). Called with the pool lock held inside, so @try_get must
 * not take locks of its own beyond atomics.
 * @return true with *@out filled (the caller owns the reference), or false
 *   when the pool is empty.
 */
bool zr_policy_take(struct zr_policy *pol, bool (*try_get)(struct zr_file *),
		    struct zr_policy_cand *out);

/** zr_policy_forget_file() - drop every candidate of @f (it is being freed). */
void zr_policy_forget_file(struct zr_policy *pol, struct zr_file *f);

/** zr_policy_forget_all() - empty the candidate pool. */
void zr_policy_forget_all(struct zr_policy *pol);

/* ---- store hooks for tests only ---- */

struct zr_zpool;

/** The store's pool, for zr_zpool_fail_after() in tests. */
struct zr_zpool *zr_store_test_pool(struct zr_store *st);

/** Hold the waits after codec failures (@wait), or end them now: a test
 * then neither waits a second nor depends on how fast it runs. */
void zr_store_test_codec_wait(struct zr_store *st, bool wait);

/** Files on the list of dirty files (zr_store_writeback_expired()). */
unsigned zr_store_test_dirty_listed(struct zr_store *st);

/**
 * zr_store_test_dirty_check() - the list of dirty files' invariants: every
 * file with dirty blocks is on it (checked under each file's lock), and it
 * is in the order of the files' clocks and listing. Safe while other
 * threads work. @return the number of violations found.
 */
unsigned zr_store_test_dirty_check(struct zr_store *st);

/**
 * zr_file_test_corrupt() - XOR @mask into byte @offset of block @index's
 * stored bytes (compressed or raw). @return 0, -ENOENT when the block is
 * absent or holds no pool object, -EINVAL when @offset is past its length.
 */
int zr_file_test_corrupt(struct zr_file *f, uint64_t index, uint32_t offset,
			 uint8_t mask);

/** Flags of a stored block (ZR_SLOT_* in store.c), or -ENOENT. */
int zr_file_test_flags(struct zr_file *f, uint64_t index);

/** Stored length of a block (compressed, raw or 0 for same), or -ENOENT. */
int zr_file_test_len(struct zr_file *f, uint64_t index);

/** Bytes of block-map nodes the file holds. */
uint64_t zr_file_test_map_bytes(struct zr_file *f);

/** Bytes a file's record adds to the budget while it holds any node. */
uint64_t zr_file_test_record_bytes(void);

/* Slot flags (store.c keeps them in the slot's info word). */
#define ZR_SLOT_PRESENT		0x01u	/* the slot holds a block */
#define ZR_SLOT_SAME		0x02u	/* zero/same-filled: the pattern is in the slot, no pool memory */
#define ZR_SLOT_RAW		0x04u	/* compression saved < min_saving: stored as is */
#define ZR_SLOT_DIRTY		0x08u	/* newer than the backing file: write back before dropping */
#define ZR_SLOT_COLD		0x10u	/* recompressed with the cold codec */
#define ZR_SLOT_UNDER_WB	0x20u	/* a writeback is in flight; a rewrite clears it */
#define ZR_SLOT_IDLE		0x40u	/* not accessed since the last ZR_WB_IDLE pass */
#define ZR_SLOT_NOCOLD		0x80u	/* the cold codec did not shrink it: not tried
					 * again until the block is rewritten */
#define ZR_SLOT_TRIM		0x100u	/* compressed without its zero tail: the pool
					 * object starts with the length kept */
#define ZR_SLOT_PENDING		0x200u	/* with RAW: stored as is to be compressed
					 * later (zr_file_prepare_later()) */

#endif /* ZR_POLICY_H */

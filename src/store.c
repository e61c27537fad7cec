// SPDX-License-Identifier: GPL-2.0-or-later
/* store.c - the compressed block store: sparse block maps, slots, budget, writeback, stats. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "zr_codec.h"
#include "zr_policy.h"
#include "zr_store.h"
#include "zr_util.h"
#include "zr_zpool.h"

/*
 * Every file (inode) has a block map: a radix tree keyed by block index,
 * like the kernel's xarray. Interior nodes have 64 children; leaves hold 16
 * slots inline (384 bytes), and a hole costs nothing. The tree is as tall
 * as its highest index needs: a block at index 2^40 costs one leaf and six
 * interior nodes. A file whose only block is block 0, most of a source
 * tree, has a root leaf of a single slot (24 bytes instead of 384: 28 MB
 * less for the 78,000 files of a kernel tree), widened to a full leaf when
 * a second block arrives. Nodes and file records count as metadata against
 * the budget.
 *
 * A slot is 24 bytes: the pool handle or the same-fill pattern, one info
 * word (stored length, codec, flags) and the policy state. Stored length is
 * the compressed length (plus TRIM_HDR when trimmed, below), block_size for
 * a raw block (a pending one, ZR_SLOT_PENDING, is stored without its zero
 * tail: its length up to its last non-zero byte), 0 for a same block.
 *
 * A block that ends in TRIM_MIN or more zero bytes (the last block of most
 * files: a 5 KiB header fills a 64 KiB block to a twelfth) is compressed
 * without them (ZR_SLOT_TRIM): its pool object is the length kept (TRIM_HDR
 * bytes, native order: it never leaves RAM) followed by the compressed
 * bytes, and decoding zero-fills the rest. Compressing the 59 KiB of zeros
 * after a 5 KiB header cost lz4 6 us of 15 and 230 bytes of pool, and
 * decompressing them 5 us of 9 (2-vCPU AMD EPYC guest, 2026-12-01;
 * figures in docs/DESIGN-NOTES.md).
 *
 * Lock ordering (outermost first):
 *   0. st->expire_lock    one expiry walk at a time, never with reclaim_lock
 *   1. st->reclaim_lock   one reclaimer at a time (make_room, reclaim)
 *   2. f->io_lock         held around ops->writeback() of that file
 *   3. st->files_lock     the list of files, the sweep and settle cursors
 *   4. f->lock            the file's map and slots, nblocks, ndirty, error
 *   5. st->dirty_lock     the list of dirty files and the expiry walk's
 *                         cursor, taken under f->lock (account()) and
 *                         alone (the expiry walk)
 *   6. policy pool lock   the candidate pool (policy.c), taken under f->lock
 *   7. zpool locks        inside zr_zpool_*()
 * files_lock and f->lock are never held together in practice: the sweep
 * takes a reference under files_lock and drops it before locking the file.
 * ops->writeback() is called with only f->io_lock (and maybe reclaim_lock)
 * held: under f->lock the run is decoded into a buffer and its slots marked
 * UNDER_WB; the lock is dropped for the call; afterwards DIRTY is cleared
 * only on slots still marked UNDER_WB (a rewrite or drop in between wins).
 * zr_store_make_room() takes reclaim_lock and then io_lock/f->lock of any
 * file, so a caller must hold no lock of any file when calling it.
 *
 * Statistics are relaxed atomics updated next to the change they count;
 * zr_store_get_stats() reads them without a lock.
 */

#define LEAF_BITS 4
#define LEAF_SLOTS (1u << LEAF_BITS)
#define NODE_BITS 6
#define NODE_SLOTS (1u << NODE_BITS)
#define SMALL_LEAF_SLOTS 1u	/* a root leaf that holds block 0 only */
#define INNER 0u		/* node_alloc()/node_free() of an interior node */
#define MAX_HEIGHT 10		/* 4 + 6 * 10 >= 64 bits of index */
#define WB_RUN_BYTES (1024u * 1024u)	/* longest writeback run */
#define POOL_PAGE 4096u		/* the pool's commit granularity, added to make_room's need */
#define WB_FAIL_FILES 8		/* files failing writeback before a reclaim pass skips all dirty blocks */
#define WB_SPACES 4		/* filesystems refusing writeback a reclaim pass tells apart */
#define BUSY_TRIES (2 * ZR_POLICY_POOL + 8)	/* tries with nothing done before a reclaim pass
						 * waits for a busy file (struct wb_failed) */
#define TRIM_MIN 512u		/* shortest zero tail a block is compressed without */
#define TRIM_HDR 4u		/* bytes of the length kept, at the head of a trimmed block */

/* Info word: stored length (18 bits: up to a raw 128 KiB block), codec, flags. */
#define INFO_LEN_BITS 18
#define INFO_LEN_MASK ((1u << INFO_LEN_BITS) - 1)
#define INFO_CODEC_SHIFT INFO_LEN_BITS
#define INFO_CODEC_MASK 0x3u
#define INFO_FLAG_SHIFT (INFO_CODEC_SHIFT + 2)

struct zr_slot {
	union {
		uint32_t handle;	/* pool object (not SAME) */
		uint64_t pattern;	/* fill pattern (SAME) */
	} u;
	uint32_t info;			/* length | codec | ZR_SLOT_* flags */
	struct zr_pstate ps;		/* policy state */
};
_Static_assert(sizeof(struct zr_slot) <= 24, "a slot must stay within 24 bytes");
_Static_assert(ZR_CODEC_COUNT <= 4, "codec id must fit in 2 bits");

/* A leaf is an array of LEAF_SLOTS slots, or of root_slots for the root
 * leaf of a tree of height 0 (leaf_slots()). */

struct zr_inner {
	unsigned count;			/* non-NULL children */
	void *child[NODE_SLOTS];
};

struct zr_file {
	struct zr_store *st;		/* immutable */
	void *owner;			/* immutable, passed to the ops until
					 * detached */
	bool detached;			/* lock to set (relaxed atomic reads):
					 * the owner is going (zr_file_detach()) */
	unsigned refs;			/* atomic */
	pthread_mutex_t io_lock;	/* serializes writeback of this file */
	pthread_mutex_t lock;		/* protects everything below but the atomics */
	void *root;			/* map root: a leaf when height == 0 */
	unsigned height;		/* interior levels above the leaves */
	unsigned root_slots;		/* slots of the root leaf when height == 0:
					 * SMALL_LEAF_SLOTS or LEAF_SLOTS */
	uint64_t map_bytes;		/* bytes of nodes (heap_cost()) */
	uint64_t nblocks;		/* present blocks; atomic reads */
	uint64_t ndirty;		/* dirty blocks; atomic reads */
	uint64_t npending;		/* ZR_SLOT_PENDING blocks; atomic reads */
	uint64_t dirty_since;		/* zr_now_ms() when the file was put on the
					 * list of dirty files (dirty_append()), 0
					 * when it left; written under dirty_lock
					 * too; atomic reads */
	int error;			/* sticky writeback error */
	struct zr_file *prev, *next;	/* files_lock */
	struct zr_file *dprev, *dnext;	/* dirty_lock: the list of dirty files */
	bool dlisted;			/* on that list: written under f->lock and
					 * dirty_lock, read under either */
	uint64_t dseq;			/* dirty_lock: when it was listed (dirty_seq) */
};

struct zr_store {
	struct zr_store_config cfg;	/* immutable but cfg.budget (atomic) */
	struct zr_store_ops ops;	/* immutable; writeback NULL when none */
	void *ops_ctx;
	struct zr_zpool *pool;
	struct zr_policy *pol;
	pthread_mutex_t reclaim_lock;	/* one reclaimer at a time */
	uint32_t idle_mark;		/* reclaim_lock: policy clock at the last idle pass */
	uint32_t recomp_mark;		/* reclaim_lock: the mark the last pass used */
	uint32_t recomp_clock;		/* reclaim_lock: policy clock when a slice ended */
	bool recomp_more;		/* reclaim_lock (relaxed atomic reads): the last
					 * pass or slice stopped with idle blocks left */
	uint8_t *demote_buf;		/* reclaim_lock: demote()'s writeback runs
					 * (wb_buf_len()); NULL until first needed */
	pthread_mutex_t files_lock;	/* protects the list and the cursor */
	struct zr_file *head, *tail;	/* every live file */
	struct zr_file *cursor;		/* sweep position: file ... */
	uint64_t cursor_index;		/* ... and next block index in it */
	struct zr_file *settle_at;	/* where zr_store_settle() stopped: file ... */
	uint64_t settle_index;		/* ... and next block index in it */
	pthread_mutex_t dirty_lock;	/* protects the list of dirty files */
	struct zr_file *dirty_head, *dirty_tail;	/* files with ndirty > 0, and
					 * those a drop left clean (dirty_leave()), by
					 * dirty_since, oldest first (dirty_enter()) */
	uint64_t dirty_seq;		/* dirty_lock: files listed so far */
	struct zr_file *expire_next;	/* dirty_lock: where the running expiry
					 * walk goes on (dirty_unlink() moves it) */
	pthread_mutex_t expire_lock;	/* one expiry walk at a time (outermost) */
	uint64_t meta;			/* nodes + records of files with nodes
					 * (FILE_RECORD_BYTES); atomic */
	uint64_t nblocks;		/* present blocks of all files; atomic */
	uint64_t pending_len;		/* stored bytes of ZR_SLOT_PENDING blocks; atomic */
	uint64_t removed;		/* blocks that left the store, any way
					 * (zr_store_removed()); atomic */
	/* Per codec (enum zr_codec_id), atomics: after it failed, the time
	 * (zr_now_ms()) before which no block is given to it again
	 * (codec_failed()), 0 none; and that wait, doubled while it goes on
	 * failing, 0 once it worked. */
	uint64_t codec_retry_ms[ZR_CODEC_COUNT];
	uint32_t codec_wait_ms[ZR_CODEC_COUNT];
	struct zr_stats s;		/* counters; atomic */
};

/* ---- helpers ---- */

static inline unsigned slot_flags(const struct zr_slot *s)
{
	return s->info >> INFO_FLAG_SHIFT;
}

static inline uint32_t slot_len(const struct zr_slot *s)
{
	return s->info & INFO_LEN_MASK;
}

static inline enum zr_codec_id slot_codec(const struct zr_slot *s)
{
	return (enum zr_codec_id)((s->info >> INFO_CODEC_SHIFT) & INFO_CODEC_MASK);
}

static inline uint32_t make_info(uint32_t len, enum zr_codec_id c, unsigned flags)
{
	return len | ((uint32_t)c << INFO_CODEC_SHIFT) | (flags << INFO_FLAG_SHIFT);
}

static inline void slot_set_flags(struct zr_slot *s, unsigned set, unsigned clear)
{
	unsigned fl = (slot_flags(s) | set) & ~clear;

	s->info = (s->info & ((1u << INFO_FLAG_SHIFT) - 1)) | (fl << INFO_FLAG_SHIFT);
}

static inline bool slot_has(const struct zr_slot *s, unsigned flag)
{
	return (slot_flags(s) & flag) != 0;
}

/* Raise the high-water mark of mem_used_total to @cur. */
static void raise_max(struct zr_store *st, uint64_t cur)
{
	uint64_t old = zr_stat_read(&st->s.mem_used_max);

	while (cur > old &&
	       !__atomic_compare_exchange_n(&st->s.mem_used_max, &old, cur, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void update_max(struct zr_store *st)
{
	raise_max(st, zr_store_mem_used(st));
}

/* Take @f off the list of dirty files (the expiry walk's cursor moves on
 * past it); caller holds dirty_lock. */
static void dirty_unlink(struct zr_store *st, struct zr_file *f)
{
	if (st->expire_next == f)
		st->expire_next = f->dnext;
	if (f->dprev)
		f->dprev->dnext = f->dnext;
	else
		st->dirty_head = f->dnext;
	if (f->dnext)
		f->dnext->dprev = f->dprev;
	else
		st->dirty_tail = f->dprev;
	f->dprev = f->dnext = NULL;
	f->dlisted = false;
}

/* Put @f at the tail of the list of dirty files with its clock at now
 * (read under the lock, so the list stays in dirty_since order); caller
 * holds dirty_lock and f->lock, and @f is not listed. */
static void dirty_append(struct zr_store *st, struct zr_file *f)
{
	f->dprev = st->dirty_tail;
	f->dnext = NULL;
	if (st->dirty_tail)
		st->dirty_tail->dnext = f;
	else
		st->dirty_head = f;
	st->dirty_tail = f;
	f->dlisted = true;
	f->dseq = ++st->dirty_seq;
	zr_stat_set(&f->dirty_since, zr_now_ms());
}

/*
 * @f's ndirty became > 0: its clock starts now, at the tail of the list of
 * dirty files. A file still listed keeps its place and its clock: after a
 * truncate or punch dropped its dirty blocks, or a change turned its last
 * one clean (dirty_leave() with keep), so that a file rewritten more often
 * than dirty_expire, in place or after a truncate, is still written back
 * by age. Caller holds f->lock.
 */
static void dirty_enter(struct zr_file *f)
{
	struct zr_store *st = f->st;

	pthread_mutex_lock(&st->dirty_lock);
	if (!f->dlisted)
		dirty_append(st, f);
	pthread_mutex_unlock(&st->dirty_lock);
}

/* @f's ndirty became 0: off the list and its clock stopped, unless @keep
 * (zr_file_drop(), account_in(): the file is left listed, clean, for the
 * expiry walk to take off, or for a rewrite to find its clock). Caller
 * holds f->lock. */
static void dirty_leave(struct zr_file *f, bool keep)
{
	struct zr_store *st = f->st;

	if (keep)
		return;
	pthread_mutex_lock(&st->dirty_lock);
	zr_stat_set(&f->dirty_since, 0);
	if (f->dlisted)
		dirty_unlink(st, f);
	pthread_mutex_unlock(&st->dirty_lock);
}

/*
 * Add (@sign 1) or remove (@sign -1) the slot's contribution to the
 * store's counters. Caller holds f->lock.
 */
static void account_store(struct zr_file *f, const struct zr_slot *s, int sign)
{
	struct zr_store *st = f->st;
	unsigned fl = slot_flags(s);
	uint64_t one = (uint64_t)sign;	/* wraps for -1: add of 2^64-1 == sub */
	uint64_t *state;

	zr_stat_add(&st->s.orig_data_size, one * st->cfg.block_size);
	zr_stat_add(&st->nblocks, one);
	if (fl & ZR_SLOT_SAME)
		state = &st->s.blocks_zero;
	else if (fl & ZR_SLOT_RAW)
		state = &st->s.blocks_raw;
	else if (fl & ZR_SLOT_COLD)
		state = &st->s.blocks_cold;
	else
		state = &st->s.blocks_hot;
	zr_stat_add(state, one);
	if (fl & ZR_SLOT_PENDING) {
		zr_stat_add(&st->s.blocks_pending, one);
		zr_stat_add(&st->pending_len, one * slot_len(s));
	}
	if (!(fl & ZR_SLOT_SAME))
		zr_stat_add(&st->s.compr_data_size, one * slot_len(s));
	if (fl & ZR_SLOT_DIRTY)
		zr_stat_add(&st->s.blocks_dirty, one);
}

/* One more (@sign 1) or one fewer (-1) dirty block in @f, and its place on
 * the list of dirty files (@keep: see dirty_leave()). Caller holds f->lock. */
static void account_dirty(struct zr_file *f, int sign, bool keep)
{
	if (sign > 0 && zr_stat_add(&f->ndirty, 1) == 1)
		dirty_enter(f);
	else if (sign < 0 && zr_stat_sub(&f->ndirty, 1) == 0)
		dirty_leave(f, keep);
}

/*
 * Add (@sign 1) or remove (@sign -1) a slot that enters or leaves @f: the
 * store's counters and the file's (nblocks, npending, ndirty and the
 * file's place on the list of dirty files, @keep: see dirty_leave()).
 * Caller holds f->lock.
 */
static void account_slot(struct zr_file *f, const struct zr_slot *s, int sign, bool keep)
{
	unsigned fl = slot_flags(s);
	uint64_t one = (uint64_t)sign;

	account_store(f, s, sign);
	zr_stat_add(&f->nblocks, one);
	if (fl & ZR_SLOT_PENDING)
		zr_stat_add(&f->npending, one);
	if (fl & ZR_SLOT_DIRTY)
		account_dirty(f, sign, keep);
}

/* A slot new in @f (@sign 1) or gone from it (-1): account_slot(). */
static void account(struct zr_file *f, const struct zr_slot *s, int sign)
{
	account_slot(f, s, sign, false);
}

/*
 * account_out() ... account_in() bracket every change of a slot that stays
 * in its file (new contents, length, codec or flags). The store's counters
 * take the slot out and back in; the file's change by what changed only,
 * and never pass through zero on the way: zr_file_nblocks() and
 * zr_file_dirty() are read without the lock, and a file whose only block
 * read as gone let the sweep free its inode and drop that block, dirty,
 * and one whose only dirty block read as clean let an fsync skip it
 * (helper-23's review). A block that stays dirty keeps its file's place
 * on the list of dirty files and its dirty_expire clock: without that, a
 * file whose blocks were compressed again and again, or that was
 * rewritten more often than dirty_expire (a log appended to), was never
 * written back by age. Linux keeps the time an inode was first dirtied in
 * the same way. Caller holds f->lock from account_out() to account_in().
 * @return (account_out()) the slot's flags, for account_in().
 */
static unsigned account_out(struct zr_file *f, const struct zr_slot *s)
{
	account_store(f, s, -1);
	return slot_flags(s);
}

/* @was: what account_out() returned; @keep: a block turned clean leaves
 * its file listed (dirty_leave()). */
static void account_in(struct zr_file *f, const struct zr_slot *s, unsigned was, bool keep)
{
	unsigned now = slot_flags(s);

	account_store(f, s, 1);
	if ((was ^ now) & ZR_SLOT_PENDING)
		zr_stat_add(&f->npending, (now & ZR_SLOT_PENDING) ? 1 : (uint64_t)-1);
	if ((was ^ now) & ZR_SLOT_DIRTY)
		account_dirty(f, (now & ZR_SLOT_DIRTY) ? 1 : -1, keep);
}

/* @f's only dirty block failed its writeback: the file goes to the tail of
 * the list of dirty files with its clock at now, so that the expiry walk
 * tries it again a dirty_expire later, not at every walk. Caller holds
 * f->lock. */
static void dirty_restart(struct zr_file *f)
{
	struct zr_store *st = f->st;

	pthread_mutex_lock(&st->dirty_lock);
	if (f->dlisted)
		dirty_unlink(st, f);
	dirty_append(st, f);
	pthread_mutex_unlock(&st->dirty_lock);
}

/* Per-thread scratch: two blocks (compression output, recompression input). */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_init(void)
{
	pthread_key_create(&scratch_key, free);
}

static uint8_t *scratch(void)
{
	uint8_t *p;

	pthread_once(&scratch_once, scratch_init);
	p = pthread_getspecific(scratch_key);
	if (!p) {
		p = malloc(2 * (size_t)ZR_BLOCK_MAX);
		if (p && pthread_setspecific(scratch_key, p)) {
			free(p);
			p = NULL;
		}
	}
	return p;
}

/* Bytes of the buffer wb_run() needs: a run, at least one block. */
static size_t wb_buf_len(const struct zr_store *st)
{
	return ZR_MAX(WB_RUN_BYTES, (size_t)st->cfg.block_size);
}

/*
 * A buffer for wb_run(), mapped rather than malloc()ed: glibc maps a chunk
 * this large, but raises its threshold when it is freed and from then on
 * keeps such chunks in each thread's arena (several MiB of RSS after a few
 * threads' fsyncs). Setting the threshold with mallopt() instead cost a
 * kernel build on the mount 13 times the daemon's page faults. @return the
 * buffer (free it with wb_buf_free()), or NULL.
 */
static uint8_t *wb_buf_alloc(const struct zr_store *st)
{
	void *p = mmap(NULL, wb_buf_len(st), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void wb_buf_free(const struct zr_store *st, uint8_t *buf)
{
	if (buf)
		munmap(buf, wb_buf_len(st));
}

/* ---- the block map ---- */

static uint64_t span_max(unsigned height)
{
	unsigned bits = LEAF_BITS + NODE_BITS * height;

	return bits >= 64 ? UINT64_MAX : (1ull << bits) - 1;
}

static inline unsigned child_shift(unsigned height)
{
	return LEAF_BITS + NODE_BITS * (height - 1);
}

/* Size of a node: a leaf of @slots slots, or an interior node (INNER). */
static size_t node_size(unsigned slots)
{
	return slots ? slots * sizeof(struct zr_slot) : sizeof(struct zr_inner);
}

/* Slots of @leaf, a leaf of @f's map. */
static inline unsigned leaf_slots(const struct zr_file *f, const void *leaf)
{
	return leaf == f->root ? f->root_slots : LEAF_SLOTS;
}

/*
 * What a file costs the budget: its nodes, and its record while it has a
 * node. A file without blocks costs nothing: every open file has a record
 * until the kernel forgets the inode, and reclaim cannot free one, so
 * counting them let thousands of opened, empty files fill a small budget
 * and turn writes into ENOSPC with the disk empty. Block-less records are
 * bookkeeping like the inode table (zr_inode), outside the budget.
 */
#define FILE_RECORD_BYTES heap_cost(sizeof(struct zr_file))

/*
 * Nodes and records are counted at the size of the chunk malloc takes for
 * them, not the size asked for: glibc adds an 8-byte header and rounds up
 * to 16 bytes, 32 at least (a 24-byte root leaf takes 32, a 176-byte record
 * 192). Counted at the sizes asked for, the 78,549 files of a kernel tree
 * cost 1.9 MB more than the budget saw. The pool counts its metadata the
 * same way, from malloc_usable_size(); here the cost is worked out from
 * the size asked for, so that a node freed costs what it was charged and
 * a leaf remade the same size costs the same (a chunk glibc hands out can
 * be 16 bytes larger than asked, when the rest of a free chunk is too small
 * to keep).
 */
static size_t heap_cost(size_t n)
{
	n = (n + sizeof(size_t) + 15) & ~(size_t)15;
	return n < 32 ? 32 : n;
}

/* What @f costs the budget now (caller holds f->lock). */
static uint64_t file_cost(const struct zr_file *f)
{
	return f->map_bytes ? f->map_bytes + FILE_RECORD_BYTES : 0;
}

/* A zeroed node: a leaf of @slots slots, or an interior node (INNER).
 * Free with node_free(). @return NULL when out of memory. */
static void *node_alloc(struct zr_file *f, unsigned slots)
{
	size_t size = heap_cost(node_size(slots));
	void *p = calloc(1, node_size(slots));

	if (p) {
		zr_stat_add(&f->st->meta, size + (f->map_bytes ? 0 : FILE_RECORD_BYTES));
		f->map_bytes += size;
		update_max(f->st);
	}
	return p;
}

static void node_free(struct zr_file *f, void *p, unsigned slots)
{
	size_t size = heap_cost(node_size(slots));

	f->map_bytes -= size;
	zr_stat_sub(&f->st->meta, size + (f->map_bytes ? 0 : FILE_RECORD_BYTES));
	free(p);
}

/* Slot of @idx, present or not, or NULL when its leaf does not exist. */
static struct zr_slot *map_lookup(struct zr_file *f, uint64_t idx)
{
	void *n = f->root;
	unsigned h;

	if (!n || idx > span_max(f->height))
		return NULL;
	for (h = f->height; h > 0; h--) {
		n = ((struct zr_inner *)n)->child[(idx >> child_shift(h)) & (NODE_SLOTS - 1)];
		if (!n)
			return NULL;
	}
	if ((idx & (LEAF_SLOTS - 1)) >= leaf_slots(f, n))
		return NULL;
	return (struct zr_slot *)n + (idx & (LEAF_SLOTS - 1));
}

/* Make the root leaf (height 0) a full one. @return 0 or -ENOMEM. */
static int root_widen(struct zr_file *f)
{
	struct zr_slot *l;

	if (f->root_slots == LEAF_SLOTS)
		return 0;
	l = node_alloc(f, LEAF_SLOTS);
	if (!l)
		return -ENOMEM;
	memcpy(l, f->root, f->root_slots * sizeof(*l));
	node_free(f, f->root, f->root_slots);
	f->root = l;
	f->root_slots = LEAF_SLOTS;
	return 0;
}

static inline struct zr_slot *lookup_present(struct zr_file *f, uint64_t idx)
{
	struct zr_slot *s = map_lookup(f, idx);

	return s && slot_has(s, ZR_SLOT_PRESENT) ? s : NULL;
}

/* Slot of @idx, creating the path to it. NULL when out of memory (call
 * map_prune() then to free a half-built path). */
static struct zr_slot *map_insert(struct zr_file *f, uint64_t idx)
{
	void **link;
	unsigned h;

	if (!f->root) {
		f->height = 0;
		while (idx > span_max(f->height))
			f->height++;
	}
	/* a second block, or a taller tree (a full leaf below), needs a full
	 * root leaf */
	if (f->root && f->height == 0 && idx >= f->root_slots) {
		if (root_widen(f))
			return NULL;
	}
	while (idx > span_max(f->height)) {
		struct zr_inner *in = node_alloc(f, INNER);

		if (!in)
			return NULL;
		in->child[0] = f->root;
		in->count = 1;
		f->root = in;
		f->height++;
	}
	if (!f->root) {
		unsigned slots = LEAF_SLOTS;

		if (f->height > 0)
			slots = INNER;
		else if (idx < SMALL_LEAF_SLOTS)
			slots = SMALL_LEAF_SLOTS;
		f->root = node_alloc(f, slots);
		if (!f->root)
			return NULL;
		f->root_slots = slots;
	}
	link = &f->root;
	for (h = f->height; h > 0; h--) {
		struct zr_inner *in = *link;

		link = &in->child[(idx >> child_shift(h)) & (NODE_SLOTS - 1)];
		if (!*link) {
			*link = node_alloc(f, h == 1 ? LEAF_SLOTS : INNER);
			if (!*link)
				return NULL;
			in->count++;
		}
	}
	return (struct zr_slot *)*link + (idx & (LEAF_SLOTS - 1));
}

static bool leaf_empty(const struct zr_file *f, const struct zr_slot *l)
{
	unsigned i, n = leaf_slots(f, l);

	for (i = 0; i < n; i++)
		if (slot_has(&l[i], ZR_SLOT_PRESENT))
			return false;
	return true;
}

/* Free the empty nodes on the path to @idx, lower the tree if it can be, and
 * narrow a root leaf that holds block 0 alone. Slot pointers into the map
 * are stale afterwards. */
static void map_prune(struct zr_file *f, uint64_t idx)
{
	void *path[MAX_HEIGHT + 1];
	unsigned h, top = f->height, depth = 0;
	void *n = f->root;

	if (!n)
		return;
	/* (past the span, as when a map_insert() that was growing the tree
	 * ran out of memory: nothing to free, the tree still to lower) */
	for (h = top; idx <= span_max(top); h--) {
		path[depth++] = n;
		if (h == 0)
			break;
		n = ((struct zr_inner *)n)->child[(idx >> child_shift(h)) & (NODE_SLOTS - 1)];
		if (!n)
			break;
	}
	/* path[i] is at height top - i; walk back up freeing empty nodes. */
	while (depth > 0) {
		unsigned i = depth - 1, nh = top - i;
		void *node = path[i];
		bool empty = nh == 0 ? leaf_empty(f, node)
				     : ((struct zr_inner *)node)->count == 0;

		if (!empty)
			break;
		node_free(f, node, nh == 0 ? leaf_slots(f, node) : INNER);
		if (i == 0) {
			f->root = NULL;
			f->height = 0;
			return;
		}
		struct zr_inner *parent = path[i - 1];

		parent->child[(idx >> child_shift(nh + 1)) & (NODE_SLOTS - 1)] = NULL;
		parent->count--;
		depth--;
	}
	/* Lower the tree while the root only has its first child. */
	while (f->height > 0) {
		struct zr_inner *r = f->root;

		if (r->count != 1 || !r->child[0])
			break;
		f->root = r->child[0];
		f->height--;
		node_free(f, r, INNER);
		if (f->height == 0)
			f->root_slots = LEAF_SLOTS;	/* was a leaf below */
	}
	/* A root leaf left with block 0 alone goes back to a small one
	 * (best effort: it stays full when there is no memory). */
	if (f->root && f->height == 0 && f->root_slots > SMALL_LEAF_SLOTS) {
		struct zr_slot *l = f->root, *small;
		unsigned i;

		for (i = SMALL_LEAF_SLOTS; i < LEAF_SLOTS; i++)
			if (slot_has(&l[i], ZR_SLOT_PRESENT))
				return;
		small = node_alloc(f, SMALL_LEAF_SLOTS);
		if (!small)
			return;
		memcpy(small, l, SMALL_LEAF_SLOTS * sizeof(*l));
		node_free(f, l, LEAF_SLOTS);
		f->root = small;
		f->root_slots = SMALL_LEAF_SLOTS;
	}
}

static struct zr_slot *node_next(struct zr_file *f, void *n, unsigned h,
				 uint64_t base, uint64_t from, uint64_t *idx)
{
	unsigned i;

	if (h == 0) {
		struct zr_slot *l = n;
		unsigned slots = leaf_slots(f, l);

		for (i = from > base ? (unsigned)(from - base) : 0; i < slots; i++) {
			if (slot_has(&l[i], ZR_SLOT_PRESENT)) {
				*idx = base + i;
				return &l[i];
			}
		}
		return NULL;
	}
	unsigned sh = child_shift(h);
	struct zr_inner *in = n;

	for (i = from > base ? (unsigned)((from - base) >> sh) : 0; i < NODE_SLOTS; i++) {
		struct zr_slot *s;

		if (!in->child[i])
			continue;
		s = node_next(f, in->child[i], h - 1, base + ((uint64_t)i << sh), from, idx);
		if (s)
			return s;
	}
	return NULL;
}

/* First present slot at index >= @from, or NULL. */
static struct zr_slot *map_next(struct zr_file *f, uint64_t from, uint64_t *idx)
{
	if (!f->root || from > span_max(f->height))
		return NULL;
	return node_next(f, f->root, f->height, 0, from, idx);
}

/* Free present slot @s's pool object and clear it; its counters are the
 * caller's. @return the object's bytes. Caller holds f->lock. */
static uint32_t slot_clear(struct zr_store *st, struct zr_slot *s)
{
	uint32_t len = slot_has(s, ZR_SLOT_SAME) ? 0 : slot_len(s);

	if (!slot_has(s, ZR_SLOT_SAME))
		zr_zpool_free(st->pool, s->u.handle);
	memset(s, 0, sizeof(*s));
	return len;
}

/* Forget a present slot: counters (@keep: the file's place on the list of
 * dirty files, see dirty_leave()), pool object. The caller prunes. */
static uint32_t slot_release_as(struct zr_file *f, struct zr_slot *s, bool keep)
{
	zr_stat_add(&f->st->removed, 1);
	account_slot(f, s, -1, keep);
	return slot_clear(f->st, s);
}

static uint32_t slot_release(struct zr_file *f, struct zr_slot *s)
{
	return slot_release_as(f, s, false);
}

/* Remove block @idx (present, slot @s), @keep as for slot_release_as():
 * @return RAM bytes freed. */
static uint64_t block_remove_as(struct zr_file *f, uint64_t idx, struct zr_slot *s,
				bool keep)
{
	uint64_t before = file_cost(f);
	uint64_t freed = slot_release_as(f, s, keep);

	map_prune(f, idx);
	return freed + (before - file_cost(f));
}

static uint64_t block_remove(struct zr_file *f, uint64_t idx, struct zr_slot *s)
{
	return block_remove_as(f, idx, s, false);
}

static void node_free_all(struct zr_file *f, void *n, unsigned h)
{
	unsigned i, slots = INNER;

	if (h == 0) {
		struct zr_slot *l = n;

		slots = leaf_slots(f, l);
		for (i = 0; i < slots; i++)
			if (slot_has(&l[i], ZR_SLOT_PRESENT))
				slot_release(f, &l[i]);
	} else {
		struct zr_inner *in = n;

		for (i = 0; i < NODE_SLOTS; i++)
			if (in->child[i])
				node_free_all(f, in->child[i], h - 1);
	}
	node_free(f, n, slots);
}

/* ---- encoding and decoding one block ---- */

/* Whether @buf is one 64-bit pattern repeated; sets *@pat. */
static bool same_filled(const void *buf, size_t len, uint64_t *pat)
{
	uint64_t first, last;

	/* @buf may be unaligned (it can point into a request): load words
	 * with memcpy. Every word equals the one before it: one overlapping
	 * memcmp, which glibc vectorises, after a cheap look at both ends. */
	memcpy(&first, buf, sizeof(first));
	memcpy(&last, (const char *)buf + len - sizeof(last), sizeof(last));
	if (first != last ||
	    memcmp(buf, (const char *)buf + sizeof(first), len - sizeof(first)) != 0)
		return false;
	*pat = first;
	return true;
}

/* Fill @buf (maybe unaligned: a reply buffer) with the 64-bit pattern. */
static void fill_pattern(void *buf, size_t len, uint64_t pat)
{
	char *p = buf;
	size_t done;

	if (pat == 0) {
		memset(buf, 0, len);
		return;
	}
	memcpy(p, &pat, sizeof(pat));
	for (done = sizeof(pat); done < len; done *= 2)	/* doubling copies */
		memcpy(p + done, p, ZR_MIN(done, len - done));
}

/* Length of block @buf without its trailing zero bytes (@bs, a multiple of
 * 64; @buf may be unaligned). Of a block that does not end in zeros, only
 * the last 64 bytes are read. */
static uint32_t data_len(const uint8_t *buf, uint32_t bs)
{
	uint32_t end = bs;
	uint64_t w[8];

	while (end > 0) {
		memcpy(w, buf + end - sizeof(w), sizeof(w));
		if (w[0] | w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7])
			break;
		end -= (uint32_t)sizeof(w);
	}
	while (end > 0 && buf[end - 1] == 0)
		end--;
	return end;
}

/*
 * Compress block @buf (block_size bytes, not same-filled) with @codec at
 * @level into @dst, at most @cap bytes, without its zero tail when that is
 * TRIM_MIN or longer (then ZR_SLOT_TRIM is added to *@fl).
 * @return the stored length, or what zr_codec_compress() returns.
 */
static ssize_t block_compress(const struct zr_store *st, struct zr_codec_ctx *ctx,
			      enum zr_codec_id codec, int level, const void *buf,
			      uint8_t *dst, uint32_t cap, unsigned *fl)
{
	uint32_t bs = st->cfg.block_size, keep = data_len(buf, bs);
	ssize_t n;

	if (bs - keep < TRIM_MIN || cap <= TRIM_HDR)
		return zr_codec_compress(ctx, codec, level, buf, bs, dst, cap);
	n = zr_codec_compress(ctx, codec, level, buf, keep, dst + TRIM_HDR,
			      cap - TRIM_HDR);
	if (n <= 0)
		return n;
	memcpy(dst, &keep, TRIM_HDR);
	*fl |= ZR_SLOT_TRIM;
	return n + TRIM_HDR;
}

/*
 * Decompress a stored block (@src, @len bytes, compressed with @codec;
 * @trimmed: ZR_SLOT_TRIM) into @buf, block_size bytes.
 * @return 0, -EIO for corrupt data, -ENOMEM.
 */
static int block_expand(const struct zr_store *st, struct zr_codec_ctx *ctx,
			enum zr_codec_id codec, const uint8_t *src, uint32_t len,
			bool trimmed, void *buf)
{
	uint32_t bs = st->cfg.block_size, keep = bs;
	ssize_t n;

	if (trimmed) {
		if (len <= TRIM_HDR)
			return -EIO;
		memcpy(&keep, src, TRIM_HDR);
		if (keep == 0 || keep > bs - TRIM_MIN)
			return -EIO;
		src += TRIM_HDR;
		len -= TRIM_HDR;
	}
	n = zr_codec_decompress(ctx, codec, src, len, buf, keep);
	if (n == -ENOMEM)
		return -ENOMEM;
	if (n != (ssize_t)keep)
		return -EIO;
	memset((uint8_t *)buf + keep, 0, bs - keep);
	return 0;
}

/* Decode slot @s into @buf (block_size bytes). Caller holds f->lock.
 * @return 0, -EIO for corrupt data, -ENOMEM. */
static int slot_decode(struct zr_store *st, const struct zr_slot *s, void *buf)
{
	uint32_t bs = st->cfg.block_size;
	struct zr_codec_ctx *ctx;
	const void *src;
	int rc;

	if (slot_has(s, ZR_SLOT_SAME)) {
		fill_pattern(buf, bs, s->u.pattern);
		return 0;
	}
	src = zr_zpool_map(st->pool, s->u.handle);
	if (!src)
		return -EIO;
	if (slot_has(s, ZR_SLOT_RAW)) {
		/* (a pending block is stored without its zero tail) */
		memcpy(buf, src, slot_len(s));
		memset((uint8_t *)buf + slot_len(s), 0, bs - slot_len(s));
		zr_zpool_unmap(st->pool, s->u.handle);
		return 0;
	}
	ctx = zr_codec_ctx_thread();
	rc = ctx ? block_expand(st, ctx, slot_codec(s), src, slot_len(s),
				slot_has(s, ZR_SLOT_TRIM), buf)
		 : -ENOMEM;
	zr_zpool_unmap(st->pool, s->u.handle);
	return rc;
}

/* Copy @len bytes into a new pool object. @return 0 or -errno. */
static int pool_store(struct zr_store *st, const void *src, uint32_t len,
		      uint32_t *handle)
{
	void *dst;
	int rc = zr_zpool_alloc(st->pool, len, handle);

	if (rc)
		return rc;
	dst = zr_zpool_map(st->pool, *handle);
	memcpy(dst, src, len);
	zr_zpool_unmap(st->pool, *handle);
	return 0;
}

/* ---- configuration and the store ---- */

void zr_store_config_default(struct zr_store_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->block_size = 64u * 1024u;
	cfg->budget = zr_ram_bytes() / 2;	/* tmpfs's default size */
	if (cfg->budget < 16u * 1024u * 1024u)
		cfg->budget = 16u * 1024u * 1024u;
	cfg->comp = ZR_CODEC_LZ4;
	cfg->comp_level = 0;
	cfg->cold_comp = ZR_CODEC_ZSTD;
	cfg->cold_level = 3;
	cfg->min_saving = cfg->block_size / 8;
	cfg->policy = ZR_POLICY_ADAPTIVE;
	cfg->high_wm = 90;
	cfg->low_wm = 80;
}

static int config_check(const struct zr_store_config *c)
{
	if (c->block_size < ZR_BLOCK_MIN || c->block_size > ZR_BLOCK_MAX ||
	    (c->block_size & (c->block_size - 1)))
		return -EINVAL;
	if (c->budget == 0 || c->min_saving >= c->block_size)
		return -EINVAL;
	if ((unsigned)c->comp >= ZR_CODEC_COUNT || (unsigned)c->cold_comp >= ZR_CODEC_COUNT)
		return -EINVAL;
	if (zr_codec_level_valid(c->comp, c->comp_level, NULL, NULL) ||
	    zr_codec_level_valid(c->cold_comp, c->cold_level, NULL, NULL))
		return -EINVAL;
	if (c->policy != ZR_POLICY_ADAPTIVE && c->policy != ZR_POLICY_LRU)
		return -EINVAL;
	if (c->low_wm == 0 || c->low_wm > c->high_wm || c->high_wm > 100)
		return -EINVAL;
	return 0;
}

int zr_store_create(const struct zr_store_config *cfg,
		    const struct zr_store_ops *ops, void *ops_ctx,
		    struct zr_store **out)
{
	struct zr_store *st;
	int rc = config_check(cfg);

	if (rc)
		return rc;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->cfg = *cfg;
	if (ops)
		st->ops = *ops;
	st->ops_ctx = ops_ctx;
	rc = zr_zpool_create(&st->pool);
	if (!rc)
		rc = zr_policy_create(cfg->policy, cfg->block_size, &st->pol);
	if (rc) {
		zr_zpool_destroy(st->pool);
		free(st);
		return rc;
	}
	pthread_mutex_init(&st->reclaim_lock, NULL);
	pthread_mutex_init(&st->files_lock, NULL);
	pthread_mutex_init(&st->dirty_lock, NULL);
	pthread_mutex_init(&st->expire_lock, NULL);
	st->s.budget = cfg->budget;
	*out = st;
	return 0;
}

void zr_store_destroy(struct zr_store *st)
{
	if (!st)
		return;
	if (st->head)
		zr_log(ZR_LOG_ERR, "zr_store_destroy: %" PRIu64 " files still referenced",
		       zr_stat_read(&st->s.files));
	zr_policy_destroy(st->pol);
	zr_zpool_destroy(st->pool);
	wb_buf_free(st, st->demote_buf);
	pthread_mutex_destroy(&st->reclaim_lock);
	pthread_mutex_destroy(&st->files_lock);
	pthread_mutex_destroy(&st->dirty_lock);
	pthread_mutex_destroy(&st->expire_lock);
	free(st);
}

uint32_t zr_store_block_size(const struct zr_store *st)
{
	return st->cfg.block_size;
}

/* Blocks that must fit in the budget beside the pool's tables
 * (zr_store_budget_min()). */
#define BUDGET_MIN_BLOCKS 4

uint64_t zr_store_budget_min(struct zr_store *st)
{
	struct zr_zpool_stats ps;

	zr_zpool_get_stats(st->pool, &ps);
	return ps.fixed_bytes + BUDGET_MIN_BLOCKS * (uint64_t)(st->cfg.block_size + POOL_PAGE);
}

int zr_store_set_budget(struct zr_store *st, uint64_t budget)
{
	if (budget == 0)
		return -EINVAL;
	if (budget < zr_store_budget_min(st))
		return -ENOSPC;
	zr_stat_set(&st->cfg.budget, budget);
	zr_stat_set(&st->s.budget, budget);
	return 0;
}

uint64_t zr_store_removed(struct zr_store *st)
{
	return zr_stat_read(&st->removed);
}

uint64_t zr_store_mem_used(struct zr_store *st)
{
	return zr_zpool_mem_used(st->pool) + zr_stat_read(&st->meta);
}

void zr_store_get_stats(struct zr_store *st, struct zr_stats *out)
{
	struct zr_zpool_stats ps;
	const uint64_t *src = (const uint64_t *)&st->s;
	uint64_t *dst = (uint64_t *)out;
	size_t i;

	_Static_assert(sizeof(struct zr_stats) % sizeof(uint64_t) == 0, "stats are u64s");
	for (i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = zr_stat_read(&src[i]);
	zr_zpool_get_stats(st->pool, &ps);
	out->meta_bytes = zr_stat_read(&st->meta) + ps.meta_bytes;
	out->mem_used_total = ps.mem_used + zr_stat_read(&st->meta);
	/* the pool's spans and metadata also grow on paths that do not call
	 * update_max(): a total once reported is never above a later max */
	if (out->mem_used_max < out->mem_used_total) {
		raise_max(st, out->mem_used_total);
		out->mem_used_max = out->mem_used_total;
	}
}

bool zr_store_above_high(struct zr_store *st)
{
	uint64_t budget = zr_stat_read(&st->cfg.budget);

	return zr_store_mem_used(st) > budget / 100 * st->cfg.high_wm +
				       budget % 100 * st->cfg.high_wm / 100;
}

uint64_t zr_store_compact(struct zr_store *st)
{
	return zr_zpool_compact(st->pool);
}

/* ---- files ---- */

static bool file_try_get(struct zr_file *f)
{
	unsigned r = __atomic_load_n(&f->refs, __ATOMIC_RELAXED);

	do {
		if (r == 0)
			return false;
	} while (!__atomic_compare_exchange_n(&f->refs, &r, r + 1, false,
					      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED));
	return true;
}

int zr_file_create(struct zr_store *st, void *owner, struct zr_file **out)
{
	struct zr_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->st = st;
	f->owner = owner;
	f->refs = 1;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->io_lock, NULL);
	pthread_mutex_lock(&st->files_lock);
	f->prev = st->tail;
	if (st->tail)
		st->tail->next = f;
	else
		st->head = f;
	st->tail = f;
	pthread_mutex_unlock(&st->files_lock);
	zr_stat_add(&st->s.files, 1);
	update_max(st);
	*out = f;
	return 0;
}

void zr_file_get(struct zr_file *f)
{
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
}

void zr_file_put(struct zr_file *f)
{
	struct zr_store *st;

	if (!f || __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	st = f->st;
	/* Nobody can find the file any more once it is off the list and out
	 * of the candidate pool; both refuse a file whose count is 0. */
	pthread_mutex_lock(&st->files_lock);
	if (st->cursor == f) {
		st->cursor = f->next;
		st->cursor_index = 0;
	}
	if (st->settle_at == f) {
		st->settle_at = f->next;
		st->settle_index = 0;
	}
	if (f->prev)
		f->prev->next = f->next;
	else
		st->head = f->next;
	if (f->next)
		f->next->prev = f->prev;
	else
		st->tail = f->prev;
	pthread_mutex_unlock(&st->files_lock);
	zr_policy_forget_file(st->pol, f);
	pthread_mutex_lock(&f->lock);
	if (f->root)
		node_free_all(f, f->root, f->height);
	f->root = NULL;
	pthread_mutex_lock(&st->dirty_lock);	/* (dropped with its blocks) */
	if (f->dlisted)
		dirty_unlink(st, f);
	pthread_mutex_unlock(&st->dirty_lock);
	pthread_mutex_unlock(&f->lock);
	zr_stat_sub(&st->s.files, 1);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->io_lock);
	free(f);
}

void zr_file_io_lock(struct zr_file *f)
{
	pthread_mutex_lock(&f->io_lock);
}

void zr_file_io_unlock(struct zr_file *f)
{
	pthread_mutex_unlock(&f->io_lock);
}

bool zr_file_dirty(struct zr_file *f)
{
	return zr_stat_read(&f->ndirty) != 0;
}

uint64_t zr_file_nblocks(struct zr_file *f)
{
	return zr_stat_read(&f->nblocks);
}

uint64_t zr_file_ndirty(struct zr_file *f)
{
	return zr_stat_read(&f->ndirty);
}

/* ---- read and write ---- */

/*
 * A compressed block is copied out of the pool under f->lock and
 * decompressed after it is dropped: decompression is most of a read's
 * time, and the kernel's read-ahead sends several READs of one file at
 * once, which would otherwise take turns on the lock (a cold 1 MiB read
 * of one file used one core of two). Same-filled and raw blocks are
 * cheap enough to fill under the lock.
 */
int zr_file_read(struct zr_file *f, uint64_t index, void *buf)
{
	struct zr_store *st = f->st;
	struct zr_codec_ctx *ctx = NULL;
	enum zr_codec_id codec = ZR_CODEC_NONE;
	uint8_t *tmp = NULL;
	uint32_t len = 0;
	bool trimmed = false;
	struct zr_slot *s;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	s = lookup_present(f, index);
	if (!s) {
		pthread_mutex_unlock(&f->lock);
		zr_stat_add(&st->s.misses, 1);
		return 0;
	}
	if (slot_has(s, ZR_SLOT_SAME) || slot_has(s, ZR_SLOT_RAW)) {
		rc = slot_decode(st, s, buf);
	} else {
		const void *src = zr_zpool_map(st->pool, s->u.handle);

		tmp = scratch();
		ctx = zr_codec_ctx_thread();
		if (!src) {
			rc = -EIO;
		} else {
			if (!tmp || !ctx) {
				rc = -ENOMEM;
			} else {
				len = slot_len(s);
				codec = slot_codec(s);
				trimmed = slot_has(s, ZR_SLOT_TRIM);
				memcpy(tmp, src, len);
			}
			zr_zpool_unmap(st->pool, s->u.handle);
		}
	}
	if (rc == 0) {
		zr_policy_touch(st->pol, &s->ps);
		slot_set_flags(s, 0, ZR_SLOT_IDLE);
	}
	pthread_mutex_unlock(&f->lock);
	if (rc == 0 && len)
		rc = block_expand(st, ctx, codec, tmp, len, trimmed, buf);
	if (rc)
		return rc;
	zr_stat_add(&st->s.hits, 1);
	return 1;
}

/*
 * The write path, top to bottom: same-filled check (no allocation) ->
 * compress into the per-thread scratch with room for block_size - min_saving
 * bytes (the codec gives up early on data that will not shrink enough) ->
 * store raw if it did not -> allocate in the pool -> copy -> lock the file
 * -> free the old slot -> install. Unlike zram, the old slot is freed only
 * once the new copy is safe, so that -ENOMEM loses nothing; all the work
 * but the install is done without the file lock.
 */
int zr_file_write(struct zr_file *f, uint64_t index, const void *buf,
		  unsigned flags)
{
	return zr_file_write_raw(f, index, buf, flags, NULL);
}

_Static_assert(ZR_ZPOOL_NO_HANDLE == 0, "a zeroed struct zr_prepared holds no pool object");

#define CODEC_WAIT_MIN_MS 1000u	/* first wait after a codec failed */
#define CODEC_WAIT_MAX_MS 60000u	/* longest, while it goes on failing */

/*
 * Codec @c failed with @err (zstd could not allocate its working memory, or
 * the scratch or codec context could not be had): counted in codec_errors,
 * and no block is given to @c until a wait passes (codec_waits()): 1 s,
 * doubled while the failures go on, up to a minute, with a line in the log
 * for each. Without it, blocks left pending or hot by a failure were tried
 * again at every turn of the idle pass and of settling, which went on at
 * once: a core spent while the codec failed (helper-60). Per codec: zstd
 * short of memory does not stop lz4 (helper-62).
 */
static void codec_failed(struct zr_store *st, enum zr_codec_id c, int err)
{
	uint64_t now = zr_now_ms(), retry;
	uint32_t wait;

	zr_stat_add(&st->s.codec_errors, 1);
	if ((unsigned)c >= ZR_CODEC_COUNT)
		return;
	retry = __atomic_load_n(&st->codec_retry_ms[c], __ATOMIC_RELAXED);
	if (now < retry)
		return;	/* (another thread's failure started a wait) */
	wait = __atomic_load_n(&st->codec_wait_ms[c], __ATOMIC_RELAXED);
	wait = wait ? ZR_MIN(2 * wait, CODEC_WAIT_MAX_MS) : CODEC_WAIT_MIN_MS;
	/* one of two threads failing at once starts the wait and doubles
	 * it, not both (helper-62) */
	if (!__atomic_compare_exchange_n(&st->codec_retry_ms[c], &retry, now + wait, false,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&st->codec_wait_ms[c], wait, __ATOMIC_RELAXED);
	zr_log(ZR_LOG_WARNING, "%s failed (%s): blocks are kept uncompressed, and compressed later; tried again in %u s",
	       zr_codec_name(c), strerror(-err), wait / 1000);
}

/* Whether codec @c failed less than its wait ago (codec_failed()). On
 * every block written: the clock is read only once a codec has failed. */
static bool codec_waits(struct zr_store *st, enum zr_codec_id c)
{
	uint64_t retry;

	if ((unsigned)c >= ZR_CODEC_COUNT)
		return false;
	retry = __atomic_load_n(&st->codec_retry_ms[c], __ATOMIC_RELAXED);
	return retry && retry > zr_now_ms();
}

/* Codec @c worked: its next failure waits the shortest time again. */
static void codec_worked(struct zr_store *st, enum zr_codec_id c)
{
	if ((unsigned)c < ZR_CODEC_COUNT &&
	    __atomic_load_n(&st->codec_wait_ms[c], __ATOMIC_RELAXED))
		__atomic_store_n(&st->codec_wait_ms[c], 0, __ATOMIC_RELAXED);
}

/* The codec the idle pass gives blocks to: the cold one, or the hot one
 * for pending blocks when there is none (recompress()). */
static enum zr_codec_id idle_codec(const struct zr_store *st)
{
	return st->cfg.cold_comp != ZR_CODEC_NONE ? st->cfg.cold_comp : st->cfg.comp;
}

/*
 * zr_file_prepare() and, with @later, zr_file_prepare_later(): a same-filled
 * block as its pattern; otherwise compressed (unless @later or comp=none)
 * and stored raw when that did not save min_saving, pending when @later.
 * A codec that fails (zstd out of memory for its context, or any error but
 * "did not fit") does not fail the write: the block is stored raw and
 * pending, to be compressed later (codec_failed()); so is it, without a
 * try, while the wait after such a failure lasts. A failed WRITE would be
 * worse than a big block: with the writeback cache the kernel drops the
 * pages it could not write.
 */
static int prepare(struct zr_file *f, const void *buf, struct zr_prepared *p, bool later)
{
	struct zr_store *st = f->st;
	uint32_t bs = st->cfg.block_size;
	const void *src = buf;
	ssize_t n = -ENOSPC;
	int rc;

	memset(p, 0, sizeof(*p));
	p->handle = ZR_ZPOOL_NO_HANDLE;
	p->codec = ZR_CODEC_NONE;
	p->fl = ZR_SLOT_PRESENT;
	if (same_filled(buf, bs, &p->pat)) {
		p->fl |= ZR_SLOT_SAME;
		return 0;
	}
	if (st->cfg.comp != ZR_CODEC_NONE && !later && codec_waits(st, st->cfg.comp))
		later = true;
	if (st->cfg.comp != ZR_CODEC_NONE && !later) {
		uint8_t *tmp = scratch();
		struct zr_codec_ctx *ctx = zr_codec_ctx_thread();

		n = tmp && ctx ? block_compress(st, ctx, st->cfg.comp, st->cfg.comp_level,
						buf, tmp, bs - st->cfg.min_saving, &p->fl)
			       : -ENOMEM;
		if (n > 0) {
			src = tmp;
			p->len = (uint32_t)n;
			p->codec = st->cfg.comp;
			codec_worked(st, st->cfg.comp);
		} else if (n != -ENOSPC) {
			codec_failed(st, st->cfg.comp, (int)n);
			later = true;	/* raw and pending, as below */
			n = -ENOSPC;
		}
	}
	if (n == -ENOSPC) {	/* did not save min_saving, or not tried: raw */
		p->fl |= ZR_SLOT_RAW;
		/* (comp=none: raw for good, nothing to do later) */
		if (later && st->cfg.comp != ZR_CODEC_NONE)
			p->fl |= ZR_SLOT_PENDING;
		/* stored later: without its zero tail, as a small file's
		 * block is mostly that (a memcpy of it and of the pages it
		 * touches cost more than lz4) */
		p->len = later ? data_len(buf, bs) : bs;
	}
	rc = pool_store(st, src, p->len, &p->handle);
	if (rc)
		p->handle = ZR_ZPOOL_NO_HANDLE;	/* (holds nothing) */
	return rc;
}

int zr_file_prepare(struct zr_file *f, const void *buf, struct zr_prepared *p)
{
	return prepare(f, buf, p, false);
}

int zr_file_prepare_later(struct zr_file *f, const void *buf, struct zr_prepared *p)
{
	return prepare(f, buf, p, true);
}

bool zr_prepared_incompressible(const struct zr_prepared *p)
{
	return (p->fl & (ZR_SLOT_RAW | ZR_SLOT_PENDING)) == ZR_SLOT_RAW;
}

void zr_file_unprepare(struct zr_file *f, struct zr_prepared *p)
{
	if (p->handle != ZR_ZPOOL_NO_HANDLE)
		zr_zpool_free(f->st->pool, p->handle);
	p->handle = ZR_ZPOOL_NO_HANDLE;
}

int zr_file_install(struct zr_file *f, uint64_t index, struct zr_prepared *p,
		    unsigned flags)
{
	struct zr_store *st = f->st;
	bool clean = flags & ZR_WRITE_CLEAN, replaced = false;
	unsigned fl = p->fl | (clean ? 0 : ZR_SLOT_DIRTY);
	struct zr_slot *s, old;
	unsigned was = 0;

	pthread_mutex_lock(&f->lock);
	s = map_insert(f, index);
	if (!s) {
		map_prune(f, index);
		pthread_mutex_unlock(&f->lock);
		zr_file_unprepare(f, p);
		return -ENOMEM;
	}
	if (slot_has(s, ZR_SLOT_PRESENT)) {
		if (clean) {	/* raced with a writer: its data wins */
			pthread_mutex_unlock(&f->lock);
			zr_file_unprepare(f, p);
			return 0;
		}
		/* (a rewrite: account_out() ... account_in()) */
		old = *s;
		was = account_out(f, s);
		slot_clear(st, s);
		s->ps = old.ps;
		zr_policy_touch(st->pol, &s->ps);
		replaced = true;
	} else {
		zr_policy_init_slot(st->pol, &s->ps);
	}
	if (fl & ZR_SLOT_SAME)
		s->u.pattern = p->pat;
	else
		s->u.handle = p->handle;
	s->info = make_info(p->len, p->codec, fl);
	p->handle = ZR_ZPOOL_NO_HANDLE;	/* the slot's now */
	if (replaced)
		account_in(f, s, was, true);
	else
		account(f, s, 1);
	pthread_mutex_unlock(&f->lock);
	update_max(st);
	return 0;
}

int zr_file_write_raw(struct zr_file *f, uint64_t index, const void *buf,
		      unsigned flags, bool *raw)
{
	struct zr_prepared p;
	int rc;

	/* a clean fill never replaces what is there */
	if ((flags & ZR_WRITE_CLEAN) && zr_file_has(f, index))
		return 0;
	if (raw)
		*raw = false;
	rc = zr_file_prepare(f, buf, &p);
	if (rc)
		return rc;
	if (raw)
		*raw = zr_prepared_incompressible(&p);
	return zr_file_install(f, index, &p, flags);
}

void zr_file_drop(struct zr_file *f, uint64_t first, uint64_t count)
{
	uint64_t last = (count == UINT64_MAX || first + count < first)
				? UINT64_MAX : first + count - 1;
	uint64_t idx, pos = first;
	struct zr_slot *s;

	if (count == 0)
		return;
	pthread_mutex_lock(&f->lock);
	while ((s = map_next(f, pos, &idx)) && idx <= last) {
		/* (the file keeps its clock: dirty_enter()) */
		block_remove_as(f, idx, s, true);
		if (idx == UINT64_MAX)
			break;
		pos = idx + 1;
	}
	pthread_mutex_unlock(&f->lock);
}

void zr_file_detach(struct zr_file *f)
{
	/* first, so that a writeback of the file in flight stops at its next
	 * run (file_writeback()) and the one starting makes no callback */
	pthread_mutex_lock(&f->lock);
	__atomic_store_n(&f->detached, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&f->lock);
	pthread_mutex_lock(&f->io_lock);
	zr_file_drop(f, 0, UINT64_MAX);
	pthread_mutex_unlock(&f->io_lock);
}

int zr_file_next_present(struct zr_file *f, uint64_t from, uint64_t *index)
{
	int found;

	pthread_mutex_lock(&f->lock);
	found = map_next(f, from, index) != NULL;
	pthread_mutex_unlock(&f->lock);
	return found;
}

bool zr_file_has(struct zr_file *f, uint64_t index)
{
	bool has;

	pthread_mutex_lock(&f->lock);
	has = lookup_present(f, index) != NULL;
	pthread_mutex_unlock(&f->lock);
	return has;
}

uint64_t zr_file_dirty_end(struct zr_file *f)
{
	uint64_t idx, pos = 0, end = 0;
	struct zr_slot *s;

	pthread_mutex_lock(&f->lock);
	while (f->ndirty && (s = map_next(f, pos, &idx))) {
		if (slot_has(s, ZR_SLOT_DIRTY))
			end = idx + 1;
		if (idx == UINT64_MAX)
			break;
		pos = idx + 1;
	}
	pthread_mutex_unlock(&f->lock);
	return end;
}

int zr_file_take_error(struct zr_file *f)
{
	int e;

	pthread_mutex_lock(&f->lock);
	e = f->error;
	f->error = 0;
	pthread_mutex_unlock(&f->lock);
	return e;
}

void zr_file_note_error(struct zr_file *f, int err)
{
	pthread_mutex_lock(&f->lock);
	if (!f->error)
		f->error = err;
	pthread_mutex_unlock(&f->lock);
}

/* ---- writeback ---- */

/* Whether a dirty slot is chosen by the ZR_WB_* filter of @flags. */
static bool wb_selected(const struct zr_slot *s, unsigned flags)
{
	if (flags & ZR_WB_ALL)
		return true;
	if ((flags & ZR_WB_IDLE) && !slot_has(s, ZR_SLOT_IDLE))
		return false;
	/* (a pending block is raw only until it is compressed) */
	if ((flags & ZR_WB_RAW) && (!slot_has(s, ZR_SLOT_RAW) || slot_has(s, ZR_SLOT_PENDING)))
		return false;
	return (flags & (ZR_WB_IDLE | ZR_WB_RAW)) != 0;
}

static inline bool wb_ready(const struct zr_slot *s, unsigned flags)
{
	return s && slot_has(s, ZR_SLOT_DIRTY) && !slot_has(s, ZR_SLOT_UNDER_WB) &&
	       wb_selected(s, flags);
}

/*
 * Write back one run of adjacent dirty blocks chosen by @flags: the first
 * at or after *@pos (or, when @back, the run around block *@pos, extended
 * backwards as well). @buf holds wb_buf_len() bytes. Caller holds f->io_lock and
 * not f->lock. On return *@pos is past the run; *@found says whether there
 * was one. With ZR_WB_DROP the blocks are dropped once written.
 * @return 0 or the -errno of the writeback (the blocks stay dirty).
 */
static int wb_run(struct zr_file *f, uint64_t *pos, unsigned flags, bool back,
		  uint8_t *buf, bool *found)
{
	struct zr_store *st = f->st;
	uint32_t bs = st->cfg.block_size;
	unsigned maxn = ZR_MAX(WB_RUN_BYTES / bs, 1u), n = 0, i;
	uint64_t start = *pos, idx;
	struct zr_slot *s;
	unsigned was;
	bool detached;
	int rc = 0;

	*found = false;
	pthread_mutex_lock(&f->lock);
	detached = f->detached;	/* (true: the blocks are dropped next) */
	if (back) {
		if (!wb_ready(lookup_present(f, start), flags)) {
			pthread_mutex_unlock(&f->lock);
			*pos = start + 1;
			return 0;
		}
		while (start > 0 && *pos - start + 1 < maxn &&
		       wb_ready(lookup_present(f, start - 1), flags))
			start--;
	} else {
		for (;;) {
			s = map_next(f, start, &idx);
			if (!s) {
				pthread_mutex_unlock(&f->lock);
				*pos = UINT64_MAX;
				return 0;
			}
			if (wb_ready(s, flags))
				break;
			if (idx == UINT64_MAX) {
				pthread_mutex_unlock(&f->lock);
				*pos = UINT64_MAX;
				return 0;
			}
			start = idx + 1;
		}
		start = idx;
	}
	for (n = 0; n < maxn && (n == 0 || start + n != 0); n++) {
		s = lookup_present(f, start + n);
		if (!wb_ready(s, flags))
			break;
		rc = slot_decode(st, s, buf + (size_t)n * bs);
		if (rc)
			break;
		slot_set_flags(s, ZR_SLOT_UNDER_WB, 0);
	}
	if (n == 0) {
		/* The first block cannot be decoded: report, keep it dirty. */
		if (!f->error)
			f->error = rc;
		pthread_mutex_unlock(&f->lock);
		zr_stat_add(&st->s.writeback_errors, 1);
		*pos = start + 1;
		*found = true;
		return rc;
	}
	pthread_mutex_unlock(&f->lock);
	*found = true;

	if (detached)
		rc = 0;	/* the owner is going: zr_file_detach() drops them */
	else
		rc = st->ops.writeback ? st->ops.writeback(st->ops_ctx, f->owner, start, n, buf)
				       : -EIO;

	pthread_mutex_lock(&f->lock);
	for (i = 0; i < n; i++) {
		s = lookup_present(f, start + i);
		if (!s || !slot_has(s, ZR_SLOT_UNDER_WB))
			continue;	/* dropped or rewritten meanwhile */
		was = account_out(f, s);
		slot_set_flags(s, 0, ZR_SLOT_UNDER_WB | (rc ? 0 : ZR_SLOT_DIRTY));
		account_in(f, s, was, false);
		if (rc && f->ndirty == 1)
			dirty_restart(f);
		if (!rc && (flags & ZR_WB_DROP)) {
			block_remove(f, start + i, s);
			zr_stat_add(&st->s.demotions, 1);
		}
	}
	if (rc) {
		zr_stat_add(&st->s.writeback_errors, 1);
		if (!f->error)
			f->error = rc;
	} else {
		zr_stat_add(&st->s.writebacks, n);
		zr_stat_add(&st->s.bytes_written_back, (uint64_t)n * bs);
	}
	pthread_mutex_unlock(&f->lock);
	*pos = start + n;
	if (*pos == 0)
		*pos = UINT64_MAX;
	return rc;
}

/*
 * Write back the blocks of @f chosen by @flags. *@bufp is a buffer from
 * wb_buf_alloc(), or NULL: one is then allocated when needed, and left
 * there for the caller to free (a pass over many files maps one). Caller
 * holds no lock. @return 0 or the first -errno.
 */
static int file_writeback(struct zr_file *f, unsigned flags, uint8_t **bufp)
{
	uint8_t *buf;
	uint64_t pos = 0, idx;
	struct zr_slot *s;
	bool found;
	int rc, first = 0;

	if (zr_file_dirty(f)) {
		if (!*bufp)
			*bufp = wb_buf_alloc(f->st);
		buf = *bufp;
		if (!buf)
			return -ENOMEM;
		pthread_mutex_lock(&f->io_lock);
		while (pos != UINT64_MAX && !__atomic_load_n(&f->detached, __ATOMIC_RELAXED)) {
			rc = wb_run(f, &pos, flags, false, buf, &found);
			if (rc && !first)
				first = rc;
			if (!found)
				break;
		}
		pthread_mutex_unlock(&f->io_lock);
	}
	if (!(flags & (ZR_WB_DROP | ZR_WB_IDLE)))
		return first;
	/* Drop the chosen clean blocks too; mark what is left idle. */
	pthread_mutex_lock(&f->lock);
	pos = 0;
	while ((s = map_next(f, pos, &idx))) {
		if ((flags & ZR_WB_DROP) && wb_selected(s, flags) &&
		    !slot_has(s, ZR_SLOT_DIRTY) &&
		    !slot_has(s, ZR_SLOT_UNDER_WB)) {
			block_remove(f, idx, s);
			zr_stat_add(&f->st->s.demotions, 1);
		} else if (flags & ZR_WB_IDLE) {
			slot_set_flags(s, ZR_SLOT_IDLE, 0);
		}
		if (idx == UINT64_MAX)
			break;
		pos = idx + 1;
	}
	pthread_mutex_unlock(&f->lock);
	return first;
}

int zr_file_writeback(struct zr_file *f)
{
	uint8_t *buf = NULL;
	int rc = file_writeback(f, ZR_WB_ALL, &buf);

	wb_buf_free(f->st, buf);
	return rc;
}

/*
 * The next live file after @prev (the head when @prev is NULL), with a
 * reference; @prev's reference is dropped. Holds files_lock only inside.
 */
static struct zr_file *file_iter(struct zr_store *st, struct zr_file *prev)
{
	struct zr_file *f;

	pthread_mutex_lock(&st->files_lock);
	f = prev ? prev->next : st->head;
	while (f && !file_try_get(f))
		f = f->next;
	pthread_mutex_unlock(&st->files_lock);
	zr_file_put(prev);
	return f;
}

int zr_store_writeback_all(struct zr_store *st, unsigned flags)
{
	struct zr_file *f = NULL;
	uint8_t *buf = NULL;
	int rc, first = 0;

	if (!(flags & (ZR_WB_ALL | ZR_WB_IDLE | ZR_WB_RAW)))
		return -EINVAL;
	while ((f = file_iter(st, f))) {
		rc = file_writeback(f, flags, &buf);
		if (rc && !first)
			first = rc;
	}
	wb_buf_free(st, buf);
	return first;
}

/* Files the expiry walk takes under dirty_lock at a time. */
#define EXPIRE_BATCH 256

/*
 * One file the expiry walk took (referenced), written back if dirty and
 * may_expire allows; @now, when the walk began. Under f->lock: a file left
 * listed clean (dirty_leave()) is taken off; one still dirty after its
 * writeback (written to meanwhile, or refused) goes to the tail with a
 * new clock, as Linux's redirty_tail() does: else it would be written at
 * every walk while writes go on, or while the backing filesystem refuses
 * it (a full disk, a quota: each walk rewrote and logged every run of
 * such a file; helper-53). @return 0 or -errno.
 */
static int expire_one(struct zr_store *st, struct zr_file *f, uint64_t now, uint8_t **buf)
{
	bool dirty, expire;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	dirty = f->ndirty != 0;
	if (!dirty && f->dlisted) {
		pthread_mutex_lock(&st->dirty_lock);
		zr_stat_set(&f->dirty_since, 0);
		dirty_unlink(st, f);
		pthread_mutex_unlock(&st->dirty_lock);
	}
	/* (under f->lock, the owner cannot be freed: zr_file_detach()) */
	expire = dirty && !f->detached &&
		 (!st->ops.may_expire || st->ops.may_expire(st->ops_ctx, f->owner));
	pthread_mutex_unlock(&f->lock);
	if (!expire)
		return 0;
	rc = file_writeback(f, ZR_WB_ALL, buf);
	pthread_mutex_lock(&f->lock);
	pthread_mutex_lock(&st->dirty_lock);
	if (f->ndirty && f->dlisted && zr_stat_read(&f->dirty_since) <= now) {
		dirty_unlink(st, f);
		dirty_append(st, f);
	}
	pthread_mutex_unlock(&st->dirty_lock);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/*
 * Walks the list of dirty files from its oldest to the first one not
 * expired, not every file: once a second, a walk over 300k files of one
 * dirty block each (size=1G, dirty_expire=1h) took 5% of a core with
 * nothing to do. It takes EXPIRE_BATCH files at a time with a reference
 * under dirty_lock (all of 300k expired files at once held it 40-65 ms,
 * and every file turning dirty or clean waits for it), and writes them
 * back without it (expire_one()). Between batches a cursor, expire_next,
 * which dirty_unlink() moves on, keeps its place, so each file is looked
 * at once: files left in place (an orphan that may_expire refuses) are
 * not walked again, and files listed after the walk began (dseq) end it.
 * A file whose writeback failed gets a new clock (expire_one(), and
 * dirty_restart() for its only dirty block): it is tried a period later.
 * One walk at a time: a second caller returns 0 at once.
 */
int zr_store_writeback_expired(struct zr_store *st, uint64_t expire_ms)
{
	struct zr_file *due[EXPIRE_BATCH], *f;
	uint64_t now, seq_end;
	uint8_t *buf = NULL;
	unsigned n, i;
	int rc, first = 0;

	if (pthread_mutex_trylock(&st->expire_lock) != 0)
		return 0;
	pthread_mutex_lock(&st->dirty_lock);
	now = zr_now_ms();	/* (under the lock: no clock listed is later) */
	seq_end = st->dirty_seq;
	st->expire_next = st->dirty_head;
	do {
		n = 0;
		for (f = st->expire_next; f && f->dseq <= seq_end; f = f->dnext) {
			if (expire_ms && now - zr_stat_read(&f->dirty_since) < expire_ms) {
				f = NULL;	/* the rest are younger */
				break;
			}
			if (n == EXPIRE_BATCH)
				break;
			if (file_try_get(f))
				due[n++] = f;
		}
		st->expire_next = f && f->dseq <= seq_end ? f : NULL;
		pthread_mutex_unlock(&st->dirty_lock);
		for (i = 0; i < n; i++) {
			rc = expire_one(st, due[i], now, &buf);
			if (rc && !first)
				first = rc;
			zr_file_put(due[i]);
		}
		pthread_mutex_lock(&st->dirty_lock);
	} while (st->expire_next);
	pthread_mutex_unlock(&st->dirty_lock);
	pthread_mutex_unlock(&st->expire_lock);
	wb_buf_free(st, buf);
	return first;
}

uint64_t zr_store_drop_clean(struct zr_store *st)
{
	struct zr_file *f = NULL;
	uint64_t freed = 0, pos, idx;
	struct zr_slot *s;

	while ((f = file_iter(st, f))) {
		pthread_mutex_lock(&f->lock);
		pos = 0;
		while ((s = map_next(f, pos, &idx))) {
			if (!slot_has(s, ZR_SLOT_DIRTY) && !slot_has(s, ZR_SLOT_UNDER_WB)) {
				freed += block_remove(f, idx, s);
				zr_stat_add(&st->s.demotions, 1);
			}
			if (idx == UINT64_MAX)
				break;
			pos = idx + 1;
		}
		pthread_mutex_unlock(&f->lock);
	}
	return freed;
}

uint64_t zr_file_redirty_range(struct zr_file *f, uint64_t first, uint64_t count)
{
	uint64_t last = (count == UINT64_MAX || first + count < first)
				? UINT64_MAX : first + count - 1;
	uint64_t n = 0, pos = first, idx;
	struct zr_slot *s;
	unsigned was;

	if (count == 0)
		return 0;
	pthread_mutex_lock(&f->lock);
	while ((s = map_next(f, pos, &idx)) && idx <= last) {
		/* (a block being written back is taken for rewritten: the
		 * writeback's end leaves it dirty, as after a write) */
		if (!slot_has(s, ZR_SLOT_DIRTY) || slot_has(s, ZR_SLOT_UNDER_WB)) {
			was = account_out(f, s);
			slot_set_flags(s, ZR_SLOT_DIRTY, ZR_SLOT_UNDER_WB);
			account_in(f, s, was, false);
			n++;
		}
		if (idx == UINT64_MAX)
			break;
		pos = idx + 1;
	}
	pthread_mutex_unlock(&f->lock);
	return n;
}

uint64_t zr_file_redirty(struct zr_file *f)
{
	return zr_file_redirty_range(f, 0, UINT64_MAX);
}

uint64_t zr_store_redirty_all(struct zr_store *st)
{
	struct zr_file *f = NULL;
	uint64_t n = 0;

	while ((f = file_iter(st, f)))
		n += zr_file_redirty(f);
	return n;
}

/* ---- reclaim: sampling, recompression, demotion ---- */

static void view_of(struct zr_store *st, const struct zr_slot *s,
		    struct zr_policy_view *v)
{
	v->ps = s->ps;
	v->ram_bytes = slot_has(s, ZR_SLOT_SAME) ? 0 : slot_len(s);
	v->dirty = slot_has(s, ZR_SLOT_DIRTY);
}

/*
 * The files whose writeback failed in one reclaim pass, and those it found
 * busy (below). The dirty blocks of the first kind are passed over for the
 * rest of the pass, so that one file the backing filesystem refuses (a bad
 * spot, a quota, a read-only submount) does not keep the others' dirty
 * blocks in RAM and give their writers ENOSPC: such a file's blocks keep
 * the lowest scores and would be taken first every time. (Pointers are
 * only compared: a file freed and another allocated at its address during
 * the pass is merely passed over too.)
 */
struct wb_failed {
	const struct zr_file *file[WB_FAIL_FILES];
	unsigned nfiles;
	/* The filesystems (zr_store_ops.space) that refused a file with
	 * -ENOSPC, -EDQUOT or -EROFS: the first such file of each, and
	 * whether a second was refused too, which makes it full. */
	struct {
		uint64_t id;
		const struct zr_file *first;
		bool full;
	} space[WB_SPACES];
	unsigned nspace;
	bool all_full;		/* more filesystems refused than space[] holds */
	int full_err;		/* the error that made the first one full; 0 */
	bool wrote;		/* a dirty block was written back */
	/* Files whose io_lock was held when demote() came to write back a
	 * dirty block (an fsync, truncate or punch in progress): sample()
	 * skips them whole until BUSY_TRIES tries in a row find nothing else
	 * to demote; then the pass waits for io_lock (wait_io) and takes
	 * their blocks again. (Sampled, a busy file's dirty blocks would fill
	 * the candidate pool as a failed file's do.) */
	const struct zr_file *busy[WB_FAIL_FILES];
	unsigned nbusy;
	bool wait_io;
};

static bool files_have(const struct zr_file *const *v, unsigned n, const struct zr_file *f)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == f)
			return true;
	return false;
}

static bool wb_failed_has(const struct wb_failed *w, const struct zr_file *f)
{
	return files_have(w->file, w->nfiles, f);
}

/* Whether the pass passes over @f as busy now (sample() skips all of it). */
static bool wb_busy(const struct wb_failed *w, const struct zr_file *f)
{
	return !w->wait_io && files_have(w->busy, w->nbusy, f);
}

/* The filesystem @f's blocks are written to (zr_store_ops.space). */
static uint64_t file_space(const struct zr_store *st, const struct zr_file *f)
{
	return st->ops.space ? st->ops.space(st->ops_ctx, f->owner) : 0;
}

/* Whether the pass found @f's filesystem full (wb_failed_add()). */
static bool wb_space_full(const struct zr_store *st, const struct wb_failed *w,
			  const struct zr_file *f)
{
	uint64_t id;

	if (w->all_full)
		return true;
	if (!w->full_err)
		return false;	/* (none is: no need to ask) */
	id = file_space(st, f);
	for (unsigned i = 0; i < w->nspace; i++)
		if (w->space[i].id == id)
			return w->space[i].full;
	return false;
}

/* Whether the pass may write back dirty blocks of @f now. */
static bool wb_dirty_ok(const struct zr_store *st, const struct wb_failed *w,
			const struct zr_file *f)
{
	return !wb_failed_has(w, f) && !wb_busy(w, f) && !wb_space_full(st, w, f);
}

/*
 * Remember @f, whose writeback failed with @rc. A full, over-quota or
 * read-only backing filesystem refuses every file, but each of those errors
 * can also be one file's: a quota is charged to the file's owner (files
 * are given to their creators with allow_other), a submount may be
 * read-only, a project quota covers one tree. So the pass takes a
 * filesystem for full only when a second file on it is refused so, and
 * then passes over the dirty blocks of all its files; those of the
 * others, on other filesystems (a submount that filled up, helper-59), are
 * still written back.
 */
static void wb_failed_add(const struct zr_store *st, struct wb_failed *w,
			  const struct zr_file *f, int rc)
{
	if (!w->all_full && (rc == -ENOSPC || rc == -EDQUOT || rc == -EROFS)) {
		uint64_t id = file_space(st, f);
		unsigned i;

		for (i = 0; i < w->nspace && w->space[i].id != id; i++)
			;
		if (i == w->nspace && i < WB_SPACES) {
			w->space[w->nspace].id = id;
			w->space[w->nspace].first = f;
			w->space[w->nspace++].full = false;
		} else if (i == w->nspace) {
			w->all_full = true;	/* (no room to tell them apart) */
		} else if (w->space[i].first != f) {
			w->space[i].full = true;
		}
		if (!w->full_err && (w->all_full || w->space[i].full))
			w->full_err = rc;
	}
	if (!wb_failed_has(w, f) && w->nfiles < WB_FAIL_FILES)
		w->file[w->nfiles++] = f;
}

/*
 * Move the sweep cursor over up to ZR_POLICY_SAMPLES slots, offering each
 * to the policy's candidate pool (dirty ones only when @dirty_ok, and not
 * those of a file @failed passes over: wb_dirty_ok()). A busy file
 * (wb_busy()) is skipped whole, clean blocks too: the cursor would stay
 * inside a large one for many calls, each looking at slots it cannot
 * offer, and the pass would wait for the file (BUSY_TRIES) with other
 * files' blocks to take. Caller holds reclaim_lock. @return slots looked at.
 */
static unsigned sample(struct zr_store *st, bool dirty_ok, const struct wb_failed *failed)
{
	unsigned seen = 0, files = 0;

	while (seen < ZR_POLICY_SAMPLES && files < 64) {
		struct zr_file *f;
		uint64_t pos, idx = 0;
		struct zr_slot *s = NULL;
		bool file_dirty_ok;

		pthread_mutex_lock(&st->files_lock);
		if (!st->cursor) {
			st->cursor = st->head;
			st->cursor_index = 0;
		}
		f = st->cursor;
		if (!f) {
			pthread_mutex_unlock(&st->files_lock);
			break;
		}
		files++;
		if (wb_busy(failed, f) || !file_try_get(f)) {
			st->cursor = f->next;
			st->cursor_index = 0;
			pthread_mutex_unlock(&st->files_lock);
			continue;
		}
		pos = st->cursor_index;
		pthread_mutex_unlock(&st->files_lock);

		file_dirty_ok = dirty_ok && wb_dirty_ok(st, failed, f);
		pthread_mutex_lock(&f->lock);
		while (seen < ZR_POLICY_SAMPLES && (s = map_next(f, pos, &idx))) {
			seen++;
			if ((file_dirty_ok || !slot_has(s, ZR_SLOT_DIRTY)) &&
			    !slot_has(s, ZR_SLOT_UNDER_WB)) {
				struct zr_policy_view v;
				struct zr_policy_cand c;

				view_of(st, s, &v);
				c.file = f;
				c.index = idx;
				c.atime = s->ps.atime;
				c.score = zr_policy_score(st->pol, &v);
				zr_policy_offer(st->pol, &c);
			}
			if (idx == UINT64_MAX) {
				s = NULL;
				break;
			}
			pos = idx + 1;
		}
		pthread_mutex_unlock(&f->lock);

		pthread_mutex_lock(&st->files_lock);
		if (st->cursor == f) {
			if (s) {
				st->cursor_index = pos;
			} else {	/* end of this file: on to the next */
				st->cursor = f->next;
				st->cursor_index = 0;
			}
		}
		pthread_mutex_unlock(&st->files_lock);
		zr_file_put(f);
	}
	return seen;
}

/*
 * Put pool object @handle (@len bytes of @codec, flags @fl) in present slot
 * @s in place of the object it held, which is freed; the counters follow,
 * the file's dirty_expire clock stays. Both objects are held until then
 * (update_max()). Caller holds f->lock.
 */
static void slot_replace(struct zr_file *f, struct zr_slot *s, uint32_t handle,
			 uint32_t len, enum zr_codec_id codec, unsigned fl)
{
	struct zr_store *st = f->st;
	unsigned was;

	update_max(st);
	was = account_out(f, s);
	zr_zpool_free(st->pool, s->u.handle);
	s->u.handle = handle;
	s->info = make_info(len, codec, fl);
	account_in(f, s, was, true);
}

/* Pending slot @s stays as it is stored, raw for good. Caller holds f->lock. */
static void pending_stays_raw(struct zr_file *f, struct zr_slot *s)
{
	unsigned was = account_out(f, s);

	slot_set_flags(s, 0, ZR_SLOT_PENDING);
	account_in(f, s, was, true);
}

/*
 * Recompress a hot block with the cold codec. Caller holds f->lock.
 * @return bytes saved (> 0), or 0 when it did not help: the block is then
 * marked NOCOLD (no counter looks at that flag, hence no account() around
 * it), or a pending block stays raw for good, and is not tried again until
 * it is rewritten. A failure that may pass (no memory for the scratch, the
 * codec or the new copy; a codec error) leaves the block as it was, for a
 * later pass: marked, a block the codec failed on once would stay raw
 * (helper-59); and no block is tried while the wait after a codec failure
 * lasts (codec_failed()). Also 0.
 */
static uint32_t recompress(struct zr_file *f, struct zr_slot *s)
{
	struct zr_store *st = f->st;
	uint32_t old = slot_len(s), handle, cap = old - 1;
	uint8_t *tmp = scratch();
	struct zr_codec_ctx *ctx = zr_codec_ctx_thread();
	bool pending = slot_has(s, ZR_SLOT_PENDING);
	enum zr_codec_id codec = st->cfg.cold_comp;
	int level = st->cfg.cold_level;
	unsigned fl = (slot_flags(s) & ~ZR_SLOT_TRIM) | ZR_SLOT_COLD;
	ssize_t n;
	int rc;

	if (pending) {
		/* stored as is, never compressed: it must save min_saving,
		 * as zr_file_prepare() asks, or it stays raw for good */
		fl &= ~(ZR_SLOT_RAW | ZR_SLOT_PENDING);
		cap = ZR_MIN(cap, st->cfg.block_size - st->cfg.min_saving);
		if (codec == ZR_CODEC_NONE) {
			codec = st->cfg.comp;
			level = st->cfg.comp_level;
			fl &= ~ZR_SLOT_COLD;
		}
	}
	if (codec_waits(st, codec))
		return 0;
	if (!tmp || !ctx) {
		codec_failed(st, codec, -ENOMEM);	/* (no memory: may pass) */
		return 0;
	}
	rc = slot_decode(st, s, tmp);
	if (rc == -ENOMEM) {
		codec_failed(st, codec, rc);
		return 0;
	}
	if (rc)
		goto fail;	/* (corrupt: tried again, it would fail again) */
	n = block_compress(st, ctx, codec, level, tmp, tmp + ZR_BLOCK_MAX, cap, &fl);
	if (n == -ENOSPC)
		goto fail;	/* it does not compress enough */
	if (n <= 0) {
		codec_failed(st, codec, (int)n);
		return 0;
	}
	codec_worked(st, codec);
	if (pool_store(st, tmp + ZR_BLOCK_MAX, (uint32_t)n, &handle))
		return 0;	/* (no room or memory: the pass checks room) */
	slot_replace(f, s, handle, (uint32_t)n, codec, fl);
	zr_stat_add(&st->s.recompressions, 1);
	return old - (uint32_t)n;
fail:
	if (pending) {	/* raw for good */
		pending_stays_raw(f, s);
	} else {
		slot_set_flags(s, ZR_SLOT_NOCOLD, 0);
	}
	return 0;
}

/* Whether the idle pass or a demotion should try the cold codec on @s. */
static inline bool recompress_candidate(const struct zr_slot *s)
{
	return slot_has(s, ZR_SLOT_PENDING) ||
	       !slot_has(s, ZR_SLOT_COLD | ZR_SLOT_NOCOLD | ZR_SLOT_RAW | ZR_SLOT_SAME);
}

/*
 * Whether a recompression fits under the budget now. It holds both copies
 * of a block for a moment, and the hot copy's hole keeps its page until
 * compaction while the cold copy may take a new one: unchecked, the idle
 * pass over a nearly full tier, and the reclaim of writers (which tries
 * the cold codec on dirty hot blocks first), took the tier a third past
 * its budget. When it does not fit and @holes (bytes freed since the last
 * compaction) could give a page back, compacts first and zeroes *@holes.
 * Call with no file lock held. (recompress_room(): the check alone.)
 */
static bool recompress_room(struct zr_store *st)
{
	return zr_store_mem_used(st) + st->cfg.block_size + POOL_PAGE <=
	       zr_stat_read(&st->cfg.budget);
}

static bool recompress_fits(struct zr_store *st, uint64_t *holes)
{
	if (recompress_room(st))
		return true;
	if (*holes < POOL_PAGE)
		return false;
	zr_zpool_compact(st->pool);
	*holes = 0;
	return recompress_room(st);
}

/* Whether the cold codec would store a block differently from the hot one. */
static bool recompress_useful(const struct zr_store *st)
{
	return st->cfg.cold_comp != ZR_CODEC_NONE &&
	       (st->cfg.cold_comp != st->cfg.comp || st->cfg.cold_level != st->cfg.comp_level);
}

/*
 * One pass of idle recompression over every file: blocks last touched at or
 * before @mark go to the cold codec, up to @max_blocks and until @deadline
 * (zr_now_ms()). With @quiet, it also stops as soon as the policy clock moves
 * (a block was read or written: the foreground comes first). @more: set when
 * it stopped early. @return bytes saved.
 */
static uint64_t recompress_pass(struct zr_store *st, uint32_t mark, uint64_t max_blocks,
				uint64_t deadline, bool quiet, bool *more)
{
	struct zr_file *f = NULL;
	uint64_t saved = 0, done = 0, holes = 0, pos, idx, n;
	uint32_t clock = zr_policy_clock(st->pol);
	bool useful = recompress_useful(st), fits;
	struct zr_slot *s;

	*more = false;
	if (mark == 0 || codec_waits(st, idle_codec(st)))
		return 0;	/* no pass before this one: nothing is idle yet */
	fits = recompress_fits(st, &holes);
	while (fits && !*more && !codec_waits(st, idle_codec(st)) && (f = file_iter(st, f))) {
		pthread_mutex_lock(&f->lock);
		pos = 0;
		while ((s = map_next(f, pos, &idx))) {
			/* idle: last touched before the previous pass (wrap-safe);
			 * each block is tried once (COLD or NOCOLD after) */
			if (recompress_candidate(s) && !slot_has(s, ZR_SLOT_UNDER_WB) &&
			    (useful || slot_has(s, ZR_SLOT_PENDING)) &&
			    (int32_t)(mark - s->ps.atime) >= 0) {
				if (done == max_blocks) {
					*more = true;
					break;
				}
				n = recompress(f, s);
				saved += n;
				holes += n;
				if (!n && codec_waits(st, idle_codec(st)))
					break;	/* (a codec failed: later) */
				if (!recompress_room(st)) {
					/* (the next pass tries again) */
					pthread_mutex_unlock(&f->lock);
					fits = recompress_fits(st, &holes);
					pthread_mutex_lock(&f->lock);
					if (!fits)
						break;
				}
				/* every 64 blocks: look at the clock, and let
				 * readers and writers of this file in */
				if (++done % 64 == 0) {
					if (zr_now_ms() > deadline ||
					    (quiet && zr_policy_clock(st->pol) != clock)) {
						*more = true;
						break;
					}
					pthread_mutex_unlock(&f->lock);
					pthread_mutex_lock(&f->lock);
				}
			}
			if (idx == UINT64_MAX)
				break;
			pos = idx + 1;
		}
		pthread_mutex_unlock(&f->lock);
	}
	zr_file_put(f);	/* the file it stopped in (NULL after the last) */
	return saved;
}

uint64_t zr_store_recompress_idle(struct zr_store *st, uint64_t max_blocks,
				  uint64_t max_ms)
{
	uint64_t deadline = max_ms ? zr_now_ms() + max_ms : UINT64_MAX, saved;
	uint32_t mark;
	bool more;

	pthread_mutex_lock(&st->reclaim_lock);
	mark = st->idle_mark;
	st->idle_mark = zr_policy_clock(st->pol);
	pthread_mutex_unlock(&st->reclaim_lock);
	if (!recompress_useful(st) && !zr_stat_read(&st->s.blocks_pending))
		return 0;
	saved = recompress_pass(st, mark, max_blocks, deadline, false, &more);
	pthread_mutex_lock(&st->reclaim_lock);
	st->recomp_mark = mark;
	st->recomp_clock = zr_policy_clock(st->pol);
	__atomic_store_n(&st->recomp_more, more, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&st->reclaim_lock);
	return saved;
}

bool zr_store_recompress_pending(struct zr_store *st)
{
	return __atomic_load_n(&st->recomp_more, __ATOMIC_RELAXED);
}

uint64_t zr_store_recompress_more(struct zr_store *st, uint64_t max_ms, bool *ran)
{
	uint64_t saved = 0;
	uint32_t mark;
	bool more = true;

	pthread_mutex_lock(&st->reclaim_lock);
	*ran = st->recomp_more && zr_policy_clock(st->pol) == st->recomp_clock;
	if (*ran) {
		/* quiet since the last pass or slice: go on with its mark */
		mark = st->recomp_mark;
		pthread_mutex_unlock(&st->reclaim_lock);
		saved = recompress_pass(st, mark, UINT64_MAX, zr_now_ms() + max_ms,
					true, &more);
		pthread_mutex_lock(&st->reclaim_lock);
		__atomic_store_n(&st->recomp_more, more, __ATOMIC_RELAXED);
	}
	st->recomp_clock = zr_policy_clock(st->pol);
	pthread_mutex_unlock(&st->reclaim_lock);
	return saved;
}

uint64_t zr_store_pending_bytes(struct zr_store *st)
{
	return zr_stat_read(&st->pending_len);
}

/*
 * Compress the pending block at @idx of @f, which held @copy (block_size
 * bytes, decoded from a slot of @len stored bytes) when it was read, into
 * @out (scratch), and put it in the block's place if the block still holds
 * those bytes: the comparison, not the slot's handle, tells, as a handle
 * freed meanwhile may have been given to a new copy of other data. It
 * stays raw for good when it does not compress to less than @len and
 * min_saving. Both copies are held for a moment, and the raw one leaves a
 * hole, added to *@holes: only when that fits under the budget (the
 * caller compacts those holes first when it does not, recompress_fits()).
 * Caller holds no lock.
 * @return whether the block is settled (compressed, or found not to
 * compress); false when it changed meanwhile, or room or memory ran out.
 */
static bool settle_one(struct zr_file *f, uint64_t idx, const uint8_t *copy,
		       uint32_t len, uint8_t *out, uint64_t *holes)
{
	struct zr_store *st = f->st;
	struct zr_codec_ctx *ctx = zr_codec_ctx_thread();
	uint32_t handle = ZR_ZPOOL_NO_HANDLE;
	struct zr_slot *s;
	unsigned fl = 0;
	ssize_t n = -ENOMEM;
	const void *cur;
	bool same;

	if (ctx)
		n = block_compress(st, ctx, st->cfg.comp, st->cfg.comp_level, copy, out,
				   ZR_MIN(len - 1, st->cfg.block_size - st->cfg.min_saving),
				   &fl);
	if (n > 0)
		codec_worked(st, st->cfg.comp);
	else if (n != -ENOSPC)
		codec_failed(st, st->cfg.comp, (int)n);	/* (it stays pending) */
	if (n > 0 && (!recompress_room(st) ||
		      pool_store(st, out, (uint32_t)n, &handle) != 0))
		return false;	/* no room or memory: it stays pending */
	if (n <= 0 && n != -ENOSPC)
		return false;	/* (-ENOSPC: it does not compress) */
	pthread_mutex_lock(&f->lock);
	s = lookup_present(f, idx);
	same = s && slot_has(s, ZR_SLOT_PENDING) && !slot_has(s, ZR_SLOT_SAME);
	if (same) {
		/* the stored bytes, and zeros past them, as in @copy */
		cur = zr_zpool_map(st->pool, s->u.handle);
		same = cur && slot_len(s) == len && memcmp(cur, copy, len) == 0;
		if (cur)
			zr_zpool_unmap(st->pool, s->u.handle);
	}
	if (same && n > 0) {
		slot_replace(f, s, handle, (uint32_t)n, st->cfg.comp,
			     (slot_flags(s) & ~(ZR_SLOT_RAW | ZR_SLOT_PENDING |
						ZR_SLOT_TRIM | ZR_SLOT_NOCOLD)) | fl);
		handle = ZR_ZPOOL_NO_HANDLE;
		*holes += len;
	} else if (same) {
		pending_stays_raw(f, s);
	}
	pthread_mutex_unlock(&f->lock);
	if (handle != ZR_ZPOOL_NO_HANDLE)
		zr_zpool_free(st->pool, handle);
	return same;
}

/* Slots settle looks at under one hold of a file's lock. */
#define SETTLE_SCAN 256

/*
 * The file a settle pass starts at, referenced: where the last one stopped
 * (*@pos: the block index there; the cursor moves on when that file goes),
 * or the first. *@from_head: whether that is the start of the list's head.
 * NULL when there is no file.
 */
static struct zr_file *settle_resume(struct zr_store *st, uint64_t *pos, bool *from_head)
{
	struct zr_file *f;

	pthread_mutex_lock(&st->files_lock);
	f = st->settle_at ? st->settle_at : st->head;
	*pos = st->settle_at ? st->settle_index : 0;
	while (f && !file_try_get(f)) {
		f = f->next;
		*pos = 0;
	}
	*from_head = f == st->head && *pos == 0;
	pthread_mutex_unlock(&st->files_lock);
	return f;
}

/* Remember @f (referenced; NULL: the head) and block @pos for the next pass. */
static void settle_save(struct zr_store *st, struct zr_file *f, uint64_t pos)
{
	pthread_mutex_lock(&st->files_lock);
	st->settle_at = f;
	st->settle_index = pos;
	pthread_mutex_unlock(&st->files_lock);
}

/*
 * A pass goes on from where the last one stopped (a request stops it: with
 * a million files and the pending ones near the end, starting at the head
 * each time walked all of them again), to the end, then once from the
 * head: what the wrap finds before the start, and blocks written behind it
 * meanwhile. A tier too full to hold both copies of a block ends it, as
 * nothing more would fit until reclaim makes room.
 */
uint64_t zr_store_settle(struct zr_store *st, bool (*stop)(void *arg), void *arg)
{
	uint8_t *tmp = scratch();
	struct zr_file *f;
	uint64_t done = 0, holes = 0, pos, idx;
	struct zr_slot *s;
	unsigned scanned;
	uint32_t len = 0;
	unsigned walked = 0;
	bool found, wrapped;

	if (!tmp || !zr_stat_read(&st->s.blocks_pending) || codec_waits(st, st->cfg.comp))
		return 0;
	f = settle_resume(st, &pos, &wrapped);
	if (!f && !wrapped) {	/* (the files after the cursor are going) */
		wrapped = true;
		f = file_iter(st, NULL);
	}
	while (f && zr_stat_read(&st->s.blocks_pending)) {
		/* (asked also every 64 files passed by: a walk over many
		 * settled files takes files_lock for each) */
		if (++walked % 64 == 0 && stop(arg)) {
			settle_save(st, f, pos);
			zr_file_put(f);
			return done;
		}
		while (zr_stat_read(&f->npending)) {
			if (stop(arg) || !recompress_fits(st, &holes) ||
			    codec_waits(st, st->cfg.comp)) {
				settle_save(st, f, pos);
				zr_file_put(f);
				return done;
			}
			/* the next pending block, SETTLE_SCAN slots at most
			 * at a time (a preempted nice-19 caller holds the
			 * lock no longer than that) */
			found = false;
			scanned = 0;
			pthread_mutex_lock(&f->lock);
			while ((s = map_next(f, pos, &idx)) && scanned++ < SETTLE_SCAN) {
				pos = idx + 1;
				if (slot_has(s, ZR_SLOT_PENDING) && !slot_has(s, ZR_SLOT_SAME) &&
				    slot_decode(st, s, tmp) == 0) {
					len = slot_len(s);
					found = true;
					break;
				}
				if (idx == UINT64_MAX)
					break;
			}
			pthread_mutex_unlock(&f->lock);
			if (found && settle_one(f, idx, tmp, len, tmp + ZR_BLOCK_MAX, &holes))
				done++;
			if (!s || idx == UINT64_MAX)
				break;	/* the end of this file's map */
		}
		pos = 0;
		f = file_iter(st, f);
		if (!f && !wrapped) {
			wrapped = true;
			f = file_iter(st, NULL);
		}
	}
	settle_save(st, NULL, 0);
	zr_file_put(f);
	return done;
}

/*
 * Demote candidate @c (whose file reference the caller holds): recompress
 * a hot block, or write back a dirty one and drop it. Caller holds
 * reclaim_lock only. Sets *@progress when something changed; the cold codec
 * is tried only when @recomp_ok (recompress_fits()), and a dirty block is
 * written back only when @dirty_ok and wb_dirty_ok(@failed), to which a
 * failed writeback adds its file, as does finding its io_lock held (unless
 * @failed->wait_io). @return bytes of RAM freed.
 */
static uint64_t demote(struct zr_store *st, const struct zr_policy_cand *c,
		       bool dirty_ok, bool recomp_ok, struct wb_failed *failed,
		       bool *progress)
{
	struct zr_file *f = c->file;
	struct zr_policy_view v;
	struct zr_slot *s;
	uint64_t freed;
	bool cold_differs = st->cfg.cold_comp != st->cfg.comp ||
			    st->cfg.cold_level != st->cfg.comp_level;

	*progress = false;
	pthread_mutex_lock(&f->lock);
	s = lookup_present(f, c->index);
	if (!s || s->ps.atime != c->atime || slot_has(s, ZR_SLOT_UNDER_WB))
		goto skip;	/* gone or touched since it was sampled */
	if (recomp_ok && recompress_candidate(s) &&
	    (slot_has(s, ZR_SLOT_PENDING) ||
	     (cold_differs && st->cfg.cold_comp != ZR_CODEC_NONE))) {
		uint32_t saved = recompress(f, s);

		if (saved) {
			struct zr_policy_cand again = *c;

			view_of(st, s, &v);
			again.score = zr_policy_score(st->pol, &v);
			zr_policy_offer(st->pol, &again);
			pthread_mutex_unlock(&f->lock);
			*progress = true;
			return saved;
		}
	}
	if (slot_has(s, ZR_SLOT_DIRTY)) {
		uint64_t pos = c->index;
		uint8_t *buf;
		bool found;
		int rc;

		pthread_mutex_unlock(&f->lock);
		if (!dirty_ok || !wb_dirty_ok(st, failed, f))
			return 0;
		/* kept: mapped afresh, its pages would fault in at every run */
		if (!st->demote_buf)
			st->demote_buf = wb_buf_alloc(st);
		buf = st->demote_buf;
		if (!buf)
			return 0;
		/* an fsync, truncate or punch of the file may hold io_lock
		 * for seconds (a punch of 1 GiB where the backing filesystem
		 * has no holes writes 1 GiB of zeros), and every writer that
		 * needs room would wait with us: other blocks are taken
		 * first, and this one only when nothing else was found */
		if (failed->wait_io) {
			pthread_mutex_lock(&f->io_lock);
		} else if (pthread_mutex_trylock(&f->io_lock) != 0) {
			if (failed->nbusy < WB_FAIL_FILES &&
			    !files_have(failed->busy, failed->nbusy, f))
				failed->busy[failed->nbusy++] = f;
			return 0;
		}
		rc = wb_run(f, &pos, ZR_WB_ALL, true, buf, &found);
		pthread_mutex_unlock(&f->io_lock);
		if (rc) {
			wb_failed_add(st, failed, f, rc);
			return 0;
		}
		failed->wrote |= found;
		pthread_mutex_lock(&f->lock);
		s = lookup_present(f, c->index);
		if (!s || slot_has(s, ZR_SLOT_DIRTY | ZR_SLOT_UNDER_WB))
			goto skip;
		*progress = true;	/* the write-back itself is progress */
	}
	view_of(st, s, &v);
	zr_policy_demoted(st->pol, zr_policy_score(st->pol, &v));
	freed = block_remove(f, c->index, s);
	zr_stat_add(&st->s.demotions, 1);
	pthread_mutex_unlock(&f->lock);
	*progress = true;
	return freed;
skip:
	pthread_mutex_unlock(&f->lock);
	return 0;
}

/* Demote down to @target (see zr_store_reclaim()); caller holds reclaim_lock.
 * @wb_err: when not NULL, receives the error with which the pass found a
 * backing filesystem full, refusing every file (wb_failed.full_err), when
 * it wrote no dirty block back at all (of a file on another, say); else 0. */
static int64_t reclaim_locked(struct zr_store *st, uint64_t target, uint64_t max_blocks,
			      int *wb_err)
{
	uint64_t done = 0, freed = 0, idle = 0, limit, since_compact = 0;
	uint64_t start = zr_store_mem_used(st);
	struct wb_failed failed = { .nfiles = 0 };
	bool any = false, progress;

	if (wb_err)
		*wb_err = 0;

	if (start <= target)
		return 0;
	/* Give up after about one lap of the sweep with nothing done. */
	limit = (zr_stat_read(&st->nblocks) + zr_stat_read(&st->s.files)) /
		ZR_POLICY_SAMPLES + 2 * ZR_POLICY_POOL + 8;
	zr_policy_set_decay(st->pol, (uint32_t)ZR_MIN(ZR_MAX(2 * zr_stat_read(&st->nblocks),
							      1024u), UINT32_MAX));
	while (zr_store_mem_used(st) > target && done < max_blocks &&
	       (idle < limit || (failed.nbusy && !failed.wait_io))) {
		struct zr_policy_cand c;
		bool dirty_ok = st->ops.writeback && !failed.all_full &&
				failed.nfiles < WB_FAIL_FILES;
		uint64_t n;

		if (!dirty_ok && idle >= limit)
			break;	/* no dirty block would be taken: no wait */
		if (dirty_ok && failed.nbusy && !failed.wait_io && idle >= BUSY_TRIES) {
			/* nothing but blocks of busy files: wait for them
			 * (after a few tries, not a lap of the sweep: waiting
			 * is no failure, and a lap of a large tier costs) */
			failed.wait_io = true;
			idle = 0;
		}
		sample(st, dirty_ok, &failed);
		if (!zr_policy_take(st->pol, file_try_get, &c)) {
			idle++;
			continue;
		}
		n = demote(st, &c, dirty_ok, recompress_fits(st, &since_compact), &failed,
			   &progress);
		zr_file_put(c.file);
		if (!progress) {
			idle++;
			continue;
		}
		idle = 0;
		any = true;
		done++;
		freed += n;
		since_compact += n;
		/* Freed objects leave holes in spans: give them back now and then. */
		if (since_compact >= start - target && zr_store_mem_used(st) > target) {
			zr_zpool_compact(st->pool);
			since_compact = 0;
		}
	}
	if (any && zr_store_mem_used(st) > target)
		zr_zpool_compact(st->pool);
	if (wb_err)
		*wb_err = failed.wrote ? 0 : failed.full_err;
	return any ? (int64_t)freed : -ENOSPC;
}

int64_t zr_store_reclaim(struct zr_store *st, uint64_t target, uint64_t max_blocks)
{
	int64_t r;

	pthread_mutex_lock(&st->reclaim_lock);
	r = reclaim_locked(st, target, max_blocks, NULL);
	pthread_mutex_unlock(&st->reclaim_lock);
	return r;
}

/*
 * Reclaim passes a writer makes before it gets ENOSPC, unless a pass found
 * a backing filesystem that refuses every file (full, over quota,
 * read-only: two files refused so, see wb_failed_add()) and wrote no dirty
 * block back at all, where the next would do the same. A pass can end
 * with no room for reasons that pass: other writers took the room it made
 * (the check is made without the lock), or the blocks it sampled were busy
 * (being written, or written back by another thread). On two loaded CPUs
 * one pass was not always enough, and a writer got ENOSPC with the backing
 * disk nearly empty; with the kernel's writeback cache, the data of such a
 * write is dropped and the error only reaches fsync/close.
 */
#define ZR_ROOM_TRIES 16	/* pauses of 1, 2, 4, 8, then 16 ms: 0.2 s in all */

/* Make room for @need bytes in up to @max_tries reclaim passes.
 * @return 0 or -ENOSPC. */
static int make_room(struct zr_store *st, size_t need, unsigned max_tries)
{
	uint64_t budget, target;
	int wb_err;

	/* The pool commits whole pages: an object may start a new one. */
	need += POOL_PAGE;
	for (unsigned tries = 0; tries < max_tries; tries++) {
		budget = zr_stat_read(&st->cfg.budget);
		if (zr_store_mem_used(st) + need <= budget)
			return 0;
		if (tries > 0)
			usleep(1000u << ZR_MIN(tries - 1, 4u));
		wb_err = 0;
		pthread_mutex_lock(&st->reclaim_lock);
		if (zr_store_mem_used(st) + need > budget) {
			/* Down to the low watermark, and at least room for @need. */
			target = budget / 100 * st->cfg.low_wm + budget % 100 * st->cfg.low_wm / 100;
			if (need > budget)
				target = 0;
			else if (target > budget - need)
				target = budget - need;
			reclaim_locked(st, target, UINT64_MAX, &wb_err);
		}
		pthread_mutex_unlock(&st->reclaim_lock);
		if (zr_store_mem_used(st) + need <= budget)
			return 0;
		/* full for good: a backing filesystem refuses every
		 * writeback, and nothing was written back, or dirty
		 * blocks cannot be written back at all (an error of some
		 * files only, EIO, leaves the others to the next pass) */
		if (wb_err || !st->ops.writeback)
			break;
	}
	return -ENOSPC;
}

int zr_store_make_room(struct zr_store *st, size_t need)
{
	int rc = make_room(st, need, ZR_ROOM_TRIES);

	if (rc)
		zr_stat_add(&st->s.enospc, 1);
	return rc;
}

int zr_store_make_room_once(struct zr_store *st, size_t need)
{
	uint64_t budget = zr_stat_read(&st->cfg.budget);

	if (zr_store_mem_used(st) + need + POOL_PAGE <= budget)
		return 0;
	return make_room(st, need, 1) == 0 ? 0 : -EAGAIN;
}

/* ---- test hooks ---- */

struct zr_zpool *zr_store_test_pool(struct zr_store *st)
{
	return st->pool;
}

void zr_store_test_codec_wait(struct zr_store *st, bool wait)
{
	for (unsigned c = 0; c < ZR_CODEC_COUNT; c++)
		if (__atomic_load_n(&st->codec_wait_ms[c], __ATOMIC_RELAXED))
			__atomic_store_n(&st->codec_retry_ms[c], wait ? UINT64_MAX : 0,
					 __ATOMIC_RELAXED);
}

unsigned zr_store_test_dirty_check(struct zr_store *st)
{
	struct zr_file *f = NULL;
	uint64_t since = 0, seq = 0;
	unsigned bad = 0;

	while ((f = file_iter(st, f))) {
		pthread_mutex_lock(&f->lock);
		if (f->ndirty && !f->dlisted)
			bad++;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_lock(&st->dirty_lock);
	for (f = st->dirty_head; f; f = f->dnext) {
		uint64_t s = zr_stat_read(&f->dirty_since);

		if (s < since || f->dseq <= seq || s == 0)
			bad++;
		since = s;
		seq = f->dseq;
	}
	pthread_mutex_unlock(&st->dirty_lock);
	return bad;
}

unsigned zr_store_test_dirty_listed(struct zr_store *st)
{
	struct zr_file *f;
	unsigned n = 0;

	pthread_mutex_lock(&st->dirty_lock);
	for (f = st->dirty_head; f; f = f->dnext)
		n++;
	pthread_mutex_unlock(&st->dirty_lock);
	return n;
}

int zr_file_test_corrupt(struct zr_file *f, uint64_t index, uint32_t offset,
			 uint8_t mask)
{
	struct zr_slot *s;
	uint8_t *p;
	int rc = 0;

	pthread_mutex_lock(&f->lock);
	s = lookup_present(f, index);
	if (!s || slot_has(s, ZR_SLOT_SAME)) {
		rc = -ENOENT;
	} else if (offset >= slot_len(s)) {
		rc = -EINVAL;
	} else {
		p = zr_zpool_map(f->st->pool, s->u.handle);
		p[offset] ^= mask;
		zr_zpool_unmap(f->st->pool, s->u.handle);
	}
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int zr_file_test_flags(struct zr_file *f, uint64_t index)
{
	struct zr_slot *s;
	int rc;

	pthread_mutex_lock(&f->lock);
	s = lookup_present(f, index);
	rc = s ? (int)slot_flags(s) : -ENOENT;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

int zr_file_test_len(struct zr_file *f, uint64_t index)
{
	struct zr_slot *s;
	int rc;

	pthread_mutex_lock(&f->lock);
	s = lookup_present(f, index);
	rc = s ? (slot_has(s, ZR_SLOT_SAME) ? 0 : (int)slot_len(s)) : -ENOENT;
	pthread_mutex_unlock(&f->lock);
	return rc;
}

uint64_t zr_file_test_record_bytes(void)
{
	return FILE_RECORD_BYTES;
}

uint64_t zr_file_test_map_bytes(struct zr_file *f)
{
	uint64_t b;

	pthread_mutex_lock(&f->lock);
	b = f->map_bytes;
	pthread_mutex_unlock(&f->lock);
	return b;
}

// SPDX-License-Identifier: GPL-2.0-or-later
/* zpool.c - size-class allocator for compressed objects, with compaction. */
/*
 * Size classes
 * ------------
 * An object of 1..ZR_ZPOOL_MAX_OBJ bytes is rounded up to one of 512
 * classes:
 *
 *   16, 32, ..., 1024                     step 16   (64 classes)
 *   2^k + j * 2^k/64, j = 1..64, k=10..16  step 2^k/64 (7 x 64 classes)
 *
 * so classes are about 1/64 apart (never closer than 16 bytes), rounding
 * wastes at most 1/64 (on average about 1/128) of an object, and every
 * power of two from 2 KiB to 128 KiB is a class: a raw 4..128 KiB block
 * wastes nothing.
 *
 * Spans, chunks and what is counted
 * ---------------------------------
 * All objects of a class live in spans: 1 MiB contiguous runs of address
 * space, each holding SPAN_SIZE / class_size slots. Objects may straddle
 * page boundaries inside a span. A span is virtual: a page of it counts
 * as taken from the system ("committed") from the moment an allocated
 * slot overlaps it, and stops counting when it is released with
 * madvise(MADV_DONTNEED). A per-span bitmap of committed pages keeps this
 * exact; a page not in the bitmap has never been touched since it was
 * mapped or last released, so mem_used is an honest upper bound of what
 * the spans hold. Because the tail of a span is only committed as far as
 * the slots in use reach, span size does not create tail waste: a full
 * span wastes less than one page, and a class with a handful of objects
 * costs its objects rounded up to pages, not a whole span.
 *
 * vm.max_map_count is 65530 on our machines, and the pool may grow to many
 * GiB, so spans are not mapped one by one: the pool maps CHUNK_SIZE (8 MiB)
 * chunks and carves 8 spans from each. A freed span gives its committed
 * pages back with MADV_DONTNEED; a chunk whose spans are all free is
 * unmapped (one wholly free chunk is kept to absorb alloc/free churn at a
 * span boundary; it holds no committed page, so it costs nothing). A new
 * chunk is mapped only when every mapped chunk is full of spans, so the
 * mapping count stays at most the peak span count / 8 + 1: 24 GiB of
 * objects need about 3,000 mappings. Chunks are marked MADV_NOHUGEPAGE:
 * with transparent huge pages "always", touching one byte could fault in
 * 2 MiB and the page accounting would no longer be exact.
 *
 * Slots within a span are allocated lowest first, and a class allocates
 * from its fullest non-full span (fullness groups, as zsmalloc does), so
 * spans fill densely. A span that becomes empty is freed at once. Freeing
 * an object of 8 KiB or more also releases at once the pages only it
 * overlapped (one madvise, cheap next to compressing that much), so holes
 * in spans of large classes cost nothing even before compaction.
 * Compaction packs each class: spans ordered fullest first, the object in
 * the last used slot of the last span moves to the first free slot of the
 * first non-full span, until the two meet; then every span but one is
 * full, the last one is dense from its first slot, emptied spans are freed
 * and every committed page that no object overlaps is released. After
 * churn this leaves about 1-2% over the requested bytes on a 64 MiB pool
 * (rounding, the last partial page of each class, 12 bytes of handle and
 * slot->handle metadata per object); on a pool of a few MiB the last
 * partial page of each class in use dominates (about 12% at 3 MiB of
 * 4 KiB-block objects, of which 5% is the ~150 KiB of fixed metadata).
 *
 * Everything else the pool takes (the pool and class table, span headers,
 * slot bitmaps, per-span slot->handle arrays, handle table pieces) comes
 * from malloc and is counted as malloc_usable_size() + 8 (glibc's chunk
 * header) in meta_bytes; mem_used = span_bytes + meta_bytes.
 *
 * Handles
 * -------
 * A handle is an index into a three-level table (1024 x 1024 x 4096
 * entries of 64 bits) whose pieces are allocated on demand and never move
 * or go away while the pool lives. A live entry holds span id, slot and
 * requested size; a free one links the lock-free (tagged Treiber) stack of
 * free handles. Each span keeps slot -> handle so compaction can find the
 * owner of each object it moves. Span ids index a two-level span table
 * that likewise never moves.
 *
 * Lock ordering
 * -------------
 *  1. pool->map_lock (rwlock): read side held from zr_zpool_map() to
 *     zr_zpool_unmap(); write side held by compaction while it moves the
 *     objects of one class. Writer-preferring, so a stream of readers does
 *     not starve compaction; a per-thread record of held pools makes a
 *     nested map of the same pool on the same thread a counter bump, not a
 *     recursive rdlock (which would deadlock behind a waiting writer).
 *  2. class->lock (mutex): the class's span lists, its spans' slot bitmaps,
 *     slot->handle arrays and committed pages, and the span/slot fields of
 *     the handle entries of its objects. Alloc and free take only this lock
 *     (never the map lock), so classes do not serialize on each other.
 *  3. pool->page_lock (mutex): chunks, span ids and the span table.
 *  4. pool->grow_lock (mutex): adding pieces to the handle table.
 * The free-handle stack and all statistics are lock-free atomics.
 */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "zr_util.h"
#include "zr_zpool.h"

#define PAGE_SHIFT 12
#define PAGE_SIZE (1u << PAGE_SHIFT)
#define SPAN_SHIFT 20
#define SPAN_SIZE (1u << SPAN_SHIFT)		/* 1 MiB of address space */
#define SPAN_PAGES (SPAN_SIZE / PAGE_SIZE)	/* 256 */
#define CHUNK_SPANS 8u
#define CHUNK_SIZE ((size_t)CHUNK_SPANS * SPAN_SIZE)	/* 8 MiB mmap */

/* Objects of this class size or more release their pages when freed. */
#define FREE_RELEASE_MIN (2u * PAGE_SIZE)

#define NR_CLASSES 512
#define MIN_CLASS 16u
#define NR_GROUPS 4		/* fullness groups of non-full spans */
#define GROUP_FULL NR_GROUPS	/* list of full spans */

/* Handle table: 10 + 10 + 12 bits. */
#define H_TOP_BITS 10
#define H_MID_BITS 10
#define H_LEAF_BITS 12
#define H_LEAF_SIZE (1u << H_LEAF_BITS)
#define H_MID_SIZE (1u << H_MID_BITS)
#define H_TOP_SIZE (1u << H_TOP_BITS)

/* Span table: 1024 x 1024 spans (1 TiB of spans). */
#define S_LEAF_BITS 10
#define S_LEAF_SIZE (1u << S_LEAF_BITS)
#define S_TOP_SIZE 1024u
#define MAX_SPANS (S_TOP_SIZE * S_LEAF_SIZE)

/*
 * Handle entry: bit 63 LIVE; live: bits 33..62 span id, 17..32 slot,
 * 0..16 size - 1. Free: bits 0..31 the next free handle (0 = end).
 */
#define E_LIVE (1ull << 63)
#define E_SIZE_MASK 0x1ffffull
#define E_SLOT_SHIFT 17
#define E_SLOT_MASK 0xffffull
#define E_SPAN_SHIFT 33
#define E_SPAN_MASK 0x3fffffffull

struct zr_chunk {
	struct zr_chunk *next;	/* in pool->chunks (page_lock) */
	struct zr_chunk *prev;
	uint8_t *base;		/* CHUNK_SIZE bytes from mmap */
	uint32_t free_mask;	/* bit i: span i of the chunk is free */
};

struct zr_span {
	struct zr_span *next;	/* in its class's group list (class lock) */
	struct zr_span *prev;
	uint8_t *base;		/* SPAN_SIZE bytes inside @chunk */
	struct zr_chunk *chunk;	/* owning chunk (page_lock) */
	uint32_t id;		/* index in the span table */
	uint32_t csize;		/* class size (immutable) */
	uint16_t cls;		/* class index (immutable) */
	uint8_t group;		/* list it is on: 0..NR_GROUPS-1, GROUP_FULL */
	uint8_t chunk_idx;	/* span number within @chunk */
	uint32_t nslots;	/* SPAN_SIZE / csize (immutable) */
	uint32_t used;		/* live objects (class lock) */
	uint32_t hint;		/* no free slot below word @hint (class lock) */
	uint32_t npages;	/* committed pages (class lock) */
	uint32_t rev_cap;	/* entries in @rev (class lock) */
	uint32_t *rev;		/* slot -> handle (class lock) */
	uint64_t pages[SPAN_PAGES / 64]; /* committed pages (class lock) */
	uint64_t slots[];	/* allocated slots (class lock) */
};

struct zr_class {
	pthread_mutex_t lock;	/* see "Lock ordering" */
	struct zr_span *groups[NR_GROUPS + 1]; /* spans by fill level (lock) */
	uint32_t size;		/* object size of the class (immutable) */
	uint32_t nslots;	/* slots per span (immutable) */
	uint64_t nspans;	/* spans of the class (lock) */
	uint64_t nobjs;		/* live objects (lock) */
} __attribute__((aligned(64)));

struct zr_zpool {
	struct zr_class classes[NR_CLASSES];	/* by size_to_class() */

	pthread_rwlock_t map_lock;	/* maps vs. compaction moves */

	pthread_mutex_t page_lock;	/* chunks, span ids, span table */
	struct zr_chunk *chunks;	/* chunks with a free span (page_lock) */
	struct zr_chunk *spare;		/* one wholly free chunk (page_lock) */
	struct zr_span **span_top[S_TOP_SIZE]; /* span table (page_lock to
						* write, atomic read) */
	uint32_t span_next;		/* next never-used span id (page_lock) */
	uint32_t *span_free;		/* stack of freed span ids (page_lock) */
	uint32_t span_free_n;		/* entries in span_free (page_lock) */
	uint32_t span_free_cap;		/* capacity of span_free (page_lock) */
	uint64_t nchunks;		/* mapped chunks (page_lock) */

	pthread_mutex_t grow_lock;	/* adding handle table pieces */
	uint64_t **h_top[H_TOP_SIZE];	/* handle table (grow_lock to write,
					 * atomic read) */
	uint64_t h_next;		/* next never-used handle (atomic) */
	uint64_t h_free;		/* free stack head: tag << 32 | handle */

	long fail_after;		/* fault injection; < 0 off (atomic) */

	struct zr_zpool_stats st;	/* relaxed atomics */
};

/* ---- accounting ---- */

static void mem_add(struct zr_zpool *pool, uint64_t n)
{
	uint64_t now = zr_stat_add(&pool->st.mem_used, n);
	uint64_t max = zr_stat_read(&pool->st.mem_used_max);

	while (now > max &&
	       !__atomic_compare_exchange_n(&pool->st.mem_used_max, &max, now,
					    true, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

static size_t meta_size(void *p)
{
	return p ? malloc_usable_size(p) + sizeof(size_t) : 0;
}

static void *meta_alloc(struct zr_zpool *pool, size_t n, bool zero)
{
	void *p = zero ? calloc(1, n) : malloc(n);

	if (p) {
		size_t sz = meta_size(p);

		zr_stat_add(&pool->st.meta_bytes, sz);
		mem_add(pool, sz);
	}
	return p;
}

/* Metadata that only grows, counted in fixed_bytes too: the pieces of the
 * handle and span tables (never freed: a handle's entry must stay
 * readable, h_get()) and the span id stack (replaced by a larger one). */
static void *meta_alloc_fixed(struct zr_zpool *pool, size_t n, bool zero)
{
	void *p = meta_alloc(pool, n, zero);

	if (p)
		zr_stat_add(&pool->st.fixed_bytes, meta_size(p));
	return p;
}

static void meta_free(struct zr_zpool *pool, void *p)
{
	size_t sz = meta_size(p);

	if (!p)
		return;
	zr_stat_sub(&pool->st.meta_bytes, sz);
	zr_stat_sub(&pool->st.mem_used, sz);
	free(p);
}

static void span_pages_add(struct zr_zpool *pool, uint64_t n)
{
	zr_stat_add(&pool->st.span_bytes, n * PAGE_SIZE);
	mem_add(pool, n * PAGE_SIZE);
}

static void span_pages_sub(struct zr_zpool *pool, uint64_t n)
{
	zr_stat_sub(&pool->st.span_bytes, n * PAGE_SIZE);
	zr_stat_sub(&pool->st.mem_used, n * PAGE_SIZE);
}

/* ---- size classes ---- */

static unsigned size_to_class(size_t size)
{
	unsigned k, j;

	if (size <= 1024)
		return (unsigned)((size - 1) >> 4);
	k = 63u - (unsigned)__builtin_clzll((unsigned long long)(size - 1));
	j = (unsigned)((size - (1ull << k) + (1ull << (k - 6)) - 1) >> (k - 6));
	return 64u + (k - 10u) * 64u + j - 1u;
}

static uint32_t class_size(unsigned idx)
{
	unsigned k, j;

	if (idx < 64)
		return (idx + 1) * MIN_CLASS;
	k = 10 + (idx - 64) / 64;
	j = (idx - 64) % 64 + 1;
	return (1u << k) + j * (1u << (k - 6));
}

/* ---- bitmaps ---- */

static bool bit_test(const uint64_t *map, uint32_t i)
{
	return (map[i / 64] >> (i % 64)) & 1;
}

static void bit_set(uint64_t *map, uint32_t i)
{
	map[i / 64] |= 1ull << (i % 64);
}

static void bit_clear(uint64_t *map, uint32_t i)
{
	map[i / 64] &= ~(1ull << (i % 64));
}

/* Whether any bit in [@a, @b] (inclusive) is set. */
static bool bit_any(const uint64_t *map, uint32_t a, uint32_t b)
{
	uint32_t wa = a / 64, wb = b / 64, w;
	uint64_t ma = ~0ull << (a % 64);
	uint64_t mb = ~0ull >> (63 - b % 64);

	if (wa == wb)
		return (map[wa] & ma & mb) != 0;
	if (map[wa] & ma)
		return true;
	for (w = wa + 1; w < wb; w++)
		if (map[w])
			return true;
	return (map[wb] & mb) != 0;
}

/* ---- handle table ---- */

/* Entry of handle @h, or NULL when that part of the table does not exist. */
static uint64_t *h_entry(struct zr_zpool *pool, uint32_t h)
{
	uint64_t **mid = __atomic_load_n(&pool->h_top[h >> (H_MID_BITS + H_LEAF_BITS)],
					 __ATOMIC_ACQUIRE);
	uint64_t *leaf;

	if (!mid)
		return NULL;
	leaf = __atomic_load_n(&mid[(h >> H_LEAF_BITS) & (H_MID_SIZE - 1)],
			       __ATOMIC_ACQUIRE);
	if (!leaf)
		return NULL;
	return &leaf[h & (H_LEAF_SIZE - 1)];
}

/* Make sure the table piece holding handle @h exists. @return 0/-ENOMEM. */
static int h_grow(struct zr_zpool *pool, uint32_t h)
{
	unsigned t = h >> (H_MID_BITS + H_LEAF_BITS);
	unsigned m = (h >> H_LEAF_BITS) & (H_MID_SIZE - 1);
	uint64_t **mid;
	uint64_t *leaf;
	int rc = 0;

	pthread_mutex_lock(&pool->grow_lock);
	mid = pool->h_top[t];
	if (!mid) {
		mid = meta_alloc_fixed(pool, H_MID_SIZE * sizeof(*mid), true);
		if (!mid) {
			rc = -ENOMEM;
			goto out;
		}
		__atomic_store_n(&pool->h_top[t], mid, __ATOMIC_RELEASE);
	}
	if (!mid[m]) {
		leaf = meta_alloc_fixed(pool, H_LEAF_SIZE * sizeof(*leaf), true);
		if (!leaf) {
			rc = -ENOMEM;
			goto out;
		}
		__atomic_store_n(&mid[m], leaf, __ATOMIC_RELEASE);
	}
out:
	pthread_mutex_unlock(&pool->grow_lock);
	return rc;
}

static void h_push(struct zr_zpool *pool, uint32_t h)
{
	uint64_t *e = h_entry(pool, h);
	uint64_t old = __atomic_load_n(&pool->h_free, __ATOMIC_RELAXED);
	uint64_t new;

	do {
		__atomic_store_n(e, old & 0xffffffffull, __ATOMIC_RELAXED);
		new = ((old >> 32) + 1) << 32 | h;
	} while (!__atomic_compare_exchange_n(&pool->h_free, &old, new, true,
					      __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* A free handle, or 0 with -ENOMEM in *@rc. */
static uint32_t h_get(struct zr_zpool *pool, int *rc)
{
	uint64_t old = __atomic_load_n(&pool->h_free, __ATOMIC_ACQUIRE);
	uint64_t h;

	while ((uint32_t)old) {
		/*
		 * The entry may be reused under us; then the tag has changed
		 * and the exchange fails. Entries are never freed, so the
		 * read itself is always safe.
		 */
		uint64_t next = __atomic_load_n(h_entry(pool, (uint32_t)old),
						__ATOMIC_RELAXED) & 0xffffffffull;
		uint64_t new = ((old >> 32) + 1) << 32 | next;

		if (__atomic_compare_exchange_n(&pool->h_free, &old, new, true,
						__ATOMIC_ACQUIRE,
						__ATOMIC_ACQUIRE))
			return (uint32_t)old;
	}
	h = __atomic_fetch_add(&pool->h_next, 1, __ATOMIC_RELAXED);
	if (h > UINT32_MAX) {
		*rc = -ENOMEM;
		return 0;
	}
	if (!h_entry(pool, (uint32_t)h)) {
		*rc = h_grow(pool, (uint32_t)h);
		if (*rc)
			return 0;	/* the number is lost; harmless */
	}
	return (uint32_t)h;
}

/* ---- span table, chunks ---- */

static struct zr_span *span_lookup(struct zr_zpool *pool, uint32_t id)
{
	struct zr_span **leaf = __atomic_load_n(&pool->span_top[id >> S_LEAF_BITS],
						__ATOMIC_ACQUIRE);

	return __atomic_load_n(&leaf[id & (S_LEAF_SIZE - 1)], __ATOMIC_ACQUIRE);
}

static void span_table_set(struct zr_zpool *pool, uint32_t id, struct zr_span *s)
{
	__atomic_store_n(&pool->span_top[id >> S_LEAF_BITS][id & (S_LEAF_SIZE - 1)],
			 s, __ATOMIC_RELEASE);
}

static void chunk_link(struct zr_zpool *pool, struct zr_chunk *c)
{
	c->prev = NULL;
	c->next = pool->chunks;
	if (c->next)
		c->next->prev = c;
	pool->chunks = c;
}

static void chunk_unlink(struct zr_zpool *pool, struct zr_chunk *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		pool->chunks = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->next = c->prev = NULL;
}

/* Unmap a wholly free chunk. @return bytes of metadata given back. */
static uint64_t chunk_unmap(struct zr_zpool *pool, struct zr_chunk *c)
{
	uint64_t bytes = meta_size(c);

	munmap(c->base, CHUNK_SIZE);
	pool->nchunks--;
	meta_free(pool, c);
	return bytes;
}

/*
 * A span id and a free span's memory; caller holds page_lock.
 * @return 0 or -ENOMEM.
 */
static int span_mem_get(struct zr_zpool *pool, uint32_t *id,
			struct zr_chunk **chunk, unsigned *idx)
{
	struct zr_chunk *c = pool->chunks;
	unsigned i;

	if (pool->span_free_n == 0) {
		uint32_t n = pool->span_next;

		if (n >= MAX_SPANS)
			return -ENOMEM;
		if (!pool->span_top[n >> S_LEAF_BITS]) {
			struct zr_span **leaf = meta_alloc_fixed(pool,
				S_LEAF_SIZE * sizeof(*leaf), true);

			if (!leaf)
				return -ENOMEM;
			__atomic_store_n(&pool->span_top[n >> S_LEAF_BITS],
					 leaf, __ATOMIC_RELEASE);
		}
		/* Reserve room to give the id back later without failing. */
		if (pool->span_free_cap <= n) {
			uint32_t cap = pool->span_free_cap ? pool->span_free_cap * 2 : 64;
			uint32_t *a = meta_alloc_fixed(pool, cap * sizeof(*a), false);

			if (!a)
				return -ENOMEM;
			if (pool->span_free_n)
				memcpy(a, pool->span_free,
				       pool->span_free_n * sizeof(*a));
			zr_stat_sub(&pool->st.fixed_bytes, meta_size(pool->span_free));
			meta_free(pool, pool->span_free);
			pool->span_free = a;
			pool->span_free_cap = cap;
		}
	}
	if (!c) {
		c = pool->spare;
		if (c) {
			pool->spare = NULL;
		} else {
			void *base;

			c = meta_alloc(pool, sizeof(*c), true);
			if (!c)
				return -ENOMEM;
			base = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (base == MAP_FAILED) {
				meta_free(pool, c);
				return -ENOMEM;
			}
			/*
			 * With THP "always", one touched byte could fault
			 * in 2 MiB: pages must come one at a time for the
			 * accounting to hold.
			 */
#ifdef MADV_NOHUGEPAGE
			madvise(base, CHUNK_SIZE, MADV_NOHUGEPAGE);
#endif
			c->base = base;
			c->free_mask = (1u << CHUNK_SPANS) - 1;
			pool->nchunks++;
		}
		chunk_link(pool, c);
	}
	i = (unsigned)__builtin_ctz(c->free_mask);
	c->free_mask &= ~(1u << i);
	if (!c->free_mask)
		chunk_unlink(pool, c);
	*chunk = c;
	*idx = i;
	*id = pool->span_free_n ? pool->span_free[--pool->span_free_n]
				: pool->span_next++;
	return 0;
}

/*
 * Give back a span's id and memory; caller holds page_lock.
 * @return metadata bytes given back with its chunk, if that went.
 */
static uint64_t span_mem_put(struct zr_zpool *pool, uint32_t id,
			 struct zr_chunk *c, unsigned idx)
{
	pool->span_free[pool->span_free_n++] = id;
	if (!c->free_mask)
		chunk_link(pool, c);
	c->free_mask |= 1u << idx;
	if (c->free_mask == (1u << CHUNK_SPANS) - 1) {
		chunk_unlink(pool, c);
		if (!pool->spare)
			pool->spare = c;
		else
			return chunk_unmap(pool, c);
	}
	return 0;
}

/* Release the committed pages [@a, @b) of @s that no longer hold data. */
static void span_release_pages(struct zr_zpool *pool, struct zr_span *s,
			       uint32_t a, uint32_t b)
{
	uint32_t p;

	if (a >= b)
		return;
	madvise(s->base + (size_t)a * PAGE_SIZE, (size_t)(b - a) * PAGE_SIZE,
		MADV_DONTNEED);
	for (p = a; p < b; p++)
		bit_clear(s->pages, p);
	s->npages -= b - a;
	span_pages_sub(pool, b - a);
}

/*
 * Release the committed pages in [@pa, @pb) of @s that no live slot
 * overlaps; caller holds the class lock. @return pages released.
 */
static uint32_t span_trim_range(struct zr_zpool *pool, struct zr_span *s,
				uint32_t pa, uint32_t pb)
{
	uint32_t p, run = 0, freed = 0;

	for (p = pa; p <= pb; p++) {
		bool release = false;

		if (p < pb && !s->used) {
			release = bit_test(s->pages, p);
		} else if (p < pb && bit_test(s->pages, p)) {
			uint32_t s0 = (uint32_t)(((uint64_t)p << PAGE_SHIFT) / s->csize);
			uint32_t s1 = (uint32_t)((((uint64_t)p + 1) << PAGE_SHIFT) - 1) / s->csize;

			if (s0 >= s->nslots)
				release = true;
			else
				release = !bit_any(s->slots, s0,
						   ZR_MIN(s1, s->nslots - 1));
		}
		if (release) {
			run++;
			continue;
		}
		if (run) {
			span_release_pages(pool, s, p - run, p);
			freed += run;
			run = 0;
		}
	}
	return freed;
}

/* Release every committed page of @s that no live slot overlaps. */
static uint32_t span_trim(struct zr_zpool *pool, struct zr_span *s)
{
	return span_trim_range(pool, s, 0, SPAN_PAGES);
}

static struct zr_span *span_create(struct zr_zpool *pool, unsigned cls)
{
	struct zr_class *c = &pool->classes[cls];
	size_t words = (c->nslots + 63) / 64;
	struct zr_span *s;
	struct zr_chunk *chunk;
	unsigned idx;
	uint32_t id;

	s = meta_alloc(pool, sizeof(*s) + words * sizeof(uint64_t), true);
	if (!s)
		return NULL;
	pthread_mutex_lock(&pool->page_lock);
	if (span_mem_get(pool, &id, &chunk, &idx)) {
		pthread_mutex_unlock(&pool->page_lock);
		meta_free(pool, s);
		return NULL;
	}
	s->base = chunk->base + (size_t)idx * SPAN_SIZE;
	s->chunk = chunk;
	s->chunk_idx = (uint8_t)idx;
	s->id = id;
	s->csize = c->size;
	s->cls = (uint16_t)cls;
	s->nslots = c->nslots;
	span_table_set(pool, id, s);
	pthread_mutex_unlock(&pool->page_lock);
	c->nspans++;
	return s;
}

/*
 * Free an empty span (already off its list); caller holds the class lock.
 * @return bytes of chunk metadata given back with it (its own pages and
 * header are counted by the caller, see class_bytes()).
 */
static uint64_t span_destroy(struct zr_zpool *pool, struct zr_span *s)
{
	struct zr_class *c = &pool->classes[s->cls];
	uint64_t bytes;

	span_trim(pool, s);
	pthread_mutex_lock(&pool->page_lock);
	span_table_set(pool, s->id, NULL);
	bytes = span_mem_put(pool, s->id, s->chunk, s->chunk_idx);
	pthread_mutex_unlock(&pool->page_lock);
	c->nspans--;
	meta_free(pool, s->rev);
	meta_free(pool, s);
	return bytes;
}

/* ---- class lists ---- */

static unsigned span_group(const struct zr_span *s)
{
	if (s->used == s->nslots)
		return GROUP_FULL;
	return (unsigned)((uint64_t)s->used * NR_GROUPS / s->nslots);
}

static void list_add(struct zr_class *c, struct zr_span *s, unsigned g)
{
	s->group = (uint8_t)g;
	s->prev = NULL;
	s->next = c->groups[g];
	if (s->next)
		s->next->prev = s;
	c->groups[g] = s;
}

static void list_del(struct zr_class *c, struct zr_span *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		c->groups[s->group] = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->next = s->prev = NULL;
}

/* Move @s to the list its fill level calls for. */
static void span_relist(struct zr_class *c, struct zr_span *s)
{
	unsigned g = span_group(s);

	if (g != s->group) {
		list_del(c, s);
		list_add(c, s, g);
	}
}

/* ---- slots ---- */

/* Lowest free slot of a non-full span. */
static uint32_t slot_find(struct zr_span *s)
{
	uint32_t w;

	for (w = s->hint;; w++) {
		uint64_t free = ~s->slots[w];

		if (free) {
			s->hint = w;
			return w * 64 + (uint32_t)__builtin_ctzll(free);
		}
	}
}

/* Room in @s->rev for @slot. @return 0 or -ENOMEM. */
static int rev_reserve(struct zr_zpool *pool, struct zr_span *s, uint32_t slot)
{
	uint32_t cap;
	uint32_t *a;

	if (slot < s->rev_cap)
		return 0;
	cap = s->rev_cap ? s->rev_cap : 16;
	while (cap <= slot)
		cap *= 2;
	cap = ZR_MIN(cap, s->nslots);
	a = meta_alloc(pool, cap * sizeof(*a), false);
	if (!a)
		return -ENOMEM;
	if (s->rev_cap)
		memcpy(a, s->rev, s->rev_cap * sizeof(*a));
	meta_free(pool, s->rev);
	s->rev = a;
	s->rev_cap = cap;
	return 0;
}

/* Mark @slot used, committing the pages it overlaps. */
static void slot_take(struct zr_zpool *pool, struct zr_span *s, uint32_t slot,
		      uint32_t h)
{
	uint32_t p0 = (uint32_t)(((uint64_t)slot * s->csize) >> PAGE_SHIFT);
	uint32_t p1 = (uint32_t)(((uint64_t)(slot + 1) * s->csize - 1) >> PAGE_SHIFT);
	uint32_t p, n = 0;

	bit_set(s->slots, slot);
	s->used++;
	s->rev[slot] = h;
	for (p = p0; p <= p1; p++) {
		if (!bit_test(s->pages, p)) {
			bit_set(s->pages, p);
			n++;
		}
	}
	if (n) {
		s->npages += n;
		span_pages_add(pool, n);
	}
}

static void slot_put(struct zr_span *s, uint32_t slot)
{
	bit_clear(s->slots, slot);
	s->used--;
	if (slot / 64 < s->hint)
		s->hint = slot / 64;
}

static uint64_t entry_make(uint32_t span, uint32_t slot, size_t size)
{
	return E_LIVE | (uint64_t)span << E_SPAN_SHIFT |
	       (uint64_t)slot << E_SLOT_SHIFT | (uint64_t)(size - 1);
}

/* ---- public API ---- */

int zr_zpool_create(struct zr_zpool **out)
{
	struct zr_zpool *pool;
	pthread_rwlockattr_t attr;
	unsigned i;

	*out = NULL;
	if (posix_memalign((void **)&pool, 64, sizeof(*pool)))
		return -ENOMEM;
	memset(pool, 0, sizeof(*pool));
	pool->h_next = 1;
	pool->fail_after = -1;
	for (i = 0; i < NR_CLASSES; i++) {
		struct zr_class *c = &pool->classes[i];

		pthread_mutex_init(&c->lock, NULL);
		c->size = class_size(i);
		c->nslots = SPAN_SIZE / c->size;
	}
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr,
		PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&pool->map_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	pthread_mutex_init(&pool->page_lock, NULL);
	pthread_mutex_init(&pool->grow_lock, NULL);
	zr_stat_add(&pool->st.meta_bytes, meta_size(pool));
	zr_stat_add(&pool->st.fixed_bytes, meta_size(pool));	/* (its class table) */
	mem_add(pool, meta_size(pool));
	*out = pool;
	return 0;
}

void zr_zpool_destroy(struct zr_zpool *pool)
{
	uint32_t id;
	unsigned t, m;

	if (!pool)
		return;
	for (id = 0; id < pool->span_next; id++) {
		struct zr_span *s = span_lookup(pool, id);

		if (!s)
			continue;
		/* A chunk with no free span is on no list: put it on one. */
		if (!s->chunk->free_mask) {
			chunk_link(pool, s->chunk);
			s->chunk->free_mask = 1;
		}
		free(s->rev);
		free(s);
	}
	while (pool->chunks) {
		struct zr_chunk *c = pool->chunks;

		pool->chunks = c->next;
		munmap(c->base, CHUNK_SIZE);
		free(c);
	}
	if (pool->spare) {
		munmap(pool->spare->base, CHUNK_SIZE);
		free(pool->spare);
	}
	for (t = 0; t < S_TOP_SIZE; t++)
		free(pool->span_top[t]);
	free(pool->span_free);
	for (t = 0; t < H_TOP_SIZE; t++) {
		if (!pool->h_top[t])
			continue;
		for (m = 0; m < H_MID_SIZE; m++)
			free(pool->h_top[t][m]);
		free(pool->h_top[t]);
	}
	for (t = 0; t < NR_CLASSES; t++)
		pthread_mutex_destroy(&pool->classes[t].lock);
	pthread_rwlock_destroy(&pool->map_lock);
	pthread_mutex_destroy(&pool->page_lock);
	pthread_mutex_destroy(&pool->grow_lock);
	free(pool);
}

/* ---- fault injection, map lock ---- */

/* Whether fault injection refuses this allocation. */
static bool fail_now(struct zr_zpool *pool)
{
	long n = __atomic_load_n(&pool->fail_after, __ATOMIC_RELAXED);

	while (n >= 0) {
		if (n == 0)
			return true;
		if (__atomic_compare_exchange_n(&pool->fail_after, &n, n - 1,
						true, __ATOMIC_RELAXED,
						__ATOMIC_RELAXED))
			return false;
	}
	return false;
}

/*
 * Pools whose map_lock this thread holds for reading, with the nesting
 * depth: a nested zr_zpool_map() of the same pool must not rdlock again,
 * since a writer-preferring rwlock would block it behind a waiting
 * compaction that in turn waits for this thread. A thread that holds
 * mappings of more than NR_HOLDS pools at once falls back to plain
 * rdlock for the extra ones (safe as long as it does not nest maps of
 * those).
 */
#define NR_HOLDS 4
static __thread struct {
	struct zr_zpool *pool;
	unsigned depth;
} zr_holds[NR_HOLDS];

static void map_lock_read(struct zr_zpool *pool)
{
	int i, spare = -1;

	for (i = 0; i < NR_HOLDS; i++) {
		if (zr_holds[i].depth && zr_holds[i].pool == pool) {
			zr_holds[i].depth++;
			return;
		}
		if (!zr_holds[i].depth && spare < 0)
			spare = i;
	}
	pthread_rwlock_rdlock(&pool->map_lock);
	if (spare >= 0) {
		zr_holds[spare].pool = pool;
		zr_holds[spare].depth = 1;
	}
}

static void map_unlock_read(struct zr_zpool *pool)
{
	int i;

	for (i = 0; i < NR_HOLDS; i++) {
		if (zr_holds[i].depth && zr_holds[i].pool == pool) {
			if (--zr_holds[i].depth == 0)
				pthread_rwlock_unlock(&pool->map_lock);
			return;
		}
	}
	pthread_rwlock_unlock(&pool->map_lock);
}

static bool map_held(struct zr_zpool *pool)
{
	int i;

	for (i = 0; i < NR_HOLDS; i++)
		if (zr_holds[i].depth && zr_holds[i].pool == pool)
			return true;
	return false;
}

/* ---- public API: objects ---- */

int zr_zpool_alloc(struct zr_zpool *pool, size_t size, uint32_t *handle)
{
	struct zr_class *c;
	struct zr_span *s = NULL;
	bool created = false;
	unsigned cls;
	uint32_t h, slot;
	int rc = -ENOMEM, g;

	if (!handle)
		return -EINVAL;
	*handle = ZR_ZPOOL_NO_HANDLE;
	if (size == 0 || size > ZR_ZPOOL_MAX_OBJ)
		return -EINVAL;
	if (fail_now(pool))
		return -ENOMEM;
	h = h_get(pool, &rc);
	if (!h)
		return rc;

	cls = size_to_class(size);
	c = &pool->classes[cls];
	pthread_mutex_lock(&c->lock);
	for (g = NR_GROUPS - 1; g >= 0 && !s; g--)
		s = c->groups[g];
	if (!s) {
		s = span_create(pool, cls);
		if (!s)
			goto fail;
		list_add(c, s, 0);
		created = true;
	}
	slot = slot_find(s);
	if (rev_reserve(pool, s, slot)) {
		if (created) {
			list_del(c, s);
			span_destroy(pool, s);
		}
		goto fail;
	}
	slot_take(pool, s, slot, h);
	c->nobjs++;
	span_relist(c, s);
	__atomic_store_n(h_entry(pool, h), entry_make(s->id, slot, size),
			 __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->lock);

	zr_stat_add(&pool->st.obj_bytes, size);
	zr_stat_add(&pool->st.obj_count, 1);
	*handle = h;
	return 0;
fail:
	pthread_mutex_unlock(&c->lock);
	h_push(pool, h);
	return -ENOMEM;
}

void zr_zpool_free(struct zr_zpool *pool, uint32_t handle)
{
	uint64_t *e = handle ? h_entry(pool, handle) : NULL;
	struct zr_class *c;
	struct zr_span *s;
	uint64_t v;
	size_t size;
	uint32_t slot;

	if (!e)
		return;
	v = __atomic_load_n(e, __ATOMIC_ACQUIRE);
	if (!(v & E_LIVE))
		return;
	size = (size_t)(v & E_SIZE_MASK) + 1;
	c = &pool->classes[size_to_class(size)];

	pthread_mutex_lock(&c->lock);
	v = __atomic_load_n(e, __ATOMIC_RELAXED);
	if (!(v & E_LIVE)) {	/* lost a race with a double free */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	s = span_lookup(pool, (uint32_t)((v >> E_SPAN_SHIFT) & E_SPAN_MASK));
	slot = (uint32_t)((v >> E_SLOT_SHIFT) & E_SLOT_MASK);
	slot_put(s, slot);
	c->nobjs--;
	__atomic_store_n(e, 0, __ATOMIC_RELAXED);
	if (s->used == 0) {
		list_del(c, s);
		span_destroy(pool, s);
	} else {
		span_relist(c, s);
		/*
		 * A large object gives its pages back at once: one madvise
		 * is cheap next to compressing FREE_RELEASE_MIN bytes, and
		 * holes in spans of large classes then cost nothing until
		 * the next compaction.
		 */
		if (s->csize >= FREE_RELEASE_MIN)
			span_trim_range(pool, s,
				(uint32_t)(((uint64_t)slot * s->csize) >> PAGE_SHIFT),
				(uint32_t)((((uint64_t)slot + 1) * s->csize - 1) >> PAGE_SHIFT) + 1);
	}
	pthread_mutex_unlock(&c->lock);

	h_push(pool, handle);
	zr_stat_sub(&pool->st.obj_bytes, size);
	zr_stat_sub(&pool->st.obj_count, 1);
}

/*
 * The read side of map_lock is held until zr_zpool_unmap() on the same
 * thread. A dead or unknown handle gives NULL and holds nothing: do not
 * unmap it then.
 */
void *zr_zpool_map(struct zr_zpool *pool, uint32_t handle)
{
	uint64_t *e = handle ? h_entry(pool, handle) : NULL;
	struct zr_span *s;
	uint64_t v;

	if (!e)
		return NULL;
	map_lock_read(pool);
	v = __atomic_load_n(e, __ATOMIC_ACQUIRE);
	if (!(v & E_LIVE)) {
		map_unlock_read(pool);
		return NULL;
	}
	s = span_lookup(pool, (uint32_t)((v >> E_SPAN_SHIFT) & E_SPAN_MASK));
	return s->base + (size_t)((v >> E_SLOT_SHIFT) & E_SLOT_MASK) * s->csize;
}

void zr_zpool_unmap(struct zr_zpool *pool, uint32_t handle)
{
	if (handle)
		map_unlock_read(pool);
}

size_t zr_zpool_obj_size(struct zr_zpool *pool, uint32_t handle)
{
	uint64_t *e = handle ? h_entry(pool, handle) : NULL;
	uint64_t v = e ? __atomic_load_n(e, __ATOMIC_RELAXED) : 0;

	return (v & E_LIVE) ? (size_t)(v & E_SIZE_MASK) + 1 : 0;
}

/* ---- compaction ---- */

static int span_cmp_used_desc(const void *a, const void *b)
{
	const struct zr_span *x = *(const struct zr_span *const *)a;
	const struct zr_span *y = *(const struct zr_span *const *)b;

	return x->used < y->used ? 1 : x->used > y->used ? -1 : 0;
}

/* Highest used slot of a non-empty span, at or below word *@w. */
static uint32_t slot_last_used(const struct zr_span *s, uint32_t *w)
{
	for (;; (*w)--)
		if (s->slots[*w])
			return *w * 64 + 63 - (uint32_t)__builtin_clzll(s->slots[*w]);
}

/* Bytes the spans of class @c hold: pages, headers, slot->handle arrays. */
static uint64_t class_bytes(const struct zr_class *c)
{
	const struct zr_span *s;
	uint64_t bytes = 0;
	unsigned g;

	for (g = 0; g <= GROUP_FULL; g++)
		for (s = c->groups[g]; s; s = s->next)
			bytes += (uint64_t)s->npages * PAGE_SIZE + meta_size((void *)s) +
				 meta_size(s->rev);
	return bytes;
}

/*
 * Pack the objects of class @c: order its spans fullest first, then move
 * the object in the last used slot of the last span into the first free
 * slot of the first non-full span until the two meet. Every span but the
 * last ends up full, the last holds its objects in its lowest slots, and
 * the emptied spans are freed; then every committed page that no object
 * overlaps is released. Caller holds map_lock for writing and the class
 * lock. @return bytes given back.
 */
static uint64_t class_compact(struct zr_zpool *pool, struct zr_class *c)
{
	uint32_t words = (c->nslots + 63) / 64, sw = words - 1;
	struct zr_span **arr, *s;
	uint64_t bytes = 0, n = 0, i, before, after;
	long d = 0, src;
	unsigned g;

	if (!c->nspans)
		return 0;
	before = class_bytes(c);
	arr = malloc(c->nspans * sizeof(*arr));	/* transient */
	if (arr) {
		for (g = 0; g <= GROUP_FULL; g++)
			for (s = c->groups[g]; s; s = s->next)
				arr[n++] = s;
		qsort(arr, n, sizeof(*arr), span_cmp_used_desc);
		src = (long)n - 1;
		for (;;) {
			struct zr_span *dst, *from;
			uint32_t slot, dslot, h;
			uint64_t *e, v;
			size_t size;

			while (d <= src && arr[d]->used == arr[d]->nslots)
				d++;
			if (d > src)
				break;
			dst = arr[d];
			from = arr[src];
			if (from->used == 0) {
				list_del(c, from);
				bytes += span_destroy(pool, from);
				arr[src--] = NULL;
				sw = words - 1;
				continue;
			}
			slot = slot_last_used(from, &sw);
			dslot = slot_find(dst);
			if (d == src && dslot >= slot)
				break;	/* packed */
			if (rev_reserve(pool, dst, dslot))
				break;
			h = from->rev[slot];
			e = h_entry(pool, h);
			v = __atomic_load_n(e, __ATOMIC_RELAXED);
			size = (size_t)(v & E_SIZE_MASK) + 1;
			memcpy(dst->base + (size_t)dslot * c->size,
			       from->base + (size_t)slot * c->size, size);
			slot_take(pool, dst, dslot, h);
			slot_put(from, slot);
			__atomic_store_n(e, entry_make(dst->id, dslot, size),
					 __ATOMIC_RELEASE);
		}
		for (i = 0; i < n; i++) {
			s = arr[i];
			if (!s)
				continue;
			if (s->used == 0) {
				list_del(c, s);
				bytes += span_destroy(pool, s);
			} else {
				span_relist(c, s);
			}
		}
		free(arr);
	}
	for (g = 0; g <= GROUP_FULL; g++)
		for (s = c->groups[g]; s; s = s->next)
			span_trim(pool, s);
	/* Moves may have grown a slot->handle array: report the net. */
	after = class_bytes(c);
	return before > after ? bytes + before - after : bytes;
}

uint64_t zr_zpool_compact(struct zr_zpool *pool)
{
	uint64_t bytes = 0;
	unsigned i;

	zr_stat_add(&pool->st.compactions, 1);
	if (map_held(pool))
		return 0;	/* would wait for ourselves */
	for (i = 0; i < NR_CLASSES; i++) {
		struct zr_class *c = &pool->classes[i];

		pthread_rwlock_wrlock(&pool->map_lock);
		pthread_mutex_lock(&c->lock);
		bytes += class_compact(pool, c);
		pthread_mutex_unlock(&c->lock);
		pthread_rwlock_unlock(&pool->map_lock);
	}
	zr_stat_add(&pool->st.pages_compacted, bytes / PAGE_SIZE);
	return bytes;
}

/* ---- statistics, fault injection ---- */

void zr_zpool_get_stats(struct zr_zpool *pool, struct zr_zpool_stats *st)
{
	st->mem_used = zr_stat_read(&pool->st.mem_used);
	st->mem_used_max = zr_stat_read(&pool->st.mem_used_max);
	st->span_bytes = zr_stat_read(&pool->st.span_bytes);
	st->meta_bytes = zr_stat_read(&pool->st.meta_bytes);
	st->fixed_bytes = zr_stat_read(&pool->st.fixed_bytes);
	st->obj_bytes = zr_stat_read(&pool->st.obj_bytes);
	st->obj_count = zr_stat_read(&pool->st.obj_count);
	st->compactions = zr_stat_read(&pool->st.compactions);
	st->pages_compacted = zr_stat_read(&pool->st.pages_compacted);
}

uint64_t zr_zpool_mem_used(struct zr_zpool *pool)
{
	return zr_stat_read(&pool->st.mem_used);
}

void zr_zpool_fail_after(struct zr_zpool *pool, long n)
{
	__atomic_store_n(&pool->fail_after, n < 0 ? -1 : n, __ATOMIC_RELAXED);
}

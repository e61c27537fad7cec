/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zr_zpool.h - allocator for compressed objects (the zsmalloc idea).
 *
 * Objects of 1..ZR_ZPOOL_MAX_OBJ bytes are packed into spans of one size
 * class each; a caller holds an opaque 32-bit handle, never a pointer, so
 * that compaction may move objects. Every byte the pool takes from the
 * system is counted in mem_used, so that the block store's budget is exact.
 */
#ifndef ZR_ZPOOL_H
#define ZR_ZPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Largest object: a raw 128 KiB block. */
#define ZR_ZPOOL_MAX_OBJ (128u * 1024u)

/* Handle 0 is never returned by a successful allocation. */
#define ZR_ZPOOL_NO_HANDLE 0u

struct zr_zpool;

struct zr_zpool_stats {
	uint64_t mem_used;	/* bytes taken from the system: spans + metadata */
	uint64_t mem_used_max;	/* high-water mark of mem_used */
	uint64_t span_bytes;	/* bytes of spans alone */
	uint64_t meta_bytes;	/* handle table, span headers, class tables */
	uint64_t fixed_bytes;	/* the part of meta_bytes that never shrinks:
				 * the pool itself, the handle and span
				 * tables, the span id stack */
	uint64_t obj_bytes;	/* sum of the sizes asked for by live objects */
	uint64_t obj_count;	/* live objects */
	uint64_t compactions;	/* zr_zpool_compact() calls */
	uint64_t pages_compacted; /* bytes given back by compaction / 4096 */
};

/**
 * zr_zpool_create() - a new, empty pool; destroy it with zr_zpool_destroy().
 * @return 0, or -ENOMEM.
 */
int zr_zpool_create(struct zr_zpool **out);

/** Free the pool and every object in it; NULL is accepted. */
void zr_zpool_destroy(struct zr_zpool *pool);

/**
 * zr_zpool_alloc() - allocate an object of @size bytes.
 * @return 0 with *@handle set, -EINVAL for size 0 or > ZR_ZPOOL_MAX_OBJ,
 *   -ENOMEM when the system (or fault injection) refuses memory.
 * Thread-safe. Free the object with zr_zpool_free().
 */
int zr_zpool_alloc(struct zr_zpool *pool, size_t size, uint32_t *handle);

/** Free an object; ZR_ZPOOL_NO_HANDLE is accepted and ignored. Thread-safe. */
void zr_zpool_free(struct zr_zpool *pool, uint32_t handle);

/**
 * zr_zpool_map() - address of the object's bytes, valid until the matching
 * zr_zpool_unmap(). While mapped the object cannot move; do not call
 * zr_zpool_compact() from the thread that holds a mapping. Thread-safe.
 */
void *zr_zpool_map(struct zr_zpool *pool, uint32_t handle);

/** End a mapping made by zr_zpool_map(). */
void zr_zpool_unmap(struct zr_zpool *pool, uint32_t handle);

/** Size asked for when the object was allocated. */
size_t zr_zpool_obj_size(struct zr_zpool *pool, uint32_t handle);

/**
 * zr_zpool_compact() - move objects out of sparse spans and give the emptied
 * spans back to the system.
 * @return bytes given back.
 */
uint64_t zr_zpool_compact(struct zr_zpool *pool);

/** Snapshot of the counters; takes no lock (relaxed atomic reads). */
void zr_zpool_get_stats(struct zr_zpool *pool, struct zr_zpool_stats *st);

/** Bytes currently taken from the system (== stats.mem_used), lock-free. */
uint64_t zr_zpool_mem_used(struct zr_zpool *pool);

/**
 * zr_zpool_fail_after() - fault injection for tests: the allocation after
 * the next @n successful ones fails with -ENOMEM (and every one after it,
 * until called again with a negative @n to switch it off).
 */
void zr_zpool_fail_after(struct zr_zpool *pool, long n);

#endif /* ZR_ZPOOL_H */

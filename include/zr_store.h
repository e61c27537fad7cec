/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zr_store.h - the compressed block store: per-file sparse block maps of
 * compressed slots, a RAM budget, demotion policy and statistics.
 *
 * The store does no file I/O of its own. When a dirty block must leave RAM
 * it calls ops->writeback() with runs of adjacent blocks; the filesystem
 * writes them to the backing file. A block that was never stored, or that
 * was demoted, is a miss: the caller reads it from the backing file and may
 * insert it clean with zr_file_write(..., ZR_WRITE_CLEAN).
 *
 * Lifetime: a struct zr_file is reference counted (zr_file_get/put). The
 * last put drops every block, dirty ones included: this is how "unlink of
 * the last link drops the file's blocks" is done. Call zr_file_writeback()
 * first when the data must be kept.
 */
#ifndef ZR_STORE_H
#define ZR_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zr_codec.h"

#define ZR_BLOCK_MIN (4u * 1024u)
#define ZR_BLOCK_MAX (128u * 1024u)

enum zr_policy_kind {
	ZR_POLICY_ADAPTIVE = 0,	/* GreedyDual-Size-Frequency with ageing */
	ZR_POLICY_LRU = 1,	/* least recently used, for comparison */
};

struct zr_store_config {
	uint32_t block_size;	/* power of two, ZR_BLOCK_MIN..ZR_BLOCK_MAX */
	uint64_t budget;	/* bytes: pool + per-block metadata */
	enum zr_codec_id comp;	/* hot codec */
	int comp_level;
	enum zr_codec_id cold_comp; /* codec a cold block is recompressed with */
	int cold_level;
	uint32_t min_saving;	/* bytes a block must save, else stored raw */
	enum zr_policy_kind policy;
	unsigned high_wm;	/* percent of budget where background reclaim starts */
	unsigned low_wm;	/* percent of budget where it stops */
};

/** Fill @cfg with the defaults (64 KiB blocks... see zr_store.c). */
void zr_store_config_default(struct zr_store_config *cfg);

struct zr_store_ops {
	/*
	 * Write @nblocks consecutive blocks, first index @index, of the file
	 * whose owner pointer is @owner; @buf holds nblocks * block_size
	 * bytes (the last block may extend past EOF: clip it). Called with no
	 * store lock held, but with the file's I/O mutex held (which keeps
	 * @owner from zr_file_detach()).
	 * Return 0 or -errno; on error the blocks stay dirty.
	 */
	int (*writeback)(void *ctx, void *owner, uint64_t index,
			 unsigned nblocks, const void *buf);
	/*
	 * Optional: whether the dirty blocks of @owner's file are written
	 * back once older than expire_ms (zr_store_writeback_expired). A file
	 * whose data may never be needed on disk (deleted, still open) says
	 * no; reclaim and the other writebacks still take it. Called with the
	 * file's lock held (what keeps @owner from zr_file_detach()): it must
	 * not block or call into the store.
	 */
	bool (*may_expire)(void *ctx, void *owner);
	/*
	 * Optional: which filesystem @owner's file is written back to (its
	 * st_dev). Two files on one refused for room or write access
	 * (ENOSPC, EDQUOT, EROFS) make a reclaim pass take that filesystem
	 * for full, and pass over its files' dirty blocks, but not those
	 * of files on others. Without it, all files are on one. Must not
	 * block or call into the store.
	 */
	uint64_t (*space)(void *ctx, void *owner);
};

/* Counters; every field is read with relaxed atomics, no lock. */
struct zr_stats {
	uint64_t orig_data_size;	/* bytes of blocks stored (block_size each, zero/same included) */
	uint64_t compr_data_size;	/* bytes of compressed objects in the pool */
	uint64_t mem_used_total;	/* pool bytes taken from the system + metadata */
	uint64_t mem_used_max;
	uint64_t meta_bytes;		/* block maps, file records, handle table */
	uint64_t budget;
	uint64_t blocks_zero;		/* zero or same-filled: no pool memory */
	uint64_t blocks_raw;		/* stored uncompressed (saved < min_saving,
					 * or not compressed yet: blocks_pending) */
	uint64_t blocks_pending;	/* of those, stored as is to be compressed
					 * later (zr_file_prepare_later()) */
	uint64_t blocks_hot;		/* compressed with the hot codec */
	uint64_t blocks_cold;		/* recompressed with the cold codec */
	uint64_t blocks_dirty;
	uint64_t hits;
	uint64_t misses;
	uint64_t recompressions;
	uint64_t codec_errors;		/* codec failures (a block stored raw and
					 * pending, or a recompression left) */
	uint64_t demotions;		/* blocks that left RAM */
	uint64_t writebacks;		/* blocks written back */
	uint64_t bytes_written_back;
	uint64_t writeback_errors;
	uint64_t enospc;		/* writers refused for lack of room */
	uint64_t files;
};

struct zr_store;
struct zr_file;

/**
 * zr_store_create() - a new store; destroy it with zr_store_destroy().
 * @ops, @ops_ctx: the writeback callback and its first argument; ops may be
 *   NULL for a store that never holds dirty data past its budget (tests).
 * @return 0, -EINVAL for a bad config, -ENOMEM.
 */
int zr_store_create(const struct zr_store_config *cfg,
		    const struct zr_store_ops *ops, void *ops_ctx,
		    struct zr_store **out);

/** Destroy a store; every file must have been put. NULL is accepted. */
void zr_store_destroy(struct zr_store *st);

uint32_t zr_store_block_size(const struct zr_store *st);

/**
 * zr_store_set_budget() - change the budget live.
 * @return 0, -EINVAL for 0, or -ENOSPC below zr_store_budget_min().
 */
int zr_store_set_budget(struct zr_store *st, uint64_t budget);

/**
 * zr_store_removed() - how many blocks have left the store, any way
 * (demoted, dropped, truncated, their file freed): a caller that snapshots
 * it can tell whether blocks went since (data.c: zr_data_syncfs()).
 */
uint64_t zr_store_removed(struct zr_store *st);

/**
 * zr_store_budget_min() - the smallest budget zr_store_set_budget() takes
 * now: room for the pool's tables, which never shrink (the handle table
 * grows with the most blocks ever held at once: 8 bytes each), and for a
 * few blocks. Below that, reclaim could never make room, and every write
 * that needs the tier would fail with ENOSPC (helper-35's review).
 */
uint64_t zr_store_budget_min(struct zr_store *st);

/** Snapshot of the counters, lock-free. */
void zr_store_get_stats(struct zr_store *st, struct zr_stats *out);

/** mem_used_total now, lock-free. */
uint64_t zr_store_mem_used(struct zr_store *st);

/**
 * zr_store_make_room() - called by a writer, holding no file lock, before it
 * stores @need more bytes: when that would pass the budget, demote blocks
 * (writing dirty ones back) until usage is at the low watermark; a pass
 * that leaves no room while no writeback failed (blocks busy, the room
 * taken by other writers) is tried again, for up to 0.2 s.
 * @return 0, or -ENOSPC when the budget is full and nothing can be demoted
 *   (every block is dirty and its writeback fails).
 */
int zr_store_make_room(struct zr_store *st, size_t need);

/**
 * zr_store_make_room_once() - the same in one reclaim pass and no pause,
 * for what may be left out (a clean copy of data read from the disk).
 * @return 0, or -EAGAIN when there is no room (not counted as ENOSPC).
 */
int zr_store_make_room_once(struct zr_store *st, size_t need);

/** Whether usage is above the high watermark (background reclaim should run). */
bool zr_store_above_high(struct zr_store *st);

/**
 * zr_store_reclaim() - demote by policy until usage <= @target bytes or
 * @max_blocks blocks were demoted. Cold recompression counts as progress.
 * @return bytes of RAM freed (>= 0), or -ENOSPC if nothing could be freed.
 */
int64_t zr_store_reclaim(struct zr_store *st, uint64_t target, uint64_t max_blocks);

/* Flags of zr_store_writeback_all(). */
#define ZR_WB_ALL	0x1	/* every dirty block */
#define ZR_WB_IDLE	0x2	/* dirty blocks not accessed since the last ZR_WB_IDLE pass */
#define ZR_WB_RAW	0x4	/* dirty raw (incompressible) blocks */
#define ZR_WB_DROP	0x8	/* drop the blocks after writing them (demote) */

/**
 * zr_store_writeback_all() - write back dirty blocks of every file.
 * @return 0, or the first -errno (other files are still tried).
 */
int zr_store_writeback_all(struct zr_store *st, unsigned flags);

/**
 * zr_store_writeback_expired() - write back every file whose oldest dirty
 * block is older than @expire_ms (monotonic clock), or all when @expire_ms
 * is 0. One walk at a time: while one runs, another call returns 0 at once
 * without writing anything. @return 0 or the first -errno.
 */
int zr_store_writeback_expired(struct zr_store *st, uint64_t expire_ms);

/**
 * zr_store_recompress_idle() - recompress with the cold codec every hot block
 * not accessed since the previous call (zram's idle marking and
 * recompression, done automatically): idle data costs the strong codec's
 * size, data in use keeps the fast codec. At most @max_blocks blocks, and
 * for at most @max_ms milliseconds (0: no time limit).
 * @return bytes of RAM saved.
 */
uint64_t zr_store_recompress_idle(struct zr_store *st, uint64_t max_blocks,
				  uint64_t max_ms);

/**
 * zr_store_recompress_pending() - whether the last zr_store_recompress_idle()
 * pass (or zr_store_recompress_more() slice) stopped with idle blocks left.
 */
bool zr_store_recompress_pending(struct zr_store *st);

/**
 * zr_store_recompress_more() - go on with the idle blocks of the last pass,
 * for at most @max_ms milliseconds, but only when no block was read or
 * written since that pass or the previous slice ended, and only until one
 * is: idle CPU finishes the recompression soon after the data goes quiet,
 * instead of 1 s a pass. Each block is tried once: one the cold codec does
 * not shrink is left alone until it is rewritten. @ran: set to whether it
 * went on (false: nothing pending, or a block was used since).
 * @return bytes of RAM saved.
 */
uint64_t zr_store_recompress_more(struct zr_store *st, uint64_t max_ms, bool *ran);

/** Drop every clean block. @return bytes of RAM freed. */
uint64_t zr_store_drop_clean(struct zr_store *st);

/** Compact the pool. @return bytes given back. */
uint64_t zr_store_compact(struct zr_store *st);

/**
 * zr_file_create() - a new, empty block map for one inode, with one
 * reference; @owner is passed to ops->writeback().
 * @return 0 or -ENOMEM. Drop it with zr_file_put().
 */
int zr_file_create(struct zr_store *st, void *owner, struct zr_file **out);

void zr_file_get(struct zr_file *f);

/** Drop a reference; the last drops every block (dirty too) and frees. */
void zr_file_put(struct zr_file *f);

/**
 * zr_file_read() - copy block @index into @buf (block_size bytes).
 * @return 1 on a hit, 0 when the block is not in RAM (a miss; @buf
 *   untouched), -EIO when its compressed data is corrupt, -ENOMEM.
 */
int zr_file_read(struct zr_file *f, uint64_t index, void *buf);

#define ZR_WRITE_DIRTY	0x0	/* new data: must be written back before it leaves RAM */
#define ZR_WRITE_CLEAN	0x1	/* data just read from the backing file; ignored if the block is present */

/**
 * zr_file_write() - store block @index from @buf (block_size bytes).
 * Does not reclaim: call zr_store_make_room() first, with no lock held.
 * @return 0, or -ENOMEM when the pool cannot allocate.
 */
int zr_file_write(struct zr_file *f, uint64_t index, const void *buf,
		  unsigned flags);

/**
 * zr_file_write_raw() - zr_file_write() that also tells, in *@raw (if not
 * NULL), whether the block was stored uncompressed because it did not save
 * min_saving. Same return values.
 */
int zr_file_write_raw(struct zr_file *f, uint64_t index, const void *buf,
		      unsigned flags, bool *raw);

/*
 * A block compressed and given its place in the pool, not yet in a file:
 * zr_file_write() in two steps, for a caller that must know the block can
 * be stored before it changes anything else (truncate). Fields are the
 * store's; a zeroed one holds nothing.
 */
struct zr_prepared {
	uint64_t pat;		/* fill pattern of a same-filled block */
	uint32_t handle;	/* pool object, or ZR_ZPOOL_NO_HANDLE */
	uint32_t len;		/* its length */
	enum zr_codec_id codec;	/* its codec */
	unsigned fl;		/* ZR_SLOT_* flags but DIRTY */
};

/* Whether prepared block @p was tried and did not compress (raw, but not
 * pending: not one stored as is to compress later, or whose codec failed). */
bool zr_prepared_incompressible(const struct zr_prepared *p);

/**
 * zr_file_prepare() - compress @buf (block_size bytes) and store it in the
 * pool, for zr_file_install() or zr_file_unprepare() into @p. A codec
 * that fails (out of memory) does not fail it: the block is stored as by
 * zr_file_prepare_later(), and codec_errors counts it.
 * @return 0, or -ENOMEM when the pool cannot allocate (@p holds nothing).
 */
int zr_file_prepare(struct zr_file *f, const void *buf, struct zr_prepared *p);

/**
 * zr_file_prepare_later() - zr_file_prepare() without the compression: @buf
 * goes into the pool as is, without its zero tail (a same-filled block as
 * a pattern), marked to be compressed later, by zr_store_settle(), by the
 * idle recompression pass (with the cold codec), or by a reclaim that would
 * otherwise drop it. For a clean copy made while the CPU has a stream to
 * keep up with, and a block written by a writer that waits for it: a
 * memcpy instead of the codec. @return as zr_file_prepare().
 */
int zr_file_prepare_later(struct zr_file *f, const void *buf, struct zr_prepared *p);

/**
 * zr_store_settle() - compress, with the hot codec, blocks that
 * zr_file_prepare_later() stored, in every file, until none is left or
 * @stop(@arg) says so (asked before each block). A block is copied under
 * its file's lock, compressed without it, and replaced only if it still
 * holds the same bytes; one that does not save min_saving, or that its
 * zero tail alone made shorter than it compresses, stays raw. Blocks stay
 * pending while both copies would not fit under the budget.
 * @return blocks looked at (compressed or found incompressible).
 */
uint64_t zr_store_settle(struct zr_store *st, bool (*stop)(void *arg), void *arg);

/** Pool bytes of blocks stored by zr_file_prepare_later() and not
 * compressed yet, lock-free. */
uint64_t zr_store_pending_bytes(struct zr_store *st);

/**
 * zr_file_install() - put the prepared block @p at @index of @f, as
 * zr_file_write() does with @flags; @p is used up either way. Allocates
 * only for an index that holds no block (the map's nodes).
 * @return 0, or -ENOMEM (nothing stored).
 */
int zr_file_install(struct zr_file *f, uint64_t index, struct zr_prepared *p,
		    unsigned flags);

/** zr_file_unprepare() - free the prepared block @p (none: nothing). */
void zr_file_unprepare(struct zr_file *f, struct zr_prepared *p);

/**
 * zr_file_drop() - drop blocks [@first, @first + @count), dirty ones
 * included (truncate, punch hole). @count UINT64_MAX means "to the end".
 * Does not take the I/O mutex: a caller that must not race with a writeback
 * in flight (truncate of the backing file) holds zr_file_io_lock() around
 * both. A block dropped while its writeback is in flight is not revived.
 */
void zr_file_drop(struct zr_file *f, uint64_t first, uint64_t count);

/**
 * zr_file_detach() - @f's owner is about to be freed while others (a
 * writeback of every file, the expiry walk, reclaim) may still hold
 * references to @f: every block goes, dirty ones included, and the store
 * never passes the owner to its callbacks again. A writeback of @f in
 * flight stops at its next run, and is waited for (the I/O mutex), so its
 * callback is done with the owner when this returns. Caller holds neither
 * the file's lock nor its I/O mutex.
 */
void zr_file_detach(struct zr_file *f);

/**
 * zr_file_writeback() - write back every dirty block of the file, adjacent
 * ones in one ops->writeback() call.
 * @return 0, or the first -errno (the failed blocks stay dirty).
 */
int zr_file_writeback(struct zr_file *f);

/** Whether the file has dirty blocks. Lock-free. */
bool zr_file_dirty(struct zr_file *f);

/**
 * zr_file_redirty() - mark every clean block of @f that the store holds
 * dirty again, and those being written back now as rewritten (the end of
 * that writeback leaves them dirty): the backing filesystem may have lost
 * what was written back, its fsync or syncfs having failed, so the next
 * writeback writes it again (helper-39's review: a block in flight during
 * a failed syncfs was marked clean after it). @return blocks marked.
 */
uint64_t zr_file_redirty(struct zr_file *f);

/**
 * zr_file_redirty_range() - zr_file_redirty() of blocks [@first, @first +
 * @count) only (@count UINT64_MAX: to the end), for a caller that has
 * changed those blocks on disk behind the tier's back (a punch whose write
 * of zeros failed part way in a block) and wants the tier's copy written
 * over them again. @return blocks marked.
 */
uint64_t zr_file_redirty_range(struct zr_file *f, uint64_t first, uint64_t count);

/** zr_file_redirty() of every file (a failed syncfs of the backing
 * filesystem). @return blocks marked. */
uint64_t zr_store_redirty_all(struct zr_store *st);

/**
 * zr_file_next_present() - first block index >= @from held in RAM.
 * @return 1 with *@index set, or 0 when there is none.
 */
int zr_file_next_present(struct zr_file *f, uint64_t from, uint64_t *index);

/** Whether block @index is in RAM (clean or dirty). */
bool zr_file_has(struct zr_file *f, uint64_t index);

/** Highest dirty block index + 1 (0 when nothing is dirty). */
uint64_t zr_file_dirty_end(struct zr_file *f);

/**
 * zr_file_take_error() - the first writeback error recorded for this file
 * since the last call, which clears it. @return 0 or -errno.
 */
int zr_file_take_error(struct zr_file *f);

/**
 * zr_file_note_error() - record @err (-errno) as the file's writeback error
 * for zr_file_take_error(), unless one is recorded already.
 */
void zr_file_note_error(struct zr_file *f, int err);

/**
 * zr_file_io_lock()/zr_file_io_unlock() - the file's I/O mutex, held by
 * writeback around ops->writeback(). The filesystem holds it around a
 * truncate of the backing file so that no stale block is written past the
 * new end.
 */
void zr_file_io_lock(struct zr_file *f);
void zr_file_io_unlock(struct zr_file *f);

/** Blocks of this file in RAM (for tests and stats). */
uint64_t zr_file_nblocks(struct zr_file *f);

/** Dirty blocks of this file: not yet written back (read without the lock). */
uint64_t zr_file_ndirty(struct zr_file *f);

#endif /* ZR_STORE_H */

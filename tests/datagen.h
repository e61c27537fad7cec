/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * datagen.h - deterministic test data: zero, same-filled, text-like,
 * binary-like, random and mixed blocks, and plausible compressed sizes.
 *
 * Everything here is a pure function of its seed (or of the state word the
 * caller keeps), so a failing test or a benchmark run can be replayed
 * exactly. The generator is splitmix64; it is not for cryptography.
 *
 * Compression ratios (original / compressed) measured at 4 KiB / 64 KiB
 * blocks: text lz4 2.1 / 2.5, zstd-3 3.0 / 3.8; binary lz4 1.7 / 1.8,
 * zstd-3 2.5 / 2.7; random does not shrink; zero and same-filled are
 * trivial. `ZR_CODEC_RATIOS=1 tests/check_codec` prints the full table.
 */
#ifndef ZR_DATAGEN_H
#define ZR_DATAGEN_H

#include <stddef.h>
#include <stdint.h>

enum zr_datagen_kind {
	ZR_DATA_ZERO = 0,	/* all zero bytes */
	ZR_DATA_SAME,		/* one 64-bit pattern repeated (zram's same-filled) */
	ZR_DATA_TEXT,		/* source-code-like text: words, lines, indentation */
	ZR_DATA_BINARY,		/* records: small integers, pointers, some noise */
	ZR_DATA_RANDOM,		/* incompressible */
	ZR_DATA_MIXED,		/* one of the above, chosen from the seed per block */
	ZR_DATA_COUNT
};

/**
 * zr_datagen_fill() - fill @buf (@len bytes) with data of @kind.
 * The same (@kind, @seed, @len) always gives the same bytes. For
 * ZR_DATA_MIXED the kind actually used is zr_datagen_mixed_kind(@seed).
 * An invalid @kind fills with random data.
 */
void zr_datagen_fill(enum zr_datagen_kind kind, uint64_t seed, void *buf,
		     size_t len);

/**
 * zr_datagen_mixed_kind() - the kind a ZR_DATA_MIXED block of @seed holds:
 * 10% zero, 5% same-filled, 40% text, 30% binary, 15% random.
 * @return a kind other than ZR_DATA_MIXED.
 */
enum zr_datagen_kind zr_datagen_mixed_kind(uint64_t seed);

/**
 * zr_datagen_same_pattern() - the 64-bit pattern a ZR_DATA_SAME block of
 * @seed repeats (stored in native byte order). Never 0.
 */
uint64_t zr_datagen_same_pattern(uint64_t seed);

/** Name of a kind ("zero", "same", "text", "binary", "random", "mixed");
 * "?" for an invalid kind. */
const char *zr_datagen_name(enum zr_datagen_kind kind);

/**
 * zr_datagen_by_name() - look a kind up by its name (as zr_datagen_name()).
 * @return the kind, or -EINVAL for an unknown name.
 */
int zr_datagen_by_name(const char *name);

/**
 * zr_datagen_next() - next 64-bit value of the splitmix64 sequence kept in
 * @state (any initial value, including 0, is fine).
 */
uint64_t zr_datagen_next(uint64_t *state);

/**
 * zr_datagen_below() - a value uniform in [0, @n) from @state; 0 if @n is 0.
 */
uint64_t zr_datagen_below(uint64_t *state, uint64_t n);

/**
 * zr_datagen_comp_size() - a plausible compressed size of a @block_size
 * block, for exercising an allocator without compressing anything.
 * The mixture is: 10% tiny (1..199 bytes), 60% uniform in 25%..60% of
 * @block_size, 20% uniform in 60%..95%, 10% exactly @block_size (stored
 * raw). Sizes are at least 1 and at most @block_size.
 * @state: the caller's generator state (see zr_datagen_next()).
 * @return the size in bytes; 0 only if @block_size is 0.
 */
size_t zr_datagen_comp_size(uint64_t *state, size_t block_size);

#endif /* ZR_DATAGEN_H */

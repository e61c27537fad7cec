/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zr_codec.h - compression codecs of the block store (lz4, lz4hc, zstd, none).
 *
 * Every codec is reached through one pair of calls that take a per-thread
 * context; library error codes are turned into -errno here and nowhere else.
 */
#ifndef ZR_CODEC_H
#define ZR_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum zr_codec_id {
	ZR_CODEC_NONE = 0,	/* stored as is */
	ZR_CODEC_LZ4 = 1,	/* LZ4 fast; level < 0 is the acceleration */
	ZR_CODEC_LZ4HC = 2,	/* LZ4 high compression, levels 1..12 */
	ZR_CODEC_ZSTD = 3,	/* zstd, levels -7..19 (negative = fast) */
	ZR_CODEC_COUNT
};

/** Default level of a codec (lz4: 0 = acceleration 1, zstd: 3, lz4hc: 9). */
int zr_codec_default_level(enum zr_codec_id id);

/**
 * zr_codec_by_name() - look a codec up by its option name
 * ("none", "lz4", "lz4hc", "zstd").
 * @return the id, or -EINVAL for an unknown name.
 */
int zr_codec_by_name(const char *name);

/** Option name of a codec ("lz4"...); "?" for an invalid id. */
const char *zr_codec_name(enum zr_codec_id id);

/**
 * zr_codec_level_valid() - whether @level is accepted by codec @id.
 * @return 0, or -EINVAL with @min/@max (if not NULL) set to the valid range.
 */
int zr_codec_level_valid(enum zr_codec_id id, int level, int *min, int *max);

/* Per-thread working memory of every codec (lz4 state, lz4hc state, zstd
 * CCtx/DCtx), created lazily. */
struct zr_codec_ctx;

/**
 * zr_codec_ctx_new() - a new context; free it with zr_codec_ctx_free().
 * @return the context, or NULL when out of memory.
 */
struct zr_codec_ctx *zr_codec_ctx_new(void);

/** Free a context made by zr_codec_ctx_new(); NULL is accepted. */
void zr_codec_ctx_free(struct zr_codec_ctx *ctx);

/**
 * zr_codec_ctx_thread() - the calling thread's context, created on first use
 * and freed when the thread exits. Never free it yourself.
 * @return the context, or NULL when out of memory.
 */
struct zr_codec_ctx *zr_codec_ctx_thread(void);

/**
 * zr_codec_ctx_thread_free() - free the calling thread's context now (a later
 * zr_codec_ctx_thread() makes a new one). For the main thread, whose
 * thread-exit destructors do not run when it returns from main().
 */
void zr_codec_ctx_thread_free(void);

/**
 * zr_codec_compress() - compress @src into @dst.
 * @dst_cap: room in @dst. Passing less than @src_len makes the codec give up
 *   early on data that would not shrink below @dst_cap.
 * @return the compressed length (> 0), -ENOSPC when the result does not fit
 *   in @dst_cap (the caller stores the block raw), -EINVAL for a bad
 *   codec/level or an empty @src, -ENOMEM when a context could not be
 *   allocated. Level ranges are listed at the top of src/codec.c.
 */
ssize_t zr_codec_compress(struct zr_codec_ctx *ctx, enum zr_codec_id id,
			  int level, const void *src, size_t src_len,
			  void *dst, size_t dst_cap);

/**
 * zr_codec_decompress() - decompress @src into exactly @dst_len bytes.
 * @return @dst_len, or -EIO when the data is corrupt or decompresses to a
 *   different length, -EINVAL for a bad codec, -ENOMEM.
 * Never reads outside @src or writes outside @dst, whatever the input.
 */
ssize_t zr_codec_decompress(struct zr_codec_ctx *ctx, enum zr_codec_id id,
			    const void *src, size_t src_len,
			    void *dst, size_t dst_len);

/**
 * zr_codec_bound() - worst-case compressed size of @len bytes, for sizing a
 * buffer that never gets -ENOSPC (0 when @len is too large for lz4).
 */
size_t zr_codec_bound(enum zr_codec_id id, size_t len);

#endif /* ZR_CODEC_H */

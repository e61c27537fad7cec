// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * codec.c - lz4, lz4hc, zstd and "none" behind one compress/decompress pair.
 *
 * Levels. Each codec takes an int level, checked by zr_codec_level_valid():
 *  - lz4:   -65537..0. The level is minus the acceleration: 0 and -1 both
 *           mean acceleration 1 (the default, best ratio), -8 means
 *           acceleration 8 (faster, worse ratio). Positive levels are
 *           rejected: use lz4hc for slower, better compression.
 *  - lz4hc: 1..12 (LZ4HC_CLEVEL_MAX); 9 is the library's default.
 *  - zstd:  ZSTD_minCLevel()..ZSTD_maxCLevel() (-131072..22 with zstd 1.5);
 *           -7..19 is the useful range; 0 means zstd's default (3).
 *  - none:  0 only.
 *
 * Compressed blocks live only in RAM and only this build reads them back, so
 * zstd frames are written in the magicless format with no checksum, no
 * content size and no dictionary id: about 9 bytes less per block than a
 * default frame (4 of magic, 4 of checksum, 1 or more of content size). The
 * decompressor knows the exact block length and checks it instead.
 *
 * Giving up early. When dst_cap is smaller than the codec's bound, lz4 runs
 * in limited-output mode and stops as soon as the output would pass dst_cap;
 * zstd compresses one block and fails with dstSize_tooSmall. Both become
 * -ENOSPC, and the caller stores the block raw.
 *
 * Contexts. A context holds each codec's working memory, allocated the first
 * time that codec is used (the lz4hc state alone is 256 KiB). A context is
 * used by one thread at a time; zr_codec_ctx_thread() keeps one per thread
 * in a pthread key whose destructor frees it when the thread exits.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <lz4hc.h>
#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_c_format/ZSTD_d_format (magicless) */
#include <zstd.h>
#include <zstd_errors.h>

#include "zr_codec.h"
#include "zr_util.h"

/* Lowest lz4 level: minus the library's largest acceleration. */
#define ZR_LZ4_LEVEL_MIN (-65537)

struct zr_codec_ctx {
	void *lz4_state;	/* LZ4_sizeofState() bytes, or NULL until used */
	void *lz4hc_state;	/* LZ4_sizeofStateHC() bytes, or NULL until used */
	ZSTD_CCtx *zcctx;	/* zstd compression context, or NULL until used */
	ZSTD_DCtx *zdctx;	/* zstd decompression context, or NULL until used */
	int zlevel;		/* level last set on zcctx (valid if zlevel_set) */
	bool zlevel_set;	/* zcctx has its frame parameters and zlevel */
};

static const char *const codec_names[ZR_CODEC_COUNT] = {
	[ZR_CODEC_NONE] = "none",
	[ZR_CODEC_LZ4] = "lz4",
	[ZR_CODEC_LZ4HC] = "lz4hc",
	[ZR_CODEC_ZSTD] = "zstd",
};

int zr_codec_default_level(enum zr_codec_id id)
{
	switch (id) {
	case ZR_CODEC_LZ4HC:
		return LZ4HC_CLEVEL_DEFAULT;
	case ZR_CODEC_ZSTD:
		return 3;
	default:
		return 0;
	}
}

int zr_codec_by_name(const char *name)
{
	if (!name)
		return -EINVAL;
	for (int i = 0; i < ZR_CODEC_COUNT; i++)
		if (strcmp(name, codec_names[i]) == 0)
			return i;
	return -EINVAL;
}

const char *zr_codec_name(enum zr_codec_id id)
{
	if ((unsigned)id >= ZR_CODEC_COUNT)
		return "?";
	return codec_names[id];
}

int zr_codec_level_valid(enum zr_codec_id id, int level, int *min, int *max)
{
	int lo, hi;

	switch (id) {
	case ZR_CODEC_NONE:
		lo = 0;
		hi = 0;
		break;
	case ZR_CODEC_LZ4:
		lo = ZR_LZ4_LEVEL_MIN;
		hi = 0;
		break;
	case ZR_CODEC_LZ4HC:
		lo = 1;
		hi = LZ4HC_CLEVEL_MAX;
		break;
	case ZR_CODEC_ZSTD:
		lo = ZSTD_minCLevel();
		hi = ZSTD_maxCLevel();
		break;
	default:
		lo = 0;
		hi = -1;	/* empty range: every level is bad */
		break;
	}
	if (level >= lo && level <= hi)
		return 0;
	if (min)
		*min = lo;
	if (max)
		*max = hi;
	return -EINVAL;
}

/* --- zstd frame format ---------------------------------------------------- */

/* Whether this libzstd takes the magicless format: decided once per process
 * so that every context writes and reads frames the same way. */
static pthread_once_t zstd_probe_once = PTHREAD_ONCE_INIT;
static bool zstd_magicless;

static void zstd_probe(void)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_CCtx *c = ZSTD_createCCtx();

	zstd_magicless = c && d &&
		!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_format,
						     ZSTD_f_zstd1_magicless)) &&
		!ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_format,
						     ZSTD_f_zstd1_magicless));
	ZSTD_freeCCtx(c);
	ZSTD_freeDCtx(d);
}

static bool zstd_use_magicless(void)
{
	pthread_once(&zstd_probe_once, zstd_probe);
	return zstd_magicless;
}

/* --- contexts ------------------------------------------------------------- */

struct zr_codec_ctx *zr_codec_ctx_new(void)
{
	return calloc(1, sizeof(struct zr_codec_ctx));
}

void zr_codec_ctx_free(struct zr_codec_ctx *ctx)
{
	if (!ctx)
		return;
	free(ctx->lz4_state);
	free(ctx->lz4hc_state);
	ZSTD_freeCCtx(ctx->zcctx);
	ZSTD_freeDCtx(ctx->zdctx);
	free(ctx);
}

static pthread_once_t thread_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static bool thread_key_ok;

static void thread_ctx_destroy(void *p)
{
	zr_codec_ctx_free(p);
}

static void thread_key_create(void)
{
	thread_key_ok = pthread_key_create(&thread_key, thread_ctx_destroy) == 0;
}

struct zr_codec_ctx *zr_codec_ctx_thread(void)
{
	struct zr_codec_ctx *ctx;

	pthread_once(&thread_key_once, thread_key_create);
	if (!thread_key_ok)
		return NULL;
	ctx = pthread_getspecific(thread_key);
	if (ctx)
		return ctx;
	ctx = zr_codec_ctx_new();
	if (!ctx)
		return NULL;
	if (pthread_setspecific(thread_key, ctx) != 0) {
		zr_codec_ctx_free(ctx);
		return NULL;
	}
	return ctx;
}

void zr_codec_ctx_thread_free(void)
{
	struct zr_codec_ctx *ctx;

	pthread_once(&thread_key_once, thread_key_create);
	if (!thread_key_ok)
		return;
	ctx = pthread_getspecific(thread_key);
	if (!ctx)
		return;
	pthread_setspecific(thread_key, NULL);
	zr_codec_ctx_free(ctx);
}

/* Allocate @ctx's working memory for codec @id if not done yet.
 * @return 0 or -ENOMEM. */
static int ctx_prepare_compress(struct zr_codec_ctx *ctx, enum zr_codec_id id)
{
	switch (id) {
	case ZR_CODEC_LZ4:
		if (!ctx->lz4_state)
			ctx->lz4_state = malloc((size_t)LZ4_sizeofState());
		return ctx->lz4_state ? 0 : -ENOMEM;
	case ZR_CODEC_LZ4HC:
		if (!ctx->lz4hc_state)
			ctx->lz4hc_state = malloc((size_t)LZ4_sizeofStateHC());
		return ctx->lz4hc_state ? 0 : -ENOMEM;
	case ZR_CODEC_ZSTD:
		if (!ctx->zcctx) {
			ctx->zcctx = ZSTD_createCCtx();
			ctx->zlevel_set = false;
		}
		return ctx->zcctx ? 0 : -ENOMEM;
	default:
		return 0;
	}
}

/* Put the frame parameters and @level on @ctx's CCtx unless already there.
 * @return 0, or -EINVAL if zstd refuses them. */
static int zstd_set_level(struct zr_codec_ctx *ctx, int level)
{
	ZSTD_CCtx *c = ctx->zcctx;

	if (ctx->zlevel_set && ctx->zlevel == level)
		return 0;
	ctx->zlevel_set = false;
	if (ZSTD_isError(ZSTD_CCtx_reset(c, ZSTD_reset_parameters)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0)))
		return -EINVAL;
	if (zstd_use_magicless() &&
	    ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_format,
						ZSTD_f_zstd1_magicless)))
		return -EINVAL;
	ctx->zlevel = level;
	ctx->zlevel_set = true;
	return 0;
}

/* --- compression ---------------------------------------------------------- */

static ssize_t compress_lz4(struct zr_codec_ctx *ctx, int level,
			    const void *src, int len, void *dst, int cap)
{
	int accel = level < -1 ? -level : 1;
	int n = LZ4_compress_fast_extState(ctx->lz4_state, src, dst, len, cap,
					   accel);

	return n > 0 ? n : -ENOSPC;
}

static ssize_t compress_lz4hc(struct zr_codec_ctx *ctx, int level,
			      const void *src, int len, void *dst, int cap)
{
	int n = LZ4_compress_HC_extStateHC(ctx->lz4hc_state, src, dst, len,
					   cap, level);

	return n > 0 ? n : -ENOSPC;
}

static ssize_t compress_zstd(struct zr_codec_ctx *ctx, int level,
			     const void *src, size_t len, void *dst, size_t cap)
{
	size_t n;
	int rc = zstd_set_level(ctx, level);

	if (rc < 0)
		return rc;
	n = ZSTD_compress2(ctx->zcctx, dst, cap, src, len);
	if (!ZSTD_isError(n))
		return (ssize_t)n;
	/* A failed call may leave the CCtx mid-frame: start the next clean. */
	ZSTD_CCtx_reset(ctx->zcctx, ZSTD_reset_session_only);
	switch (ZSTD_getErrorCode(n)) {
	case ZSTD_error_dstSize_tooSmall:
		return -ENOSPC;
	case ZSTD_error_memory_allocation:
		return -ENOMEM;
	case ZSTD_error_parameter_unsupported:
	case ZSTD_error_parameter_outOfBound:
		return -EINVAL;
	default:
		return -EIO;
	}
}

ssize_t zr_codec_compress(struct zr_codec_ctx *ctx, enum zr_codec_id id,
			  int level, const void *src, size_t src_len,
			  void *dst, size_t dst_cap)
{
	int rc, cap;

	if (!ctx || !src || !dst || src_len == 0)
		return -EINVAL;
	rc = zr_codec_level_valid(id, level, NULL, NULL);
	if (rc < 0)
		return rc;
	if (id == ZR_CODEC_NONE) {
		if (dst_cap < src_len)
			return -ENOSPC;
		memcpy(dst, src, src_len);
		return (ssize_t)src_len;
	}
	rc = ctx_prepare_compress(ctx, id);
	if (rc < 0)
		return rc;
	if (id == ZR_CODEC_ZSTD)
		return compress_zstd(ctx, level, src, src_len, dst, dst_cap);

	/* lz4 and lz4hc count in int. */
	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -EINVAL;
	cap = dst_cap > INT_MAX ? INT_MAX : (int)dst_cap;
	if (id == ZR_CODEC_LZ4)
		return compress_lz4(ctx, level, src, (int)src_len, dst, cap);
	return compress_lz4hc(ctx, level, src, (int)src_len, dst, cap);
}

/* --- decompression -------------------------------------------------------- */

static ssize_t decompress_zstd(struct zr_codec_ctx *ctx, const void *src,
			       size_t src_len, void *dst, size_t dst_len)
{
	size_t n;

	if (!ctx->zdctx) {
		ctx->zdctx = ZSTD_createDCtx();
		if (!ctx->zdctx)
			return -ENOMEM;
		if (zstd_use_magicless() &&
		    ZSTD_isError(ZSTD_DCtx_setParameter(ctx->zdctx, ZSTD_d_format,
							ZSTD_f_zstd1_magicless))) {
			ZSTD_freeDCtx(ctx->zdctx);
			ctx->zdctx = NULL;
			return -EINVAL;
		}
	}
	n = ZSTD_decompressDCtx(ctx->zdctx, dst, dst_len, src, src_len);
	if (ZSTD_isError(n))
		return ZSTD_getErrorCode(n) == ZSTD_error_memory_allocation ?
			-ENOMEM : -EIO;
	return n == dst_len ? (ssize_t)n : -EIO;
}

ssize_t zr_codec_decompress(struct zr_codec_ctx *ctx, enum zr_codec_id id,
			    const void *src, size_t src_len,
			    void *dst, size_t dst_len)
{
	int n;

	if (!ctx || !src || !dst)
		return -EINVAL;
	switch (id) {
	case ZR_CODEC_NONE:
		if (src_len != dst_len)
			return -EIO;
		memcpy(dst, src, dst_len);
		return (ssize_t)dst_len;
	case ZR_CODEC_LZ4:
	case ZR_CODEC_LZ4HC:
		/* Same format: lz4hc only searches harder for matches. */
		if (src_len > INT_MAX || dst_len > INT_MAX)
			return -EIO;
		n = LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);
		return n >= 0 && (size_t)n == dst_len ? (ssize_t)n : -EIO;
	case ZR_CODEC_ZSTD:
		return decompress_zstd(ctx, src, src_len, dst, dst_len);
	default:
		return -EINVAL;
	}
}

size_t zr_codec_bound(enum zr_codec_id id, size_t len)
{
	switch (id) {
	case ZR_CODEC_LZ4:
	case ZR_CODEC_LZ4HC:
		/* LZ4_compressBound() is 0 past LZ4_MAX_INPUT_SIZE. */
		if (len > LZ4_MAX_INPUT_SIZE)
			return 0;
		return (size_t)LZ4_compressBound((int)len);
	case ZR_CODEC_ZSTD:
		return ZSTD_compressBound(len);
	default:
		return len;
	}
}

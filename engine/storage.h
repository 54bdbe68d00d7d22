/* Storage types (docs/DESIGN.md, "how a kernel is written once for f32/f16/bf16"): a float
 * tensor may be stored as f32, f16 or bf16; every kernel loads its elements into float32,
 * computes and reduces in float32, and stores back rounded to nearest even. This header is
 * the host side of that rule: the conversions (the OpenMP backend's, the harness's and the
 * tools'), and the tile helpers through which the OpenMP kernels are written once for all
 * three types. kernels_cl/common.h.cl holds the device side (LOAD/STORE over STORE_T). The
 * conversions are bit-exact twins of OpenCL's vload_half / vstore_half_rte and of
 * common.h.cl's bf16 rounding, so both backends store the same bits for the same float. */
#ifndef CN_STORAGE_H
#define CN_STORAGE_H

#include <stdint.h>
#include <string.h>

#include "clnet.h"

/* CN_OK for a precision a session trains in (f32, bf16, f16), else CN_ERR_INVALID_ARG naming
 * the value and the choices (storage.c); int8 is refused as inference-only (an inference
 * session's cn_session_set_precision takes CN_I8 besides these). */
cn_status cn_precision_check(cn_dtype dt);
/* What to append to a non-finite loss or gradient's message in precision dt: for fp16 (no
 * loss scaling yet, overflow past 65504) the advice to use bf16; "" otherwise. */
const char *cn_precision_overflow_hint(cn_dtype dt);

/* 1 for the float storage types (what an 'h' of an op's dtype signature accepts). */
static inline int cn_dtype_is_float(cn_dtype dt) { return dt == CN_F32 || dt == CN_F16 || dt == CN_BF16; }

static inline uint32_t cn_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float cn_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* IEEE binary16 -> float32: exact. */
static inline float cn_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return cn_bits_f32(sign | 0x7f800000u | (m << 13)); /* inf, NaN (payload kept) */
    if (e) return cn_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
    /* zero or subnormal: m * 2^-24, exact in float32 */
    return cn_bits_f32(sign | cn_f32_bits((float)m * 0x1p-24f));
}

/* float32 -> binary16, round to nearest even (vstore_half_rte); overflow gives infinity,
 * NaN a quiet NaN. Integer rounding for normal results; subnormal results are rounded by one
 * float addition, which the default rounding mode makes round-to-nearest-even too
 * (F. Giesen's float_to_half_fast3_rtne). */
static inline uint16_t cn_f32_to_f16(float f) {
    uint32_t u = cn_f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    uint32_t o;
    if (u >= 0x47800000u) { /* >= 65536 (past the largest half after rounding), inf, NaN */
        o = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
    } else if (u < 0x38800000u) { /* below 2^-14: a subnormal half or zero */
        const float magic = 0.5f; /* its ulp is 2^-24, the subnormal half's step */
        o = cn_f32_bits(cn_bits_f32(u) + magic) - cn_f32_bits(magic);
    } else {
        const uint32_t odd = (u >> 13) & 1u;
        u += 0xc8000fffu + odd; /* rebias the exponent (-112 << 23) and round half to even */
        o = u >> 13;
    }
    return (uint16_t)(o | sign);
}

/* bfloat16 is the top half of a float32. */
static inline float cn_bf16_to_f32(uint16_t b) { return cn_bits_f32((uint32_t)b << 16); }
static inline uint16_t cn_f32_to_bf16(float f) {
    const uint32_t u = cn_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* One element of storage type dt at p[i], as a float; and the reverse. */
static inline float cn_storage_get(cn_dtype dt, const void *p, int64_t i) {
    if (dt == CN_F16) return cn_f16_to_f32(((const uint16_t *)p)[i]);
    if (dt == CN_BF16) return cn_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}
static inline void cn_storage_set(cn_dtype dt, void *p, int64_t i, float v) {
    if (dt == CN_F16) ((uint16_t *)p)[i] = cn_f32_to_f16(v);
    else if (dt == CN_BF16) ((uint16_t *)p)[i] = cn_f32_to_bf16(v);
    else ((float *)p)[i] = v;
}

/* Tiles: the OpenMP kernels compute on float arrays. cn_tile_in returns n floats of the
 * tensor p (storage dt) from element off: p itself for f32 (no copy, so the f32 path runs as
 * it always did), else buf (n floats) filled by conversion. cn_tile_out returns where a
 * kernel writes n floats for element off: the tensor itself for f32, else buf, which
 * cn_tile_store then rounds into the tensor. */
void cn_tile_load(cn_dtype dt, const void *p, int64_t off, int64_t n, float *buf);
void cn_tile_store(cn_dtype dt, void *p, int64_t off, int64_t n, const float *buf);
static inline const float *cn_tile_in(cn_dtype dt, const void *p, int64_t off, int64_t n, float *buf) {
    if (dt == CN_F32) return (const float *)p + off;
    cn_tile_load(dt, p, off, n, buf);
    return buf;
}
static inline float *cn_tile_out(cn_dtype dt, void *p, int64_t off, float *buf) {
    return dt == CN_F32 ? (float *)p + off : buf;
}
static inline void cn_tile_flush(cn_dtype dt, void *p, int64_t off, int64_t n, const float *buf) {
    if (dt != CN_F32) cn_tile_store(dt, p, off, n, buf);
}

#endif

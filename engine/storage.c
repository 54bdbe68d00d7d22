/* Storage-type conversion of whole tiles (engine/storage.h). Plain loops over one branch-free
 * conversion per element, which gcc vectorises; the dtype test is hoisted out of the loop. */
#include "storage.h"

#include "internal.h"

const char *cn_precision_overflow_hint(cn_dtype dt) {
    return dt == CN_F16 ? "; in fp16 values past 65504 overflow and there is no loss scaling yet: train in bf16 "
                          "(cn_optimizer_config.precision = CN_BF16, clnet --precision bf16), which has f32's range"
                        : "";
}

cn_status cn_precision_check(cn_dtype dt) {
    if (dt == CN_F32 || dt == CN_BF16 || dt == CN_F16) return CN_OK;
    if (dt == CN_I8)
        return cn_errorf(CN_ERR_INVALID_ARG, "precision int8 (CN_I8) is for inference sessions only "
                         "(cn_session_set_precision); training runs in CN_F32, CN_BF16 or CN_F16");
    return cn_errorf(CN_ERR_INVALID_ARG, "unknown precision (dtype %d): use CN_F32, CN_BF16 or CN_F16 (fp32, bf16, fp16)",
                     (int)dt);
}

void cn_tile_load(cn_dtype dt, const void *p, int64_t off, int64_t n, float *buf) {
    const uint16_t *h = (const uint16_t *)p + off;
    if (dt == CN_BF16)
        for (int64_t i = 0; i < n; i++) buf[i] = cn_bf16_to_f32(h[i]);
    else if (dt == CN_F16)
        for (int64_t i = 0; i < n; i++) buf[i] = cn_f16_to_f32(h[i]);
    else
        memcpy(buf, (const float *)p + off, (size_t)n * sizeof *buf);
}

void cn_tile_store(cn_dtype dt, void *p, int64_t off, int64_t n, const float *buf) {
    uint16_t *h = (uint16_t *)p + off;
    if (dt == CN_BF16)
        for (int64_t i = 0; i < n; i++) h[i] = cn_f32_to_bf16(buf[i]);
    else if (dt == CN_F16)
        for (int64_t i = 0; i < n; i++) h[i] = cn_f32_to_f16(buf[i]);
    else
        memcpy((float *)p + off, buf, (size_t)n * sizeof *buf);
}

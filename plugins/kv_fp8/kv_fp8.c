/* kv_fp8.c - the attention KV cache stored as FP8 (E4M3 with scales, or E5M2). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <qcore/plugin.h>

#include "kv_fp8_internal.h"
#include "qc_fp8_codec.h"


/* The scale that applies to head h, or 1 for E5M2. */
static float head_scale(uint32_t variant, const float *scales, int64_t h) {
    if (variant == KV_FP8_E4M3_TENSOR) return scales[0];
    if (variant == KV_FP8_E4M3_HEAD) return scales[h];
    return 1.f;
}

/* write: cache[t, h, d] = E4M3(src[t, h, d] / s_h) (round to nearest even,
 * saturating at 448) or E5M2(src[t, h, d]) (saturating at 57344, never inf).
 * An unknown variant writes NaN codes so a wrong call cannot pass unseen. */
static void kv_fp8_write_ref(const float *src, uint8_t *cache, const float *scales, uint32_t variant, int64_t tokens,
                             int64_t kv_heads, int64_t head_dim) {
    if (tokens <= 0 || kv_heads <= 0 || head_dim <= 0) return;
    const size_t count = (size_t)tokens * (size_t)kv_heads * (size_t)head_dim;
    if (variant >= KV_FP8_VARIANT_COUNT_) {
        memset(cache, QC_FP8_NAN_CODE, count);
        return;
    }
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < kv_heads; h++) {
            const size_t base = ((size_t)t * (size_t)kv_heads + (size_t)h) * (size_t)head_dim;
            if (variant == KV_FP8_E5M2) {
                for (int64_t d = 0; d < head_dim; d++) cache[base + d] = qc_fp8_e5m2_encode(src[base + d]);
            } else {
                const float s = head_scale(variant, scales, h);
                for (int64_t d = 0; d < head_dim; d++) cache[base + d] = qc_fp8_e4m3_encode(src[base + d] / s);
            }
        }
}

/* read: dst[t, h, d] = decode(cache[t, h, d]) * s_h (one f32 multiply), or
 * the E5M2 value itself.  An unknown variant reads NaN. */
static void kv_fp8_read_ref(const uint8_t *cache, float *dst, const float *scales, uint32_t variant, int64_t tokens,
                            int64_t kv_heads, int64_t head_dim) {
    if (tokens <= 0 || kv_heads <= 0 || head_dim <= 0) return;
    float lut[256];
    if (variant == KV_FP8_E5M2)
        qc_fp8_e5m2_table(lut);
    else
        qc_fp8_e4m3_table(lut);
    for (int64_t t = 0; t < tokens; t++)
        for (int64_t h = 0; h < kv_heads; h++) {
            const size_t base = ((size_t)t * (size_t)kv_heads + (size_t)h) * (size_t)head_dim;
            if (variant >= KV_FP8_VARIANT_COUNT_) {
                for (int64_t d = 0; d < head_dim; d++) dst[base + d] = NAN;
            } else if (variant == KV_FP8_E5M2) {
                for (int64_t d = 0; d < head_dim; d++) dst[base + d] = lut[cache[base + d]];
            } else {
                const float s = head_scale(variant, scales, h);
                for (int64_t d = 0; d < head_dim; d++) dst[base + d] = lut[cache[base + d]] * s;
            }
        }
}

/* K and V are separate calls, each with its own scales. */
static const qc_kernel_param g_write_params[] = {
    {"src", QC_PARAM_PTR},     {"cache", QC_PARAM_PTR},  {"scales", QC_PARAM_PTR},   {"variant", QC_PARAM_U32},
    {"tokens", QC_PARAM_I64}, {"kv_heads", QC_PARAM_I64}, {"head_dim", QC_PARAM_I64},
};
static const qc_kernel_param g_read_params[] = {
    {"cache", QC_PARAM_PTR},   {"dst", QC_PARAM_PTR},      {"scales", QC_PARAM_PTR},   {"variant", QC_PARAM_U32},
    {"tokens", QC_PARAM_I64}, {"kv_heads", QC_PARAM_I64}, {"head_dim", QC_PARAM_I64},
};

static qc_status kv_fp8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "kv_fp8",
        .summary = "KV cache as FP8 E4M3 (per-tensor or per-head scales) or E5M2",
        .kind = QC_FORMAT_KV_CACHE,
        .weight_dtype = QC_DT_NONE,
        .act_dtype = QC_DT_BF16, /* queries and attention output */
        .kv_dtype = QC_DT_F8_E4M3,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F32,
        .weight_scale = QC_GRAN_HEAD, /* finest KV scale it has; per-tensor and none also exist */
        .act_scale = QC_GRAN_NONE,
        .supported_arch = {80, QC_SM_ANY}, /* sm_80 converts in software */
        .native_arch = {89, QC_SM_ANY},
        .n_align = 1,
        .k_align = 1,
        .bits_per_weight = 8,
        .effective_bits = 8,
    };
    qc_status st = api->register_format(host, &f);
    qc_kernel_desc w = {
        .struct_size = sizeof w,
        .id = "kv_fp8.write_ref",
        .format = "kv_fp8",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .n_params = sizeof g_write_params / sizeof g_write_params[0],
        .params = g_write_params,
        .reference = (void (*)(void))kv_fp8_write_ref,
    };
    qc_kernel_desc r = w;
    r.id = "kv_fp8.read_ref";
    r.n_params = sizeof g_read_params / sizeof g_read_params[0];
    r.params = g_read_params;
    r.reference = (void (*)(void))kv_fp8_read_ref;
    if (st == QC_OK) st = api->register_kernel(host, &w);
    if (st == QC_OK) st = api->register_kernel(host, &r);
    if (errlen) err[0] = 0;
    if (st == QC_OK) st = kv_fp8_gpu_register(api, host, err, errlen);
    if (st != QC_OK && errlen && !err[0]) snprintf(err, errlen, "kv_fp8: registering the format or a kernel failed");
    return st;
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.kv_fp8",
    .name = "kv_fp8",
    .version = "0.3.0",
    .description = "FP8 KV cache",
    .init = kv_fp8_init,
};

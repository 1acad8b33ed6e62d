/* qc_builtin.c - the core's own reference format, bf16, registered like a plugin. */
#include <math.h>
#include <string.h>

#include "qc_core_kernels.h"
#include "qc_kernels_engine.h"
#include "qc_kernels_gemv.h"
#include "qc_kernels_attn.h"
#include "qc_kernels_wgmma.h"
#include "qc_internal.h"
#include "../../plugins/common/qc_bf16.h"

static const qc_host_api *g_api;

static qc_status bf16_quantize(const qc_quant_request *req, qc_packed_weight *out, qc_reason *why) {
    if (req->n <= 0 || req->k <= 0) {
        qc_reason_set(why, "shape", "bf16: empty weight %lldx%lld", (long long)req->n, (long long)req->k);
        return QC_ERR_INVALID;
    }
    size_t count = (size_t)req->n * (size_t)req->k;
    uint16_t *w = g_api->alloc(count * 2);
    if (!w) {
        qc_reason_set(why, "nomem", "bf16: cannot allocate %zu bytes", count * 2);
        return QC_ERR_NOMEM;
    }
    for (size_t i = 0; i < count; i++) w[i] = qc_f32_to_bf16(req->w[i]);
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    out->format = "bf16";
    out->n = out->n_padded = req->n;
    out->k = out->k_padded = req->k;
    out->pack_version = 1;
    out->n_buffers = 1;
    out->buffers[0] = (qc_buffer){"weight", w, count * 2, QC_DT_BF16, QC_MEM_WEIGHTS};
    out->logical_bits = 16;
    return QC_OK;
}

static qc_status bf16_dequantize(const qc_packed_weight *w, float *out) {
    const uint16_t *src = w->buffers[0].data;
    size_t count = (size_t)w->n * (size_t)w->k;
    for (size_t i = 0; i < count; i++) out[i] = qc_bf16_to_f32(src[i]);
    return QC_OK;
}

/* bf16 activations: what the GEMM multiplies is x rounded to bf16. */
static qc_status bf16_quantize_activations(const qc_packed_weight *w, const float *x, int64_t m, float *out) {
    size_t count = (size_t)m * (size_t)w->k;
    for (size_t i = 0; i < count; i++) out[i] = qc_bf16_to_f32(qc_f32_to_bf16(x[i]));
    return QC_OK;
}

/* y[m,n] = bf16(x)[m,k] . W[n,k]^T with f32 accumulation. */
static void bf16_linear_ref(const float *x, const uint16_t *w, float *y, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; i++) {
        const float *xr = x + i * k;
        for (int64_t j = 0; j < n; j++) {
            const uint16_t *wr = w + j * k;
            float acc = 0.f;
            for (int64_t t = 0; t < k; t++) acc += qc_bf16_to_f32(qc_f32_to_bf16(xr[t])) * qc_bf16_to_f32(wr[t]);
            y[i * n + j] = acc;
        }
    }
}

/* The same product with x given as bf16 bits ("x.bf16"): kernels fed by
 * the engine's bf16 activations take this signature. */
static void bf16_linear_bx_ref(const uint16_t *x, const uint16_t *w, float *y, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.f;
            for (int64_t t = 0; t < k; t++) acc += qc_bf16_to_f32(x[i * k + t]) * qc_bf16_to_f32(w[j * k + t]);
            y[i * n + j] = acc;
        }
}

static const qc_kernel_param bf16_params[] = {
    {"x", QC_PARAM_PTR}, {"w.weight", QC_PARAM_PTR}, {"y", QC_PARAM_PTR},
    {"m", QC_PARAM_I64}, {"n", QC_PARAM_I64},        {"k", QC_PARAM_I64},
};

static qc_status builtin_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    g_api = api;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "bf16",
        .summary = "unquantized bf16 weights and activations (the reference baseline)",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_BF16,
        .act_dtype = QC_DT_BF16,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_NONE,
        .weight_scale = QC_GRAN_NONE,
        .act_scale = QC_GRAN_NONE,
        .supported_arch = {80, QC_SM_ANY}, /* bf16.linear_mma; the reference runs anywhere */
        .native_arch = {80, QC_SM_ANY},
        .n_align = 1,
        .k_align = 1,
        .bits_per_weight = 16,
        .effective_bits = 16,
        .quantize = bf16_quantize,
        .dequantize = bf16_dequantize,
        .quantize_activations = bf16_quantize_activations,
    };
    if (api->register_format(host, &f) != QC_OK) return QC_ERR_INTERNAL;
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = "bf16.linear_ref",
        .format = "bf16",
        .phases = QC_PHASE_ANY,
        .m_min = 1,
        .m_max = 0,
        .n_params = sizeof bf16_params / sizeof bf16_params[0],
        .params = bf16_params,
        .reference = (void (*)(void))bf16_linear_ref,
    };
    if (api->register_kernel(host, &k) != QC_OK) return QC_ERR_INTERNAL;
    if (qc_wgmma_kernels_register(api, host) != QC_OK) return QC_ERR_INTERNAL; /* first: preferred on sm_90 */
    qc_status st = qc_core_kernels_register(api, host, (void (*)(void))bf16_linear_ref);
    if (st == QC_OK) st = qc_gemv_kernels_register(api, host, (void (*)(void))bf16_linear_ref,
                                                     (void (*)(void))bf16_linear_bx_ref);
    if (st == QC_OK) st = qc_attn_kernels_register(api, host);
    return st == QC_OK ? qc_engine_kernels_register(api, host) : st;
}

const qc_plugin_entry qc_builtin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.builtin",
    .name = "builtin",
    .version = QCORE_VERSION_STRING,
    .description = "the core's reference formats",
    .init = builtin_init,
};

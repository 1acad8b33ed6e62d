/* kv_fp8.c - the attention KV cache stored as FP8 (E4M3 with scales, or E5M2). */
#include <qcore/plugin.h>

static qc_status kv_fp8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "kv_fp8",
        .summary = "KV cache as FP8 E4M3 (per-tensor or per-head scales) or E5M2",
        .kind = QC_FORMAT_KV_CACHE,
        .weight_dtype = QC_DT_NONE,
        .act_dtype = QC_DT_BF16,
        .kv_dtype = QC_DT_F8_E4M3,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F32,
        .weight_scale = QC_GRAN_HEAD,
        .act_scale = QC_GRAN_NONE,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {89, QC_SM_ANY},
        .n_align = 1,
        .k_align = 1,
        .bits_per_weight = 8,
        .effective_bits = 8,
    };
    return api->register_format(host, &f);
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.kv_fp8",
    .name = "kv_fp8",
    .version = "0.1.0",
    .description = "FP8 KV cache",
    .init = kv_fp8_init,
};

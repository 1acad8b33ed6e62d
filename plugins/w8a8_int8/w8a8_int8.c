/* w8a8_int8.c - INT8 per-channel weights, dynamic per-token INT8 activations, INT32 accumulation. */
#include <qcore/plugin.h>

static qc_status int8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "w8a8_int8",
        .summary = "INT8 per-channel weights x dynamic per-token INT8 activations, INT32 accumulate",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_I8,
        .act_dtype = QC_DT_I8,
        .accum_dtype = QC_DT_I32,
        .scale_dtype = QC_DT_F32,
        .weight_scale = QC_GRAN_CHANNEL,
        .act_scale = QC_GRAN_TOKEN,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {80, QC_SM_ANY},
        .n_align = 16,
        .k_align = 16,
        .bits_per_weight = 8,
        .effective_bits = 8.0078125, /* one f32 scale per row at K=4096 */
    };
    return api->register_format(host, &f);
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.w8a8_int8",
    .name = "w8a8_int8",
    .version = "0.1.0",
    .description = "INT8 weights and activations (W8A8, SmoothQuant-ready)",
    .init = int8_init,
};

/* fp8.c - E4M3 weights and activations with per-tensor, per-channel/token or 128x128 block scales. */
#include <qcore/plugin.h>

static qc_status fp8_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "fp8",
        .summary = "FP8 E4M3 W8A8: per-tensor, per-channel x per-token, or 128x128 block scales",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_F8_E4M3,
        .act_dtype = QC_DT_F8_E4M3,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F32,
        .weight_scale = QC_GRAN_CHANNEL,
        .act_scale = QC_GRAN_TOKEN,
        .supported_arch = {80, QC_SM_ANY}, /* below sm_89 as a W8A16 path */
        .native_arch = {89, QC_SM_ANY},
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
    .id = "org.qcore.fp8",
    .name = "fp8",
    .version = "0.1.0",
    .description = "FP8 E4M3 weights and activations (W8A8)",
    .init = fp8_init,
};

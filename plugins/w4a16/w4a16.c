/* w4a16.c - INT4 weights with bf16 activations (GPTQ/AWQ/GGUF Q4 layouts import into it). */
#include <qcore/plugin.h>

static const uint32_t w4a16_groups[] = {32, 64, 128};

static qc_status w4a16_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "w4a16",
        .summary = "INT4 weights per group (sym, zero-point or float min), bf16 activations",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_I4,
        .act_dtype = QC_DT_BF16,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_F16,
        .weight_scale = QC_GRAN_GROUP,
        .act_scale = QC_GRAN_NONE,
        .group_sizes = w4a16_groups,
        .n_group_sizes = 3,
        .default_group_size = 128,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {80, QC_SM_ANY},
        .n_align = 8,
        .k_align = 32,
        .bits_per_weight = 4,
        .effective_bits = 4.125, /* g128 with one f16 scale per group */
    };
    return api->register_format(host, &f);
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.w4a16",
    .name = "w4a16",
    .version = "0.1.0",
    .description = "INT4 weight-only quantization (W4A16)",
    .init = w4a16_init,
};

/* mxfp4.c - OCP MX FP4: E2M1 elements with one E8M0 scale per 32. */
#include <qcore/plugin.h>

static const uint32_t mx_groups[] = {32};

static qc_status mxfp4_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = "mxfp4",
        .summary = "OCP MXFP4: E2M1 weights, E8M0 scale per 32; weight-only below sm_100",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_F4_E2M1,
        .act_dtype = QC_DT_BF16,
        .accum_dtype = QC_DT_F32,
        .scale_dtype = QC_DT_E8M0,
        .weight_scale = QC_GRAN_GROUP,
        .act_scale = QC_GRAN_NONE,
        .group_sizes = mx_groups,
        .n_group_sizes = 1,
        .default_group_size = 32,
        .supported_arch = {80, QC_SM_ANY},
        .native_arch = {100, QC_SM_ANY},
        .n_align = 8,
        .k_align = 32,
        .bits_per_weight = 4,
        .effective_bits = 4.25,
    };
    return api->register_format(host, &f);
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.mxfp4",
    .name = "mxfp4",
    .version = "0.1.0",
    .description = "OCP microscaling FP4 (MXFP4)",
    .init = mxfp4_init,
};

/* tmap_plugin.c - test plugins for tensor-map specs in kernel descriptors (TMAP_CASE selects which). */
#include <qcore/plugin.h>
#include <stddef.h>
#include <stdio.h>

#define TMAP_GOOD 0
#define TMAP_UNKNOWN_PARAM 1
#define TMAP_BAD_BOX 2
#define TMAP_BAD_SHAPE 3
#ifndef TMAP_CASE
#define TMAP_CASE TMAP_GOOD
#endif
#ifndef FORMAT_NAME
#define FORMAT_NAME "test_tmap"
#endif

/* b[r,c] = a[r,c] */
static void copy_ref(const float *a, float *b, int64_t rows, int64_t cols) {
    for (int64_t i = 0; i < rows * cols; i++) b[i] = a[i];
}

static const qc_kernel_param params[] = {
    {"a", QC_PARAM_PTR}, {"b", QC_PARAM_PTR}, {"rows", QC_PARAM_I64}, {"cols", QC_PARAM_I64}, {"flag", QC_PARAM_I32},
};

static const qc_tensor_map_spec maps[] = {
#if TMAP_CASE == TMAP_UNKNOWN_PARAM
    {"nope", QC_DT_F32, "rows", "cols", 32, 32, 128},
#elif TMAP_CASE == TMAP_BAD_BOX
    {"a", QC_DT_F32, "rows", "cols", 32, 64, 128}, /* 256-byte rows over a 128-byte swizzle */
#elif TMAP_CASE == TMAP_BAD_SHAPE
    {"a", QC_DT_F32, "rows", "flag", 32, 32, 128}, /* flag is I32 */
#else
    {"a", QC_DT_F32, "rows", "cols", 32, 32, 128},
#endif
};

static void dims(const qc_problem *p, qc_launch_dims *d) {
    (void)p;
    *d = (qc_launch_dims){{1, 1, 1}, {32, 1, 1}, 0};
}

static qc_status tmap_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    (void)err, (void)errlen;
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = FORMAT_NAME,
        .summary = "test format",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_F32,
        .act_dtype = QC_DT_F32,
        .accum_dtype = QC_DT_F32,
        .bits_per_weight = 32,
        .effective_bits = 32,
    };
    if (api->register_format(host, &f) != QC_OK) return QC_ERR_INVALID;
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = "test.tmap.with_maps",
        .format = FORMAT_NAME,
        .m_min = 1,
        .arch = {90, 90},
        .n_params = sizeof params / sizeof params[0],
        .params = params,
        .reference = (void (*)(void))copy_ref,
        .cuda_source = "extern \"C\" __global__ void k() {}\n",
        .cuda_entry = "k",
        .launch_dims = dims,
        .n_tensor_maps = 1,
        .tensor_maps = maps,
    };
    if (api->register_kernel(host, &k) != QC_OK) return QC_ERR_INVALID;
    /* a plugin built before the fields existed: its struct_size ends at eligible,
     * and whatever lies past it (here: maps) must not be read */
    qc_kernel_desc old = k;
    old.id = "test.tmap.legacy";
    old.struct_size = (uint32_t)(offsetof(qc_kernel_desc, eligible) + sizeof(void *));
    return api->register_kernel(host, &old);
}

QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
    .abi_version = QC_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(qc_plugin_entry),
    .id = "org.qcore.test." FORMAT_NAME,
    .name = FORMAT_NAME,
    .version = "1.0",
    .description = "tensor-map spec test plugin",
    .init = tmap_init,
};

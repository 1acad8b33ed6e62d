/* fault_plugin.c - test plugins that break one loader rule each (FAULT selects which). */
#include <qcore/plugin.h>
#include <stdio.h>

#define FAULT_NONE 0
#define FAULT_NO_ENTRY 1
#define FAULT_ABI 2
#define FAULT_SMALL_STRUCT 3
#define FAULT_INIT 4
#define FAULT_DUP_FORMAT 5
#define FAULT_BAD_KERNEL 6
#define FAULT_WORK_PARAM 7 /* states a workspace but has no "work" pointer parameter */

#ifndef FAULT
#define FAULT FAULT_NONE
#endif
#ifndef FORMAT_NAME
#define FORMAT_NAME "test_good"
#endif
#ifndef PLUGIN_ID
#define PLUGIN_ID "org.qcore.test." FORMAT_NAME
#endif

/* A kernel whose signature uses every parameter type, so the libffi path is
 * exercised with each: y[i] = a*x[i] + b*(i + offset), for i < n, when flags&1. */
static void axpb_ref(float *y, const float *x, int32_t n, float a, double b, uint32_t flags, int64_t offset) {
    if (!(flags & 1u)) return;
    for (int32_t i = 0; i < n; i++) y[i] = a * x[i] + (float)(b * (double)(i + offset));
}

static const qc_kernel_param axpb_params[] = {
    {"y", QC_PARAM_PTR}, {"x", QC_PARAM_PTR}, {"n", QC_PARAM_I32},       {"a", QC_PARAM_F32},
    {"b", QC_PARAM_F64}, {"flags", QC_PARAM_U32}, {"offset", QC_PARAM_I64},
};

#if FAULT == FAULT_WORK_PARAM
static uint64_t axpb_workspace(const qc_problem *p) {
    (void)p;
    return 4096;
}
#endif
static qc_status fault_init(const qc_host_api *api, qc_host *host, char *err, size_t errlen) {
    if (FAULT == FAULT_INIT) {
        snprintf(err, errlen, "needs a licence file that is not there");
        return QC_ERR_UNSUPPORTED;
    }
    qc_format_desc f = {
        .struct_size = sizeof f,
        .name = FAULT == FAULT_DUP_FORMAT ? "bf16" : FORMAT_NAME,
        .summary = "test format",
        .kind = QC_FORMAT_LINEAR,
        .weight_dtype = QC_DT_F32,
        .act_dtype = QC_DT_F32,
        .accum_dtype = QC_DT_F32,
        .n_align = 1,
        .k_align = 1,
        .bits_per_weight = 32,
        .effective_bits = 32,
    };
    if (api->register_format(host, &f) != QC_OK) return QC_ERR_INVALID;
    qc_kernel_desc k = {
        .struct_size = sizeof k,
        .id = FAULT == FAULT_BAD_KERNEL ? "test.orphan" : "test." FORMAT_NAME ".axpb",
        .format = FAULT == FAULT_BAD_KERNEL ? "no_such_format" : FORMAT_NAME,
        .m_min = 1,
        .n_params = sizeof axpb_params / sizeof axpb_params[0],
        .params = axpb_params,
        .reference = (void (*)(void))axpb_ref,
    };
#if FAULT == FAULT_WORK_PARAM
    k.workspace_bytes = axpb_workspace;
#endif
    api->register_kernel(host, &k);
    api->log(host, QC_LOG_DEBUG, "registered %s", FORMAT_NAME);
    return QC_OK;
}

#if FAULT == FAULT_NO_ENTRY
QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry_misspelt = {
#else
QC_PLUGIN_EXPORT const qc_plugin_entry qcore_plugin_entry = {
#endif
    .abi_version = FAULT == FAULT_ABI ? 999u : QC_PLUGIN_ABI_VERSION,
    .struct_size = FAULT == FAULT_SMALL_STRUCT ? 8u : (uint32_t)sizeof(qc_plugin_entry),
    .id = PLUGIN_ID,
    .name = FORMAT_NAME,
    .version = "1.0",
    .description = "loader test plugin",
    .init = fault_init,
};

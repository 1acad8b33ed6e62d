/* qc_ffi.c - calling a kernel's C reference through libffi from the cuLaunchKernel argument array. */
#include <ffi.h>
#include <string.h>

#include "qc_internal.h"

qc_status qc_kernel_bind(const qc_kernel_desc *k, const qc_named_arg *args, size_t n_args, void **argv,
                         size_t argv_cap, char *err, size_t errlen) {
    if (k->n_params > argv_cap) {
        qc_errf(err, errlen, "%s: %u parameters, argument array holds %zu", k->id, k->n_params, argv_cap);
        return QC_ERR_INVALID;
    }
    for (uint32_t i = 0; i < k->n_params; i++) {
        argv[i] = NULL;
        for (size_t j = 0; j < n_args; j++)
            if (args[j].name && strcmp(args[j].name, k->params[i].name) == 0) {
                argv[i] = args[j].value;
                break;
            }
        if (!argv[i] && k->params[i].type == QC_PARAM_PTR &&
            (strcmp(k->params[i].name, "work") == 0 || strcmp(k->params[i].name, "y.bf16") == 0)) {
            /* a caller that gives no workspace: NULL, and the kernel runs without one; no bf16 output: the
               kernel writes y (plugin.h) */
            static void *const no_work = NULL;
            argv[i] = (void *)&no_work;
        }
        if (!argv[i]) {
            qc_errf(err, errlen, "%s: no value for parameter %u '%s'", k->id, i, k->params[i].name);
            return QC_ERR_INVALID;
        }
    }
    return QC_OK;
}

static ffi_type *ffi_type_of(qc_param_type t) {
    switch (t) {
    case QC_PARAM_PTR: return &ffi_type_pointer;
    case QC_PARAM_I32: return &ffi_type_sint32;
    case QC_PARAM_U32: return &ffi_type_uint32;
    case QC_PARAM_I64: return &ffi_type_sint64;
    case QC_PARAM_F32: return &ffi_type_float;
    case QC_PARAM_F64: return &ffi_type_double;
    }
    return NULL;
}

qc_status qc_kernel_call_reference(const qc_kernel_desc *k, void **argv, char *err, size_t errlen) {
    if (!k->reference) {
        qc_errf(err, errlen, "%s has no C reference implementation", k->id);
        return QC_ERR_UNSUPPORTED;
    }
    ffi_type *types[32];
    if (k->n_params > 32) {
        qc_errf(err, errlen, "%s: too many parameters (%u)", k->id, k->n_params);
        return QC_ERR_INVALID;
    }
    for (uint32_t i = 0; i < k->n_params; i++) {
        types[i] = ffi_type_of(k->params[i].type);
        if (!types[i] || !argv[i]) {
            qc_errf(err, errlen, "%s: parameter %u '%s' has no type or no value", k->id, i, k->params[i].name);
            return QC_ERR_INVALID;
        }
    }
    ffi_cif cif;
    if (ffi_prep_cif(&cif, FFI_DEFAULT_ABI, k->n_params, &ffi_type_void, types) != FFI_OK) {
        qc_errf(err, errlen, "%s: libffi could not prepare the call", k->id);
        return QC_ERR_INTERNAL;
    }
    ffi_call(&cif, k->reference, NULL, argv);
    return QC_OK;
}

/* qc_quant.c - format-agnostic quantization error metrics: MSE, cosine, SQNR, effective bits. */
#include <math.h>
#include <stdlib.h>

#include "qc_util.h"

qc_status qc_quant_measure(const qc_format_desc *f, const qc_packed_weight *pw, const float *w, qc_quant_metrics *out,
                           char *err, size_t errlen) {
    if (!f || !pw || !w || !out || pw->n <= 0 || pw->k <= 0) {
        qc_errf(err, errlen, "qc_quant_measure: missing argument or empty weight");
        return QC_ERR_INVALID;
    }
    if (!f->dequantize) {
        qc_errf(err, errlen, "%s cannot dequantize", f->name);
        return QC_ERR_UNSUPPORTED;
    }
    size_t count = (size_t)pw->n * (size_t)pw->k;
    float *dq = malloc(count * sizeof(float));
    if (!dq) {
        qc_errf(err, errlen, "out of memory (%zu floats)", count);
        return QC_ERR_NOMEM;
    }
    qc_status st = f->dequantize(pw, dq);
    if (st != QC_OK) {
        free(dq);
        qc_errf(err, errlen, "%s: dequantize failed", f->name);
        return st;
    }
    double se = 0, ss = 0, sd = 0, dot = 0;
    for (size_t i = 0; i < count; i++) {
        double a = w[i], b = dq[i], d = a - b;
        se += d * d;
        ss += a * a;
        sd += b * b;
        dot += a * b;
    }
    free(dq);
    out->mse = se / (double)count;
    out->cosine = (ss > 0 && sd > 0) ? dot / sqrt(ss * sd) : (ss == sd ? 1.0 : 0.0);
    out->sqnr_db = se > 0 ? 10.0 * log10(ss / se) : INFINITY;
    out->resident_bytes = out->padding_bytes = 0;
    for (uint32_t i = 0; i < pw->n_buffers && i < QC_MAX_WEIGHT_BUFFERS; i++) {
        out->resident_bytes += pw->buffers[i].bytes;
        if (pw->buffers[i].category == QC_MEM_PADDING) out->padding_bytes += pw->buffers[i].bytes;
    }
    out->effective_bits = (double)(out->resident_bytes - out->padding_bytes) * 8.0 / (double)count;
    out->saturated_ratio = out->code_utilization = -1;
    if (f->code_stats && f->code_stats(pw, w, &out->saturated_ratio, &out->code_utilization) != QC_OK)
        out->saturated_ratio = out->code_utilization = -1;
    return QC_OK;
}

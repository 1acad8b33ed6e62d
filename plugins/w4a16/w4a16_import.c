/* w4a16_import.c - exact imports of GPTQ (v1, v2, act-order), AWQ and GGUF Q4_0/Q4_1 packings. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "w4a16_impl.h"

/* Every tensor is checked (names, dtype, shape, byte size) before one byte
 * of it is read, and every value that could make the result wrong (a
 * non-finite scale, a zero point outside 0..15, a g_idx that does not form
 * equal groups) is refused with a reason.  Nothing goes through floats: the
 * codes and the f16 bits of scales and minimums are copied. */

static const char *const w4_layouts[] = {"gptq", "gptq_v2", "awq", "gguf.q4_0", "gguf.q4_1", NULL};

/* Little-endian reads that need no alignment (tensors may sit anywhere in a
 * mapped file). */
static uint32_t rd32(const void *base, size_t idx) {
    const uint8_t *p = (const uint8_t *)base + idx * 4;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t rd16(const void *base, size_t idx) {
    const uint8_t *p = (const uint8_t *)base + idx * 2;
    return (uint16_t)(p[0] | p[1] << 8);
}
static int f16_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

static size_t dtype_bytes(qc_dtype t) {
    switch (t) {
    case QC_DT_U8: return 1;
    case QC_DT_F16: return 2;
    case QC_DT_I32: return 4;
    default: return 0;
    }
}

static const char *dtype_str(qc_dtype t) {
    static const char *const names[] = {"none", "f32", "f16", "bf16", "i8", "u8", "i4", "u4",
                                        "i32", "f8_e4m3", "f8_e5m2", "f4_e2m1", "e8m0", "f64", "i64"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
    size_t at = 0;
    at += (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < ndim && i < 4 && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (at < len) snprintf(buf + at, len - at, "]");
}

/* dtype, rank, every dimension, then bytes == elements * element size.  The
 * expected shape is already bounded, so its product cannot overflow. */
static int tensor_ok(const char *layout, const qc_named_tensor *t, qc_dtype dt, int ndim, const int64_t *shape,
                     qc_reason *why) {
    if (t->dtype != dt) {
        w4_why(why, "dtype", "%s: '%s' is %s, expected %s", layout, t->name, dtype_str(t->dtype), dtype_str(dt));
        return 0;
    }
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (!same) {
        char got[96], want[96];
        if (t->ndim < 0 || t->ndim > 4)
            snprintf(got, sizeof got, "rank %d", t->ndim);
        else
            shape_str(t->ndim, t->shape, got, sizeof got);
        shape_str(ndim, shape, want, sizeof want);
        w4_why(why, "shape", "%s: '%s' has shape %s, expected %s", layout, t->name, got, want);
        return 0;
    }
    size_t want_bytes = dtype_bytes(dt);
    for (int i = 0; i < ndim; i++) want_bytes *= (size_t)shape[i];
    if (t->bytes != want_bytes) {
        w4_why(why, "bytes", "%s: '%s' holds %zu bytes, its shape needs %zu", layout, t->name, t->bytes, want_bytes);
        return 0;
    }
    if (!t->data) {
        w4_why(why, "tensor", "%s: '%s' has no data", layout, t->name);
        return 0;
    }
    return 1;
}

/* Sort the tensors into `found` by name: unknown names and repeats are
 * refused (a bias silently dropped would be a wrong model). */
static int pick(const char *layout, const qc_named_tensor *ts, size_t nt, const char *const *names, size_t nn,
                const qc_named_tensor **found, qc_reason *why) {
    for (size_t i = 0; i < nn; i++) found[i] = NULL;
    for (size_t i = 0; i < nt; i++) {
        size_t j = 0;
        while (j < nn && !(ts[i].name && strcmp(ts[i].name, names[j]) == 0)) j++;
        if (j == nn) {
            w4_why(why, "tensor", "%s: unexpected tensor '%.64s'", layout, ts[i].name ? ts[i].name : "(unnamed)");
            return 0;
        }
        if (found[j]) {
            w4_why(why, "tensor", "%s: tensor '%s' is given twice", layout, names[j]);
            return 0;
        }
        found[j] = &ts[i];
    }
    return 1;
}

static int dims_ok(const char *layout, int64_t n, int64_t k, qc_reason *why) {
    if (n <= 0 || k <= 0 || n > W4_MAX_DIM || k > W4_MAX_DIM || n > W4_MAX_ELEMS / k) {
        w4_why(why, "shape", "%s: weight shape %lldx%lld is empty or too large", layout, (long long)n, (long long)k);
        return 0;
    }
    return 1;
}

/* ---- GPTQ and AWQ --------------------------------------------------------- */

/* AWQ's interleave: output 8c+j of a packed column sits in nibble awq_slot[j]
 * (equivalently, nibble i holds output 8c + {0,2,4,6,1,3,5,7}[i]). */
static const unsigned awq_slot[8] = {0, 4, 1, 5, 2, 6, 3, 7};

enum { W4_GPTQ_V1, W4_GPTQ_V2, W4_AWQ };

/* From g_idx (the group of each input channel) to the stored order: input
 * channels sorted by group, ties by channel index.  *perm_out stays NULL when
 * that order is the identity. */
static qc_status gidx_perm(const char *layout, const qc_named_tensor *t, int64_t k, int64_t ng, uint32_t g,
                           int32_t **perm_out, qc_reason *why) {
    *perm_out = NULL;
    int64_t *next = calloc((size_t)ng, sizeof *next);
    int32_t *perm = malloc((size_t)k * sizeof *perm);
    if (!next || !perm) {
        free(next);
        free(perm);
        w4_why(why, "nomem", "%s: out of memory reading g_idx", layout);
        return QC_ERR_NOMEM;
    }
    for (int64_t c = 0; c < k; c++) {
        int32_t gi = (int32_t)rd32(t->data, (size_t)c);
        if (gi < 0 || gi >= ng) {
            w4_why(why, "g_idx", "%s: g_idx[%lld] = %d is outside 0..%lld", layout, (long long)c, gi,
                   (long long)(ng - 1));
            goto fail;
        }
        if (next[gi] == g) {
            w4_why(why, "g_idx", "%s: g_idx puts more than %u input channels in group %d", layout, g, gi);
            goto fail;
        }
        perm[gi * (int64_t)g + next[gi]++] = (int32_t)c;
    }
    /* k channels into ng groups of at most g each, k == ng * g: all full. */
    int identity = 1;
    for (int64_t t2 = 0; t2 < k && identity; t2++) identity = perm[t2] == t2;
    free(next);
    if (identity)
        free(perm);
    else
        *perm_out = perm;
    return QC_OK;
fail:
    free(next);
    free(perm);
    return QC_ERR_INVALID;
}

static qc_status import_gptq_awq(const char *layout, int kind, const qc_named_tensor *ts, size_t nt, int64_t n,
                                 int64_t k, uint32_t group_size, qc_packed_weight *out, qc_reason *why) {
    static const char *const names[] = {"qweight", "qzeros", "scales", "g_idx"};
    const qc_named_tensor *f[4];
    if (!pick(layout, ts, nt, names, kind == W4_AWQ ? 3 : 4, f, why)) return QC_ERR_INVALID;
    for (int i = 0; i < 3; i++)
        if (!f[i]) {
            w4_why(why, "tensor", "%s: tensor '%s' is missing", layout, names[i]);
            return QC_ERR_INVALID;
        }
    if (!dims_ok(layout, n, k, why)) return QC_ERR_INVALID;
    const qc_named_tensor *qw = f[0], *qz = f[1], *sc = f[2], *gx = kind == W4_AWQ ? NULL : f[3];

    /* The group size follows from the scales' rows: [k/g, n]. */
    if (sc->dtype != QC_DT_F16 || sc->ndim != 2 || sc->shape[1] != n || sc->shape[0] <= 0 ||
        k % sc->shape[0] != 0) {
        char got[96];
        shape_str(sc->ndim >= 0 && sc->ndim <= 4 ? sc->ndim : 0, sc->shape, got, sizeof got);
        w4_why(why, sc->dtype != QC_DT_F16 ? "dtype" : "shape",
               "%s: 'scales' is %s %s, expected f16 [k/group, n] with n=%lld, k=%lld", layout, dtype_str(sc->dtype),
               got, (long long)n, (long long)k);
        return QC_ERR_INVALID;
    }
    int64_t ng = sc->shape[0], g64 = k / ng;
    if (g64 != 32 && g64 != 64 && g64 != 128) {
        w4_why(why, "group", "%s: %lld groups over k=%lld make group size %lld; w4a16 has 32, 64 and 128", layout,
               (long long)ng, (long long)k, (long long)g64);
        return QC_ERR_INVALID;
    }
    uint32_t g = (uint32_t)g64;
    if (group_size && group_size != g) {
        w4_why(why, "group", "%s: group size %u was asked for, the tensors have %u", layout, group_size, g);
        return QC_ERR_INVALID;
    }
    if (!w4_shape_ok(n, k, g, why)) return QC_ERR_INVALID;
    int64_t s_shape[2] = {ng, n};
    int64_t w_shape[2] = {k / 8, n}, awq_w_shape[2] = {k, n / 8};
    int64_t z_shape[2] = {ng, n / 8};
    int64_t g_shape[1] = {k};
    if (!tensor_ok(layout, sc, QC_DT_F16, 2, s_shape, why) ||
        !tensor_ok(layout, qw, QC_DT_I32, 2, kind == W4_AWQ ? awq_w_shape : w_shape, why) ||
        !tensor_ok(layout, qz, QC_DT_I32, 2, z_shape, why) || (gx && !tensor_ok(layout, gx, QC_DT_I32, 1, g_shape, why)))
        return QC_ERR_INVALID;

    size_t n_sc = (size_t)ng * (size_t)n;
    for (size_t i = 0; i < n_sc; i++)
        if (!f16_finite(rd16(sc->data, i))) {
            w4_why(why, "value", "%s: scale [%zu, %zu] is not finite", layout, i / (size_t)n, i % (size_t)n);
            return QC_ERR_INVALID;
        }

    /* Zero points, [group][output], as true zeros. */
    uint8_t *z = malloc(n_sc);
    if (!z) {
        w4_why(why, "nomem", "%s: out of memory reading qzeros", layout);
        return QC_ERR_NOMEM;
    }
    int all_eight = 1;
    for (int64_t gi = 0; gi < ng; gi++)
        for (int64_t c = 0; c < n; c++) {
            uint32_t word = rd32(qz->data, (size_t)(gi * (n / 8) + c / 8));
            unsigned nib = kind == W4_AWQ ? awq_slot[c % 8] : (unsigned)(c % 8);
            unsigned zero = (word >> (4 * nib)) & 15u;
            if (kind == W4_GPTQ_V1) zero += 1; /* v1 stores zero - 1 */
            if (zero > 15) {
                w4_why(why, "zero", "%s: group %lld output %lld has zero point 16 (stored 15, v1 adds one); "
                                    "w4a16 zero points are 0..15",
                       layout, (long long)gi, (long long)c);
                free(z);
                return QC_ERR_INVALID;
            }
            z[gi * n + c] = (uint8_t)zero;
            all_eight &= zero == 8;
        }

    int32_t *perm = NULL;
    if (gx) {
        qc_status st = gidx_perm(layout, gx, k, ng, g, &perm, why);
        if (st != QC_OK) {
            free(z);
            return st;
        }
    }

    /* Zero points that are all 8 are the symmetric scheme, exactly. */
    uint32_t scheme = (all_eight ? W4A16_SCHEME_SYM : W4A16_SCHEME_ASYM) | (perm ? W4A16_SCHEME_PERM : 0u);
    qc_status st = w4_packed_alloc(out, n, k, g, scheme, why);
    if (st != QC_OK) {
        free(z);
        free(perm);
        return st;
    }
    uint8_t *q = w4_buf(out, "qweight"), *oz = w4_buf(out, "zeros");
    uint16_t *os = (uint16_t *)(void *)w4_buf(out, "scales");
    int32_t *op = (int32_t *)(void *)w4_buf(out, "perm");
    for (int64_t j = 0; j < n; j++) {
        for (int64_t t = 0; t < k; t++) {
            int64_t c = perm ? perm[t] : t; /* input channel of stored column t */
            uint32_t word;
            unsigned nib;
            if (kind == W4_AWQ) {
                word = rd32(qw->data, (size_t)(c * (n / 8) + j / 8));
                nib = awq_slot[j % 8];
            } else {
                word = rd32(qw->data, (size_t)((c / 8) * n + j));
                nib = (unsigned)(c % 8);
            }
            w4_set_code(q, k, j, t, (word >> (4 * nib)) & 15u);
        }
        for (int64_t gi = 0; gi < ng; gi++) {
            os[j * ng + gi] = rd16(sc->data, (size_t)(gi * n + j));
            if (oz) oz[j * ng + gi] = z[gi * n + j];
        }
    }
    if (op) memcpy(op, perm, (size_t)k * sizeof *perm);
    free(z);
    free(perm);
    return QC_OK;
}

/* ---- GGUF Q4_0 / Q4_1 ------------------------------------------------------ */

/* Raw GGUF blocks of 32, rows of k/32 blocks, n rows (GGUF dims [k, n]).
 * Q4_0: f16 d, u8 qs[16]; Q4_1: f16 d, f16 m, u8 qs[16].  Value l of a
 * block is the low nibble of qs[l], value l+16 its high nibble. */
static qc_status import_gguf(const char *layout, int q4_1, const qc_named_tensor *ts, size_t nt, int64_t n,
                             int64_t k, uint32_t group_size, qc_packed_weight *out, qc_reason *why) {
    if (nt != 1) {
        w4_why(why, "tensor", "%s: expected one tensor of raw blocks, got %zu", layout, nt);
        return QC_ERR_INVALID;
    }
    if (group_size && group_size != 32) {
        w4_why(why, "group", "%s blocks are groups of 32, not %u", layout, group_size);
        return QC_ERR_INVALID;
    }
    if (!dims_ok(layout, n, k, why) || !w4_shape_ok(n, k, 32, why)) return QC_ERR_INVALID;
    const qc_named_tensor *t = &ts[0];
    const char *name = t->name ? t->name : "(unnamed)";
    size_t bs = q4_1 ? 20 : 18, nb = (size_t)k / 32, row = nb * bs, total = (size_t)n * row;
    if (t->dtype != QC_DT_U8) {
        w4_why(why, "dtype", "%s: '%s' is %s, expected u8 blocks", layout, name, dtype_str(t->dtype));
        return QC_ERR_INVALID;
    }
    int shape_ok = (t->ndim == 1 && t->shape[0] == (int64_t)total) ||
                   (t->ndim == 2 && t->shape[0] == n && t->shape[1] == (int64_t)row);
    if (!shape_ok) {
        char got[96];
        shape_str(t->ndim >= 0 && t->ndim <= 4 ? t->ndim : 0, t->shape, got, sizeof got);
        w4_why(why, "shape", "%s: '%s' has shape %s, expected [%zu] or [%lld, %zu]", layout, name, got, total,
               (long long)n, row);
        return QC_ERR_INVALID;
    }
    if (t->bytes != total || !t->data) {
        w4_why(why, "bytes", "%s: '%s' holds %zu bytes, %lldx%lld needs %zu", layout, name, t->bytes, (long long)n,
               (long long)k, total);
        return QC_ERR_INVALID;
    }
    const uint8_t *src = t->data;
    for (size_t b = 0; b < (size_t)n * nb; b++) {
        const uint8_t *blk = src + b * bs;
        if (!f16_finite(rd16(blk, 0)) || (q4_1 && !f16_finite(rd16(blk, 1)))) {
            w4_why(why, "value", "%s: block %zu (row %zu) has a non-finite %s", layout, b, b / nb,
                   f16_finite(rd16(blk, 0)) ? "minimum" : "scale");
            return QC_ERR_INVALID;
        }
    }
    qc_status st = w4_packed_alloc(out, n, k, 32, q4_1 ? W4A16_SCHEME_FMIN : W4A16_SCHEME_SYM, why);
    if (st != QC_OK) return st;
    uint8_t *q = w4_buf(out, "qweight");
    uint16_t *os = (uint16_t *)(void *)w4_buf(out, "scales"), *om = (uint16_t *)(void *)w4_buf(out, "mins");
    for (int64_t j = 0; j < n; j++)
        for (size_t b = 0; b < nb; b++) {
            const uint8_t *blk = src + ((size_t)j * nb + b) * bs, *qs = blk + (q4_1 ? 4 : 2);
            os[(size_t)j * nb + b] = rd16(blk, 0);
            if (q4_1) om[(size_t)j * nb + b] = rd16(blk, 1);
            for (int64_t l = 0; l < 16; l++) {
                w4_set_code(q, k, j, (int64_t)b * 32 + l, qs[l] & 15u);
                w4_set_code(q, k, j, (int64_t)b * 32 + 16 + l, (unsigned)(qs[l] >> 4));
            }
        }
    return QC_OK;
}

static qc_status w4_import(const char *layout, const qc_named_tensor *tensors, size_t n_tensors, int64_t n,
                           int64_t k, uint32_t group_size, qc_packed_weight *out, qc_reason *why) {
    if (!out) {
        w4_why(why, "invalid", "w4a16 import: no output weight");
        return QC_ERR_INVALID;
    }
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    if (!layout) {
        w4_why(why, "layout", "w4a16 import: no layout named");
        return QC_ERR_INVALID;
    }
    if (n_tensors && !tensors) {
        w4_why(why, "tensor", "%s: %zu tensors announced, none given", layout, n_tensors);
        return QC_ERR_INVALID;
    }
    if (strcmp(layout, "gptq") == 0) return import_gptq_awq(layout, W4_GPTQ_V1, tensors, n_tensors, n, k, group_size, out, why);
    if (strcmp(layout, "gptq_v2") == 0)
        return import_gptq_awq(layout, W4_GPTQ_V2, tensors, n_tensors, n, k, group_size, out, why);
    if (strcmp(layout, "awq") == 0) return import_gptq_awq(layout, W4_AWQ, tensors, n_tensors, n, k, group_size, out, why);
    if (strcmp(layout, "gguf.q4_0") == 0) return import_gguf(layout, 0, tensors, n_tensors, n, k, group_size, out, why);
    if (strcmp(layout, "gguf.q4_1") == 0) return import_gguf(layout, 1, tensors, n_tensors, n, k, group_size, out, why);
    w4_why(why, "layout", "w4a16 imports gptq, gptq_v2, awq, gguf.q4_0 and gguf.q4_1, not '%.64s'", layout);
    return QC_ERR_UNSUPPORTED;
}

const qc_importer_ext w4_importer = {
    .struct_size = sizeof(qc_importer_ext),
    .layouts = w4_layouts,
    .import = w4_import,
};

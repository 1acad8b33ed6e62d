/* qc_model.c - loading Llama-family models from GGUF or safetensors and preparing each layer's formats. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qc_ggml.h"
#include "qc_gguf.h"
#include "qc_model.h"
#include "qc_manifest.h"
#include "qc_report.h"
#include "qc_safetensors.h"
#include "qc_tokenizer.h"

#define ROLE_COUNT 7
static const char *gguf_role_names[ROLE_COUNT] = {"attn_q", "attn_k", "attn_v", "attn_output",
                                                  "ffn_gate", "ffn_up", "ffn_down"};
static const char *hf_role_names[ROLE_COUNT] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                                "mlp.down_proj"};

/* ---- tensor sources ---- */

/* Decode any source tensor to f32 (exactly: ggml blocks and f16/bf16 widen). */
static qc_status src_to_f32(const qc_tensor_src *s, float *out, char *err, size_t errlen) {
    int64_t count = s->n * s->k;
    if (s->from_gguf) return qc_ggml_dequantize(s->ggml_type, s->data, s->bytes, count, out, err, errlen);
    const uint8_t *p = s->data;
    switch (s->dtype) {
    case QC_DT_F32: memcpy(out, p, (size_t)count * 4); return QC_OK;
    case QC_DT_F16: return qc_ggml_dequantize(QC_GGML_F16, p, s->bytes, count, out, err, errlen);
    case QC_DT_BF16: return qc_ggml_dequantize(QC_GGML_BF16, p, s->bytes, count, out, err, errlen);
    default:
        qc_errf(err, errlen, "%s: dtype %s cannot be used as model weights", s->name, qc_dtype_name(s->dtype));
        return QC_ERR_UNSUPPORTED;
    }
}

/* A source from GGUF; `n`/`k` are the expected PyTorch-order shape. */
static int gguf_src(qc_model *m, const char *name, int64_t n, int64_t k, int required, qc_tensor_src *out,
                    char *err, size_t errlen) {
    const qc_gguf_tensor *t = qc_gguf_find_tensor(m->gguf, name);
    if (!t) {
        if (required) qc_errf(err, errlen, "%s: tensor '%s' is missing", m->path, name);
        return required ? -1 : 0;
    }
    int64_t tk = t->ne[0], tn = t->n_dims > 1 ? t->ne[1] : 1;
    if (tk != k || tn != n || t->ne[2] != 1 || t->ne[3] != 1) {
        qc_errf(err, errlen, "%s: tensor '%s' has shape [%lld, %lld], the config needs [%lld, %lld]", m->path, name,
                (long long)tn, (long long)tk, (long long)n, (long long)k);
        return -1;
    }
    if (!qc_ggml_type_name(t->type)) {
        qc_errf(err, errlen, "%s: tensor '%s' has type %u, which qcore cannot decode", m->path, name, t->type);
        return -1;
    }
    *out = (qc_tensor_src){.name = t->name, .data = t->data, .bytes = t->bytes, .from_gguf = 1,
                           .ggml_type = t->type, .n = n, .k = k};
    return 1;
}

static int st_src(qc_model *m, const char *name, int64_t n, int64_t k, int required, qc_tensor_src *out, char *err,
                  size_t errlen) {
    const qc_st_tensor *t = qc_safetensors_find(m->st, name);
    if (!t) {
        if (required) qc_errf(err, errlen, "%s: tensor '%s' is missing", m->path, name);
        return required ? -1 : 0;
    }
    int64_t tn = t->ndim >= 2 ? t->shape[0] : 1, tk = t->ndim >= 2 ? t->shape[1] : (t->ndim == 1 ? t->shape[0] : 1);
    if (t->ndim > 2 || tn != n || tk != k) {
        qc_errf(err, errlen, "%s: tensor '%s' does not have the shape [%lld, %lld] the config needs", m->path, name,
                (long long)n, (long long)k);
        return -1;
    }
    if (t->dtype != QC_DT_F32 && t->dtype != QC_DT_F16 && t->dtype != QC_DT_BF16) {
        qc_errf(err, errlen, "%s: tensor '%s' is %s; only f32/f16/bf16 checkpoints are read as weights", m->path,
                name, qc_dtype_name(t->dtype));
        return -1;
    }
    *out = (qc_tensor_src){.name = t->name, .data = t->data, .bytes = t->bytes, .dtype = t->dtype, .n = n, .k = k};
    return 1;
}

static int find_src(qc_model *m, const char *name, int64_t n, int64_t k, int required, qc_tensor_src *out,
                    char *err, size_t errlen) {
    return m->gguf ? gguf_src(m, name, n, k, required, out, err, errlen)
                   : st_src(m, name, n, k, required, out, err, errlen);
}

/* A small tensor (norm, bias) as an owned f32 copy. */
static float *load_vector(qc_model *m, const char *name, int64_t len, int required, char *err, size_t errlen,
                          int *failed) {
    qc_tensor_src s;
    int r = find_src(m, name, 1, len, required, &s, err, errlen);
    if (r <= 0) {
        if (r < 0) *failed = 1;
        return NULL;
    }
    float *v = malloc((size_t)len * sizeof(float));
    if (!v || src_to_f32(&s, v, err, errlen) != QC_OK) {
        if (!v) qc_errf(err, errlen, "out of memory loading '%s'", name);
        free(v);
        *failed = 1;
        return NULL;
    }
    return v;
}

/* ---- hyper-parameters ---- */

static int gguf_u64(qc_model *m, const char *arch, const char *key, uint64_t *v, int required, char *err,
                    size_t errlen) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", arch, key);
    if (qc_gguf_get_u64(m->gguf, full, v) == 0) return 0;
    if (required) qc_errf(err, errlen, "%s: metadata '%s' is missing or not an integer", m->path, full);
    return -1;
}

static qc_status shape_from_gguf(qc_model *m, char *err, size_t errlen) {
    size_t alen;
    const char *a = qc_gguf_get_str(m->gguf, "general.architecture", &alen);
    char arch[32];
    if (!a || alen == 0 || alen >= sizeof arch) {
        qc_errf(err, errlen, "%s: general.architecture is missing", m->path);
        return QC_ERR_INVALID;
    }
    memcpy(arch, a, alen);
    arch[alen] = 0;
    if (strcmp(arch, "llama") && strcmp(arch, "qwen2") && strcmp(arch, "qwen3") && strcmp(arch, "mistral")) {
        qc_errf(err, errlen, "%s: architecture '%s' is not supported (llama, mistral, qwen2, qwen3)", m->path, arch);
        return QC_ERR_UNSUPPORTED;
    }
    qc_model_shape *s = &m->shape;
    qc_strlcpy(s->model_type, arch, sizeof s->model_type);
    qc_strlcpy(s->architecture, arch, sizeof s->architecture);
    uint64_t blocks, hidden, ff, heads, kv = 0, ctx = 4096, hd = 0;
    if (gguf_u64(m, arch, "block_count", &blocks, 1, err, errlen) ||
        gguf_u64(m, arch, "embedding_length", &hidden, 1, err, errlen) ||
        gguf_u64(m, arch, "feed_forward_length", &ff, 1, err, errlen) ||
        gguf_u64(m, arch, "attention.head_count", &heads, 1, err, errlen))
        return QC_ERR_INVALID;
    gguf_u64(m, arch, "attention.head_count_kv", &kv, 0, err, errlen);
    gguf_u64(m, arch, "context_length", &ctx, 0, err, errlen);
    gguf_u64(m, arch, "attention.key_length", &hd, 0, err, errlen);
    if (!kv) kv = heads;
    if (blocks < 1 || blocks > 1024 || hidden < 1 || hidden > 65536 || ff < 1 || ff > (1u << 20) || heads < 1 ||
        heads > 1024 || kv < 1 || heads % kv || (!hd && hidden % heads)) {
        qc_errf(err, errlen, "%s: hyper-parameters out of range (blocks %llu, hidden %llu, ff %llu, heads %llu/%llu)",
                m->path, (unsigned long long)blocks, (unsigned long long)hidden, (unsigned long long)ff,
                (unsigned long long)heads, (unsigned long long)kv);
        return QC_ERR_INVALID;
    }
    s->n_layers = (int)blocks;
    s->hidden = (int)hidden;
    s->intermediate = (int)ff;
    s->n_heads = (int)heads;
    s->n_kv_heads = (int)kv;
    s->head_dim = hd ? (int)hd : (int)(hidden / heads);
    s->max_positions = ctx > (1u << 24) ? (1 << 24) : (int)ctx;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    if (qc_gguf_get_f64(m->gguf, key, &s->rope_theta) != 0) s->rope_theta = 10000.0;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    if (qc_gguf_get_f64(m->gguf, key, &s->rms_eps) != 0) s->rms_eps = 1e-5;
    const qc_gguf_tensor *emb = qc_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->ne[0] != s->hidden || emb->ne[1] < 1 || emb->ne[1] > (1 << 22)) {
        qc_errf(err, errlen, "%s: token_embd.weight is missing or not [vocab, %d]", m->path, s->hidden);
        return QC_ERR_INVALID;
    }
    s->vocab = (int)emb->ne[1];
    s->tied_embeddings = qc_gguf_find_tensor(m->gguf, "output.weight") == NULL;
    m->rope = strcmp(arch, "llama") == 0 || strcmp(arch, "mistral") == 0 ? QC_ROPE_ADJACENT : QC_ROPE_HALVES;
    return QC_OK;
}

/* Inverse rotary frequencies, with llama3 scaling from config.json or the
 * per-dimension factors GGUF stores as rope_freqs.weight. */
static qc_status rope_setup(qc_model *m, const char *config_path, char *err, size_t errlen) {
    int half = m->shape.head_dim / 2;
    m->inv_freq = malloc(sizeof(float) * (size_t)(half ? half : 1));
    if (!m->inv_freq) { qc_errf(err, errlen, "out of memory"); return QC_ERR_NOMEM; }
    for (int i = 0; i < half; i++)
        m->inv_freq[i] = (float)pow(m->shape.rope_theta, -2.0 * i / (double)m->shape.head_dim);
    if (m->gguf) {
        const qc_gguf_tensor *rf = qc_gguf_find_tensor(m->gguf, "rope_freqs.weight");
        if (rf) {
            if (rf->type != QC_GGML_F32 || rf->ne[0] != half || rf->bytes != (size_t)half * 4) {
                qc_errf(err, errlen, "%s: rope_freqs.weight must be f32 [%d]", m->path, half);
                return QC_ERR_INVALID;
            }
            for (int i = 0; i < half; i++) {
                float f;
                memcpy(&f, (const char *)rf->data + 4 * i, 4);
                if (!(f > 0)) { qc_errf(err, errlen, "%s: rope_freqs.weight has a non-positive factor", m->path); return QC_ERR_INVALID; }
                m->inv_freq[i] /= f;
            }
        }
        return QC_OK;
    }
    /* HF config: rope_scaling {rope_type: llama3, factor, low_freq_factor, high_freq_factor,
     * original_max_position_embeddings}; transformers >= 5 writes the same keys (and
     * rope_theta) as "rope_parameters" */
    size_t len;
    char *text = qc_read_file(config_path, 4u << 20, &len, err, errlen);
    if (!text) return QC_ERR_IO;
    json_t *root = json_loadb(text, len, 0, NULL);
    free(text);
    json_t *rs = json_object_get(root, "rope_scaling");
    if (!json_is_object(rs)) rs = json_object_get(root, "rope_parameters");
    qc_status st = QC_OK;
    if (json_is_object(rs)) {
        const char *type = json_string_value(json_object_get(rs, "rope_type"));
        if (!type) type = json_string_value(json_object_get(rs, "type"));
        if (type && strcmp(type, "llama3") == 0) {
            double factor = json_number_value(json_object_get(rs, "factor"));
            double lo = json_number_value(json_object_get(rs, "low_freq_factor"));
            double hi = json_number_value(json_object_get(rs, "high_freq_factor"));
            double orig = json_number_value(json_object_get(rs, "original_max_position_embeddings"));
            if (!(factor > 0 && lo > 0 && hi > lo && orig > 0)) {
                qc_errf(err, errlen, "%s: rope_scaling (llama3) needs factor, low/high_freq_factor and "
                        "original_max_position_embeddings", config_path);
                st = QC_ERR_INVALID;
            } else {
                double lo_wl = orig / lo, hi_wl = orig / hi;
                for (int i = 0; i < half; i++) {
                    double f = m->inv_freq[i], wl = 2 * M_PI / f;
                    if (wl < hi_wl) continue;                   /* high frequency: unchanged */
                    if (wl > lo_wl) { m->inv_freq[i] = (float)(f / factor); continue; }
                    double smooth = (orig / wl - lo) / (hi - lo);
                    m->inv_freq[i] = (float)((1 - smooth) * f / factor + smooth * f);
                }
            }
        } else if (type && strcmp(type, "default") != 0) {
            qc_errf(err, errlen, "%s: rope_scaling type '%s' is not supported (llama3 is)", config_path, type);
            st = QC_ERR_UNSUPPORTED;
        }
    }
    json_decref(root);
    return st;
}

/* ---- preparing formats ---- */

/* "w4a16:g128" -> format name, group size, scheme. */
static void parse_recipe(const char *recipe, char *name, size_t nlen, uint32_t *group, char *scheme, size_t slen) {
    *group = 0;
    scheme[0] = 0;
    qc_strlcpy(name, recipe, nlen);
    char *colon = strchr(name, ':');
    if (!colon) return;
    *colon = 0;
    const char *opt = colon + 1;
    if (opt[0] == 'g' && opt[1] >= '0' && opt[1] <= '9')
        *group = (uint32_t)strtoul(opt + 1, NULL, 10);
    else
        qc_strlcpy(scheme, opt, slen);
}

static void release_packed(const qc_format_desc *f, qc_packed_weight *pw) {
    if (f && f->release) {
        f->release(pw);
    } else {
        for (uint32_t i = 0; i < pw->n_buffers; i++) qc_aligned_free(pw->buffers[i].data);
    }
    memset(pw, 0, sizeof *pw);
}

/* Import GGUF Q4_0/Q4_1 blocks exactly through the format's importer. */
static int try_import(qc_model *m, qc_linear *L, qc_prepared *p, char *err, size_t errlen) {
    const qc_tensor_src *s = &L->src;
    if (!s->from_gguf || (s->ggml_type != QC_GGML_Q4_0 && s->ggml_type != QC_GGML_Q4_1 && s->ggml_type != QC_GGML_Q8_0))
        return 0;
    const qc_importer_ext *imp = qc_format_extension(m->rt, p->fmt->name, QC_EXT_IMPORTER);
    if (!imp || imp->struct_size < sizeof *imp) return 0;
    const char *layout = s->ggml_type == QC_GGML_Q4_0 ? "gguf.q4_0" : s->ggml_type == QC_GGML_Q4_1 ? "gguf.q4_1"
                                                                                                   : "gguf.q8_0";
    int takes = 0;
    for (const char *const *l = imp->layouts; l && *l; l++) takes |= strcmp(*l, layout) == 0;
    if (!takes) return 0;
    qc_named_tensor t = {.name = "blocks", .data = s->data, .bytes = s->bytes, .dtype = QC_DT_U8, .ndim = 2,
                         .shape = {s->n, (int64_t)(s->bytes / (size_t)s->n)}};
    qc_reason why = {{0}, {0}};
    memset(&p->pw, 0, sizeof p->pw);
    p->pw.struct_size = sizeof p->pw;
    if (imp->import(layout, &t, 1, s->n, s->k, 32, &p->pw, &why) != QC_OK) {
        qc_errf(err, errlen, "%s: importing %s into %s failed: %s: %s", s->name, layout, p->fmt->name, why.code,
                why.text);
        return -1;
    }
    p->imported = 1;
    return 1;
}

/* Prepare format `recipe` for linear L: import exactly when the file's
 * blocks are the format's own, else quantize from the f32 weights. */
static qc_status prepare_format(qc_model *m, qc_linear *L, const char *recipe, float **f32_cache, char *err,
                                size_t errlen) {
    char name[32], scheme[32];
    uint32_t group;
    parse_recipe(recipe, name, sizeof name, &group, scheme, sizeof scheme);
    for (int i = 0; i < L->n_prep; i++)
        if (strcmp(L->prep[i].fmt->name, name) == 0) return QC_OK;
    if (L->n_prep == QC_MAX_PREPARED) {
        qc_errf(err, errlen, "%s: more than %d formats asked for", L->info->name, QC_MAX_PREPARED);
        return QC_ERR_INVALID;
    }
    qc_prepared *p = &L->prep[L->n_prep];
    memset(p, 0, sizeof *p);
    p->fmt = qc_format_find(m->rt, name);
    if (!p->fmt || !p->fmt->quantize || !p->fmt->dequantize) {
        qc_errf(err, errlen, "%s: format '%s' %s", L->info->name, name,
                p->fmt ? "cannot quantize or dequantize yet" : "is not registered");
        return QC_ERR_UNSUPPORTED;
    }
    if (group && L->src.k % group) {
        /* the largest listed group that divides K, said once per K */
        uint32_t best = 0;
        for (uint32_t i = 0; i < p->fmt->n_group_sizes; i++) {
            uint32_t g = p->fmt->group_sizes[i];
            if (g <= group && L->src.k % g == 0 && g > best) best = g;
        }
        if (!best) {
            qc_errf(err, errlen, "%s: K=%lld is not a multiple of any %s group size up to %u", L->info->name,
                    (long long)L->src.k, name, group);
            return QC_ERR_INVALID;
        }
        int seen = 0;
        for (int i = 0; i < m->n_group_notes; i++) seen |= m->group_notes[i] == L->src.k;
        if (!seen && m->n_group_notes < 8) {
            m->group_notes[m->n_group_notes++] = L->src.k;
            qc_log(QC_LOG_WARN, "%s: layers with K=%lld use group %u (K is not a multiple of %u)", recipe,
                   (long long)L->src.k, best, group);
        }
        group = best;
    }
    int imported = (group == 0 && !scheme[0]) ? try_import(m, L, p, err, errlen) : 0;
    if (imported < 0) return QC_ERR_INVALID;
    if (!imported) {
        if (!*f32_cache) {
            *f32_cache = malloc(sizeof(float) * (size_t)(L->src.n * L->src.k));
            if (!*f32_cache) { qc_errf(err, errlen, "out of memory for %s", L->info->name); return QC_ERR_NOMEM; }
            qc_status st = src_to_f32(&L->src, *f32_cache, err, errlen);
            if (st != QC_OK) { free(*f32_cache); *f32_cache = NULL; return st; }
        }
        qc_quant_request req = {.struct_size = sizeof req, .w = *f32_cache, .n = L->src.n, .k = L->src.k,
                                .group_size = group, .scheme = scheme[0] ? scheme : NULL};
        qc_reason why = {{0}, {0}};
        memset(&p->pw, 0, sizeof p->pw);
        p->pw.struct_size = sizeof p->pw;
        if (p->fmt->quantize(&req, &p->pw, &why) != QC_OK) {
            qc_errf(err, errlen, "%s: quantizing to %s failed: %s: %s", L->info->name, recipe, why.code, why.text);
            return QC_ERR_INVALID;
        }
    }
    p->deq = malloc(sizeof(float) * (size_t)(L->src.n * L->src.k));
    if (!p->deq || p->fmt->dequantize(&p->pw, p->deq) != QC_OK) {
        qc_errf(err, errlen, "%s: %s dequantize failed", L->info->name, name);
        free(p->deq);
        release_packed(p->fmt, &p->pw);
        return QC_ERR_INVALID;
    }
    /* the kernel for this weight's own scheme and group (the dispatch table
     * chose the format before the weight existed) */
    qc_problem pr = {.struct_size = sizeof pr, .m = 1, .n = L->src.n, .k = L->src.k, .group_size = p->pw.group_size,
                     .scheme = p->pw.scheme, .layer = L->info->name};
    qc_reason why;
    if (!qc_select_format(m->rt, p->fmt, &pr, 0, &p->kernel, &why)) {
        qc_errf(err, errlen, "%s: no %s reference kernel takes this weight: %s: %s", L->info->name, name, why.code,
                why.text);
        free(p->deq);
        release_packed(p->fmt, &p->pw);
        return QC_ERR_UNSUPPORTED;
    }
    L->n_prep++;
    return QC_OK;
}

/* Every format the dispatch table uses for this layer, prepared once. */
static qc_status prepare_layer(qc_model *m, qc_linear *L, size_t layer_index, const char *forced, char *err,
                               size_t errlen) {
    float *f32 = NULL;
    qc_status st = QC_OK;
    for (size_t i = 0; st == QC_OK && i < qc_dispatch_count(m->dispatch); i++) {
        const qc_dispatch_entry *e = qc_dispatch_get(m->dispatch, i);
        if (e->layer != layer_index || strcmp(e->format, "none") == 0) continue;
        /* the forced recipe carries options (group size, scheme) */
        char recipe[64];
        qc_strlcpy(recipe, e->format, sizeof recipe);
        if (forced && strncmp(forced, e->format, strlen(e->format)) == 0 &&
            (forced[strlen(e->format)] == ':' || forced[strlen(e->format)] == 0))
            qc_strlcpy(recipe, forced, sizeof recipe);
        st = prepare_format(m, L, recipe, &f32, err, errlen);
    }
    free(f32);
    return st;
}

/* ---- opening ---- */

static qc_status load_linears(qc_model *m, char *err, size_t errlen) {
    const qc_model_shape *s = &m->shape;
    m->blocks = calloc((size_t)s->n_layers, sizeof *m->blocks);
    if (!m->blocks) { qc_errf(err, errlen, "out of memory"); return QC_ERR_NOMEM; }
    size_t li = 0;
    int failed = 0;
    for (int b = 0; b < s->n_layers; b++) {
        qc_block *B = &m->blocks[b];
        char name[160];
        for (int r = 0; r < ROLE_COUNT; r++, li++) {
            qc_linear *L = &B->lin[r];
            L->info = &m->layers->layers[li];
            if (m->gguf)
                snprintf(name, sizeof name, "blk.%d.%s.weight", b, gguf_role_names[r]);
            else
                snprintf(name, sizeof name, "model.layers.%d.%s.weight", b, hf_role_names[r]);
            if (find_src(m, name, L->info->n, L->info->k, 1, &L->src, err, errlen) < 0) return QC_ERR_INVALID;
            if (r < 3) { /* qwen2 carries q/k/v biases */
                if (m->gguf)
                    snprintf(name, sizeof name, "blk.%d.%s.bias", b, gguf_role_names[r]);
                else
                    snprintf(name, sizeof name, "model.layers.%d.%s.bias", b, hf_role_names[r]);
                L->bias = load_vector(m, name, L->info->n, 0, err, errlen, &failed);
            }
        }
        const char *fmt_g[4] = {"blk.%d.attn_norm.weight", "blk.%d.ffn_norm.weight", "blk.%d.attn_q_norm.weight",
                                "blk.%d.attn_k_norm.weight"};
        const char *fmt_h[4] = {"model.layers.%d.input_layernorm.weight",
                                "model.layers.%d.post_attention_layernorm.weight",
                                "model.layers.%d.self_attn.q_norm.weight", "model.layers.%d.self_attn.k_norm.weight"};
        float **dst[4] = {&B->attn_norm, &B->ffn_norm, &B->q_norm, &B->k_norm};
        int64_t lens[4] = {s->hidden, s->hidden, s->head_dim, s->head_dim};
        for (int v = 0; v < 4; v++) {
            snprintf(name, sizeof name, m->gguf ? fmt_g[v] : fmt_h[v], b);
            *dst[v] = load_vector(m, name, lens[v], v < 2, err, errlen, &failed);
        }
        if (strcmp(s->model_type, "qwen3") == 0 && (!B->q_norm || !B->k_norm) && !failed) {
            qc_errf(err, errlen, "%s: qwen3 block %d lacks q_norm/k_norm", m->path, b);
            return QC_ERR_INVALID;
        }
        if (failed) return QC_ERR_INVALID;
    }
    m->output_norm = load_vector(m, m->gguf ? "output_norm.weight" : "model.norm.weight", s->hidden, 1, err, errlen,
                                 &failed);
    if (failed) return QC_ERR_INVALID;
    /* embedding, and the head (tied to it when the file has no separate one) */
    qc_tensor_src emb;
    if (find_src(m, m->gguf ? "token_embd.weight" : "model.embed_tokens.weight", s->vocab, s->hidden, 1, &emb, err,
                 errlen) < 0)
        return QC_ERR_INVALID;
    m->tok_embd = malloc(sizeof(float) * (size_t)s->vocab * (size_t)s->hidden);
    if (!m->tok_embd) { qc_errf(err, errlen, "out of memory for the embedding"); return QC_ERR_NOMEM; }
    qc_status st = src_to_f32(&emb, m->tok_embd, err, errlen);
    if (st != QC_OK) return st;
    m->lm_head.info = &m->layers->layers[li];
    int head = s->tied_embeddings ? 0 : find_src(m, m->gguf ? "output.weight" : "lm_head.weight", s->vocab,
                                                 s->hidden, 0, &m->lm_head.src, err, errlen);
    if (head < 0) return QC_ERR_INVALID;
    if (head == 0) m->lm_head.src = emb; /* tied */
    return QC_OK;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

qc_model *qc_model_open(qc_runtime *rt, const qc_model_options *opt, char *err, size_t errlen) {
    qc_model_options o = {0};
    if (opt) memcpy(&o, opt, opt->struct_size && opt->struct_size < sizeof o ? opt->struct_size : sizeof o);
    if (!o.path) { qc_errf(err, errlen, "no model path given"); return NULL; }
    qc_model *m = calloc(1, sizeof *m);
    if (!m) { qc_errf(err, errlen, "out of memory"); return NULL; }
    m->rt = rt;
    qc_strlcpy(m->path, o.path, sizeof m->path);
    char config_path[1100] = "";
    qc_policy *fixed = NULL;
    if (is_dir(o.path)) {
        snprintf(config_path, sizeof config_path, "%s/config.json", o.path);
        if (qc_model_shape_load(config_path, &m->shape, err, errlen) != QC_OK) goto fail;
        m->st = qc_safetensors_open(o.path, err, errlen);
        if (!m->st) goto fail;
        m->rope = QC_ROPE_HALVES;
        char tok_path[1100];
        snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", o.path);
        if (access(tok_path, R_OK) == 0) {
            m->tok = qc_tokenizer_from_json(tok_path, err, errlen);
            if (!m->tok) goto fail;
        }
    } else {
        m->gguf = qc_gguf_open(o.path, err, errlen);
        if (!m->gguf) goto fail;
        if (shape_from_gguf(m, err, errlen) != QC_OK) goto fail;
        m->tok = qc_tokenizer_from_gguf(m->gguf, err, errlen);
        if (!m->tok) goto fail;
    }
    if (rope_setup(m, config_path, err, errlen) != QC_OK) goto fail;
    m->layers = qc_model_linear_layers(&m->shape);
    if (!m->layers) { qc_errf(err, errlen, "out of memory"); goto fail; }
    if (load_linears(m, err, errlen) != QC_OK) goto fail;

    /* the dispatch table decides which formats each layer needs */
    qc_policy *pol = o.policy;
    if (o.format) {
        char name[32], scheme[32], src[256];
        uint32_t g;
        parse_recipe(o.format, name, sizeof name, &g, scheme, sizeof scheme);
        if (!qc_format_find(rt, name)) {
            qc_errf(err, errlen, "--format %s: no registered format '%s'", o.format, name);
            goto fail;
        }
        snprintf(src, sizeof src,
                 "return { choose = function(q) return '%s' end, prepare = function() return { '%s' } end }", name,
                 name);
        fixed = qc_policy_open_string(src, strlen(src), o.format, NULL, err, errlen);
        if (!fixed) goto fail;
        pol = fixed;
    }
    qc_policy_device dev = {.name = "cpu"};
    qc_dispatch_options dopt = {.struct_size = sizeof dopt, .gpu = 0, .device = &dev};
    m->dispatch = qc_dispatch_build(rt, pol, m->layers, &dopt, err, errlen);
    if (!m->dispatch) goto fail;
    for (int b = 0; b < m->shape.n_layers; b++)
        for (int r = 0; r < ROLE_COUNT; r++)
            if (prepare_layer(m, &m->blocks[b].lin[r], (size_t)(b * ROLE_COUNT + r), o.format, err, errlen) != QC_OK)
                goto fail;
    if (prepare_layer(m, &m->lm_head, (size_t)m->shape.n_layers * ROLE_COUNT, o.format, err, errlen) != QC_OK)
        goto fail;

    /* KV cache */
    qc_strlcpy(m->kv_format, o.kv_format ? o.kv_format : "bf16", sizeof m->kv_format);
    if (strcmp(m->kv_format, "bf16") != 0) {
        const qc_format_desc *kf = qc_format_find(m->rt, m->kv_format);
        char wid[64], rid[64];
        snprintf(wid, sizeof wid, "%s.write_ref", m->kv_format);
        snprintf(rid, sizeof rid, "%s.read_ref", m->kv_format);
        m->kv_write_ref = kf && kf->kind == QC_FORMAT_KV_CACHE ? qc_kernel_find(m->rt, wid) : NULL;
        m->kv_read_ref = kf && kf->kind == QC_FORMAT_KV_CACHE ? qc_kernel_find(m->rt, rid) : NULL;
        if (!m->kv_write_ref || !m->kv_read_ref || !m->kv_write_ref->reference || !m->kv_read_ref->reference) {
            qc_errf(err, errlen, "KV cache format '%s': %s", m->kv_format,
                    !kf || kf->kind != QC_FORMAT_KV_CACHE ? "not a registered KV-cache format"
                                                          : "no C reference write_ref/read_ref kernels for the CPU");
            goto fail;
        }
    }
    m->max_context = o.max_context > 0 ? o.max_context : (m->shape.max_positions < 4096 ? m->shape.max_positions : 4096);
    size_t kv_elems = (size_t)m->shape.n_layers * (size_t)m->max_context * (size_t)m->shape.n_kv_heads *
                      (size_t)m->shape.head_dim;
    m->k_cache = malloc(kv_elems * sizeof(float));
    m->v_cache = malloc(kv_elems * sizeof(float));
    if (!m->k_cache || !m->v_cache) {
        qc_errf(err, errlen, "out of memory for a KV cache of %d positions (%zu MiB)", m->max_context,
                kv_elems * 8 >> 20);
        goto fail;
    }
    m->kv_bytes_resident = kv_elems * 2 * (m->kv_write_ref ? 1 : 2); /* 8-bit or bf16 K and V */
    m->threads = o.threads;
    const char *trace = getenv("QCORE_TRACE");
    if (trace && *trace) m->trace = qc_trace_open(trace);
    qc_policy_close(fixed);
    return m;
fail:
    qc_policy_close(fixed);
    qc_model_close(m);
    return NULL;
}

static void free_linear(qc_linear *L) {
    for (int i = 0; i < L->n_prep; i++) {
        release_packed(L->prep[i].fmt, &L->prep[i].pw);
        free(L->prep[i].deq);
    }
    free(L->bias);
}

void qc_model_close(qc_model *m) {
    if (!m) return;
    qc_trace_close(m->trace);
    if (m->blocks) {
        for (int b = 0; b < m->shape.n_layers; b++) {
            qc_block *B = &m->blocks[b];
            for (int r = 0; r < ROLE_COUNT; r++) free_linear(&B->lin[r]);
            free(B->attn_norm), free(B->ffn_norm), free(B->q_norm), free(B->k_norm);
        }
        free(m->blocks);
    }
    free_linear(&m->lm_head);
    free(m->tok_embd);
    free(m->output_norm);
    free(m->inv_freq);
    free(m->k_cache), free(m->v_cache);
    qc_cpu_free_scratch(m);
    qc_dispatch_free(m->dispatch);
    qc_layer_list_free(m->layers);
    qc_tokenizer_free(m->tok);
    if (m->gguf) qc_gguf_close(m->gguf);
    if (m->st) qc_safetensors_close(m->st);
    free(m);
}

const qc_model_shape *qc_model_shape_of(const qc_model *m) { return &m->shape; }
const qc_dispatch *qc_model_dispatch(const qc_model *m) { return m->dispatch; }
const qc_layer_list *qc_model_layers(const qc_model *m) { return m->layers; }
struct qc_tokenizer *qc_model_tokenizer(const qc_model *m) { return m->tok; }
void qc_model_reset(qc_model *m) { m->pos = 0; }
const char *qc_model_kv_format(const qc_model *m) { return m->kv_format; }
size_t qc_model_position(const qc_model *m) { return m->pos; }
size_t qc_model_kernel_calls(const qc_model *m) { return m->kernel_calls; }

qc_status qc_model_forward(qc_model *m, const int32_t *tokens, size_t n, float *logits, int all_logits, char *err,
                           size_t errlen) {
    return qc_cpu_forward(m, tokens, n, logits, all_logits, err, errlen);
}

/* ---- reports ---- */

void qc_model_print_memory(const qc_model *m, void *file) {
    FILE *f = file;
    size_t by_cat[QC_MEM_COUNT_] = {0}, deq = 0, logical = 0;
    const qc_model_shape *s = &m->shape;
    size_t n_lin = (size_t)s->n_layers * ROLE_COUNT + 1;
    for (size_t i = 0; i < n_lin; i++) {
        const qc_linear *L = i + 1 < n_lin ? &m->blocks[i / ROLE_COUNT].lin[i % ROLE_COUNT] : &m->lm_head;
        for (int p = 0; p < L->n_prep; p++) {
            const qc_packed_weight *pw = &L->prep[p].pw;
            for (uint32_t b = 0; b < pw->n_buffers; b++)
                if ((unsigned)pw->buffers[b].category < QC_MEM_COUNT_) by_cat[pw->buffers[b].category] += pw->buffers[b].bytes;
            logical += (size_t)((double)L->src.n * (double)L->src.k * L->prep[p].fmt->bits_per_weight / 8);
            deq += (size_t)(L->src.n * L->src.k) * sizeof(float);
        }
    }
    size_t emb = (size_t)s->vocab * (size_t)s->hidden * sizeof(float);
    fprintf(f, "memory (resident bytes, CPU reference):\n");
    for (int c = 0; c < QC_MEM_COUNT_; c++)
        if (by_cat[c]) fprintf(f, "  %-12s %10.2f MiB\n", qc_mem_category_name((qc_mem_category)c), by_cat[c] / 1048576.0);
    fprintf(f, "  %-12s %10.2f MiB  (logical, at the formats' nominal bits)\n", "(linear)", logical / 1048576.0);
    fprintf(f, "  %-12s %10.2f MiB  (%d positions, %s)\n", "kv", m->kv_bytes_resident / 1048576.0, m->max_context,
            m->kv_format);
    fprintf(f, "  %-12s %10.2f MiB  (f32 embedding table)\n", "embedding", emb / 1048576.0);
    fprintf(f, "  %-12s %10.2f MiB  (f32 dequantized weights for the BLAS path)\n", "cpu cache", deq / 1048576.0);
}

void qc_model_print_formats(const qc_model *m, qc_phase phase, int64_t batch, void *file) {
    FILE *f = file;
    const qc_layer_list *L = m->layers;
    static const char *roles[] = {"attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up", "mlp.down", "lm_head"};
    for (int r = 0; r < 8; r++) {
        char seen[8][32];
        int counts[8] = {0}, ns = 0;
        for (size_t i = 0; i < L->n; i++) {
            if (strcmp(L->layers[i].role, roles[r]) != 0) continue;
            const qc_dispatch_entry *e = qc_dispatch_lookup(m->dispatch, i, phase, batch);
            if (!e) continue;
            int k = 0;
            while (k < ns && strcmp(seen[k], e->format) != 0) k++;
            if (k == ns && ns < 8) qc_strlcpy(seen[ns++], e->format, sizeof seen[0]);
            if (k < 8) counts[k]++;
        }
        fprintf(f, "%s%s", r ? ", " : "", roles[r]);
        for (int k = 0; k < ns; k++) fprintf(f, "%s%s%s x%d", k ? " +" : " ", seen[k], "", counts[k]);
    }
    fprintf(f, "\n");
}

/* ---- run manifest ---- */

#ifndef QC_GIT_COMMIT
#define QC_GIT_COMMIT "unknown"
#endif

/* What was prepared for a linear, as one comparable line. */
static void recipe_key(const qc_linear *L, char *buf, size_t len) {
    qc_sbuf b = {0};
    for (int p = 0; p < L->n_prep; p++)
        qc_sbuf_printf(&b, "%s/%u/%u/%d;", L->prep[p].fmt->name, L->prep[p].pw.scheme, L->prep[p].pw.group_size,
                       L->prep[p].imported);
    qc_strlcpy(buf, b.data ? b.data : "", len);
    qc_sbuf_free(&b);
}

static json_t *linear_formats_json(const qc_model *m, const qc_linear *L) {
    json_t *formats = json_array();
    for (int p = 0; p < L->n_prep; p++) {
        const qc_prepared *pp = &L->prep[p];
        const qc_format_desc *f = pp->fmt;
        json_array_append_new(
            formats, json_pack("{s:s,s:s,s:i,s:i,s:s,s:s,s:s,s:s,s:b,s:i,s:f}", "format", f->name, "plugin",
                               qc_format_plugin(m->rt, f->name), "scheme", (int)pp->pw.scheme, "group_size",
                               (int)pp->pw.group_size, "weights", qc_dtype_name(f->weight_dtype), "activations",
                               qc_dtype_name(f->act_dtype), "accumulator", qc_dtype_name(f->accum_dtype), "kernel",
                               pp->kernel ? pp->kernel->id : "", "imported_exactly", pp->imported, "pack_version",
                               (int)pp->pw.pack_version, "logical_bits", pp->pw.logical_bits));
    }
    return formats;
}

/* One row per run of consecutive blocks whose layer of a role was prepared
 * the same way, then the head. */
static json_t *recipe_json(const qc_model *m) {
    json_t *rows = json_array();
    for (int r = 0; r < ROLE_COUNT; r++) {
        for (int b = 0; b < m->shape.n_layers;) {
            char key[256], next[256];
            const qc_linear *L = &m->blocks[b].lin[r];
            recipe_key(L, key, sizeof key);
            int e = b + 1;
            for (; e < m->shape.n_layers; e++) {
                recipe_key(&m->blocks[e].lin[r], next, sizeof next);
                if (strcmp(key, next) != 0) break;
            }
            char layers[48];
            snprintf(layers, sizeof layers, e - 1 > b ? "blk.%d-%d" : "blk.%d", b, e - 1);
            json_array_append_new(rows, json_pack("{s:s,s:s,s:I,s:I,s:o}", "layers", layers, "role", L->info->role,
                                                  "n", (json_int_t)L->src.n, "k", (json_int_t)L->src.k, "formats",
                                                  linear_formats_json(m, L)));
            b = e;
        }
    }
    json_array_append_new(rows, json_pack("{s:s,s:s,s:I,s:I,s:o}", "layers", "lm_head", "role", "lm_head", "n",
                                          (json_int_t)m->lm_head.src.n, "k", (json_int_t)m->lm_head.src.k, "formats",
                                          linear_formats_json(m, &m->lm_head)));
    return rows;
}

qc_status qc_model_write_manifest(const qc_model *m, const char *path, const char *command, const char *policy_path,
                                  const char *results_json, char *err, size_t errlen) {
    char sha[65] = "", psha[65] = "";
    json_t *files = json_array();
    if (m->gguf) {
        if (qc_sha256_file(m->path, sha, err, errlen) != QC_OK) {
            json_decref(files);
            return QC_ERR_IO;
        }
        json_array_append_new(files, json_pack("{s:s,s:s}", "path", m->path, "sha256", sha));
    } else {
        /* every distinct shard, hashed once */
        for (size_t i = 0; i < qc_safetensors_count(m->st); i++) {
            const char *fp = qc_safetensors_at(m->st, i)->file;
            int seen = 0;
            for (size_t j = 0; fp && j < i && !seen; j++) seen = qc_safetensors_at(m->st, j)->file == fp ||
                                                               strcmp(qc_safetensors_at(m->st, j)->file, fp) == 0;
            if (fp && !seen && qc_sha256_file(fp, sha, err, errlen) == QC_OK)
                json_array_append_new(files, json_pack("{s:s,s:s}", "path", fp, "sha256", sha));
        }
    }
    if (policy_path) qc_sha256_file(policy_path, psha, err, errlen);
    qc_device_info dev;
    qc_device_probe(&dev);
    char arch[192];
    if (dev.available)
        snprintf(arch, sizeof arch, "sm_%d (%s)", dev.sm, dev.name);
    else
        qc_strlcpy(arch, "cpu reference", sizeof arch);
    json_t *plugins = json_array();
    for (size_t i = 0; i < qc_plugin_count(m->rt); i++) {
        qc_plugin_info pi;
        qc_plugin_get(m->rt, i, &pi);
        json_array_append_new(plugins, json_pack("{s:s,s:s,s:s,s:i}", "id", pi.id, "version", pi.version, "file",
                                                 pi.path, "abi", (int)pi.abi_version));
    }
    json_t *fallbacks = json_array();
    for (size_t i = 0; i < qc_dispatch_count(m->dispatch); i++) {
        const qc_dispatch_entry *e = qc_dispatch_get(m->dispatch, i);
        if (!e->fallback.code[0]) continue;
        json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "layer", m->layers->layers[e->layer].name, "phase",
                              qc_phase_name(e->phase), "batch", (json_int_t)e->batch, "wanted", e->wanted, "used",
                              e->format, "code", e->fallback.code, "reason", e->fallback.text);
        json_array_append_new(fallbacks, o);
    }
    char nvrtc[32], driver[32];
    snprintf(nvrtc, sizeof nvrtc, dev.nvrtc_available ? "%d.%d" : "absent", dev.nvrtc_major, dev.nvrtc_minor);
    snprintf(driver, sizeof driver, dev.available ? "%d" : "absent", dev.driver_version);
    json_t *root = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:o,s:s},s:o,s:o,s:{s:s,s:s,s:s},s:{s:s,s:s,s:i,s:o,s:s,s:s,s:s,s:s},s:{s:s,s:s,s:s},s:o,"
        "s:{s:s},s:{s:s}}",
        "manifest", "qcore run manifest 1", "command", command ? command : "",
        "model", "id", m->path, "architecture", m->shape.model_type, "files", files, "tokenizer",
        m->gguf ? "gguf metadata" : "tokenizer.json",
        "recipe", recipe_json(m),
        "dispatch", (json_t *)qc_manifest_dispatch_json(m->dispatch),
        "numerics", "norm_softmax_logits", "f32", "kv_cache", m->kv_format, "residual", "f32",
        "runtime", "engine", "qcore " QCORE_VERSION_STRING, "engine_commit", QC_GIT_COMMIT, "plugin_abi",
        (int)QC_PLUGIN_ABI_VERSION, "plugins", plugins, "gpu_arch", arch, "backend", "cpu reference", "nvrtc", nvrtc,
        "cuda_driver_api", driver,
        "policy", "file", policy_path ? policy_path : "(none)", "sha256", psha,
        "fallback_policy", "fall back to the policy's prepared formats, then bf16; every fallback listed",
        "fallbacks", fallbacks,
        "quality", "report", "docs/quality.md",
        "performance", "report", "docs/perf.md");
    if (!root) {
        qc_errf(err, errlen, "out of memory building the manifest");
        return QC_ERR_NOMEM;
    }
    if (results_json) {
        json_t *r = json_loads(results_json, 0, NULL);
        if (r) json_object_set_new(root, "results", r);
    }
    int rc = json_dump_file(root, path, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    json_decref(root);
    if (rc != 0) {
        qc_errf(err, errlen, "%s: cannot write the manifest: %s", path, strerror(errno));
        return QC_ERR_IO;
    }
    return QC_OK;
}

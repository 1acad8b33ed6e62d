/* qc_model_config.c - the shape of a Llama-family model from its HF config.json. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_internal.h"
#include "qc_util.h"

#define CONFIG_MAX_BYTES (4u << 20)

/* An integer field within [lo, hi]; `def` when absent (def < 0: required). */
static int get_int(json_t *root, const char *key, long long def, long long lo, long long hi, int *out,
                   const char *path, char *err, size_t errlen) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (def < 0) {
            qc_errf(err, errlen, "%s: missing \"%s\"", path, key);
            return -1;
        }
        *out = (int)def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        qc_errf(err, errlen, "%s: \"%s\" must be an integer in [%lld, %lld]", path, key, lo, hi);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

qc_status qc_model_shape_load(const char *path, qc_model_shape *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    size_t len;
    char *text = qc_read_file(path, CONFIG_MAX_BYTES, &len, err, errlen);
    if (!text) return QC_ERR_IO;
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!root || !json_is_object(root)) {
        if (root)
            qc_errf(err, errlen, "%s: top level is not a JSON object", path);
        else
            qc_errf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, je.text);
        json_decref(root);
        return QC_ERR_INVALID;
    }
    qc_status st = QC_ERR_INVALID;
    const char *mt = json_string_value(json_object_get(root, "model_type"));
    json_t *archs = json_object_get(root, "architectures");
    const char *arch = json_string_value(json_array_get(archs, 0));
    qc_strlcpy(m->model_type, mt ? mt : "llama", sizeof m->model_type);
    qc_strlcpy(m->architecture, arch ? arch : "", sizeof m->architecture);
    static const char *known[] = {"llama", "mistral", "qwen2", "qwen3", NULL};
    int ok = 0;
    for (const char **k = known; *k; k++) ok |= strcmp(*k, m->model_type) == 0;
    if (!ok) {
        qc_errf(err, errlen, "%s: model_type \"%s\" is not a supported Llama-family architecture (llama, mistral, "
                "qwen2, qwen3)", path, m->model_type);
        goto out;
    }
    if (get_int(root, "hidden_size", -1, 1, 65536, &m->hidden, path, err, errlen) ||
        get_int(root, "intermediate_size", -1, 1, 1 << 20, &m->intermediate, path, err, errlen) ||
        get_int(root, "num_hidden_layers", -1, 1, 1024, &m->n_layers, path, err, errlen) ||
        get_int(root, "num_attention_heads", -1, 1, 1024, &m->n_heads, path, err, errlen) ||
        get_int(root, "num_key_value_heads", m->n_heads, 1, 1024, &m->n_kv_heads, path, err, errlen) ||
        get_int(root, "head_dim", m->hidden / m->n_heads, 1, 1024, &m->head_dim, path, err, errlen) ||
        get_int(root, "vocab_size", -1, 1, 1 << 22, &m->vocab, path, err, errlen) ||
        get_int(root, "max_position_embeddings", 4096, 1, 1 << 24, &m->max_positions, path, err, errlen))
        goto out;
    if (!json_object_get(root, "head_dim") && m->hidden % m->n_heads) {
        qc_errf(err, errlen, "%s: hidden_size %d is not a multiple of num_attention_heads %d (and no head_dim)",
                path, m->hidden, m->n_heads);
        goto out;
    }
    if (m->head_dim < 1 || m->head_dim % 2) {
        qc_errf(err, errlen, "%s: head_dim %d must be a positive even number", path, m->head_dim);
        goto out;
    }
    if (m->n_heads % m->n_kv_heads) {
        qc_errf(err, errlen, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path,
                m->n_heads, m->n_kv_heads);
        goto out;
    }
    m->tied_embeddings = json_is_true(json_object_get(root, "tie_word_embeddings"));
    /* transformers >= 5 writes rope_theta inside "rope_parameters" */
    json_t *rt = json_object_get(root, "rope_theta");
    if (!json_is_number(rt)) rt = json_object_get(json_object_get(root, "rope_parameters"), "rope_theta");
    m->rope_theta = json_is_number(rt) ? json_number_value(rt) : 10000.0;
    if (!(m->rope_theta > 0)) {
        qc_errf(err, errlen, "%s: rope_theta %g must be positive", path, m->rope_theta);
        goto out;
    }
    json_t *eps = json_object_get(root, "rms_norm_eps");
    m->rms_eps = json_is_number(eps) ? json_number_value(eps) : 1e-6;
    st = QC_OK;
out:
    json_decref(root);
    return st;
}

/* An empty list with room for n layers (internal; NULL when out of memory). */
qc_layer_list *qc_layer_list_alloc(size_t n) {
    qc_layer_list *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->layers = calloc(n, sizeof *l->layers);
    l->names = calloc(n, sizeof *l->names);
    if (!l->layers || !l->names) {
        qc_layer_list_free(l);
        return NULL;
    }
    return l;
}

/* Append one linear: `index` its block (-1 for lm_head), name "blk.<index>.<part>" or "lm_head" (internal). */
void qc_layer_list_add(qc_layer_list *l, int index, const char *part, const char *role, int n_layers, int64_t n,
                       int64_t k) {
    qc_policy_layer *L = &l->layers[l->n];
    if (index >= 0)
        snprintf(l->names[l->n], sizeof l->names[0], "blk.%d.%s", index, part);
    else
        snprintf(l->names[l->n], sizeof l->names[0], "%s", part);
    L->name = l->names[l->n];
    L->role = role;
    L->index = index;
    L->n_layers = n_layers;
    L->n = n;
    L->k = k;
    l->n++;
}

qc_layer_list *qc_model_linear_layers(const qc_model_shape *m) {
    qc_layer_list *l = qc_layer_list_alloc((size_t)m->n_layers * 7 + 1);
    if (!l) return NULL;
    static const char *roles[] = {"attn.q", "attn.k", "attn.v", "attn.o", "mlp.gate", "mlp.up", "mlp.down"};
    int64_t q = (int64_t)m->n_heads * m->head_dim, kv = (int64_t)m->n_kv_heads * m->head_dim;
    for (int b = 0; b < m->n_layers; b++)
        for (int r = 0; r < 7; r++) {
            int64_t shape[7][2] = {{q, m->hidden},          {kv, m->hidden},           {kv, m->hidden},
                                   {m->hidden, q},          {m->intermediate, m->hidden},
                                   {m->intermediate, m->hidden}, {m->hidden, m->intermediate}};
            qc_layer_list_add(l, b, roles[r], roles[r], m->n_layers, shape[r][0], shape[r][1]);
        }
    qc_layer_list_add(l, -1, "lm_head", "lm_head", m->n_layers, m->vocab, m->hidden);
    return l;
}

void qc_layer_list_free(qc_layer_list *l) {
    if (!l) return;
    free(l->layers);
    free(l->names);
    free(l);
}

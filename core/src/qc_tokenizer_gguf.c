/* qc_tokenizer_gguf.c - build a tokenizer from GGUF metadata (tokenizer.ggml.* keys) through qc_tokenizer_from_spec. */
#include <stdlib.h>
#include <string.h>

#include "qc_gguf.h"
#include "qc_tokenizer.h"
#include "qc_util.h"

/* A string value as a NUL-terminated copy (NULL when absent). */
static char *dup_str(const qc_gguf *g, const char *key, size_t *len_out) {
    size_t len;
    const char *s = qc_gguf_get_str(g, key, &len);
    if (!s) return NULL;
    char *c = malloc(len + 1);
    if (!c) return NULL;
    memcpy(c, s, len);
    c[len] = 0;
    if (len_out) *len_out = len;
    return c;
}

/* Token ids are u32 in GGUF; absent or out of int32 range -> -1. */
static int32_t get_id(const qc_gguf *g, const char *key) {
    uint64_t v;
    if (qc_gguf_get_u64(g, key, &v)) return -1;
    if (v > INT32_MAX) {
        qc_log(QC_LOG_WARN, "tokenizer: %s = %llu is out of range; ignored", key, (unsigned long long)v);
        return -1;
    }
    return (int32_t)v;
}

static const qc_gguf_kv *string_array(const qc_gguf *g, const char *key, int required, char *err, size_t errlen,
                                      int *bad) {
    const qc_gguf_kv *kv = qc_gguf_find(g, key);
    *bad = 0;
    if (!kv) {
        if (required) {
            qc_errf(err, errlen, "GGUF has no %s", key);
            *bad = 1;
        }
        return NULL;
    }
    if ((int)kv->type != 9 || (int)kv->arr_type != 8) {
        qc_errf(err, errlen, "GGUF %s is not an array of strings", key);
        *bad = 1;
        return NULL;
    }
    return kv;
}

qc_tokenizer *qc_tokenizer_from_gguf(const qc_gguf *g, char *err, size_t errlen) {
    qc_tokenizer_spec spec;
    memset(&spec, 0, sizeof(spec));
    qc_tokenizer *t = NULL;
    char *model = dup_str(g, "tokenizer.ggml.model", NULL);
    char *pre = dup_str(g, "tokenizer.ggml.pre", NULL);
    const char **tokens = NULL, **merges = NULL;
    size_t *token_lens = NULL, *merge_lens = NULL;
    int32_t *types = NULL;
    int bad;

    if (!model) {
        qc_errf(err, errlen, "GGUF has no tokenizer.ggml.model");
        goto done;
    }
    const qc_gguf_kv *tk = string_array(g, "tokenizer.ggml.tokens", 1, err, errlen, &bad);
    if (bad) goto done;
    const qc_gguf_kv *mk = string_array(g, "tokenizer.ggml.merges", 0, err, errlen, &bad);
    if (bad) goto done;
    size_t n = (size_t)tk->arr_len, nm = mk ? (size_t)mk->arr_len : 0;
    tokens = calloc(n ? n : 1, sizeof(*tokens));
    token_lens = calloc(n ? n : 1, sizeof(*token_lens));
    merges = calloc(nm ? nm : 1, sizeof(*merges));
    merge_lens = calloc(nm ? nm : 1, sizeof(*merge_lens));
    if (!tokens || !token_lens || !merges || !merge_lens) {
        qc_errf(err, errlen, "out of memory for %zu tokens", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        tokens[i] = qc_gguf_arr_str(g, tk, i, &token_lens[i]);
        if (!tokens[i]) {
            qc_errf(err, errlen, "GGUF tokenizer.ggml.tokens[%zu] is unreadable", i);
            goto done;
        }
    }
    for (size_t i = 0; i < nm; i++) {
        merges[i] = qc_gguf_arr_str(g, mk, i, &merge_lens[i]);
        if (!merges[i]) {
            qc_errf(err, errlen, "GGUF tokenizer.ggml.merges[%zu] is unreadable", i);
            goto done;
        }
    }
    const qc_gguf_kv *ty = qc_gguf_find(g, "tokenizer.ggml.token_type");
    if (ty) {
        /* i32 in every converter; u32 accepted since the values are small */
        if ((int)ty->type != 9 || ((int)ty->arr_type != 5 && (int)ty->arr_type != 4) || ty->arr_len != n) {
            qc_errf(err, errlen, "GGUF tokenizer.ggml.token_type must be %zu 32-bit integers", n);
            goto done;
        }
        types = calloc(n ? n : 1, sizeof(*types));
        if (!types) {
            qc_errf(err, errlen, "out of memory");
            goto done;
        }
        memcpy(types, ty->arr_data, n * sizeof(int32_t)); /* the file's elements may be unaligned */
    }
    const qc_gguf_kv *ab = qc_gguf_find(g, "tokenizer.ggml.add_bos_token");

    spec.model = model;
    spec.pre = pre;
    spec.n_tokens = n;
    spec.tokens = tokens;
    spec.token_lens = token_lens;
    spec.token_types = types;
    spec.n_merges = nm;
    spec.merges = merges;
    spec.merge_lens = merge_lens;
    spec.bos = get_id(g, "tokenizer.ggml.bos_token_id");
    spec.eos = get_id(g, "tokenizer.ggml.eos_token_id");
    spec.unk = get_id(g, "tokenizer.ggml.unknown_token_id");
    spec.pad = get_id(g, "tokenizer.ggml.padding_token_id");
    spec.eot = get_id(g, "tokenizer.ggml.eot_token_id");
    spec.add_bos = ab && (int)ab->type == 7 && ab->num.b;
    spec.chat_template = qc_gguf_get_str(g, "tokenizer.chat_template", &spec.chat_template_len);
    if (spec.chat_template && !spec.chat_template_len) spec.chat_template = NULL;
    t = qc_tokenizer_from_spec(&spec, err, errlen);
done:
    free(model);
    free(pre);
    free(tokens);
    free(token_lens);
    free(merges);
    free(merge_lens);
    free(types);
    return t;
}

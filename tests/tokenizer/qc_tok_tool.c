/* qc_tok_tool.c - command-line driver of the tokenizer for the Python oracle test (encode, decode, chat, info). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_tokenizer.h"
#include "qc_util.h"
#ifdef QC_TOK_HAVE_GGUF
#include "qc_gguf.h"
#endif

static void usage(void) {
    fprintf(stderr,
            "usage: qc_tok_tool (--json F | --json-memory F | --spec F | --gguf F) CMD ...\n"
            "  info                      vocab size, ids, template and pre-tokenizer names\n"
            "  encode TEXT [special] [bos] ids of the whole file on one line\n"
            "  lines TEXT [special]      ids of each line (split at \\n) on its own line\n"
            "  roundtrip TEXT            decode(encode(x)) == x for the file and each line\n"
            "  decode IDS [skip]         text of whitespace-separated ids\n"
            "  pieces                    every token's piece, hex, one per line\n"
            "  chat MSGS.json [gen]      render [{role, content}] with the model's template\n");
}

static char *slurp(const char *path, size_t *len) {
    char err[256];
    char *s = qc_read_file(path, (size_t)1 << 30, len, err, sizeof(err));
    if (!s) fprintf(stderr, "%s\n", err);
    return s;
}

/* The spec file: the GGUF metadata a test wrote as JSON (see test_tokenizer_oracle.py). */
static qc_tokenizer *load_spec(const char *path, char *err, size_t errlen) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        qc_errf(err, errlen, "%s: %s", path, je.text);
        return NULL;
    }
    json_t *toks = json_object_get(root, "tokens"), *types = json_object_get(root, "token_types");
    json_t *merges = json_object_get(root, "merges");
    size_t n = json_array_size(toks), nm = json_array_size(merges);
    const char **tv = calloc(n + 1, sizeof(*tv)), **mv = calloc(nm + 1, sizeof(*mv));
    size_t *tl = calloc(n + 1, sizeof(*tl)), *ml = calloc(nm + 1, sizeof(*ml));
    int32_t *ty = types ? calloc(n + 1, sizeof(*ty)) : NULL;
    for (size_t i = 0; i < n; i++) {
        tv[i] = json_string_value(json_array_get(toks, i));
        tl[i] = json_string_length(json_array_get(toks, i));
        if (ty) ty[i] = (int32_t)json_integer_value(json_array_get(types, i));
    }
    for (size_t i = 0; i < nm; i++) {
        mv[i] = json_string_value(json_array_get(merges, i));
        ml[i] = json_string_length(json_array_get(merges, i));
    }
    qc_tokenizer_spec spec = {0};
    spec.model = json_string_value(json_object_get(root, "model"));
    spec.pre = json_string_value(json_object_get(root, "pre"));
    spec.n_tokens = n;
    spec.tokens = tv;
    spec.token_lens = tl;
    spec.token_types = ty;
    spec.n_merges = nm;
    spec.merges = mv;
    spec.merge_lens = ml;
    json_t *v;
    spec.bos = json_is_integer(v = json_object_get(root, "bos")) ? (int32_t)json_integer_value(v) : -1;
    spec.eos = json_is_integer(v = json_object_get(root, "eos")) ? (int32_t)json_integer_value(v) : -1;
    spec.unk = json_is_integer(v = json_object_get(root, "unk")) ? (int32_t)json_integer_value(v) : -1;
    spec.pad = json_is_integer(v = json_object_get(root, "pad")) ? (int32_t)json_integer_value(v) : -1;
    spec.eot = json_is_integer(v = json_object_get(root, "eot")) ? (int32_t)json_integer_value(v) : -1;
    spec.add_bos = json_is_true(json_object_get(root, "add_bos"));
    v = json_object_get(root, "chat_template");
    if (json_is_string(v)) {
        spec.chat_template = json_string_value(v);
        spec.chat_template_len = json_string_length(v);
    }
    qc_tokenizer *t = qc_tokenizer_from_spec(&spec, err, errlen);
    free(tv);
    free(mv);
    free(tl);
    free(ml);
    free(ty);
    json_decref(root);
    return t;
}

static int print_ids(const qc_tokenizer *t, const char *s, size_t n, int bos, int special) {
    int32_t *ids;
    size_t nid;
    char err[256];
    if (qc_tokenizer_encode(t, s, n, bos, special, &ids, &nid, err, sizeof(err))) {
        fprintf(stderr, "encode: %s\n", err);
        return -1;
    }
    for (size_t i = 0; i < nid; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    putchar('\n');
    free(ids);
    return 0;
}

/* decode(encode(x)) == x; prints the first difference. */
static int roundtrip(const qc_tokenizer *t, const char *s, size_t n, const char *what) {
    int32_t *ids;
    size_t nid;
    char err[256];
    if (qc_tokenizer_encode(t, s, n, 0, 1, &ids, &nid, err, sizeof(err))) {
        printf("%s: encode failed: %s\n", what, err);
        return 1;
    }
    char *back = qc_tokenizer_decode(t, ids, nid, 0);
    free(ids);
    size_t bl = back ? strlen(back) : 0, i = 0;
    while (i < n && i < bl && back[i] == s[i]) i++;
    int bad = !back || bl != n || i != n;
    if (bad) printf("%s: round trip differs at byte %zu (lengths %zu and %zu)\n", what, i, n, bl);
    free(back);
    return bad;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        usage();
        return 2;
    }
    char err[512];
    qc_tokenizer *t = NULL;
    const char *how = argv[1], *src = argv[2], *cmd = argv[3];
    if (!strcmp(how, "--json")) {
        t = qc_tokenizer_from_json(src, err, sizeof(err));
    } else if (!strcmp(how, "--json-memory")) {
        size_t len;
        char *s = slurp(src, &len);
        if (!s) return 1;
        t = qc_tokenizer_from_json_memory(s, len, err, sizeof(err));
        free(s);
    } else if (!strcmp(how, "--spec")) {
        t = load_spec(src, err, sizeof(err));
    } else if (!strcmp(how, "--gguf")) {
#ifdef QC_TOK_HAVE_GGUF
        qc_gguf *g = qc_gguf_open(src, err, sizeof(err));
        if (g) {
            t = qc_tokenizer_from_gguf(g, err, sizeof(err));
            qc_gguf_close(g);
        }
#else
        fprintf(stderr, "built without the GGUF reader\n");
        return 77;
#endif
    } else {
        usage();
        return 2;
    }
    if (!t) {
        fprintf(stderr, "load: %s\n", err);
        return 1;
    }
    int rc = 0;
    if (!strcmp(cmd, "info")) {
        const char *tn = qc_tokenizer_template_name(t);
        printf("vocab %zu\nbos %d\neos %d\neot %d\nadd_bos %d\ntemplate %s\npre %s\n", qc_tokenizer_vocab_size(t),
               (int)qc_tokenizer_bos(t), (int)qc_tokenizer_eos(t), (int)qc_tokenizer_eot(t),
               qc_tokenizer_add_bos_default(t), tn ? tn : "none", qc_tokenizer_pre_name(t));
    } else if ((!strcmp(cmd, "encode") || !strcmp(cmd, "lines") || !strcmp(cmd, "roundtrip")) && argc >= 5) {
        size_t len;
        char *s = slurp(argv[4], &len);
        if (!s) {
            qc_tokenizer_free(t);
            return 1;
        }
        int special = 0, bos = 0;
        for (int i = 5; i < argc; i++) {
            if (!strcmp(argv[i], "special")) special = 1;
            if (!strcmp(argv[i], "bos")) bos = 1;
        }
        if (!strcmp(cmd, "encode")) {
            rc = print_ids(t, s, len, bos, special) ? 1 : 0;
        } else {
            if (!strcmp(cmd, "roundtrip")) rc |= roundtrip(t, s, len, "file");
            size_t a = 0, line = 0;
            for (size_t i = 0; i <= len && !rc; i++) {
                if (i < len && s[i] != '\n') continue;
                char what[32];
                snprintf(what, sizeof(what), "line %zu", ++line);
                if (!strcmp(cmd, "lines")) rc = print_ids(t, s + a, i - a, 0, special) ? 1 : 0;
                else rc |= roundtrip(t, s + a, i - a, what);
                a = i + 1;
            }
            if (!strcmp(cmd, "roundtrip") && !rc) printf("round trip ok\n");
        }
        free(s);
    } else if (!strcmp(cmd, "decode") && argc >= 5) {
        size_t len;
        char *s = slurp(argv[4], &len);
        if (!s) {
            qc_tokenizer_free(t);
            return 1;
        }
        int32_t *ids = malloc((len / 2 + 1) * sizeof(*ids));
        size_t n = 0;
        char *p = s, *end;
        for (long v; (v = strtol(p, &end, 10)), end != p; p = end) ids[n++] = (int32_t)v;
        char *out = qc_tokenizer_decode(t, ids, n, argc >= 6 && !strcmp(argv[5], "skip"));
        fputs(out ? out : "", stdout);
        free(out);
        free(ids);
        free(s);
    } else if (!strcmp(cmd, "pieces")) {
        for (size_t i = 0; i < qc_tokenizer_vocab_size(t); i++) {
            char buf[1024];
            size_t n;
            if (qc_tokenizer_piece(t, (int32_t)i, buf, sizeof(buf), &n)) {
                printf("-\n");
                continue;
            }
            for (size_t k = 0; k < n && k < sizeof(buf); k++) printf("%02x", (unsigned char)buf[k]);
            putchar('\n');
        }
    } else if (!strcmp(cmd, "chat") && argc >= 5) {
        json_error_t je;
        json_t *msgs = json_load_file(argv[4], 0, &je);
        size_t n = json_array_size(msgs);
        qc_chat_message *m = calloc(n + 1, sizeof(*m));
        for (size_t i = 0; i < n; i++) {
            m[i].role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
            m[i].content = json_string_value(json_object_get(json_array_get(msgs, i), "content"));
        }
        char *out = qc_tokenizer_chat(t, m, n, argc >= 6 && !strcmp(argv[5], "gen"), err, sizeof(err));
        if (out) fputs(out, stdout);
        else {
            fprintf(stderr, "chat: %s\n", err);
            rc = 1;
        }
        free(out);
        free(m);
        json_decref(msgs);
    } else {
        usage();
        rc = 2;
    }
    qc_tokenizer_free(t);
    return rc;
}

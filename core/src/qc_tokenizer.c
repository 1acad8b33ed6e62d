/* qc_tokenizer.c - byte-level BPE as HF `tokenizers` does it, loaded from GGUF metadata or tokenizer.json, plus chat templates in C. */
#define _POSIX_C_SOURCE 200809L /* localtime_r */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "qc_tokenizer.h"

#include <jansson.h>
#include <limits.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qc_util.h"

/* ---- limits (hostile files must not make us allocate without bound) ---------- */

#define TOK_MAX_VOCAB (1u << 22)      /* ids */
#define TOK_MAX_MERGES (1u << 23)
#define TOK_MAX_STEPS 16              /* pre-tokenizer steps after flattening Sequences */
#define TOK_MAX_DEPTH 8               /* Sequence nesting */
#define TOK_MAX_JSON ((size_t)1 << 30)
#define TOK_MATCH_LIMIT 2000000u      /* PCRE2 backtracking budget per match */

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };
enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS };
enum { TPL_NONE, TPL_UNKNOWN, TPL_CHATML, TPL_QWEN3, TPL_LLAMA3, TPL_LLAMA31, TPL_LLAMA2, TPL_MISTRAL };

/* The regexes behind the GGUF pre-tokenizer names (the HF tokenizer.json patterns). */
static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char RE_LLAMA3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

typedef struct tok_entry {
    const char *text;  /* vocabulary text (an added token's content); NULL for an unused id */
    const char *piece; /* bytes as they appear in text */
    uint32_t len, piece_len;
    uint8_t special, added, lstrip, rstrip, single_word, normalized;
} tok_entry;

typedef struct strmap_slot {
    const char *key;
    uint32_t len;
    int32_t id;
} strmap_slot;
typedef struct strmap {
    strmap_slot *slots;
    size_t cap, n; /* cap: power of two */
} strmap;

typedef struct pair_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    uint32_t rank;
    int32_t id;
} pair_slot;
typedef struct pairmap {
    pair_slot *slots;
    size_t cap, n;
} pairmap;

typedef struct tok_step {
    int bytelevel;        /* ByteLevel: optional prefix space, then its regex when use_regex */
    int add_prefix_space;
    pcre2_code *re;       /* NULL: a literal pattern, or no split */
    char *literal;        /* Split with a String pattern */
    size_t literal_len;
    int has_literal;
    int behavior, invert;
} tok_step;

typedef struct pool_block {
    struct pool_block *next;
    size_t used, cap;
    char data[];
} pool_block;

struct qc_tokenizer {
    size_t n_vocab;
    tok_entry *tok;
    strmap model;  /* model vocabulary: text -> id */
    strmap added;  /* added tokens: content -> id */
    pairmap merges;
    int32_t byte_tok[256]; /* id of the one-char token for each byte, or -1 */

    tok_step steps[TOK_MAX_STEPS];
    size_t n_steps;
    char pre_name[160];

    int32_t unk_model;     /* unk token id; -1 none; -2 named but missing from the vocabulary */
    int fuse_unk, byte_fallback, ignore_merges;

    /* added tokens that can match: [0] on raw text, [1] on normalized text */
    int32_t *match_ids[2];
    size_t n_match[2];
    size_t bucket[2][257]; /* by first byte: match_ids[k][bucket[b] .. bucket[b+1]) */

    int32_t bos, eos, unk, pad, eot;
    int add_bos;

    int tpl;
    const char *tpl_name;
    char *tpl_system; /* chatml default system prompt, or NULL */
    char *tpl_date;   /* llama3.1 date_string default */
    int tpl_today;    /* llama3.2: the date is today's (strftime_now) */
    int tpl_tools;    /* chatml with Qwen's <tool_response> turns */

    pool_block *pool;
};

/* ---- small helpers ------------------------------------------------------- */

static void *xcalloc(size_t n, size_t sz) { return n && sz ? calloc(n, sz) : calloc(1, 1); }

static char *pool_dup(qc_tokenizer *t, const char *s, size_t n) {
    pool_block *b = t->pool;
    if (!b || b->cap - b->used < n + 1) {
        size_t cap = n + 1 > 65536 ? n + 1 : 65536;
        pool_block *nb = malloc(sizeof(*nb) + cap);
        if (!nb) return NULL;
        nb->cap = cap;
        nb->used = 0;
        nb->next = b;
        t->pool = b = nb;
    }
    char *p = b->data + b->used;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    b->used += n + 1;
    return p;
}

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int strmap_init(strmap *m, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    m->slots = xcalloc(cap, sizeof(*m->slots));
    m->cap = cap;
    m->n = 0;
    return m->slots ? 0 : -1;
}

static int strmap_put(strmap *m, const char *key, size_t len, int32_t id);

static int strmap_grow(strmap *m) {
    strmap old = *m;
    if (strmap_init(m, old.cap)) {
        *m = old;
        return -1;
    }
    for (size_t k = 0; k < old.cap; k++)
        if (old.slots[k].key) strmap_put(m, old.slots[k].key, old.slots[k].len, old.slots[k].id);
    free(old.slots);
    return 0;
}

/* Insert or overwrite (the later entry wins, as in a map built from a list). */
static int strmap_put(strmap *m, const char *key, size_t len, int32_t id) {
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m)) return -1;
    size_t mask = m->cap - 1, i = (size_t)hash_bytes(key, len) & mask;
    while (m->slots[i].key) {
        if (m->slots[i].len == len && memcmp(m->slots[i].key, key, len) == 0) {
            m->slots[i].id = id;
            return 0;
        }
        i = (i + 1) & mask;
    }
    m->slots[i].key = key;
    m->slots[i].len = (uint32_t)len;
    m->slots[i].id = id;
    m->n++;
    return 0;
}

static int32_t strmap_get(const strmap *m, const char *key, size_t len) {
    if (!m->cap) return -1;
    size_t mask = m->cap - 1, i = (size_t)hash_bytes(key, len) & mask;
    while (m->slots[i].key) {
        if (m->slots[i].len == len && memcmp(m->slots[i].key, key, len) == 0) return m->slots[i].id;
        i = (i + 1) & mask;
    }
    return -1;
}

static size_t pair_hash(uint64_t k) { return (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20); }

static int pairmap_init(pairmap *m, size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    m->slots = xcalloc(cap, sizeof(*m->slots));
    m->cap = cap;
    m->n = 0;
    return m->slots ? 0 : -1;
}

static void pairmap_put(pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = m->cap - 1, i = pair_hash(k) & mask;
    while (m->slots[i].key && m->slots[i].key != k) i = (i + 1) & mask;
    if (!m->slots[i].key) m->n++;
    m->slots[i].key = k;
    m->slots[i].rank = rank;
    m->slots[i].id = id;
}

static const pair_slot *pairmap_get(const pairmap *m, int32_t a, int32_t b) {
    uint64_t k = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t mask = m->cap - 1, i = pair_hash(k) & mask;
    while (m->slots[i].key) {
        if (m->slots[i].key == k) return &m->slots[i];
        i = (i + 1) & mask;
    }
    return NULL;
}

/* ---- UTF-8 --------------------------------------------------------------- */

/* Decode one well-formed code point at s[0..n); returns its length, 0 when ill-formed. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    if (!n) return 0;
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    uint32_t v;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        v = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        unsigned d = s[i];
        if (d < lo || d > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
        v = (v << 6) | (d & 0x3F);
    }
    *cp = v;
    return len;
}

/* Offset of the first ill-formed byte, or n when all is well-formed. */
static size_t utf8_check(const char *s, size_t n) {
    size_t i = 0;
    uint32_t cp;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (!l) return i;
        i += l;
    }
    return n;
}

static size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Unicode White_Space (what Rust's \s and char::is_whitespace mean). */
static int is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

/* Python's str.isspace(), for Jinja's trim / strip. */
static int is_py_space(uint32_t c) { return is_white_space(c) || (c >= 0x1C && c <= 0x1F); }

/* ---- the GPT-2 byte <-> unicode mapping ---------------------------------- */

/* Printable bytes stand for themselves; the others (controls, space, 0x7F-0xA0, 0xAD)
 * take the code points from 256 on, in byte order. */
static uint32_t byte_to_cp(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    unsigned n = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE))) n++;
    return 256 + n;
}

static int16_t g_cp_to_byte[324];
static uint32_t g_byte_cp[256];
static pthread_once_t g_map_once = PTHREAD_ONCE_INIT;

static void map_build(void) {
    for (int i = 0; i < 324; i++) g_cp_to_byte[i] = -1;
    for (unsigned b = 0; b < 256; b++) {
        g_byte_cp[b] = byte_to_cp(b);
        g_cp_to_byte[g_byte_cp[b]] = (int16_t)b;
    }
}

static void map_init(void) { pthread_once(&g_map_once, map_build); }

/* Token text -> bytes.  Returns the byte count, or -1 when a character is not in the mapping. */
static long bytelevel_decode(const char *s, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (!l || cp >= 324 || g_cp_to_byte[cp] < 0) return -1;
        out[o++] = (char)g_cp_to_byte[cp];
        i += l;
    }
    return (long)o;
}

/* ---- construction -------------------------------------------------------- */

static qc_tokenizer *tok_new(void) {
    map_init();
    qc_tokenizer *t = xcalloc(1, sizeof(*t));
    if (!t) return NULL;
    t->bos = t->eos = t->unk = t->pad = t->eot = -1;
    t->unk_model = -1;
    return t;
}

static void step_clear(tok_step *s) {
    if (s->re) pcre2_code_free(s->re);
    free(s->literal);
    memset(s, 0, sizeof(*s));
}

void qc_tokenizer_free(qc_tokenizer *t) {
    if (!t) return;
    free(t->tok);
    free(t->model.slots);
    free(t->added.slots);
    free(t->merges.slots);
    for (size_t i = 0; i < t->n_steps; i++) step_clear(&t->steps[i]);
    free(t->match_ids[0]);
    free(t->match_ids[1]);
    free(t->tpl_system);
    free(t->tpl_date);
    while (t->pool) {
        pool_block *n = t->pool->next;
        free(t->pool);
        t->pool = n;
    }
    free(t);
}

static int alloc_vocab(qc_tokenizer *t, size_t n, char *err, size_t errlen) {
    if (n == 0 || n > TOK_MAX_VOCAB) {
        qc_errf(err, errlen, "vocabulary of %zu ids (must be 1..%u)", n, TOK_MAX_VOCAB);
        return -1;
    }
    t->n_vocab = n;
    t->tok = xcalloc(n, sizeof(*t->tok));
    if (!t->tok || strmap_init(&t->model, n) || strmap_init(&t->added, 64)) {
        qc_errf(err, errlen, "out of memory for %zu tokens", n);
        return -1;
    }
    return 0;
}

/* Compile an HF (Oniguruma-syntax) pattern with PCRE2: UTF, Unicode properties for \s \w
 * \d, and ^ $ at line ends as Oniguruma's Ruby syntax has them. */
static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

static pcre2_code *compile_re(const char *pat, size_t len, char *err, size_t errlen) {
    /* Oniguruma's \uHHHH is PCRE2's \x{HHHH}; everything else is the same syntax here */
    char *tr = malloc(len * 2 + 1);
    if (!tr) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (pat[i] == '\\' && i + 5 < len && pat[i + 1] == 'u' && is_hex(pat[i + 2]) && is_hex(pat[i + 3]) &&
            is_hex(pat[i + 4]) && is_hex(pat[i + 5])) {
            memcpy(tr + o, "\\x{", 3);
            memcpy(tr + o + 3, pat + i + 2, 4);
            tr[o + 7] = '}';
            o += 8;
            i += 5;
        } else if (pat[i] == '\\' && i + 1 < len) { /* keep escaped pairs together (\\u is not \u) */
            tr[o++] = pat[i++];
            tr[o++] = pat[i];
        } else {
            tr[o++] = pat[i];
        }
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)tr, o, PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE |
                                   PCRE2_NEVER_BACKSLASH_C, &ec, &eo, NULL);
    free(tr);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof(msg));
        qc_errf(err, errlen, "pre-tokenizer regex /%.*s/ does not compile at offset %zu: %s",
                (int)(len > 80 ? 80 : len), pat, (size_t)eo, (const char *)msg);
        return NULL;
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
    return re;
}

static tok_step *add_step(qc_tokenizer *t, char *err, size_t errlen) {
    if (t->n_steps >= TOK_MAX_STEPS) {
        qc_errf(err, errlen, "pre_tokenizer: more than %d steps", TOK_MAX_STEPS);
        return NULL;
    }
    tok_step *s = &t->steps[t->n_steps++];
    memset(s, 0, sizeof(*s));
    return s;
}

static int add_split_regex(qc_tokenizer *t, const char *pat, size_t len, int behavior, int invert, char *err,
                           size_t errlen) {
    tok_step *s = add_step(t, err, errlen);
    if (!s) return -1;
    s->behavior = behavior;
    s->invert = invert;
    s->re = compile_re(pat, len, err, errlen);
    return s->re ? 0 : -1;
}

static int add_bytelevel(qc_tokenizer *t, int add_prefix_space, int use_regex, char *err, size_t errlen) {
    tok_step *s = add_step(t, err, errlen);
    if (!s) return -1;
    s->bytelevel = 1;
    s->add_prefix_space = add_prefix_space;
    s->behavior = SPLIT_ISOLATED;
    if (use_regex) {
        s->re = compile_re(RE_GPT2, sizeof(RE_GPT2) - 1, err, errlen);
        if (!s->re) return -1;
    }
    return 0;
}

/* Merge "left right" (or its two halves): both sides and their concatenation must be
 * tokens, as HF requires. */
static int add_merge(qc_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen, uint32_t rank,
                     char *scratch, char *err, size_t errlen) {
    int32_t ia = strmap_get(&t->model, a, alen), ib = strmap_get(&t->model, b, blen);
    memcpy(scratch, a, alen);
    memcpy(scratch + alen, b, blen);
    int32_t im = strmap_get(&t->model, scratch, alen + blen);
    if (ia < 0 || ib < 0 || im < 0) {
        const char *what = ia < 0 ? a : ib < 0 ? b : scratch;
        size_t wl = ia < 0 ? alen : ib < 0 ? blen : alen + blen;
        qc_errf(err, errlen, "merge %u (\"%.*s\" + \"%.*s\"): \"%.*s\" is not in the vocabulary", rank,
                (int)(alen > 40 ? 40 : alen), a, (int)(blen > 40 ? 40 : blen), b, (int)(wl > 40 ? 40 : wl), what);
        return -1;
    }
    pairmap_put(&t->merges, ia, ib, rank, im);
    return 0;
}

static int cmp_match(const void *pa, const void *pb, void *ctx);

/* After the vocabulary and added tokens are in: pieces, byte tokens, matching tables. */
static int finalize(qc_tokenizer *t, char *err, size_t errlen) {
    for (unsigned b = 0; b < 256; b++) {
        char u[4];
        size_t l = utf8_encode(g_byte_cp[b], u);
        t->byte_tok[b] = strmap_get(&t->model, u, l);
    }
    char *buf = NULL;
    size_t bufcap = 0;
    for (size_t i = 0; i < t->n_vocab; i++) {
        tok_entry *e = &t->tok[i];
        if (!e->text || e->piece) continue;
        if (e->added) {
            e->piece = e->text; /* added tokens stand for their own text */
            e->piece_len = e->len;
            continue;
        }
        if (e->len > bufcap) {
            free(buf);
            bufcap = e->len * 2 + 16;
            buf = malloc(bufcap);
            if (!buf) {
                qc_errf(err, errlen, "out of memory");
                return -1;
            }
        }
        long n = bytelevel_decode(e->text, e->len, buf);
        if (n < 0) { /* not byte-level text: the raw bytes, as HF's ByteLevel decoder does */
            e->piece = e->text;
            e->piece_len = e->len;
        } else {
            e->piece = pool_dup(t, buf, (size_t)n);
            if (!e->piece) {
                free(buf);
                qc_errf(err, errlen, "out of memory");
                return -1;
            }
            e->piece_len = (uint32_t)n;
        }
    }
    free(buf);

    /* Matchable added tokens: non-empty, well-formed UTF-8 (so a match never cuts a
     * character), sorted by first byte then longest first: the first hit at a position is
     * the leftmost-longest match. */
    for (int k = 0; k < 2; k++) {
        size_t n = 0;
        for (size_t i = 0; i < t->n_vocab; i++) {
            tok_entry *e = &t->tok[i];
            if (e->added && e->len && (int)e->normalized == k && utf8_check(e->text, e->len) == e->len &&
                strmap_get(&t->added, e->text, e->len) == (int32_t)i)
                n++;
        }
        t->match_ids[k] = xcalloc(n, sizeof(int32_t));
        if (!t->match_ids[k]) {
            qc_errf(err, errlen, "out of memory");
            return -1;
        }
        n = 0;
        for (size_t i = 0; i < t->n_vocab; i++) {
            tok_entry *e = &t->tok[i];
            if (e->added && e->len && (int)e->normalized == k && utf8_check(e->text, e->len) == e->len &&
                strmap_get(&t->added, e->text, e->len) == (int32_t)i)
                t->match_ids[k][n++] = (int32_t)i;
        }
        t->n_match[k] = n;
        /* insertion sort keeps this free of qsort_r portability questions; n is small */
        for (size_t i = 1; i < n; i++) {
            int32_t v = t->match_ids[k][i];
            size_t j = i;
            while (j > 0 && cmp_match(&t->match_ids[k][j - 1], &v, t) > 0) {
                t->match_ids[k][j] = t->match_ids[k][j - 1];
                j--;
            }
            t->match_ids[k][j] = v;
        }
        size_t j = 0;
        for (unsigned b = 0; b <= 256; b++) {
            while (j < n && (unsigned char)t->tok[t->match_ids[k][j]].text[0] < b) j++;
            t->bucket[k][b] = j;
        }
    }
    return 0;
}

static int cmp_match(const void *pa, const void *pb, void *ctx) {
    const qc_tokenizer *t = ctx;
    const tok_entry *a = &t->tok[*(const int32_t *)pa], *b = &t->tok[*(const int32_t *)pb];
    unsigned ca = (unsigned char)a->text[0], cb = (unsigned char)b->text[0];
    if (ca != cb) return ca < cb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return 0;
}

/* ---- chat templates: recognition ----------------------------------------- */

static const char *memfind(const char *h, size_t hn, const char *needle) {
    size_t nn = strlen(needle);
    if (nn > hn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++)
        if (h[i] == needle[0] && memcmp(h + i, needle, nn) == 0) return h + i;
    return NULL;
}

/* A default system prompt written as a literal: '<|im_start|>system\n<text><|im_end|>'.
 * The newline may be a real one or the two characters \n of a Jinja string. */
static char *chatml_default_system(const char *s, size_t n) {
    static const char head[] = "<|im_start|>system";
    const char *p = s, *end = s + n;
    while ((p = memfind(p, (size_t)(end - p), head)) != NULL) {
        p += sizeof(head) - 1;
        const char *q = p;
        if (q < end && *q == '\n') q++;
        else if (end - q >= 2 && q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        const char *stop = memfind(q, (size_t)(end - q), "<|im_end|>");
        if (!stop || stop <= q) continue;
        /* a plain literal only: no quote or template syntax inside */
        int plain = 1;
        for (const char *c = q; c < stop; c++)
            if (*c == '\'' || *c == '"' || *c == '{' || *c == '}' || *c == '+') plain = 0;
        if (!plain) continue;
        size_t span = (size_t)(stop - q);
        if (span > n) continue; /* cannot happen; tells the optimizer the size is sane */
        char *out = malloc(span + 1);
        if (!out) return NULL;
        size_t o = 0;
        for (const char *c = q; c < stop; c++) {
            if (*c == '\\' && c + 1 < stop) { /* Jinja string escapes */
                c++;
                out[o++] = *c == 'n' ? '\n' : *c == 't' ? '\t' : *c;
            } else {
                out[o++] = *c;
            }
        }
        out[o] = 0;
        return out;
    }
    return NULL;
}

static void recognise_template(qc_tokenizer *t, const char *s, size_t n) {
    t->tpl = TPL_NONE;
    t->tpl_name = NULL;
    if (!s || !n) return;
    t->tpl = TPL_UNKNOWN;
    if (memfind(s, n, "<|im_start|>") && memfind(s, n, "<|im_end|>")) {
        if (memfind(s, n, "<think>") && memfind(s, n, "last_query_index")) {
            t->tpl = TPL_QWEN3;
            t->tpl_name = "chatml-qwen3";
            return;
        }
        t->tpl = TPL_CHATML;
        t->tpl_tools = memfind(s, n, "<tool_response>") != NULL;
        t->tpl_system = chatml_default_system(s, n);
        t->tpl_name = !t->tpl_system                     ? "chatml"
                      : strstr(t->tpl_system, "SmolLM") ? "chatml-smollm"
                      : strstr(t->tpl_system, "Qwen")   ? "chatml-qwen2"
                                                         : "chatml";
        return;
    }
    if (memfind(s, n, "<|start_header_id|>") && memfind(s, n, "<|eot_id|>")) {
        if (!memfind(s, n, "Cutting Knowledge Date")) {
            t->tpl = TPL_LLAMA3;
            t->tpl_name = "llama3";
            return;
        }
        t->tpl = TPL_LLAMA31;
        t->tpl_name = "llama3.1";
        t->tpl_today = memfind(s, n, "strftime_now") != NULL;
        const char *d = memfind(s, n, "set date_string = \"");
        if (d) {
            d += strlen("set date_string = \"");
            const char *e = d;
            while (e < s + n && *e != '"' && e - d < 40) e++;
            if (e < s + n && *e == '"') {
                t->tpl_date = malloc((size_t)(e - d) + 1);
                if (t->tpl_date) {
                    memcpy(t->tpl_date, d, (size_t)(e - d));
                    t->tpl_date[e - d] = 0;
                }
            }
        }
        return;
    }
    if (memfind(s, n, "[INST]") && memfind(s, n, "[/INST]")) {
        t->tpl = memfind(s, n, "<<SYS>>") ? TPL_LLAMA2 : TPL_MISTRAL;
        t->tpl_name = t->tpl == TPL_LLAMA2 ? "llama2" : "mistral";
        return;
    }
}

/* Id of a special token by text, for tokens that end a turn. */
static int32_t find_added(const qc_tokenizer *t, const char *text) {
    int32_t id = strmap_get(&t->added, text, strlen(text));
    return id >= 0 ? id : strmap_get(&t->model, text, strlen(text));
}

static void derive_eot(qc_tokenizer *t) {
    if (t->eot >= 0) return;
    if (t->tpl == TPL_CHATML || t->tpl == TPL_QWEN3) t->eot = find_added(t, "<|im_end|>");
    else if (t->tpl == TPL_LLAMA3 || t->tpl == TPL_LLAMA31) t->eot = find_added(t, "<|eot_id|>");
}

static int32_t checked_id(const qc_tokenizer *t, int32_t id, const char *what) {
    if (id < 0) return -1;
    if ((size_t)id >= t->n_vocab || !t->tok[id].text) {
        qc_log(QC_LOG_WARN, "tokenizer: %s id %d is not a token; ignored", what, (int)id);
        return -1;
    }
    return id;
}

/* ---- from a spec (GGUF metadata) ------------------------------------------ */

static int pre_from_name(qc_tokenizer *t, const char *pre, char *err, size_t errlen) {
    static const char *const gpt2[] = {"gpt2", "gpt-2", "default", "mpt", "olmo", "jais", NULL};
    static const char *const digits[] = {"smollm", "starcoder", "refact", "codeshell", "exaone", "minerva",
                                         "command-r", NULL};
    static const char *const llama3[] = {"llama-bpe", "llama3", "llama-v3", "dbrx", "smaug-bpe", NULL};
    static const char *const qwen2[] = {"qwen2", "stablelm2", NULL};
    if (!pre) {
        qc_log(QC_LOG_WARN, "tokenizer: no tokenizer.ggml.pre; using the GPT-2 pre-tokenizer");
        pre = "default";
    }
    qc_strlcpy(t->pre_name, pre, sizeof(t->pre_name));
    for (int i = 0; gpt2[i]; i++)
        if (!strcmp(pre, gpt2[i])) return add_bytelevel(t, 0, 1, err, errlen);
    for (int i = 0; digits[i]; i++)
        if (!strcmp(pre, digits[i]))
            return add_split_regex(t, "\\p{N}", 5, SPLIT_ISOLATED, 0, err, errlen) ||
                           add_bytelevel(t, 0, 1, err, errlen)
                       ? -1
                       : 0;
    for (int i = 0; llama3[i]; i++)
        if (!strcmp(pre, llama3[i]) && (t->ignore_merges = 1)) /* Llama 3's tokenizer.json has ignore_merges */
            return add_split_regex(t, RE_LLAMA3, sizeof(RE_LLAMA3) - 1, SPLIT_ISOLATED, 0, err, errlen) ||
                           add_bytelevel(t, 0, 0, err, errlen)
                       ? -1
                       : 0;
    for (int i = 0; qwen2[i]; i++)
        if (!strcmp(pre, qwen2[i]))
            return add_split_regex(t, RE_QWEN2, sizeof(RE_QWEN2) - 1, SPLIT_ISOLATED, 0, err, errlen) ||
                           add_bytelevel(t, 0, 0, err, errlen)
                       ? -1
                       : 0;
    qc_errf(err, errlen, "tokenizer.ggml.pre \"%.60s\" is not supported (known: smollm, llama-bpe, qwen2, gpt2, "
            "default and their aliases)", pre);
    return -1;
}

/* "<0xHH>" -> the byte, or -1. */
static int parse_byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

qc_tokenizer *qc_tokenizer_from_spec(const qc_tokenizer_spec *spec, char *err, size_t errlen) {
    if (!spec || !spec->tokens) {
        qc_errf(err, errlen, "tokenizer: no tokens");
        return NULL;
    }
    if (!spec->model || strcmp(spec->model, "gpt2") != 0) {
        qc_errf(err, errlen, "tokenizer.ggml.model \"%.40s\" is not supported (only \"gpt2\", byte-level BPE)",
                spec->model ? spec->model : "(missing)");
        return NULL;
    }
    if (spec->n_merges > TOK_MAX_MERGES || (spec->n_merges && !spec->merges)) {
        qc_errf(err, errlen, "tokenizer: bad merges (%zu)", spec->n_merges);
        return NULL;
    }
    qc_tokenizer *t = tok_new();
    if (!t) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    char *scratch = NULL;
    if (alloc_vocab(t, spec->n_tokens, err, errlen) || pre_from_name(t, spec->pre, err, errlen)) goto fail;

    for (size_t i = 0; i < spec->n_tokens; i++) {
        const char *s = spec->tokens[i];
        if (!s) {
            qc_errf(err, errlen, "token %zu is missing", i);
            goto fail;
        }
        size_t len = spec->token_lens ? spec->token_lens[i] : strlen(s);
        if (len > UINT32_MAX / 4) {
            qc_errf(err, errlen, "token %zu is too long", i);
            goto fail;
        }
        tok_entry *e = &t->tok[i];
        e->text = pool_dup(t, s, len);
        if (!e->text) {
            qc_errf(err, errlen, "out of memory");
            goto fail;
        }
        e->len = (uint32_t)len;
        int type = spec->token_types ? spec->token_types[i] : TT_NORMAL;
        if (strmap_put(&t->model, e->text, len, (int32_t)i)) {
            qc_errf(err, errlen, "out of memory");
            goto fail;
        }
        if (type == TT_CONTROL || type == TT_USER) {
            /* split out before pre-tokenization; control tokens only with parse_special */
            e->added = 1;
            e->special = type == TT_CONTROL;
            if (strmap_put(&t->added, e->text, len, (int32_t)i)) {
                qc_errf(err, errlen, "out of memory");
                goto fail;
            }
        } else if (type == TT_BYTE) {
            int b = parse_byte_token(s, len);
            if (b < 0) {
                qc_errf(err, errlen, "token %zu has type byte but its text \"%.20s\" is not <0xHH>", i, e->text);
                goto fail;
            }
            char c = (char)b;
            e->piece = pool_dup(t, &c, 1);
            e->piece_len = 1;
        } else if (type < TT_NORMAL || type > TT_BYTE) {
            qc_errf(err, errlen, "token %zu has unknown type %d", i, (int)type);
            goto fail;
        }
    }

    if (pairmap_init(&t->merges, spec->n_merges)) {
        qc_errf(err, errlen, "out of memory");
        goto fail;
    }
    size_t scratch_cap = 0;
    for (size_t r = 0; r < spec->n_merges; r++) {
        const char *m = spec->merges[r];
        if (!m) {
            qc_errf(err, errlen, "merge %zu is missing", r);
            goto fail;
        }
        size_t len = spec->merge_lens ? spec->merge_lens[r] : strlen(m);
        /* split at the first space after the first character */
        size_t sp = 1;
        while (sp < len && m[sp] != ' ') sp++;
        if (len < 3 || sp >= len - 1) {
            qc_errf(err, errlen, "merge %zu \"%.40s\" is not \"left right\"", r, len ? m : "");
            goto fail;
        }
        if (len > scratch_cap) {
            free(scratch);
            scratch_cap = len * 2;
            scratch = malloc(scratch_cap);
            if (!scratch) {
                qc_errf(err, errlen, "out of memory");
                goto fail;
            }
        }
        if (add_merge(t, m, sp, m + sp + 1, len - sp - 1, (uint32_t)r, scratch, err, errlen)) goto fail;
    }
    free(scratch);
    scratch = NULL;

    t->unk_model = checked_id(t, spec->unk, "unknown token");
    t->bos = checked_id(t, spec->bos, "BOS");
    t->eos = checked_id(t, spec->eos, "EOS");
    t->unk = t->unk_model;
    t->pad = checked_id(t, spec->pad, "padding");
    t->eot = checked_id(t, spec->eot, "EOT");
    t->add_bos = spec->add_bos ? 1 : 0;
    if (finalize(t, err, errlen)) goto fail;
    if (spec->chat_template)
        recognise_template(t, spec->chat_template,
                           spec->chat_template_len ? spec->chat_template_len : strlen(spec->chat_template));
    derive_eot(t);
    return t;
fail:
    free(scratch);
    qc_tokenizer_free(t);
    return NULL;
}

/* ---- from tokenizer.json --------------------------------------------------- */

static int json_flag(json_t *obj, const char *key, int dflt, int *out, const char *where, char *err, size_t errlen) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_boolean(v)) {
        qc_errf(err, errlen, "%s.%s must be true or false", where, key);
        return -1;
    }
    *out = json_is_true(v);
    return 0;
}

static const char *json_type_of(json_t *obj) {
    json_t *ty = json_object_get(obj, "type");
    return json_is_string(ty) ? json_string_value(ty) : NULL;
}

static int parse_pre(qc_tokenizer *t, json_t *p, int depth, char *err, size_t errlen) {
    if (depth > TOK_MAX_DEPTH) {
        qc_errf(err, errlen, "pre_tokenizer: Sequence nested too deeply");
        return -1;
    }
    if (!json_is_object(p)) {
        qc_errf(err, errlen, "pre_tokenizer must be an object");
        return -1;
    }
    const char *type = json_type_of(p);
    if (!type) {
        qc_errf(err, errlen, "pre_tokenizer has no type");
        return -1;
    }
    size_t pn = strlen(t->pre_name);
    if (pn + 24 < sizeof(t->pre_name)) snprintf(t->pre_name + pn, sizeof(t->pre_name) - pn, " %s", type);
    if (!strcmp(type, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) {
            qc_errf(err, errlen, "pre_tokenizer Sequence has no pretokenizers array");
            return -1;
        }
        for (size_t i = 0; i < json_array_size(list); i++)
            if (parse_pre(t, json_array_get(list, i), depth + 1, err, errlen)) return -1;
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        int aps, use_regex;
        if (json_flag(p, "add_prefix_space", 1, &aps, "ByteLevel", err, errlen) ||
            json_flag(p, "use_regex", 1, &use_regex, "ByteLevel", err, errlen))
            return -1;
        return add_bytelevel(t, aps, use_regex, err, errlen);
    }
    if (!strcmp(type, "Digits")) {
        int ind;
        if (json_flag(p, "individual_digits", 0, &ind, "Digits", err, errlen)) return -1;
        /* HF splits on char::is_numeric (Nd, Nl, No), each digit alone or runs contiguous */
        return ind ? add_split_regex(t, "\\p{N}", 5, SPLIT_ISOLATED, 0, err, errlen)
                   : add_split_regex(t, "\\p{N}+", 6, SPLIT_ISOLATED, 0, err, errlen);
    }
    if (!strcmp(type, "Split")) {
        static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                            "Contiguous"};
        json_t *pat = json_object_get(p, "pattern"), *beh = json_object_get(p, "behavior");
        int behavior = -1, invert;
        if (json_is_string(beh))
            for (int i = 0; i < 5; i++)
                if (!strcmp(json_string_value(beh), names[i])) behavior = i;
        if (behavior < 0) {
            qc_errf(err, errlen, "Split.behavior must be one of Removed, Isolated, MergedWithPrevious, "
                    "MergedWithNext, Contiguous");
            return -1;
        }
        if (json_flag(p, "invert", 0, &invert, "Split", err, errlen)) return -1;
        json_t *re = json_is_object(pat) ? json_object_get(pat, "Regex") : NULL;
        json_t *lit = json_is_object(pat) ? json_object_get(pat, "String") : NULL;
        if (json_is_string(re))
            return add_split_regex(t, json_string_value(re), json_string_length(re), behavior, invert, err, errlen);
        if (json_is_string(lit)) {
            tok_step *s = add_step(t, err, errlen);
            if (!s) return -1;
            s->behavior = behavior;
            s->invert = invert;
            s->has_literal = 1;
            s->literal_len = json_string_length(lit);
            s->literal = malloc(s->literal_len + 1);
            if (!s->literal) {
                qc_errf(err, errlen, "out of memory");
                return -1;
            }
            memcpy(s->literal, json_string_value(lit), s->literal_len + 1);
            return 0;
        }
        qc_errf(err, errlen, "Split.pattern must be {\"Regex\": ...} or {\"String\": ...}");
        return -1;
    }
    qc_errf(err, errlen, "pre_tokenizer type \"%.40s\" is not supported (ByteLevel, Split, Digits, Sequence)", type);
    return -1;
}

/* normalizer: none, or NFC (see the note in qc_tokenizer_from_json_memory). */
static int check_normalizer(json_t *n, int depth, char *err, size_t errlen) {
    if (!n || json_is_null(n)) return 0;
    const char *type = json_is_object(n) ? json_type_of(n) : NULL;
    if (type && !strcmp(type, "Sequence") && depth < TOK_MAX_DEPTH) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list)) {
            qc_errf(err, errlen, "normalizer Sequence has no normalizers array");
            return -1;
        }
        for (size_t i = 0; i < json_array_size(list); i++)
            if (check_normalizer(json_array_get(list, i), depth + 1, err, errlen)) return -1;
        return 0;
    }
    if (type && !strcmp(type, "NFC")) {
        qc_log(QC_LOG_WARN, "tokenizer: NFC normalizer applied as identity; text that is not already NFC "
               "may tokenize differently from HF tokenizers");
        return 0;
    }
    qc_errf(err, errlen, "normalizer \"%.40s\" is not supported (only none or NFC)", type ? type : "?");
    return -1;
}

static int check_decoder(json_t *d, char *err, size_t errlen) {
    const char *type = json_is_object(d) ? json_type_of(d) : NULL;
    if (type && !strcmp(type, "ByteLevel")) return 0;
    qc_errf(err, errlen, "decoder \"%.40s\" is not supported (only ByteLevel)",
            type ? type : d && !json_is_null(d) ? "?" : "null");
    return -1;
}

/* post_processor: none, ByteLevel, TemplateProcessing (its leading special token is the
 * BOS the model adds), or a Sequence of them. */
static int parse_post(qc_tokenizer *t, json_t *p, int depth, int32_t *bos, char *err, size_t errlen) {
    if (!p || json_is_null(p)) return 0;
    const char *type = json_is_object(p) ? json_type_of(p) : NULL;
    if (!type) {
        qc_errf(err, errlen, "post_processor has no type");
        return -1;
    }
    if (!strcmp(type, "ByteLevel")) return 0;
    if (!strcmp(type, "Sequence") && depth < TOK_MAX_DEPTH) {
        json_t *list = json_object_get(p, "processors");
        if (!json_is_array(list)) {
            qc_errf(err, errlen, "post_processor Sequence has no processors array");
            return -1;
        }
        for (size_t i = 0; i < json_array_size(list); i++)
            if (parse_post(t, json_array_get(list, i), depth + 1, bos, err, errlen)) return -1;
        return 0;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        json_t *single = json_object_get(p, "single");
        json_t *first = json_is_array(single) ? json_array_get(single, 0) : NULL;
        json_t *st = json_is_object(first) ? json_object_get(first, "SpecialToken") : NULL;
        json_t *name = json_is_object(st) ? json_object_get(st, "id") : NULL;
        if (json_is_string(name)) {
            json_t *sp = json_object_get(json_object_get(p, "special_tokens"), json_string_value(name));
            json_t *ids = json_is_object(sp) ? json_object_get(sp, "ids") : NULL;
            json_t *id = json_is_array(ids) ? json_array_get(ids, 0) : NULL;
            if (json_is_integer(id) && json_integer_value(id) >= 0 && json_integer_value(id) < INT32_MAX)
                *bos = (int32_t)json_integer_value(id);
        }
        return 0;
    }
    qc_errf(err, errlen, "post_processor \"%.40s\" is not supported (ByteLevel, TemplateProcessing, Sequence)",
            type);
    return -1;
}

static int load_json_model(qc_tokenizer *t, json_t *root, char *err, size_t errlen) {
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) {
        qc_errf(err, errlen, "tokenizer.json has no model object");
        return -1;
    }
    const char *type = json_type_of(model);
    if (json_object_get(model, "type") && (!type || strcmp(type, "BPE") != 0)) {
        qc_errf(err, errlen, "model type \"%.40s\" is not supported (only BPE)", type ? type : "?");
        return -1;
    }
    json_t *vocab = json_object_get(model, "vocab"), *merges = json_object_get(model, "merges");
    if (!json_is_object(vocab) || !json_is_array(merges)) {
        qc_errf(err, errlen, "model needs a vocab object and a merges array");
        return -1;
    }
    json_t *v = json_object_get(model, "dropout");
    if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0.0)) {
        qc_errf(err, errlen, "model.dropout is not supported (encoding would not be deterministic)");
        return -1;
    }
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(model, affixes[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0)) {
            qc_errf(err, errlen, "model.%s is not supported", affixes[i]);
            return -1;
        }
    }
    if (json_flag(model, "fuse_unk", 0, &t->fuse_unk, "model", err, errlen) ||
        json_flag(model, "byte_fallback", 0, &t->byte_fallback, "model", err, errlen) ||
        json_flag(model, "ignore_merges", 0, &t->ignore_merges, "model", err, errlen))
        return -1;

    /* ids: the vocabulary and the added tokens share one id space */
    json_t *added = json_object_get(root, "added_tokens");
    if (added && !json_is_null(added) && !json_is_array(added)) {
        qc_errf(err, errlen, "added_tokens must be an array");
        return -1;
    }
    size_t n_entries = json_object_size(vocab) + (added ? json_array_size(added) : 0);
    json_int_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= (json_int_t)TOK_MAX_VOCAB) {
            qc_errf(err, errlen, "vocab entry \"%.40s\" has no valid id (0..%u)", key, TOK_MAX_VOCAB - 1);
            return -1;
        }
        if (json_integer_value(val) > max_id) max_id = json_integer_value(val);
    }
    for (size_t i = 0; added && i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i), *id = json_is_object(a) ? json_object_get(a, "id") : NULL;
        json_t *content = json_is_object(a) ? json_object_get(a, "content") : NULL;
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= (json_int_t)TOK_MAX_VOCAB ||
            !json_is_string(content)) {
            qc_errf(err, errlen, "added_tokens[%zu] needs an id (0..%u) and a content string", i, TOK_MAX_VOCAB - 1);
            return -1;
        }
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    /* sparse ids would let a small file demand a huge table */
    if (max_id < 0 || (size_t)max_id >= 4 * n_entries + 1024) {
        qc_errf(err, errlen, "ids are too sparse or missing: largest id %lld for %zu entries", (long long)max_id,
                n_entries);
        return -1;
    }
    if (alloc_vocab(t, (size_t)max_id + 1, err, errlen)) return -1;
    json_object_foreach(vocab, key, val) {
        size_t id = (size_t)json_integer_value(val), len = strlen(key);
        tok_entry *e = &t->tok[id];
        if (e->text) {
            qc_errf(err, errlen, "vocab id %zu is used twice (\"%.40s\" and \"%.40s\")", id, e->text, key);
            return -1;
        }
        e->text = pool_dup(t, key, len);
        if (!e->text) {
            qc_errf(err, errlen, "out of memory");
            return -1;
        }
        e->len = (uint32_t)len;
        if (strmap_put(&t->model, e->text, len, (int32_t)id)) {
            qc_errf(err, errlen, "out of memory");
            return -1;
        }
    }
    for (size_t i = 0; added && i < json_array_size(added); i++) {
        json_t *a = json_array_get(added, i), *content = json_object_get(a, "content");
        size_t id = (size_t)json_integer_value(json_object_get(a, "id")), len = json_string_length(content);
        int special, lstrip, rstrip, single_word, normalized;
        if (json_flag(a, "special", 0, &special, "added_tokens", err, errlen) ||
            json_flag(a, "lstrip", 0, &lstrip, "added_tokens", err, errlen) ||
            json_flag(a, "rstrip", 0, &rstrip, "added_tokens", err, errlen) ||
            json_flag(a, "single_word", 0, &single_word, "added_tokens", err, errlen))
            return -1;
        if (json_flag(a, "normalized", !special, &normalized, "added_tokens", err, errlen)) return -1;
        tok_entry *e = &t->tok[id];
        /* the added token's content wins over a model entry with the same id, as in HF */
        e->text = pool_dup(t, json_string_value(content), len);
        if (!e->text) {
            qc_errf(err, errlen, "out of memory");
            return -1;
        }
        e->len = (uint32_t)len;
        e->added = 1;
        e->special = (uint8_t)special;
        e->lstrip = (uint8_t)lstrip;
        e->rstrip = (uint8_t)rstrip;
        e->single_word = (uint8_t)single_word;
        e->normalized = (uint8_t)normalized;
        if (strmap_put(&t->added, e->text, len, (int32_t)id)) {
            qc_errf(err, errlen, "out of memory");
            return -1;
        }
    }

    size_t nm = json_array_size(merges);
    if (nm > TOK_MAX_MERGES) {
        qc_errf(err, errlen, "%zu merges (at most %u)", nm, TOK_MAX_MERGES);
        return -1;
    }
    if (pairmap_init(&t->merges, nm)) {
        qc_errf(err, errlen, "out of memory");
        return -1;
    }
    char *scratch = NULL;
    size_t scratch_cap = 0;
    for (size_t r = 0; r < nm; r++) {
        json_t *m = json_array_get(merges, r);
        const char *a, *b;
        size_t alen, blen;
        if (json_is_string(m)) { /* "a b": split at the first space after the first character */
            const char *s = json_string_value(m);
            size_t len = json_string_length(m), sp = 1;
            while (sp < len && s[sp] != ' ') sp++;
            if (len < 3 || sp >= len - 1) {
                free(scratch);
                qc_errf(err, errlen, "merges[%zu] \"%.40s\" is not \"left right\"", r, s);
                return -1;
            }
            a = s;
            alen = sp;
            b = s + sp + 1;
            blen = len - sp - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            alen = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            blen = json_string_length(json_array_get(m, 1));
        } else {
            free(scratch);
            qc_errf(err, errlen, "merges[%zu] must be \"left right\" or [left, right]", r);
            return -1;
        }
        if (alen + blen > scratch_cap) {
            free(scratch);
            scratch_cap = (alen + blen) * 2 + 16;
            scratch = malloc(scratch_cap);
            if (!scratch) {
                qc_errf(err, errlen, "out of memory");
                return -1;
            }
        }
        if (add_merge(t, a, alen, b, blen, (uint32_t)r, scratch, err, errlen)) {
            free(scratch);
            return -1;
        }
    }
    free(scratch);

    v = json_object_get(model, "unk_token");
    if (json_is_string(v)) {
        t->unk_model = strmap_get(&t->model, json_string_value(v), json_string_length(v));
        if (t->unk_model < 0) t->unk_model = -2; /* an error only if a character ever needs it */
        else t->unk = t->unk_model;
    } else if (v && !json_is_null(v)) {
        qc_errf(err, errlen, "model.unk_token must be a string or null");
        return -1;
    }
    return 0;
}

static qc_tokenizer *from_json_root(json_t *root, char *err, size_t errlen) {
    if (!json_is_object(root)) {
        qc_errf(err, errlen, "tokenizer.json is not a JSON object");
        return NULL;
    }
    qc_tokenizer *t = tok_new();
    if (!t) {
        qc_errf(err, errlen, "out of memory");
        return NULL;
    }
    qc_strlcpy(t->pre_name, "json:", sizeof(t->pre_name));
    int32_t bos = -1;
    json_t *pre = json_object_get(root, "pre_tokenizer");
    if (load_json_model(t, root, err, errlen) || check_normalizer(json_object_get(root, "normalizer"), 0, err, errlen))
        goto fail;
    if (!pre || json_is_null(pre)) {
        qc_errf(err, errlen, "pre_tokenizer is null: only byte-level BPE (a ByteLevel pre-tokenizer) is supported");
        goto fail;
    }
    if (parse_pre(t, pre, 0, err, errlen)) goto fail;
    /* byte-level BPE: exactly one ByteLevel step, the last one (it maps bytes to characters) */
    for (size_t i = 0; i < t->n_steps; i++)
        if (t->steps[i].bytelevel != (i + 1 == t->n_steps)) {
            qc_errf(err, errlen, "pre_tokenizer must end with its only ByteLevel step (got: %s)", t->pre_name);
            goto fail;
        }
    if (!t->n_steps) {
        qc_errf(err, errlen, "pre_tokenizer has no ByteLevel step: only byte-level BPE is supported");
        goto fail;
    }
    if (check_decoder(json_object_get(root, "decoder"), err, errlen) ||
        parse_post(t, json_object_get(root, "post_processor"), 0, &bos, err, errlen))
        goto fail;
    if (bos >= 0) {
        t->bos = checked_id(t, bos, "post_processor BOS");
        t->add_bos = t->bos >= 0;
    }
    if (finalize(t, err, errlen)) goto fail;
    return t;
fail:
    qc_tokenizer_free(t);
    return NULL;
}

qc_tokenizer *qc_tokenizer_from_json_memory(const char *json, size_t len, char *err, size_t errlen) {
    if (!json || len > TOK_MAX_JSON) {
        qc_errf(err, errlen, "tokenizer.json: no text or too large");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        qc_errf(err, errlen, "tokenizer.json: line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    qc_tokenizer *t = from_json_root(root, err, errlen);
    json_decref(root);
    return t;
}

/* A token named in tokenizer_config.json: a string or {"content": ...}. */
static int32_t config_token(const qc_tokenizer *t, json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return -1;
    int32_t id = strmap_get(&t->added, json_string_value(v), json_string_length(v));
    return id >= 0 ? id : strmap_get(&t->model, json_string_value(v), json_string_length(v));
}

static void load_companions(qc_tokenizer *t, const char *path) {
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) + 1 : 0;
    char *p = malloc(dl + 32);
    if (!p) return;
    memcpy(p, path, dl);
    char err[256];
    size_t len;
    char *tpl_text = NULL;
    size_t tpl_len = 0;

    strcpy(p + dl, "tokenizer_config.json");
    char *cfg = qc_read_file(p, 64u << 20, &len, err, sizeof(err));
    if (cfg) {
        json_error_t je;
        json_t *root = json_loadb(cfg, len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(root)) {
            qc_log(QC_LOG_WARN, "tokenizer: %s: line %d: %s; ignored", p, je.line, je.text);
        } else {
            int32_t id = config_token(t, json_object_get(root, "bos_token"));
            if (id >= 0) t->bos = id;
            id = config_token(t, json_object_get(root, "eos_token"));
            if (id >= 0) t->eos = id;
            id = config_token(t, json_object_get(root, "pad_token"));
            if (id >= 0) t->pad = id;
            id = config_token(t, json_object_get(root, "unk_token"));
            if (id >= 0) t->unk = id;
            json_t *ab = json_object_get(root, "add_bos_token");
            if (json_is_boolean(ab)) t->add_bos = json_is_true(ab) && t->bos >= 0;
            json_t *ct = json_object_get(root, "chat_template");
            if (json_is_array(ct)) { /* [{name, template}]: the one named "default", else the first */
                json_t *pick = NULL;
                for (size_t i = 0; i < json_array_size(ct); i++) {
                    json_t *e = json_array_get(ct, i), *nm = json_object_get(e, "name");
                    if (!pick || (json_is_string(nm) && !strcmp(json_string_value(nm), "default"))) pick = e;
                }
                ct = pick ? json_object_get(pick, "template") : NULL;
            }
            if (json_is_string(ct)) {
                tpl_len = json_string_length(ct);
                tpl_text = malloc(tpl_len + 1);
                if (tpl_text) memcpy(tpl_text, json_string_value(ct), tpl_len + 1);
            }
        }
        json_decref(root);
        free(cfg);
    }
    strcpy(p + dl, "chat_template.jinja"); /* newer HF repos keep the template apart */
    char *jinja = qc_read_file(p, 16u << 20, &len, err, sizeof(err));
    if (jinja) {
        free(tpl_text);
        tpl_text = jinja;
        tpl_len = len;
    }
    if (tpl_text) recognise_template(t, tpl_text, tpl_len);
    free(tpl_text);
    free(p);
}

qc_tokenizer *qc_tokenizer_from_json(const char *path, char *err, size_t errlen) {
    size_t len;
    char *text = qc_read_file(path, TOK_MAX_JSON, &len, err, errlen);
    if (!text) return NULL;
    qc_tokenizer *t = qc_tokenizer_from_json_memory(text, len, err, errlen);
    free(text);
    if (!t) return NULL;
    load_companions(t, path);
    derive_eot(t);
    return t;
}

/* ---- encoding ------------------------------------------------------------ */

typedef struct span {
    size_t s, e;
    int m; /* a match (or, after the behavior is applied, "remove") */
} span;

typedef struct sym {
    int32_t id;
    int prev, next;
    int alive;
} sym;

typedef struct cand {
    uint32_t rank;
    int pos;
    int32_t id;
} cand;

typedef struct enc_ctx {
    const qc_tokenizer *t;
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    struct {
        span *v;
        size_t n, cap;
    } lv[TOK_MAX_STEPS];
    int32_t *out;
    size_t n, cap;
    sym *syms;
    size_t syms_cap;
    cand *heap;
    size_t heap_n, heap_cap;
    char *mapped;
    size_t mapped_cap;
    char *err;
    size_t errlen;
} enc_ctx;

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return -1;
    *p = q;
    *cap = nc;
    return 0;
}

static int emit(enc_ctx *c, int32_t id) {
    if (grow((void **)&c->out, &c->cap, c->n + 1, sizeof(int32_t))) {
        qc_errf(c->err, c->errlen, "out of memory");
        return -1;
    }
    c->out[c->n++] = id;
    return 0;
}

static int cand_less(const cand *a, const cand *b) { return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos); }

static int heap_push(enc_ctx *c, cand v) {
    if (grow((void **)&c->heap, &c->heap_cap, c->heap_n + 1, sizeof(cand))) return -1;
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&v, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = v;
    return 0;
}

static cand heap_pop(enc_ctx *c) {
    cand top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < n && cand_less(&c->heap[l], best)) {
            m = l;
            best = &c->heap[l];
        }
        if (r < n && cand_less(&c->heap[r], best)) m = r;
        if (m == i) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n) c->heap[i] = last;
    return top;
}

static int push_pair(enc_ctx *c, int pos) {
    if (pos < 0 || c->syms[pos].next < 0) return 0;
    const pair_slot *ps = pairmap_get(&c->t->merges, c->syms[pos].id, c->syms[c->syms[pos].next].id);
    if (!ps) return 0;
    cand v = {ps->rank, pos, ps->id};
    return heap_push(c, v);
}

static int add_sym(enc_ctx *c, size_t *n, int32_t id) {
    if (grow((void **)&c->syms, &c->syms_cap, *n + 1, sizeof(sym))) return -1;
    c->syms[*n].id = id;
    c->syms[*n].alive = 1;
    (*n)++;
    return 0;
}

/* BPE on one pre-tokenized word (raw bytes; each byte is one mapped character). */
static int bpe_word(enc_ctx *c, const char *p, size_t n) {
    const qc_tokenizer *t = c->t;
    if (t->ignore_merges) { /* a word that is itself a token is emitted whole */
        if (grow((void **)&c->mapped, &c->mapped_cap, n * 2 + 1, 1)) goto oom;
        size_t o = 0;
        for (size_t i = 0; i < n; i++) o += utf8_encode(g_byte_cp[(unsigned char)p[i]], c->mapped + o);
        int32_t id = strmap_get(&t->model, c->mapped, o);
        if (id >= 0) return emit(c, id);
    }
    size_t ns = 0;
    int32_t unk_pending = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_tok[(unsigned char)p[i]];
        if (id >= 0) {
            if (unk_pending >= 0 && add_sym(c, &ns, unk_pending)) goto oom;
            unk_pending = -1;
            if (add_sym(c, &ns, id)) goto oom;
            continue;
        }
        if (t->byte_fallback) { /* <0xHH> for each byte of the mapped character */
            char u[4], name[8];
            size_t l = utf8_encode(g_byte_cp[(unsigned char)p[i]], u), k;
            int32_t ids[4];
            for (k = 0; k < l; k++) {
                snprintf(name, sizeof(name), "<0x%02X>", (unsigned char)u[k]);
                ids[k] = strmap_get(&t->model, name, 6);
                if (ids[k] < 0) break;
            }
            if (k == l) {
                if (unk_pending >= 0 && add_sym(c, &ns, unk_pending)) goto oom;
                unk_pending = -1;
                for (k = 0; k < l; k++)
                    if (add_sym(c, &ns, ids[k])) goto oom;
                continue;
            }
        }
        if (t->unk_model == -2) {
            qc_errf(c->err, c->errlen, "a character needs the unknown token, which is not in the vocabulary");
            return -1;
        }
        if (t->unk_model >= 0) {
            if (unk_pending >= 0 && !t->fuse_unk && add_sym(c, &ns, unk_pending)) goto oom;
            unk_pending = t->unk_model;
        }
        /* no unknown token: the character is dropped, as HF does */
    }
    if (unk_pending >= 0 && add_sym(c, &ns, unk_pending)) goto oom;
    if (!ns) return 0;
    for (size_t i = 0; i < ns; i++) {
        c->syms[i].prev = (int)i - 1;
        c->syms[i].next = i + 1 < ns ? (int)i + 1 : -1;
    }
    c->heap_n = 0;
    for (size_t i = 0; i + 1 < ns; i++)
        if (push_pair(c, (int)i)) goto oom;
    /* lowest rank first, leftmost among equals; stale candidates are skipped */
    while (c->heap_n) {
        cand top = heap_pop(c);
        sym *l = &c->syms[top.pos];
        if (!l->alive || l->next < 0) continue;
        sym *r = &c->syms[l->next];
        const pair_slot *ps = pairmap_get(&t->merges, l->id, r->id);
        if (!ps || ps->id != top.id || ps->rank != top.rank) continue;
        l->id = top.id;
        r->alive = 0;
        l->next = r->next;
        if (r->next >= 0) c->syms[r->next].prev = top.pos;
        if (push_pair(c, l->prev) || push_pair(c, top.pos)) goto oom;
    }
    for (int i = 0; i >= 0; i = c->syms[i].next)
        if (emit(c, c->syms[i].id)) return -1;
    return 0;
oom:
    qc_errf(c->err, c->errlen, "out of memory");
    return -1;
}

static int run_steps(enc_ctx *c, size_t k, const char *p, size_t n);

static int push_span(enc_ctx *c, size_t k, size_t s, size_t e, int m) {
    if (grow((void **)&c->lv[k].v, &c->lv[k].cap, c->lv[k].n + 1, sizeof(span))) {
        qc_errf(c->err, c->errlen, "out of memory");
        return -1;
    }
    c->lv[k].v[c->lv[k].n++] = (span){s, e, m};
    return 0;
}

/* Matches of a step's pattern over p[0..n), as spans covering all of it. */
static int find_spans(enc_ctx *c, size_t k, const tok_step *st, const char *p, size_t n) {
    c->lv[k].n = 0;
    size_t prev = 0;
    if (st->has_literal) {
        if (st->literal_len == 0) return push_span(c, k, 0, n, 0);
        size_t i = 0;
        while (i + st->literal_len <= n) {
            if (memcmp(p + i, st->literal, st->literal_len) == 0) {
                if (prev != i && push_span(c, k, prev, i, 0)) return -1;
                if (push_span(c, k, i, i + st->literal_len, 1)) return -1;
                i += st->literal_len;
                prev = i;
            } else {
                i++;
            }
        }
    } else {
        size_t off = 0;
        while (off <= n) {
            int rc = pcre2_match(st->re, (PCRE2_SPTR)p, n, off, PCRE2_NO_UTF_CHECK, c->md, c->mctx);
            if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
                rc = pcre2_match(st->re, (PCRE2_SPTR)p, n, off, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, c->mctx);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[120];
                pcre2_get_error_message(rc, msg, sizeof(msg));
                qc_errf(c->err, c->errlen, "pre-tokenizer regex failed: %s", (const char *)msg);
                return -1;
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
            size_t s = ov[0], e = ov[1];
            if (e < s) e = s; /* \K tricks; never produce a backwards span */
            if (prev != s && s > prev && push_span(c, k, prev, s, 0)) return -1;
            if (push_span(c, k, s, e, 1)) return -1;
            prev = e > prev ? e : prev;
            if (e == s) { /* empty match: step over one character, as Oniguruma's iterator does */
                if (e >= n) break;
                uint32_t cp;
                size_t l = utf8_decode((const unsigned char *)p + e, n - e, &cp);
                off = e + (l ? l : 1);
            } else {
                off = e;
            }
        }
    }
    if (prev != n && push_span(c, k, prev, n, 0)) return -1;
    return 0;
}

/* Apply the split behavior in place: afterwards .m means "drop this span". */
static void apply_behavior(enc_ctx *c, size_t k, int behavior, int invert) {
    span *v = c->lv[k].v;
    size_t n = c->lv[k].n, o = 0;
    if (invert)
        for (size_t i = 0; i < n; i++) v[i].m = !v[i].m;
    int prev = 0;
    switch (behavior) {
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) v[i].m = 0;
        return;
    case SPLIT_REMOVED:
        return;
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            int m = v[i].m;
            if (o && m == prev) v[o - 1].e = v[i].e;
            else v[o++] = (span){v[i].s, v[i].e, 0};
            prev = m;
        }
        break;
    case SPLIT_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            int m = v[i].m;
            if (o && m && !prev) v[o - 1].e = v[i].e;
            else v[o++] = (span){v[i].s, v[i].e, 0};
            prev = m;
        }
        break;
    case SPLIT_MERGED_NEXT: /* walk backwards, growing the following span to the left */
        for (size_t i = n; i-- > 0;) {
            int m = v[i].m;
            if (o && m && !prev) v[n - o].s = v[i].s;
            else {
                v[n - 1 - o] = (span){v[i].s, v[i].e, 0};
                o++;
            }
            prev = m;
        }
        memmove(v, v + (n - o), o * sizeof(span));
        break;
    }
    c->lv[k].n = o;
}

static int split_and_recurse(enc_ctx *c, size_t k, const char *p, size_t n) {
    const tok_step *st = &c->t->steps[k];
    if (!st->re && !st->has_literal) return run_steps(c, k + 1, p, n);
    if (find_spans(c, k, st, p, n)) return -1;
    apply_behavior(c, k, st->behavior, st->invert);
    for (size_t i = 0; i < c->lv[k].n; i++) {
        span sp = c->lv[k].v[i];
        if (!sp.m && sp.e > sp.s && run_steps(c, k + 1, p + sp.s, sp.e - sp.s)) return -1;
    }
    return 0;
}

static int run_steps(enc_ctx *c, size_t k, const char *p, size_t n) {
    if (!n) return 0;
    if (k == c->t->n_steps) return bpe_word(c, p, n);
    const tok_step *st = &c->t->steps[k];
    if (st->bytelevel && st->add_prefix_space && p[0] != ' ') {
        char *buf = malloc(n + 1);
        if (!buf) {
            qc_errf(c->err, c->errlen, "out of memory");
            return -1;
        }
        buf[0] = ' ';
        memcpy(buf + 1, p, n);
        int rc = split_and_recurse(c, k, buf, n + 1);
        free(buf);
        return rc;
    }
    return split_and_recurse(c, k, p, n);
}

static int is_word_char(const qc_tokenizer *t, uint32_t cp) {
    (void)t;
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z') || cp == '_';
    /* beyond ASCII: letters, marks and digits per PCRE2's Unicode tables */
    static const char pat[] = "^[\\p{L}\\p{M}\\p{Nd}\\p{Pc}]";
    char u[4];
    size_t l = utf8_encode(cp, u);
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, sizeof(pat) - 1, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re) return 0;
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int ok = md && pcre2_match(re, (PCRE2_SPTR)u, l, 0, 0, md, NULL) >= 0;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return ok;
}

static uint32_t last_cp(const char *s, size_t n) {
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i > 0) i--;
    uint32_t cp = 0;
    return utf8_decode((const unsigned char *)s + i, n - i, &cp) ? cp : 0;
}

/* Split p[0..n) on added tokens of set k (leftmost-longest), sending the gaps on. */
static int split_added(enc_ctx *c, int k, int parse_special, const char *p, size_t n) {
    const qc_tokenizer *t = c->t;
    size_t start_off = 0, i = 0;
    while (i < n) {
        unsigned b = (unsigned char)p[i];
        int32_t hit = -1;
        for (size_t j = t->bucket[k][b]; j < t->bucket[k][b + 1]; j++) {
            const tok_entry *e = &t->tok[t->match_ids[k][j]];
            if (e->len <= n - i && memcmp(p + i, e->text, e->len) == 0) {
                hit = t->match_ids[k][j];
                break;
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        const tok_entry *e = &t->tok[hit];
        size_t s = i, stop = i + e->len;
        i = stop; /* the matcher resumes after the match even when it is discarded */
        if (e->special && !parse_special) continue;
        if (e->single_word) {
            uint32_t cp = 0;
            int before = s > 0 && is_word_char(t, last_cp(p, s));
            int after = stop < n && utf8_decode((const unsigned char *)p + stop, n - stop, &cp) && is_word_char(t, cp);
            if (before || after) continue;
        }
        if (e->lstrip) {
            size_t ns = s;
            while (ns > start_off) {
                uint32_t cp = last_cp(p, ns);
                if (!is_white_space(cp)) break;
                size_t l = ns;
                while (l > 0 && ((unsigned char)p[l - 1] & 0xC0) == 0x80) l--;
                ns = l - 1;
            }
            s = ns;
        }
        if (e->rstrip) {
            uint32_t cp;
            size_t l;
            while (stop < n && (l = utf8_decode((const unsigned char *)p + stop, n - stop, &cp)) && is_white_space(cp))
                stop += l;
            i = stop;
        }
        if (s > start_off) {
            int rc = k == 0 && t->n_match[1] ? split_added(c, 1, parse_special, p + start_off, s - start_off)
                                             : run_steps(c, 0, p + start_off, s - start_off);
            if (rc) return -1;
        }
        if (emit(c, hit)) return -1;
        start_off = stop;
    }
    if (start_off < n)
        return k == 0 && t->n_match[1] ? split_added(c, 1, parse_special, p + start_off, n - start_off)
                                       : run_steps(c, 0, p + start_off, n - start_off);
    return 0;
}

int qc_tokenizer_encode(const qc_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                        int32_t **ids, size_t *n_ids, char *err, size_t errlen) {
    *ids = NULL;
    *n_ids = 0;
    if (!t || (!text && len)) {
        qc_errf(err, errlen, "encode: no tokenizer or text");
        return -1;
    }
    size_t bad = utf8_check(text, len);
    if (bad != len) {
        qc_errf(err, errlen, "encode: text is not valid UTF-8 (byte %zu)", bad);
        return -1;
    }
    enc_ctx c;
    memset(&c, 0, sizeof(c));
    c.t = t;
    c.err = err;
    c.errlen = errlen;
    c.md = pcre2_match_data_create(8, NULL);
    c.mctx = pcre2_match_context_create(NULL);
    int rc = -1;
    if (!c.md || !c.mctx) {
        qc_errf(err, errlen, "out of memory");
        goto done;
    }
    pcre2_set_match_limit(c.mctx, TOK_MATCH_LIMIT);
    if (add_bos < 0) add_bos = t->add_bos;
    if (add_bos && t->bos >= 0 && emit(&c, t->bos)) goto done;
    if (len) {
        const int first = t->n_match[0] ? 0 : 1;
        int r = (first == 0 || t->n_match[1]) ? split_added(&c, first, parse_special, text, len)
                                                : run_steps(&c, 0, text, len);
        if (r) goto done;
    }
    rc = 0;
done:
    for (size_t k = 0; k < TOK_MAX_STEPS; k++) free(c.lv[k].v);
    free(c.syms);
    free(c.heap);
    free(c.mapped);
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mctx);
    if (rc) {
        free(c.out);
        return -1;
    }
    if (!c.out) c.out = malloc(sizeof(int32_t)); /* a valid pointer even for no ids */
    *ids = c.out;
    *n_ids = c.n;
    return 0;
}

/* ---- decoding ------------------------------------------------------------ */

int qc_tokenizer_piece(const qc_tokenizer *t, int32_t id, char *buf, size_t cap, size_t *len) {
    if (!t || id < 0 || (size_t)id >= t->n_vocab || !t->tok[id].text) {
        if (len) *len = 0;
        return -1;
    }
    const tok_entry *e = &t->tok[id];
    if (buf && cap) memcpy(buf, e->piece, e->piece_len < cap ? e->piece_len : cap);
    if (len) *len = e->piece_len;
    return 0;
}

/* Append bytes, replacing each maximal ill-formed subpart with U+FFFD (as Rust's
 * String::from_utf8_lossy, which HF's decoders use). */
static size_t lossy_copy(const unsigned char *s, size_t n, char *out) {
    size_t i = 0, o = 0;
    while (i < n) {
        uint32_t cp;
        size_t l = s[i] < 0x80 ? 1 : utf8_decode(s + i, n - i, &cp);
        if (l) {
            memcpy(out + o, s + i, l);
            o += l;
            i += l;
            continue;
        }
        /* length of the valid prefix of a sequence that then breaks */
        unsigned c0 = s[i];
        size_t want = c0 >= 0xC2 && c0 <= 0xDF ? 2 : c0 >= 0xE0 && c0 <= 0xEF ? 3 : c0 >= 0xF0 && c0 <= 0xF4 ? 4 : 1;
        size_t k = 1;
        unsigned lo = c0 == 0xE0 ? 0xA0 : c0 == 0xF0 ? 0x90 : 0x80, hi = c0 == 0xED ? 0x9F : c0 == 0xF4 ? 0x8F : 0xBF;
        while (k < want && i + k < n && s[i + k] >= lo && s[i + k] <= hi) {
            k++;
            lo = 0x80;
            hi = 0xBF;
        }
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
        i += k;
    }
    return o;
}

char *qc_tokenizer_decode(const qc_tokenizer *t, const int32_t *ids, size_t n, int skip_special) {
    if (!t) return NULL;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= t->n_vocab || !t->tok[id].text) continue;
        if (skip_special && t->tok[id].special) continue;
        total += t->tok[id].piece_len;
    }
    unsigned char *raw = malloc(total + 1);
    char *out = raw ? malloc(total * 3 + 1) : NULL; /* every byte may become U+FFFD */
    if (!out) {
        free(raw);
        return NULL;
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || (size_t)id >= t->n_vocab || !t->tok[id].text) continue;
        if (skip_special && t->tok[id].special) continue;
        memcpy(raw + o, t->tok[id].piece, t->tok[id].piece_len);
        o += t->tok[id].piece_len;
    }
    size_t m = lossy_copy(raw, o, out);
    out[m] = 0;
    free(raw);
    return out;
}

/* ---- accessors ----------------------------------------------------------- */

size_t qc_tokenizer_vocab_size(const qc_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t qc_tokenizer_bos(const qc_tokenizer *t) { return t ? t->bos : -1; }
int32_t qc_tokenizer_eos(const qc_tokenizer *t) { return t ? t->eos : -1; }
int32_t qc_tokenizer_eot(const qc_tokenizer *t) { return t ? t->eot : -1; }
int qc_tokenizer_add_bos_default(const qc_tokenizer *t) { return t ? t->add_bos : 0; }
const char *qc_tokenizer_template_name(const qc_tokenizer *t) { return t ? t->tpl_name : NULL; }
const char *qc_tokenizer_pre_name(const qc_tokenizer *t) { return t ? t->pre_name : NULL; }

int qc_tokenizer_is_special(const qc_tokenizer *t, int32_t id) {
    return t && id >= 0 && (size_t)id < t->n_vocab && t->tok[id].special;
}

int32_t qc_tokenizer_find(const qc_tokenizer *t, const char *text, size_t len) {
    if (!t || !text) return -1;
    int32_t id = strmap_get(&t->added, text, len);
    return id >= 0 ? id : strmap_get(&t->model, text, len);
}

int qc_tokenizer_is_eog(const qc_tokenizer *t, int32_t id) {
    static const char *const names[] = {"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end_of_text|>",
                                        "</s>", "<end_of_turn>", "<|end|>", NULL};
    if (!t || id < 0 || (size_t)id >= t->n_vocab) return 0;
    if (id == t->eos || id == t->eot) return 1;
    const tok_entry *e = &t->tok[id];
    if (!e->special || !e->text) return 0;
    for (int i = 0; names[i]; i++)
        if (e->len == strlen(names[i]) && !memcmp(e->text, names[i], e->len)) return 1;
    return 0;
}

/* ---- chat rendering ------------------------------------------------------- */

typedef struct obuf {
    char *p;
    size_t n, cap;
    int failed;
} obuf;

static void ob_add(obuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (grow((void **)&b->p, &b->cap, b->n + n + 1, 1)) {
        b->failed = 1;
        return;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void ob_str(obuf *b, const char *s) { ob_add(b, s, strlen(s)); }

/* Python's str.strip() (what Jinja's trim does), optionally only one side. */
static void py_strip(const char *s, const char **ps, size_t *pn, int left, int right) {
    size_t n = strlen(s), a = 0, z = n;
    uint32_t cp;
    size_t l;
    while (left && a < z && (l = utf8_decode((const unsigned char *)s + a, z - a, &cp)) && is_py_space(cp)) a += l;
    while (right && z > a) {
        size_t q = z - 1;
        while (q > a && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
        if (!(l = utf8_decode((const unsigned char *)s + q, z - q, &cp)) || !is_py_space(cp)) break;
        z = q;
    }
    *ps = s + a;
    *pn = z - a;
}

static void ob_trim(obuf *b, const char *s) {
    const char *p;
    size_t n;
    py_strip(s, &p, &n, 1, 1);
    ob_add(b, p, n);
}

static const char *tok_text(const qc_tokenizer *t, int32_t id) {
    return id >= 0 && (size_t)id < t->n_vocab && t->tok[id].text ? t->tok[id].text : "";
}

static int role_is(const qc_chat_message *m, const char *r) { return m->role && !strcmp(m->role, r); }

/* Strip only '\n' on one or both sides (Python's strip('\n') / lstrip / rstrip). */
static void nl_strip(const char *s, size_t n, const char **ps, size_t *pn, int left, int right) {
    size_t a = 0, z = n;
    while (left && a < z && s[a] == '\n') a++;
    while (right && z > a && s[z - 1] == '\n') z--;
    *ps = s + a;
    *pn = z - a;
}

static const char *memrfind(const char *h, size_t hn, const char *needle) {
    size_t nn = strlen(needle);
    if (nn > hn) return NULL;
    for (size_t i = hn - nn + 1; i-- > 0;)
        if (memcmp(h + i, needle, nn) == 0) return h + i;
    return NULL;
}

/* Qwen's tool results: consecutive tool messages share one user turn. */
static void chatml_tool(obuf *b, const qc_chat_message *m, size_t i, size_t n) {
    if (i == 0 || !role_is(&m[i - 1], "tool")) ob_str(b, "<|im_start|>user");
    ob_str(b, "\n<tool_response>\n");
    ob_str(b, m[i].content);
    ob_str(b, "\n</tool_response>");
    if (i + 1 == n || !role_is(&m[i + 1], "tool")) ob_str(b, "<|im_end|>\n");
}

static void render_qwen3(const qc_tokenizer *t, obuf *b, const qc_chat_message *m, size_t n, int gen) {
    (void)t;
    if (n && role_is(&m[0], "system")) {
        ob_str(b, "<|im_start|>system\n");
        ob_str(b, m[0].content);
        ob_str(b, "<|im_end|>\n");
    }
    /* the last user turn that is not a tool response */
    size_t last_query = n ? n - 1 : 0;
    for (size_t i = n; i-- > 0;) {
        const char *c = m[i].content;
        size_t cl = strlen(c);
        int tool_resp = cl >= 15 && !strncmp(c, "<tool_response>", 15) && cl >= 16 &&
                        !strcmp(c + cl - 16, "</tool_response>");
        if (role_is(&m[i], "user") && !tool_resp) {
            last_query = i;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *content = m[i].content;
        size_t cl = strlen(content);
        if (role_is(&m[i], "user") || (role_is(&m[i], "system") && i > 0)) {
            ob_str(b, "<|im_start|>");
            ob_str(b, m[i].role);
            ob_str(b, "\n");
            ob_add(b, content, cl);
            ob_str(b, "<|im_end|>\n");
        } else if (role_is(&m[i], "assistant")) {
            const char *body = content, *reason = "";
            size_t bl = cl, rl = 0;
            const char *close = memfind(content, cl, "</think>");
            if (close) {
                /* reasoning: before the first </think>, after the last <think>; content after the last </think> */
                const char *pre = content;
                size_t pl = (size_t)(close - content);
                nl_strip(pre, pl, &pre, &pl, 0, 1);
                const char *open = memrfind(pre, pl, "<think>");
                if (open) {
                    pl -= (size_t)(open + 7 - pre);
                    pre = open + 7;
                }
                nl_strip(pre, pl, &reason, &rl, 1, 0);
                const char *lastc = memrfind(content, cl, "</think>") + 8;
                nl_strip(lastc, cl - (size_t)(lastc - content), &body, &bl, 1, 0);
            }
            ob_str(b, "<|im_start|>assistant\n");
            if (i > last_query && (i + 1 == n || rl)) {
                const char *r;
                size_t rn;
                nl_strip(reason, rl, &r, &rn, 1, 1);
                ob_str(b, "<think>\n");
                ob_add(b, r, rn);
                ob_str(b, "\n</think>\n\n");
                nl_strip(body, bl, &body, &bl, 1, 0);
            }
            ob_add(b, body, bl);
            ob_str(b, "<|im_end|>\n");
        } else if (role_is(&m[i], "tool")) {
            chatml_tool(b, m, i, n);
        }
    }
    if (gen) ob_str(b, "<|im_start|>assistant\n");
}

static void llama3_turn(obuf *b, const char *role, const char *content) {
    ob_str(b, "<|start_header_id|>");
    ob_str(b, role);
    ob_str(b, "<|end_header_id|>\n\n");
    ob_trim(b, content);
    ob_str(b, "<|eot_id|>");
}

char *qc_tokenizer_chat(const qc_tokenizer *t, const qc_chat_message *msgs, size_t n, int add_generation_prompt,
                        char *err, size_t errlen) {
    if (!t) {
        qc_errf(err, errlen, "chat: no tokenizer");
        return NULL;
    }
    if (t->tpl == TPL_NONE) {
        qc_errf(err, errlen, "chat: the model has no chat template");
        return NULL;
    }
    if (t->tpl == TPL_UNKNOWN) {
        qc_errf(err, errlen, "chat: the model's chat template is not one qcore knows (chatml, llama3, llama3.1, "
                "llama2, mistral); templates are not evaluated");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) {
            qc_errf(err, errlen, "chat: message %zu has no role or content", i);
            return NULL;
        }
    obuf b = {0};
    ob_add(&b, "", 0);
    switch (t->tpl) {
    case TPL_CHATML:
        for (size_t i = 0; i < n; i++) {
            if (i == 0 && t->tpl_system && !role_is(&msgs[0], "system")) {
                ob_str(&b, "<|im_start|>system\n");
                ob_str(&b, t->tpl_system);
                ob_str(&b, "<|im_end|>\n");
            }
            if (t->tpl_tools && role_is(&msgs[i], "tool")) {
                chatml_tool(&b, msgs, i, n);
                continue;
            }
            ob_str(&b, "<|im_start|>");
            ob_str(&b, msgs[i].role);
            ob_str(&b, "\n");
            ob_str(&b, msgs[i].content);
            ob_str(&b, "<|im_end|>\n");
        }
        if (add_generation_prompt) ob_str(&b, "<|im_start|>assistant\n");
        break;
    case TPL_QWEN3:
        render_qwen3(t, &b, msgs, n, add_generation_prompt);
        break;
    case TPL_LLAMA3:
        for (size_t i = 0; i < n; i++) {
            if (i == 0) ob_str(&b, tok_text(t, t->bos));
            llama3_turn(&b, msgs[i].role, msgs[i].content);
        }
        if (add_generation_prompt) ob_str(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    case TPL_LLAMA31: {
        ob_str(&b, tok_text(t, t->bos));
        size_t first = n && role_is(&msgs[0], "system") ? 1 : 0;
        char date[64];
        if (t->tpl_today) {
            time_t now = time(NULL);
            struct tm tmv;
            localtime_r(&now, &tmv); /* transformers' strftime_now uses local time */
            strftime(date, sizeof(date), "%d %b %Y", &tmv);
        } else {
            qc_strlcpy(date, t->tpl_date ? t->tpl_date : "26 Jul 2024", sizeof(date));
        }
        ob_str(&b, "<|start_header_id|>system<|end_header_id|>\n\n");
        ob_str(&b, "Cutting Knowledge Date: December 2023\nToday Date: ");
        ob_str(&b, date);
        ob_str(&b, "\n\n");
        if (first) ob_trim(&b, msgs[0].content);
        ob_str(&b, "<|eot_id|>");
        for (size_t i = first; i < n; i++) llama3_turn(&b, msgs[i].role, msgs[i].content);
        if (add_generation_prompt) ob_str(&b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        break;
    }
    case TPL_LLAMA2:
    case TPL_MISTRAL: {
        size_t first = t->tpl == TPL_LLAMA2 && n && role_is(&msgs[0], "system") ? 1 : 0;
        if (t->tpl == TPL_MISTRAL) ob_str(&b, tok_text(t, t->bos));
        for (size_t i = first; i < n; i++) {
            int user = role_is(&msgs[i], "user");
            if (user != ((i - first) % 2 == 0) || (!user && !role_is(&msgs[i], "assistant"))) {
                free(b.p);
                qc_errf(err, errlen, "chat: %s template needs alternating user/assistant turns after an optional "
                        "system message (message %zu is \"%.20s\")", t->tpl_name, i, msgs[i].role);
                return NULL;
            }
            obuf content = {0};
            ob_add(&content, "", 0);
            if (first && i == 1) {
                ob_str(&content, "<<SYS>>\n");
                ob_str(&content, msgs[0].content);
                ob_str(&content, "\n<</SYS>>\n\n");
            }
            ob_str(&content, msgs[i].content);
            if (content.failed) {
                free(content.p);
                b.failed = 1;
                break;
            }
            if (t->tpl == TPL_LLAMA2) {
                if (user) {
                    ob_str(&b, tok_text(t, t->bos));
                    ob_str(&b, "[INST] ");
                    ob_trim(&b, content.p);
                    ob_str(&b, " [/INST]");
                } else {
                    ob_str(&b, " ");
                    ob_trim(&b, content.p);
                    ob_str(&b, " ");
                    ob_str(&b, tok_text(t, t->eos));
                }
            } else if (user) {
                ob_str(&b, "[INST] ");
                ob_str(&b, content.p);
                ob_str(&b, " [/INST]");
            } else {
                ob_str(&b, content.p);
                ob_str(&b, tok_text(t, t->eos));
            }
            free(content.p);
        }
        break;
    }
    default:
        break;
    }
    if (b.failed) {
        free(b.p);
        qc_errf(err, errlen, "chat: out of memory");
        return NULL;
    }
    return b.p;
}

/* test_tokenizer.c - the tokenizer on hand-built vocabularies: BPE order, special tokens, decoding, refusals, chat templates. */
#include <jansson.h>
#include <time.h>

#include "qc_test.h"
#include "qc_tokenizer.h"
#include "qc_util.h"
#ifdef QC_TOK_HAVE_GGUF
#include "qc_gguf.h"
#endif

/* GPT-2's byte-to-unicode rule, written out again here so the test does not trust the code under test. */
static void byte_char(unsigned b, char *out) {
    unsigned cp = b, n = 0;
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!printable) {
        for (unsigned x = 0; x < b; x++)
            if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* Merges of the small vocabulary; their results get ids 256.. in this order. */
static const char *const MERGES[][2] = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"\xC4\xA0", "w"}, {"o", "r"},
    {"\xC4\xA0w", "or"}, {"\xC4\xA0wor", "l"}, {"\xC4\xA0worl", "d"}, {"a", "a"},
};
#define N_MERGES (sizeof(MERGES) / sizeof(MERGES[0]))
enum { ID_HELLO = 259, ID_WORLD = 264, ID_AA = 265, ID_IM_START = 266, ID_IM_END = 267, ID_EOT = 268 };

/* A complete tokenizer.json: 256 byte tokens, the merges above, three special tokens. */
static json_t *base_json(void) {
    json_t *vocab = json_object(), *merges = json_array();
    char c[4];
    for (unsigned b = 0; b < 256; b++) {
        byte_char(b, c);
        json_object_set_new(vocab, c, json_integer(b));
    }
    for (size_t i = 0; i < N_MERGES; i++) {
        char m[64], r[64];
        snprintf(m, sizeof(m), "%s %s", MERGES[i][0], MERGES[i][1]);
        snprintf(r, sizeof(r), "%s%s", MERGES[i][0], MERGES[i][1]);
        json_array_append_new(merges, json_string(m));
        json_object_set_new(vocab, r, json_integer(256 + (json_int_t)i));
    }
    json_t *added = json_array();
    const char *specials[] = {"<|im_start|>", "<|im_end|>", "<|endoftext|>"};
    for (int i = 0; i < 3; i++)
        json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", ID_IM_START + i, "content",
                                               specials[i], "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                               "special", 1));
    return json_pack("{s:s, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:n, s:{s:s}, s:{s:s, s:n, s:n, s:o, s:o}}", "version",
                     "1.0", "added_tokens", added, "normalizer", "pre_tokenizer", "type", "ByteLevel",
                     "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1, "post_processor", "decoder", "type",
                     "ByteLevel", "model", "type", "BPE", "dropout", "unk_token", "vocab", vocab, "merges", merges);
}

static qc_tokenizer *load(json_t *j, char *err, size_t errlen) {
    char *s = json_dumps(j, JSON_COMPACT);
    qc_tokenizer *t = qc_tokenizer_from_json_memory(s, strlen(s), err, errlen);
    free(s);
    return t;
}

/* Encode and compare with the expected ids. */
static int encodes_to(const qc_tokenizer *t, const char *text, int special, const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n;
    char err[256];
    if (qc_tokenizer_encode(t, text, strlen(text), 0, special, &ids, &n, err, sizeof(err))) {
        fprintf(stderr, "encode \"%s\": %s\n", text, err);
        return 0;
    }
    int ok = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof(*ids)) == 0);
    if (!ok) {
        fprintf(stderr, "encode \"%s\":", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", (int)ids[i]);
        fprintf(stderr, "\n");
    }
    free(ids);
    return ok;
}
#define ENCODES(t, text, special, ...)                                                       \
    do {                                                                                     \
        const int32_t want_[] = {__VA_ARGS__};                                               \
        CHECK(encodes_to(t, text, special, want_, sizeof(want_) / sizeof(want_[0])), "%s", text); \
    } while (0)

static void test_bpe(void) {
    char err[256];
    json_t *j = base_json();
    qc_tokenizer *t = load(j, err, sizeof(err));
    json_decref(j);
    CHECK(t != NULL, "load: %s", err);
    if (!t) return;
    CHECK(qc_tokenizer_vocab_size(t) == 269, "vocab %zu", qc_tokenizer_vocab_size(t));
    ENCODES(t, "hello world", 0, ID_HELLO, ID_WORLD);
    ENCODES(t, "aaa", 0, ID_AA, 'a');        /* equal ranks: leftmost pair first */
    ENCODES(t, "aaaaa", 0, ID_AA, ID_AA, 'a');
    ENCODES(t, "hello  world", 0, ID_HELLO, 32, ID_WORLD); /* "\s+(?!\S)" leaves one space to " world" */
    ENCODES(t, "it's", 0, 'i', 't', '\'', 's');
    ENCODES(t, "<|im_start|>hello<|im_end|>", 1, ID_IM_START, ID_HELLO, ID_IM_END);
    ENCODES(t, "<|im_end", 1, '<', '|', 'i', 'm', '_', 'e', 'n', 'd');
    ENCODES(t, "<|im_start|>", 0, '<', '|', 'i', 'm', '_', 's', 't', 'a', 'r', 't', '|', '>');
    /* a byte outside ASCII maps to its own character token (0xC3 0xA9 = "é") */
    ENCODES(t, "\xC3\xA9", 0, 0xC3, 0xA9);

    int32_t *ids = (int32_t *)1;
    size_t n = 99;
    CHECK(qc_tokenizer_encode(t, "", 0, 0, 1, &ids, &n, err, sizeof(err)) == 0 && n == 0 && ids, "empty text");
    free(ids);
    CHECK(qc_tokenizer_encode(t, "a\xC3", 2, 0, 1, &ids, &n, err, sizeof(err)) == -1, "invalid UTF-8 accepted");
    CHECK_CONTAINS(err, "not valid UTF-8");
    CHECK(qc_tokenizer_encode(t, "\xED\xA0\x80", 3, 0, 1, &ids, &n, err, sizeof(err)) == -1, "surrogate accepted");

    /* pieces and decoding */
    char buf[16];
    size_t len;
    CHECK(qc_tokenizer_piece(t, 32, buf, sizeof(buf), &len) == 0 && len == 1 && buf[0] == ' ', "piece of space");
    CHECK(qc_tokenizer_piece(t, ID_WORLD, buf, sizeof(buf), &len) == 0 && len == 6 && !memcmp(buf, " world", 6),
          "piece of \" world\"");
    CHECK(qc_tokenizer_piece(t, ID_IM_END, buf, sizeof(buf), &len) == 0 && len == 10 && !memcmp(buf, "<|im_end|>", 10),
          "piece of a special token");
    CHECK(qc_tokenizer_piece(t, 0xC3, buf, sizeof(buf), &len) == 0 && len == 1 && (unsigned char)buf[0] == 0xC3,
          "piece of a partial UTF-8 byte");
    CHECK(qc_tokenizer_piece(t, 269, buf, sizeof(buf), &len) == -1, "piece of an id beyond the vocabulary");
    CHECK(qc_tokenizer_piece(t, -1, buf, sizeof(buf), &len) == -1, "piece of -1");
    const int32_t seq[] = {ID_IM_START, ID_HELLO, 0xC3, 0xA9, ID_WORLD, 0xC3, ID_IM_END, 5000, -3};
    char *s = qc_tokenizer_decode(t, seq, 9, 0);
    CHECK(s && !strcmp(s, "<|im_start|>hello\xC3\xA9 world\xEF\xBF\xBD<|im_end|>"), "decode: %s", s ? s : "(null)");
    free(s);
    s = qc_tokenizer_decode(t, seq, 9, 1);
    CHECK(s && !strcmp(s, "hello\xC3\xA9 world\xEF\xBF\xBD"), "decode skipping specials: %s", s ? s : "(null)");
    free(s);
    const int32_t partial[] = {0xE6, 0x9D, 'x', 0xF0, 0x9F, 0x98}; /* cut 3- and 4-byte sequences: one U+FFFD each */
    s = qc_tokenizer_decode(t, partial, 6, 0);
    CHECK(s && !strcmp(s, "\xEF\xBF\xBDx\xEF\xBF\xBD"), "lossy decode: %s", s ? s : "(null)");
    free(s);

    CHECK(qc_tokenizer_is_eog(t, ID_IM_END) && qc_tokenizer_is_eog(t, ID_EOT), "<|im_end|> and <|endoftext|> end");
    CHECK(!qc_tokenizer_is_eog(t, ID_IM_START) && !qc_tokenizer_is_eog(t, ID_HELLO), "not end of generation");
    CHECK(qc_tokenizer_find(t, "<|im_end|>", 10) == ID_IM_END, "find");
    CHECK(qc_tokenizer_template_name(t) == NULL, "no template");
    s = qc_tokenizer_chat(t, NULL, 0, 1, err, sizeof(err));
    CHECK(!s, "chat without a template");
    CHECK_CONTAINS(err, "no chat template");

    /* speed: 400 KB of prose, and one 100 KB word (the heap keeps BPE n log n) */
    size_t big = 400000;
    char *text = malloc(big + 1);
    const char *unit = "hello world, it's 12345 aaa  \n";
    for (size_t i = 0; i < big; i++) text[i] = unit[i % strlen(unit)];
    text[big] = 0;
    clock_t c0 = clock();
    CHECK(qc_tokenizer_encode(t, text, big, 0, 1, &ids, &n, err, sizeof(err)) == 0, "big text: %s", err);
    double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
    s = qc_tokenizer_decode(t, ids, n, 0);
    CHECK(s && !strcmp(s, text), "big text round trip");
    free(s);
    free(ids);
    memset(text, 'a', 100000);
    c0 = clock();
    CHECK(qc_tokenizer_encode(t, text, 100000, 0, 1, &ids, &n, err, sizeof(err)) == 0 && n == 50000,
          "one long word: %zu ids", n);
    dt += (double)(clock() - c0) / CLOCKS_PER_SEC;
    free(ids);
    free(text);
    printf("encoded 500 KB in %.2f s of CPU\n", dt);
    CHECK(dt < 20, "encoding is too slow: %.1f s", dt);
    qc_tokenizer_free(t);
}

/* Added tokens with lstrip / rstrip / single_word, non-special added tokens, and BOS from the post-processor. */
static void test_added_tokens(void) {
    char err[256];
    json_t *j = base_json();
    json_t *added = json_object_get(j, "added_tokens");
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 269, "content", "<mask>",
                                           "single_word", 0, "lstrip", 1, "rstrip", 1, "normalized", 0, "special", 1));
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 270, "content", "cat",
                                           "single_word", 1, "lstrip", 0, "rstrip", 0, "normalized", 1, "special", 0));
    json_object_set_new(j, "post_processor",
                        json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[i], s:[s]}}}", "type",
                                  "TemplateProcessing", "single", "SpecialToken", "id", "<|endoftext|>", "type_id", 0,
                                  "Sequence", "id", "A", "type_id", 0, "special_tokens", "<|endoftext|>", "id",
                                  "<|endoftext|>", "ids", ID_EOT, "tokens", "<|endoftext|>"));
    qc_tokenizer *t = load(j, err, sizeof(err));
    json_decref(j);
    CHECK(t != NULL, "load: %s", err);
    if (!t) return;
    ENCODES(t, "a  <mask>  a", 1, 'a', 269, 'a');   /* the spaces on both sides belong to <mask> */
    ENCODES(t, "a  <mask>  a", 0, 'a', 32, 32, '<', 'm', 'a', 's', 'k', '>', 32, 32, 'a'); /* special: not parsed */
    ENCODES(t, "cat", 0, 270);                      /* non-special added tokens are always split out */
    ENCODES(t, "a cat.", 0, 'a', 32, 270, '.');
    ENCODES(t, "cats", 0, 'c', 'a', 't', 's');      /* single_word: not inside a word */
    ENCODES(t, "xcat", 0, 'x', 'c', 'a', 't');
    CHECK(qc_tokenizer_bos(t) == ID_EOT && qc_tokenizer_add_bos_default(t) == 1, "BOS from TemplateProcessing");
    int32_t *ids;
    size_t n;
    CHECK(qc_tokenizer_encode(t, "aa", 2, -1, 1, &ids, &n, err, sizeof(err)) == 0 && n == 2 && ids[0] == ID_EOT &&
              ids[1] == ID_AA,
          "default BOS");
    free(ids);
    CHECK(qc_tokenizer_encode(t, "aa", 2, 0, 1, &ids, &n, err, sizeof(err)) == 0 && n == 1, "no BOS");
    free(ids);
    qc_tokenizer_free(t);
}

/* Each malformed tokenizer.json is refused with a message naming the problem. */
static void refuse(json_t *j, const char *what, const char *needle) {
    char err[512] = "";
    char *s = json_dumps(j, JSON_COMPACT);
    qc_tokenizer *t = qc_tokenizer_from_json_memory(s, strlen(s), err, sizeof(err));
    CHECK(t == NULL, "%s: accepted", what);
    CHECK(qc_test_contains(err, needle), "%s: error \"%s\" lacks \"%s\"", what, err, needle);
    qc_tokenizer_free(t);
    free(s);
    json_decref(j);
}

static json_t *with(json_t *j, const char *path1, const char *key, json_t *v) {
    json_t *o = path1 ? json_object_get(j, path1) : j;
    json_object_set_new(o, key, v);
    return j;
}

static void test_refusals(void) {
    char err[512];
    static const char *const texts[][2] = {
        {"", "tokenizer.json"},
        {"{", "tokenizer.json"},
        {"[1,2]", "not a JSON object"},
        {"{\"model\": 1}", "no model object"},
        {"{\"model\": {\"vocab\": {}, \"merges\": []}, \"model\": {}}", "duplicate"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"a\": 1}, \"merges\": []}}", "duplicate"},
        {"{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", "only BPE"},
        {"{\"model\": {\"type\": \"BPE\", \"vocab\": {}, \"merges\": []}}", "ids are too sparse or missing"},
    };
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        err[0] = 0;
        qc_tokenizer *t = qc_tokenizer_from_json_memory(texts[i][0], strlen(texts[i][0]), err, sizeof(err));
        CHECK(!t && qc_test_contains(err, texts[i][1]), "text %zu: \"%s\" (want \"%s\")", i, err, texts[i][1]);
        qc_tokenizer_free(t);
    }
    refuse(with(base_json(), "model", "dropout", json_real(0.1)), "dropout", "dropout");
    refuse(with(base_json(), "model", "continuing_subword_prefix", json_string("##")), "prefix",
           "continuing_subword_prefix");
    refuse(with(base_json(), "model", "end_of_word_suffix", json_string("</w>")), "suffix", "end_of_word_suffix");
    refuse(with(base_json(), "model", "byte_fallback", json_string("yes")), "bool", "true or false");
    refuse(with(base_json(), "model", "unk_token", json_integer(3)), "unk type", "unk_token");
    json_t *j = base_json();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "zz", json_integer(-1));
    refuse(j, "negative id", "valid id");
    j = base_json();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "zz", json_integer(12345678));
    refuse(j, "huge id", "valid id");
    j = base_json();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "zz", json_integer(100000));
    refuse(j, "sparse ids", "too sparse");
    j = base_json();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "zz", json_integer(5));
    refuse(j, "id used twice", "used twice");
    j = base_json();
    json_object_set_new(json_object_get(json_object_get(j, "model"), "vocab"), "zz", json_string("1"));
    refuse(j, "string id", "valid id");
    j = base_json();
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_string("q z"));
    refuse(j, "merge result missing", "not in the vocabulary");
    j = base_json();
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_string("\xE4\xB8\xAD a"));
    refuse(j, "merge side missing", "not in the vocabulary");
    j = base_json();
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_string("ab"));
    refuse(j, "merge without space", "left right");
    j = base_json();
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_pack("[s]", "a"));
    refuse(j, "merge pair of one", "left right");
    j = base_json();
    json_array_append_new(json_object_get(json_object_get(j, "model"), "merges"), json_integer(1));
    refuse(j, "merge number", "left right");
    refuse(with(base_json(), "model", "merges", json_object()), "merges object", "merges array");
    refuse(with(base_json(), NULL, "added_tokens", json_object()), "added_tokens object", "array");
    j = base_json();
    json_array_append_new(json_object_get(j, "added_tokens"), json_pack("{s:i}", "id", 300));
    refuse(j, "added token without content", "content");
    j = base_json();
    json_array_append_new(json_object_get(j, "added_tokens"), json_pack("{s:i, s:s, s:i}", "id", 300, "content", "x",
                                                                        "special", 1));
    refuse(j, "added token special not bool", "true or false");
    refuse(with(base_json(), NULL, "pre_tokenizer", json_null()), "no pre-tokenizer", "byte-level");
    refuse(with(base_json(), NULL, "pre_tokenizer", json_pack("{s:s}", "type", "Whitespace")), "Whitespace",
           "\"Whitespace\" is not supported");
    refuse(with(base_json(), NULL, "pre_tokenizer", json_pack("{s:s, s:s}", "type", "Metaspace", "replacement", "_")),
           "Metaspace", "Metaspace");
    refuse(with(base_json(), NULL, "pre_tokenizer", json_pack("{s:s}", "type", "Digits")), "no ByteLevel",
           "ByteLevel");
    refuse(with(base_json(), NULL, "pre_tokenizer",
                json_pack("{s:s, s:[{s:s}, {s:s}]}", "type", "Sequence", "pretokenizers", "type", "ByteLevel", "type",
                          "Digits")),
           "ByteLevel not last", "must end with its only ByteLevel");
    refuse(with(base_json(), NULL, "pre_tokenizer",
                json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}]}", "type", "Sequence", "pretokenizers", "type", "Split",
                          "pattern", "Regex", "(", "behavior", "Isolated", "type", "ByteLevel")),
           "bad regex", "does not compile");
    refuse(with(base_json(), NULL, "pre_tokenizer",
                json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}]}", "type", "Sequence", "pretokenizers", "type", "Split",
                          "pattern", "Regex", "a", "behavior", "Bogus", "type", "ByteLevel")),
           "bad behavior", "behavior");
    refuse(with(base_json(), NULL, "pre_tokenizer",
                json_pack("{s:s, s:[{s:s, s:{s:i}, s:s}, {s:s}]}", "type", "Sequence", "pretokenizers", "type", "Split",
                          "pattern", "Regex", 1, "behavior", "Isolated", "type", "ByteLevel")),
           "pattern not a string", "Split.pattern");
    json_t *deep = json_pack("{s:s}", "type", "ByteLevel");
    for (int i = 0; i < 20; i++) deep = json_pack("{s:s, s:[o]}", "type", "Sequence", "pretokenizers", deep);
    refuse(with(base_json(), NULL, "pre_tokenizer", deep), "deep nesting", "nested too deeply");
    json_t *many = json_array();
    for (int i = 0; i < 20; i++) json_array_append_new(many, json_pack("{s:s, s:b}", "type", "Digits", "individual_digits", 1));
    json_array_append_new(many, json_pack("{s:s}", "type", "ByteLevel"));
    refuse(with(base_json(), NULL, "pre_tokenizer", json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", many)),
           "too many steps", "steps");
    refuse(with(base_json(), NULL, "normalizer", json_pack("{s:s}", "type", "Lowercase")), "normalizer", "normalizer");
    refuse(with(base_json(), NULL, "decoder", json_pack("{s:s}", "type", "WordPiece")), "decoder", "decoder");
    refuse(with(base_json(), NULL, "decoder", json_null()), "no decoder", "decoder");
    refuse(with(base_json(), NULL, "post_processor", json_pack("{s:s}", "type", "BertProcessing")), "post",
           "post_processor");
}

/* The GGUF route: plain arrays as the metadata holds them. */
static void test_spec(void) {
    char err[256];
    const char *toks[300];
    char store[300][8];
    int32_t types[300];
    size_t n = 0;
    for (unsigned b = 0; b < 256; b++) {
        byte_char(b, store[n]);
        toks[n] = store[n];
        types[n++] = 1;
    }
    toks[n] = "ab";
    types[n++] = 1;
    toks[n] = "<|im_start|>";
    types[n++] = 3;
    toks[n] = "<|im_end|>";
    types[n++] = 3;
    toks[n] = "<0x41>";
    types[n++] = 6;
    toks[n] = "\xE4\xB8\xAD"; /* not byte-level text: its piece is the text itself */
    types[n++] = 1;
    const char *merges[] = {"a b"};
    qc_tokenizer_spec spec = {.model = "gpt2", .pre = "smollm", .n_tokens = n, .tokens = toks, .token_types = types,
                              .n_merges = 1, .merges = merges, .bos = 257, .eos = 258, .unk = -1, .pad = -1, .eot = -1,
                              .chat_template = "{{ '<|im_start|>' + message['role'] }}<|im_end|>"};
    qc_tokenizer *t = qc_tokenizer_from_spec(&spec, err, sizeof(err));
    CHECK(t != NULL, "spec: %s", err);
    if (t) {
        ENCODES(t, "ab 123", 0, 256, 32, '1', '2', '3'); /* smollm: digits one by one */
        ENCODES(t, "<|im_start|>ab", 1, 257, 256);
        char buf[8];
        size_t len;
        CHECK(qc_tokenizer_piece(t, 259, buf, sizeof(buf), &len) == 0 && len == 1 && buf[0] == 'A', "byte token");
        CHECK(qc_tokenizer_piece(t, 260, buf, sizeof(buf), &len) == 0 && len == 3 && !memcmp(buf, "\xE4\xB8\xAD", 3),
              "unmappable token");
        CHECK(!strcmp(qc_tokenizer_template_name(t), "chatml") && qc_tokenizer_eot(t) == 258, "chatml, eot");
        CHECK(qc_tokenizer_is_eog(t, 258) && !qc_tokenizer_is_eog(t, 257), "eog");
        qc_tokenizer_free(t);
    }
    qc_tokenizer_spec bad = spec;
    toks[n - 2] = "<0x-1>";
    t = qc_tokenizer_from_spec(&bad, err, sizeof(err));
    CHECK(!t, "<0x-1> byte token accepted");
    CHECK_CONTAINS(err, "<0xHH>");
    qc_tokenizer_free(t);
    toks[n - 2] = "<0x41>";
    bad = spec;
    bad.model = "llama";
    t = qc_tokenizer_from_spec(&bad, err, sizeof(err));
    CHECK(!t, "SentencePiece accepted");
    CHECK_CONTAINS(err, "\"llama\" is not supported");
    bad = spec;
    bad.pre = "deepseek-coder";
    t = qc_tokenizer_from_spec(&bad, err, sizeof(err));
    CHECK(!t, "unknown pre accepted");
    CHECK_CONTAINS(err, "deepseek-coder");
    const char *bad_merges[] = {"ab"}, *missing[] = {"a q"};
    bad = spec;
    bad.merges = bad_merges;
    t = qc_tokenizer_from_spec(&bad, err, sizeof(err));
    CHECK(!t && qc_test_contains(err, "left right"), "merge without a space: %s", err);
    bad.merges = missing;
    t = qc_tokenizer_from_spec(&bad, err, sizeof(err));
    CHECK(!t && qc_test_contains(err, "not in the vocabulary"), "merge of a missing token: %s", err);
    types[0] = 9;
    t = qc_tokenizer_from_spec(&spec, err, sizeof(err));
    CHECK(!t && qc_test_contains(err, "unknown type"), "token type 9: %s", err);
    types[0] = 1;
    bad = spec;
    bad.bos = 100000; /* out of range ids are ignored (with a warning) */
    qc_set_log_level(QC_LOG_ERROR);
    t = qc_tokenizer_from_spec(&bad, err, sizeof(err));
    qc_set_log_level(QC_LOG_WARN);
    CHECK(t && qc_tokenizer_bos(t) == -1, "out-of-range BOS");
    qc_tokenizer_free(t);
}

/* SmolLM2's chat template, byte for byte as its GGUF holds it. */
static const char SMOLLM2_TEMPLATE[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

static char *chat_with(const char *tpl, const qc_chat_message *m, size_t n, int gen, char *err, size_t errlen,
                       const char **name) {
    const char *toks[3] = {"<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"};
    int32_t types[3] = {3, 3, 3};
    qc_tokenizer_spec spec = {.model = "gpt2", .pre = "gpt2", .n_tokens = 3, .tokens = toks, .token_types = types,
                              .bos = 0, .eos = 1, .unk = -1, .pad = -1, .eot = -1, .chat_template = tpl};
    qc_tokenizer *t = qc_tokenizer_from_spec(&spec, err, errlen);
    if (!t) return NULL;
    *name = qc_tokenizer_template_name(t);
    char *out = qc_tokenizer_chat(t, m, n, gen, err, errlen);
    if (*name && !strcmp(*name, "chatml-smollm")) *name = "chatml-smollm"; /* outlive the tokenizer */
    else if (*name) *name = "other";
    qc_tokenizer_free(t);
    return out;
}

static void test_chat(void) {
    char err[256];
    const char *name;
    qc_chat_message user[] = {{"user", "Hi"}};
    char *s = chat_with(SMOLLM2_TEMPLATE, user, 1, 1, err, sizeof(err), &name);
    CHECK(s && !strcmp(s, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                          "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"),
          "SmolLM2 default system prompt: %s", s ? s : err);
    CHECK(name && !strcmp(name, "chatml-smollm"), "template name");
    free(s);
    qc_chat_message sys[] = {{"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}};
    s = chat_with(SMOLLM2_TEMPLATE, sys, 3, 0, err, sizeof(err), &name);
    CHECK(s && !strcmp(s, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                          "<|im_start|>assistant\n4<|im_end|>\n"),
          "SmolLM2 with a system message: %s", s ? s : err);
    free(s);
    s = chat_with(SMOLLM2_TEMPLATE, NULL, 0, 1, err, sizeof(err), &name);
    CHECK(s && !strcmp(s, "<|im_start|>assistant\n"), "SmolLM2, no messages: %s", s ? s : err);
    free(s);

    const char *llama3 = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
                         "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim "
                         "+ '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
                         "{{ content }}{% endfor %}";
    qc_chat_message l3[] = {{"user", "  Hi \n"}};
    s = chat_with(llama3, l3, 1, 1, err, sizeof(err), &name);
    CHECK(s && !strcmp(s, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                          "<|start_header_id|>assistant<|end_header_id|>\n\n"),
          "llama3: %s", s ? s : err);
    free(s);

    const char *mistral = "{{ bos_token }}{% for message in messages %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
                          "{% endfor %}";
    qc_chat_message two_users[] = {{"user", "a"}, {"user", "b"}};
    s = chat_with(mistral, two_users, 2, 0, err, sizeof(err), &name);
    CHECK(!s, "mistral: user after user accepted");
    CHECK_CONTAINS(err, "alternating");
    qc_chat_message ok[] = {{"user", "a"}, {"assistant", "b"}};
    s = chat_with(mistral, ok, 2, 0, err, sizeof(err), &name);
    CHECK(s && !strcmp(s, "<|begin_of_text|>[INST] a [/INST]b<|end_of_text|>"), "mistral: %s", s ? s : err);
    free(s);

    s = chat_with("{% for m in messages %}<start_of_turn>{{ m.content }}{% endfor %}", user, 1, 1, err, sizeof(err),
                  &name);
    CHECK(!s && !name, "unknown template rendered");
    CHECK_CONTAINS(err, "not one qcore knows");
    qc_chat_message nul[] = {{"user", NULL}};
    s = chat_with(SMOLLM2_TEMPLATE, nul, 1, 1, err, sizeof(err), &name);
    CHECK(!s, "NULL content accepted");
}

/* The real model, when set-up has placed it (skipped otherwise). */
static void test_smollm2(void) {
#ifdef QC_TOK_HAVE_GGUF
    const char *path = getenv("QCORE_SMOLLM2_GGUF");
    char def[1024];
    if (!path) {
        snprintf(def, sizeof(def), "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", QC_TEST_SOURCE_DIR);
        path = def;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        printf("skip: SmolLM2: %s is absent (scripts/setup.sh downloads it)\n", path);
        return;
    }
    fclose(f);
    char err[512];
    qc_gguf *g = qc_gguf_open(path, err, sizeof(err));
    CHECK(g != NULL, "gguf: %s", err);
    if (!g) return;
    qc_tokenizer *t = qc_tokenizer_from_gguf(g, err, sizeof(err));
    qc_gguf_close(g); /* the tokenizer keeps copies */
    CHECK(t != NULL, "SmolLM2 tokenizer: %s", err);
    if (!t) return;
    CHECK(qc_tokenizer_vocab_size(t) == 49152, "vocab %zu", qc_tokenizer_vocab_size(t));
    CHECK(qc_tokenizer_bos(t) == 1 && qc_tokenizer_eos(t) == 2 && qc_tokenizer_eot(t) == 2, "bos/eos/eot");
    CHECK(!strcmp(qc_tokenizer_template_name(t), "chatml-smollm"), "template %s", qc_tokenizer_template_name(t));
    CHECK(!strcmp(qc_tokenizer_pre_name(t), "smollm"), "pre %s", qc_tokenizer_pre_name(t));
    /* ids from HF tokenizers on a tokenizer.json built from this GGUF (test_tokenizer_oracle.py) */
    ENCODES(t, "Hello, world! 12345", 0, 19556, 28, 905, 17, 216, 33, 34, 35, 36, 37);
    ENCODES(t, "<|im_start|>user\nHi<|im_end|>\n", 1, 1, 4093, 198, 26843, 2, 198);
    ENCODES(t, " na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xE6\x9D\xB1\xE4\xBA\xAC \xF0\x9F\x98\x80", 0, 15486, 46494, 37366,
            1841, 17097, 247, 126, 16736, 122, 40303, 218);
    qc_chat_message m[] = {{"user", "What is the capital of France?"}};
    char *s = qc_tokenizer_chat(t, m, 1, 1, err, sizeof(err));
    int32_t *ids;
    size_t n;
    CHECK(s && qc_tokenizer_encode(t, s, strlen(s), 0, 1, &ids, &n, err, sizeof(err)) == 0, "chat encode");
    if (s) {
        CHECK(n > 20 && ids[0] == 1 && ids[n - 1] == 198 && ids[n - 2] == 9531, "chat ids start %d end %d %d",
              (int)ids[0], (int)ids[n - 2], (int)ids[n - 1]);
        char *back = qc_tokenizer_decode(t, ids, n, 0);
        CHECK(back && !strcmp(back, s), "chat round trip");
        free(back);
        free(ids);
    }
    free(s);
    qc_tokenizer_free(t);
#else
    printf("skip: SmolLM2 GGUF test: libqcore has no qc_tokenizer_gguf.c yet\n");
#endif
}

int main(void) {
    test_bpe();
    test_added_tokens();
    test_refusals();
    test_spec();
    test_chat();
    test_smollm2();
    return qc_test_finish("test_tokenizer");
}

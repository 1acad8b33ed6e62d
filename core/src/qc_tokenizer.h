/* qc_tokenizer.h - byte-level BPE tokenizer (GGUF metadata or HF tokenizer.json) and chat templates (internal). */
#ifndef QC_TOKENIZER_H
#define QC_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct qc_tokenizer qc_tokenizer;
typedef struct qc_gguf qc_gguf; /* qc_gguf.h */

/* What GGUF metadata holds (section 1 of notes/formats.md).  Strings need not
 * be NUL-terminated where a length is given; everything is copied. */
typedef struct qc_tokenizer_spec {
    const char *model;          /* tokenizer.ggml.model: only "gpt2" (byte-level BPE) */
    const char *pre;            /* tokenizer.ggml.pre: "smollm", "llama-bpe", "qwen2", "gpt2", "default"; NULL = "default" */
    size_t n_tokens;
    const char *const *tokens;  /* byte-to-unicode mapped text, index = id */
    const size_t *token_lens;   /* NULL: tokens are NUL-terminated */
    const int32_t *token_types; /* NULL: all normal; 1 normal 2 unknown 3 control 4 user-defined 5 unused 6 byte */
    size_t n_merges;
    const char *const *merges;  /* "left right", rank = index */
    const size_t *merge_lens;   /* NULL: NUL-terminated */
    int32_t bos, eos, unk, pad, eot; /* -1 when absent */
    int add_bos;                     /* tokenizer.ggml.add_bos_token */
    const char *chat_template;       /* raw Jinja text, only used to recognise known templates */
    size_t chat_template_len;        /* 0 with a non-NULL text: NUL-terminated */
} qc_tokenizer_spec;

qc_tokenizer *qc_tokenizer_from_spec(const qc_tokenizer_spec *spec, char *err, size_t errlen);
/* In qc_tokenizer_gguf.c (needs the GGUF reader). */
qc_tokenizer *qc_tokenizer_from_gguf(const qc_gguf *g, char *err, size_t errlen);
/* tokenizer.json, plus tokenizer_config.json (chat_template, bos/eos, add_bos_token) and
 * chat_template.jinja from the same folder when present. */
qc_tokenizer *qc_tokenizer_from_json(const char *path, char *err, size_t errlen);
/* tokenizer.json text alone (no companion files). */
qc_tokenizer *qc_tokenizer_from_json_memory(const char *json, size_t len, char *err, size_t errlen);
void qc_tokenizer_free(qc_tokenizer *t);

/* Number of id slots (largest id + 1, added tokens included). */
size_t qc_tokenizer_vocab_size(const qc_tokenizer *t);

/* Encode UTF-8 text (invalid UTF-8 is refused).  Added tokens are always split out;
 * special ones ("<|im_start|>") only when parse_special.  add_bos: 1 prepend BOS (when the
 * model has one), 0 never, -1 the model's default.  *ids is malloc'd.  Returns 0, or -1 with err. */
int qc_tokenizer_encode(const qc_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                        int32_t **ids, size_t *n_ids, char *err, size_t errlen);
/* Bytes of one token as it appears in text (byte-level decoded; may be a partial UTF-8
 * sequence).  Writes at most cap bytes, *len gets the full length.  Returns 0, or -1 for a
 * bad id. */
int qc_tokenizer_piece(const qc_tokenizer *t, int32_t id, char *buf, size_t cap, size_t *len);
/* Concatenated pieces as valid UTF-8 (ill-formed sequences become U+FFFD); malloc'd,
 * NUL-terminated.  Ids out of range are skipped. */
char *qc_tokenizer_decode(const qc_tokenizer *t, const int32_t *ids, size_t n, int skip_special);

int32_t qc_tokenizer_bos(const qc_tokenizer *t);
int32_t qc_tokenizer_eos(const qc_tokenizer *t);
int32_t qc_tokenizer_eot(const qc_tokenizer *t);
int qc_tokenizer_add_bos_default(const qc_tokenizer *t);
/* End of generation: eos, eot, and special tokens such as <|im_end|>, <|eot_id|>, <|endoftext|>. */
int qc_tokenizer_is_eog(const qc_tokenizer *t, int32_t id);
int qc_tokenizer_is_special(const qc_tokenizer *t, int32_t id);
/* Id of a token by its vocabulary text (added tokens first), or -1. */
int32_t qc_tokenizer_find(const qc_tokenizer *t, const char *text, size_t len);

typedef struct qc_chat_message {
    const char *role;
    const char *content;
} qc_chat_message;
/* Render a conversation with the model's template, implemented in C for recognised families:
 * chatml (SmolLM2 with its default system prompt, Qwen2 / Qwen2.5, Qwen3), llama3 / llama3.1,
 * llama2 and mistral ([INST]).  An unknown template is an error; Jinja is never evaluated.
 * malloc'd, or NULL with err. */
char *qc_tokenizer_chat(const qc_tokenizer *t, const qc_chat_message *msgs, size_t n, int add_generation_prompt,
                        char *err, size_t errlen);
/* "chatml-smollm", "chatml-qwen2", "chatml-qwen3", "chatml", "llama3", "llama3.1", "llama2",
 * "mistral", or NULL when there is no template or it was not recognised. */
const char *qc_tokenizer_template_name(const qc_tokenizer *t);
/* Pre-tokenizer in words, e.g. "smollm" or "json: Sequence(Digits, ByteLevel)". */
const char *qc_tokenizer_pre_name(const qc_tokenizer *t);

#endif

/* fuzz_tokenizer_json.c - libFuzzer harness: tokenizer.json parsing, then encode / decode / pieces / chat on a fixed text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "qc_tokenizer.h"
#include "qc_util.h"

static const char TEXT[] = "Hello, world! It's 2024: 1234567 <|im_start|>user\n<mask> caf\xC3\xA9 \xE6\x9D\xB1\xE4\xBA\xAC "
                           "\xF0\x9F\x98\x80  \t\r\n   x<|im_end|>\xC2\xA0 \xCC\x81 end";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int quiet;
    if (!quiet) { /* refusals are expected; warnings would drown the fuzzer's output */
        qc_set_log_level(QC_LOG_ERROR);
        quiet = 1;
    }
    char err[256];
    qc_tokenizer *t = qc_tokenizer_from_json_memory((const char *)data, size, err, sizeof(err));
    if (!t) return 0;
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        size_t n;
        if (qc_tokenizer_encode(t, TEXT, sizeof(TEXT) - 1, -1, special, &ids, &n, err, sizeof(err)) == 0) {
            for (size_t i = 0; i < n; i++) {
                char buf[64];
                size_t len;
                if (qc_tokenizer_piece(t, ids[i], buf, sizeof(buf), &len) != 0) abort(); /* encode gave a bad id */
            }
            free(qc_tokenizer_decode(t, ids, n, special));
            free(ids);
        }
    }
    /* ids from the input itself, in and out of range */
    int32_t raw[16];
    size_t nraw = size / 4 < 16 ? size / 4 : 16;
    memcpy(raw, data, nraw * 4);
    free(qc_tokenizer_decode(t, raw, nraw, 0));
    qc_chat_message m[2] = {{"user", "Hi"}, {"assistant", " there "}};
    free(qc_tokenizer_chat(t, m, 2, 1, err, sizeof(err)));
    qc_tokenizer_free(t);
    return 0;
}

/* test_gpu_ledger.c - the device memory ledger: categories, printout, refusals that name sizes, and recovery. */
#define _GNU_SOURCE
#include "gpu_test.h"
#include "qcore/qcore.h"

#define TEST "test_gpu_ledger"
#define MiB ((size_t)1 << 20)
#define KiB ((size_t)1 << 10)

/* The printed row of a category: allocs, then logical, resident, padding and
 * peak as "<number> <unit>". */
typedef struct printed_row {
    size_t allocs;
    double v[4];
    char unit[4][8];
} printed_row;

static int find_row(const char *text, const char *cat, printed_row *r) {
    char needle[40];
    snprintf(needle, sizeof needle, "\n  %s ", cat);
    const char *p = strstr(text, needle);
    if (!p) return 0;
    return sscanf(p + 1, " %*s %zu %lf %7s %lf %7s %lf %7s %lf %7s", &r->allocs, &r->v[0], r->unit[0], &r->v[1],
                  r->unit[1], &r->v[2], r->unit[2], &r->v[3], r->unit[3]) == 9;
}

static void check_row(const char *text, const char *cat, size_t allocs, const char *logical, const char *resident,
                      const char *padding, const char *peak) {
    printed_row r;
    CHECK(find_row(text, cat, &r), "no row for %s in the ledger:\n%s", cat, text);
    char got[4][32];
    for (int i = 0; i < 4; i++) snprintf(got[i], sizeof got[i], "%.2f %s", r.v[i], r.unit[i]);
    CHECK(r.allocs == allocs && strcmp(got[0], logical) == 0 && strcmp(got[1], resident) == 0 &&
              strcmp(got[2], padding) == 0 && strcmp(got[3], peak) == 0,
          "%s row: %zu | %s | %s | %s | %s, expected %zu | %s | %s | %s | %s", cat, r.allocs, got[0], got[1], got[2],
          got[3], allocs, logical, resident, padding, peak);
}

static char *print_ledger(qc_gpu *g) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f) return NULL;
    qc_gpu_ledger_print(g, f);
    fclose(f);
    fputs(text, stdout);
    return text;
}

int main(void) {
    qc_set_log_level(QC_LOG_WARN);
    qc_gpu *g = gt_open_or_skip(TEST);
    if (!g) return 0;
    char err[512];
    qc_status st;

    /* several categories, with padding in some */
    struct {
        const char *what;
        qc_mem_category cat;
        size_t logical, resident;
    } plan[] = {
        {"blk.0.attn_q.qweight", QC_MEM_WEIGHTS, 3 * MiB, 4 * MiB},
        {"blk.0.attn_k.qweight", QC_MEM_WEIGHTS, 1 * MiB, 1 * MiB},
        {"blk.0.attn_q.scales", QC_MEM_SCALES, 96 * KiB, 128 * KiB},
        {"tile padding", QC_MEM_PADDING, 0, 2 * MiB},
        {"kv cache", QC_MEM_KV, 64 * MiB, 64 * MiB},
        {"activations", QC_MEM_ACTIVATIONS, 8 * MiB, 8 * MiB},
        {"gemm split-k", QC_MEM_WORKSPACE, 16 * MiB, 16 * MiB},
        {"graph b1", QC_MEM_GRAPH_POOL, 2 * MiB, 2 * MiB},
    };
    enum { N_PLAN = sizeof plan / sizeof plan[0] };
    qc_gpu_buf bufs[N_PLAN];
    for (size_t i = 0; i < N_PLAN; i++) {
        st = qc_gpu_alloc(g, plan[i].logical, plan[i].resident, plan[i].cat, plan[i].what, &bufs[i], err, sizeof err);
        CHECK(st == QC_OK && bufs[i].ptr, "alloc %s: %s", plan[i].what, err);
    }
    qc_gpu_ledger_row w = qc_gpu_ledger_get(g, QC_MEM_WEIGHTS), t = qc_gpu_ledger_get(g, QC_MEM_COUNT_);
    CHECK(w.count == 2 && w.logical == 4 * MiB && w.resident == 5 * MiB && w.peak_resident == 5 * MiB,
          "weights row %zu %zu %zu %zu", w.count, w.logical, w.resident, w.peak_resident);
    size_t want_res = (4 + 1 + 2 + 64 + 8 + 16 + 2) * MiB + 128 * KiB;
    size_t want_log = (3 + 1 + 64 + 8 + 16 + 2) * MiB + 96 * KiB;
    CHECK(t.count == N_PLAN && t.resident == want_res && t.logical == want_log, "totals %zu %zu %zu", t.count,
          t.resident, t.logical);
    char *text = print_ledger(g);
    CHECK(text != NULL, "open_memstream");
    if (text) {
        CHECK_CONTAINS(text, "GPU memory ledger: device 0 (");
        check_row(text, "weights", 2, "4.00 MiB", "5.00 MiB", "1.00 MiB", "5.00 MiB");
        check_row(text, "scales", 1, "96.00 KiB", "128.00 KiB", "32.00 KiB", "128.00 KiB");
        check_row(text, "padding", 1, "0.00 B", "2.00 MiB", "2.00 MiB", "2.00 MiB");
        check_row(text, "kv", 1, "64.00 MiB", "64.00 MiB", "0.00 B", "64.00 MiB");
        check_row(text, "activations", 1, "8.00 MiB", "8.00 MiB", "0.00 B", "8.00 MiB");
        check_row(text, "workspace", 1, "16.00 MiB", "16.00 MiB", "0.00 B", "16.00 MiB");
        check_row(text, "graph_pools", 1, "2.00 MiB", "2.00 MiB", "0.00 B", "2.00 MiB");
        check_row(text, "zeros", 0, "0.00 B", "0.00 B", "0.00 B", "0.00 B");
        free(text);
    }

    /* freeing lowers resident, not the peak */
    qc_gpu_free(g, &bufs[4]);
    CHECK(bufs[4].ptr == 0, "free clears the buffer");
    qc_gpu_ledger_row kv = qc_gpu_ledger_get(g, QC_MEM_KV);
    CHECK(kv.count == 0 && kv.resident == 0 && kv.peak_resident == 64 * MiB, "kv after free %zu %zu %zu", kv.count,
          kv.resident, kv.peak_resident);
    qc_gpu_free(g, &bufs[4]); /* ptr 0: nothing */
    qc_gpu_buf stale = bufs[5];
    qc_gpu_free(g, &bufs[5]);
    qc_gpu_free(g, &stale); /* a copy of a freed buffer: refused with a warning, no double free */
    CHECK(qc_gpu_ledger_get(g, QC_MEM_ACTIVATIONS).count == 0, "stale free changed the ledger");

    /* more than is free: refused before cuMemAlloc, sizes named */
    size_t free_b = 0, total_b = 0;
    st = qc_gpu_mem_info(g, &free_b, &total_b, err, sizeof err);
    CHECK(st == QC_OK && free_b > 0 && total_b >= free_b, "mem info: %s", err);
    size_t before = qc_gpu_ledger_get(g, QC_MEM_COUNT_).count;
    size_t huge = free_b + ((size_t)1 << 30);
    qc_gpu_buf hb;
    st = qc_gpu_alloc(g, huge, huge, QC_MEM_KV, "kv cache for 1M tokens", &hb, err, sizeof err);
    printf("%s: asking %zu bytes: %s\n", TEST, huge, err);
    CHECK(st == QC_ERR_NOMEM && hb.ptr == 0, "a too-large allocation was not refused (%d)", (int)st);
    char asked[64];
    snprintf(asked, sizeof asked, "asks %zu bytes", huge);
    CHECK_CONTAINS(err, "GPU allocation refused: kv cache for 1M tokens (kv)");
    CHECK_CONTAINS(err, asked);
    CHECK_CONTAINS(err, ") free of ");
    CHECK(qc_gpu_ledger_get(g, QC_MEM_COUNT_).count == before, "a refused allocation was booked");

    /* exactly what is said to be free passes the check; the driver may
     * still refuse (its own reserve), which must read the same way */
    st = qc_gpu_mem_info(g, &free_b, &total_b, err, sizeof err);
    st = qc_gpu_alloc(g, free_b, free_b, QC_MEM_WORKSPACE, "all of it", &hb, err, sizeof err);
    if (st == QC_OK) {
        printf("%s: an allocation of all %zu free bytes succeeded; freeing it\n", TEST, free_b);
        qc_gpu_free(g, &hb);
    } else {
        printf("%s: all %zu free bytes: %s\n", TEST, free_b, err);
        CHECK(st == QC_ERR_NOMEM, "status %d", (int)st);
        CHECK(strstr(err, "GPU allocation refused: all of it") || strstr(err, "GPU allocation failed: all of it"),
              "message: %s", err);
    }

    /* bad requests */
    CHECK(qc_gpu_alloc(g, 2, 1, QC_MEM_WEIGHTS, "w", &hb, err, sizeof err) == QC_ERR_INVALID, "logical > resident");
    CHECK_CONTAINS(err, "at least the logical size");
    CHECK(qc_gpu_alloc(g, 0, 0, QC_MEM_WEIGHTS, "w", &hb, err, sizeof err) == QC_ERR_INVALID, "zero bytes");
    CHECK(qc_gpu_alloc(g, 1, 1, QC_MEM_COUNT_, "w", &hb, err, sizeof err) == QC_ERR_INVALID, "bad category");

    /* after all that, an ordinary allocation and copies still work */
    qc_gpu_buf ok;
    enum { WORDS = 1 << 18 };
    uint32_t *h = malloc(WORDS * 4), *back = malloc(WORDS * 4);
    st = qc_gpu_alloc(g, WORDS * 4, WORDS * 4, QC_MEM_ACTIVATIONS, "after refusal", &ok, err, sizeof err);
    CHECK(st == QC_OK, "allocation after a refusal: %s", err);
    if (st == QC_OK && h && back) {
        uint64_t s = 12345;
        for (size_t i = 0; i < WORDS; i++) h[i] = (uint32_t)qc_test_rng(&s);
        st = qc_gpu_upload(g, ok.ptr, h, WORDS * 4, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_download(g, back, ok.ptr, WORDS * 4, err, sizeof err);
        CHECK(st == QC_OK && memcmp(h, back, WORDS * 4) == 0, "round trip: %s", err);
        st = qc_gpu_memset32(g, ok.ptr + 4 * 1000, 0xdeadbeefu, 10, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_download(g, back, ok.ptr, WORDS * 4, err, sizeof err);
        CHECK(st == QC_OK && back[999] == h[999] && back[1000] == 0xdeadbeefu && back[1009] == 0xdeadbeefu &&
                  back[1010] == h[1010],
              "memset32: %s", err);
        qc_gpu_event a = NULL, b = NULL;
        float ms = -1;
        st = qc_gpu_event_create(g, &a, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_event_create(g, &b, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_event_record(g, a, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_upload(g, ok.ptr, h, WORDS * 4, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_event_record(g, b, err, sizeof err);
        if (st == QC_OK) st = qc_gpu_event_elapsed(g, a, b, &ms, err, sizeof err);
        CHECK(st == QC_OK && ms >= 0, "events: %s", err);
        printf("%s: 1 MiB upload timed with events: %.3f ms\n", TEST, ms);
        qc_gpu_event_destroy(g, a);
        qc_gpu_event_destroy(g, b);
    }
    free(h);
    free(back);
    text = print_ledger(g);
    if (text) {
        check_row(text, "activations", 1, "1.00 MiB", "1.00 MiB", "0.00 B", "8.00 MiB");
        free(text);
    }
    qc_gpu_free(g, &ok);
    for (size_t i = 0; i < N_PLAN; i++)
        if (i != 0) qc_gpu_free(g, &bufs[i]);
    /* bufs[0] stays: closing frees it and says so */
    CHECK(qc_gpu_ledger_get(g, QC_MEM_COUNT_).count == 1, "one allocation left for close");
    qc_gpu_close(g);
    return qc_test_finish(TEST);
}

/* test_policy.c - the Lua policy sandbox against hostile scripts; the host must stay unharmed. */
#define _POSIX_C_SOURCE 200809L
#include <lauxlib.h>
#include <lua.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "qc_test.h"
#include "qcore/qcore.h"

static const qc_policy_limits LIMITS = {
    .struct_size = sizeof(qc_policy_limits), .instructions = 2000000, .memory_bytes = 16u << 20, .wall_ms = 1500};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A query with two candidates, one of them ineligible. */
static qc_status ask(qc_policy *p, char *out, size_t out_len, char *err, size_t errlen) {
    static const qc_policy_layer layer = {.name = "blk.0.attn.q", .role = "attn.q", .index = 0, .n_layers = 2,
                                          .n = 64, .k = 64};
    static const qc_policy_device dev = {.name = "test", .sm = 90, .sm_count = 132, .mem_bandwidth_gbs = 4000,
                                         .bf16_tflops = 700, .fp8_tflops = 1300, .int8_tops = 900};
    qc_policy_candidate c[2] = {{.format = "bf16", .eligible = 1, .time_us = -1, .bytes_per_weight = 2},
                                {.format = "w4a16", .eligible = 0, .time_us = 3.5, .bytes_per_weight = 0.5}};
    strcpy(c[1].reason.code, "arch");
    strcpy(c[1].reason.text, "w4a16 needs sm_80+");
    qc_policy_query q = {.struct_size = sizeof q, .layer = &layer, .phase = QC_PHASE_DECODE, .batch = 4,
                         .device = &dev, .candidates = c, .n_candidates = 2};
    char note[128];
    return qc_policy_choose(p, &q, out, out_len, note, sizeof note, err, errlen);
}

/* Does err contain one of the '|'-separated alternatives in needles? */
static int contains_any(const char *err, const char *needles) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", needles);
    for (char *s = strtok(buf, "|"); s; s = strtok(NULL, "|"))
        if (strstr(err, s)) return 1;
    return 0;
}

/* A script that must fail when loaded, with `needle` in the error. */
static void expect_open_fails(const char *name, const char *src, const char *needle) {
    char err[2048] = "";
    double t0 = now();
    qc_policy *p = qc_policy_open_string(src, strlen(src), name, &LIMITS, err, sizeof err);
    double dt = now() - t0;
    CHECK(p == NULL, "%s: loaded but should fail", name);
    CHECK(contains_any(err, needle), "expected \"%s\" in \"%s\"", needle, err);
    CHECK(dt < 5.0, "%s: took %.1f s", name, dt);
    qc_policy_close(p);
}

/* A script whose choose() must fail with `needle`; the policy must still be
 * usable for the next call (a fresh worker if the old one was killed). */
static void expect_choose_fails(const char *name, const char *src, const char *needle) {
    char err[2048] = "", out[64] = "";
    qc_policy *p = qc_policy_open_string(src, strlen(src), name, &LIMITS, err, sizeof err);
    CHECK(p != NULL, "%s: did not load: %s", name, err);
    if (!p) return;
    double t0 = now();
    qc_status st = ask(p, out, sizeof out, err, sizeof err);
    double dt = now() - t0;
    CHECK(st != QC_OK, "%s: choose() succeeded with '%s'", name, out);
    CHECK(contains_any(err, needle), "expected \"%s\" in \"%s\"", needle, err);
    CHECK(dt < 5.0, "%s: took %.1f s", name, dt);
    qc_policy_close(p);
}

static void test_hostile(void) {
    /* runaway loops: at load, in choose, behind pcall and xpcall */
    /* (on a loaded machine, and under ASan, the wall clock can stop a loop
     * before the budget does: either limit is containment) */
    expect_open_fails("loop_at_load.lua", "while true do end",
                      "instruction budget of 2000000 exceeded|wall-clock limit exceeded");
    expect_choose_fails("loop.lua", "return { choose = function(q) while true do end end }",
                        "instruction budget of 2000000 exceeded in choose()|wall-clock limit exceeded in choose()");
    expect_choose_fails("loop_pcall.lua",
                        "return { choose = function(q)\n"
                        "  while true do pcall(function() while true do end end) end\n"
                        "end }",
                        "instruction budget|wall-clock limit exceeded");
    expect_choose_fails("loop_xpcall.lua",
                        "return { choose = function(q)\n"
                        "  while true do xpcall(function() while true do end end, function(e) return e end) end\n"
                        "end }",
                        "instruction budget|wall-clock limit exceeded");
    /* catching the error in a loop of pcalls must not reset the budget */
    expect_choose_fails("pcall_spin.lua",
                        "return { choose = function(q)\n"
                        "  for i = 1, 1e9 do local ok = pcall(error, 'x') end\n"
                        "end }",
                        "instruction budget|wall-clock limit exceeded");
    /* memory */
    expect_choose_fails("rep.lua", "return { choose = function(q) return string.rep('x', 2^40) end }",
                        "resulting string too large");
    expect_choose_fails("rep_1g.lua", "return { choose = function(q) return string.rep('x', 2^30) end }",
                        "not enough memory");
    expect_choose_fails("table_bomb.lua",
                        "return { choose = function(q) local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 1e5) .. i end end }",
                        "not enough memory");
    /* missing libraries and functions */
    expect_choose_fails("os.lua", "return { choose = function(q) os.execute('touch /tmp/qc_pwned') end }",
                        "global 'os'");
    expect_choose_fails("io.lua", "return { choose = function(q) return io.open('/etc/passwd'):read('a') end }",
                        "global 'io'");
    expect_choose_fails("require.lua", "return { choose = function(q) return require('os') end }",
                        "global 'require'");
    expect_choose_fails("debug.lua", "return { choose = function(q) return debug.getinfo(1).source end }",
                        "global 'debug'");
    expect_choose_fails("dofile.lua", "return { choose = function(q) return dofile('/etc/passwd') end }",
                        "global 'dofile'");
    expect_choose_fails("loadfile.lua", "return { choose = function(q) return loadfile('/etc/passwd') end }",
                        "global 'loadfile'");
    expect_choose_fails("collect.lua", "return { choose = function(q) collectgarbage('stop') end }",
                        "global 'collectgarbage'");
    expect_choose_fails("dump.lua", "return { choose = function(q) return string.dump(function() end) end }",
                        "field 'dump'");
    expect_choose_fails("coroutine.lua", "return { choose = function(q) return coroutine.create(print) end }",
                        "global 'coroutine'");
    /* protected metatables */
    expect_choose_fails("setmt_G.lua", "return { choose = function(q) setmetatable(_G, nil) end }",
                        "cannot change a protected metatable");
    expect_choose_fails("string_mt.lua", "return { choose = function(q) getmetatable('').__index = nil end }",
                        "the string metatable is read-only");
    /* deep recursion */
    expect_choose_fails("recurse.lua",
                        "local function f(n) return f(n + 1) + 1 end\n"
                        "return { choose = function(q) return f(1) end }",
                        "stack overflow|not enough memory");
    /* a pathological pattern runs in C where the count hook cannot reach */
    expect_choose_fails("find.lua",
                        "return { choose = function(q)\n"
                        "  return tostring(string.find(string.rep('a', 40), string.rep('a?', 40) .. string.rep('a', 40) .. 'b'))\n"
                        "end }",
                        "ran past the wall-clock limit of 1500 ms and was stopped");
    /* wrong answers */
    expect_choose_fails("number.lua", "return { choose = function(q) return 42 end }",
                        "returned number, expected a format name");
    expect_choose_fails("raise.lua", "return { choose = function(q)\n  error('no idea')\nend }",
                        "raise.lua:2: no idea");
    expect_choose_fails("raise_tb.lua", "return { choose = function(q) error('boom') end }", "stack traceback");
    /* scripts that cannot load */
    expect_open_fails("syntax.lua", "return {\n choose = function(q) return 'x' end end }", "syntax.lua:2:");
    expect_open_fails("no_choose.lua", "return { prepare = function() end }", "no function 'choose'");
    expect_open_fails("not_table.lua", "return 7", "must return a table");
    /* load() inside the sandbox is text only */
    expect_choose_fails("load_binary.lua",
                        "return { choose = function(q)\n"
                        "  local f, e = load('\\27Lua\\84\\0')\n"
                        "  error(e)\n"
                        "end }",
                        "binary");
}

/* A precompiled chunk made with the real Lua is refused before it runs. */
typedef struct dump_buf {
    char data[4096];
    size_t len;
} dump_buf;

static int dump_writer(lua_State *L, const void *p, size_t sz, void *ud) {
    (void)L;
    dump_buf *b = ud;
    if (b->len + sz > sizeof b->data) return 1;
    memcpy(b->data + b->len, p, sz);
    b->len += sz;
    return 0;
}

static void test_binary_chunk(void) {
    lua_State *L = luaL_newstate();
    luaL_loadstring(L, "return { choose = function(q) return 'bf16' end }");
    dump_buf b = {.len = 0};
    CHECK(lua_dump(L, dump_writer, &b, 1) == 0 && b.len > 4, "lua_dump");
    char err[512];
    qc_policy *p = qc_policy_open_string(b.data, b.len, "compiled.luac", &LIMITS, err, sizeof err);
    CHECK(p == NULL, "binary chunk accepted");
    CHECK_CONTAINS(err, "binary");
    qc_policy_close(p);
    /* and from a file */
    char path[] = "/tmp/qc_policy_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len, "temp file");
    close(fd);
    p = qc_policy_open(path, &LIMITS, err, sizeof err);
    CHECK(p == NULL, "binary chunk file accepted");
    CHECK_CONTAINS(err, "only source text is accepted");
    unlink(path);
    lua_close(L);
}

static void test_good_policy(void) {
    const char *src =
        "local P = {}\n"
        "function P.choose(q)\n"
        "  -- the string metatable still works after a failed attempt to break it\n"
        "  pcall(function() getmetatable('').__index = nil end)\n"
        "  local s = ('%s:%s:%d:%s'):format(q.layer.role, q.phase, q.batch, q.device.arch)\n"
        "  for _, c in ipairs(q.candidates) do\n"
        "    if not c.eligible then s = s .. ':' .. c.format .. '=' .. c.reason_code .. '@' .. c.time_us end\n"
        "  end\n"
        "  return s, 'because'\n"
        "end\n"
        "function P.prepare(layer, device, formats) return { formats[1], 'x' .. layer.n } end\n"
        "function P.kv_cache(device, c) return 'kv_' .. device.ridge end\n"
        "return P\n";
    char err[512], out[128];
    qc_policy *p = qc_policy_open_string(src, strlen(src), "good.lua", &LIMITS, err, sizeof err);
    CHECK(p != NULL, "good policy: %s", err);
    if (!p) return;
    for (int i = 0; i < 3; i++) { /* budget is per call: many calls are fine */
        CHECK(ask(p, out, sizeof out, err, sizeof err) == QC_OK, "choose: %s", err);
        CHECK(strcmp(out, "attn.q:decode:4:sm_90:w4a16=arch@3.5") == 0, "got '%s'", out);
    }
    qc_policy_layer layer = {.name = "l", .role = "mlp.up", .n = 128, .k = 64};
    qc_policy_device dev = {.name = "d", .sm = 90, .mem_bandwidth_gbs = 4000, .bf16_tflops = 800};
    const char *formats[] = {"w4a16", "fp8"};
    char names[4][64];
    size_t n = 0;
    CHECK(qc_policy_prepare(p, &layer, &dev, formats, 2, names, 4, &n, err, sizeof err) == QC_OK, "%s", err);
    CHECK(n == 2 && strcmp(names[0], "w4a16") == 0 && strcmp(names[1], "x128") == 0, "prepare gave %zu", n);
    char kv[64];
    CHECK(qc_policy_kv_format(p, &dev, NULL, 0, kv, sizeof kv, err, sizeof err) == QC_OK, "%s", err);
    CHECK(strcmp(kv, "kv_200.0") == 0 || strcmp(kv, "kv_200") == 0, "ridge: %s", kv);
    qc_policy_close(p);

    /* a policy killed on the wall clock comes back for the next call */
    const char *flaky =
        "local n = 0\n"
        "return { choose = function(q)\n"
        "  if q.batch == 4 then string.find(string.rep('a', 40), string.rep('a?', 40) .. string.rep('a', 40) .. 'b') end\n"
        "  return 'bf16'\n"
        "end }\n";
    p = qc_policy_open_string(flaky, strlen(flaky), "flaky.lua", &LIMITS, err, sizeof err);
    CHECK(p != NULL, "%s", err);
    CHECK(p && ask(p, out, sizeof out, err, sizeof err) != QC_OK && qc_policy_limit_hit(p), "not stopped");
    qc_policy_close(p);
}

int main(void) {
    unlink("/tmp/qc_pwned");
    test_hostile();
    test_binary_chunk();
    test_good_policy();
    CHECK(access("/tmp/qc_pwned", F_OK) != 0, "os.execute escaped the sandbox");
    /* the host is unharmed: it can still load the shipped policies */
    char err[512], out[64];
    const char *shipped[] = {"policies/latency.lua", "policies/throughput.lua"};
    for (int i = 0; i < 2; i++) {
        qc_policy *p = qc_policy_open(shipped[i], &LIMITS, err, sizeof err);
        CHECK(p != NULL, "%s: %s", shipped[i], err);
        CHECK(p && ask(p, out, sizeof out, err, sizeof err) == QC_OK, "%s: %s", shipped[i], err);
        qc_policy_close(p);
    }
    return qc_test_finish("test_policy");
}

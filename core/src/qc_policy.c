/* qc_policy.c - Lua 5.4 policy host: a sandboxed interpreter in a worker process. */
/*
 * Why a worker process: the instruction-count hook stops runaway Lua code,
 * but not a C function such as a pathological string.find, which can run for
 * hours without returning to the VM.  Each policy therefore runs in a forked
 * child; the host talks to it over a socketpair (length-prefixed JSON) and
 * kills it with SIGKILL when a call outlives its wall-clock limit.  Policies
 * are consulted only when the dispatch table is built, never per step, so the
 * round trip (tens of microseconds) is off the hot path.
 *
 * Inside the child the usual embedding rules apply: only base, table, string,
 * math and utf8 are opened; no io/os/package/debug/coroutine, no dofile,
 * loadfile, require or collectgarbage; chunks are text only; string.dump is
 * removed; the string metatable and the global table are protected; a
 * counting allocator caps the heap; a count hook enforces an instruction
 * budget per call that pcall cannot swallow.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qc_util.h"

#define POLICY_DEFAULT_INSTRUCTIONS 10000000ull
#define POLICY_DEFAULT_MEMORY (64u << 20)
#define POLICY_DEFAULT_WALL_MS 2000u
#define POLICY_MAX_SOURCE (4u << 20)
#define POLICY_MAX_MESSAGE (16u << 20)
#define POLICY_HOOK_PERIOD 1000

struct qc_policy {
    char *source;        /* script text, kept to respawn the worker */
    size_t source_len;
    char *chunkname;     /* "@policies/latency.lua" */
    char *name;          /* file name for messages */
    qc_policy_limits lim;
    pid_t pid;           /* worker, 0 when none is running */
    int limit_hit;       /* the last call was stopped by a limit */
    int fd;              /* our end of the socketpair */
};

/* ======================================================================
 * Worker side (runs only in the forked child)
 * ====================================================================== */

static const char policy_table_key = 0; /* registry slot of the policy table */

typedef struct sandbox {
    size_t used, cap;           /* counting allocator */
    uint64_t budget, executed;  /* instructions */
    double deadline;            /* monotonic seconds */
    int killed;                 /* a limit was hit: errors must not be swallowed */
    const char *call;           /* function being run, for messages */
} sandbox;

static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    sandbox *sb = ud;
    size_t old = ptr ? osize : 0; /* with ptr == NULL, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        sb->used -= old;
        return NULL;
    }
    if (nsize > old && nsize - old > sb->cap - sb->used) return NULL; /* over the cap */
    void *p = realloc(ptr, nsize);
    if (p) sb->used = sb->used - old + nsize;
    return p;
}

static sandbox *sb_of(lua_State *L) {
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

static void sb_hook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    sandbox *sb = sb_of(L);
    sb->executed += POLICY_HOOK_PERIOD;
    if (sb->killed) {
        luaL_error(L, "policy stopped: %s", sb->killed == 1 ? "instruction budget exceeded" : "wall-clock limit");
    } else if (sb->executed > sb->budget) {
        sb->killed = 1;
        char msg[160]; /* lua_pushfstring has no %llu */
        snprintf(msg, sizeof msg, "instruction budget of %llu exceeded in %s()", (unsigned long long)sb->budget,
                 sb->call ? sb->call : "chunk");
        luaL_error(L, "%s", msg);
    } else if (qc_now_seconds() > sb->deadline) {
        sb->killed = 2;
        luaL_error(L, "wall-clock limit exceeded in %s()", sb->call ? sb->call : "chunk");
    }
}

/* pcall/xpcall that re-raise once a limit was hit, so a script cannot catch
 * the budget error and carry on. */
static int sb_finish_pcall(lua_State *L, int status, int base) {
    if (sb_of(L)->killed) return lua_error(L);
    lua_pushboolean(L, status == LUA_OK);
    lua_replace(L, base); /* slot of the function becomes the status */
    return lua_gettop(L) - base + 1;
}

static int sb_pcall(lua_State *L) {
    luaL_checkany(L, 1);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    if (status != LUA_OK && sb_of(L)->killed) return lua_error(L);
    lua_pushboolean(L, status == LUA_OK);
    lua_insert(L, 1);
    return lua_gettop(L);
}

static int sb_xpcall(lua_State *L) {
    int n = lua_gettop(L);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 1);   /* function */
    lua_copy(L, 2, 1);     /* handler to slot 1 */
    lua_replace(L, 2);     /* function to slot 2 */
    int status = lua_pcall(L, n - 2, LUA_MULTRET, 1);
    return sb_finish_pcall(L, status, 1);
}

static int sb_load(lua_State *L) {
    /* text-only load with the sandbox globals as the default environment */
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, "=(load)");
    if (luaL_loadbufferx(L, s, len, name, "t") != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
    }
    if (!lua_isnoneornil(L, 4)) {
        lua_pushvalue(L, 4);
        if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
    }
    return 1;
}

static int sb_print(lua_State *L) {
    int n = lua_gettop(L);
    char line[512];
    size_t off = 0;
    for (int i = 1; i <= n && off < sizeof line - 1; i++) {
        size_t l;
        const char *s = luaL_tolstring(L, i, &l);
        int w = snprintf(line + off, sizeof line - off, "%s%s", i > 1 ? "\t" : "", s);
        lua_pop(L, 1);
        if (w < 0) break;
        off += (size_t)w;
        if (off >= sizeof line) off = sizeof line - 1;
    }
    line[off] = 0;
    qc_log(QC_LOG_INFO, "policy says: %s", line);
    return 0;
}

static int sb_readonly(lua_State *L) {
    return luaL_error(L, "qcore sandbox: %s is read-only", lua_tostring(L, lua_upvalueindex(1)));
}

/* Set `__metatable` of the table on top to a read-only proxy so that
 * getmetatable() returns something that cannot be changed or used. */
static void sb_protect_metatable(lua_State *L, const char *what) {
    lua_newtable(L);               /* proxy */
    lua_newtable(L);               /* its metatable */
    lua_pushstring(L, what);
    lua_pushcclosure(L, sb_readonly, 1);
    lua_setfield(L, -2, "__newindex");
    lua_pushstring(L, "locked");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_setfield(L, -2, "__metatable");
}

static int sb_msgh(lua_State *L) {
    const char *msg = lua_tostring(L, 1);
    if (!msg) msg = luaL_typename(L, 1);
    luaL_traceback(L, L, msg, 1);
    return 1;
}

static lua_State *sb_new_state(sandbox *sb) {
    lua_State *L = lua_newstate(sb_alloc, sb);
    if (!L) return NULL;
    static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},     {LUA_TABLIBNAME, luaopen_table},
                                    {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
                                    {LUA_UTF8LIBNAME, luaopen_utf8},  {NULL, NULL}};
    for (const luaL_Reg *l = libs; l->func; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    static const char *drop[] = {"dofile", "loadfile", "collectgarbage", "require", NULL};
    for (const char **d = drop; *d; d++) {
        lua_pushnil(L);
        lua_setglobal(L, *d);
    }
    lua_register(L, "pcall", sb_pcall);
    lua_register(L, "xpcall", sb_xpcall);
    lua_register(L, "load", sb_load);
    lua_register(L, "print", sb_print);
    lua_getglobal(L, "string");
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_pop(L, 1);
    /* string metatable: still used for s:method(), but not reachable */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    sb_protect_metatable(L, "the string metatable");
    lua_pop(L, 2);
    /* globals: their metatable cannot be replaced or removed */
    lua_pushglobaltable(L);
    lua_newtable(L);
    sb_protect_metatable(L, "the global table's metatable");
    lua_setmetatable(L, -2);
    lua_pop(L, 1);
    return L;
}

/* Arm the limits for one call: the budget is per call, not per policy.  The
 * hook stays installed between calls, so code run by the collector (a
 * finalizer) is bounded as well. */
static void sb_arm(lua_State *L, sandbox *sb, const char *call, const qc_policy_limits *lim) {
    sb->executed = 0;
    sb->killed = 0;
    sb->budget = lim->instructions;
    sb->deadline = qc_now_seconds() + lim->wall_ms / 1000.0;
    sb->call = call;
    lua_sethook(L, sb_hook, LUA_MASKCOUNT, POLICY_HOOK_PERIOD);
}

/* ---- JSON <-> Lua ---- */

static void lua_push_json(lua_State *L, json_t *v, int depth) {
    luaL_checkstack(L, 4, "json nesting");
    if (depth > 32) { lua_pushnil(L); return; }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *val;
        lua_createtable(L, 0, (int)json_object_size(v));
        json_object_foreach(v, key, val) {
            lua_push_json(L, val, depth + 1);
            lua_setfield(L, -2, key);
        }
        break;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *val;
        lua_createtable(L, (int)json_array_size(v), 0);
        json_array_foreach(v, i, val) {
            lua_push_json(L, val, depth + 1);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    }
    case JSON_STRING: lua_pushlstring(L, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: lua_pushinteger(L, (lua_Integer)json_integer_value(v)); break;
    case JSON_REAL: lua_pushnumber(L, json_real_value(v)); break;
    case JSON_TRUE: lua_pushboolean(L, 1); break;
    case JSON_FALSE: lua_pushboolean(L, 0); break;
    default: lua_pushnil(L); break;
    }
}

/* The parts of a policy's answer we accept: a string, or an array of strings. */
static json_t *lua_answer_json(lua_State *L, int idx, char *err, size_t errlen) {
    if (lua_type(L, idx) == LUA_TSTRING) return json_string(lua_tostring(L, idx));
    if (lua_type(L, idx) == LUA_TTABLE) {
        json_t *arr = json_array();
        lua_Integer n = (lua_Integer)lua_rawlen(L, idx);
        if (n > 64) n = 64;
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, idx, i);
            if (lua_type(L, -1) != LUA_TSTRING) {
                qc_errf(err, errlen, "element %lld of the returned list is a %s, not a format name",
                        (long long)i, luaL_typename(L, -1));
                lua_pop(L, 1);
                json_decref(arr);
                return NULL;
            }
            json_array_append_new(arr, json_string(lua_tostring(L, -1)));
            lua_pop(L, 1);
        }
        return arr;
    }
    qc_errf(err, errlen, "returned %s, expected a format name (string)", luaL_typename(L, idx));
    return NULL;
}

/* ---- framing ---- */

static int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Read exactly len bytes before `deadline` (monotonic seconds; < 0 = none).
 * Returns 0, -1 on EOF/error, -2 on timeout. */
static int read_all(int fd, void *buf, size_t len, double deadline) {
    char *p = buf;
    while (len) {
        if (deadline >= 0) {
            double left = deadline - qc_now_seconds();
            if (left <= 0) return -2;
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
            if (pr < 0 && errno == EINTR) continue;
            if (pr == 0) return -2;
            if (pr < 0) return -1;
        }
        ssize_t r = read(fd, p, len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}

static int send_json(int fd, json_t *msg) {
    char *s = json_dumps(msg, JSON_COMPACT);
    if (!s) return -1;
    uint32_t n = (uint32_t)strlen(s);
    int rc = write_all(fd, &n, 4) || write_all(fd, s, n) ? -1 : 0;
    free(s);
    return rc;
}

static json_t *recv_json(int fd, double deadline, int *timed_out) {
    uint32_t n;
    if (timed_out) *timed_out = 0;
    int rc = read_all(fd, &n, 4, deadline);
    if (rc == 0 && n > POLICY_MAX_MESSAGE) rc = -1;
    char *buf = NULL;
    if (rc == 0) {
        buf = malloc(n + 1u);
        if (!buf) rc = -1;
    }
    if (rc == 0) rc = read_all(fd, buf, n, deadline);
    if (rc != 0) {
        if (rc == -2 && timed_out) *timed_out = 1;
        free(buf);
        return NULL;
    }
    json_t *v = json_loadb(buf, n, 0, NULL);
    free(buf);
    return v;
}

static json_t *reply_error(const char *msg) {
    return json_pack("{s:b,s:s}", "ok", 0, "error", msg);
}

/* Call policy.<fn>(args...) with args from the JSON array; returns the reply. */
static json_t *worker_call(lua_State *L, sandbox *sb, const qc_policy_limits *lim, const char *fn,
                           json_t *args, int required) {
    char err[512];
    int top = lua_gettop(L);
    lua_pushcfunction(L, sb_msgh);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &policy_table_key); /* the policy table */
    lua_getfield(L, -1, fn);
    if (lua_type(L, -1) != LUA_TFUNCTION) {
        lua_settop(L, top);
        if (!required) return json_pack("{s:b,s:n}", "ok", 1, "result");
        qc_errf(err, sizeof err, "the policy table has no function '%s'", fn);
        return reply_error(err);
    }
    lua_remove(L, -2);
    /* armed before the arguments are built: building them can run a
     * finalizer the script left behind */
    sb_arm(L, sb, fn, lim);
    size_t i;
    json_t *a;
    int nargs = 0;
    json_array_foreach(args, i, a) {
        lua_push_json(L, a, 0);
        nargs++;
    }
    int status = lua_pcall(L, nargs, 2, top + 1);
    json_t *reply;
    if (status != LUA_OK) {
        const char *m = lua_tostring(L, -1);
        reply = reply_error(m ? m : "error object is not a string");
        if (sb->killed) json_object_set_new(reply, "limit", json_true());
    } else {
        json_t *res = lua_answer_json(L, top + 2, err, sizeof err);
        if (!res) {
            char full[640];
            qc_errf(full, sizeof full, "%s(): %s", fn, err);
            reply = reply_error(full);
        } else {
            reply = json_pack("{s:b,s:o}", "ok", 1, "result", res);
            if (lua_type(L, top + 3) == LUA_TSTRING)
                json_object_set_new(reply, "note", json_string(lua_tostring(L, top + 3)));
        }
    }
    lua_settop(L, top);
    return reply;
}

static void worker_main(int fd, const qc_policy *p) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sandbox sb = {.cap = p->lim.memory_bytes};
    lua_State *L = sb_new_state(&sb);
    json_t *hello;
    if (!L) {
        hello = reply_error("cannot create a Lua state (memory cap too small?)");
    } else {
        lua_pushcfunction(L, sb_msgh);
        int st = luaL_loadbufferx(L, p->source, p->source_len, p->chunkname, "t");
        if (st == LUA_OK) {
            sb_arm(L, &sb, "main chunk", &p->lim);
            st = lua_pcall(L, 0, 1, 1);
        }
        if (st != LUA_OK) {
            const char *m = lua_tostring(L, -1);
            hello = reply_error(m ? m : "load failed");
        } else if (!lua_istable(L, -1)) {
            char e[256];
            qc_errf(e, sizeof e, "%s: the script must return a table of functions (choose, prepare, kv_cache), got %s",
                    p->name, luaL_typename(L, -1));
            hello = reply_error(e);
        } else {
            lua_getfield(L, -1, "choose");
            int has_choose = lua_type(L, -1) == LUA_TFUNCTION;
            lua_pop(L, 1);
            if (!has_choose) {
                char e[256];
                qc_errf(e, sizeof e, "%s: the returned table has no function 'choose'", p->name);
                hello = reply_error(e);
            } else {
                lua_pushvalue(L, -1);
                lua_rawsetp(L, LUA_REGISTRYINDEX, &policy_table_key);
                hello = json_pack("{s:b}", "ok", 1);
            }
        }
        lua_settop(L, 0);
    }
    int ok = json_is_true(json_object_get(hello, "ok"));
    send_json(fd, hello);
    json_decref(hello);
    while (ok) {
        json_t *req = recv_json(fd, -1, NULL);
        if (!req) break;
        const char *fn = json_string_value(json_object_get(req, "fn"));
        json_t *args = json_object_get(req, "args");
        int required = json_is_true(json_object_get(req, "required"));
        json_t *reply = (fn && json_is_array(args)) ? worker_call(L, &sb, &p->lim, fn, args, required)
                                                    : reply_error("malformed request");
        json_decref(req);
        int rc = send_json(fd, reply);
        json_decref(reply);
        if (rc) break;
    }
    /* no lua_close: the process ends here, and _exit skips atexit handlers
     * (and leak checks) that belong to the parent */
    _exit(0);
}

/* ======================================================================
 * Host side
 * ====================================================================== */

static void policy_kill(qc_policy *p) {
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    if (p->fd >= 0) close(p->fd);
    p->pid = 0;
    p->fd = -1;
}

/* Start the worker and load the script; 0 on success, else err is filled. */
static int policy_spawn(qc_policy *p, char *err, size_t errlen) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        qc_errf(err, errlen, "%s: socketpair: %s", p->name, strerror(errno));
        return -1;
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        qc_errf(err, errlen, "%s: cannot start the policy worker: %s", p->name, strerror(errno));
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    if (pid == 0) {
        close(sv[0]);
        worker_main(sv[1], p);
    }
    close(sv[1]);
    p->pid = pid;
    p->fd = sv[0];
    int timed_out;
    json_t *hello = recv_json(p->fd, qc_now_seconds() + p->lim.wall_ms / 1000.0, &timed_out);
    if (!hello || !json_is_true(json_object_get(hello, "ok"))) {
        const char *m = hello ? json_string_value(json_object_get(hello, "error")) : NULL;
        if (m)
            qc_errf(err, errlen, "%s", m);
        else if (timed_out)
            qc_errf(err, errlen, "%s: loading the script ran past the wall-clock limit of %u ms and was stopped",
                    p->name, p->lim.wall_ms);
        else
            qc_errf(err, errlen, "%s: the policy worker died while loading the script", p->name);
        json_decref(hello);
        policy_kill(p);
        return -1;
    }
    json_decref(hello);
    return 0;
}

qc_policy *qc_policy_open_string(const char *source, size_t len, const char *chunkname,
                                 const qc_policy_limits *lim, char *err, size_t errlen) {
    if (len > POLICY_MAX_SOURCE) {
        qc_errf(err, errlen, "%s: script is %zu bytes, more than the %u-byte limit", chunkname, len,
                POLICY_MAX_SOURCE);
        return NULL;
    }
    if (len >= 4 && memcmp(source, LUA_SIGNATURE, 4) == 0) {
        qc_errf(err, errlen, "%s: is a precompiled (binary) Lua chunk; only source text is accepted", chunkname);
        return NULL;
    }
    qc_policy *p = calloc(1, sizeof *p);
    if (!p) { qc_errf(err, errlen, "out of memory"); return NULL; }
    p->fd = -1;
    p->source = malloc(len + 1);
    p->name = strdup(chunkname);
    size_t cn = strlen(chunkname) + 2;
    p->chunkname = malloc(cn);
    if (!p->source || !p->name || !p->chunkname) {
        qc_errf(err, errlen, "out of memory");
        qc_policy_close(p);
        return NULL;
    }
    memcpy(p->source, source, len);
    p->source[len] = 0;
    p->source_len = len;
    snprintf(p->chunkname, cn, "@%s", chunkname);
    p->lim.struct_size = sizeof p->lim;
    p->lim.instructions = lim && lim->instructions ? lim->instructions : POLICY_DEFAULT_INSTRUCTIONS;
    p->lim.memory_bytes = lim && lim->memory_bytes ? lim->memory_bytes : POLICY_DEFAULT_MEMORY;
    p->lim.wall_ms = lim && lim->wall_ms ? lim->wall_ms : POLICY_DEFAULT_WALL_MS;
    if (policy_spawn(p, err, errlen) != 0) {
        qc_policy_close(p);
        return NULL;
    }
    return p;
}

qc_policy *qc_policy_open(const char *path, const qc_policy_limits *lim, char *err, size_t errlen) {
    size_t len;
    char *src = qc_read_file(path, POLICY_MAX_SOURCE, &len, err, errlen);
    if (!src) return NULL;
    qc_policy *p = qc_policy_open_string(src, len, path, lim, err, errlen);
    free(src);
    return p;
}

void qc_policy_close(qc_policy *p) {
    if (!p) return;
    policy_kill(p);
    free(p->source);
    free(p->chunkname);
    free(p->name);
    free(p);
}

const char *qc_policy_name(const qc_policy *p) { return p ? p->name : NULL; }

int qc_policy_limit_hit(const qc_policy *p) { return p ? p->limit_hit : 0; }

/* One request/response; respawns a worker killed by an earlier timeout.
 * Steals `args`.  Returns the reply (caller decrefs) or NULL with err. */
static json_t *policy_request(qc_policy *p, const char *fn, json_t *args, int required, char *err,
                              size_t errlen) {
    if (!args) {
        qc_errf(err, errlen, "%s: out of memory building the %s() arguments", p->name, fn);
        return NULL;
    }
    p->limit_hit = 0;
    if (p->pid == 0 && policy_spawn(p, err, errlen) != 0) {
        json_decref(args);
        return NULL;
    }
    json_t *req = json_pack("{s:s,s:o,s:b}", "fn", fn, "args", args, "required", required);
    int timed_out = 0;
    json_t *reply = NULL;
    if (req && send_json(p->fd, req) == 0)
        reply = recv_json(p->fd, qc_now_seconds() + p->lim.wall_ms / 1000.0 + 0.05, &timed_out);
    json_decref(req);
    if (!reply) {
        if (timed_out)
            qc_errf(err, errlen, "%s: %s() ran past the wall-clock limit of %u ms and was stopped", p->name, fn,
                    p->lim.wall_ms);
        else
            qc_errf(err, errlen, "%s: the policy worker died during %s()", p->name, fn);
        policy_kill(p); /* the next call starts a fresh worker */
        p->limit_hit = 1;
        return NULL;
    }
    if (!json_is_true(json_object_get(reply, "ok"))) {
        const char *m = json_string_value(json_object_get(reply, "error"));
        qc_errf(err, errlen, "%s", m ? m : "policy failed");
        p->limit_hit = json_is_true(json_object_get(reply, "limit"));
        json_decref(reply);
        return NULL;
    }
    return reply;
}

static json_t *device_json(const qc_policy_device *d) {
    if (!d) return json_null();
    double ridge = d->mem_bandwidth_gbs > 0 ? d->bf16_tflops * 1000.0 / d->mem_bandwidth_gbs : 0;
    char arch[16];
    qc_errf(arch, sizeof arch, d->sm ? "sm_%d" : "cpu", d->sm);
    json_t *peaks = json_object();
    for (size_t i = 0; peaks && d->peaks && i < d->n_peaks; i++)
        if (d->peaks[i].format) json_object_set_new(peaks, d->peaks[i].format, json_real(d->peaks[i].tflops));
    return json_pack("{s:s,s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:f,s:o*}", "name", d->name ? d->name : "cpu", "arch", arch,
                     "sm", d->sm, "sms", d->sm_count, "bandwidth_gbs", d->mem_bandwidth_gbs, "bf16_tflops",
                     d->bf16_tflops, "fp8_tflops", d->fp8_tflops, "int8_tops", d->int8_tops, "ridge", ridge, "peaks",
                     peaks);
}

static json_t *layer_json(const qc_policy_layer *l) {
    return json_pack("{s:s,s:s,s:i,s:i,s:I,s:I}", "name", l->name ? l->name : "", "role", l->role ? l->role : "",
                     "index", l->index, "n_layers", l->n_layers, "n", (json_int_t)l->n, "k", (json_int_t)l->k);
}

static json_t *candidates_json(const qc_policy_candidate *c, size_t n) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *o = json_pack("{s:s,s:b,s:f}", "format", c[i].format, "eligible", c[i].eligible,
                              "bytes_per_weight", c[i].bytes_per_weight);
        if (!o) continue;
        if (!c[i].eligible) {
            json_object_set_new(o, "reason_code", json_string(c[i].reason.code));
            json_object_set_new(o, "reason", json_string(c[i].reason.text));
        }
        if (c[i].time_us >= 0) json_object_set_new(o, "time_us", json_real(c[i].time_us));
        json_array_append_new(arr, o);
    }
    return arr;
}

qc_status qc_policy_choose(qc_policy *p, const qc_policy_query *q, char *out, size_t out_len, char *note,
                           size_t note_len, char *err, size_t errlen) {
    if (note && note_len) note[0] = 0;
    json_t *query = json_pack("{s:o,s:s,s:I,s:o,s:o}", "layer", layer_json(q->layer), "phase",
                              qc_phase_name(q->phase), "batch", (json_int_t)q->batch, "device",
                              device_json(q->device), "candidates",
                              candidates_json(q->candidates, q->n_candidates));
    json_t *reply = policy_request(p, "choose", query ? json_pack("[o]", query) : NULL, 1, err, errlen);
    if (!reply) return QC_ERR_INVALID;
    const char *name = json_string_value(json_object_get(reply, "result"));
    if (!name) {
        qc_errf(err, errlen, "%s: choose() returned a list; it must return one format name", p->name);
        json_decref(reply);
        return QC_ERR_INVALID;
    }
    qc_strlcpy(out, name, out_len);
    const char *n = json_string_value(json_object_get(reply, "note"));
    if (n && note) qc_strlcpy(note, n, note_len);
    json_decref(reply);
    return QC_OK;
}

qc_status qc_policy_prepare(qc_policy *p, const qc_policy_layer *layer, const qc_policy_device *dev,
                            const char *const *formats, size_t n_formats, char (*names)[64], size_t cap,
                            size_t *n_out, char *err, size_t errlen) {
    *n_out = 0;
    json_t *fl = json_array();
    for (size_t i = 0; fl && i < n_formats; i++) json_array_append_new(fl, json_string(formats[i]));
    json_t *args = fl ? json_pack("[o,o,o]", layer_json(layer), device_json(dev), fl) : NULL;
    json_t *reply = policy_request(p, "prepare", args, 0, err, errlen);
    if (!reply) return QC_ERR_INVALID;
    json_t *res = json_object_get(reply, "result");
    if (json_is_string(res)) {
        qc_strlcpy(names[0], json_string_value(res), 64);
        *n_out = cap ? 1 : 0;
    } else if (json_is_array(res)) {
        size_t i;
        json_t *v;
        json_array_foreach(res, i, v) {
            if (*n_out == cap) break;
            qc_strlcpy(names[(*n_out)++], json_string_value(v), 64);
        }
    } /* null: the policy has no prepare(); the caller uses its default */
    json_decref(reply);
    return QC_OK;
}

qc_status qc_policy_kv_format(qc_policy *p, const qc_policy_device *dev, const qc_policy_candidate *cands,
                              size_t n, char *out, size_t out_len, char *err, size_t errlen) {
    out[0] = 0;
    json_t *args = json_pack("[o,o]", device_json(dev), candidates_json(cands, n));
    json_t *reply = policy_request(p, "kv_cache", args, 0, err, errlen);
    if (!reply) return QC_ERR_INVALID;
    const char *name = json_string_value(json_object_get(reply, "result"));
    if (name) qc_strlcpy(out, name, out_len);
    json_decref(reply);
    return QC_OK;
}

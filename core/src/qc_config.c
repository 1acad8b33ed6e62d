/* qc_config.c - qcore.ini parsing (inih) and flag overrides. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qc_util.h"

typedef struct qc_config_entry {
    char *section, *key, *value;
} qc_config_entry;

struct qc_config {
    qc_config_entry *items;
    size_t n, cap;
    char err[256]; /* first problem seen by the handler */
};

qc_config *qc_config_empty(void) { return calloc(1, sizeof(qc_config)); }

void qc_config_free(qc_config *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        free(c->items[i].section);
        free(c->items[i].key);
        free(c->items[i].value);
    }
    free(c->items);
    free(c);
}

static qc_config_entry *config_find(const qc_config *c, const char *section, const char *key) {
    for (size_t i = 0; i < c->n; i++)
        if (strcmp(c->items[i].section, section) == 0 && strcmp(c->items[i].key, key) == 0)
            return &c->items[i];
    return NULL;
}

int qc_config_set(qc_config *c, const char *section, const char *key, const char *value) {
    if (!c || !section || !key || !value) return -1;
    qc_config_entry *e = config_find(c, section, key);
    char *v = strdup(value);
    if (!v) return -1;
    if (e) { /* later values override earlier ones, as flags override the file */
        free(e->value);
        e->value = v;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        qc_config_entry *it = realloc(c->items, cap * sizeof *it);
        if (!it) { free(v); return -1; }
        c->items = it;
        c->cap = cap;
    }
    e = &c->items[c->n];
    e->section = strdup(section);
    e->key = strdup(key);
    e->value = v;
    if (!e->section || !e->key) {
        free(e->section);
        free(e->key);
        free(v);
        return -1;
    }
    c->n++;
    return 0;
}

const char *qc_config_get(const qc_config *c, const char *section, const char *key) {
    if (!c) return NULL;
    const qc_config_entry *e = config_find(c, section, key);
    return e ? e->value : NULL;
}

static int ini_handler_cb(void *user, const char *section, const char *name, const char *value) {
    qc_config *c = user;
    if (qc_config_set(c, section, name, value) != 0) {
        qc_strlcpy(c->err, "out of memory", sizeof c->err);
        return 0;
    }
    return 1;
}

qc_config *qc_config_load(const char *path, int required, char *err, size_t errlen) {
    qc_config *c = qc_config_empty();
    if (!c) { qc_errf(err, errlen, "out of memory"); return NULL; }
    FILE *f = fopen(path, "r");
    if (!f) {
        if (!required && errno == ENOENT) return c;
        qc_errf(err, errlen, "%s: cannot open configuration: %s", path, strerror(errno));
        qc_config_free(c);
        return NULL;
    }
    int rc = ini_parse_file(f, ini_handler_cb, c);
    fclose(f);
    if (rc != 0) {
        if (c->err[0])
            qc_errf(err, errlen, "%s: %s", path, c->err);
        else
            qc_errf(err, errlen, "%s:%d: syntax error (expected [section] or key = value)", path, rc);
        qc_config_free(c);
        return NULL;
    }
    return c;
}

/* test_loader.c - every refusal rule of the plugin loader, and that the runtime goes on after each. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qc_test.h"
#include "qcore/qcore.h"

static qc_runtime *bare_runtime(void) {
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1, .skip_env = 1};
    char err[256];
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt != NULL, "%s", err);
    return rt;
}

static int copy_file(const char *from, const char *to, mode_t mode) {
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0) return -1;
    char buf[65536];
    ssize_t r;
    while ((r = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)r) != r) return -1;
    close(in);
    close(out);
    return chmod(to, mode);
}

/* Load `path` into a fresh runtime: expect refusal with `needle` in the
 * message, and the runtime still usable (a good plugin loads afterwards). */
static void expect_refused(const char *path, const char *needle) {
    qc_runtime *rt = bare_runtime();
    if (!rt) return;
    size_t before = qc_format_count(rt);
    char err[1024] = "";
    qc_status st = qc_runtime_load_plugin(rt, path, err, sizeof err);
    CHECK(st != QC_OK, "%s loaded but should be refused", path);
    CHECK_CONTAINS(err, needle);
    CHECK_CONTAINS(err, path); /* the message names the file */
    CHECK(qc_format_count(rt) == before, "a refused plugin left %zu formats behind", qc_format_count(rt) - before);
    CHECK(qc_plugin_refusal_count(rt) == 1, "refusal not recorded");
    CHECK_CONTAINS(qc_plugin_refusal(rt, 0), needle);
    st = qc_runtime_load_plugin(rt, QC_FAULT_DIR "/none/none.so", err, sizeof err);
    CHECK(st == QC_OK, "good plugin after a refusal: %s", err);
    CHECK(qc_format_find(rt, "test_good") != NULL, "good plugin's format missing");
    CHECK(qc_format_find(rt, "bf16") != NULL, "builtin format lost");
    qc_runtime_close(rt);
}

static void test_faults(void) {
    expect_refused(QC_FAULT_DIR "/no_entry/no_entry.so", "no entry symbol 'qcore_plugin_entry'");
    expect_refused(QC_FAULT_DIR "/abi/abi.so", "built for ABI 999, this qcore speaks ABI 1");
    expect_refused(QC_FAULT_DIR "/small_struct/small_struct.so", "entry struct_size 8 is smaller than");
    expect_refused(QC_FAULT_DIR "/init/init.so", "init failed (status 3): needs a licence file");
    expect_refused(QC_FAULT_DIR "/dup_format/dup_format.so",
                   "format 'bf16' is already registered by plugin org.qcore.builtin");
    expect_refused(QC_FAULT_DIR "/bad_kernel/bad_kernel.so", "names format 'no_such_format'");
    expect_refused(QC_FAULT_DIR "/work_param/work_param.so", "states a workspace but has no pointer parameter");
    expect_refused("/nonexistent/plugin.so", "cannot resolve path");
}

static void test_permissions(void) {
    char dir[] = "/tmp/qc_loader_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
    chmod(dir, 0755);
    char so[600];
    snprintf(so, sizeof so, "%s/good.so", dir);
    CHECK(copy_file(QC_FAULT_DIR "/none/none.so", so, 0644) == 0, "copy failed");

    qc_runtime *rt = bare_runtime();
    char err[1024];
    CHECK(qc_runtime_load_plugin(rt, so, err, sizeof err) == QC_OK, "mode 0644 in a 0755 folder: %s", err);
    qc_runtime_close(rt);

    chmod(so, 0666);
    expect_refused(so, "the file is writable by others (mode 0666)");
    chmod(so, 0664);
    expect_refused(so, "the file is writable by its group (mode 0664)");
    chmod(so, 0644);
    chmod(dir, 0777);
    expect_refused(so, "its folder is writable by others (mode 0777)");
    chmod(dir, 0775);
    expect_refused(so, "its folder is writable by its group");
    chmod(dir, 0755);
    if (geteuid() == 0) {
        CHECK(chown(so, 65534, 65534) == 0, "chown: %s", strerror(errno));
        expect_refused(so, "the file is owned by uid 65534, not by you");
        CHECK(chown(so, 0, 0) == 0, "chown back");
        CHECK(chown(dir, 65534, 65534) == 0, "chown dir");
        expect_refused(so, "its folder is owned by uid 65534");
        CHECK(chown(dir, 0, 0) == 0, "chown dir back");
    } else {
        printf("skip: ownership checks need root to chown a file to another user\n");
    }
    unlink(so);
    rmdir(dir);
}

static int has_format(qc_runtime *rt, const char *name) { return qc_format_find(rt, name) != NULL; }

static void test_search_path(void) {
    char err[512];
    /* $QCORE_PLUGIN_PATH, colon-separated, with a missing folder in it */
    setenv("QCORE_PLUGIN_PATH", "/nonexistent/qc:" QC_FAULT_DIR "/none", 1);
    qc_runtime_options o = {.struct_size = sizeof o, .skip_default_dirs = 1};
    qc_runtime *rt = qc_runtime_open(&o, err, sizeof err);
    CHECK(rt && has_format(rt, "test_good"), "QCORE_PLUGIN_PATH not searched");
    CHECK(rt && qc_plugin_refusal_count(rt) == 0, "a missing folder is not a refusal");
    qc_runtime_close(rt);
    unsetenv("QCORE_PLUGIN_PATH");

    /* qcore.ini [plugins] path */
    qc_config *cfg = qc_config_empty();
    qc_config_set(cfg, "plugins", "path", QC_FAULT_DIR "/none");
    qc_runtime_options o2 = {.struct_size = sizeof o2, .config = cfg, .skip_env = 1};
    rt = qc_runtime_open(&o2, err, sizeof err);
    CHECK(rt && has_format(rt, "test_good"), "[plugins] path not searched");
    /* the default folder (next to the binary, or the build's) brings the five formats */
    qc_runtime_close(rt);
    qc_config_free(cfg);

    qc_runtime_options o3 = {.struct_size = sizeof o3, .plugin_path = QC_TEST_PLUGIN_DIR, .skip_env = 1,
                             .skip_default_dirs = 1};
    rt = qc_runtime_open(&o3, err, sizeof err);
    const char *five[] = {"w4a16", "w8a8_int8", "fp8", "mxfp4", "kv_fp8"};
    for (int i = 0; i < 5; i++) CHECK(rt && has_format(rt, five[i]), "plugin format %s missing", five[i]);
    CHECK(rt && qc_plugin_count(rt) == 6, "expected builtin + 5 plugins, got %zu", rt ? qc_plugin_count(rt) : 0);
    /* the same file reached twice is loaded once, silently */
    CHECK(rt && qc_runtime_load_plugin(rt, QC_TEST_PLUGIN_DIR "/fp8.so", err, sizeof err) == QC_OK, "%s", err);
    CHECK(rt && qc_plugin_count(rt) == 6, "same file loaded twice");
    qc_runtime_close(rt);

    /* a folder holding a bad plugin among good ones: the good ones load */
    qc_runtime_options o4 = {.struct_size = sizeof o4, .skip_env = 1, .skip_default_dirs = 1,
                             .plugin_path = QC_FAULT_DIR "/abi:" QC_FAULT_DIR "/none"};
    rt = qc_runtime_open(&o4, err, sizeof err);
    CHECK(rt && has_format(rt, "test_good") && qc_plugin_refusal_count(rt) == 1, "mixed folder");
    qc_runtime_close(rt);
}

int main(void) {
    test_faults();
    test_permissions();
    test_search_path();
    return qc_test_finish("test_loader");
}

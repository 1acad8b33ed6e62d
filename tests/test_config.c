/* test_config.c - qcore.ini parsing, errors that name the file and line, and overrides. */
#include <unistd.h>

#include "qc_test.h"
#include "qcore/qcore.h"

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

int main(void) {
    char err[512];
    const char *path = "/tmp/qc_test_config.ini";
    write_file(path, "; comment\n[policy]\nfile = a.lua\n\n[plugins]\npath = /x:/y ; trailing\n");
    qc_config *c = qc_config_load(path, 1, err, sizeof err);
    CHECK(c != NULL, "%s", err);
    CHECK(c && strcmp(qc_config_get(c, "policy", "file"), "a.lua") == 0, "policy.file");
    CHECK(c && strcmp(qc_config_get(c, "plugins", "path"), "/x:/y") == 0, "inline comment");
    CHECK(c && qc_config_get(c, "policy", "nope") == NULL, "absent key");
    CHECK(c && qc_config_set(c, "policy", "file", "b.lua") == 0 &&
              strcmp(qc_config_get(c, "policy", "file"), "b.lua") == 0, "override");
    qc_config_free(c);

    write_file(path, "[policy]\nfile = a.lua\nthis line is not ini\n");
    c = qc_config_load(path, 1, err, sizeof err);
    CHECK(c == NULL, "bad line accepted");
    CHECK_CONTAINS(err, "qc_test_config.ini:3: syntax error");

    unlink(path);
    c = qc_config_load(path, 0, err, sizeof err);
    CHECK(c != NULL, "optional missing file");
    qc_config_free(c);
    c = qc_config_load(path, 1, err, sizeof err);
    CHECK(c == NULL, "required missing file");
    CHECK_CONTAINS(err, "cannot open configuration");
    /* HF config.json: transformers >= 5 writes rope_theta inside "rope_parameters" */
    const char *cj = "/tmp/qc_test_config.json";
    const char *base = "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 128, "
                       "\"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"vocab_size\": 32, ";
    char text[512];
    qc_model_shape ms;
    snprintf(text, sizeof text, "%s\"rope_parameters\": {\"rope_theta\": 100000.0, \"rope_type\": \"default\"}}", base);
    write_file(cj, text);
    CHECK(qc_model_shape_load(cj, &ms, err, sizeof err) == QC_OK && ms.rope_theta == 100000.0,
          "rope_parameters.rope_theta: %g (%s)", ms.rope_theta, err);
    snprintf(text, sizeof text, "%s\"rope_theta\": 500000.0}", base);
    write_file(cj, text);
    CHECK(qc_model_shape_load(cj, &ms, err, sizeof err) == QC_OK && ms.rope_theta == 500000.0,
          "top-level rope_theta: %g (%s)", ms.rope_theta, err);
    snprintf(text, sizeof text, "%s\"rope_theta\": 0}", base);
    write_file(cj, text);
    CHECK(qc_model_shape_load(cj, &ms, err, sizeof err) != QC_OK, "rope_theta 0 accepted");
    CHECK_CONTAINS(err, "rope_theta");
    unlink(cj);

    return qc_test_finish("test_config");
}

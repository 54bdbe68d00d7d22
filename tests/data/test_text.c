/* The text corpus reader: real text passes; empty, binary and too-short inputs are refused
 * with a message naming the file and the reason; missing files and directories too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "tcheck.h"

#define TCHECK(cond, ...) CHECK(cond, __VA_ARGS__)

static void write_file(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f) fwrite(data, 1, len, f), fclose(f);
}

int main(void) {
    tc_begin("text corpora");
    cn_text t;
    const char *good = "In the beginning God created the heaven and the earth.\n\tAnd the earth was without form.\r\n";
    TCHECK(cn_text_parse((const uint8_t *)good, strlen(good), "good", 17, &t) == CN_OK, "plain text is accepted");
    TCHECK(t.len == strlen(good) && memcmp(t.bytes, good, t.len) == 0, "the bytes are the file's");
    cn_text_free(&t);
    const char *utf8 = "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 ok\n";
    TCHECK(cn_text_parse((const uint8_t *)utf8, strlen(utf8), "utf8", 4, &t) == CN_OK, "UTF-8 text is accepted");
    cn_text_free(&t);

    struct { const char *name; const char *data; size_t len; size_t min_len; const char *want; } bad[] = {
        {"empty", "", 0, 1, "empty"},
        {"nul", "abc\0def", 7, 1, "NUL"},
        {"png", "\x89PNG\r\n\x1a\n\x01\x02\x03\x04\x05\x06\x07\x08", 16, 1, "control"},
        {"short", "hello", 5, 65, "fewer than one training window"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cn_status st = cn_text_parse((const uint8_t *)bad[i].data, bad[i].len, bad[i].name, bad[i].min_len, &t);
        TCHECK(st == CN_ERR_FORMAT && strstr(cn_last_error(), bad[i].name) && strstr(cn_last_error(), bad[i].want),
               "%s is refused naming it and '%s' (got: %s)", bad[i].name, bad[i].want, cn_last_error());
        TCHECK(t.bytes == NULL && t.len == 0, "%s leaves no output", bad[i].name);
    }
    /* many control characters among text: binary */
    char mixed[1000];
    for (int i = 0; i < 1000; i++) mixed[i] = i % 50 == 0 ? '\x01' : 'a';
    TCHECK(cn_text_parse((const uint8_t *)mixed, sizeof mixed, "mixed", 1, &t) == CN_ERR_FORMAT, "2%% control bytes is binary");
    mixed[0] = 'a';
    for (int i = 0; i < 1000; i++) mixed[i] = i % 200 == 0 ? '\x1b' : 'a';
    TCHECK(cn_text_parse((const uint8_t *)mixed, sizeof mixed, "ansi", 1, &t) == CN_OK, "0.5%% control bytes is text");
    cn_text_free(&t);

    TCHECK(cn_text_read("/nonexistent/corpus.txt", 1, &t) == CN_ERR_NOT_FOUND &&
               strstr(cn_last_error(), "/nonexistent/corpus.txt"), "a missing file is named");
    TCHECK(cn_text_read("/", 1, &t) != CN_OK && strstr(cn_last_error(), "directory"), "a directory is refused");
    char path[] = "/tmp/clnet-text-XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        close(fd);
        write_file(path, good, strlen(good));
        TCHECK(cn_text_read(path, 2, &t) == CN_OK && t.len == strlen(good), "a text file reads");
        cn_text_free(&t);
        write_file(path, "", 0);
        TCHECK(cn_text_read(path, 2, &t) == CN_ERR_FORMAT && strstr(cn_last_error(), path), "an empty file names itself");
        remove(path);
    }
    tc_end();
    return tc_finish();
}

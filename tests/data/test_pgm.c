/* PGM reader: good P5 (8- and 16-bit) and P2 images, then a table of bad headers and
 * payloads, each tried from memory and from a file. */
#include "tcheck.h"

#include "data/data.h"

static void test_good(void) {
    cn_image img;

    tc_begin("P5 8-bit with comments");
    const uint8_t p5[] = "P5\n# made by a test\n3 # width\n2\n# maxval next\n255\n\x00\x01\x7f\x80\xfe\xff";
    CHECK_OK(cn_pgm_parse(p5, sizeof p5 - 1, "p5", &img));
    CHECK(img.w == 3 && img.h == 2 && img.pixels);
    if (img.pixels) {
        const float want[6] = {0.0f, 1.0f / 255.0f, 127.0f / 255.0f, 128.0f / 255.0f, 254.0f / 255.0f, 1.0f};
        for (int i = 0; i < 6; i++) CHECK(img.pixels[i] == want[i], "pixel %d = %g", i, img.pixels[i]);
    }
    cn_image_free(&img);
    CHECK(img.pixels == NULL);
    tc_end();

    tc_begin("P5 16-bit big-endian");
    const uint8_t p16[] = "P5 2 1 1000\n\x03\xe8\x01\xf4"; /* 1000, 500 */
    CHECK_OK(cn_pgm_parse(p16, sizeof p16 - 1, "p16", &img));
    CHECK(img.w == 2 && img.h == 1);
    if (img.pixels) CHECK(img.pixels[0] == 1.0f && img.pixels[1] == 0.5f, "%g %g", img.pixels[0], img.pixels[1]);
    cn_image_free(&img);
    tc_end();

    tc_begin("P5 whose first pixel looks like whitespace");
    const uint8_t pw[] = "P5 2 1 255\n\n#"; /* pixels are 0x0a and 0x23 */
    CHECK_OK(cn_pgm_parse(pw, sizeof pw - 1, "pw", &img));
    if (img.pixels) CHECK(img.pixels[0] == 10.0f / 255.0f && img.pixels[1] == 35.0f / 255.0f);
    cn_image_free(&img);
    tc_end();

    tc_begin("P2 with comments, from a file");
    const char p2[] = "P2\n# ascii\n2 2\n15\n0 15 # end of row\n\t5\r\n10\n";
    const char *path = tc_path("good.pgm");
    CHECK(tc_write(path, p2, strlen(p2)) == 0);
    CHECK_OK(cn_pgm_read(path, &img));
    CHECK(img.w == 2 && img.h == 2);
    if (img.pixels)
        CHECK(img.pixels[0] == 0.0f && img.pixels[1] == 1.0f && img.pixels[2] == 5.0f / 15.0f &&
              img.pixels[3] == 10.0f / 15.0f);
    cn_image_free(&img);
    tc_end();

    tc_begin("P5 from a file, 28x28");
    uint8_t big[64 + 784];
    int hl = snprintf((char *)big, 64, "P5\n28 28\n255\n");
    for (int i = 0; i < 784; i++) big[hl + i] = (uint8_t)i;
    path = tc_path("digit.pgm");
    CHECK(tc_write(path, big, (size_t)hl + 784) == 0);
    CHECK_OK(cn_pgm_read(path, &img));
    CHECK(img.w == 28 && img.h == 28 && img.pixels && img.pixels[783] == (float)(783 % 256) / 255.0f);
    cn_image_free(&img);
    tc_end();
}

typedef struct bad_case {
    const char *name;
    const char *data;
    int len; /* -1: strlen */
    cn_status want;
    const char *needle;
} bad_case;

static const bad_case bad[] = {
    {"empty", "", -1, CN_ERR_FORMAT, "not a PGM file"},
    {"one byte", "P", -1, CN_ERR_FORMAT, "not a PGM file"},
    {"wrong magic", "GIF89a", -1, CN_ERR_FORMAT, "not a PGM file"},
    {"P6 colour", "P6 1 1 255\n\1\2\3", -1, CN_ERR_UNSUPPORTED, "P6 is not supported"},
    {"P4 bitmap", "P4 8 1\n\1", -1, CN_ERR_UNSUPPORTED, "P4"},
    {"P5 without separator", "P5x 1 1 255\n\1", -1, CN_ERR_FORMAT, "whitespace"},
    {"magic only", "P5", -1, CN_ERR_FORMAT, "width is missing"},
    {"missing height", "P5 3", -1, CN_ERR_FORMAT, "height is missing"},
    {"missing maxval", "P5 3 3 # c", -1, CN_ERR_FORMAT, "maxval is missing"},
    {"comment never ends", "P5 3 3\n# no newline", -1, CN_ERR_FORMAT, "maxval is missing"},
    {"negative width", "P5 -3 3 255\n", -1, CN_ERR_FORMAT, "expected a decimal number"},
    {"width 0", "P5 0 3 255\n", -1, CN_ERR_FORMAT, "width is 0"},
    {"width too large", "P5 16385 1 255\n", -1, CN_ERR_FORMAT, "width exceeds the limit 16384"},
    {"height absurd", "P5 1 99999999999999999999999999 255\n", -1, CN_ERR_FORMAT, "height exceeds"},
    {"maxval 0", "P5 1 1 0\n\0", 9, CN_ERR_FORMAT, "maxval is 0"},
    {"maxval 65536", "P5 1 1 65536\n\0", -1, CN_ERR_FORMAT, "maxval exceeds the limit 65535"},
    {"P5 no data at all", "P5 2 2 255", -1, CN_ERR_FORMAT, "ends without pixel data"},
    {"P5 junk after maxval", "P5 1 1 255x\1", -1, CN_ERR_FORMAT, "one whitespace byte"},
    {"P5 truncated", "P5 2 2 255\n\1\2\3", -1, CN_ERR_FORMAT, "needs 4 bytes of pixel data, found 3"},
    {"P5 16384x16384 with 3 bytes", "P5 16384 16384 255\n\1\2\3", -1, CN_ERR_FORMAT, "needs 268435456 bytes"},
    {"P5 trailing bytes", "P5 2 1 255\n\1\2\3\4", -1, CN_ERR_FORMAT, "2 trailing bytes"},
    {"P5 pixel above maxval", "P5 2 1 100\n\1\xc8", -1, CN_ERR_FORMAT, "pixel 1 is 200, above maxval 100"},
    {"P5 16-bit odd length", "P5 2 1 65535\n\1\2\3", -1, CN_ERR_FORMAT, "needs 4 bytes of pixel data, found 3"},
    {"P5 16-bit above maxval", "P5 1 1 1000\n\xff\xff", -1, CN_ERR_FORMAT, "above maxval 1000"},
    {"P2 too few values", "P2 2 2 9\n1 2 3       ", -1, CN_ERR_FORMAT, "expected 4 pixel values, found 3"},
    {"P2 far too few bytes", "P2 100 100 9\n1 2 3", -1, CN_ERR_FORMAT, "needs 10000 pixel values"},
    {"P2 value above maxval", "P2 2 1 9\n1 10\n", -1, CN_ERR_FORMAT, "pixel 1 is 10, above maxval 9"},
    {"P2 huge value", "P2 2 1 9\n1 123456789012345678901234567890\n", -1, CN_ERR_FORMAT, "pixel 1 exceeds"},
    {"P2 garbage value", "P2 2 1 9\n1 x\n", -1, CN_ERR_FORMAT, "pixel 1: expected a decimal number"},
    {"P2 trailing data", "P2 2 1 9\n1 2 3\n", -1, CN_ERR_FORMAT, "trailing bytes after the 2 pixel values"},
};

static void test_bad_table(void) {
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const bad_case *c = &bad[i];
        tc_begin(c->name);
        size_t len = c->len >= 0 ? (size_t)c->len : strlen(c->data);
        cn_image img;
        memset(&img, 0x5a, sizeof img);
        CHECK_ERR(cn_pgm_parse((const uint8_t *)c->data, len, "mem-origin", &img), c->want, c->needle);
        CHECK(img.pixels == NULL && img.w == 0 && img.h == 0, "output not cleared on failure");
        CHECK(strstr(cn_last_error(), "mem-origin") != NULL, "message names the origin: %s", cn_last_error());
        const char *path = tc_path("bad.pgm");
        CHECK(tc_write(path, c->data, len) == 0);
        CHECK_ERR(cn_pgm_read(path, &img), c->want, c->needle);
        CHECK(strstr(cn_last_error(), path) != NULL, "message names the path: %s", cn_last_error());
        tc_end();
    }
}

static void test_truncations(void) {
    /* Every prefix of valid images must fail cleanly (the full length must pass). */
    const char *goods[] = {"P5\n# c\n3 2\n255\n\1\2\3\4\5\6", "P2\n3 2 # c\n7\n1 2 3\n4 5 6\n",
                           "P5 2 2 300\n\0\1\0\2\1\0\1\1"};
    const int lens[] = {21, -1, 19};
    tc_begin("every truncation of good images");
    for (int k = 0; k < 3; k++) {
        size_t len = lens[k] >= 0 ? (size_t)lens[k] : strlen(goods[k]);
        cn_image img;
        CHECK_OK(cn_pgm_parse((const uint8_t *)goods[k], len, "full", &img));
        cn_image_free(&img);
        for (size_t cut = 0; cut < len; cut++) {
            /* P2 may lose only its final newline and stay valid. */
            if (goods[k][1] == '2' && cut == len - 1) continue;
            cn_status s = cn_pgm_parse((const uint8_t *)goods[k], cut, "cut", &img);
            CHECK(s == CN_ERR_FORMAT, "image %d cut at %zu -> %s", k, cut, cn_status_name(s));
            CHECK(img.pixels == NULL);
        }
    }
    tc_end();
}

static void test_files(void) {
    tc_begin("missing file, directory, NULL arguments");
    cn_image img;
    const char *p = tc_path("nope.pgm");
    CHECK_ERR(cn_pgm_read(p, &img), CN_ERR_NOT_FOUND, p);
    CHECK_ERR(cn_pgm_read(tc_tmpdir(), &img), CN_ERR_IO, "directory");
    CHECK_ERR(cn_pgm_read(NULL, &img), CN_ERR_INVALID_ARG, NULL);
    CHECK_ERR(cn_pgm_parse(NULL, 3, "x", &img), CN_ERR_INVALID_ARG, NULL);
    tc_end();
}

int main(void) {
    test_good();
    test_bad_table();
    test_truncations();
    test_files();
    return tc_finish();
}
